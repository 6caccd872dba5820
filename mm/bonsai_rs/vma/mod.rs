// SPDX-License-Identifier: GPL-2.0

//! The VMA index of an address space: a Bonsai tree that holds the same
//! VMAs as the maple tree `mm->mm_mt`, so that page faults find their VMA
//! without the maple tree (after Clements, Kaashoek and Zeldovich).
//!
//! # Who changes it, and when
//!
//! An index is kept equal to its maple tree: every store to the maple
//! tree of an address space that has an index is mirrored by a store of
//! the same range, with the maple tree's overwrite semantics, inside the
//! same section under the mmap lock held for writing (the hooks of
//! `include/linux/bonsai_vma.h`; the list of sites is in
//! `Documentation/mm/bonsai.rst`).  That lock is the index's writer lock:
//! a writer needs a [`MmapWriteLocked`] token, and no second lock exists.
//! Some stores run under spinlocks taken after the mmap lock (stack
//! expansion holds `mm->page_table_lock`), so stores neither sleep nor
//! allocate: the nodes they need come from a reserve filled where the
//! maple tree preallocates ([`prealloc`]).  A store that finds the
//! reserve short drops the index ([`store`]): the address space's faults
//! use the maple tree from then on.  A wrong answer is never given, and no
//! caller ever sees an allocation failure.
//!
//! # Lifetime
//!
//! A new address space (`mm_alloc()`, for `execve()`) gets an empty index
//! while lookups are enabled; a child of `fork()` gets one built from its
//! own VMAs once `dup_mmap()` has copied them all ([`build_for_child`]),
//! never from the parent's.  `exit_mmap()` takes the index away before it
//! frees the VMAs, and `__mmdrop()` frees one that is left.  An index
//! taken away is freed after an RCU grace period, as are the nodes every
//! store replaces.
//!
//! # Lookups
//!
//! [`find`] runs inside the RCU read-side section of
//! `lock_vma_under_rcu()`, which validates the candidate as it validates
//! one from the maple tree; see `Documentation/mm/bonsai.rst` for why a
//! stale candidate is safe.

use core::{
    cell::UnsafeCell,
    mem,
    ptr::{self, addr_of_mut},
    sync::atomic::{AtomicBool, AtomicPtr, Ordering},
};
use kernel::{
    alloc::Flags,
    bindings,
    mm::{virt::VmaPtr, Mm, MmapWriteLocked},
    prelude::*,
    sync::rcu::{self, AtomicDrop, HasRcuHead, RcuHead},
};

use crate::{tree, Hints, WriteGuard, WriterState};

mod entry;
mod reap;
#[cfg(CONFIG_BONSAI_KUNIT_TEST)]
pub(crate) mod tests;

/// Index lookups one fault makes before it asks the maple tree: a
/// candidate found detached sends the fault round again, and a writer
/// that keeps replacing the VMA could do so forever.
pub(crate) const MAX_ATTEMPTS: u32 = 3;

/// The reserve a store may ask for without the index being given up (see
/// [`prealloc`]): 512 KiB of nodes.
const LARGE_STORE_NODES: usize = 4096;

/// Adds `delta` to the per-CPU counter `ev` (`vma.c`).
pub(crate) fn count(ev: bindings::bonsai_vma_event, delta: isize) {
    // SAFETY: FFI call without preconditions; any context.
    unsafe { bindings::bonsai_vma_count(ev, delta as _) };
}

/// What the mmap write lock protects in an index.
struct Locked {
    /// The tree's writer state: node reserve, retired nodes.
    w: WriterState<VmaPtr>,
    /// Ranges and nodes as last added to the gauges.
    vmas: usize,
    nodes: usize,
    /// Frees the tree in process context when the index is dropped (an
    /// index of more than `reap::REAP_MIN_NODES` taken out at exit).
    reaper: Option<Pin<KBox<reap::Reaper>>>,
}

/// The VMA index of one address space, owned by its `mm->bonsai_vma`.
///
/// # Invariants
///
/// `locked` is only accessed by a holder of the mmap lock of the address
/// space whose `bonsai_vma` points to the index, held for writing (or by
/// the sole owner of an index no address space points to), through
/// [`VmaIndex::writer`].  The tree's values are VMAs of that address space
/// that were in its maple tree at the same ranges when the writer lock was
/// last released.  The index is dropped only when no lookup can reach it:
/// after a grace period since it was taken out of its address space, or
/// having never been in one.
pub(crate) struct VmaIndex {
    head: RcuHead,
    tree: tree::Tree<VmaPtr>,
    hints: Hints,
    locked: UnsafeCell<Locked>,
}

