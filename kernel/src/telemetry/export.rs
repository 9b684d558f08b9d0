//! The OTLP/HTTP (protobuf) exporters, posting through reqwest — the client, TLS stack
//! (rustls with ring) and major version the LLM client already uses.
//!
//! The SDK's batch span processor and periodic metric reader each run on a thread of their
//! own and drive an export with a plain executor, where reqwest's async client (which needs a
//! tokio reactor) cannot run. [`OwnRuntime`] hands each request to a one-worker tokio runtime
//! the exporters share, started only when export is on, and waits for its answer.

use std::sync::OnceLock;
use std::time::Duration;

use async_trait::async_trait;
use opentelemetry::KeyValue;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{MetricExporter, Protocol, SpanExporter, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;

use super::settings::TelemetrySettings;

/// The service name when `OTEL_SERVICE_NAME` does not give one.
const SERVICE_NAME: &str = "oxibot";

/// How long one export may take before it is given up.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why export could not start (it is logged; the program runs without it).
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// An exporter could not be built (a bad endpoint or header).
    #[error("cannot export OpenTelemetry data: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
    /// The exporters' runtime or client could not be started.
    #[error("cannot start the OpenTelemetry exporter's runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// Export was started twice in one process.
    #[error("OpenTelemetry export is already running")]
    AlreadyStarted,
}

/// The exporters' client, started with the first exporter and kept for the process's life (a
/// runtime cannot be dropped inside another one's task, where the providers may be dropped).
static SHARED: OnceLock<OwnRuntime> = OnceLock::new();

/// A reqwest client whose requests run on the exporters' own runtime.
#[derive(Debug, Clone)]
pub struct OwnRuntime {
    /// The pooled client (one for both exporters: building one loads the root certificates).
    client: reqwest::Client,
    /// Where its requests run.
    runtime: &'static tokio::runtime::Runtime,
}

impl OwnRuntime {
    /// The exporters' client, built with its runtime on first use.
    pub fn shared() -> Result<OwnRuntime, TelemetryError> {
        if let Some(shared) = SHARED.get() {
            return Ok(shared.clone());
        }
        oxibot_llm::install_crypto_provider();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("oxibot-otlp")
            .enable_all()
            .build()
            .map_err(TelemetryError::Runtime)?;
        let client = reqwest::Client::builder()
            .timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|error| TelemetryError::Runtime(std::io::Error::other(error)))?;
        // Leaked on purpose: the runtime lives as long as the process (see `SHARED`).
        let runtime: &'static tokio::runtime::Runtime = Box::leak(Box::new(runtime));
        Ok(SHARED.get_or_init(|| OwnRuntime { client, runtime }).clone())
    }
}

#[async_trait]
impl HttpClient for OwnRuntime {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        self.runtime.spawn(async move { client.send_bytes(request).await }).await?
    }
}

/// The resource every span and metric carries: `service.name` from `OTEL_SERVICE_NAME`, else
/// `oxibot`, the SDK's attributes and `OTEL_RESOURCE_ATTRIBUTES`.
pub fn resource() -> Resource {
    let builder = Resource::builder().with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    match std::env::var("OTEL_SERVICE_NAME").ok().filter(|name| !name.is_empty()) {
        Some(_) => builder.build(),
        None => builder.with_service_name(SERVICE_NAME).build(),
    }
}

/// The span exporter: to the config's endpoint unless a standard variable names one.
pub fn span_exporter(settings: &TelemetrySettings) -> Result<SpanExporter, TelemetryError> {
    let mut builder =
        SpanExporter::builder().with_http().with_protocol(Protocol::HttpBinary).with_http_client(OwnRuntime::shared()?);
    if let Some(url) = settings.config_traces_url() {
        builder = builder.with_endpoint(url);
    }
    Ok(builder.build()?)
}

/// The metric exporter (cumulative temporality, the SDK's default).
pub fn metric_exporter(settings: &TelemetrySettings) -> Result<MetricExporter, TelemetryError> {
    let mut builder = MetricExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_http_client(OwnRuntime::shared()?);
    if let Some(url) = settings.config_metrics_url() {
        builder = builder.with_endpoint(url);
    }
    Ok(builder.build()?)
}
