// SPDX-License-Identifier: GPL-2.0

//! RCX: NUMA-aware update-side synchronisation for RCU.
//!
//! RCX (chapter 3 of the thesis this project follows) keeps RCU's readers
//! unchanged and reorganises the updaters.  Every RCX-protected item is
//! guarded by one lock word per NUMA node and one global lock, each on its
//! own cache line.  An updater first wins its own node's word on every item
//! it will touch, so updaters of one node settle their contention locally,
//! and only the winners go on to take the items' global locks, revalidate
//! and update.  An update that finds all its global locks free takes them
//! at once and skips the words: with nothing to settle, it costs one
//! atomic per item, as the RCU baseline's one lock does.
//!
//! The thesis embeds the words and the lock in each item.  Here they live
//! in a table of [`LOCK_SLOTS`] lock slots owned by the update side, and an
//! item is guarded by the slot its address hashes to: readers then walk
//! items as small as the RCU baseline's (a profile of the benchmark showed
//! the readers paying for 256 bytes of lock state per item, and the
//! updaters for a second allocation per insertion, the slab churn of which
//! was most of their cost).  Two items of one update that share a slot
//! take it once; a slot shared with another update's item only makes the
//! two updates wait for each other, as two updates of one item would.
//!
//! This crate root holds the update protocol shared by the RCX list and hash
//! table ([`Rcx`], [`Header`], `HeaderRef`); the modules are:
//!
//! - [`node_lock`]: the per-node lock words, sized at run time from
//!   `nr_node_ids`;
//! - `global`: the global locks, taken with their rank as the lockdep
//!   subclass or all at once by an uncontended update;
//! - [`list`]: the RCX sorted list of `u64` keys;
//! - [`hash`]: the RCX hash table, whose buckets are RCX lists;
//! - [`baseline`]: RCU list and hash table with spinlocked updaters, the
//!   baselines of the benchmark.
//!
//! Phase 1 runs in an Intel RTM transaction where the CPU has RTM
//! ([`Mode::Auto`]), as an ordered atomic acquisition otherwise
//! ([`Mode::Fallback`]), or in a software emulation of the transaction with
//! the same commit and abort outcomes ([`Mode::Emulated`]), so that the
//! transactional path and its abort handling run on any machine.
//!
//! See `Documentation/mm/rcx.rst`.

use core::{
    ffi::c_uint,
    sync::atomic::{AtomicU64, Ordering},
};
use kernel::{
    mm::numa::{self, NodeId},
    prelude::*,
    processor::{cpu_relax, current_cpu_hint},
};

use global::GlobalGuard;
pub(crate) use global::{GlobalLock, GlobalSet};
use node_lock::{CacheAligned, NodeLocks, NodeWords};

pub mod baseline;
mod global;
pub mod hash;
pub mod list;
pub mod node_lock;

#[cfg(CONFIG_RCX_KUNIT_TEST)]
mod tests;

// RCXVM: mprotect() under the mmap read lock (phase 1: the decision and
// its tests).
#[cfg(CONFIG_RCXVM)]
mod vm;

// The micro-benchmark of the thesis (its C side is `bench.c`).
#[cfg(CONFIG_RCX_BENCH)]
mod bench;

/// Prefix of this crate's log lines (used by `pr_*!`).
const __LOG_PREFIX: &[u8] = b"rcx\0";

/// The C glue in `lock.c` and `htm.c`, declared in `rcx_glue.h` (which
/// `rust/bindings/bindings_helper.h` includes).
mod ffi {
    pub(crate) use kernel::bindings::{
        rcx_htm_available, rcx_htm_lock_words, rcx_lock, rcx_lock_init, rcx_preempt_disable,
        rcx_preempt_enable, rcx_trylock_all, rcx_unlock, rcx_unlock_all,
    };
}

