//! OpenTelemetry export (issue 33): traces and metrics over OTLP/HTTP, following the GenAI
//! semantic conventions, when an endpoint is configured — the config's `telemetry.otlpEndpoint`
//! or the standard `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
//! variables (`OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_SERVICE_NAME` and the other standard
//! variables are honoured by the exporter and the resource).
//!
//! Code map: [`settings`] reads what to export; [`instruments`] holds what the hooks record
//! with; [`export`] builds the exporters over the
//! reqwest client the LLM client uses, on a runtime of their own; [`genai`] makes the spans
//! (one trace per turn: `invoke_agent` with `chat` and `execute_tool` children) and records
//! the `gen_ai.client.*` histograms; model calls outside a turn get `chat` spans too, each
//! with its [`attribution`] (the usage log's source, session, job, phase), and embedding
//! requests `embeddings` spans ([`embeddings`]).
//!
//! Without an endpoint nothing is built: no exporter, no thread, and every hook in the turn
//! returns after one read of an unset `OnceLock` ([`instruments`]).

pub mod attribution;
pub mod embeddings;
pub mod export;
pub mod genai;
pub mod instruments;
pub mod settings;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;

pub use export::TelemetryError;
use instruments::Instruments;
pub use settings::TelemetrySettings;

/// The instrumentation scope every span and metric is reported under.
const SCOPE: &str = "oxibot";

/// The running export; flushes and stops it when dropped (at the end of the command).
pub struct Telemetry {
    /// Batches spans and posts them on its own thread.
    traces: SdkTracerProvider,
    /// Collects the histograms and posts them periodically (it has no reader, and so no
    /// thread, when only traces are exported).
    metrics: SdkMeterProvider,
}

/// Starts export when `settings` name an endpoint; `None` (and nothing built) otherwise, or
/// when it cannot start (logged).
pub fn start(settings: &TelemetrySettings) -> Option<Telemetry> {
    if !settings.enabled() {
        return None;
    }
    match try_start(settings) {
        Ok(telemetry) => Some(telemetry),
        Err(error) => {
            tracing::warn!(%error, "OpenTelemetry export is off");
            None
        }
    }
}

fn try_start(settings: &TelemetrySettings) -> Result<Telemetry, TelemetryError> {
    let resource = export::resource();
    let traces = SdkTracerProvider::builder()
        .with_batch_exporter(export::span_exporter(settings)?)
        .with_resource(resource.clone())
        .build();
    let mut metrics = SdkMeterProvider::builder().with_resource(resource);
    if settings.metrics_enabled() {
        metrics = metrics.with_periodic_exporter(export::metric_exporter(settings)?);
    }
    let metrics = metrics.build();
    let meter = metrics.meter(SCOPE);
    if !Instruments::new(traces.tracer(SCOPE), &meter, settings.include_content).install() {
        return Err(TelemetryError::AlreadyStarted);
    }
    tracing::info!(endpoint = %settings.describe_endpoint(), "exporting OpenTelemetry traces");
    Ok(Telemetry { traces, metrics })
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Err(error) = self.traces.shutdown() {
            tracing::warn!(%error, "cannot flush the OpenTelemetry spans");
        }
        if let Err(error) = self.metrics.shutdown() {
            tracing::warn!(%error, "cannot flush the OpenTelemetry metrics");
        }
    }
}
