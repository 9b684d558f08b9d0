//! The kernels of `oxibot acp`, one per workspace: the editor's `cwd` of a session is its
//! workspace (the plugins confined to it as for `--workspace`), started on the first session
//! there and shared by the sessions after it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use anyhow::Context as _;
use oxibot_kernel::agent::SessionManager;
use oxibot_kernel::automation::scheduling;
use oxibot_kernel::automation::{Reach, builtin_tools, cron_where_jobs_run};
use oxibot_kernel::paths;
use oxibot_kernel::provider::Provider;
use oxibot_kernel::services::Services;

use crate::cli::CommonArgs;
use crate::cli::agent::with_retry_override;
use crate::cli::kernel::Setup;

/// One workspace's kernel: its services and sessions.
pub struct Kernel {
    /// Routes the prompts to the session actors.
    pub manager: Rc<SessionManager>,
}

impl Kernel {
    /// The kernel's services.
    pub fn services(&self) -> &Arc<Services> {
        self.manager.services()
    }
}

/// The kernels started so far, by workspace.
pub struct Kernels {
    /// The command line's options (the config file); the workspace comes from each session.
    common: CommonArgs,
    /// Started kernels, by absolute workspace path.
    started: RefCell<HashMap<PathBuf, Rc<Kernel>>>,
}

impl Kernels {
    /// No kernel yet; each starts with `common`'s config.
    pub fn new(common: CommonArgs) -> Kernels {
        Kernels { common, started: RefCell::default() }
    }

    /// The kernel of `workspace`, started now if it is the first session there.
    pub async fn for_workspace(&self, workspace: &Path) -> anyhow::Result<Rc<Kernel>> {
        if let Some(kernel) = self.started.borrow().get(workspace) {
            return Ok(kernel.clone());
        }
        let common = CommonArgs { workspace: Some(workspace.to_path_buf()), ..self.common.clone() };
        let kernel = Rc::new(start(&common).await?);
        // Two sessions may have started the same workspace at once: the first one kept wins.
        let mut started = self.started.borrow_mut();
        Ok(started.entry(workspace.to_path_buf()).or_insert(kernel).clone())
    }

    /// Stops every kernel's plugins.
    pub async fn shutdown(&self) {
        let kernels: Vec<_> = self.started.borrow_mut().drain().map(|(_, kernel)| kernel).collect();
        for kernel in kernels {
            kernel.services().host().shutdown().await;
        }
    }
}

/// Starts a kernel as `oxibot agent` does, without a scheduler (the gateway runs the jobs).
async fn start(common: &CommonArgs) -> anyhow::Result<Kernel> {
    let setup = Setup::load(common)?;
    let provider = Provider::from_config(&setup.settings.config.llm()).context("cannot use the configured model")?;
    let provider = with_retry_override(provider)?;
    let host = setup.start_host()?;
    host.wait_settled(setup.startup_wait()).await;
    let services =
        Services::new(setup.settings.clone(), setup.workspace.clone(), &paths::data_dir(), provider, host, true)
            .with_nanobot_sessions(setup.nanobot_sessions());
    let services = Arc::new(services);
    let manager = Rc::new(SessionManager::new(services.clone()));
    let timezone = scheduling::timezone(services.timezone().as_deref());
    let mut extra = manager.memory().tools();
    extra.extend(cron_where_jobs_run(services.workspace(), timezone, None));
    services.install_builtins(builtin_tools(&services, Reach { dispatcher: None, channels: false, extra }));
    Ok(Kernel { manager })
}