/// Status `rcx_htm_lock_words` returns when its transaction committed.
const HTM_COMMITTED: u32 = kernel::bindings::RCX_HTM_COMMITTED;
/// RTM abort status bits (Intel SDM, "RTM abort status definition").
const HTM_EXPLICIT: u32 = 1 << 0;
const HTM_CONFLICT: u32 = 1 << 2;

/// The most items one update may name (a list removal names two, the
/// thesis's removal three).
pub const MAX_ITEMS: usize = 3;

/// Lock slots of an update side (a power of two).  A list update holds
/// one or two slots, so with four updaters a removal meets one of the six
/// slots the others hold at most, without sharing an item, about once in
/// forty.
pub const LOCK_SLOTS: usize = 512;

kernel::static_assert!(LOCK_SLOTS.is_power_of_two());

/// Consecutive phase-1 aborts after which an update stops retrying its
/// transaction and takes the ordered fallback (the RCU-HTM fallback rule:
/// a transaction that keeps aborting, for capacity, interrupts or
/// conflicts, must not hold its updater back forever).
pub const MAX_TXN_ABORTS: u32 = 8;

/// Proves at compile time that an update names between one and
/// [`MAX_ITEMS`] items.
struct ItemCount<const N: usize>;

impl<const N: usize> ItemCount<N> {
    /// Evaluated, and so checked, when [`Rcx::attempt`] is instantiated
    /// for `N` items.
    const OK: () = assert!(
        N >= 1 && N <= MAX_ITEMS,
        "an update names 1 to MAX_ITEMS items"
    );
}

/// Returns whether the CPU has Intel RTM, i.e. whether [`Mode::Auto`] uses
/// hardware transactions.
pub fn htm_available() -> bool {
    // SAFETY: reads a boot CPU feature bit; no precondition.
    unsafe { ffi::rcx_htm_available() }
}

/// The lock state of one item on its own: one lock word per node (each on
/// its own cache line) and the global lock (on its own line).  An [`Rcx`]
/// keeps the same state for its slots in two packed arrays; tests build
/// `Header`s to name in updates of their own.
#[pin_data]
pub struct Header {
    locks: NodeLocks,
    #[pin]
    global: CacheAligned<GlobalLock>,
}

impl Header {
    /// Returns an initialiser of a header, to run at its final address
    /// (`KBox::pin_init`, `Arc::pin_init`); `ENOMEM` if the node words
    /// cannot be allocated with `flags`.
    // Used only by the KUnit suites.
    #[cfg(CONFIG_RCX_KUNIT_TEST)]
    pub(crate) fn new(flags: kernel::alloc::Flags) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            locks: NodeLocks::new(flags)?,
            global <- CacheAligned::pin_init(GlobalLock::new()),
        }? Error)
    }

    /// Returns the view [`Rcx::attempt`] takes.
    // Used only by the KUnit suites.
    #[cfg(CONFIG_RCX_KUNIT_TEST)]
    pub(crate) fn view(&self) -> HeaderRef<'_> {
        HeaderRef {
            locks: self.locks.words(),
            global: &self.global.0,
        }
    }

    /// Returns the per-node lock words, for layout checks and tests.
    pub fn node_locks(&self) -> &NodeLocks {
        &self.locks
    }

    /// Returns the address of the global lock, for layout checks.
    pub fn global_addr(&self) -> usize {
        &self.global as *const _ as usize
    }
}

/// The synchronisation state of an item as an update sees it: the node
/// words and the global lock of its lock slot.
#[derive(Clone, Copy)]
pub(crate) struct HeaderRef<'a> {
    pub(crate) locks: NodeWords<'a>,
    pub(crate) global: &'a GlobalLock,
}

/// How phase 1 of an update wins the node words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// An RTM transaction where the CPU has RTM, [`Mode::Fallback`] otherwise.
    Auto,
    /// Ordered atomic acquisition of the words, in address order.
    Fallback,
    /// A software emulation of the transaction: aborts when a word is
    /// taken, and besides once in `abort_one_in` attempts at random
    /// (never if 0), counted as a capacity/other abort.
    Emulated {
        /// Inverse probability of an injected abort; 0 for none.
        abort_one_in: u32,
    },
}

