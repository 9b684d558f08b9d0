//! Kernel services: what every actor above the turn shares — the current [`Settings`], the
//! workspace, the session and history stores, the system-prompt builder, and the [`Engine`] a
//! turn runs with.
//!
//! Actors get an `Arc<Services>` (or just the `Arc<Engine>` when a turn is all they run); the
//! fields stay private so that what an actor may touch is what these methods hand out.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Instant;

use crate::budget::Breach;
use crate::config::Config;
use crate::context::ContextBuilder;
use crate::history::HistoryStore;
use crate::meter::Meter;
use crate::plugin::PluginHost;
use crate::provider::Provider;
use crate::session::ownership::SessionOwnership;
use crate::session::{SessionStorage, SessionStore};
use crate::settings::{Settings, SettingsHandle};
use crate::turn::Engine;
use crate::turn::approval::Approvals;
use crate::turn::builtin::BuiltinTools;
use crate::turn::runner::RunSpec;
use crate::usage::UsageLog;

/// Longest tool result kept in a conversation, in characters.
pub const MAX_TOOL_RESULT_CHARS: usize = 16_000;

/// The kernel's shared services.
pub struct Services {
    /// The settings in force: the config as loaded at start, replaced whole by a reload.
    settings: SettingsHandle,
    /// The workspace directory.
    workspace: PathBuf,
    /// The data directory (sessions and the memory index of the workspace live under it).
    data_dir: PathBuf,
    /// Model, tools and turn settings.
    engine: Arc<Engine>,
    /// The session files, read directly only by the web UI's read-only viewer.
    session_files: Arc<SessionStore>,
    /// The same files as every session reaches them: through the storage trait.
    sessions: Arc<dyn SessionStorage>,
    /// `memory/history.jsonl` and its cursors.
    history: Arc<HistoryStore>,
    /// System-prompt builder; it caches workspace files, hence the lock.
    context: Mutex<ContextBuilder>,
    /// When the kernel started, for `/status`.
    started: Instant,
    /// Whether sessions are consolidated in the background after each turn (off for a
    /// one-shot `oxibot agent -m`, which exits right after its answer).
    background_consolidation: bool,
    /// The kernel's built-in tools (`cron`, `spawn`, `message`), installed once at start by
    /// whoever runs the kernel and knows which of them can work there.
    builtins: OnceLock<BuiltinTools>,
    /// Tells the owner's last active chat what the kernel noticed on its own (a background
    /// source stopped at its spending cap), installed once by whoever runs the kernel and can
    /// deliver; without it such notices are only logged.
    owner_notice: OnceLock<OwnerNotice>,
    /// In cluster mode, which sessions this kernel may run (claimed before their turns);
    /// `None` on a single host, where every session is this kernel's.
    ownership: Option<Arc<dyn SessionOwnership>>,
}

/// Sends a message to the owner's last active chat.
pub type OwnerNotice = Box<dyn Fn(String) + Send + Sync>;

impl Services {
    /// Assembles the services with `settings` (or a config, read into them); sessions are
    /// kept under `data_dir` (see [`SessionStore::for_workspace`]) and `stream` chooses
    /// streamed model replies.
    pub fn new(
        settings: impl Into<Settings>,
        workspace: PathBuf,
        data_dir: &Path,
        provider: Provider,
        host: PluginHost,
        stream: bool,
    ) -> Services {
        let settings: Settings = settings.into();
        let spec = run_spec(&settings.config, stream);
        let approvals = Arc::new(Approvals::new(settings.config.tools.approval.clone(), data_dir));
        let session_files = Arc::new(SessionStore::for_workspace(&workspace, data_dir));
        Services {
            sessions: session_files.clone(),
            session_files,
            history: Arc::new(HistoryStore::new(&workspace)),
            context: Mutex::new(ContextBuilder::new(workspace.clone())),
            engine: Arc::new(Engine::new(provider, host, spec, approvals)),
            settings: SettingsHandle::new(settings),
            workspace,
            data_dir: data_dir.to_path_buf(),
            started: Instant::now(),
            background_consolidation: true,
            builtins: OnceLock::new(),
            owner_notice: OnceLock::new(),
            ownership: None,
        }
    }

    /// The same services as one kernel of a cluster: sessions are reached through `sessions`
    /// (a store that writes only sessions this kernel owns) and claimed through `ownership`
    /// before their turns.
    pub fn in_cluster(mut self, sessions: Arc<dyn SessionStorage>, ownership: Arc<dyn SessionOwnership>) -> Services {
        self.sessions = sessions;
        self.ownership = Some(ownership);
        self
    }

    /// In cluster mode, the ownership of sessions; `None` on a single host.
    pub fn ownership(&self) -> Option<&Arc<dyn SessionOwnership>> {
        self.ownership.as_ref()
    }

    /// The same services with background consolidation on or off.
    pub fn with_background_consolidation(mut self, on: bool) -> Services {
        self.background_consolidation = on;
        self
    }

    /// The same services, also finding sessions nanobot 0.3 keeps in `dir` (see
    /// [`SessionStore::with_nanobot_sessions`]).
    pub fn with_nanobot_sessions(mut self, dir: Option<PathBuf>) -> Services {
        self.session_files = Arc::new(SessionStore::clone(&self.session_files).with_nanobot_sessions(dir));
        self.sessions = self.session_files.clone();
        self
    }

