// SPDX-License-Identifier: GPL-2.0

//! Phase timing of the allocation path, for the benchmark's profile pass.
//!
//! The benchmark (`bench.rs`) switches it on for
//! its profile pass only; otherwise every probe is one relaxed load, and
//! without the benchmark none is compiled at all.  Time is summed per
//! phase over all allocations and discards while on.

#[cfg(CONFIG_GCMA_BENCH)]
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The phases timed.
#[derive(Clone, Copy)]
pub(crate) enum Phase {
    /// Map search and claim, under the map lock (all lock rounds).
    Search,
    /// The discard of the claimed range's lent pages
    /// (`dmem_client::discard()`), as the allocator sees it.
    Hook,
    /// The DMEM instances dropping the pages they hold (inside the
    /// hook; timed per chunk of pages).
    DmemDiscard,
    /// Giving them the state of allocated pages: the handoff, or the
    /// page allocator's free steps for a compound allocation (inside
    /// the hook; timed per chunk).
    PageState,
    /// Clearing the lent bits of the claimed range (map lock).
    Finish,
}

/// Number of [`Phase`]s.
#[cfg(CONFIG_GCMA_BENCH)]
pub(crate) const PHASES: usize = 5;

#[cfg(CONFIG_GCMA_BENCH)]
static ON: AtomicBool = AtomicBool::new(false);
#[cfg(CONFIG_GCMA_BENCH)]
static NS: [AtomicU64; PHASES] = [const { AtomicU64::new(0) }; PHASES];
#[cfg(CONFIG_GCMA_BENCH)]
static CALLS: [AtomicU64; PHASES] = [const { AtomicU64::new(0) }; PHASES];

/// A start time, if profiling is on.
#[inline]
pub(crate) fn start() -> Option<u64> {
    #[cfg(CONFIG_GCMA_BENCH)]
    if ON.load(Ordering::Relaxed) {
        return Some(now_ns());
    }
    None
}

/// Adds the time since `t0` (from [`start`] or a previous `end`) to
/// `phase` and returns the current time, so phases can be chained.
#[inline]
pub(crate) fn end(phase: Phase, t0: Option<u64>) -> Option<u64> {
    #[cfg(CONFIG_GCMA_BENCH)]
    if let Some(t0) = t0 {
        let t = now_ns();
        NS[phase as usize].fetch_add(t.saturating_sub(t0), Ordering::Relaxed);
        CALLS[phase as usize].fetch_add(1, Ordering::Relaxed);
        return Some(t);
    }
    let _ = (phase, t0);
    None
}

/// The profile's clock, `local_clock()` in nanoseconds: cheap (under
/// QEMU `ktime_get()` reads the HPET), and monotonic on one CPU, which
/// is where the benchmark runs the profiled allocations (its kthread
/// is bound to one).
#[cfg(CONFIG_GCMA_BENCH)]
#[inline]
fn now_ns() -> u64 {
    kernel::processor::local_clock_ns()
}

/// Switches profiling on or off.
#[cfg(CONFIG_GCMA_BENCH)]
pub(crate) fn set(on: bool) {
    ON.store(on, Ordering::Relaxed);
}

/// Clears the sums.
#[cfg(CONFIG_GCMA_BENCH)]
pub(crate) fn reset() {
    for c in NS.iter().chain(CALLS.iter()) {
        c.store(0, Ordering::Relaxed);
    }
}

/// The sums: nanoseconds and probe count of each phase.
#[cfg(CONFIG_GCMA_BENCH)]
pub(crate) fn sums() -> [(u64, u64); PHASES] {
    core::array::from_fn(|i| {
        (
            NS[i].load(Ordering::Relaxed),
            CALLS[i].load(Ordering::Relaxed),
        )
    })
}
