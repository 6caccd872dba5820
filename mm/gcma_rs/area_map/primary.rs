// SPDX-License-Identifier: GPL-2.0

//! The primary side of an [`AreaMap`]: contiguous allocations (the bounded,
//! aligned first-fit search and the claim of the range found), the two-step
//! release, and retiring bad pages.
//!
//! The operations that change primary bits, apart from the summaries they
//! keep up to date (`runs.rs`, `avail.rs`) and the search (`search.rs`).

use super::{
    bitmaps::{short_masks, WordMasks},
    AllocOutcome, AllocStep, AreaMap, BITS, HINTS,
};
use core::ops::DerefMut;
use kernel::prelude::*;

impl<S: DerefMut<Target = [usize]>> AreaMap<S> {
    /// Allocates `count` contiguous pages whose first page has a frame
    /// number that is a multiple of `1 << align_order`, at the lowest such
    /// address where none of the pages is primary-owned, and marks them
    /// primary-owned.
    ///
    /// Pages lent to secondary clients may be taken; [`AllocOutcome::lent`]
    /// tells how many, and they must be discarded as described in the
    /// module documentation.
    ///
    /// Errors, with the map unchanged: `EINVAL` if `count == 0` or
    /// `align_order >= usize::BITS`; `ENOMEM` if `count > nr_pages` or no
    /// such range is free.
    // The kernel allocates with `alloc_primary_from()`; this serves the tests.
    #[cfg(any(test, CONFIG_GCMA_KUNIT_TEST))]
    pub(crate) fn alloc_primary(&mut self, count: usize, align_order: u32) -> Result<AllocOutcome> {
        let mut from = 0;
        loop {
            match self.alloc_primary_from(count, align_order, from, usize::MAX)? {
                AllocStep::Done(out) => return Ok(out),
                AllocStep::Resume(next) => from = next,
            }
        }
    }

    /// As [`AreaMap::alloc_primary`], looking only at ranges that start at
    /// `from` or above, and giving up after `tries` unaligned fits: then it
    /// returns [`AllocStep::Resume`] with the page to go on from, having
    /// changed nothing.  Each try costs `O(log n)`.
    #[inline(always)]
    pub(crate) fn alloc_primary_from(
        &mut self,
        count: usize,
        align_order: u32,
        from: usize,
        tries: usize,
    ) -> Result<AllocStep> {
        // The common request, a few unaligned pages searched from their
        // hint, takes no tries and no alignment arithmetic.
        let hint = count.wrapping_sub(1);
        if align_order == 0 && hint < HINTS {
            if let Some(&low) = self.low.get(hint) {
                if from <= low {
                    let found = self.find_small(low, count);
                    // The lowest run of `count` free pages in the area.
                    if let Some(low) = self.low.get_mut(hint) {
                        *low = found.unwrap_or(self.nr_pages);
                    }
                    let start = found.ok_or(ENOMEM)?;
                    return Ok(AllocStep::Done(self.claim(start, count)));
                }
            }
        }
        self.alloc_primary_search(count, align_order, from, tries)
    }

    /// The rest of [`Self::alloc_primary_from`]: aligned or larger
    /// requests, and searches that resume above the hint.
    #[inline(never)]
    fn alloc_primary_search(
        &mut self,
        count: usize,
        align_order: u32,
        mut from: usize,
        tries: usize,
    ) -> Result<AllocStep> {
        if count == 0 {
            return Err(EINVAL);
        }
        let align = 1usize.checked_shl(align_order).ok_or(EINVAL)?;
        if count > self.nr_pages {
            return Err(ENOMEM);
        }
        // Offset of page 0 from the previous aligned frame.
        let phase = self.base & (align - 1);
        let mut left = tries;
        // No run of `count` free pages starts below the hint: start there.
        let hint = count.min(HINTS) - 1;
        let mut hinted = false;
        if let Some(&low) = self.low.get(hint) {
            if from <= low {
                from = low;
                hinted = count <= HINTS;
            }
        }
        let start = loop {
            let found = self.find(from, count);
            if hinted {
                // The lowest run of `count` free pages in the area.
                if let Some(low) = self.low.get_mut(hint) {
                    *low = found.unwrap_or(self.nr_pages);
                }
                hinted = false;
            }
            let s = found.ok_or(ENOMEM)?;
            // `phase + s` cannot overflow: both are below the area's span.
            let aligned = (phase + s).checked_next_multiple_of(align).ok_or(ENOMEM)? - phase;
            if aligned == s {
                break s;
            }
            // No aligned start below `aligned` can fit: look again from there.
            from = aligned;
            left = left.saturating_sub(1);
            if left == 0 {
                return Ok(AllocStep::Resume(from));
            }
        };
        Ok(AllocStep::Done(self.claim(start, count)))
    }

