//! The `memory` built-in tool: ZeroClaw's memory operations as one tool with an `action` —
//! `store`, `recall`, `forget`, `get`, `list`, `count` — over the memory files and their index.
//! Writes go to the files first; the index is synced before the tool answers, so what was
//! stored is found by the next search and what was forgotten is not.

use oxibot_proto::ToolSpec;
use serde_json::{Value, json};

use super::Recall;
use super::edit::{self, Forget};
use super::index::Hit;
use super::sources::Category;
use crate::turn::builtin::{BuiltinContext, BuiltinTool, ToolFuture, ToolReply};

/// The tool's name.
pub const NAME: &str = "memory";
/// Hits a `recall` returns unless told otherwise.
const DEFAULT_LIMIT: usize = 5;
/// Most hits or items one call returns.
const MAX_LIMIT: usize = 50;
/// Shortest text `forget` accepts (so a stray letter cannot wipe memory).
const MIN_FORGET_CHARS: usize = 3;

/// The `memory` tool.
#[derive(Clone)]
pub struct MemoryTool {
    recall: Recall,
    /// Actions offered (all, or only `store` in the pre-consolidation flush).
    actions: &'static [&'static str],
}

/// Every action.
pub const ALL_ACTIONS: &[&str] = &["store", "recall", "forget", "get", "list", "count"];

impl MemoryTool {
    /// The tool over `recall`'s files and index, with every action.
    pub fn new(recall: Recall) -> MemoryTool {
        MemoryTool { recall, actions: ALL_ACTIONS }
    }

    /// The same tool offering only `actions`.
    pub fn limited_to(recall: Recall, actions: &'static [&'static str]) -> MemoryTool {
        MemoryTool { recall, actions }
    }

    async fn run(&self, arguments: Value) -> ToolReply {
        let action = text(&arguments, "action").to_lowercase();
        if !self.actions.contains(&action.as_str()) {
            return ToolReply::error(format!("`action` must be one of {}", self.actions.join(", ")));
        }
        let category = match arguments.get("category").and_then(Value::as_str).filter(|c| !c.trim().is_empty()) {
            Some(name) => match Category::parse(name) {
                Some(category) => Some(category),
                None => return ToolReply::error(format!("unknown category '{name}' (core, daily or conversation)")),
            },
            None => None,
        };
        let limit =
            arguments.get("limit").and_then(Value::as_u64).map_or(DEFAULT_LIMIT, |n| n as usize).clamp(1, MAX_LIMIT);
        match action.as_str() {
            "store" => self.store(text(&arguments, "content"), category.unwrap_or(Category::Core)).await,
            "recall" => self.find(text(&arguments, "query"), limit, category).await,
            "forget" => self.forget(text(&arguments, "query"), text(&arguments, "id")).await,
            "get" => self.get(text(&arguments, "id")).await,
            "list" => self.list(category, limit).await,
            _ => self.count().await,
        }
    }

    async fn store(&self, content: &str, category: Category) -> ToolReply {
        if content.trim().is_empty() {
            return ToolReply::error("`store` needs `content`: the fact or note to remember");
        }
        let recall = self.recall.clone();
        let content = content.to_owned();
        let written = tokio::task::spawn_blocking(move || {
            edit::store(recall.workspace(), recall.history(), category, &content, recall.timezone())
        })
        .await;
        let path = match written {
            Ok(Ok(path)) => path,
            Ok(Err(error)) => return ToolReply::error(error),
            Err(error) => return ToolReply::error(format!("the write did not finish: {error}")),
        };
        if let Err(error) = self.recall.sync().await {
            return ToolReply::ok(format!(
                "Stored in {path} ({} memory); not yet searchable: {error}",
                category.as_str()
            ));
        }
        ToolReply::ok(format!("Stored in {path} ({} memory).", category.as_str()))
    }

    async fn find(&self, query: &str, limit: usize, category: Option<Category>) -> ToolReply {
        if query.trim().is_empty() {
            return ToolReply::error("`recall` needs `query`: words to search memory for");
        }
        if let Err(error) = self.recall.sync().await {
            tracing::warn!(%error, "searching a memory index that could not be updated");
        }
        match self.recall.search(query, limit, category).await {
            Ok(hits) if hits.is_empty() => ToolReply::ok(format!("Nothing in memory matches \"{query}\".")),
            Ok(hits) => ToolReply::ok(hits.iter().map(render).collect::<Vec<_>>().join("\n\n")),
            Err(error) => ToolReply::error(error),
        }
    }

    async fn forget(&self, query: &str, id: &str) -> ToolReply {
        let hit = if id.trim().is_empty() {
            None
        } else {
            match self.lookup(id).await {
                Ok(Some(hit)) => Some(hit),
                Ok(None) => return ToolReply::error(format!("no memory has id '{id}' (ids come from recall or list)")),
                Err(reply) => return reply,
            }
        };
        if hit.is_none() && query.trim().chars().count() < MIN_FORGET_CHARS {
            return ToolReply::error(format!(
                "`forget` needs `id`, or `query` of at least {MIN_FORGET_CHARS} characters: the text to remove"
            ));
        }
        let recall = self.recall.clone();
        let query = query.trim().to_owned();
        let removed = tokio::task::spawn_blocking(move || {
            let what = match &hit {
                Some(hit) => Forget::Chunk(hit),
                None => Forget::Matching(&query),
            };
            edit::forget(recall.workspace(), recall.history(), &what)
        })
        .await;
        let removed = match removed {
            Ok(Ok(removed)) => removed,
            Ok(Err(error)) => return ToolReply::error(error),
            Err(error) => return ToolReply::error(format!("the removal did not finish: {error}")),
        };
        if removed.is_empty() {
            return ToolReply::ok("Nothing in the memory files matched; nothing was removed.");
        }
        if let Err(error) = self.recall.sync().await {
            tracing::warn!(%error, "the memory index could not be updated after a forget");
        }
        let lines: Vec<String> =
            removed.iter().map(|r| format!("- {}: {}", r.path, r.text.replace('\n', " / "))).collect();
        ToolReply::ok(format!("Removed {} piece(s) of memory:\n{}", removed.len(), lines.join("\n")))
    }

    async fn get(&self, id: &str) -> ToolReply {
        if id.trim().is_empty() {
            return ToolReply::error("`get` needs `id` (ids come from recall or list)");
        }
        match self.lookup(id).await {
            Ok(Some(hit)) => ToolReply::ok(render(&hit)),
            Ok(None) => ToolReply::error(format!("no memory has id '{id}'")),
            Err(reply) => reply,
        }
    }

    async fn list(&self, category: Option<Category>, limit: usize) -> ToolReply {
        let _ = self.recall.sync().await;
        match self.recall.read(move |index| index.list(category, limit)).await {
            Ok(hits) if hits.is_empty() => ToolReply::ok("Memory is empty."),
            Ok(hits) => ToolReply::ok(hits.iter().map(render_short).collect::<Vec<_>>().join("\n")),
            Err(error) => ToolReply::error(error),
        }
    }

    async fn count(&self) -> ToolReply {
        let _ = self.recall.sync().await;
        match self.recall.read(|index| index.count()).await {
            Ok(counts) => {
                let total: usize = counts.iter().map(|(_, n)| n).sum();
                let parts: Vec<String> = counts.iter().map(|(c, n)| format!("{} {n}", c.as_str())).collect();
                ToolReply::ok(format!("{total} memories: {}", parts.join(", ")))
            }
            Err(error) => ToolReply::error(error),
        }
    }

    async fn lookup(&self, id: &str) -> Result<Option<Hit>, ToolReply> {
        let _ = self.recall.sync().await;
        let id = id.trim().to_owned();
        self.recall.read(move |index| index.get(&id)).await.map_err(ToolReply::error)
    }
}