// SAFETY: `locked` is only accessed under the mmap write lock (type
// invariant); the rest is the tree, shared by design, and atomics.
unsafe impl Sync for VmaIndex {}
// SAFETY: the index owns its nodes, whose values (`VmaPtr`) are `Send`.
unsafe impl Send for VmaIndex {}

// SAFETY: `head` is a field of type `RcuHead` used only by `drop_after_gp`.
unsafe impl HasRcuHead for VmaIndex {
    const RCU_HEAD_OFFSET: usize = mem::offset_of!(Self, head);
}

// SAFETY: dropping an index frees its nodes with `kfree()` (or hands the
// tree to its reaper, queued with `queue_work()`, which neither sleeps
// nor allocates), and the values (`VmaPtr`) have no drop glue; the gauges
// are per-CPU adds.
unsafe impl AtomicDrop for VmaIndex {}

/// The writer of an index: the tree's range-store writer on the state the
/// mmap write lock protects.
pub(crate) type IndexWriter<'a> = WriteGuard<'a, VmaPtr, &'a mut WriterState<VmaPtr>>;

/// The slot of `mm` that points to its index (`mm->bonsai_vma`).
fn slot(mm: &Mm) -> &AtomicPtr<VmaIndex> {
    // SAFETY: the field is an aligned pointer of a live `mm_struct`
    // (`Mm`'s invariant), so it lives as long as the borrow of `mm`.  C
    // writes it plainly only in `mm_init()`, before the address space is
    // visible; every other access is through this atomic view.
    unsafe {
        AtomicPtr::from_ptr(
            addr_of_mut!((*mm.as_raw()).__bindgen_anon_1.bonsai_vma).cast::<*mut VmaIndex>(),
        )
    }
}

impl VmaIndex {
    /// A new, empty index.
    fn new(flags: Flags) -> Result<KBox<Self>> {
        let b = KBox::new(
            Self {
                head: RcuHead::new(),
                tree: tree::Tree::new(),
                hints: Hints::default(),
                locked: UnsafeCell::new(Locked {
                    w: WriterState::new(),
                    vmas: 0,
                    nodes: 0,
                    reaper: None,
                }),
            },
            flags,
        )?;
        count(bindings::bonsai_vma_event_BONSAI_VMA_INDEXES, 1);
        Ok(b)
    }

    /// The writer of the index of the address space whose mmap write lock
    /// `lock` holds, if it has one: the token, borrowed mutably, makes one
    /// writer at a time.
    fn locked_writer<'a>(
        lock: &'a mut MmapWriteLocked<'_>,
    ) -> Option<(IndexWriter<'a>, &'a mut usize, &'a mut usize)> {
        let p = slot(lock.mm()).load(Ordering::Relaxed);
        if p.is_null() {
            return None;
        }
        // SAFETY: an index in the slot lives until it is taken out under
        // the mmap write lock, which `lock` holds (and keeps borrowed) for
        // `'a`; that lock is the index's writer lock.
        Some(unsafe { (*p).writer() })
    }

    /// The writer of this index.
    ///
    /// # Safety
    ///
    /// For `'a`, the caller holds the writer lock of the index (the mmap
    /// write lock of the address space that points to it, or sole
    /// ownership of an index no address space points to) and makes no
    /// other writer of it.
    // The state lives in an `UnsafeCell` that the writer lock protects:
    // mutable access from `&self` is the point, and the contract above.
    #[allow(clippy::mut_from_ref)]
    unsafe fn writer<'a>(&'a self) -> (IndexWriter<'a>, &'a mut usize, &'a mut usize) {
        // SAFETY: the caller holds the writer lock, so this is the only
        // reference to `locked` for `'a` (type invariant).
        let l = unsafe { &mut *self.locked.get() };
        let w = WriteGuard {
            tree: &self.tree,
            hints: &self.hints,
            st: &mut l.w,
        };
        (w, &mut l.vmas, &mut l.nodes)
    }

    /// The candidate VMA for `addr`.
    pub(crate) fn find(&self, guard: &impl tree::ReadSide, addr: usize) -> Option<VmaPtr> {
        self.tree.find(guard, addr).map(|e| *e.value)
    }
}

