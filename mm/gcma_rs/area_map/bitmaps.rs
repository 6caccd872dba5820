// SPDX-License-Identifier: GPL-2.0

//! Word-level access to the three bitmaps of an [`AreaMap`]: masks of
//! page ranges within a word, the iteration over the words of a range,
//! single bits, range checks and the free-page masks of a word.
//!
//! Every other part of the map (the run tree, the availability bitset, the
//! primary and secondary operations) reads the bitmaps through these; they
//! are kept apart because they know nothing of the summaries.

use super::{AreaMap, BITS};
use core::ops::DerefMut;
use kernel::prelude::*;

/// Returns a word with the low `n` bits set.
pub(super) const fn low_bits(n: usize) -> usize {
    if n >= BITS {
        usize::MAX
    } else {
        (1usize << n) - 1
    }
}

/// Returns a word with bits `lo..hi` set, for `lo < hi <= BITS`.
const fn range_mask(lo: usize, hi: usize) -> usize {
    // Both shifts are below `BITS`: no branch, unlike `low_bits`.
    (usize::MAX << lo) & (usize::MAX >> (BITS - hi))
}

/// Masks of the pages `off..off + count` of a word and of the pages past
/// its end in the next word, for `off < BITS` and `1 <= count <= BITS`.
pub(super) fn short_masks(off: usize, count: usize) -> (usize, usize) {
    let ones = usize::MAX >> (BITS - count);
    // Two shifts, each below `BITS`, shift `ones` right by `BITS - off`,
    // which is `BITS` for `off == 0`.
    (ones << off, (ones >> 1) >> (BITS - 1 - off))
}

/// Iterator over the bitmap words of a page range, with the mask of the
/// range's pages in each word.
pub(super) struct WordMasks {
    /// Next page.
    page: usize,
    /// End of the range (exclusive).
    end: usize,
}

impl WordMasks {
    /// Words of pages `start..end`.
    pub(super) fn new(start: usize, end: usize) -> Self {
        WordMasks { page: start, end }
    }
}

impl Iterator for WordMasks {
    type Item = (usize, usize);

    fn next(&mut self) -> Option<(usize, usize)> {
        if self.page >= self.end {
            return None;
        }
        let w = self.page / BITS;
        let lo = self.page % BITS;
        let hi = (self.end - w * BITS).min(BITS);
        self.page = w * BITS + hi;
        // `lo < hi`, as `page < end`.
        Some((w, range_mask(lo, hi)))
    }
}

impl<S: DerefMut<Target = [usize]>> AreaMap<S> {
    /// Reads bit `page` of `map`.
    pub(super) fn bit(map: &[usize], page: usize) -> bool {
        map.get(page / BITS)
            .is_some_and(|w| w & (1usize << (page % BITS)) != 0)
    }

    /// Validates `start..start + count` as a non-empty range of the area and
    /// returns its end.
    pub(super) fn check_range(&self, start: usize, count: usize) -> Result<usize> {
        match start.checked_add(count) {
            Some(end) if count > 0 && end <= self.nr_pages => Ok(end),
            _ => Err(EINVAL),
        }
    }

    /// As [`Self::check_range`], and also requires every page of the range
    /// to be primary-owned.
    pub(super) fn check_primary_range(&self, start: usize, count: usize) -> Result<usize> {
        let end = self.check_range(start, count)?;
        for (w, m) in WordMasks::new(start, end) {
            match self.primary.get(w) {
                Some(&p) if p & m == m => {}
                _ => return Err(EINVAL),
            }
        }
        Ok(end)
    }

    /// Mask of the pages of word `w` free of primary owners (0 for a padding
    /// leaf past the area).
    pub(super) fn leaf_free(&self, w: usize) -> usize {
        // The bits past the area are set in the primary bitmap.
        self.primary.get(w).map_or(0, |p| !p)
    }

    /// Mask of the pages of word `w` free in both bitmaps.
    pub(super) fn both_free(&self, w: usize) -> usize {
        match (self.primary.get(w), self.secondary.get(w)) {
            (Some(p), Some(s)) => !p & !s,
            _ => 0,
        }
    }
}