    /// Marks the free pages `start..start + count` primary-owned, with the
    /// summaries and counters.
    #[inline(always)]
    fn claim(&mut self, start: usize, count: usize) -> AllocOutcome {
        let end = start + count;
        let (first, last) = (start / BITS, (end - 1) / BITS);
        let lent = if count <= BITS {
            self.claim_short(start, count)
        } else {
            let lent = self.claim_words(start, end);
            self.update_avail_words(first, last);
            lent
        };
        self.mark_stale(first, last);
        self.primary_used += count;
        self.pending += lent;
        // The pages not lent were free.
        self.free -= count - lent;
        AllocOutcome { start, count, lent }
    }

    /// Sets the primary bits of pages `start..start + count`, with
    /// `1 <= count <= BITS`, keeps the availability bitset up to date and
    /// returns how many of the pages are lent.
    ///
    /// Such a range spans at most two words, handled alike whether it
    /// spans one or two: a branch on that would be mispredicted about as
    /// often as not for small ranges at random places.
    #[inline(always)]
    fn claim_short(&mut self, start: usize, count: usize) -> usize {
        let (w0, w1) = (start / BITS, (start + count - 1) / BITS);
        let (m0, m1) = short_masks(start % BITS, count);
        // The words as a slice of one or two: one bounds check each.
        let Some(s) = self.secondary.get(w0..=w1) else {
            return 0;
        };
        let (Some(&s0), Some(&s1)) = (s.first(), s.last()) else {
            return 0;
        };
        let Some(p) = self.primary.get_mut(w0..=w1) else {
            return 0;
        };
        // With one word, `m1 == 0`: the second update is a no-op.
        let (mut p0, mut p1) = (0, 0);
        if let Some(w) = p.first_mut() {
            *w |= m0;
            p0 = *w;
        }
        if let Some(w) = p.last_mut() {
            *w |= m1;
            p1 = *w;
        }
        // Claiming only takes free pages away: the availability bitset
        // changes only if a word has none left.  Mostly it has some.
        if p0 | s0 == usize::MAX || p1 | s1 == usize::MAX {
            self.update_avail_pair(w0, w1);
        }
        let (l0, l1) = (s0 & m0, s1 & m1);
        // Mostly none: skip the population count.
        if l0 | l1 != 0 {
            (l0.count_ones() + l1.count_ones()) as usize
        } else {
            0
        }
    }

    /// Sets the primary bits of pages `start..end`, which span several
    /// words, and returns how many of them are lent.
    #[inline(never)]
    fn claim_words(&mut self, start: usize, end: usize) -> usize {
        let mut lent = 0;
        for (w, m) in WordMasks::new(start, end) {
            lent += self.claim_word(w, m);
        }
        lent
    }

    /// Sets the primary bits `m` of bitmap word `w` and returns how many of
    /// them are lent.
    fn claim_word(&mut self, w: usize, m: usize) -> usize {
        match (self.primary.get_mut(w), self.secondary.get(w)) {
            (Some(p), Some(&s)) => {
                *p |= m;
                // Mostly none: skip the population count.
                if s & m != 0 {
                    (s & m).count_ones() as usize
                } else {
                    0
                }
            }
            _ => 0,
        }
    }

