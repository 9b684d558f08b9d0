//! Bringing nanobot's approved senders (`<nanobot>/pairing.json`: `approved` maps a channel
//! to sender ids) into oxibot's `<data dir>/pairing.json`. Pending codes are not brought
//! over: nanobot's expire within minutes, and a sender who writes again gets one from oxibot.

use std::collections::BTreeMap;
use std::fs;

use serde_json::Value;

use super::{Action, Area, ImportOptions, Report, Source, count};
use crate::gateway::access::Access;

/// Adds nanobot's approved senders to oxibot's pairing store.
pub fn import(source: &Source, options: &ImportOptions, report: &mut Report) {
    let path = source.dir.join("pairing.json");
    let Ok(text) = fs::read_to_string(&path) else { return };
    let Ok(value) = serde_json::from_str::<Value>(&text) else {
        return report.push(
            Area::Pairing,
            Action::Fail,
            format!("{} is not JSON; no approvals brought over", path.display()),
        );
    };
    let access = Access::open(&options.data_dir.join("pairing.json"));
    let known = access.approved();
    for (channel, ids) in approved(&value) {
        let already: &[String] = known.get(&channel).map_or(&[], Vec::as_slice);
        let new: Vec<String> = ids.iter().filter(|id| !already.contains(id)).cloned().collect();
        if new.is_empty() {
            report.push(Area::Pairing, Action::Skip, format!("{channel} senders {}: already approved", ids.join(", ")));
            continue;
        }
        if !options.dry_run
            && let Err(error) = access.approve_senders(&channel, &new)
        {
            report.push(Area::Pairing, Action::Fail, error.to_string());
            continue;
        }
        report.push(Area::Pairing, Action::Add, format!("{channel} senders {} to the approved ones", new.join(", ")));
    }
    let pending = value.get("pending").and_then(Value::as_object).map_or(0, |pending| pending.len());
    if pending > 0 {
        report.push(
            Area::Pairing,
            Action::Note,
            format!(
                "{} not brought over: a sender who writes again gets a new code",
                count(pending, "pending pairing code is", "pending pairing codes are")
            ),
        );
    }
}

/// The approved sender ids per channel (ids written as numbers read as text).
fn approved(value: &Value) -> BTreeMap<String, Vec<String>> {
    let Some(channels) = value.get("approved").and_then(Value::as_object) else { return BTreeMap::new() };
    channels
        .iter()
        .map(|(channel, ids)| {
            let ids = ids.as_array().into_iter().flatten().filter_map(|id| match id {
                Value::String(id) => Some(id.clone()),
                Value::Number(id) => Some(id.to_string()),
                _ => None,
            });
            (channel.clone(), ids.collect::<Vec<_>>())
        })
        .filter(|(_, ids)| !ids.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approved_senders_are_read_per_channel_and_numbers_become_text() {
        let value =
            serde_json::json!({"approved": {"telegram": ["42", 7], "slack": [], "discord": null}, "pending": {}});
        let expected: BTreeMap<String, Vec<String>> =
            [("telegram".to_owned(), vec!["42".to_owned(), "7".to_owned()])].into();
        assert_eq!(approved(&value), expected);
    }
}
