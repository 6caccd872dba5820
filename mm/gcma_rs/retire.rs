// SPDX-License-Identifier: GPL-2.0

//! Pages of an area taken out of use for good.
//!
//! A page is retired when GCMA finds it hardware-poisoned
//! (`memory_failure()` can only mark a page of an area that is free or
//! lent, which has no reference and is no buddy page), in a bad state (the
//! page allocator's free steps reported it), or when a copy out of it
//! failed (a machine check whose `memory_failure()` is still queued).
//! The map keeps a retired page primary-owned and releasing, so no search
//! finds it and no client borrows it; `hwpoisoned_pages` and `bad_pages`
//! count them.  An allocation whose run holds such a page gives the run
//! up ([`Area::give_up`]) and searches again.

use crate::{Area, Map};
use core::sync::atomic::Ordering;
use kernel::{
    mm::frames::{ClaimedRun, PageFate},
    prelude::*,
};

/// The pages of a range the area takes back, passed in order with what
/// became of each ([`ClaimedRun::give_up`],
/// [`ReleasedRun::put`](kernel::mm::frames::ReleasedRun::put)): the freed
/// ones are freed in the map a run at a time, the others are not.
pub(crate) struct Sweep<'a> {
    area: &'a Area,
    /// The first page of the freed ones not freed in the map yet.
    from: usize,
}

impl<'a> Sweep<'a> {
    /// Starts a sweep of the area's pages from `start` on.
    pub(crate) fn new(area: &'a Area, start: usize) -> Self {
        Self { area, from: start }
    }

    /// Takes page `i`, the next one, which `fate` says what became of.
    pub(crate) fn page(&mut self, i: usize, fate: PageFate) {
        if fate == PageFate::Freed {
            return;
        }
        // Freed later by the free path when still referenced; out of use
        // for good when poisoned or bad.
        self.area.retire(i, fate);
        if i > self.from {
            self.area.free(self.from, i - self.from);
        }
        self.from = i + 1;
    }

    /// Ends the sweep at `end`: frees the freed pages not freed yet.
    pub(crate) fn finish(self, end: usize) {
        if end > self.from {
            self.area.free(self.from, end - self.from);
        }
    }
}

impl Area {
    /// Records that a copy out of the lent page `page` failed: its memory
    /// is bad, and it goes out of use when it is given back, whether or
    /// not `memory_failure()` has marked it by then.
    pub(crate) fn note_failed_copy(&self, page: usize) {
        self.failed_copies.set(page, 1);
    }

    /// Whether a copy out of page `page` failed since it was lent; clears
    /// the record.
    pub(crate) fn take_failed_copy(&self, page: usize) -> bool {
        self.failed_copies.take(page)
    }

    /// Logs that page `page` was taken out of use for good, as `fate`
    /// (hardware-poisoned, or in a bad state) says.
    pub(crate) fn note_retired(&self, page: usize, fate: PageFate) {
        let why = if fate == PageFate::Bad {
            "in a bad state"
        } else {
            "hardware-poisoned"
        };
        pr_warn!(
            "{}: page at pfn {:#x} is {}: taken out of use\n",
            self.name(),
            self.base_pfn + page,
            why
        );
    }

    /// Gives up `run`: its hardware-poisoned and bad pages are taken out of
    /// use for good, its other pages freed (handed-off lent pages first
    /// lose their reference and get the free steps, see
    /// [`ClaimedRun::give_up`]).  A page someone still holds a speculative
    /// reference to stays allocated until the free path gives it back.
    pub(crate) fn give_up(&self, run: ClaimedRun<'_>) {
        let (start, end) = (run.start(), run.start() + run.count());
        // The range is the caller's: nobody else changes its bits.
        let mut sweep = Sweep::new(self, start);
        run.give_up(|i, fate| {
            let fate = match (fate, self.take_failed_copy(i)) {
                (PageFate::Freed, true) => PageFate::Poisoned,
                (fate, _) => fate,
            };
            sweep.page(i, fate);
        });
        sweep.finish(end);
    }

    /// Takes page `page`, which is primary-owned by the caller (and not
    /// the caller's to hand out any more) or free in the map, out of use
    /// for good if `fate` says it is hardware-poisoned or in a bad state;
    /// does nothing otherwise.
    pub(crate) fn retire(&self, page: usize, fate: PageFate) {
        let retired = self.retire_in(&mut self.map.lock(), page, fate);
        if retired {
            self.note_retired(page, fate);
        }
    }

    /// [`Area::retire`] under the map's lock, `map`, without the log line
    /// ([`Area::note_retired`], which the caller writes once the lock is
    /// dropped).  Returns whether the page was retired.
    pub(crate) fn retire_in(&self, map: &mut Map, page: usize, fate: PageFate) -> bool {
        let bad = match fate {
            PageFate::Poisoned => false,
            PageFate::Bad => true,
            PageFate::Freed | PageFate::Referenced => return false,
        };
        if map.retire(page).is_err() {
            return false;
        }
        // Under the map's lock, with the map's count of retired pages, so
        // that `stats` reads both alike.
        if bad {
            self.bad.fetch_add(1, Ordering::Relaxed);
        }
        true
    }

    /// Undoes the retirement of page `page`, which a test made look bad in
    /// the way `fate` says and made good again: its free steps run, and it
    /// is free in the map.  Returns whether it was retired.
    // Used only by the poison suite, built with memory failure handling.
    #[cfg(all(CONFIG_GCMA_KUNIT_TEST, CONFIG_MEMORY_FAILURE))]
    pub(crate) fn unretire(&self, page: usize, fate: PageFate) -> bool {
        let mut map = self.map.lock();
        if map.unretire(page).is_err() {
            return false;
        }
        // Its free steps may have run to their end before: its tag is
        // marked empty, as for a page never allocated.
        let page_ptr = self.frames.page_ptr(page);
        // SAFETY: a retired page the test made good again has no reference
        // and is nobody's (the map kept it out of every search and loan,
        // and nobody claims it before the lock is dropped): the free steps
        // may run on it, once more.
        let freed = unsafe {
            kernel::bindings::rsmm_frames_clear_page_tag_ref(page_ptr);
            kernel::bindings::rsmm_frames_free_pages_prepare(page_ptr, 0)
        };
        if !freed {
            // Still bad: out of use again.
            let _ = map.retire(page);
            return false;
        }
        if fate == PageFate::Bad {
            self.bad.fetch_sub(1, Ordering::Relaxed);
        }
        true
    }
}
