//! The tool registry: which plugin serves which tool name, with clashes resolved by precedence.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use actix::Recipient;
use oxibot_proto::ToolSpec;
use tokio::sync::watch;

use super::slot::{Evict, SlotState};

/// Where a tool call goes.
#[derive(Clone)]
pub struct Route {
    /// The plugin's name.
    pub plugin: String,
    /// The tool as declared in the manifest.
    pub spec: Arc<ToolSpec>,
    /// The plugin's state, to wait for it to be ready.
    pub slot: watch::Receiver<SlotState>,
}

struct Owner {
    route: Route,
    /// Discovery precedence of the owning plugin (lower wins a clash).
    index: usize,
    /// The owner's actor, to disable it when a plugin of higher precedence claims its tools.
    addr: Recipient<Evict>,
    /// The owner's published state, marked failed at once when it loses a clash.
    state: Arc<watch::Sender<SlotState>>,
}

/// A plugin that lost a tool-name clash and is to be disabled.
struct Loser {
    addr: Recipient<Evict>,
    state: Arc<watch::Sender<SlotState>>,
    reason: String,
}

/// Tool name → owning plugin.
#[derive(Default)]
pub struct ToolRegistry {
    tools: RwLock<HashMap<String, Owner>>,
    /// Every spec as one JSON array, built on demand and dropped whenever `tools` changes
    /// (the agent measures it each turn).
    json: RwLock<Option<Arc<str>>>,
}

impl ToolRegistry {
    /// Registers `tools` for `plugin`, replacing what it registered before.
    ///
    /// If another plugin of higher precedence (lower `index`) already owns one of the names,
    /// nothing is registered and the clash is returned as a message. If a plugin of lower
    /// precedence owns it, that plugin is disabled and loses all its tools.
    pub fn claim(
        &self,
        plugin: &str,
        index: usize,
        tools: &[ToolSpec],
        slot: &Arc<watch::Sender<SlotState>>,
        addr: &Recipient<Evict>,
    ) -> Result<(), String> {
        let mut map = self.tools.write().unwrap_or_else(PoisonError::into_inner);
        *self.json.write().unwrap_or_else(PoisonError::into_inner) = None;
        let mut losers: Vec<(String, Loser)> = Vec::new();
        for tool in tools {
            let Some(owner) = map.get(&tool.name) else { continue };
            if owner.route.plugin == plugin {
                continue;
            }
            if owner.index < index {
                return Err(format!(
                    "tool '{}' is already provided by plugin '{}'; rename or remove one of them",
                    tool.name, owner.route.plugin
                ));
            }
            let reason = format!(
                "tool '{}' is also provided by plugin '{plugin}', which takes precedence; rename or remove one of them",
                tool.name
            );
            losers.push((
                owner.route.plugin.clone(),
                Loser { addr: owner.addr.clone(), state: owner.state.clone(), reason },
            ));
        }
        for (name, loser) in losers {
            map.retain(|_, owner| owner.route.plugin != name);
            // Publish the verdict now; the actor kills the process when it handles Evict.
            loser.state.send_replace(SlotState::Failed { reason: loser.reason.clone() });
            loser.addr.do_send(Evict { reason: loser.reason });
        }
        map.retain(|_, owner| owner.route.plugin != plugin);
        for tool in tools {
            let route = Route { plugin: plugin.to_owned(), spec: Arc::new(tool.clone()), slot: slot.subscribe() };
            map.insert(tool.name.clone(), Owner { route, index, addr: addr.clone(), state: slot.clone() });
        }
        Ok(())
    }

    /// The route for a tool name.
    pub fn route(&self, tool: &str) -> Option<Route> {
        self.tools.read().unwrap_or_else(PoisonError::into_inner).get(tool).map(|owner| owner.route.clone())
    }

    /// Every registered tool, sorted by name.
    pub fn specs(&self) -> Vec<ToolSpec> {
        let map = self.tools.read().unwrap_or_else(PoisonError::into_inner);
        let mut specs: Vec<ToolSpec> = map.values().map(|owner| ToolSpec::clone(&owner.route.spec)).collect();
        specs.sort_by(|a, b| a.name.cmp(&b.name));
        specs
    }

    /// [`ToolRegistry::specs`] as JSON text, cached until the registry changes.
    pub fn specs_json(&self) -> Arc<str> {
        if let Some(json) = self.json.read().unwrap_or_else(PoisonError::into_inner).as_ref() {
            return json.clone();
        }
        // Built under the read lock, so a `claim` (which needs the write lock) cannot slip
        // between reading the specs and caching their JSON.
        let map = self.tools.read().unwrap_or_else(PoisonError::into_inner);
        let mut specs: Vec<&ToolSpec> = map.values().map(|owner| &*owner.route.spec).collect();
        specs.sort_by(|a, b| a.name.cmp(&b.name));
        let json: Arc<str> = serde_json::to_string(&specs).unwrap_or_default().into();
        *self.json.write().unwrap_or_else(PoisonError::into_inner) = Some(json.clone());
        json
    }

    /// Registered names closest to `tool`, for "did you mean" hints.
    pub fn suggest(&self, tool: &str) -> Option<String> {
        let map = self.tools.read().unwrap_or_else(PoisonError::into_inner);
        map.keys()
            .map(|name| (edit_distance(name, tool), name))
            .filter(|(d, _)| *d <= 3)
            .min()
            .map(|(_, name)| name.clone())
    }
}

/// Levenshtein distance, for short names.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(previous + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::edit_distance;

    #[test]
    fn edit_distance_counts_single_character_edits() {
        assert_eq!(edit_distance("read_file", "read_file"), 0);
        assert_eq!(edit_distance("read_file", "read_files"), 1);
        assert_eq!(edit_distance("read_file", "reed_fiel"), 3);
        assert_eq!(edit_distance("", "exec"), 4);
    }
}