/// Brings the gauges up to date with the writer's tree and state.
fn account(w: &IndexWriter<'_>, vmas: &mut usize, nodes: &mut usize) {
    let now_vmas = w.tree.len();
    let now_nodes = now_vmas + w.st.reserve.len() + w.st.pending.len();
    // Most stores change neither gauge (a node used from the reserve
    // becomes a tree node or a retired one): no call then.
    if now_vmas != *vmas {
        count(
            bindings::bonsai_vma_event_BONSAI_VMA_VMAS,
            now_vmas as isize - *vmas as isize,
        );
        *vmas = now_vmas;
    }
    if now_nodes != *nodes {
        count(
            bindings::bonsai_vma_event_BONSAI_VMA_NODES,
            now_nodes as isize - *nodes as isize,
        );
        *nodes = now_nodes;
    }
}

impl Drop for VmaIndex {
    fn drop(&mut self) {
        let l = self.locked.get_mut();
        count(
            bindings::bonsai_vma_event_BONSAI_VMA_VMAS,
            -(l.vmas as isize),
        );
        count(
            bindings::bonsai_vma_event_BONSAI_VMA_NODES,
            -(l.nodes as isize),
        );
        count(bindings::bonsai_vma_event_BONSAI_VMA_INDEXES, -1);
        let pending = mem::take(&mut l.w.pending);
        // SAFETY: by the type invariant no lookup can reach the index, nor
        // so the nodes its writers retired.
        unsafe { pending.free() };
        // A large tree goes to its reaper, to be freed in process context.
        if let Some(r) = l.reaper.take() {
            r.reap(&mut self.tree);
        }
        // The tree's nodes (unless reaped), the reserve and the spare
        // batch go with the fields.
    }
}

/// Takes the index out of the address space of `lock` and frees it after
/// a grace period (lookups that found it before may still read it).  With
/// `reap`, a large tree is freed in process context after that (see
/// [`reap`]); the reaper is allocated without sleeping, and without it
/// the tree goes with the index in the RCU callback.
fn take_out(lock: &mut MmapWriteLocked<'_>, reap: bool) {
    let p = slot(lock.mm()).swap(ptr::null_mut(), Ordering::Release);
    if p.is_null() {
        return;
    }
    // SAFETY: the index was made by `KBox::into_raw` in `create` or
    // `build_for_child` and is owned by the slot, which no longer points
    // to it; the RCU callback drops it after a grace period, when no
    // lookup that loaded the old slot can still be reading it.
    let mut index = unsafe { KBox::from_raw(p) };
    if reap && index.tree.len() > reap::REAP_MIN_NODES {
        if let Ok(r) = reap::Reaper::new(GFP_NOWAIT | __GFP_NOWARN) {
            index.locked.get_mut().reaper = Some(r);
        }
    }
    rcu::drop_after_gp(index);
}

/// Whether the node size was printed.
static NODE_SIZE_SHOWN: AtomicBool = AtomicBool::new(false);

/// Gives the new address space of `lock` an empty index, if lookups are
/// enabled.
pub(crate) fn create(lock: &mut MmapWriteLocked<'_>) {
    // SAFETY: FFI call without preconditions.
    if !unsafe { bindings::bonsai_vma_enabled() } {
        return;
    }
    if !NODE_SIZE_SHOWN.swap(true, Ordering::Relaxed) {
        // For the memory a VMA costs (the benchmark reads this line).
        pr_info!(
            "VMA index node size {} bytes\n",
            tree::Tree::<VmaPtr>::node_size()
        );
    }
    match VmaIndex::new(GFP_KERNEL_ACCOUNT) {
        Ok(b) => {
            let old = slot(lock.mm()).swap(KBox::into_raw(b), Ordering::Release);
            warn_if_filled(old);
            count(bindings::bonsai_vma_event_BONSAI_VMA_INDEX_CREATED, 1);
        }
        Err(_) => count(bindings::bonsai_vma_event_BONSAI_VMA_INDEX_ALLOC_FAILED, 1),
    }
}

/// A slot filled twice would leak an index; it cannot happen (`mm_init()`
/// clears the slot, and only `create` or `build_for_child` fill it, once).
fn warn_if_filled(old: *mut VmaIndex) {
    if !old.is_null() {
        pr_err!("an address space had an index already; leaking it\n");
    }
}

