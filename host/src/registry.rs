//! The tool registry: which plugin serves which tool name. A tool is refused when its name is
//! invalid or reserved, or when it is too big ([`super::claims`]); a clash between plugins goes
//! to the one with a bundled plugin's standing (bundled, or replacing the name), then to the
//! one of higher precedence.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use actix::Recipient;
use oxibot_proto::ToolSpec;
use tokio::sync::watch;

use super::claims::{Claimant, ReservedNames, bundled_refusal, check_size};
use super::slot::{Evict, SlotState};

/// Where a tool call goes.
#[derive(Clone)]
pub struct Route {
    /// The plugin's name.
    pub plugin: String,
    /// The tool as declared in the manifest.
    pub spec: Arc<ToolSpec>,
    /// The plugin's state, to wait for it to be ready.
    pub slot: watch::Receiver<SlotState>,
}

struct Owner {
    route: Route,
    /// Discovery precedence of the owning plugin (lower wins a clash between equals).
    index: usize,
    /// Whether the owner holds the name with a bundled plugin's standing (it is bundled, or
    /// its entry replaces the name): such an owner loses it only to another like it.
    protected: bool,
    /// Whether the owner is a bundled plugin (for the reason a plugin without `replaces`
    /// gets when it loses to it).
    bundled: bool,
    /// The owner's actor, to disable it when a plugin of higher precedence takes its last tool.
    evict: Recipient<Evict>,
    /// The owner's published state, marked failed at once when it loses a clash.
    state: Arc<watch::Sender<SlotState>>,
}

/// Tool name → owning plugin.
#[derive(Default)]
pub struct ToolRegistry {
    tools: RwLock<HashMap<String, Owner>>,
    /// Every spec as one JSON array, built on demand and dropped whenever `tools` changes
    /// (the agent measures it each turn).
    json: RwLock<Option<Arc<str>>>,
    /// Per plugin, the tools it offered that are not registered, and why.
    refused: RwLock<HashMap<String, Vec<String>>>,
    /// Names that belong to the kernel's built-ins or to bundled plugins.
    reserved: ReservedNames,
}

/// The longest tool name providers accept.
const MAX_TOOL_NAME: usize = 64;