/// How phase 1 actually runs, [`Mode`] resolved against the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    Htm,
    Fallback,
    Emulated(u32),
}

/// Counters of an RCX structure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Phase-1 transactions aborted by a conflicting access.
    pub aborts_conflict: u64,
    /// Phase-1 transactions aborted for capacity or any other reason
    /// (including injected aborts of the emulation).
    pub aborts_other: u64,
    /// Phase-1 transactions that aborted themselves on a taken word.
    pub aborts_explicit: u64,
    /// Updates that won their locks but failed revalidation and retried.
    pub revalidations: u64,
    /// Phase-1 acquisitions that took the ordered fallback after
    /// [`MAX_TXN_ABORTS`] consecutive transactional aborts.
    pub fallbacks: u64,
}

impl Stats {
    /// Returns all phase-1 aborts.
    pub fn aborts(&self) -> u64 {
        self.aborts_conflict + self.aborts_other + self.aborts_explicit
    }
}

/// The outcome of one update attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// Phase 2 ran the update and it reported success.
    Done,
    /// Revalidation failed: look the items up again.
    Retry,
}

/// The update side of an RCX structure: the phase-1 path, the lock slots
/// and the counters.
///
/// # Invariants
///
/// `globals` holds a power of two of locks, one per slot, each
/// initialised in place in the vector's buffer by [`global_locks`], and
/// the vector is never grown, shrunk or moved out of (its buffer, and so
/// every lock, never moves: the locks are pinned).
/// `words` holds `nodes` node words per slot, from
/// [`node_lock::alloc_slot_words`], and `nodes` is `nr_node_ids`.
///
/// The slots' locks and words are two arrays of their own, not a lock
/// state per slot allocated apart: an update touches one or two slots
/// at random, and packed arrays keep those touches on few pages (under
/// QEMU's TCG a page missing from the software TLB costs a page walk).
pub struct Rcx {
    path: Path,
    /// Whether an update first tries its slots' global locks alone (see
    /// [`Rcx::attempt`]); tests of phase 1 turn it off.
    try_globals_first: bool,
    globals: KVec<CacheAligned<GlobalLock>>,
    nodes: usize,
    words: KVec<CacheAligned<core::sync::atomic::AtomicUsize>>,
    conflict: AtomicU64,
    other: AtomicU64,
    explicit: AtomicU64,
    revalidations: AtomicU64,
    fallbacks: AtomicU64,
    /// State of the abort injection of the emulation.
    rng: AtomicU64,
}

/// Returns a vector of `n` global locks, each on cache lines of its own,
/// initialised in place in the vector's buffer (`ENOMEM` if it cannot be
/// allocated).
///
/// # Safety
///
/// The locks are pinned: the caller must not grow or shrink the vector or
/// move its elements until it drops it.
unsafe fn global_locks(n: usize) -> Result<KVec<CacheAligned<GlobalLock>>> {
    let mut v = KVec::with_capacity(n, GFP_KERNEL)?;
    for slot in v.spare_capacity_mut().get_mut(..n).ok_or(ENOMEM)? {
        let init = CacheAligned::pin_init(GlobalLock::new());
        // SAFETY: `slot` is valid for writes and uninitialised, and it
        // stays where it is until the vector drops it in place: by the
        // caller's guarantee nothing moves the vector's elements.
        match unsafe { init.__pinned_init(slot.as_mut_ptr()) } {
            Ok(()) => {}
            Err(never) => match never {},
        }
    }
    // SAFETY: the capacity is at least `n`, and the first `n` elements
    // were initialised above.
    unsafe { v.set_len(n) };
    Ok(v)
}

/// Disables preemption while it lives.
struct NoPreempt;

