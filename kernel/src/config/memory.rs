//! The top-level `memory` section of `config.json`: embeddings, search weights, auto-recall
//! and the pre-consolidation flush. Read leniently (absent keys take their defaults, camelCase
//! or snake_case); a wrong value is an error naming its key.

use serde_json::{Map, Value};

/// A bad `memory` setting.
#[derive(Debug, Clone, thiserror::Error)]
#[error("memory.{key}: {problem}")]
pub struct SettingsError {
    /// The key under `memory`.
    key: &'static str,
    /// What is wrong and what was expected.
    problem: String,
}

/// How memory is searched and recalled.
#[derive(Debug, Clone, PartialEq)]
pub struct RecallSettings {
    /// The embedding model (`memory.embedding`); BM25 alone when absent.
    pub embedding: Option<String>,
    /// Weight of the vector similarity in the hybrid score (`vectorWeight`).
    pub vector_weight: f64,
    /// Weight of the keyword (BM25) score (`textWeight`).
    pub text_weight: f64,
    /// Days after which a dated memory counts half (`halfLifeDays`); 0 turns decay off.
    pub half_life_days: f64,
    /// MMR trade-off between relevance (1.0) and diversity (0.0) (`mmrLambda`).
    pub mmr_lambda: f64,
    /// Whether each user message brings recalled memory into its turn (`autoRecall`).
    pub auto_recall: bool,
    /// Most hits recalled per turn (`recallTopK`).
    pub recall_top_k: usize,
    /// Most tokens of recalled memory per turn (`recallTokens`).
    pub recall_tokens: usize,
    /// Lowest score a hit needs to be recalled automatically (`recallMinScore`).
    pub recall_min_score: f64,
    /// Whether a silent turn lets the model save what matters before a slice is archived
    /// (`flush`).
    pub flush: bool,
}

impl Default for RecallSettings {
    fn default() -> Self {
        RecallSettings {
            embedding: None,
            vector_weight: 0.7,
            text_weight: 0.3,
            half_life_days: 30.0,
            mmr_lambda: 0.7,
            auto_recall: true,
            recall_top_k: 3,
            recall_tokens: 400,
            recall_min_score: 0.25,
            flush: true,
        }
    }
}

impl RecallSettings {
    /// Reads the `memory` section (`None`, `null` or absent means the defaults).
    pub fn from_section(section: Option<&Value>) -> Result<RecallSettings, SettingsError> {
        let mut settings = RecallSettings::default();
        let map = match section {
            None | Some(Value::Null) => return Ok(settings),
            Some(Value::Object(map)) => map,
            Some(other) => return Err(invalid("", format!("expected an object, got {other}"))),
        };
        let reader = Reader { map };
        if let Some(model) = reader.get("embedding", "embedding") {
            match model {
                Value::String(name) if !name.trim().is_empty() => settings.embedding = Some(name.trim().to_owned()),
                Value::String(_) => {}
                other => return Err(invalid("embedding", format!("expected an embedding model name, got {other}"))),
            }
        }
        settings.vector_weight = reader.fraction("vectorWeight", "vector_weight", settings.vector_weight)?;
        settings.text_weight = reader.fraction("textWeight", "text_weight", settings.text_weight)?;
        if settings.vector_weight + settings.text_weight <= 0.0 {
            return Err(invalid("textWeight", "vectorWeight and textWeight cannot both be 0".into()));
        }
        settings.mmr_lambda = reader.fraction("mmrLambda", "mmr_lambda", settings.mmr_lambda)?;
        settings.recall_min_score = reader.fraction("recallMinScore", "recall_min_score", settings.recall_min_score)?;
        if let Some(days) = reader.get("halfLifeDays", "half_life_days") {
            settings.half_life_days = days
                .as_f64()
                .filter(|d| *d >= 0.0)
                .ok_or_else(|| invalid("halfLifeDays", format!("expected a number of days ≥ 0, got {days}")))?;
        }
        settings.auto_recall = reader.flag("autoRecall", "auto_recall", settings.auto_recall)?;
        settings.flush = reader.flag("flush", "flush", settings.flush)?;
        settings.recall_top_k = reader.count("recallTopK", "recall_top_k", settings.recall_top_k)?;
        settings.recall_tokens = reader.count("recallTokens", "recall_tokens", settings.recall_tokens)?;
        Ok(settings)
    }

