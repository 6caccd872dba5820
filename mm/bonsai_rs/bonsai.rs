// SPDX-License-Identifier: GPL-2.0

//! The Bonsai tree: an RCU-compatible balanced tree of address ranges.
//!
//! [`tree`] holds the algorithm (after Clements, Kaashoek and Zeldovich,
//! "Scalable Address Spaces Using RCU Balanced Trees", ASPLOS 2012); it
//! builds unchanged on the host (`tools/host/crates/bonsai-core`).  This
//! crate root supplies what the algorithm leaves to its environment:
//!
//! - the atomics and allocator hooks ([`platform`]) and the RCU read guard
//!   as the proof of a read-side critical section;
//! - [`RangeTree`], the safe kernel interface: a tree with its writer
//!   mutex, which keeps a reserve of nodes topped up before the mutex is
//!   taken and frees replaced nodes in batches, one RCU callback per
//!   [`RETIRE_BATCH`] nodes; range stores with the maple tree's overwrite
//!   semantics go through its [`WriteGuard`], in a preallocation step that
//!   may sleep and a store that neither sleeps nor allocates;
//! - a debugfs view of a tree's counters (`bonsai/<name>/stats`, through
//!   the C glue in `debugfs.c`);
//! - with `CONFIG_BONSAI_VMA`, the VMA index of every address space
//!   ([`vma`]), on the same writer core as [`RangeTree`].
//!
//! See `Documentation/mm/bonsai.rst`.

use core::{
    ffi::c_void,
    mem, ptr,
    sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering},
};
use kernel::{
    bindings,
    delay::MaySleep,
    error::from_err_ptr,
    new_mutex,
    prelude::*,
    str::CStr,
    sync::{rcu, Mutex},
};

mod retire;
pub mod tree;
mod write_guard;

use retire::RetireBatch;
pub use write_guard::WriteGuard;

#[cfg(CONFIG_BONSAI_KUNIT_TEST)]
mod tests;
#[cfg(CONFIG_BONSAI_VMA)]
mod vma;

/// Prefix of this crate's log lines (used by `pr_*!`).
const __LOG_PREFIX: &[u8] = b"bonsai\0";

/// What the shared tree code takes from its environment: the kernel's
/// atomics are `core`'s; the node-allocator hooks are the fault injection
/// and live-node count of the KUnit suites when those are built, and
/// nothing otherwise.
pub(crate) mod platform {
    pub(crate) use core::sync::atomic::{AtomicPtr, Ordering};

    #[cfg(CONFIG_BONSAI_KUNIT_TEST)]
    pub(crate) use crate::tests::fault::{inject_alloc_failure, node_allocated, node_freed};

    /// Whether the next node allocation should fail: never.
    #[cfg(not(CONFIG_BONSAI_KUNIT_TEST))]
    #[inline]
    pub(crate) fn inject_alloc_failure() -> bool {
        false
    }

    /// A node was allocated.
    #[cfg(not(CONFIG_BONSAI_KUNIT_TEST))]
    #[inline]
    pub(crate) fn node_allocated() {}

    /// A node was freed.
    #[cfg(not(CONFIG_BONSAI_KUNIT_TEST))]
    #[inline]
    pub(crate) fn node_freed() {}
}

// SAFETY: a guard keeps its task inside an RCU read-side critical section
// until dropped, and `RangeTree` frees retired nodes only from an RCU
// callback queued after the writer section that retired them (or after
// `synchronize_rcu()`), which waits for every such section.
unsafe impl tree::ReadSide for rcu::Guard<'_> {}

/// Replaced nodes a tree accumulates before it hands them to RCU in one
/// batch (one `call_rcu()`).
pub const RETIRE_BATCH: usize = 64;

/// What a tree's writer lock protects: the writer mutex of a
/// [`RangeTree`], the mmap write lock for the VMA index of an address
/// space.  Its fields are the crate's own.
pub struct WriterState<V> {
    /// Nodes for the next updates.
    reserve: tree::NodeReserve<V>,
    /// Nodes retired since the last batch was handed to RCU.
    pending: tree::RetiredList<V>,
    /// The box of the next batch; always present when `pending` is not
    /// empty, so a hand-off never allocates.
    spare: Option<KBox<RetireBatch<V>>>,
    /// Batches handed to RCU.
    batches: usize,
}

