// SPDX-License-Identifier: GPL-2.0

//! The functions the hooks of `include/linux/bonsai_vma.h` call.
//!
//! Each turns the C caller's locking into a token ([`MmapWriteLocked`]
//! for the writers, [`CallerReadSide`] for the fault path's lookup) and
//! hands over to the safe functions of the parent module.

use super::{count, MAX_ATTEMPTS};
use core::{ptr, sync::atomic::Ordering};
use kernel::{
    alloc::{flags::*, Flags},
    bindings,
    ffi::{c_uint, c_ulong},
    mm::{virt::VmaPtr, Mm, MmapWriteLocked},
    processor::in_task,
};

use crate::tree;

/// Proof that the caller is inside an RCU read-side critical section it
/// entered itself (`lock_vma_under_rcu()` calls [`bonsai_vma_find`] in
/// one), or holds a lock that excludes the writers of the tree it reads.
///
/// # Invariants
///
/// While the value lives, the section (or the lock) lasts.
pub(crate) struct CallerReadSide {
    _not_send: core::marker::PhantomData<*mut ()>,
}

impl CallerReadSide {
    /// # Safety
    ///
    /// The caller stays inside an RCU read-side section, or holds a lock
    /// that excludes the writers of every tree it reads with the value (the
    /// mmap lock, for a VMA index), until the value is dropped.
    pub(crate) unsafe fn assume() -> Self {
        Self {
            _not_send: core::marker::PhantomData,
        }
    }
}

// SAFETY: nodes retired by a writer are freed after a grace period, which
// waits for the caller's RCU section; and none is retired while the caller
// holds a lock that excludes the writers (type invariant).
unsafe impl tree::ReadSide for CallerReadSide {}

/// Borrows the `Mm` at `mm`.
///
/// # Safety
///
/// `mm` points to a live `mm_struct` for `'a`.
unsafe fn mm_ref<'a>(mm: *mut bindings::mm_struct) -> &'a Mm {
    // SAFETY: `Mm` is a transparent wrapper of `mm_struct`, and the caller
    // keeps it live (a reference count held by its caller) for `'a`.
    unsafe { &*mm.cast::<Mm>() }
}

/// `mm_alloc()`: the new address space gets an index, if enabled.
///
/// # Safety
///
/// `mm` is a new address space that no other task can reach yet.
#[no_mangle]
pub(crate) unsafe extern "C" fn bonsai_vma_create(mm: *mut bindings::mm_struct) {
    // SAFETY: per the contract, the caller owns the new `mm` alone.
    let mut lock = unsafe { MmapWriteLocked::assume_exclusive(mm_ref(mm)) };
    super::create(&mut lock);
}

/// `dup_mmap()` copied every VMA of the parent: build the child's index.
///
/// # Safety
///
/// `mm` is live and the caller holds its mmap lock for writing.
#[no_mangle]
pub(crate) unsafe extern "C" fn bonsai_vma_dup(mm: *mut bindings::mm_struct) {
    // SAFETY: per the contract.
    let mut lock = unsafe { MmapWriteLocked::assume(mm_ref(mm)) };
    super::build_for_child(&mut lock);
}

/// `exit_mmap()` (before the VMAs are freed) and `__mmdrop()`: take the
/// index away.
///
/// # Safety
///
/// `mm` is live, and either the caller holds its mmap lock for writing or
/// no other task can reach it (its last reference is being dropped).
#[no_mangle]
pub(crate) unsafe extern "C" fn bonsai_vma_destroy(mm: *mut bindings::mm_struct) {
    // SAFETY: per the contract, no other writer can run; the lock is not
    // asserted, as `__mmdrop()` does not (and may not) take it.
    let mut lock = unsafe { MmapWriteLocked::assume_exclusive(mm_ref(mm)) };
    super::destroy(&mut lock);
}

/// Where the maple tree preallocates for a store to `[start, last]`, or
/// before a store that allocates with `gfp` itself.
///
/// # Safety
///
/// `mm` is live and the caller holds its mmap lock for writing; `gfp`
/// allows sleeping only where the caller may sleep.
#[no_mangle]
pub(crate) unsafe extern "C" fn bonsai_vma_prealloc(
    mm: *mut bindings::mm_struct,
    start: c_ulong,
    last: c_ulong,
    gfp: bindings::gfp_t,
) {
    // SAFETY: per the contract.
    let mut lock = unsafe { MmapWriteLocked::assume(mm_ref(mm)) };
    super::prealloc(&mut lock, start, last, flags_of(gfp));
}

/// The allocation flags for the nodes of a store whose maple-tree store
/// allocated with `gfp`: `GFP_KERNEL_ACCOUNT` (charged to the memory
/// cgroup, like the VMAs) where that may reclaim, else
/// `GFP_NOWAIT` without warnings.  `__GFP_NOFAIL` is not passed on: a
/// failure here drops the index, which costs no correctness.
fn flags_of(gfp: bindings::gfp_t) -> Flags {
    if gfp & (1 << bindings::___GFP_DIRECT_RECLAIM_BIT) != 0 {
        GFP_KERNEL_ACCOUNT
    } else {
        GFP_NOWAIT | __GFP_NOWARN
    }
}

