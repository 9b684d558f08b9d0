//! Small helpers plugin code keeps needing: an error with its causes as one line, and config
//! strings where `""` means "not set".

use serde::{Deserialize, Deserializer};

/// An error and its sources, `outer: inner: …`.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// `#[serde(deserialize_with = "non_empty")]`: an optional string, `""` read as absent.
pub fn non_empty<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    let value: Option<String> = Option::deserialize(deserializer)?;
    Ok(value.filter(|text| !text.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Wrapped(std::io::Error);

    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("request failed")
        }
    }

    impl std::error::Error for Wrapped {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn an_error_chain_names_every_cause_in_order() {
        let error = Wrapped(std::io::Error::other("connection refused"));
        assert_eq!(error_chain(&error), "request failed: connection refused");
    }
}