impl<V> WriterState<V> {
    /// An empty state: no reserve, nothing pending.
    pub(crate) fn new() -> Self {
        Self {
            reserve: tree::NodeReserve::new(),
            pending: tree::RetiredList::new(),
            spare: None,
            batches: 0,
        }
    }

    /// Moves the pending nodes into the spare batch, if there are any.
    pub(crate) fn take_batch(&mut self) -> Option<KBox<RetireBatch<V>>> {
        if self.pending.is_empty() {
            return None;
        }
        let mut b = self.spare.take()?;
        // INVARIANT: the writer sections that retired these nodes have
        // ended; the caller hands the batch to `drop_after_gp`.
        b.list.append(&mut self.pending);
        self.batches += 1;
        Some(b)
    }
}

/// The sizes of a writer state as of the end of the last writer section,
/// for readers of the counters that do not take the writer lock.
#[derive(Default)]
pub(crate) struct Hints {
    /// Nodes in the writer's reserve.
    pub(crate) reserve: AtomicUsize,
    /// Whether the writer holds a spare batch.
    pub(crate) spare: AtomicBool,
    /// Retired nodes pending.
    pub(crate) pending: AtomicUsize,
    /// Batches handed to RCU.
    pub(crate) batches: AtomicUsize,
}

impl Hints {
    /// Publishes the sizes of `st`.
    pub(crate) fn publish<V>(&self, st: &WriterState<V>) {
        self.reserve.store(st.reserve.len(), Ordering::Relaxed);
        self.spare.store(st.spare.is_some(), Ordering::Relaxed);
        self.pending.store(st.pending.len(), Ordering::Relaxed);
        self.batches.store(st.batches, Ordering::Relaxed);
    }
}

/// A snapshot of a tree's counters; see [`RangeTree::counters`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Ranges in the tree.
    pub ranges: usize,
    /// The update counters of the tree algorithm (nodes allocated and
    /// retired, rotations, in-place commits, root stores).
    pub tree: tree::Stats,
    /// Batches of retired nodes handed to RCU (one `call_rcu()` each).
    pub rcu_batches: usize,
    /// Retired nodes waiting for the next batch.
    pub nodes_pending: usize,
    /// Nodes in the reserve for the next updates.
    pub nodes_reserved: usize,
}

/// A Bonsai tree of ranges with values of type `V`, safe to share: lookups
/// run concurrently with one writer at a time.
///
/// Values are `Copy` (plain data or shared pointers): rotations copy nodes
/// while lookups may still read the old copy, so a value must not be
/// mutable in place; see [`tree::Tree`].  Per-range state that lookups
/// update (a counter, a lock) lives behind a pointer all copies share.
///
/// Replaced and removed nodes are freed from an RCU callback.  A module
/// that uses a `RangeTree` must call [`rcu::barrier`] before it is
/// unloaded, after dropping its trees.  Dropping a tree takes its writer
/// mutex (process context only).
///
/// Lookups take the caller's [`MaySleep`] token mutably: the closure they
/// run inside the read-side section cannot sleep through it.
///
/// # Invariants
///
/// `tree` is only updated through writers created while `writer` is held,
/// with `writer`'s reserve and pending list.  `debugfs` is null or the
/// handle of a debugfs file whose callback reads this tree; it is removed
/// before the tree is dropped.
#[pin_data(PinnedDrop)]
pub struct RangeTree<V: Copy + Send + Sync + 'static> {
    tree: tree::Tree<V>,
    #[pin]
    writer: Mutex<WriterState<V>>,
    /// The writer state's sizes, as of the last writer section.
    hints: Hints,
    debugfs: AtomicPtr<bindings::bonsai_debugfs>,
}

