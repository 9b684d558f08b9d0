//! `ConsolidatorActor`: runs consolidations for every session of the kernel — sessions in
//! parallel, never two at once for the same session — with the configured model as the
//! summariser, the session's token ledger as the estimator and the budget of the settings in
//! force.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use actix::prelude::*;

use super::consolidator::{Budget, ConsolidateError, Consolidation, Estimator, Report, SharedSession, Summarizer};
use super::prompts::{CONSOLIDATE, consolidation_input};
use super::recall::Recall;
use super::tokens::TokenLedger;
use crate::message::{ChatMessage, Role};
use crate::provider::{ChatRequest, ProviderError};
use crate::services::Services;
use crate::session::{Session, SessionKey};
use crate::turn::hooks::strip_think_blocks;

/// Most tokens a summary may take.
const SUMMARY_MAX_TOKENS: u32 = 2048;

/// Consolidates sessions on request.
pub struct ConsolidatorActor {
    /// Provider, stores and budget settings.
    services: Arc<Services>,
    /// One lock per session key, held while that session is being consolidated.
    running: HashMap<SessionKey, Arc<tokio::sync::Mutex<()>>>,
    /// The memory files' index, for the silent turn before a slice is archived (`None`: no
    /// such turn).
    recall: Option<Recall>,
}

impl ConsolidatorActor {
    /// An actor over the services' provider, session store and history; with `recall`, a
    /// silent turn saves what matters before a slice over the budget is archived (when
    /// `memory.flush` is on).
    pub fn new(services: Arc<Services>, recall: Option<Recall>) -> ConsolidatorActor {
        let recall = recall.filter(|r| r.settings().flush);
        ConsolidatorActor { services, running: HashMap::new(), recall }
    }
}

impl Actor for ConsolidatorActor {
    type Context = Context<Self>;
}

/// How much to archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Only when the prompt estimate reaches the budget, down to half of it.
    OverBudget,
    /// Everything not yet archived (`/new`).
    Everything,
    /// The provider said the prompt does not fit: archive at least one slice, down to half
    /// the budget, whatever the estimate says.
    Overflow,
}

/// Consolidate one session. Resolves when done; requests for a session that is already
/// being consolidated wait for that run to finish first.
#[derive(Message)]
#[rtype(result = "Result<Report, ConsolidateError>")]
pub struct Consolidate {
    /// The session.
    pub key: SessionKey,
    /// The session, as loaded in its actor.
    pub session: SharedSession,
    /// Its token counts.
    pub ledger: Arc<Mutex<TokenLedger>>,
    /// The prompt around the messages (system prompt and tool definitions), for the estimate.
    pub fixed_prompt: Arc<str>,
    /// How much.
    pub scope: Scope,
}

impl Handler<Consolidate> for ConsolidatorActor {
    type Result = ResponseFuture<Result<Report, ConsolidateError>>;

    fn handle(&mut self, request: Consolidate, _: &mut Context<Self>) -> Self::Result {
        let lock = self.running.entry(request.key.clone()).or_default().clone();
        let services = self.services.clone();
        let flush = match request.scope {
            Scope::OverBudget | Scope::Overflow => self.recall.clone(),
            Scope::Everything => None,
        };
        Box::pin(async move {
            let _running = lock.lock().await;
            // The settings in force now: a reload since the start changes the budget.
            let settings = services.settings();
            let defaults = &settings.config.agents.defaults;
            let budget = Budget::new(defaults.context_window_tokens, defaults.max_tokens);
            let mut consolidation = Consolidation {
                session: &request.session,
                store: services.sessions().as_ref(),
                history: services.history(),
                estimator: LedgerEstimator {
                    ledger: &request.ledger,
                    fixed: &request.fixed_prompt,
                    limit: budget.limit,
                },
                summarizer: LlmSummarizer { services: &services, session: request.key.as_str() },
                budget,
                timezone: defaults.timezone.clone(),
            };
            if let Some(recall) = &flush {
                let forced = request.scope == Scope::Overflow;
                if let Some(slice) = consolidation.first_slice(forced)? {
                    let key = request.key.as_str();
                    match super::flush::flush_before_archive(&services, recall, key, &slice).await {
                        Ok(stored) => tracing::info!(session = %key, stored, "saved memory before archiving"),
                        Err(error) => {
                            tracing::warn!(session = %key, %error, "the memory flush before archiving failed")
                        }
                    }
                }
            }
            match request.scope {
                Scope::OverBudget => consolidation.over_budget().await,
                Scope::Overflow => consolidation.overflow().await,
                Scope::Everything => consolidation.everything().await,
            }
        })
    }
}