impl NoPreempt {
    fn new() -> Self {
        // SAFETY: paired with `rcx_preempt_enable` in `drop`.
        unsafe { ffi::rcx_preempt_disable() };
        NoPreempt
    }
}

impl Drop for NoPreempt {
    fn drop(&mut self) {
        // SAFETY: `new` disabled preemption.
        unsafe { ffi::rcx_preempt_enable() };
    }
}

impl Rcx {
    /// Returns the update side for `mode`, without counts, with its
    /// [`LOCK_SLOTS`] lock slots (`ENOMEM` if they cannot be allocated).
    pub fn new(mode: Mode) -> Result<Self> {
        Self::with_slots(mode, LOCK_SLOTS)
    }

    /// Returns the update side for `mode` with `nr_slots` lock slots, a
    /// power of two (`EINVAL` otherwise).  Tests use few slots, so that
    /// the items of one update share slots.
    pub(crate) fn with_slots(mode: Mode, nr_slots: usize) -> Result<Self> {
        if !nr_slots.is_power_of_two() {
            return Err(EINVAL);
        }
        let path = match mode {
            Mode::Auto if htm_available() => Path::Htm,
            Mode::Auto | Mode::Fallback => Path::Fallback,
            Mode::Emulated { abort_one_in } => Path::Emulated(abort_one_in),
        };
        // SAFETY: the vector becomes `Self::globals`, which nothing grows,
        // shrinks or moves out of (type invariants).
        let globals = unsafe { global_locks(nr_slots)? };
        let words = node_lock::alloc_slot_words(nr_slots, GFP_KERNEL)?;
        // INVARIANT: a power of two of locks, initialised in place, and
        // the words of as many slots.
        Ok(Self {
            path,
            try_globals_first: true,
            globals,
            nodes: numa::nr_node_ids(),
            words,
            conflict: AtomicU64::new(0),
            other: AtomicU64::new(0),
            explicit: AtomicU64::new(0),
            revalidations: AtomicU64::new(0),
            fallbacks: AtomicU64::new(0),
            rng: AtomicU64::new(0x2545_f491_4f6c_dd1d),
        })
    }

    /// Returns the update side with every update going through phase 1,
    /// even when its global locks are free: for tests of phase 1.
    // Used only by the KUnit suites.
    #[cfg(CONFIG_RCX_KUNIT_TEST)]
    pub(crate) fn phase1_always(mut self) -> Self {
        self.try_globals_first = false;
        self
    }

    /// Returns the lock slot of the item at `item` (any address inside
    /// it; the item's own address is the usual choice).
    #[inline]
    pub(crate) fn slot_of<T>(&self, item: *const T) -> HeaderRef<'_> {
        // Fibonacci hashing of the address without its low bits, which
        // the allocator's alignment makes equal for every item.
        let h = ((item as usize as u64 >> 4).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize;
        // The slot count is a power of two (invariants): the index is in
        // bounds of both arrays.
        let i = h & (self.globals.len() - 1);
        HeaderRef {
            locks: NodeWords::of_slot(&self.words, i, self.nodes),
            global: &self.globals[i].0,
        }
    }