    /// Marks the primary-owned pages `start..start + count` releasing:
    /// their owner has let go of them, and [`AreaMap::release_primary`]
    /// frees them once nobody else holds them.
    ///
    /// Errors, with the map unchanged: `EINVAL` if `count == 0`, the range
    /// is out of the area or any of its pages is not primary-owned;
    /// `EEXIST` if any of its pages is releasing already.  Both mean a
    /// double or wrong release by the caller.
    pub(crate) fn begin_release(&mut self, start: usize, count: usize) -> Result {
        let end = self.check_primary_range(start, count)?;
        for (w, m) in WordMasks::new(start, end) {
            if self.releasing.get(w).is_some_and(|r| r & m != 0) {
                return Err(EEXIST);
            }
        }
        for (w, m) in WordMasks::new(start, end) {
            if let Some(r) = self.releasing.get_mut(w) {
                *r |= m;
            }
        }
        self.releasing_pages += count;
        Ok(())
    }

    /// Frees the primary-owned pages `start..start + count`, releasing or
    /// not (their releasing bits are cleared).
    ///
    /// A range may be freed piecewise.  Errors, with the map unchanged:
    /// `EINVAL` if `count == 0`, the range is out of the area or any of its
    /// pages is not primary-owned; `EBUSY` if any of its pages is still lent
    /// (see [`AreaMap::finish_discard`]).
    pub(crate) fn release_primary(&mut self, start: usize, count: usize) -> Result {
        let end = self.check_range(start, count)?;
        let was_releasing = if count <= BITS {
            self.free_short(start, count)?
        } else {
            self.free_words(start, end)?
        };
        self.mark_stale(start / BITS, (end - 1) / BITS);
        // Runs of `j + 1` free pages may start from `start - j` on now.
        for (j, low) in self.low.iter_mut().enumerate() {
            *low = (*low).min(start.saturating_sub(j));
        }
        self.primary_used -= count;
        self.releasing_pages -= was_releasing;
        self.free += count;
        self.generation = self.generation.wrapping_add(1);
        Ok(())
    }

    /// The bitmap part of [`Self::release_primary`] for `1 <= count <=
    /// BITS`, in at most two words handled alike (see
    /// [`Self::claim_short`]): checks the range, clears its primary and
    /// releasing bits, brings the availability bitset up to date and
    /// returns how many of its pages were releasing.
    #[inline]
    fn free_short(&mut self, start: usize, count: usize) -> Result<usize> {
        let (w0, w1) = (start / BITS, (start + count - 1) / BITS);
        let (m0, m1) = short_masks(start % BITS, count);
        // The words as slices of one or two, as in `claim_short()`.
        let (Some(p), Some(s)) = (self.primary.get(w0..=w1), self.secondary.get(w0..=w1)) else {
            return Err(EINVAL);
        };
        let (Some(&p0), Some(&p1), Some(&s0), Some(&s1)) =
            (p.first(), p.last(), s.first(), s.last())
        else {
            return Err(EINVAL);
        };
        // Not primary-owned takes precedence over lent.
        if p0 & m0 != m0 || p1 & m1 != m1 {
            return Err(EINVAL);
        }
        if (s0 & m0) | (s1 & m1) != 0 {
            return Err(EBUSY);
        }
        // With one word, `m1 == 0`: the second updates are no-ops.
        if let Some(p) = self.primary.get_mut(w0..=w1) {
            if let Some(w) = p.first_mut() {
                *w &= !m0;
            }
            if let Some(w) = p.last_mut() {
                *w &= !m1;
            }
        }
        // The pages freed are lent to nobody: both words have a page free
        // in both bitmaps now.
        self.set_avail(w0);
        self.set_avail(w1);
        let (mut was, mut was1) = (0, 0);
        if let Some(r) = self.releasing.get_mut(w0..=w1) {
            if let Some(w) = r.first_mut() {
                was = *w & m0;
                *w &= !m0;
            }
            if let Some(w) = r.last_mut() {
                was1 = *w & m1;
                *w &= !m1;
            }
        }
        Ok(if was == m0 && was1 == m1 {
            // The usual release, after `begin_release()` of the range.
            count
        } else if was | was1 == 0 {
            0
        } else {
            (was.count_ones() + was1.count_ones()) as usize
        })
    }

