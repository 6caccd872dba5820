// SPDX-License-Identifier: GPL-2.0

//! The states of pages on their way to and from an allocation: the run an
//! allocation assembles ([`ClaimedRun`]) and an allocation its owner let
//! go of ([`ReleasedRun`]).

use super::{block_order, hwpoisoned, ref_count, set_refcounted, LentPage, OwnedFrames, GFP_COMP};
use crate::{bindings, mm::page_access, prelude::*};
use core::{
    mem::ManuallyDrop,
    sync::atomic::{AtomicBool, AtomicUsize, Ordering},
};

/// Runs dropped with their obligation undone (see [`abandoned_runs`]).
static ABANDONED: AtomicUsize = AtomicUsize::new(0);

/// Whether a stack trace was printed for an abandoned run already.
static ABANDONED_TRACED: AtomicBool = AtomicBool::new(false);

/// Returns how many [`ClaimedRun`]s were dropped without being finished
/// or given up, and [`ReleasedRun`]s without being put, since boot.
///
/// Each is a bug of the caller: its pages are leaked (they stay claimed,
/// or allocated, in the owner's bookkeeping and in their `struct page`s),
/// which is safe, but never comes right.  The first one is reported with
/// a stack trace, every one with a message.
pub fn abandoned_runs() -> usize {
    ABANDONED.load(Ordering::Relaxed)
}

/// Reports a run of `count` pages at `pfn` dropped with its obligation
/// (`what`) undone, as `WARN_ONCE()` would, and counts it.
#[cold]
fn abandoned(what: &str, pfn: usize, count: usize) {
    ABANDONED.fetch_add(1, Ordering::Relaxed);
    pr_err!(
        "frames: {} run of {} pages at pfn {:#x} dropped: its pages are leaked\n",
        what,
        count,
        pfn
    );
    if !ABANDONED_TRACED.swap(true, Ordering::Relaxed) {
        // SAFETY: FFI call printing the current stack; callable in any
        // context.
        unsafe { bindings::dump_stack() };
    }
}

/// A run of pages an allocation is assembling.
///
/// # Invariants
///
/// Pages `start..start + count` of `frames` were claimed for this
/// allocation alone; each is
///
/// - free,
/// - lent (to be taken through [`ClaimedRun::take_lent`]),
/// - one of the `handed` lent pages taken as they are: allocation steps
///   done and one reference (speculative references of pfn walkers may
///   come and go on top), by which `finish` and `give_up` tell them apart
///   (no free page has one),
/// - or one of the `bad` lent pages whose free steps found them in a bad
///   state, to be kept out of use: its bit in `frames.bad` is set.  The
///   page itself is left as the free steps found it: its reference count
///   may be anything (one of the states they report), and whoever holds a
///   reference may still use it, its `private` field included.
///
/// The bit in `frames.bad` of each other page of the run is clear.
/// `handed` is 0 unless `handoff`.  A free page may be hardware-poisoned
/// (`memory_failure()` only marks a page without a reference that is not
/// a buddy page): `finish` refuses a run with such a page or a bad one.
///
/// Dropping a run without [`ClaimedRun::finish`] or [`ClaimedRun::give_up`]
/// leaks its pages, and is reported and counted ([`abandoned_runs`]).
#[must_use = "a claimed run is finished into an allocation or given up"]
pub struct ClaimedRun<'a> {
    frames: &'a OwnedFrames,
    start: usize,
    count: usize,
    gfp: bindings::gfp_t,
    handoff: bool,
    handed: usize,
    bad: usize,
    /// `check_pages_enabled`, read once per run.
    check_pages: bool,
}

impl<'a> ClaimedRun<'a> {
    /// Makes the run; see [`OwnedFrames::claim`], whose contract gives the
    /// type invariant.
    pub(super) fn new(
        frames: &'a OwnedFrames,
        start: usize,
        count: usize,
        gfp: bindings::gfp_t,
        handoff: bool,
        check_pages: bool,
    ) -> Self {
        Self {
            frames,
            start,
            count,
            gfp,
            handoff,
            handed: 0,
            bad: 0,
            check_pages,
        }
    }

    /// Returns the index of the run's first page.
    #[inline]
    pub fn start(&self) -> usize {
        self.start
    }

    /// Returns the number of pages in the run.
    #[inline]
    pub fn count(&self) -> usize {
        self.count
    }

    /// Returns how many lent pages the run took as they are.
    pub fn handed(&self) -> usize {
        self.handed
    }

    /// Returns how many lent pages the free steps found in a bad state when
    /// the run took them: the run cannot be finished, only given up.
    pub fn bad(&self) -> usize {
        self.bad
    }