/// After the maple tree stored `vma` (NULL: nothing) over `[start, last]`.
///
/// # Safety
///
/// `mm` is live and the caller holds its mmap lock for writing; `vma` is
/// NULL or a VMA of `mm`, which the maple tree now holds over the range.
#[no_mangle]
pub(crate) unsafe extern "C" fn bonsai_vma_store(
    mm: *mut bindings::mm_struct,
    start: c_ulong,
    last: c_ulong,
    vma: *mut bindings::vm_area_struct,
) {
    // SAFETY: per the contract.
    let mut lock = unsafe { MmapWriteLocked::assume(mm_ref(mm)) };
    super::store(&mut lock, start, last, VmaPtr::new(vma));
}

/// The candidate VMA for `addr` in the index of `mm`, on the `attempt`-th
/// try of one fault; NULL sends the caller to the maple tree (no index,
/// too many tries, or no VMA in the index).
///
/// # Safety
///
/// `mm` is a live address space with users (the faulting task's), and the
/// caller is inside an RCU read-side section until it is done with the
/// result, which it validates as `lock_vma_under_rcu()` does.
#[no_mangle]
pub(crate) unsafe extern "C" fn bonsai_vma_find(
    mm: *mut bindings::mm_struct,
    addr: c_ulong,
    attempt: c_uint,
) -> *mut bindings::vm_area_struct {
    // SAFETY: per the contract `mm` is live.
    let m = unsafe { mm_ref(mm) };
    let p = super::slot(m).load(Ordering::Acquire);
    if p.is_null() {
        count(bindings::bonsai_vma_event_BONSAI_VMA_FALLBACK_NOINDEX, 1);
        return ptr::null_mut();
    }
    if attempt >= MAX_ATTEMPTS {
        count(bindings::bonsai_vma_event_BONSAI_VMA_FALLBACK_RETRIES, 1);
        return ptr::null_mut();
    }
    if attempt > 0 {
        count(bindings::bonsai_vma_event_BONSAI_VMA_RETRIES, 1);
    }
    // SAFETY: the caller is in an RCU read-side section (contract), and
    // an index taken out of its address space is freed only after a
    // grace period.
    let index = unsafe { &*p };
    // SAFETY: per the contract, the section lasts while `side` lives.
    let side = unsafe { CallerReadSide::assume() };
    // A VMA of another address space cannot be in the index (a child's is
    // built from its own copies); checked all the same, as the maple
    // tree's candidate is, since the fault would use it unlocked.
    let stale = stale_candidate(mm);
    let found = stale.or_else(|| index.find(&side, addr)).filter(|v| {
        // SAFETY: a VMA found under RCU is freed only after a grace
        // period; `vm_mm` is set at creation and never changes.
        unsafe { (*v.as_ptr()).vm_mm == mm }
    });
    // Only in task context: `lock_vma_under_rcu()` also serves a BPF
    // iterator that may run in softirq, where the mmap lock, even tried,
    // is not to be taken.  Not for a test's stale candidate, which the
    // maple tree never held.
    // SAFETY: `bonsai_vma_crosscheck` is a `bool` that C only ever sets
    // to 0 or 1 (`WRITE_ONCE()`); a racy read gives either value.
    if unsafe { ptr::addr_of!(bindings::bonsai_vma_crosscheck).read_volatile() }
        && in_task()
        && stale.is_none()
    {
        // SAFETY: as above: `mm` is live, the section lasts.
        unsafe { crosscheck(mm, index, &side, addr, found) };
    }
    match found {
        Some(v) => {
            count(bindings::bonsai_vma_event_BONSAI_VMA_HITS, 1);
            v.as_ptr()
        }
        None => {
            count(bindings::bonsai_vma_event_BONSAI_VMA_MISSES, 1);
            ptr::null_mut()
        }
    }
}

/// The candidate a KUnit case planted for `mm` ([`stale::plant`]), in
/// place of the index's answer; without the suite, never any.
#[cfg(CONFIG_BONSAI_KUNIT_TEST)]
fn stale_candidate(mm: *mut bindings::mm_struct) -> Option<VmaPtr> {
    stale::take(mm)
}

#[cfg(not(CONFIG_BONSAI_KUNIT_TEST))]
#[inline(always)]
fn stale_candidate(_mm: *mut bindings::mm_struct) -> Option<VmaPtr> {
    None
}

/// Stale candidates on demand, for the `bonsai_vma` suite.
///
/// Between the index's answer and `lock_vma_under_rcu()`'s checks a
/// writer may remove the VMA (it is then detached), shrink it, or hold it
/// write-locked; the window is a few instructions wide, and no race run
/// here has hit it (the `retries` counter stays 0).  A case plants a VMA
/// in that state, and the next lookups of its address space take it as
/// the index's answer, so that every outcome of the re-validation (retry,
/// the bound on retries, fallback to the mmap lock) runs on demand.
#[cfg(CONFIG_BONSAI_KUNIT_TEST)]
pub(crate) mod stale {
    use core::{
        ptr,
        sync::atomic::{AtomicPtr, AtomicU32, Ordering},
    };
    use kernel::{bindings, mm::virt::VmaPtr};