/// Builds the index of a child address space that `dup_mmap()` has just
/// filled with its own copies of the parent's VMAs, if lookups are
/// enabled.  Allocates with `GFP_KERNEL`; on failure the child has no
/// index (counted) and its faults use the maple tree.
pub(crate) fn build_for_child(lock: &mut MmapWriteLocked<'_>) {
    // SAFETY: FFI call without preconditions.
    if !unsafe { bindings::bonsai_vma_enabled() } {
        return;
    }
    let Ok(index) = VmaIndex::new(GFP_KERNEL_ACCOUNT) else {
        count(bindings::bonsai_vma_event_BONSAI_VMA_INDEX_ALLOC_FAILED, 1);
        return;
    };
    let built = {
        // SAFETY: the index is ours alone: no address space points to it.
        let (mut w, vmas, nodes) = unsafe { index.writer() };
        let r = fill_from_maple(lock, &mut w);
        account(&w, vmas, nodes);
        r
    };
    if built.is_err() {
        // Counted with the allocation failures: the build fails only when
        // an allocation does, or (below) on a difference, which warns.
        count(bindings::bonsai_vma_event_BONSAI_VMA_INDEX_ALLOC_FAILED, 1);
        // Never published: no lookup saw it, and a build retires nothing.
        drop(index);
        return;
    }
    let old = slot(lock.mm()).swap(KBox::into_raw(index), Ordering::Release);
    warn_if_filled(old);
    count(bindings::bonsai_vma_event_BONSAI_VMA_INDEX_CREATED, 1);
}

/// Builds the index of the address space of `lock` from its VMAs at
/// once, bottom-up (`Writer::build_sorted`): one node per VMA and no
/// rebalancing, where inserting them one by one would plan and walk a
/// path for each.  The VMAs are gathered first (`find_vma()` from the end
/// of the last one), into a temporary array sized by `map_count` that may
/// be large for a big address space, hence `kvmalloc()`.  With
/// `CONFIG_DEBUG_VM` every build is compared with the VMAs it was built
/// from, and a difference warns and leaves the child without index.
fn fill_from_maple(lock: &MmapWriteLocked<'_>, w: &mut IndexWriter<'_>) -> Result {
    let mut vmas = KVVec::with_capacity(lock.map_count(), GFP_KERNEL)?;
    let mut addr = 0;
    while let Some(vma) = lock.find_vma(addr) {
        let (start, end) = (vma.start(), vma.end());
        vmas.push((start, end, VmaPtr::from_ref(vma)), GFP_KERNEL)?;
        addr = end;
    }
    w.preallocate_bound(vmas.len(), GFP_KERNEL_ACCOUNT)?;
    w.with_tree_writer(|t| t.build_sorted(&vmas))?;
    #[cfg(CONFIG_DEBUG_VM)]
    check_built(lock, w, &vmas)?;
    Ok(())
}

/// Compares a built index with the VMAs it was built from (`DEBUG_VM`):
/// the same ranges and VMAs, in order.  On a difference it warns
/// (`crosscheck_diffs` and the cross-check's report) and fails.
#[cfg(CONFIG_DEBUG_VM)]
fn check_built(
    lock: &MmapWriteLocked<'_>,
    w: &IndexWriter<'_>,
    vmas: &[(usize, usize, VmaPtr)],
) -> Result {
    // SAFETY: the caller holds the index's writer lock, so no node is
    // retired (or freed) while this walk reads the tree.
    let side = unsafe { entry::CallerReadSide::assume() };
    let mut it = w.tree.iter(&side);
    for (i, &(start, end, v)) in vmas.iter().enumerate() {
        let got = it.next().map(|e| (e.start, e.end, *e.value));
        if got != Some((start, end, v)) {
            let ours = got.map_or(ptr::null_mut(), |g| g.2.as_ptr());
            count(bindings::bonsai_vma_event_BONSAI_VMA_CROSSCHECK_DIFFS, 1);
            pr_err!(
                "built index: VMA {} is {:x?}, the maple tree's [{:#x}, {:#x})\n",
                i,
                got,
                start,
                end
            );
            // SAFETY: only prints the pointers.
            unsafe {
                bindings::bonsai_vma_report_diff(lock.mm().as_raw(), start as _, ours, v.as_ptr())
            };
            return Err(EINVAL);
        }
    }
    if it.next().is_some() {
        count(bindings::bonsai_vma_event_BONSAI_VMA_CROSSCHECK_DIFFS, 1);
        pr_err!("built index: more ranges than the {} VMAs\n", vmas.len());
        return Err(EINVAL);
    }
    Ok(())
}

/// Takes the index away from the address space of `lock` (its VMAs are
/// about to be freed, or the `mm_struct` itself).
pub(crate) fn destroy(lock: &mut MmapWriteLocked<'_>) {
    take_out(lock, true);
}

/// Converts an inclusive last address to the end of a range.  A range
/// that reaches the top of the address space loses its last byte, where
/// no VMA can lie.
fn end_of(last: usize) -> usize {
    last.saturating_add(1)
}

