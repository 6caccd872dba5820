// SPDX-License-Identifier: GPL-2.0

//! The secondary side of an [`AreaMap`]: lending single pages to secondary
//! clients and taking them back, and the discard of lent pages that a
//! primary allocation claimed (steps 2 and 3 of the protocol in the
//! [module documentation](super)).
//!
//! Separate from the primary side: these operations change only secondary
//! bits.

#[cfg(test)]
use super::LentIter;
use super::{bitmaps::WordMasks, AreaMap, BITS};
use core::ops::DerefMut;
use kernel::prelude::*;

impl<S: DerefMut<Target = [usize]>> AreaMap<S> {
    /// Returns the first lent page in `from..end` (clamped to the area), if
    /// any.
    // Used only by the host tests (and `LentIter`).
    #[cfg(test)]
    pub(crate) fn next_lent(&self, from: usize, end: usize) -> Option<usize> {
        let end = end.min(self.nr_pages);
        if from >= end {
            return None;
        }
        let mut w = from / BITS;
        let mut bits = self.secondary.get(w)? & (usize::MAX << (from % BITS));
        loop {
            if bits != 0 {
                let page = w * BITS + bits.trailing_zeros() as usize;
                return if page < end { Some(page) } else { None };
            }
            w += 1;
            if w * BITS >= end {
                return None;
            }
            bits = *self.secondary.get(w)?;
        }
    }

    /// Iterates over the lent pages of `start..start + count`.
    ///
    /// Fails with `EINVAL` if the range is empty or out of the area.
    // Used only by the host tests.
    #[cfg(test)]
    pub(crate) fn lent_in(&self, start: usize, count: usize) -> Result<LentIter<'_, S>> {
        let end = self.check_range(start, count)?;
        Ok(LentIter {
            map: self,
            next: start,
            end,
        })
    }

    /// Clears the secondary bits left in the primary-owned range
    /// `start..start + count`, once the secondary side has dropped their
    /// data.  Returns the number of pages cleared.
    ///
    /// Fails with `EINVAL`, changing nothing, if `count == 0`, the range is
    /// out of the area or any of its pages is not primary-owned.
    pub(crate) fn finish_discard(&mut self, start: usize, count: usize) -> Result<usize> {
        let end = self.check_primary_range(start, count)?;
        let mut cleared = 0;
        for (w, m) in WordMasks::new(start, end) {
            if let Some(s) = self.secondary.get_mut(w) {
                cleared += (*s & m).count_ones() as usize;
                *s &= !m;
            }
        }
        // The pages stay primary-owned: no summary changes.
        self.secondary_lent -= cleared;
        self.pending -= cleared;
        Ok(cleared)
    }

    /// Lends to a secondary client a page that is neither primary-owned nor
    /// lent, the highest-addressed one, and returns it.
    ///
    /// Fails with `ENOMEM` if there is none.
    pub(crate) fn lend_secondary(&mut self) -> Result<usize> {
        if self.free == 0 {
            return Err(ENOMEM);
        }
        // Down the availability bitset, taking the highest bit at each level.
        let mut w = 0;
        for level in (0..self.levels).rev() {
            let word = self.avail_word(level, w);
            if word == 0 {
                return Err(ENOMEM);
            }
            w = w * BITS + (BITS - 1 - word.leading_zeros() as usize);
        }
        let candidates = self.both_free(w);
        if candidates == 0 {
            return Err(ENOMEM);
        }
        let bit = BITS - 1 - candidates.leading_zeros() as usize;
        if let Some(s) = self.secondary.get_mut(w) {
            *s |= 1usize << bit;
        }
        self.update_avail(w);
        self.secondary_lent += 1;
        self.free -= 1;
        Ok(w * BITS + bit)
    }

    /// Takes back the lent page `page`.  Allowed for a page claimed by a
    /// primary allocation and awaiting discard, too.
    ///
    /// Fails with `EINVAL`, changing nothing, if `page` is out of the area
    /// or not lent.
    pub(crate) fn return_secondary(&mut self, page: usize) -> Result {
        if page >= self.nr_pages {
            return Err(EINVAL);
        }
        let w = page / BITS;
        let m = 1usize << (page % BITS);
        let (Some(&p), Some(s)) = (self.primary.get(w), self.secondary.get_mut(w)) else {
            return Err(EINVAL);
        };
        if *s & m == 0 {
            return Err(EINVAL);
        }
        *s &= !m;
        self.secondary_lent -= 1;
        if p & m != 0 {
            self.pending -= 1;
        } else {
            self.free += 1;
            self.update_avail(w);
        }
        Ok(())
    }
}
