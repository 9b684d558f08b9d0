//! Lenient argument parsing: models sometimes send `"20"` for 20 or `"true"` for true, and
//! `null` for "not given"; these deserializers accept that instead of failing the call.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// An optional non-negative integer: a JSON number, a numeric string, or null/absent.
pub fn count<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<usize>, D::Error> {
    let value = Option::<Value>::deserialize(deserializer)?;
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => number_to_count(&n).map(Some).map_err(D::Error::custom),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => s
            .trim()
            .parse::<usize>()
            .map(Some)
            .map_err(|_| D::Error::custom(format!("expected a whole number, got \"{s}\""))),
        Some(other) => Err(D::Error::custom(format!("expected a whole number, got {other}"))),
    }
}

/// A boolean that also accepts `"true"`/`"false"` and treats null/absent as false.
pub fn flag<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    let value = Option::<Value>::deserialize(deserializer)?;
    match value {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(b),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => Ok(true),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("false") || s.is_empty() => Ok(false),
        Some(other) => Err(D::Error::custom(format!("expected true or false, got {other}"))),
    }
}

/// An optional string where null means absent and an empty string means absent too.
pub fn optional_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    let value = Option::<String>::deserialize(deserializer)?;
    Ok(value.filter(|s| !s.trim().is_empty()))
}

fn number_to_count(n: &serde_json::Number) -> Result<usize, String> {
    if let Some(u) = n.as_u64() {
        return usize::try_from(u).map_err(|_| format!("{n} is too large"));
    }
    match n.as_f64() {
        Some(f) if f >= 0.0 && f.fract() == 0.0 && f <= u32::MAX as f64 => Ok(f as usize),
        _ => Err(format!("expected a whole number of at least 0, got {n}")),
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Deserialize, Debug)]
    struct Probe {
        #[serde(default, deserialize_with = "super::count")]
        n: Option<usize>,
        #[serde(default, deserialize_with = "super::flag")]
        b: bool,
        #[serde(default, deserialize_with = "super::optional_text")]
        s: Option<String>,
    }

    fn probe(value: serde_json::Value) -> Result<Probe, serde_json::Error> {
        serde_json::from_value(value)
    }

    #[test]
    fn numbers_arrive_as_integers_floats_or_strings() {
        assert_eq!(probe(json!({"n": 5})).unwrap().n, Some(5));
        assert_eq!(probe(json!({"n": 5.0})).unwrap().n, Some(5));
        assert_eq!(probe(json!({"n": " 7 "})).unwrap().n, Some(7));
        assert_eq!(probe(json!({"n": null})).unwrap().n, None);
        assert_eq!(probe(json!({})).unwrap().n, None);
    }

    #[test]
    fn negative_or_fractional_numbers_are_refused_with_a_reason() {
        let err = probe(json!({"n": -1})).unwrap_err().to_string();
        assert!(err.contains("whole number"), "{err}");
        assert!(probe(json!({"n": 1.5})).is_err());
        assert!(probe(json!({"n": "ten"})).is_err());
    }

    #[test]
    fn flags_accept_booleans_strings_and_null() {
        assert!(probe(json!({"b": true})).unwrap().b);
        assert!(probe(json!({"b": "True"})).unwrap().b);
        assert!(!probe(json!({"b": null})).unwrap().b);
        assert!(probe(json!({"b": 3})).is_err());
    }

    #[test]
    fn empty_strings_count_as_not_given() {
        assert_eq!(probe(json!({"s": ""})).unwrap().s, None);
        assert_eq!(probe(json!({"s": "x"})).unwrap().s.as_deref(), Some("x"));
    }
}
