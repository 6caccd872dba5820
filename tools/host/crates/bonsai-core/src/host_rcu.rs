// SPDX-License-Identifier: GPL-2.0

//! A minimal RCU stand-in for host tests: read guards and a
//! `synchronize` that waits for every guard that existed when it started.
//!
//! Readers count themselves in one of two counters, chosen by the current
//! phase.  `synchronize` flips the phase and waits for the old phase's
//! counter to drain; a reader re-checks the phase after counting itself,
//! so no reader that `synchronize` does not wait for can have started
//! before the flip.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;

use crate::tree::{ReadSide, RetiredList};

/// An RCU domain.
#[derive(Default)]
pub struct HostRcu {
    phase: AtomicUsize,
    readers: [AtomicUsize; 2],
    sync: Mutex<()>,
}

/// A read-side critical section of a [`HostRcu`].
pub struct HostGuard<'a> {
    rcu: &'a HostRcu,
    phase: usize,
}

impl HostRcu {
    /// A new domain.
    pub fn new() -> Self {
        Self::default()
    }

    /// Enters a read-side critical section.
    pub fn read_lock(&self) -> HostGuard<'_> {
        loop {
            let phase = self.phase.load(SeqCst) & 1;
            self.readers[phase].fetch_add(1, SeqCst);
            if self.phase.load(SeqCst) & 1 == phase {
                return HostGuard { rcu: self, phase };
            }
            self.readers[phase].fetch_sub(1, SeqCst);
        }
    }

    /// Waits until every read-side section that had started when the call
    /// began has ended.
    pub fn synchronize(&self) {
        let _serialise = self.sync.lock().unwrap_or_else(|e| e.into_inner());
        let old = self.phase.fetch_add(1, SeqCst) & 1;
        while self.readers[old].load(SeqCst) != 0 {
            std::thread::yield_now();
        }
    }

    /// Waits for a grace period, then frees `list`.
    pub fn free_after_grace_period<V>(&self, list: RetiredList<V>) {
        self.synchronize();
        // SAFETY: `synchronize` waited for every read-side section that
        // could have seen the nodes, which were unlinked before the call.
        unsafe { list.free() };
    }
}

impl Drop for HostGuard<'_> {
    fn drop(&mut self) {
        self.rcu.readers[self.phase].fetch_sub(1, SeqCst);
    }
}

// SAFETY: retired lists of trees read under a `HostGuard` are freed only
// through `free_after_grace_period`, which waits for every guard alive when
// it starts (see the module documentation).
unsafe impl ReadSide for HostGuard<'_> {}

/// A read-side proof for single-threaded tests and models that free
/// retired nodes only once all readers are gone (e.g. after joining them).
pub struct NoReclaim;

// SAFETY: whoever uses `NoReclaim` promises to free retired lists only
// when no `NoReclaim`-guarded lookup of the tree can run any more.
unsafe impl ReadSide for NoReclaim {}