    /// Returns the name of the phase-1 path: `htm`, `fallback` or `emulated`.
    pub fn path_name(&self) -> &'static str {
        match self.path {
            Path::Htm => "htm",
            Path::Fallback => "fallback",
            Path::Emulated(_) => "emulated",
        }
    }

    /// Returns the counters.
    pub fn stats(&self) -> Stats {
        Stats {
            aborts_conflict: self.conflict.load(Ordering::Relaxed),
            aborts_other: self.other.load(Ordering::Relaxed),
            aborts_explicit: self.explicit.load(Ordering::Relaxed),
            revalidations: self.revalidations.load(Ordering::Relaxed),
            fallbacks: self.fallbacks.load(Ordering::Relaxed),
        }
    }

    fn count(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether the emulation injects an abort into this attempt.
    fn inject(&self, one_in: u32) -> bool {
        if one_in == 0 {
            return false;
        }
        // splitmix64 over a shared counter: cheap and good enough to pick
        // attempts at random.
        let mut z = self
            .rng
            .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
            .wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        z % one_in as u64 == 0
    }

    /// Phase 1: wins `node`'s word on every header for `token`.
    ///
    /// The transactional paths retry an aborted transaction (counting each
    /// abort by cause) up to [`MAX_TXN_ABORTS`] times in a row, then take
    /// the ordered fallback, so phase 1 always ends with the words won.
    /// The fallback mixes safely with transactions: a transaction takes
    /// all its words or none and aborts on a word the fallback holds.
    fn phase1(&self, hdrs: &[HeaderRef<'_>], node: NodeId, token: usize) {
        for _ in 0..self.txn_tries() {
            if self.transaction(hdrs, node, token) {
                return;
            }
        }
        if self.path != Path::Fallback {
            Self::count(&self.fallbacks);
        }
        // Address order (the caller sorted `hdrs`): a waiter holds only
        // words below the one it waits for, so no cycle.
        for h in hdrs {
            while h.locks.try_lock(node, token).is_err() {
                cpu_relax();
            }
        }
    }

    /// Transactions phase 1 tries before the fallback: none on the
    /// fallback path.
    fn txn_tries(&self) -> u32 {
        match self.path {
            Path::Fallback => 0,
            Path::Htm | Path::Emulated(_) => MAX_TXN_ABORTS,
        }
    }

    /// One phase-1 transaction: wins `node`'s word on every header for
    /// `token`, or takes none of them and returns `false` (an abort,
    /// counted by cause).
    fn transaction(&self, hdrs: &[HeaderRef<'_>], node: NodeId, token: usize) -> bool {
        // Listing 3.5, line 14: wait until the words look free, so that
        // the transaction is not doomed from the start.
        for h in hdrs {
            while h.locks.holder(node).is_some() {
                cpu_relax();
            }
        }
        match self.path {
            Path::Fallback => false,
            Path::Htm => {
                // One word per header, at most `MAX_ITEMS` (`attempt`
                // passes distinct headers of at most that many items).
                let mut words = [core::ptr::null_mut::<usize>(); MAX_ITEMS];
                let n = hdrs.len().min(MAX_ITEMS);
                for (w, h) in words.iter_mut().zip(&hdrs[..n]) {
                    *w = h.locks.word_ptr(node);
                }
                // SAFETY: `path` is `Htm` only if the CPU has RTM; the
                // first `n` entries of `words` are valid words, which live
                // as long as the headers the caller borrows.
                let status = unsafe { ffi::rcx_htm_lock_words(words.as_ptr(), n as c_uint, token) };
                if status == HTM_COMMITTED {
                    return true;
                }
                if status & HTM_EXPLICIT != 0 {
                    Self::count(&self.explicit);
                } else if status & HTM_CONFLICT != 0 {
                    Self::count(&self.conflict);
                } else {
                    Self::count(&self.other);
                }
                false
            }
            Path::Emulated(one_in) => self.emulated_txn(hdrs, node, token, one_in),
        }
    }

    /// The emulated transaction of phase 1: takes `node`'s word on every
    /// header for `token`, or none of them and returns `false` (an abort,
    /// counted by cause), as an RTM transaction would.
    pub(crate) fn emulated_txn(
        &self,
        hdrs: &[HeaderRef<'_>],
        node: NodeId,
        token: usize,
        one_in: u32,
    ) -> bool {
        // What a real transaction could suffer at any point: capacity,
        // interrupt, page fault...
        if self.inject(one_in) {
            Self::count(&self.other);
            return false;
        }
        // The transaction body: a taken word aborts explicitly.
        if hdrs.iter().any(|h| h.locks.holder(node).is_some()) {
            Self::count(&self.explicit);
            return false;
        }
        // The writes: a concurrent "transaction" that got a word first
        // conflicts with this one, which then takes nothing.
        for (i, h) in hdrs.iter().enumerate() {
            if h.locks.try_lock(node, token).is_err() {
                for g in &hdrs[..i] {
                    let _ = g.locks.unlock(node, token);
                }
                Self::count(&self.conflict);
                return false;
            }
        }
        true
    }

    /// Runs one update attempt on the `N` items of `hdrs` (`N` is 1 to
    /// [`MAX_ITEMS`], checked at compile time; items that share a lock
    /// slot are locked once): the global locks at once if they are all
    /// free (unless [`Rcx::phase1_always`]), otherwise phase 1 and then the
    /// global locks in address order; then `update`, which revalidates
    /// and, if that succeeds, updates and returns `true`.  All locks are
    /// released before returning.
    ///
    /// The caller must be in an RCU read-side critical section that keeps
    /// the items alive, and `update` must not sleep.
    pub(crate) fn attempt<const N: usize>(
        &self,
        mut hdrs: [HeaderRef<'_>; N],
        update: impl FnOnce() -> bool,
    ) -> Attempt {
        let () = ItemCount::<N>::OK;
        hdrs.sort_unstable_by_key(|h| h.global as *const GlobalLock as usize);
        // The distinct headers, still in address order: a header named
        // twice (two items of one slot) is locked once, or the updater
        // would wait for itself.
        let mut n = 0;
        for i in 0..N {
            if n == 0 || !core::ptr::eq(hdrs[i].global, hdrs[n - 1].global) {
                hdrs[n] = hdrs[i];
                n += 1;
            }
        }
        let hdrs = &hdrs[..n];
        // Uncontended: if every global lock is free, take them at once
        // and skip phase 1, whose node words only settle contention.  A
        // trylock never waits, so this mixes with updates in phase 2 as
        // they mix with each other (exclusion is the global locks'); a
        // held lock, or waiters queued on it, make it fail and send the
        // update through phase 1 like any contended one, after releasing
        // what it took.
        if self.try_globals_first {
            let mut locks: [&GlobalLock; N] = [hdrs[0].global; N];
            for (l, h) in locks.iter_mut().zip(hdrs) {
                *l = h.global;
            }
            if let Some(held) = GlobalSet::try_lock(&locks[..hdrs.len()]) {
                let done = update();
                drop(held);
                return self.outcome(done);
            }
        }
        self.attempt_contended::<N>(hdrs, update)
    }

    /// [`Rcx::attempt`] through both phases, on its distinct headers in
    /// address order.  Out of line and cold: an uncontended update's code
    /// stays small, which under TCG keeps it off page boundaries (see
    /// `Documentation/mm/rcx.rst`).
    #[cold]
    #[inline(never)]
    fn attempt_contended<const N: usize>(
        &self,
        hdrs: &[HeaderRef<'_>],
        update: impl FnOnce() -> bool,
    ) -> Attempt {
        // The node and the token stay valid for the whole attempt: the task
        // cannot migrate, and no other updater runs on this CPU.
        let _np = NoPreempt::new();
        let node = numa::current_node();
        let token = current_cpu_hint() as usize + 1;
        self.phase1(hdrs, node, token);
        let done = {
            let _held: [Option<GlobalGuard<'_>>; N] =
                core::array::from_fn(|rank| hdrs.get(rank).map(|h| h.global.lock(rank)));
            update()
        };
        for h in hdrs {
            h.locks.release_held(node, token);
        }
        self.outcome(done)
    }

    /// Returns the outcome of an attempt whose update returned `done`,
    /// counting a failed revalidation.
    fn outcome(&self, done: bool) -> Attempt {
        if done {
            Attempt::Done
        } else {
            Self::count(&self.revalidations);
            Attempt::Retry
        }
    }
}

/// Lets other tasks run between retries of an update.
pub(crate) fn backoff() {
    cpu_relax();
}
