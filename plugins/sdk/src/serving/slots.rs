//! Connection slots shared fairly: a server holds at most so many connections, and when all are
//! taken, the oldest connection that is doing nothing (still sending its request, or idle
//! between requests) makes room for the newcomer. One local process that opens a thousand
//! slow connections therefore cannot keep a quick client out: every client comes from
//! 127.0.0.1, so limits per address would mean nothing, but a connection only keeps its slot
//! while it is being served.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::oneshot;

/// The table of open connections, oldest first.
#[derive(Clone)]
pub struct Slots {
    table: Arc<Mutex<Table>>,
    capacity: usize,
}

#[derive(Default)]
struct Table {
    /// Numbers grow with every connection, so the first entry is the oldest.
    next: u64,
    open: BTreeMap<u64, Entry>,
}

struct Entry {
    /// Requests (or upgraded sessions) being served on the connection now.
    busy: usize,
    /// Fired when the connection must give its slot up.
    evict: Option<oneshot::Sender<()>>,
}

/// One connection's place; dropping it frees the place.
pub struct Slot {
    table: Arc<Mutex<Table>>,
    number: u64,
    /// Resolves when another connection took this one's place.
    pub evicted: oneshot::Receiver<()>,
}

/// Marks its connection as being served until dropped: a busy connection is never evicted.
pub struct Busy {
    table: Arc<Mutex<Table>>,
    number: u64,
}

impl Slots {
    /// Room for `capacity` connections (at least one).
    pub fn new(capacity: usize) -> Slots {
        Slots { table: Arc::default(), capacity: capacity.max(1) }
    }

    /// A place for a new connection: a free one, else the place of the oldest idle
    /// connection (which is told to go); `None` when every connection is busy.
    pub fn admit(&self) -> Option<Slot> {
        let mut table = lock(&self.table);
        if table.open.len() >= self.capacity {
            let idle = table.open.iter().find(|(_, entry)| entry.busy == 0).map(|(number, _)| *number)?;
            if let Some(evict) = table.open.remove(&idle).and_then(|entry| entry.evict) {
                let _ = evict.send(());
            }
        }
        let number = table.next;
        table.next += 1;
        let (evict, evicted) = oneshot::channel();
        table.open.insert(number, Entry { busy: 0, evict: Some(evict) });
        Some(Slot { table: self.table.clone(), number, evicted })
    }

    /// Connections holding a place now.
    pub fn open(&self) -> usize {
        lock(&self.table).open.len()
    }
}

impl Slot {
    /// Marks the connection busy until the returned guard is dropped.
    pub fn busy(&self) -> Busy {
        self.marker().busy()
    }

    /// A handle that can mark the connection busy from elsewhere (a request handler).
    pub fn marker(&self) -> BusyMarker {
        BusyMarker { table: self.table.clone(), number: self.number }
    }
}

/// Marks one connection busy from a request handler; cheap to clone.
#[derive(Clone)]
pub struct BusyMarker {
    table: Arc<Mutex<Table>>,
    number: u64,
}

impl BusyMarker {
    /// Marks the connection busy until the returned guard is dropped.
    pub fn busy(&self) -> Busy {
        if let Some(entry) = lock(&self.table).open.get_mut(&self.number) {
            entry.busy += 1;
        }
        Busy { table: self.table.clone(), number: self.number }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        lock(&self.table).open.remove(&self.number);
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(entry) = lock(&self.table).open.get_mut(&self.number) {
            entry.busy = entry.busy.saturating_sub(1);
        }
    }
}

fn lock(table: &Mutex<Table>) -> MutexGuard<'_, Table> {
    // A poisoned lock only means a thread panicked while holding it; the table is intact.
    table.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_full_table_evicts_its_oldest_idle_connection_for_a_newcomer() {
        let slots = Slots::new(2);
        let mut first = slots.admit().unwrap();
        let mut second = slots.admit().unwrap();
        let _third = slots.admit().unwrap();
        assert!(first.evicted.try_recv().is_ok(), "the oldest idle connection goes");
        assert!(second.evicted.try_recv().is_err());
        assert_eq!(slots.open(), 2);
    }

    #[test]
    fn busy_connections_keep_their_place_and_a_newcomer_is_refused_when_all_are_busy() {
        let slots = Slots::new(2);
        let first = slots.admit().unwrap();
        let mut second = slots.admit().unwrap();
        let _serving = first.busy();
        let _third = slots.admit().unwrap();
        assert!(second.evicted.try_recv().is_ok(), "the idle one goes, not the older busy one");
        let _also = _third.busy();
        assert!(slots.admit().is_none(), "every connection is busy");
    }

    #[test]
    fn a_dropped_slot_or_busy_guard_frees_its_place() {
        let slots = Slots::new(1);
        let slot = slots.admit().unwrap();
        let serving = slot.marker().busy();
        assert!(slots.admit().is_none());
        drop(serving);
        drop(slot);
        assert_eq!(slots.open(), 0);
        assert!(slots.admit().is_some());
    }
}