    /// The settings in force. Read them once per use: a reload may replace them at any time,
    /// and whoever holds this snapshot keeps seeing one consistent set.
    pub fn settings(&self) -> Arc<Settings> {
        self.settings.current()
    }

    /// A handle on the settings in force, for what reads them call by call after this
    /// returns (a helper's or an embedding's meter).
    pub fn settings_handle(&self) -> SettingsHandle {
        self.settings.clone()
    }

    /// Puts edited settings in force (a config reload); readers get them from their next
    /// [`Services::settings`] on.
    pub fn replace_settings(&self, settings: Settings) {
        self.engine.approvals().replace_policy(settings.config.tools.approval.clone());
        self.settings.replace(settings);
    }

    /// The approval policy, the calls waiting for a person, the standing approvals.
    pub fn approvals(&self) -> &Arc<Approvals> {
        self.engine.approvals()
    }

    /// The workspace directory.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The token usage log of the data directory.
    pub fn usage(&self) -> UsageLog {
        UsageLog::new(&self.data_dir)
    }

    /// Model, tools and turn settings, as a handle a turn can keep.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The LLM client.
    pub fn provider(&self) -> Arc<Provider> {
        self.engine.provider()
    }

    /// The plugin host (tools, and in the gateway the channels).
    pub fn host(&self) -> &PluginHost {
        self.engine.host()
    }

    /// The configured turn settings.
    pub fn spec(&self) -> Arc<RunSpec> {
        self.engine.spec()
    }

    /// Where sessions are kept: the one way a session reaches its durable state.
    pub fn sessions(&self) -> &Arc<dyn SessionStorage> {
        &self.sessions
    }

    /// The session files themselves, for readers that only show them (the web UI).
    pub fn session_files(&self) -> &Arc<SessionStore> {
        &self.session_files
    }

    /// `memory/history.jsonl` and its cursors.
    pub fn history(&self) -> &Arc<HistoryStore> {
        &self.history
    }

    /// The system prompt for a session of `channel`.
    pub fn system_prompt(&self, channel: &str) -> String {
        self.context.lock().unwrap_or_else(PoisonError::into_inner).system_prompt(channel)
    }

    /// The `# Recent History` section for the runtime block, if any entry is new to Dream.
    pub fn recent_history(&self) -> Option<String> {
        self.context.lock().unwrap_or_else(PoisonError::into_inner).recent_history()
    }

    /// Runs `read` with the prompt builder (its caches stay warm between calls).
    pub fn with_context<T>(&self, read: impl FnOnce(&mut ContextBuilder) -> T) -> T {
        read(&mut self.context.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// When the kernel started.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Whether sessions are consolidated in the background after each turn.
    pub fn background_consolidation(&self) -> bool {
        self.background_consolidation
    }

    /// Installs the built-in tools every session's turns offer; returns `false` (and changes
    /// nothing) when a set was installed already.
    pub fn install_builtins(&self, tools: BuiltinTools) -> bool {
        let names = tools.names();
        let installed = self.builtins.set(tools).is_ok();
        if installed {
            self.with_context(|context| context.set_builtin_tools(names));
        }
        installed
    }

    /// The built-in tools a session's turn offers (none until installed).
    pub fn builtins(&self) -> BuiltinTools {
        self.builtins.get().cloned().unwrap_or_default()
    }

    /// Installs how the owner's last active chat is told of kernel notices; returns `false`
    /// when one was installed already.
    pub fn install_owner_notice(&self, notice: OwnerNotice) -> bool {
        self.owner_notice.set(notice).is_ok()
    }

    /// A meter on the calls of a background `source` in `session` with `model`: spending
    /// caps checked before each call, each call written to the usage log.
    pub fn meter(&self, session: &str, model: &str, source: &str) -> Meter {
        Meter::per_call(&self.settings(), &self.data_dir, session, model, source).live(self.settings_handle())
    }

    /// Tells the owner's last active chat, once per cap and period, that a background source
    /// stopped at `breach`.
    pub fn tell_capped(&self, breach: &Breach) {
        if !breach.first_notice(&self.data_dir) {
            return;
        }
        match self.owner_notice.get() {
            Some(notice) => notice(breach.message()),
            None => tracing::warn!(scope = %breach.scope, "over budget, and no chat to tell the owner in"),
        }
    }

    /// The configured IANA timezone name, if any.
    pub fn timezone(&self) -> Option<String> {
        self.settings().timezone().map(str::to_owned)
    }
}

/// Turn settings from the config's agent defaults.
pub fn run_spec(config: &Config, stream: bool) -> RunSpec {
    let defaults = &config.agents.defaults;
    RunSpec {
        model: defaults.model.clone(),
        max_tokens: defaults.max_tokens,
        temperature: defaults.temperature,
        reasoning_effort: defaults.reasoning_effort.clone(),
        max_iterations: defaults.max_tool_iterations.max(1),
        stream,
        max_tool_result_chars: MAX_TOOL_RESULT_CHARS,
        context_window: defaults.context_window_tokens,
    }
}
