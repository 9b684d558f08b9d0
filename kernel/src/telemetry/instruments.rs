//! What the hooks record with: the tracer, the two GenAI histograms and the content opt-in,
//! set once when export starts and read by every hook (unset: export is off).

use std::sync::OnceLock;

use opentelemetry::metrics::{Histogram, Meter};
use opentelemetry_sdk::trace::SdkTracer;

/// The instruments, once export runs.
static INSTRUMENTS: OnceLock<Instruments> = OnceLock::new();

/// Bucket bounds of the token histogram, as the GenAI conventions advise.
const TOKEN_BOUNDS: [f64; 14] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0, 16777216.0,
    67108864.0,
];
/// Bucket bounds of the duration histogram, in seconds, as the conventions advise.
const DURATION_BOUNDS: [f64; 14] =
    [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];

/// The tracer, the two GenAI histograms, and whether message contents go into spans.
pub struct Instruments {
    /// Starts the turn, model-call and tool-call spans.
    pub tracer: SdkTracer,
    /// `gen_ai.client.token.usage`, in tokens.
    pub tokens: Histogram<u64>,
    /// `gen_ai.client.operation.duration`, in seconds.
    pub duration: Histogram<f64>,
    /// The user opted in to message contents in spans.
    pub include_content: bool,
}

impl Instruments {
    /// The instruments over `tracer` and `meter`.
    pub fn new(tracer: SdkTracer, meter: &Meter, include_content: bool) -> Instruments {
        let tokens = meter
            .u64_histogram("gen_ai.client.token.usage")
            .with_unit("{token}")
            .with_description("Number of input and output tokens used")
            .with_boundaries(TOKEN_BOUNDS.to_vec())
            .build();
        let duration = meter
            .f64_histogram("gen_ai.client.operation.duration")
            .with_unit("s")
            .with_description("GenAI operation duration")
            .with_boundaries(DURATION_BOUNDS.to_vec())
            .build();
        Instruments { tracer, tokens, duration, include_content }
    }

    /// Makes these the instruments every hook records with; false when some already are.
    pub fn install(self) -> bool {
        INSTRUMENTS.set(self).is_ok()
    }
}

/// The instruments, when export runs.
pub fn instruments() -> Option<&'static Instruments> {
    INSTRUMENTS.get()
}