    /// Takes a lent page of the run, which its borrower let go of.
    ///
    /// A page exactly as its lending left it becomes a page of the
    /// allocation as it is (it gets its reference; page_owner and the
    /// allocation tag keep the lending as its allocation until `finish`
    /// moves the tag), when the allocation allows it (plain pages, and
    /// neither tag-based KASAN nor KMSAN).  Otherwise it gets the free
    /// steps, whose checks report a page in a bad state: such a page is
    /// kept out of the allocation (see [`ClaimedRun::bad`]); the others
    /// are prepared with the free pages.  Does not sleep.
    ///
    /// Returns the page back if it is not a page of this run.
    #[inline]
    pub fn take_lent(&mut self, page: LentPage<'a>) -> Result<(), LentPage<'a>> {
        if !core::ptr::eq(page.frames, self.frames) {
            return Err(page);
        }
        // SAFETY: a `LentPage` of our frames is lent, with no copy in
        // flight, and carries the one right to end its lending (its type
        // invariant), which passes to the run here.
        let outside = unsafe { self.take_lent_mask(page.index, 1) };
        if outside != 0 {
            return Err(page);
        }
        Ok(())
    }

    /// Takes the lent pages `base + i` of the run, for each bit `i` of
    /// `mask`, as [`ClaimedRun::take_lent`] takes one: a chunk of pages
    /// that their borrower let go of together, taken in one pass.  Page
    /// indices wrap, so `base` may lie below the range's first page.
    ///
    /// Returns the bits of the pages that are not in the run, which are
    /// left alone.
    ///
    /// # Safety
    ///
    /// Each page named that is in the run must be lent
    /// ([`OwnedFrames::lend`]), with no copy into or out of it in flight,
    /// and the caller must hold the one right to end its lending (no
    /// [`LentPage`] of it exists), which passes to the run.
    #[inline]
    pub unsafe fn take_lent_mask(&mut self, base: usize, mask: u64) -> u64 {
        let (start, count) = (self.start, self.count);
        let (mut m, mut outside, mut handed, mut bad) = (mask, 0, 0, 0);
        // The run's flags, read once: the compiler cannot keep them in
        // registers across the stores to the pages.
        let (handoff, check_pages) = (self.handoff, self.check_pages);
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            // Indices wrap: `base` may lie below the run.
            let index = base.wrapping_add(i);
            if index.wrapping_sub(start) >= count {
                outside |= 1 << i;
                continue;
            }
            // INVARIANT: the page is lent and the right to end its lending
            // is ours (the caller's contract).
            let lent = LentPage {
                frames: self.frames,
                index,
            };
            if handoff && lent.is_clean(check_pages) {
                // SAFETY: the page is lent, clean, and ours to end: it
                // becomes a page of the run, handed off.
                unsafe { set_refcounted(self.frames.page(index)) };
                handed += 1;
            } else if lent.give_back().is_err() && !self.frames.is_hwpoisoned(index) {
                // The free steps reported the page in a bad state.  It
                // stays out of the allocation: `finish` refuses the run,
                // and `give_up` reports the page bad.  A poisoned page
                // keeps its flag, by which both find it.  The record is
                // the frames' own: someone may still hold a reference to
                // the page, and its fields may be theirs.
                self.frames.bad.set(index, 1);
                bad += 1;
            }
        }
        // INVARIANT: `handoff` held for each page counted in `handed`, and
        // each has its reference; each page counted in `bad` has its bit
        // set in `frames.bad`.
        self.handed += handed;
        self.bad += bad;
        outside
    }

    /// Gives the run's pages the state the page allocator gives an
    /// allocation with the run's `gfp`, and returns the first page.
    ///
    /// Free pages get `post_alloc_hook()` a naturally aligned block at a
    /// time, then one reference each; with `__GFP_COMP` (a power-of-two
    /// count) the run becomes one compound page with one reference on its
    /// head.  Handed-off pages keep their allocation steps; they are zeroed
    /// if the allocation asks for it or `init_on_free` wants a page's data
    /// gone before its next owner, and the allocation's tag replaces the
    /// lending's.  The pages are the caller's from here on.
    ///
    /// A run that holds a page found in a bad state or marked
    /// hardware-poisoned is not finished: it is returned, to be given up
    /// ([`ClaimedRun::give_up`]).  The flags are read here, after every lent
    /// page was taken, so a page poisoned while the caller waited for the
    /// lent ones (a discard may sleep) is found too.  They are read only
    /// while some page of the system is poisoned.
    #[inline]
    pub fn finish(self) -> Result<*mut bindings::page, Self> {
        if self.bad > 0 || self.has_poisoned() {
            return Err(self);
        }
        // The run's obligation ends here: no report on the way out.
        Ok(ManuallyDrop::new(self).prepare())
    }