/// Counts with the session's ledger: byte bounds while far from the limit, exact tokens near it.
pub struct LedgerEstimator<'a> {
    /// The session's ledger.
    pub ledger: &'a Mutex<TokenLedger>,
    /// The prompt around the messages.
    pub fixed: &'a str,
    /// Below this the cheap bound answers.
    pub limit: u64,
}

impl Estimator for LedgerEstimator<'_> {
    fn total(&mut self, session: &Session) -> u64 {
        let mut ledger = self.ledger.lock().unwrap_or_else(PoisonError::into_inner);
        ledger.sync(&session.messages, session.offset, session.last_consolidated);
        ledger.estimate(&session.messages, session.offset, self.fixed, self.limit).tokens
    }

    fn message(&mut self, session: &Session, index: usize) -> u64 {
        let mut ledger = self.ledger.lock().unwrap_or_else(PoisonError::into_inner);
        ledger.sync(&session.messages, session.offset, session.last_consolidated);
        ledger.message_tokens(&session.messages, session.offset, index)
    }
}

/// Summarises with one plain call to `agents.defaults.consolidationModel` (else the
/// configured model), whose tokens the usage log counts as the session's `consolidation`;
/// no call is made once a cap of `consolidation` (or `all`) is reached.
struct LlmSummarizer<'a> {
    services: &'a Services,
    session: &'a str,
}

impl Summarizer for LlmSummarizer<'_> {
    async fn summarize(&self, messages: &[ChatMessage]) -> Result<String, ProviderError> {
        let request = ChatRequest {
            model: consolidation_model(self.services),
            messages: crate::message::shared([
                ChatMessage::text(Role::System, CONSOLIDATE),
                ChatMessage::text(Role::User, consolidation_input(messages)),
            ]),
            tools: std::sync::Arc::default(),
            max_tokens: SUMMARY_MAX_TOKENS.min(self.services.spec().max_tokens.max(256)),
            temperature: self.services.spec().temperature,
            reasoning_effort: None,
        };
        let mut meter = self.services.meter(self.session, &request.model, "consolidation");
        if let Some(breach) = meter.check() {
            self.services.tell_capped(&breach);
            return Err(ProviderError::Quota { provider: "oxibot".to_owned(), message: breach.message() });
        }
        let started = std::time::Instant::now();
        let provider = self.services.provider();
        let mut no_stream = |_| {};
        let call = provider.chat(&request, false, &mut no_stream);
        let attribution = meter.attribution();
        let response = crate::telemetry::genai::traced_chat(
            &attribution,
            &request.model,
            provider.name(),
            &request.messages,
            call,
        )
        .await?;
        meter.record(&response.usage, started.elapsed());
        Ok(strip_think_blocks(response.content.as_deref().unwrap_or("")))
    }
}

/// The model of consolidation's summaries: `agents.defaults.consolidationModel`, else the
/// agent's.
fn consolidation_model(services: &Services) -> String {
    let settings = services.settings();
    let own = settings.config.agents.defaults.extra.get("consolidationModel").and_then(serde_json::Value::as_str);
    own.filter(|model| !model.trim().is_empty()).map_or_else(|| services.spec().model.clone(), str::to_owned)
}
