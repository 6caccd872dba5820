// SPDX-License-Identifier: GPL-2.0

//! The first-fit search for a window of free pages in an [`AreaMap`]: whole
//! words first (a few shifts and ands find every window of up to
//! [`HINTS`] pages in a word), then the free-run tree.
//!
//! Kept apart from the tree's maintenance (`runs.rs`): it only reads the
//! tree, after bringing it up to date.

use super::{AreaMap, BITS, HINTS};
use core::ops::DerefMut;

/// Bitmap words a search scans one by one, past the word it starts in,
/// before it turns to the tree.
const LINEAR_WORDS: usize = 2;

/// Wholly free bitmap words a search for more than [`HINTS`] pages follows
/// past its first word before it turns to the tree: they hold windows of up
/// to 4096 pages (on 64-bit), and reading them costs less than a walk through
/// the tree, which touches a node on every level.  Bounded, as an aligned
/// search may make many tries.
const FREE_WORDS: usize = 64;

/// Outcome of a search step.
enum Scan {
    /// A free window starts at this page.
    Found(usize),
    /// No window found; this many free pages end the range searched.
    Carry(usize),
}

/// Looks for a window of `k` free pages in one word of free-page mask `f`
/// whose first page is `pos`, given `carry` free pages just before `pos`.
fn scan_word(f: usize, pos: usize, carry: usize, k: usize) -> Scan {
    let pre = f.trailing_ones() as usize;
    if carry + pre >= k {
        return Scan::Found(pos - carry);
    }
    if pre == BITS {
        return Scan::Carry(carry + BITS);
    }
    if k <= BITS {
        // The first run is the prefix, shorter than `k`: any later run long
        // enough is the answer.
        let mut x = f;
        let mut off = 0usize;
        while x != 0 {
            let tz = x.trailing_zeros();
            x >>= tz;
            off += tz as usize;
            let run = x.trailing_ones();
            if run as usize >= k {
                return Scan::Found(pos + off);
            }
            x = x.checked_shr(run).unwrap_or(0);
            off += run as usize;
        }
    }
    Scan::Carry(f.leading_ones() as usize)
}

/// Shifts of the three steps of [`window_starts`] for windows of `1..=HINTS`
/// pages (index `k - 1`).
///
/// Once each set bit of a mask stands for `len` free pages from it, `g & (g
/// >> s)` with `s <= len` has each stand for `len + s`.  Three steps, of at
/// most 1, 2 and 4, reach any length up to 8; a step of 0 changes nothing.
/// A table rather than arithmetic on `k`: one load per step.
const WINDOW_SHIFTS: [[u32; 3]; HINTS] = {
    assert!(HINTS <= 8);
    let mut table = [[0; 3]; HINTS];
    let mut k = 1;
    while k <= HINTS {
        let mut len = 1;
        let mut step = 0;
        while step < 3 {
            let s = if k - len < len { k - len } else { len };
            table[k - 1][step] = s as u32;
            len += s;
            step += 1;
        }
        k += 1;
    }
    table
};

/// Starts of the windows of `k` free pages that lie within a word of
/// free-page mask `f`, for `1 <= k <= HINTS`: bit `i` of the result is set
/// if bits `i..i + k` of `f` all are.  No branch depends on `k`.
fn window_starts(f: usize, k: usize) -> usize {
    let [s1, s2, s3] = WINDOW_SHIFTS
        .get(k.wrapping_sub(1))
        .copied()
        .unwrap_or([0; 3]);
    let g = f & (f >> s1);
    let g = g & (g >> s2);
    g & (g >> s3)
}

impl<S: DerefMut<Target = [usize]>> AreaMap<S> {
    /// Looks for `k` free pages in the subtree of node `i`, which spans the
    /// `len` pages from `pos`, given `carry` free pages just before `pos`.
    fn scan_subtree(
        &self,
        mut i: usize,
        mut pos: usize,
        mut len: usize,
        mut carry: usize,
        k: usize,
    ) -> Scan {
        loop {
            if i >= self.leaves {
                return scan_word(self.leaf_free(i - self.leaves), pos, carry, k);
            }
            let n = self.node(i);
            if carry + n.pre >= k {
                return Scan::Found(pos - carry);
            }
            if n.max < k {
                return Scan::Carry(if n.pre == len { carry + len } else { n.suf });
            }
            // The window lies inside this node, and starts in the left child
            // if that holds it (alone or with the carry), else in the right.
            len /= 2;
            if 2 * i >= self.leaves {
                // Two leaves: scanning the left one costs less than
                // summarising it, and if the window does not start there,
                // it starts in the right one.
                let w = 2 * i - self.leaves;
                return match scan_word(self.leaf_free(w), pos, carry, k) {
                    Scan::Carry(c) => scan_word(self.leaf_free(w + 1), pos + len, c, k),
                    found => found,
                };
            }
            let l = self.node(2 * i);
            if carry + l.pre >= k || l.max >= k {
                i *= 2;
            } else {
                carry = if l.pre == len { carry + len } else { l.suf };
                i = 2 * i + 1;
                pos += len;
            }
        }
    }