    /// Whether a page of the run is marked hardware-poisoned: never when
    /// no page of the system is, which is then known without reading a
    /// `struct page`.
    fn has_poisoned(&self) -> bool {
        page_access::any_hwpoisoned()
            && (self.start..self.start + self.count).any(|i| {
                // SAFETY: a page of the range is in the memory map.
                unsafe { hwpoisoned(self.frames.page(i)) }
            })
    }

    /// The steps of [`ClaimedRun::finish`].
    fn prepare(&self) -> *mut bindings::page {
        let first = self.frames.page(self.start);
        let (base, end) = (self.start, self.start + self.count);
        // SAFETY: FFI calls reading the gfp flags and boot-time settings.
        let zero = unsafe {
            bindings::rsmm_want_init_on_alloc(self.gfp) || bindings::rsmm_want_init_on_free()
        };
        // SAFETY: FFI call reading a static key.
        let tags = unsafe { bindings::rsmm_mem_alloc_profiling_enabled() };
        let handed_page = |page: *mut bindings::page| {
            // SAFETY: a handed-off page of the run, allocated and ours
            // (type invariant): it may be written, and its tag moved.
            unsafe {
                if zero {
                    bindings::rsmm_clear_highpage(page);
                }
                if tags {
                    bindings::rsmm_frames_pgalloc_tag_sub(page, 1);
                    bindings::rsmm_frames_pgalloc_tag_add_current(page, 1);
                }
            }
        };
        if self.handed == self.count {
            // The whole run, as it is when the area was fully lent: nothing
            // to do unless pages are zeroed or tags moved.
            if zero || tags {
                (base..end).for_each(|i| handed_page(self.frames.page(i)));
            }
            return first;
        }
        if self.gfp & GFP_COMP != 0 && self.count.is_power_of_two() {
            let order = self.count.ilog2();
            // SAFETY: the run is free (no handoff for compound runs, type
            // invariant) and ours: it becomes one compound page.
            unsafe {
                bindings::rsmm_frames_post_alloc_hook(first, order, self.gfp);
                bindings::rsmm_frames_set_page_refcounted(first);
                bindings::rsmm_frames_prep_compound_page(first, order);
            }
            return first;
        }
        let pfn_base = self.frames.base_pfn;
        let mut i = base;
        while i < end {
            let page = self.frames.page(i);
            // SAFETY: a page of the run; its count may be read.
            if self.handed > 0 && unsafe { ref_count(page) } != 0 {
                handed_page(page);
                i += 1;
                continue;
            }
            let mut order = block_order(pfn_base + i, pfn_base + end);
            if self.handed > 0 {
                // The block stops before the first handed-off page in it.
                let n = 1usize << order;
                if let Some(j) = (1..n).find(|&j| {
                    // SAFETY: as above.
                    unsafe { ref_count(self.frames.page(i + j)) != 0 }
                }) {
                    order = j.ilog2();
                }
            }
            // SAFETY: pages `i..i + (1 << order)` of the run are free and
            // ours (type invariant): they get the allocation steps as one
            // block, then one reference each.
            unsafe {
                bindings::rsmm_frames_post_alloc_hook(page, order, self.gfp);
                bindings::rsmm_frames_set_page_refcounted(page);
                if order > 0 {
                    bindings::split_page(page, order);
                }
            }
            i += 1 << order;
        }
        first
    }

    /// Gives up the run: every page of it leaves the run's hands, and is
    /// passed to `fate` with what became of it, in order:
    ///
    /// - [`PageFate::Freed`]: free (a handed-off page got its reference
    ///   dropped and the free steps);
    /// - [`PageFate::Referenced`]: a handed-off page someone else holds a
    ///   speculative reference to: the page allocator's free paths give it
    ///   back to the owner when that goes;
    /// - [`PageFate::Poisoned`]: marked hardware-poisoned, free steps done
    ///   or refused: it must be kept out of use for good;
    /// - [`PageFate::Bad`]: found in a bad state by the free steps (and
    ///   reported): it must be kept out of use.
    ///
    /// Does not sleep.
    pub fn give_up(self, fate: impl FnMut(usize, PageFate)) {
        // The run's obligation ends here: no report on the way out.
        ManuallyDrop::new(self).undo(fate)
    }

