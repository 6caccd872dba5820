// SPDX-License-Identifier: GPL-2.0

//! The free-run segment tree over the primary bitmap of an [`AreaMap`]:
//! the [`Runs`] of a node, their storage in the summary buffer, and
//! bringing them up to date after a change, at once or lazily over the
//! stale range (see [`AreaMap::stale_lo`]).
//!
//! Separate from the search that walks the tree (`search.rs`): this part
//! only maintains it.

use super::{AreaMap, BITS};
use core::ops::DerefMut;

/// Words of the summary holding the [`Runs`] of one inner tree node.
pub(super) const RUN_FIELDS: usize = 3;

/// Most leaves whose ancestors in the tree may be out of date (see
/// [`AreaMap::stale_lo`]): 2048 pages on 64-bit.  Bringing them up to date
/// costs about as much as it would have cost change by change, so this
/// only bounds the work of the search that does it.
pub(super) const STALE_SPAN: usize = 32;

/// Length of the longest run of set bits in `f`.
fn longest_run(f: usize) -> usize {
    let mut x = f;
    let mut best = 0;
    while x != 0 {
        // `x != 0`, so fewer than `BITS` trailing zeros.
        x >>= x.trailing_zeros();
        // `BITS` if `f` is all ones: then `x` becomes 0.
        let run = x.trailing_ones();
        best = best.max(run as usize);
        x = x.checked_shr(run).unwrap_or(0);
    }
    best
}

/// Free runs of a range of pages with respect to the primary bitmap.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Runs {
    /// Longest run of pages free of primary owners.
    pub(super) max: usize,
    /// Free pages at the start of the range.
    pub(super) pre: usize,
    /// Free pages at the end of the range.
    pub(super) suf: usize,
}

impl Runs {
    /// Runs of one word whose free pages are the set bits of `f`.
    fn of_word(f: usize) -> Runs {
        Runs {
            max: longest_run(f),
            pre: f.trailing_ones() as usize,
            suf: f.leading_ones() as usize,
        }
    }

    /// Whether `self` and `other` are equal, with a single branch for the
    /// caller: the outcome decides where a refresh stops, which no
    /// predictor guesses well.
    fn same(&self, other: &Runs) -> bool {
        (self.max ^ other.max) | (self.pre ^ other.pre) | (self.suf ^ other.suf) == 0
    }

    /// Runs of two adjacent ranges given with their lengths, and the
    /// length of the whole.
    // Used only by `root_runs()`.
    #[cfg(test)]
    fn concat((l, l_len): (Runs, usize), (r, r_len): (Runs, usize)) -> (Runs, usize) {
        let runs = Runs {
            max: l.max.max(r.max).max(l.suf + r.pre),
            pre: if l.pre == l_len { l_len + r.pre } else { l.pre },
            suf: if r.suf == r_len { r_len + l.suf } else { r.suf },
        };
        (runs, l_len + r_len)
    }

    /// Runs of two adjacent ranges of `half` pages each.
    pub(super) fn join(l: Runs, r: Runs, half: usize) -> Runs {
        Runs {
            max: l.max.max(r.max).max(l.suf + r.pre),
            pre: if l.pre == half { half + r.pre } else { l.pre },
            suf: if r.suf == half { half + l.suf } else { r.suf },
        }
    }
}

impl<S: DerefMut<Target = [usize]>> AreaMap<S> {
    /// Runs of tree node `i`: stored for an inner node (`i < leaves`),
    /// computed from bitmap word `i - leaves` for a leaf.
    pub(super) fn runs(&self, i: usize) -> Runs {
        if i >= self.leaves {
            return Runs::of_word(self.leaf_free(i - self.leaves));
        }
        self.node(i)
    }

    /// Runs of inner node `i` (`i < leaves`), as stored.
    pub(super) fn node(&self, i: usize) -> Runs {
        match self.summary.get(i * RUN_FIELDS..(i + 1) * RUN_FIELDS) {
            Some(&[max, pre, suf]) => Runs { max, pre, suf },
            _ => Runs::default(),
        }
    }

    /// Stores the runs of inner node `i`.
    fn set_runs(&mut self, i: usize, r: Runs) {
        if let Some(slot) = self.summary.get_mut(i * RUN_FIELDS..(i + 1) * RUN_FIELDS) {
            slot.copy_from_slice(&[r.max, r.pre, r.suf]);
        }
    }

    /// Brings the tree up to date after a change to the primary bits of
    /// bitmap words `first..=last`, or rather leaves it stale over them
    /// while that stays cheap to catch up on (see [`AreaMap::stale_lo`]).
    /// The availability bitset is its callers' business.
    #[inline(always)]
    pub(super) fn mark_stale(&mut self, first: usize, last: usize) {
        // An empty stale range is `usize::MAX..=0`: the union is the new one.
        let (lo, hi) = (self.stale_lo.min(first), self.stale_hi.max(last));
        if hi - lo < STALE_SPAN {
            self.stale_lo = lo;
            self.stale_hi = hi;
            return;
        }
        self.refresh_far(first, last);
    }

