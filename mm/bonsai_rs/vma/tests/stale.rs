// SPDX-License-Identifier: GPL-2.0

//! The `bonsai_vma` case of stale candidates: VMAs planted as the
//! index's answer (`entry::stale`) in each state a writer can leave a
//! candidate in between the lookup and `lock_vma_under_rcu()`'s checks.

use super::{counter, new_mm, BASE, PAGES};
use crate::vma::MAX_ATTEMPTS;
use core::ptr::{self, NonNull};
use kernel::{
    bindings, kunit_expect, kunit_expect_eq,
    mm::{MmWithUser, PAGE_SIZE},
    prelude::*,
};

/// A VMA of `vm_area_alloc()`, never in any tree, that the case below
/// plants as a stale candidate ([`crate::vma::entry::stale`]); freed after a
/// grace period on drop, as a removed VMA is.
struct PlantedVma(NonNull<bindings::vm_area_struct>);

impl PlantedVma {
    /// A VMA of `mm` over `[start, end)`, detached (as a VMA removed by a
    /// finished write section is) or not.
    fn new(mm: &MmWithUser, start: usize, end: usize, detached: bool) -> Result<Self> {
        // SAFETY: `mm` is live; a non-NULL result is a new VMA with its
        // lock initialised, which we own.
        let p = NonNull::new(unsafe { bindings::vm_area_alloc(mm.as_raw()) }).ok_or(ENOMEM)?;
        // SAFETY: nothing else refers to the new VMA yet.
        let v = unsafe { &mut *p.as_ptr() };
        v.__bindgen_anon_1.__bindgen_anon_1.vm_start = start as _;
        v.__bindgen_anon_1.__bindgen_anon_1.vm_end = end as _;
        v.detached = detached;
        Ok(Self(p))
    }

    /// Marks the VMA write-locked in the current write section of `mm`
    /// (its `vm_lock_seq` equal to `mm`'s sequence), as a writer's
    /// `vma_start_write()` does.
    fn write_locked(self, mm: &MmWithUser) -> Self {
        // SAFETY: `mm` is live; the VMA is still only ours.
        unsafe {
            let seq =
                ptr::addr_of!((*mm.as_raw()).__bindgen_anon_1.mm_lock_seq.sequence).read_volatile();
            (*self.0.as_ptr()).vm_lock_seq = seq;
        }
        self
    }

    /// `lock_vma_under_rcu(mm, addr)` with this VMA as the index's answer
    /// for `lookups` lookups: its result, unlocked at once (None when it
    /// sent the fault to the mmap lock), and the plantings left untaken.
    fn lookup_with(&self, mm: &MmWithUser, addr: usize, lookups: u32) -> (Option<usize>, u32) {
        // SAFETY: the VMA is freed only by `drop`, with `vm_area_free()`
        // (after a grace period), and no other planting is in force (the
        // suite's cases run one at a time).
        unsafe { crate::vma::entry::stale::plant(mm.as_raw(), self.0.as_ptr(), lookups) };
        let got = lookup(mm, addr);
        (got, crate::vma::entry::stale::uproot())
    }

    fn addr(&self) -> usize {
        self.0.as_ptr() as usize
    }
}

impl Drop for PlantedVma {
    fn drop(&mut self) {
        // SAFETY: ours, in no tree; planted lookups are over (`uproot`),
        // and an RCU reader that still sees it is covered by the grace
        // period `vm_area_free()` waits for.
        unsafe { bindings::vm_area_free(self.0.as_ptr()) };
    }
}

/// `lock_vma_under_rcu(mm, addr)`: the address of the VMA it locked
/// (unlocked again at once), or None when it sent the fault to the mmap
/// lock.
fn lookup(mm: &MmWithUser, addr: usize) -> Option<usize> {
    // SAFETY: `mm` is live; the call takes its own RCU read lock.
    let vma = unsafe { bindings::lock_vma_under_rcu(mm.as_raw(), addr as _) };
    if vma.is_null() {
        return None;
    }
    // SAFETY: read-locked by `lock_vma_under_rcu()` above.
    unsafe { bindings::bonsai_vma_test_end_read(vma) };
    Some(vma as usize)
}

/// A stale candidate from the index never reaches the fault: a detached
/// one is retried (and the retries are bounded, then the maple tree
/// answers), one whose range no longer covers the address or that a
/// writer holds sends the fault to the mmap lock, and one of another
/// address space is dropped as a miss.  Each planted candidate must be
/// taken, so a case cannot pass without running its path.
pub(super) fn stale_candidates_revalidated() -> Result {
    let mm = new_mm()?;
    let other = MmWithUser::new_for_test(BASE..BASE + PAGE_SIZE, false)?;
    // The VMA `new_mm()` maps, in the last page of the window.
    let start = BASE + (PAGES - 1) * PAGE_SIZE;
    let (end, addr) = (start + PAGE_SIZE, start + 123);
    let Some(real) = lookup(&mm, addr) else {
        kunit_expect!(false, "the test VMA was not found");
        return Err(EINVAL);
    };
    let retries = || counter(bindings::bonsai_vma_event_BONSAI_VMA_RETRIES);
    let exhausted = || counter(bindings::bonsai_vma_event_BONSAI_VMA_FALLBACK_RETRIES);
    let misses = || counter(bindings::bonsai_vma_event_BONSAI_VMA_MISSES);

    // Removed after the lookup: detached, so retried; the retry finds
    // the real VMA.
    let removed = PlantedVma::new(&mm, start, end, true)?;
    let (r, x) = (retries(), exhausted());
    kunit_expect_eq!(removed.lookup_with(&mm, addr, 1), (Some(real), 0));
    kunit_expect_eq!((retries() - r, exhausted() - x), (1, 0));

    // The index answering stale each time: MAX_ATTEMPTS answers are
    // taken, then the lookup goes to the maple tree.
    let extra = 2;
    let (r, x) = (retries(), exhausted());
    kunit_expect_eq!(
        removed.lookup_with(&mm, addr, MAX_ATTEMPTS + extra),
        (Some(real), extra)
    );
    kunit_expect_eq!(
        (retries() - r, exhausted() - x),
        (i64::from(MAX_ATTEMPTS) - 1, 1)
    );

    // Shrunk after the lookup (still attached): no VMA, the fault takes
    // the mmap lock; the candidate's lock is released (lockdep would
    // report it held when `drop` frees it).
    let shrunk = PlantedVma::new(&mm, end, end + PAGE_SIZE, false)?;
    kunit_expect_eq!(shrunk.lookup_with(&mm, addr, 1), (None, 0));

    // Held by a writer: not locked, the fault takes the mmap lock.
    let held = PlantedVma::new(&mm, start, end, false)?.write_locked(&mm);
    kunit_expect_eq!(held.lookup_with(&mm, addr, 1), (None, 0));

    // Another address space's VMA over the address, attached and
    // unlocked: only the index's own check keeps it out (the fault path
    // does not compare `vm_mm`); a miss, then the maple tree answers.
    let foreign = PlantedVma::new(&other, start, end, false)?;
    let m = misses();
    let (got, left) = foreign.lookup_with(&mm, addr, 1);
    kunit_expect!(
        got != Some(foreign.addr()),
        "another address space's VMA was returned"
    );
    kunit_expect_eq!((got, left), (Some(real), 0));
    kunit_expect_eq!(misses() - m, 1);

    // Nothing left planted: the real VMA, no retry.
    let r = retries();
    kunit_expect_eq!(lookup(&mm, addr), Some(real));
    kunit_expect_eq!(retries(), r);
    Ok(())
}