/// Fills the reserve of the index of `lock`'s address space for a store
/// or clear of `[start, last]`, with `flags`.  A failure only means that
/// the store may find the reserve short (and drop the index); it is
/// counted and not reported.
pub(crate) fn prealloc(lock: &mut MmapWriteLocked<'_>, start: usize, last: usize, flags: Flags) {
    let Some((mut w, vmas, nodes)) = VmaIndex::locked_writer(lock) else {
        return;
    };
    let end = end_of(last);
    // A store over the range or a clear, whichever needs more (the hooks
    // do not say which follows), plus what one more insert or remove
    // needs.  The bound without planning: planning the update would cost
    // about as much as making it, and the nodes it overestimates stay in
    // the reserve for the next store (see `trim_reserve`).
    let need = w
        .with_tree_writer(|t| t.store_bound(start, end))
        .unwrap_or(0);
    // A store over many VMAs asks for `2h + 1` nodes per VMA (it uses
    // about half).  Above a few thousand nodes and twice what the
    // index holds, the index is given up instead: rebuilding it would
    // cost less than the store.
    if need > LARGE_STORE_NODES.max(2 * w.tree.len()) {
        account(&w, vmas, nodes);
        drop(w);
        count(bindings::bonsai_vma_event_BONSAI_VMA_INDEX_DROPPED, 1);
        take_out(lock, false);
        return;
    }
    if w.preallocate_bound(need, flags).is_err() {
        count(bindings::bonsai_vma_event_BONSAI_VMA_PREALLOC_FAILED, 1);
    }
    account(&w, vmas, nodes);
}

/// Mirrors a maple-tree store of `vma` (or of nothing, for `None`) over
/// `[start, last]` in the index of `lock`'s address space.  Never sleeps
/// or allocates.  If the reserve is short, the index is dropped.
pub(crate) fn store(
    lock: &mut MmapWriteLocked<'_>,
    start: usize,
    last: usize,
    vma: Option<VmaPtr>,
) {
    let end = end_of(last);
    let r = {
        let Some((mut w, vmas, nodes)) = VmaIndex::locked_writer(lock) else {
            return;
        };
        let r = match vma {
            Some(v) => w.store(start, end, v),
            None => w.clear(start, end),
        };
        // What a store over many VMAs preallocated and did not use goes
        // back now (`kfree()` never sleeps).
        w.trim_reserve();
        account(&w, vmas, nodes);
        r
    };
    match r {
        Ok(()) => count(bindings::bonsai_vma_event_BONSAI_VMA_STORES, 1),
        Err(e) => {
            // `EAGAIN`: the reserve ran short.  `EINVAL` (an empty range)
            // cannot come from the hooks; the index cannot follow the
            // maple tree either way.
            if e != EAGAIN {
                pr_err!("store of [{:#x}, {:#x}] failed ({:?})\n", start, last, e);
            }
            count(bindings::bonsai_vma_event_BONSAI_VMA_INDEX_DROPPED, 1);
            take_out(lock, false);
        }
    }
}

/// Compares the index of `guard`'s address space with its maple tree (for
/// the KUnit suite):
/// the number of VMAs, or `EINVAL` (with the first difference in the log)
/// if they differ, `ENOENT` if there is no index.
#[cfg(CONFIG_BONSAI_KUNIT_TEST)]
pub(crate) fn compare_with_maple(guard: &kernel::mm::MmapReadGuard<'_>) -> Result<usize> {
    let p = slot(guard.mm()).load(Ordering::Relaxed);
    if p.is_null() {
        return Err(ENOENT);
    }
    // SAFETY: the mmap lock, held for reading, excludes the writers that
    // take the index out, so it lives while `guard` does.
    let index = unsafe { &*p };
    // SAFETY: the mmap lock excludes every writer of the index, so no node
    // is retired (or freed) while this walk reads the tree.
    let side = unsafe { entry::CallerReadSide::assume() };
    let mut it = index.tree.iter(&side);
    let mut addr = 0;
    let mut n = 0;
    loop {
        let m = guard
            .find_vma(addr)
            .map(|v| (v.start(), v.end(), VmaPtr::from_ref(v)));
        let b = it.next().map(|e| (e.start, e.end, *e.value));
        if m != b {
            pr_err!("VMA {}: maple tree {:x?}, index {:x?}\n", n, m, b);
            return Err(EINVAL);
        }
        match m {
            Some((_, end, _)) => addr = end,
            None => return Ok(n),
        }
        n += 1;
    }
}
