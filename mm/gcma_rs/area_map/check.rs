// SPDX-License-Identifier: GPL-2.0

//! The consistency check of an [`AreaMap`], for debugging and tests: every
//! counter, summary and hint recomputed from the bitmaps.
//!
//! Apart from the map's operations because it restates their invariants
//! rather than relying on them, and costs time linear in the area.

use super::{
    runs::{Runs, STALE_SPAN},
    summary_words, AreaMap, BITS,
};
use core::ops::DerefMut;
use kernel::prelude::*;

impl<S: DerefMut<Target = [usize]>> AreaMap<S> {
    /// Checks the map's internal consistency: buffer lengths, no bit set
    /// past the end of the area, counters equal to the bitmaps' contents,
    /// every tree node equal to the join of its children and every bit of
    /// the availability bitset telling whether the word below has a bit
    /// set.
    ///
    /// Fails with `EINVAL` on the first inconsistency found.  Costs time
    /// linear in the size of the area: for debugging and tests.
    pub(crate) fn check_invariants(&self) -> Result {
        let ok = |cond: bool| if cond { Ok(()) } else { Err(EINVAL) };
        ok(self.primary.len() == self.nr_words)?;
        ok(self.secondary.len() == self.nr_words)?;
        ok(self.releasing.len() == self.nr_words)?;
        ok(Some(self.summary.len()) == summary_words(self.nr_pages))?;
        let last = self.nr_words - 1;
        // Past the end of the area, primary bits are set, the others not.
        let past_end = !self.tail_mask;
        ok(self
            .primary
            .get(last)
            .is_some_and(|p| p & past_end == past_end))?;
        ok(self.secondary.get(last).is_some_and(|s| s & past_end == 0))?;
        ok(self.releasing.get(last).is_some_and(|r| r & past_end == 0))?;

        let (mut prim, mut lent, mut both) = (0usize, 0usize, 0usize);
        for (p, s) in self.primary.iter().zip(self.secondary.iter()) {
            prim += p.count_ones() as usize;
            lent += s.count_ones() as usize;
            both += (p & s).count_ones() as usize;
        }
        let mut releasing = 0usize;
        for (p, r) in self.primary.iter().zip(self.releasing.iter()) {
            // Only primary pages can be releasing.
            ok(r & !p == 0)?;
            releasing += r.count_ones() as usize;
        }
        ok(releasing == self.releasing_pages)?;
        ok(self.retired <= self.releasing_pages)?;
        ok(prim - past_end.count_ones() as usize == self.primary_used)?;
        ok(lent == self.secondary_lent)?;
        ok(both == self.pending)?;
        let free = (self.nr_pages + self.pending)
            .checked_sub(self.primary_used + self.secondary_lent)
            .ok_or(EINVAL)?;
        ok(self.free == free)?;

        // The stale range is empty or a short range of leaves of the area.
        if self.stale_lo <= self.stale_hi {
            ok(self.stale_hi < self.nr_words)?;
            ok(self.stale_hi - self.stale_lo < STALE_SPAN)?;
        }

        // Each level, bottom up: nodes `lo..hi` have children of `half`
        // pages.  The ancestors of stale leaves may be out of date.
        let (mut lo, mut hi, mut half) = (self.leaves / 2, self.leaves, BITS);
        while lo >= 1 {
            for i in lo..hi {
                let runs = Runs::join(self.runs(2 * i), self.runs(2 * i + 1), half);
                ok(self.is_stale(i) || self.runs(i) == runs)?;
            }
            hi = lo;
            lo /= 2;
            half *= 2;
        }

        // No run of `j + 1` free pages starts below `low[j]`: `run` free
        // pages end just before page `p`.
        let mut run = 0usize;
        for p in 0..self.nr_pages {
            if Self::bit(&self.primary, p) {
                run = 0;
                continue;
            }
            run += 1;
            // Runs of `1..=run` pages start at `p + 1 - run..=p`, among them
            // a run of `j + 1` pages at `p - j`.
            for (j, &low) in self.low.iter().enumerate().take(run) {
                ok(p - j >= low)?;
            }
        }

        // Each level of the availability bitset, bottom up: bit `j` tells
        // whether word `j` below has a bit set, for `j < len`.
        let mut len = self.nr_words;
        for level in 0..self.levels {
            for j in 0..len.div_ceil(BITS) * BITS {
                let below = if j >= len {
                    false
                } else if level == 0 {
                    self.both_free(j) != 0
                } else {
                    self.avail_word(level - 1, j) != 0
                };
                let bit = self.avail_word(level, j / BITS) & (1usize << (j % BITS)) != 0;
                ok(bit == below)?;
            }
            len = len.div_ceil(BITS);
        }
        ok(len == 1)
    }
}