    /// Returns the lowest page `s >= from` such that pages `s..s + k` are
    /// all free of primary owners; `k` must be at least 1.
    ///
    /// Scans the word of `from`, and for a window of at most [`HINTS`]
    /// pages the next [`LINEAR_WORDS`] words too (see
    /// [`Self::find_small`]), for a larger one the wholly free words that
    /// follow, before it brings the tree up to date and searches it.
    pub(super) fn find(&mut self, from: usize, k: usize) -> Option<usize> {
        if k <= HINTS {
            return self.find_small(from, k);
        }
        if from >= self.nr_pages || k > self.nr_pages - from {
            return None;
        }
        let mut w = from / BITS;
        let f = self.leaf_free(w) & (usize::MAX << (from % BITS));
        let mut carry = match scan_word(f, w * BITS, 0, k) {
            Scan::Found(s) => return Some(s),
            Scan::Carry(carry) => carry,
        };
        // While the window grows by whole free words, follow the bitmap:
        // in a lightly used area a window of up to [`FREE_WORDS`] words is
        // found there, in one pass over its own words, without a walk
        // through the tree and without bringing it up to date.  The first
        // word that is not wholly free ends the window or hands the search
        // to the tree, and so does the last one followed.
        let last = self.nr_words.min(w + FREE_WORDS + 1);
        while carry > 0 && w + 1 < last {
            w += 1;
            match scan_word(self.leaf_free(w), w * BITS, carry, k) {
                Scan::Found(s) => return Some(s),
                Scan::Carry(c) if c == carry + BITS => carry = c,
                Scan::Carry(c) => return self.find_in_tree(w, c, k),
            }
        }
        self.find_in_tree(w, carry, k)
    }

    /// [`Self::find`] for `1 <= k <= HINTS`, which mostly finds its window
    /// in the first words it looks at: each word is searched whole with
    /// [`window_starts`], without a loop over its runs.
    #[inline(always)]
    pub(super) fn find_small(&mut self, from: usize, k: usize) -> Option<usize> {
        // Past the area, `leaf_free()` is 0: no window, and the loop ends
        // at the last word.
        let mut w = from / BITS;
        let mut f = self.leaf_free(w) & (usize::MAX << (from % BITS));
        let mut g = window_starts(f, k);
        let mut words = 0;
        loop {
            if g != 0 {
                return Some(w * BITS + g.trailing_zeros() as usize);
            }
            // `f` is not all ones, or it would hold a window: only the run
            // at its end carries over.
            let carry = f.leading_ones() as usize;
            if words == LINEAR_WORDS {
                return self.find_in_tree(w, carry, k);
            }
            words += 1;
            w += 1;
            if w >= self.nr_words {
                return None;
            }
            f = self.leaf_free(w);
            // A window that starts in the word before comes first; it can
            // only start in the run of `carry` pages.
            if carry + f.trailing_ones() as usize >= k {
                return Some(w * BITS - carry);
            }
            g = window_starts(f, k);
        }
    }

    /// The rest of [`Self::find`], out of line to keep the common case
    /// short: brings the tree up to date and looks for the window right of
    /// leaf `w`, given `carry` free pages at the end of that leaf.
    #[inline(never)]
    fn find_in_tree(&mut self, w: usize, mut carry: usize, k: usize) -> Option<usize> {
        self.flush();
        // A request larger than any free run, as large ones in a fragmented
        // area often are, fails at the root rather than after a walk along
        // the whole area.
        if self.runs(1).max < k {
            return None;
        }
        // Visit the maximal subtrees right of leaf `w`, left to right: each
        // is the next node, raised while it is a left child.
        let (mut i, mut len, mut pos) = (w + self.leaves, BITS, w * BITS);
        loop {
            pos += len;
            i += 1;
            if pos >= self.nr_pages || i.is_power_of_two() {
                return None;
            }
            while i % 2 == 0 {
                i /= 2;
                len *= 2;
            }
            match self.scan_subtree(i, pos, len, carry, k) {
                Scan::Found(s) => return Some(s),
                Scan::Carry(c) => carry = c,
            }
        }
    }
}
