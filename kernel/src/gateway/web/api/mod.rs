//! The JSON API behind the page, one module per view: [`sessions`], [`memory`],
//! [`automations`], [`status`]. [`handle`] routes `/api/…` requests to them; file and git
//! work runs on blocking threads, never on the gateway's event loop.

pub mod automations;
pub mod memory;
pub mod sessions;
pub mod status;

use serde_json::{Value, json};

use super::WebUi;
use super::http::{Request, Response};
use automations::JobAction;

/// Answers one `/api/…` request.
pub async fn handle(ui: &WebUi, request: &Request) -> Response {
    let route = (request.method.as_str(), request.path.as_str());
    match route {
        ("GET", "/api/info") => Response::json(200, &info(ui)),
        ("GET", "/api/sessions") => {
            let store = ui.services.session_files().clone();
            blocking(move || Ok::<_, String>(sessions::list(&store))).await
        }
        ("GET", "/api/session") => {
            let store = ui.services.session_files().clone();
            let key = request.query_param("key").unwrap_or_default();
            blocking(move || sessions::transcript(&store, &key).ok_or_else(|| format!("no session {key}"))).await
        }
        ("GET", "/api/memory") => {
            let workspace = ui.services.workspace().to_path_buf();
            blocking(move || Ok::<_, String>(memory::files(&workspace))).await
        }
        ("PUT", "/api/memory") => save_memory(ui, request).await,
        ("GET", "/api/memory/log") => {
            let workspace = ui.services.workspace().to_path_buf();
            blocking(move || memory::log(&workspace)).await
        }
        ("GET", "/api/memory/diff") => {
            let (workspace, sha) =
                (ui.services.workspace().to_path_buf(), request.query_param("sha").unwrap_or_default());
            blocking(move || memory::diff(&workspace, &sha)).await
        }
        ("POST", "/api/memory/restore") => {
            let (workspace, sha) =
                (ui.services.workspace().to_path_buf(), request.query_param("sha").unwrap_or_default());
            blocking(move || memory::restore(&workspace, &sha)).await
        }
        ("GET", "/api/cron") => match automations::list(&ui.cron, ui.scheduler.as_ref()).await {
            Ok(jobs) => Response::json(200, &jobs),
            Err(error) => Response::error(409, error),
        },
        ("POST", "/api/cron/pause") => job_action(ui, request, JobAction::Pause).await,
        ("POST", "/api/cron/resume") => job_action(ui, request, JobAction::Resume).await,
        ("POST", "/api/cron/run") => job_action(ui, request, JobAction::RunNow).await,
        ("DELETE", "/api/cron") => job_action(ui, request, JobAction::Remove).await,
        ("GET", "/api/status") => {
            let settings = ui.services.settings();
            let prices = settings.prices_or_none();
            let window = u64::from(settings.config.agents.defaults.context_window_tokens);
            let mut report = status::report(ui.services.host(), &ui.services.usage(), &prices, window);
            if let Some(cluster) = &ui.cluster {
                report["cluster"] = cluster();
            }
            Response::json(200, &report)
        }
        (_, path) if KNOWN.contains(&path) => Response::error(405, "method not allowed"),
        _ => Response::error(404, "no such API"),
    }
}

/// Every API path, for telling a wrong method from a wrong path.
const KNOWN: [&str; 10] = [
    "/api/info",
    "/api/sessions",
    "/api/session",
    "/api/memory",
    "/api/memory/log",
    "/api/memory/diff",
    "/api/memory/restore",
    "/api/cron",
    "/api/cron/pause",
    "/api/status",
];

/// What the page needs to know at start: whether chat is available, and the workspace's name.
fn info(ui: &WebUi) -> Value {
    let workspace = ui.services.workspace().file_name().map(|n| n.to_string_lossy().into_owned());
    json!({"chat": ui.chat().is_some(), "workspace": workspace, "version": env!("CARGO_PKG_VERSION")})
}

/// `PUT /api/memory?name=…` with `{"content": "…"}`.
async fn save_memory(ui: &WebUi, request: &Request) -> Response {
    let name = request.query_param("name").unwrap_or_default();
    let body: Value = match serde_json::from_slice(&request.body) {
        Ok(body) => body,
        Err(error) => return Response::error(400, format!("the body must be JSON: {error}")),
    };
    let Some(content) = body.get("content").and_then(Value::as_str).map(str::to_owned) else {
        return Response::error(400, "the body needs a \"content\" string");
    };
    let workspace = ui.services.workspace().to_path_buf();
    blocking(move || memory::save(&workspace, &name, &content).map(|()| json!({"saved": name}))).await
}

async fn job_action(ui: &WebUi, request: &Request, action: JobAction) -> Response {
    let id = request.query_param("id").unwrap_or_default();
    match automations::act(&ui.cron, ui.scheduler.as_ref(), &id, action).await {
        Ok(()) => Response::json(200, &json!({"ok": true})),
        Err(error) => Response::error(409, error),
    }
}

/// Runs `work` on a blocking thread; its value is the JSON answer, its error a 409 in words.
async fn blocking<E>(work: impl FnOnce() -> Result<Value, E> + Send + 'static) -> Response
where
    E: std::fmt::Display + Send + 'static,
{
    match tokio::task::spawn_blocking(work).await {
        Ok(Ok(value)) => Response::json(200, &value),
        Ok(Err(error)) => Response::error(409, error),
        Err(_) => Response::error(503, "the request's work was cancelled"),
    }
}