    /// The rest of [`Self::mark_stale`] when the changed words are too far
    /// from the stale range: brings that up to date and starts a new one, or
    /// updates the tree at once for a long range.
    #[inline(never)]
    fn refresh_far(&mut self, first: usize, last: usize) {
        self.flush();
        if last - first < STALE_SPAN {
            self.stale_lo = first;
            self.stale_hi = last;
        } else if first == last {
            self.refresh_leaf(first);
        } else {
            self.refresh_runs(first, last);
        }
    }

    /// Brings the tree up to date over the stale range, if any.
    pub(super) fn flush(&mut self) {
        if self.stale_lo <= self.stale_hi {
            let (lo, hi) = (self.stale_lo, self.stale_hi);
            self.stale_lo = usize::MAX;
            self.stale_hi = 0;
            // Every change since the tree was last up to date is below the
            // lowest common ancestor of the range: where that stops
            // changing, so do the nodes above it.
            if lo == hi {
                self.refresh_leaf(lo);
            } else {
                self.refresh_runs(lo, hi);
            }
        }
    }

    /// Whether the stored runs of inner node `i` may be out of date: it is
    /// an ancestor of a stale leaf.
    // Used only by the consistency check.
    #[cfg(any(test, CONFIG_GCMA_KUNIT_TEST))]
    pub(super) fn is_stale(&self, i: usize) -> bool {
        if self.stale_lo > self.stale_hi || i == 0 {
            return false;
        }
        // Node `i` at height `h` spans leaves `(i << h) - leaves` onwards.
        let h = (self.leaves.trailing_zeros() - i.ilog2()) as usize;
        let first = (i << h) - self.leaves;
        let last = first + (1usize << h) - 1;
        first <= self.stale_hi && self.stale_lo <= last
    }

    /// Runs of the whole area, computed around the stale range without
    /// changing the tree: the runs of the maximal subtrees left of it, of
    /// its leaves, and of the maximal subtrees right of it, joined in order.
    // Used only by `largest_primary_run()`, for the host tests.
    #[cfg(test)]
    pub(super) fn root_runs(&self) -> Runs {
        if self.stale_lo > self.stale_hi {
            return self.runs(1);
        }
        let (lo, hi) = (self.stale_lo, self.stale_hi);
        // Left part: the left siblings on the path from leaf `lo` up, from
        // the top down.  Right part: the right siblings on the path from
        // leaf `hi` up, from the bottom up.
        let mut acc = (Runs::default(), 0usize);
        let depth = self.leaves.trailing_zeros() as usize;
        for h in (0..depth).rev() {
            let i = (lo + self.leaves) >> h;
            if i % 2 == 1 {
                acc = Runs::concat(acc, (self.runs(i - 1), BITS << h));
            }
        }
        for w in lo..=hi {
            acc = Runs::concat(acc, (self.runs(w + self.leaves), BITS));
        }
        for h in 0..depth {
            let i = (hi + self.leaves) >> h;
            if i & 1 == 0 {
                acc = Runs::concat(acc, (self.runs(i + 1), BITS << h));
            }
        }
        acc.0
    }

    /// As [`Self::refresh_runs`] for a single leaf `w`, the common case of
    /// small ranges: the leaf and its sibling are summarised once, and each
    /// ancestor is compared with its new runs before it is written.
    fn refresh_leaf(&mut self, w: usize) {
        let mut i = (w + self.leaves) / 2;
        if i == 0 {
            // A single leaf, which is the root: nothing stored.
            return;
        }
        let pair = w & !1;
        let mut runs = Runs::join(
            Runs::of_word(self.leaf_free(pair)),
            Runs::of_word(self.leaf_free(pair + 1)),
            BITS,
        );
        let mut half = 2 * BITS;
        loop {
            if runs.same(&self.node(i)) {
                // So would all above it be.
                return;
            }
            self.set_runs(i, runs);
            if i == 1 {
                return;
            }
            // Both children are stored now: no branch on which one `i` is.
            i /= 2;
            runs = Runs::join(self.node(2 * i), self.node(2 * i + 1), half);
            half *= 2;
        }
    }

    /// Recomputes the runs of the ancestors of leaves `first..=last`.
    ///
    /// Levels are recomputed whole while they hold more than one ancestor;
    /// from the lowest common ancestor up, only until a node comes out
    /// unchanged, as then so would all above it.
    pub(super) fn refresh_runs(&mut self, first: usize, last: usize) {
        let (mut lo, mut hi, mut half) =
            ((first + self.leaves) / 2, (last + self.leaves) / 2, BITS);
        if lo == 0 {
            // A single leaf, which is the root: nothing stored.
            return;
        }
        while lo < hi {
            for i in lo..=hi {
                let runs = Runs::join(self.runs(2 * i), self.runs(2 * i + 1), half);
                self.set_runs(i, runs);
            }
            lo /= 2;
            hi /= 2;
            half *= 2;
        }
        let mut i = lo;
        loop {
            let runs = Runs::join(self.runs(2 * i), self.runs(2 * i + 1), half);
            if runs == self.runs(i) {
                return;
            }
            self.set_runs(i, runs);
            if i == 1 {
                return;
            }
            i /= 2;
            half *= 2;
        }
    }
}