    /// One line for `oxibot status`: which search runs, said plainly.
    pub fn describe(&self) -> String {
        let search = match &self.embedding {
            Some(model) => format!(
                "hybrid search: BM25 keywords ({:.2}) + embeddings from '{model}' ({:.2})",
                self.text_weight, self.vector_weight
            ),
            None => "keyword search (BM25) only; set memory.embedding to a model for semantic search".to_owned(),
        };
        let recall = if self.auto_recall {
            format!("auto-recall on (top {}, ≤{} tokens)", self.recall_top_k, self.recall_tokens)
        } else {
            "auto-recall off".to_owned()
        };
        format!("{search}; {recall}")
    }
}

fn invalid(key: &'static str, problem: String) -> SettingsError {
    SettingsError { key, problem }
}

/// Looks keys up under either spelling, ignoring `null`.
struct Reader<'a> {
    map: &'a Map<String, Value>,
}

impl Reader<'_> {
    fn get(&self, camel: &str, snake: &str) -> Option<&Value> {
        self.map.get(camel).or_else(|| self.map.get(snake)).filter(|v| !v.is_null())
    }

    fn fraction(&self, camel: &'static str, snake: &str, default: f64) -> Result<f64, SettingsError> {
        match self.get(camel, snake) {
            None => Ok(default),
            Some(value) => value
                .as_f64()
                .filter(|n| (0.0..=1.0).contains(n))
                .ok_or_else(|| invalid(camel, format!("expected a number from 0 to 1, got {value}"))),
        }
    }

    fn flag(&self, camel: &'static str, snake: &str, default: bool) -> Result<bool, SettingsError> {
        match self.get(camel, snake) {
            None => Ok(default),
            Some(value) => {
                value.as_bool().ok_or_else(|| invalid(camel, format!("expected true or false, got {value}")))
            }
        }
    }

    fn count(&self, camel: &'static str, snake: &str, default: usize) -> Result<usize, SettingsError> {
        match self.get(camel, snake) {
            None => Ok(default),
            Some(value) => value
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| invalid(camel, format!("expected a whole number ≥ 0, got {value}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_absent_section_gives_keyword_search_with_auto_recall() {
        let settings = RecallSettings::from_section(None).unwrap();
        assert_eq!(settings, RecallSettings::default());
        assert!(settings.describe().starts_with("keyword search (BM25) only"), "{}", settings.describe());
    }

    #[test]
    fn both_spellings_are_read() {
        let section =
            json!({"embedding": "text-embedding-3-small", "auto_recall": false, "recallTopK": 5, "text_weight": 0.5});
        let settings = RecallSettings::from_section(Some(&section)).unwrap();
        assert_eq!(settings.embedding.as_deref(), Some("text-embedding-3-small"));
        assert!(!settings.auto_recall);
        assert_eq!((settings.recall_top_k, settings.text_weight), (5, 0.5));
        assert!(settings.describe().contains("hybrid search"));
    }

    #[test]
    fn a_wrong_value_names_its_key() {
        for (section, key) in [
            (json!({"embedding": 3}), "memory.embedding"),
            (json!({"vectorWeight": 2}), "memory.vectorWeight"),
            (json!({"autoRecall": "yes"}), "memory.autoRecall"),
            (json!({"recallTokens": -1}), "memory.recallTokens"),
            (json!({"vectorWeight": 0, "textWeight": 0}), "memory.textWeight"),
        ] {
            let error = RecallSettings::from_section(Some(&section)).unwrap_err().to_string();
            assert!(error.starts_with(key), "{error}");
        }
        assert!(RecallSettings::from_section(Some(&json!([]))).is_err());
    }
}