    /// The steps of [`ClaimedRun::give_up`].
    fn undo(&self, mut fate: impl FnMut(usize, PageFate)) {
        for i in self.start..self.start + self.count {
            // A bad page may have a reference (someone else's, never to be
            // dropped here), and is left untouched: its bit is looked at
            // first, and cleared, as the run lets go of the page.
            if self.bad > 0 && self.frames.bad.take(i) {
                fate(i, PageFate::Bad);
                continue;
            }
            let page = self.frames.page(i);
            // SAFETY: a page of the run, ours and not a bad one (type
            // invariant): its count and flags may be read, and its
            // reference, if it has one (a handed-off page), dropped once.
            let what = unsafe {
                if self.handed > 0 && ref_count(page) != 0 {
                    if !bindings::rsmm_put_page_testzero(page) {
                        PageFate::Referenced
                    } else if bindings::rsmm_frames_free_pages_prepare(page, 0) {
                        PageFate::Freed
                    } else if hwpoisoned(page) {
                        PageFate::Poisoned
                    } else {
                        PageFate::Bad
                    }
                } else if hwpoisoned(page) {
                    PageFate::Poisoned
                } else {
                    PageFate::Freed
                }
            };
            fate(i, what);
        }
    }
}

impl Drop for ClaimedRun<'_> {
    /// Reports a run that was neither finished nor given up: its pages
    /// stay claimed, and any taken as they are stay allocated.
    fn drop(&mut self) {
        abandoned("claimed", self.frames.base_pfn + self.start, self.count);
    }
}

/// What became of a released page (see [`ReleasedRun::put`]), or of a
/// page of a run given up (see [`ClaimedRun::give_up`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageFate {
    /// Its last reference went (or it never had one): it is free.
    Freed,
    /// Someone still holds a reference: the page allocator's free paths
    /// give it back to the owner when the last one goes.
    Referenced,
    /// It has no reference left and is hardware-poisoned: it must be kept
    /// out of use for good.
    Poisoned,
    /// It has no reference left and the free steps found it in a bad state
    /// (and reported it): it must be kept out of use for good.
    Bad,
}

/// An allocation whose owner let go of it.
///
/// # Invariants
///
/// Pages `start..start + count` of `frames` are an allocation made by
/// [`ClaimedRun::finish`] (or part of one of plain pages) that its owner
/// released, and this value is the only release of them.
///
/// Dropping it without [`ReleasedRun::put`] leaks the pages, and is
/// reported and counted ([`abandoned_runs`]).
#[must_use = "a released run is put"]
pub struct ReleasedRun<'a> {
    frames: &'a OwnedFrames,
    start: usize,
    count: usize,
}

impl<'a> ReleasedRun<'a> {
    /// Makes the run; see [`OwnedFrames::released`], whose contract gives
    /// the type invariant.
    pub(super) fn new(frames: &'a OwnedFrames, start: usize, count: usize) -> Self {
        Self {
            frames,
            start,
            count,
        }
    }

    /// Drops the owner's references.
    ///
    /// A compound page goes through `put_page()`, the teardown and free
    /// path of any folio; the free path gives it back to the owner when its
    /// last reference goes (now, or later).  Each plain page is passed to
    /// `fate` with what became of it; pages whose last reference went get
    /// the free steps first.  Returns `false` for a compound page (`fate`
    /// is not called), `true` for plain pages.
    pub fn put(self, fate: impl FnMut(usize, PageFate)) -> bool {
        // The run's obligation ends here: no report on the way out.
        ManuallyDrop::new(self).put_pages(fate)
    }

    /// The steps of [`ReleasedRun::put`].
    fn put_pages(&self, mut fate: impl FnMut(usize, PageFate)) -> bool {
        let first = self.frames.page(self.start);
        // SAFETY: the allocation is ours to release (type invariant); a
        // head page stands for its whole compound page.
        if unsafe { bindings::rsmm_page_head(first) } {
            // SAFETY: as above: the owner's reference is dropped once.
            unsafe { bindings::rsmm_put_page(first) };
            return false;
        }
        for i in self.start..self.start + self.count {
            let page = self.frames.page(i);
            // SAFETY: a plain page of the allocation, whose owner's
            // reference this drops once (type invariant).
            let what = if !unsafe { bindings::rsmm_put_page_testzero(page) } {
                PageFate::Referenced
            // SAFETY: the last reference went: the free steps may run.
            } else if unsafe { bindings::rsmm_frames_free_pages_prepare(page, 0) } {
                PageFate::Freed
            } else if self.frames.is_hwpoisoned(i) {
                PageFate::Poisoned
            } else {
                PageFate::Bad
            };
            fate(i, what);
        }
        true
    }
}

impl Drop for ReleasedRun<'_> {
    /// Reports a release that was not put: the owner's references stay.
    fn drop(&mut self) {
        abandoned("released", self.frames.base_pfn + self.start, self.count);
    }
}