impl<V: Copy + Send + Sync + 'static> RangeTree<V> {
    /// Creates an empty tree with the default (proven) balance parameters.
    pub fn new() -> impl PinInit<Self> {
        Self::with_params(tree::BalanceParams::HIRAI_YAMAMOTO)
    }

    /// Creates an empty tree with the given balance parameters.
    pub fn with_params(params: tree::BalanceParams) -> impl PinInit<Self> {
        pin_init!(Self {
            tree: tree::Tree::with_params(params),
            writer <- new_mutex!(WriterState::new()),
            hints: Hints::default(),
            debugfs: AtomicPtr::new(ptr::null_mut()),
        })
    }

    /// Publishes the writer state's sizes for lock-free readers of the
    /// counters and for the next update's top-up.
    fn publish_hints(&self, st: &WriterState<V>) {
        self.hints.publish(st);
    }

    /// Runs `f` as the only writer, with a reserve filled beforehand.
    ///
    /// The nodes an update may need, and the box of the next retirement
    /// batch, are allocated before the mutex is taken (only what the
    /// reserve kept under the mutex lacks), so an allocation failure
    /// (`ENOMEM`) leaves the tree as it was.  Replaced nodes join the
    /// pending list; every [`RETIRE_BATCH`] of them go to RCU with one
    /// callback.  Sleeps.
    fn update<R>(&self, f: impl FnOnce(&mut tree::Writer<'_, V>) -> R) -> Result<R> {
        let mut local = tree::NodeReserve::new();
        let mut spare = None;
        loop {
            // Racy top-up: another writer may consume nodes meanwhile, in
            // which case the check under the mutex sends us round again.
            let want = self.tree.reserve_bound();
            let have = self.hints.reserve.load(Ordering::Relaxed);
            local.fill(want.saturating_sub(have), GFP_KERNEL)?;
            if spare.is_none() && !self.hints.spare.load(Ordering::Relaxed) {
                spare = Some(RetireBatch::new_box(GFP_KERNEL)?);
            }

            let mut guard = self.writer.lock();
            let st = &mut *guard;
            st.reserve.append(&mut local);
            if st.spare.is_none() {
                st.spare = spare.take();
            }
            if st.reserve.len() < self.tree.reserve_bound() || st.spare.is_none() {
                self.publish_hints(st);
                continue;
            }
            let ret = {
                // SAFETY: `guard` holds the writer mutex until the writer,
                // scoped to this block, is dropped.
                let mut w = unsafe { self.tree.writer(&mut st.reserve, &mut st.pending) };
                f(&mut w)
            };
            let batch = if st.pending.len() >= RETIRE_BATCH {
                st.take_batch()
            } else {
                None
            };
            self.publish_hints(st);
            drop(guard);
            if let Some(b) = batch {
                rcu::drop_after_gp(b);
            }
            // A `spare` still held here was not needed: the state had one.
            return Ok(ret);
        }
    }

    /// Inserts `value` for `[start, end)`.
    ///
    /// Fails with `EINVAL` if `start >= end`, `EEXIST` if the range
    /// overlaps one in the tree and `ENOMEM` if nodes cannot be allocated;
    /// the tree is unchanged on failure.
    pub fn insert(&self, start: usize, end: usize, value: V) -> Result {
        self.update(|w| w.insert(start, end, value).map_err(Error::from))?
    }

    /// Removes the range starting at `start`; `ENOENT` if there is none.
    ///
    /// The value is dropped after a grace period, from an RCU callback.
    pub fn remove(&self, start: usize) -> Result {
        self.update(|w| w.remove(start))?
    }

    /// Takes the writer mutex for range stores (sleeps) and returns the
    /// guard that runs them; see [`WriteGuard`].
    ///
    /// While the guard lives, the other updates of this tree ([`insert`],
    /// [`remove`], [`flush`], [`shrink`], [`check`]) wait for the mutex: a
    /// holder of the guard must not call them.  Lookups do not wait.
    ///
    /// [`insert`]: RangeTree::insert
    /// [`remove`]: RangeTree::remove
    /// [`flush`]: RangeTree::flush
    /// [`shrink`]: RangeTree::shrink
    /// [`check`]: RangeTree::check
    pub fn write(&self) -> WriteGuard<'_, V> {
        // INVARIANT: the guard is one of `self.writer`.
        WriteGuard {
            tree: &self.tree,
            hints: &self.hints,
            st: self.writer.lock(),
        }
    }

    /// Hands the pending retired nodes to RCU in one batch and returns
    /// those that found no batch box (none: the spare batch is present
    /// whenever nodes are pending).
    fn hand_off(&self) -> tree::RetiredList<V> {
        let mut guard = self.writer.lock();
        let st = &mut *guard;
        let batch = st.take_batch();
        let orphans = mem::take(&mut st.pending);
        self.publish_hints(st);
        drop(guard);
        if let Some(b) = batch {
            rcu::drop_after_gp(b);
        }
        orphans
    }

    /// Hands the retired nodes waiting for a batch to RCU now, without
    /// waiting for [`RETIRE_BATCH`] of them.  Does not wait for the grace
    /// period (use [`rcu::barrier`] for that).  Sleeps (`ctx`).
    pub fn flush(&self, ctx: &MaySleep) {
        let orphans = self.hand_off();
        // Not reached (see `hand_off`).  Should the batch box be missing,
        // wait for the grace period here.
        if !orphans.is_empty() {
            rcu::synchronize_rcu(ctx);
            // SAFETY: the nodes were retired by writer sections that ended
            // before the grace period just waited for.
            unsafe { orphans.free() };
        }
    }

    /// Frees the nodes kept in reserve for the next updates (after handing
    /// the pending retired nodes to RCU).  The next update allocates what
    /// it needs again.  Sleeps (`ctx`).
    pub fn shrink(&self, ctx: &MaySleep) {
        self.flush(ctx);
        let (reserve, spare) = {
            let mut guard = self.writer.lock();
            let st = &mut *guard;
            let reserve = mem::take(&mut st.reserve);
            let spare = if st.pending.is_empty() {
                st.spare.take()
            } else {
                None
            };
            self.publish_hints(st);
            (reserve, spare)
        };
        drop(reserve);
        drop(spare);
    }

    /// Returns `f` applied to the range containing `addr`, looked up
    /// without taking the writer mutex.
    ///
    /// `f` runs inside an RCU read-side section, which borrows `ctx`: it
    /// cannot sleep through the token.
    pub fn with_range<R>(
        &self,
        ctx: &mut MaySleep,
        addr: usize,
        f: impl FnOnce(tree::Entry<'_, V>) -> R,
    ) -> Option<R> {
        let guard = rcu::read_lock(ctx);
        self.tree.find(&guard, addr).map(f)
    }

    /// Returns `f` applied to the first range ending above `addr`, inside
    /// a read-side section (see [`RangeTree::with_range`]).
    pub fn with_range_from<R>(
        &self,
        ctx: &mut MaySleep,
        addr: usize,
        f: impl FnOnce(tree::Entry<'_, V>) -> R,
    ) -> Option<R> {
        let guard = rcu::read_lock(ctx);
        self.tree.find_from(&guard, addr).map(f)
    }

    /// Calls `f` on every range in address order, inside one read-side
    /// critical section (see [`RangeTree::with_range`]).
    pub fn for_each(&self, ctx: &mut MaySleep, mut f: impl FnMut(tree::Entry<'_, V>)) {
        let guard = rcu::read_lock(ctx);
        for e in self.tree.iter(&guard) {
            f(e);
        }
    }

    /// Returns the number of ranges.
    pub fn len(&self) -> usize {
        self.tree.len()
    }

    /// Returns whether the tree is empty.
    pub fn is_empty(&self) -> bool {
        self.tree.is_empty()
    }

    /// Returns the tree's update counters.
    pub fn stats(&self) -> tree::Stats {
        self.tree.stats()
    }

    /// Returns a snapshot of all the counters, without taking the mutex
    /// (each counter is exact as of some recent update).
    pub fn counters(&self) -> Counters {
        Counters {
            ranges: self.tree.len(),
            tree: self.tree.stats(),
            rcu_batches: self.hints.batches.load(Ordering::Relaxed),
            nodes_pending: self.hints.pending.load(Ordering::Relaxed),
            nodes_reserved: self.hints.reserve.load(Ordering::Relaxed),
        }
    }

    /// Verifies order, sizes and balance of the whole tree (`O(n)`, for
    /// tests and debugging).  A broken tree gives `EINVAL`, with the
    /// details in the kernel log.
    pub fn check(&self) -> Result {
        let mut guard = self.writer.lock();
        let st = &mut *guard;
        // SAFETY: the writer mutex is held while the writer lives.
        let w = unsafe { self.tree.writer(&mut st.reserve, &mut st.pending) };
        w.check().map(|_| ()).map_err(|e| {
            pr_err!("tree check failed: {:?}\n", e);
            EINVAL
        })
    }

    /// Shows the tree's counters in debugfs, as `bonsai/<name>/stats`,
    /// until the tree is dropped.
    ///
    /// Fails with `EBUSY` if the tree is already registered, and with the
    /// error of debugfs (for example `EEXIST` for a name in use, `ENODEV`
    /// without debugfs).
    pub fn debugfs_register(self: Pin<&Self>, name: &CStr) -> Result {
        let this: &Self = &self;
        // SAFETY: `name` is NUL-terminated and only read during the call;
        // `stats_show::<V>` has the signature of `bonsai_stats_fn`; the
        // tree is pinned, so `this` stays valid until `PinnedDrop` removes
        // the file, which waits for the file's readers.
        let d = unsafe {
            bindings::bonsai_debugfs_add(
                name.as_char_ptr(),
                ptr::from_ref(this).cast::<c_void>(),
                Some(stats_show::<V>),
            )
        };
        let d = from_err_ptr(d)?;
        if this
            .debugfs
            .compare_exchange(ptr::null_mut(), d, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // SAFETY: `d` was just returned by `bonsai_debugfs_add` and is
            // not stored anywhere.
            unsafe { bindings::bonsai_debugfs_remove(d) };
            return Err(EBUSY);
        }
        Ok(())
    }
}

/// Fills `out` with the counters of the `RangeTree<V>` at `tree`; the
/// `bonsai_stats_fn` of the debugfs glue.
///
/// # Safety
///
/// `tree` points to a live `RangeTree<V>` and `out` to a writable
/// `struct bonsai_stats`.
unsafe extern "C" fn stats_show<V: Copy + Send + Sync + 'static>(
    tree: *const c_void,
    out: *mut bindings::bonsai_stats,
) {
    // SAFETY: per the contract `tree` is a live `RangeTree<V>`.
    let t = unsafe { &*tree.cast::<RangeTree<V>>() };
    let c = t.counters();
    let s = bindings::bonsai_stats {
        ranges: c.ranges as u64,
        nodes_allocated: c.tree.allocated as u64,
        nodes_retired: c.tree.retired as u64,
        single_rotations: c.tree.single_rotations as u64,
        double_rotations: c.tree.double_rotations as u64,
        commits: c.tree.commits as u64,
        root_stores: c.tree.root_stores as u64,
        rcu_batches: c.rcu_batches as u64,
        nodes_pending: c.nodes_pending as u64,
        nodes_reserved: c.nodes_reserved as u64,
    };
    // SAFETY: per the contract `out` is writable.
    unsafe { out.write(s) };
}

#[pinned_drop]
impl<V: Copy + Send + Sync + 'static> PinnedDrop for RangeTree<V> {
    fn drop(self: Pin<&mut Self>) {
        let d = self.debugfs.swap(ptr::null_mut(), Ordering::AcqRel);
        if !d.is_null() {
            // SAFETY: `d` came from `bonsai_debugfs_add` and is removed
            // once; removal waits for the file's readers, after which
            // nothing refers to the tree through debugfs.
            unsafe { bindings::bonsai_debugfs_remove(d) };
        }
        // Nodes retired by the last updates may still be read by lookups
        // that began before those updates (if the tree was reachable
        // under RCU): free them after a grace period, like the others.
        let orphans = self.hand_off();
        if !orphans.is_empty() {
            // Not reached (see `hand_off`); a drop has no token to wait for
            // a grace period with, so the nodes are leaked.
            pr_warn!("{} retired nodes leaked\n", orphans.len());
        }
    }
}

// The benchmark against the rbtree and the maple tree (its C side is
// `bench.c`).
#[cfg(CONFIG_BONSAI_BENCH)]
mod bench;
