// SPDX-License-Identifier: GPL-2.0

//! The availability bitset of an [`AreaMap`]: a hierarchy of bits, one per
//! bitmap word at level 0, telling which words hold a page free in both
//! bitmaps, so that lending a secondary page finds one in
//! `O(log n / log BITS)`.
//!
//! Its own file because it is a summary independent of the run tree: it
//! follows both bitmaps, where the tree follows only the primary one.

use super::{AreaMap, BITS};
use core::ops::DerefMut;

/// Most levels the availability bitset can have: enough for any area that
/// fits in the address space (each level divides the words by `BITS`).
pub(super) const MAX_LEVELS: usize = 12;

/// Layout of the availability bitset of `nr_words` bitmap words: the number
/// of levels and the words they take, or `None` if more than `MAX_LEVELS`.
pub(super) const fn avail_layout(nr_words: usize) -> Option<(usize, usize)> {
    let (mut levels, mut total, mut len) = (0, 0, nr_words);
    loop {
        len = len.div_ceil(BITS);
        // `len <= nr_words`, so the total stays below `2 * nr_words`.
        total += len;
        levels += 1;
        if levels > MAX_LEVELS {
            return None;
        }
        if len <= 1 {
            return Some((levels, total));
        }
    }
}

impl<S: DerefMut<Target = [usize]>> AreaMap<S> {
    /// Word `j` of level `level` of the availability bitset.
    pub(super) fn avail_word(&self, level: usize, j: usize) -> usize {
        match self.level_off.get(level) {
            Some(&off) if level < self.levels => self.summary.get(off + j).copied().unwrap_or(0),
            _ => 0,
        }
    }

    /// Brings the availability bitset up to date after a change to bitmap
    /// word `w`.
    #[inline]
    pub(super) fn update_avail(&mut self, w: usize) {
        let set = self.both_free(w) != 0;
        // Mostly the word keeps a page free in both bitmaps, or none.
        let bit = 1usize << (w % BITS);
        if let Some(&word) = self.summary.get(self.level_off[0] + w / BITS) {
            if (word & bit != 0) == set {
                return;
            }
        }
        self.update_avail_levels(w, set);
    }

    /// [`Self::update_avail`] after pages of bitmap word `w` became free in
    /// both bitmaps.
    #[inline]
    pub(super) fn set_avail(&mut self, w: usize) {
        let bit = 1usize << (w % BITS);
        if let Some(&word) = self.summary.get(self.level_off[0] + w / BITS) {
            if word & bit != 0 {
                return;
            }
        }
        self.update_avail_levels(w, true);
    }

    /// The rest of [`Self::update_avail`]: sets bit `w` of level 0 to
    /// `set`, and the levels above as needed.
    #[inline(never)]
    fn update_avail_levels(&mut self, w: usize, set: bool) {
        let (mut j, mut set) = (w, set);
        for level in 0..self.levels {
            let Some(&off) = self.level_off.get(level) else {
                return;
            };
            let Some(word) = self.summary.get_mut(off + j / BITS) else {
                return;
            };
            let old = *word;
            let bit = 1usize << (j % BITS);
            let new = if set { old | bit } else { old & !bit };
            if new == old {
                // Mostly so at level 0: the word still has a page free in
                // both bitmaps, or still none.
                return;
            }
            *word = new;
            if (old == 0) == (new == 0) {
                // The level above does not change.
                return;
            }
            set = *word != 0;
            j /= BITS;
        }
    }

    /// [`Self::update_avail`] for words `first..=last`, after a claim of
    /// more than a word (out of line: rare).
    #[inline(never)]
    pub(super) fn update_avail_words(&mut self, first: usize, last: usize) {
        for w in first..=last {
            self.update_avail(w);
        }
    }

    /// [`Self::update_avail`] of words `w0` and `w1`, out of line: claims
    /// seldom fill a word.
    #[inline(never)]
    pub(super) fn update_avail_pair(&mut self, w0: usize, w1: usize) {
        self.update_avail(w0);
        self.update_avail(w1);
    }
}