    static MM: AtomicPtr<bindings::mm_struct> = AtomicPtr::new(ptr::null_mut());
    static VMA: AtomicPtr<bindings::vm_area_struct> = AtomicPtr::new(ptr::null_mut());
    static LEFT: AtomicU32 = AtomicU32::new(0);

    /// The next `lookups` index lookups in `mm` answer `vma`.
    ///
    /// # Safety
    ///
    /// `vma` stays allocated until [`uproot`] has returned, and its lock
    /// is initialised (a VMA from `vm_area_alloc()`); no other planting is
    /// in force.
    pub(crate) unsafe fn plant(
        mm: *mut bindings::mm_struct,
        vma: *mut bindings::vm_area_struct,
        lookups: u32,
    ) {
        MM.store(mm, Ordering::Relaxed);
        VMA.store(vma, Ordering::Relaxed);
        // Publishes the two above to the lookups that see the count.
        LEFT.store(lookups, Ordering::Release);
    }

    /// Ends the planting; returns how many of its lookups were not taken.
    pub(crate) fn uproot() -> u32 {
        let left = LEFT.swap(0, Ordering::AcqRel);
        MM.store(ptr::null_mut(), Ordering::Relaxed);
        VMA.store(ptr::null_mut(), Ordering::Relaxed);
        left
    }

    /// The planted candidate, if one is in force for `mm`.
    pub(super) fn take(mm: *mut bindings::mm_struct) -> Option<VmaPtr> {
        if LEFT.load(Ordering::Acquire) == 0 || MM.load(Ordering::Relaxed) != mm {
            return None;
        }
        LEFT.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .ok()?;
        VmaPtr::new(VMA.load(Ordering::Relaxed))
    }
}

/// The maple tree's VMA for `addr` (`mtree_load()`).
///
/// # Safety
///
/// `mm` is live.
unsafe fn maple_load(mm: *mut bindings::mm_struct, addr: usize) -> *mut bindings::vm_area_struct {
    // SAFETY: the tree of a live mm; `mtree_load()` takes its own RCU
    // read lock and returns an entry or NULL.
    unsafe { bindings::mtree_load(ptr::addr_of_mut!((*mm).__bindgen_anon_1.mm_mt), addr as _) }
        .cast()
}

/// Compares a lookup's answer with the maple tree's.  A difference seen
/// without the mmap lock may be a writer half-way through a change (the
/// two trees are updated one after the other), so a difference is checked
/// again under the mmap lock, taken with a trylock (this runs inside an
/// RCU read-side section and must not sleep); when that fails the lookup
/// counts as unverified.
///
/// # Safety
///
/// `mm` is live with users, and `side` is a read-side section in which
/// `index` was found as `mm`'s index.
unsafe fn crosscheck(
    mm: *mut bindings::mm_struct,
    index: &super::VmaIndex,
    side: &CallerReadSide,
    addr: usize,
    found: Option<VmaPtr>,
) {
    let found_ptr = found.map_or(ptr::null_mut(), VmaPtr::as_ptr);
    // SAFETY: `mm` is live (contract).
    if unsafe { maple_load(mm, addr) } == found_ptr {
        count(bindings::bonsai_vma_event_BONSAI_VMA_CROSSCHECK_CHECKED, 1);
        return;
    }
    // SAFETY: `mm` is live; a trylock never sleeps.
    if !unsafe { bindings::rsmm_mmap_read_trylock(mm) } {
        count(
            bindings::bonsai_vma_event_BONSAI_VMA_CROSSCHECK_UNVERIFIED,
            1,
        );
        return;
    }
    // With the lock held no writer runs: the index in the slot and both
    // answers are final.  An index taken out meanwhile (dropped) is no
    // longer the one the fault path uses.
    // SAFETY: `mm` is live.
    let m = unsafe { mm_ref(mm) };
    if super::slot(m).load(Ordering::Acquire) != ptr::from_ref(index).cast_mut() {
        count(
            bindings::bonsai_vma_event_BONSAI_VMA_CROSSCHECK_UNVERIFIED,
            1,
        );
    } else {
        let ours = index
            .find(side, addr)
            .map_or(ptr::null_mut(), VmaPtr::as_ptr);
        // SAFETY: `mm` is live.
        let theirs = unsafe { maple_load(mm, addr) };
        if ours == theirs {
            count(bindings::bonsai_vma_event_BONSAI_VMA_CROSSCHECK_CHECKED, 1);
        } else {
            count(bindings::bonsai_vma_event_BONSAI_VMA_CROSSCHECK_DIFFS, 1);
            // SAFETY: only prints the pointers.
            unsafe { bindings::bonsai_vma_report_diff(mm, addr as _, ours, theirs) };
        }
    }
    // SAFETY: taken above.
    unsafe { bindings::rsmm_mmap_read_unlock(mm) };
}
