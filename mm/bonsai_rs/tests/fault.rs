// SPDX-License-Identifier: GPL-2.0

//! Fault injection and live-node count of the node allocator, consulted by
//! the shared tree code through `crate::platform`.
//!
//! The state is global: only one case may inject faults at a time, which
//! holds since KUnit runs cases one after the other.

use core::sync::atomic::{AtomicIsize, Ordering};

/// Allocations still allowed to succeed; negative: no injection.
static ALLOWED: AtomicIsize = AtomicIsize::new(-1);
/// Nodes allocated minus nodes freed, over all trees.
static LIVE: AtomicIsize = AtomicIsize::new(0);

/// Whether the next allocation fails: after `ALLOWED` more successes.
pub(crate) fn inject_alloc_failure() -> bool {
    match ALLOWED.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
        (n > 0).then(|| n - 1)
    }) {
        // Allowed, and one allocation fewer to go.
        Ok(_) => false,
        // Zero: fail; negative: no injection.
        Err(n) => n == 0,
    }
}

/// Counts a node allocated.
pub(crate) fn node_allocated() {
    LIVE.fetch_add(1, Ordering::Relaxed);
}

/// Counts a node freed.
pub(crate) fn node_freed() {
    LIVE.fetch_sub(1, Ordering::Relaxed);
}

/// Lets `n` more allocations succeed, then fails every one.
pub(crate) fn fail_after(n: usize) {
    ALLOWED.store(n as isize, Ordering::Relaxed);
}

/// Stops injecting failures.
pub(crate) fn stop() {
    ALLOWED.store(-1, Ordering::Relaxed);
}

/// Nodes allocated and not freed.
pub(crate) fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}
