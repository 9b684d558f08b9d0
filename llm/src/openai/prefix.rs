//! The parts of a Chat Completions body that repeat from call to call — the system prompt
//! message and the `tools` array — kept in their wire form, so a call copies them in instead
//! of escaping ten kilobytes of prompt and walking every tool's schema again.
//!
//! An entry is used only for the very same input: the system message compared in full (a
//! `memcmp`, far cheaper than encoding it), the tool list by identity (turns share one list,
//! see `Engine::offered_tools`; the entry holds it, so its address cannot be reused). The
//! bytes are those the encoder gives, so a body is the same whether or not an entry was used.

use std::sync::{Arc, Mutex, PoisonError};

use oxibot_proto::ToolSpec;

use crate::message::ChatMessage;

/// System prompts kept (one per channel that talks at once is plenty).
const SYSTEM_ENTRIES: usize = 4;

/// Something encoded, with its wire form.
type Encoded<T> = (T, Arc<[u8]>);

/// Encoded prefixes of one client's requests.
#[derive(Debug, Default)]
pub(crate) struct PrefixCache {
    /// What is kept, behind one lock (held only to look up or store, never while encoding).
    entries: Mutex<Entries>,
}

/// The kept encodings.
#[derive(Debug, Default)]
struct Entries {
    /// System messages and their wire form, most recently used last.
    systems: Vec<Encoded<ChatMessage>>,
    /// The tool list last encoded and its wire form.
    tools: Option<Encoded<Arc<[ToolSpec]>>>,
}

impl PrefixCache {
    /// The wire form of the system `message`, from `encode` the first time.
    pub(crate) fn system<E>(
        &self,
        message: &ChatMessage,
        encode: impl FnOnce() -> Result<Vec<u8>, E>,
    ) -> Result<Arc<[u8]>, E> {
        {
            let mut entries = self.lock();
            if let Some(at) = entries.systems.iter().position(|(kept, _)| kept == message) {
                let entry = entries.systems.remove(at);
                let bytes = Arc::clone(&entry.1);
                entries.systems.push(entry);
                return Ok(bytes);
            }
        }
        let bytes: Arc<[u8]> = encode()?.into();
        let mut entries = self.lock();
        if entries.systems.len() >= SYSTEM_ENTRIES {
            entries.systems.remove(0);
        }
        entries.systems.push((message.clone(), Arc::clone(&bytes)));
        Ok(bytes)
    }

    /// The wire form of `tools`, from `encode` the first time.
    pub(crate) fn tools<E>(
        &self,
        tools: &Arc<[ToolSpec]>,
        encode: impl FnOnce() -> Result<Vec<u8>, E>,
    ) -> Result<Arc<[u8]>, E> {
        if let Some((_, bytes)) = self.lock().tools.as_ref().filter(|(kept, _)| Arc::ptr_eq(kept, tools)) {
            return Ok(Arc::clone(bytes));
        }
        let bytes: Arc<[u8]> = encode()?.into();
        self.lock().tools = Some((Arc::clone(tools), Arc::clone(&bytes)));
        Ok(bytes)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