fn text<'a>(arguments: &'a Value, key: &str) -> &'a str {
    arguments.get(key).and_then(Value::as_str).unwrap_or("")
}

/// A hit as the model reads it: id, where, when, score, then the text.
fn render(hit: &Hit) -> String {
    let mut head = format!("[{}] {} ({})", hit.id, hit.location(), hit.category.as_str());
    if let Some(day) = hit.day() {
        head.push_str(&format!(", {day}"));
    }
    if hit.score > 0.0 {
        head.push_str(&format!(", score {:.2}", hit.score));
    }
    format!("{head}\n{}", hit.text)
}

fn render_short(hit: &Hit) -> String {
    let first = hit.text.lines().next().unwrap_or_default();
    let first: String = first.chars().take(160).collect();
    format!("[{}] {} — {first}", hit.id, hit.location())
}

impl BuiltinTool for MemoryTool {
    fn spec(&self) -> ToolSpec {
        let all = self.actions.len() == ALL_ACTIONS.len();
        let description = if all {
            "Indexed memory files. recall query; store content (category core: lasting fact, daily: today's \
             note); forget id, or every item containing query; get id; list; count."
        } else {
            "Save what matters into long-term memory: store content (category core: lasting facts, preferences, \
             decisions; daily: notes of today)."
        };
        ToolSpec {
            name: NAME.to_owned(),
            description: description.to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": self.actions},
                    "content": {"type": "string"},
                    "query": {"type": "string"},
                    "id": {"type": "string"},
                    "category": {"type": "string", "enum": ["core", "daily", "conversation"]},
                    "limit": {"type": "integer"}
                },
                "required": ["action"]
            }),
            read_only: false,
            exclusive: false,
            timeout_secs: None,
        }
    }

    fn call<'a>(&'a self, arguments: Value, _context: &'a BuiltinContext) -> ToolFuture<'a> {
        Box::pin(self.run(arguments))
    }
}