/// Whether providers accept `name` as a tool name (`^[a-zA-Z0-9_-]{1,64}$`).
pub fn is_valid_tool_name(name: &str) -> bool {
    (1..=MAX_TOOL_NAME).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl ToolRegistry {
    /// An empty registry that keeps `reserved` names from plugins that may not have them.
    pub fn new(reserved: ReservedNames) -> ToolRegistry {
        ToolRegistry { reserved, ..ToolRegistry::default() }
    }

    /// Registers `tools` for the claimant, replacing what it registered before, one tool at
    /// a time: a tool with an invalid or reserved name, or one whose description or schema
    /// is over its cap, is refused with a reason, and so is a name a plugin of better
    /// standing already owns (bundled or replacing the name beats the rest; then lower
    /// `index`); the plugin's other tools stay. A name a plugin of lesser standing owns moves
    /// to the claimant, and that plugin keeps its other tools (it is disabled only when it
    /// has none left).
    ///
    /// Returns the refusals, or `Err` with them when every tool the plugin offered was
    /// refused.
    pub fn claim(
        &self,
        claimant: &Claimant<'_>,
        tools: &[ToolSpec],
        slot: &Arc<watch::Sender<SlotState>>,
        evict: &Recipient<Evict>,
    ) -> Result<Vec<String>, String> {
        let (plugin, index) = (claimant.plugin, claimant.index);
        let mut map = self.tools.write().unwrap_or_else(PoisonError::into_inner);
        let mut refused_map = self.refused.write().unwrap_or_else(PoisonError::into_inner);
        *self.json.write().unwrap_or_else(PoisonError::into_inner) = None;
        map.retain(|_, owner| owner.route.plugin != plugin);
        let mut refused = Vec::new();
        let mut taken_from: Vec<(String, Recipient<Evict>, Arc<watch::Sender<SlotState>>)> = Vec::new();
        for tool in tools {
            if !is_valid_tool_name(&tool.name) {
                refused.push(format!(
                    "tool name {:?} is not valid (1 to {MAX_TOOL_NAME} letters, digits, '_' or '-'); the plugin's other tools are available",
                    tool.name
                ));
                continue;
            }
            if let Some(reason) = check_size(tool).or_else(|| self.reserved.refusal(claimant, &tool.name)) {
                refused.push(reason);
                continue;
            }
            let protected = claimant.protected(&tool.name);
            if let Some(owner) = map.get(&tool.name) {
                if (!owner.protected, owner.index) < (!protected, index) {
                    refused.push(kept_reason(&tool.name, owner, protected));
                    continue;
                }
                let loser = owner.route.plugin.clone();
                let reason = taken_reason(&tool.name, owner, claimant);
                let loser_refused = refused_map.entry(loser.clone()).or_default();
                if !loser_refused.contains(&reason) {
                    loser_refused.push(reason);
                }
                taken_from.push((loser, owner.evict.clone(), owner.state.clone()));
            }
            let route = Route { plugin: plugin.to_owned(), spec: Arc::new(tool.clone()), slot: slot.subscribe() };
            let owner =
                Owner { route, index, protected, bundled: claimant.bundled, evict: evict.clone(), state: slot.clone() };
            map.insert(tool.name.clone(), owner);
        }
        for (loser, evict, state) in taken_from {
            if map.values().any(|owner| owner.route.plugin == loser) {
                continue;
            }
            // Nothing of it is left: publish the verdict now; the actor kills the process
            // when it handles Evict.
            let reason = refused_map.get(&loser).map(|r| r.join("; ")).unwrap_or_default();
            state.send_replace(SlotState::Failed { reason: reason.clone() });
            evict.do_send(Evict { reason });
        }
        refused_map.insert(plugin.to_owned(), refused.clone());
        if !tools.is_empty() && refused.len() == tools.len() {
            map.retain(|_, owner| owner.route.plugin != plugin);
            return Err(refused.join("; "));
        }
        Ok(refused)
    }

    /// Forgets every tool of `plugin` and its refusals (the plugin was removed for good).
    pub fn release(&self, plugin: &str) {
        self.tools.write().unwrap_or_else(PoisonError::into_inner).retain(|_, owner| owner.route.plugin != plugin);
        self.refused.write().unwrap_or_else(PoisonError::into_inner).remove(plugin);
        *self.json.write().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// Tools `plugin` offered that are not registered, and why.
    pub fn refused(&self, plugin: &str) -> Vec<String> {
        self.refused.read().unwrap_or_else(PoisonError::into_inner).get(plugin).cloned().unwrap_or_default()
    }

    /// Names of the tools registered for `plugin`, sorted.
    pub fn tools_of(&self, plugin: &str) -> Vec<String> {
        let map = self.tools.read().unwrap_or_else(PoisonError::into_inner);
        let mut names: Vec<String> =
            map.iter().filter(|(_, owner)| owner.route.plugin == plugin).map(|(name, _)| name.clone()).collect();
        names.sort();
        names
    }

    /// The route for a tool name.
    pub fn route(&self, tool: &str) -> Option<Route> {
        self.tools.read().unwrap_or_else(PoisonError::into_inner).get(tool).map(|owner| owner.route.clone())
    }

    /// Every registered tool in the order offered to the model (see [`offer_order`]).
    pub fn specs(&self) -> Vec<ToolSpec> {
        let map = self.tools.read().unwrap_or_else(PoisonError::into_inner);
        let mut specs: Vec<ToolSpec> = map.values().map(|owner| ToolSpec::clone(&owner.route.spec)).collect();
        specs.sort_by(|a, b| offer_order(&a.name, &b.name));
        specs
    }

    /// [`ToolRegistry::specs`] as JSON text, cached until the registry changes.
    pub fn specs_json(&self) -> Arc<str> {
        if let Some(json) = self.json.read().unwrap_or_else(PoisonError::into_inner).as_ref() {
            return json.clone();
        }
        // Built under the read lock, so a `claim` (which needs the write lock) cannot slip
        // between reading the specs and caching their JSON.
        let map = self.tools.read().unwrap_or_else(PoisonError::into_inner);
        let mut specs: Vec<&ToolSpec> = map.values().map(|owner| &*owner.route.spec).collect();
        specs.sort_by(|a, b| offer_order(&a.name, &b.name));
        let json: Arc<str> = serde_json::to_string(&specs).unwrap_or_default().into();
        *self.json.write().unwrap_or_else(PoisonError::into_inner) = Some(json.clone());
        json
    }

    /// Registered names closest to `tool`, for "did you mean" hints.
    pub fn suggest(&self, tool: &str) -> Option<String> {
        let map = self.tools.read().unwrap_or_else(PoisonError::into_inner);
        map.keys()
            .map(|name| (edit_distance(name, tool), name))
            .filter(|(d, _)| *d <= 3)
            .min()
            .map(|(_, name)| name.clone())
    }
}

/// Why a claimant (holding the name with a bundled plugin's standing or not) does not get
/// `tool`, which `owner` keeps.
fn kept_reason(tool: &str, owner: &Owner, protected: bool) -> String {
    if owner.bundled && !protected {
        return bundled_refusal(tool, &owner.route.plugin);
    }
    format!("tool '{tool}' is already provided by plugin '{}'; rename or remove one of them", owner.route.plugin)
}

/// Why `owner` loses `tool` to `claimant`.
fn taken_reason(tool: &str, owner: &Owner, claimant: &Claimant<'_>) -> String {
    if claimant.bundled && !owner.protected {
        return bundled_refusal(tool, claimant.plugin);
    }
    format!(
        "tool '{tool}' is also provided by plugin '{}', which takes precedence; rename or remove one of them",
        claimant.plugin
    )
}

/// The order tools are offered in: by name, MCP servers' tools (`mcp_…`) after all others, so
/// that adding or dropping an MCP server leaves the start of the tool list — and the provider's
/// prompt cache over it — as it was.
fn offer_order(a: &str, b: &str) -> std::cmp::Ordering {
    (a.starts_with("mcp_"), a).cmp(&(b.starts_with("mcp_"), b))
}

/// Levenshtein distance, for short names.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(previous + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::{edit_distance, is_valid_tool_name, offer_order};

    #[test]
    fn mcp_tools_are_offered_after_every_other_tool() {
        let mut names = vec!["read_file", "mcp_notes_search", "web_fetch", "exec", "mcp_a_b"];
        names.sort_by(|a, b| offer_order(a, b));
        assert_eq!(names, ["exec", "read_file", "web_fetch", "mcp_a_b", "mcp_notes_search"]);
    }

    #[test]
    fn tool_names_follow_what_providers_accept() {
        for good in ["read_file", "web-search", "A1", &"x".repeat(64)] {
            assert!(is_valid_tool_name(good), "{good}");
        }
        for bad in ["", "read file", "fs.read", "naïve", &"x".repeat(65), "a/b"] {
            assert!(!is_valid_tool_name(bad), "{bad}");
        }
    }

    #[test]
    fn edit_distance_counts_single_character_edits() {
        assert_eq!(edit_distance("read_file", "read_file"), 0);
        assert_eq!(edit_distance("read_file", "read_files"), 1);
        assert_eq!(edit_distance("read_file", "reed_fiel"), 3);
        assert_eq!(edit_distance("", "exec"), 4);
    }
}
