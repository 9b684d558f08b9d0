//! The meter on one source's model calls: before each call it checks the spending caps
//! (`agents.defaults.budgets`, see [`crate::budget`]) and refuses the call once one is
//! reached; after each call it writes the call to the usage log (a background source: Dream,
//! consolidation, the memory flush, a helper, an embedding) or counts it until the turn's own
//! line is written (a session's turn). As a turn hook it stops a tool loop at its cap. A
//! meter made [`Meter::live`] reads the caps and prices in force before each call, so a cap
//! edited while the gateway runs holds from the next call on.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::budget::{self, Breach, Budgets};
use crate::provider::Usage;
use crate::settings::{Settings, SettingsHandle};
use crate::turn::hooks::{Hook, HookResult, IterationInfo, StepInfo};
use crate::usage::{Price, UsageEntry, UsageLog, UsageStore};

/// The cap that stopped a source, shared with whoever tells the owner.
pub type CappedCell = Arc<Mutex<Option<Breach>>>;

/// Meters the model calls of one source (see the module docs).
pub struct Meter {
    /// Where calls are written and spending is read.
    log: UsageLog,
    /// The data directory, where the told-once markers of [`Breach::first_notice`] live.
    data_dir: PathBuf,
    /// The caps in force when the source started.
    budgets: Budgets,
    /// The prices in force when the source started, for money caps.
    prices: BTreeMap<String, Price>,
    /// The settings in force, read again before each call, when the meter is live.
    live: Option<SettingsHandle>,
    /// What each call is recorded as: session, model, source, job, phase.
    template: UsageEntry,
    /// Whether each call is written at once; otherwise it is only counted in `pending`.
    per_call: bool,
    /// The calls counted and not yet written.
    pending: UsageEntry,
    /// When the call in flight started.
    call_started: Option<Instant>,
    /// The cap that refused a call, once one did.
    capped: CappedCell,
}

impl Meter {
    /// A meter writing each call of `source` in `session` with `model` to the usage log.
    pub fn per_call(settings: &Settings, data_dir: &Path, session: &str, model: &str, source: &str) -> Meter {
        let template = UsageEntry {
            session: session.to_owned(),
            model: model.to_owned(),
            source: Some(source.to_owned()),
            ..UsageEntry::default()
        };
        Meter::with_template(settings, data_dir, template, true)
    }

    /// A meter only counting the calls of a session's turn (`template` names its source,
    /// job and model), whose owner writes one line for the turn when it ends.
    pub fn counting(settings: &Settings, data_dir: &Path, template: UsageEntry) -> Meter {
        Meter::with_template(settings, data_dir, template, false)
    }

    fn with_template(settings: &Settings, data_dir: &Path, template: UsageEntry, per_call: bool) -> Meter {
        Meter {
            log: UsageLog::new(data_dir),
            data_dir: data_dir.to_path_buf(),
            budgets: budgets_of(settings),
            prices: settings.prices_or_none(),
            live: None,
            pending: template.clone(),
            template,
            per_call,
            call_started: None,
            capped: CappedCell::default(),
        }
    }

    /// The same meter reading the caps and prices of `settings` before each call (not those
    /// in force when it was made).
    pub fn live(mut self, settings: SettingsHandle) -> Meter {
        self.live = Some(settings);
        self
    }

    /// The same meter for one phase of its source (Dream's `analysis`, `edit`).
    pub fn phase(mut self, phase: &str) -> Meter {
        self.template.phase = Some(phase.to_owned());
        self.pending.phase = Some(phase.to_owned());
        self
    }

    /// What this meter's calls are attributed to, for their spans.
    pub fn attribution(&self) -> crate::telemetry::attribution::Attribution {
        crate::telemetry::attribution::Attribution {
            source: self.template.source().to_owned(),
            session: self.template.session.clone(),
            job: self.template.job.clone(),
            phase: self.template.phase.clone(),
        }
    }

    /// Where the cap that refused a call is kept.
    pub fn capped(&self) -> CappedCell {
        Arc::clone(&self.capped)
    }

    /// The cap the next call would go over, if any (kept for [`Meter::capped`]).
    pub fn check(&self) -> Option<Breach> {
        let source = self.template.source();
        let today = chrono::Utc::now().date_naive();
        let pending = (!self.per_call).then_some(&self.pending);
        let current = self.live.as_ref().map(|live| {
            let settings = live.current();
            (budgets_of(&settings), settings.prices_or_none())
        });
        let (budgets, prices) = current.as_ref().map_or((&self.budgets, &self.prices), |(b, p)| (b, p));
        let breach = budgets.breach_with(&self.log, prices, today, source, self.template.job.as_deref(), pending)?;
        tracing::warn!(source, scope = %breach.scope, setting = breach.setting, "over budget; the model is not called");
        *self.capped.lock().unwrap_or_else(PoisonError::into_inner) = Some(breach.clone());
        Some(breach)
    }

    /// Whether the owner should be told of `breach` now: the first time for its cap and
    /// period.
    pub fn first_notice(&self, breach: &Breach) -> bool {
        breach.first_notice(&self.data_dir)
    }

    /// Writes (or counts) one call that used `usage` and took `took`.
    pub fn record(&mut self, usage: &Usage, took: Duration) {
        if !self.per_call {
            self.pending.prompt += usage.prompt_tokens;
            self.pending.cached += usage.cached_tokens;
            self.pending.completion += usage.completion_tokens;
            self.pending.reasoning += usage.reasoning_tokens;
            self.pending.calls += 1;
            return;
        }
        let mut entry =
            UsageEntry::call(&self.template.session, &self.template.model, self.template.source(), usage, took);
        entry.job.clone_from(&self.template.job);
        entry.phase.clone_from(&self.template.phase);
        if let Err(error) = self.log.record(&entry, chrono::Utc::now()) {
            tracing::warn!(source = self.template.source(), %error, "cannot record token usage");
        }
    }
}

/// The caps `settings` set (none, logged, when the section is wrong).
fn budgets_of(settings: &Settings) -> Budgets {
    budget::budgets(settings.config.agents.defaults.extra.get("budgets")).unwrap_or_else(|error| {
        tracing::warn!(%error, "the budgets section is wrong; no cap is checked");
        Budgets::default()
    })
}

impl Hook for Meter {
    fn name(&self) -> &str {
        "meter"
    }

    fn before_iteration(&mut self, _info: &IterationInfo) -> HookResult {
        self.call_started = Some(Instant::now());
        Ok(())
    }

    fn refuse_call(&mut self) -> Option<String> {
        self.check().map(|breach| breach.message())
    }

    fn after_iteration(&mut self, step: &StepInfo) -> HookResult {
        let took = self.call_started.take().map(|started| started.elapsed()).unwrap_or_default();
        self.record(&step.usage, took);
        Ok(())
    }
}