    /// The bitmap part of [`Self::release_primary`] for a range over
    /// several words: as [`Self::free_short`], a word at a time.
    #[inline(never)]
    fn free_words(&mut self, start: usize, end: usize) -> Result<usize> {
        // One pass for both checks; not primary-owned takes precedence.
        let mut busy = false;
        for (w, m) in WordMasks::new(start, end) {
            match (self.primary.get(w), self.secondary.get(w)) {
                (Some(&p), Some(&s)) if p & m == m => busy |= s & m != 0,
                _ => return Err(EINVAL),
            }
        }
        if busy {
            return Err(EBUSY);
        }
        let mut was_releasing = 0;
        for (w, m) in WordMasks::new(start, end) {
            if let Some(p) = self.primary.get_mut(w) {
                *p &= !m;
            }
            if let Some(r) = self.releasing.get_mut(w) {
                // Mostly none: skip the population count.
                if *r & m != 0 {
                    was_releasing += (*r & m).count_ones() as usize;
                    *r &= !m;
                }
            }
            self.set_avail(w);
        }
        Ok(was_releasing)
    }

    /// Whether every page of `start..start + count` is owned by a primary
    /// allocation (false for an empty range or one out of the area).
    /// Costs `O(count / BITS)`.
    // Used only by the KUnit suite and the host tests.
    #[cfg(any(test, CONFIG_GCMA_KUNIT_TEST))]
    pub(crate) fn is_primary_range(&self, start: usize, count: usize) -> bool {
        self.check_primary_range(start, count).is_ok()
    }

    /// Takes `page` out of use for good: its memory is bad (hardware
    /// poison).  The page ends primary-owned and releasing, so no search
    /// finds it, no secondary client borrows it and a release of it is
    /// refused as a double release; it is counted in [`AreaMap::retired`]
    /// and stays out of [`AreaMap::free`].
    ///
    /// `page` may be free (neither bit set), owned by the caller's primary
    /// allocation that never reached its owner (claimed, not releasing), or
    /// released but kept out of use because its memory was found bad when
    /// its last reference went (releasing).  Errors, with the map unchanged:
    /// `EINVAL` if `page` is out of the area, `EBUSY` if it is lent (the
    /// secondary client returns it first).
    pub(crate) fn retire(&mut self, page: usize) -> Result {
        if page >= self.nr_pages {
            return Err(EINVAL);
        }
        if self.is_lent(page) {
            return Err(EBUSY);
        }
        if !self.is_primary(page) {
            // Free: claimed as a one-page allocation (no page is lent).
            self.claim(page, 1);
        }
        if !Self::bit(&self.releasing, page) {
            self.begin_release(page, 1)?;
        }
        self.retired += 1;
        Ok(())
    }

    /// Undoes [`AreaMap::retire`] of `page`, whose memory a test made look
    /// bad: the page is free again.  Errors, with the map unchanged:
    /// `EINVAL` if no page is retired or `page` is not releasing.
    // Used only by the KUnit poison suite (built with memory failure
    // handling), which retires pages on purpose, and the host tests.
    #[cfg(any(test, all(CONFIG_GCMA_KUNIT_TEST, CONFIG_MEMORY_FAILURE)))]
    pub(crate) fn unretire(&mut self, page: usize) -> Result {
        if self.retired == 0 || page >= self.nr_pages || !Self::bit(&self.releasing, page) {
            return Err(EINVAL);
        }
        self.release_primary(page, 1)?;
        self.retired -= 1;
        Ok(())
    }
}
