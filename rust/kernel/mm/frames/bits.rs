// SPDX-License-Identifier: GPL-2.0

//! A bit per page of a range, set and taken from any context.
//!
//! The owner of a range of pages often has to note something about a page
//! where it cannot take its own locks or allocate: the page allocator's
//! free paths run in any context, interrupts included, and so may a
//! release.  [`PageBits`] records such notes with atomic operations only,
//! in memory the owner allocated up front, never in the `struct page`
//! (whose fields may belong to someone else by then).  A summary level (a
//! bit per word) keeps a pass over the set bits proportional to the words
//! with bits set, not to the range's size.

use crate::prelude::*;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

const BITS: usize = usize::BITS as usize;

/// A bit per page of a range, set by any context and taken in runs.
///
/// # Invariants
///
/// `words` has a bit for each of `nr_pages` pages, and `summary` a bit for
/// each word.  A setter sets the page's bit, then the word's summary bit,
/// then `hint`, each with a release read-modify-write; a taker clears
/// `hint`, then takes each summary word, then each word it names, each
/// with an acquire swap.  So a bit set is either taken by a pass that
/// started after it was set, or left with its summary bit and `hint` set
/// for the next pass.
pub struct PageBits {
    words: KVec<AtomicUsize>,
    summary: KVec<AtomicUsize>,
    nr_pages: usize,
    hint: AtomicBool,
}

impl PageBits {
    /// Returns a bitmap of `nr_pages` clear bits.  May sleep (it allocates
    /// with `GFP_KERNEL`).
    pub fn new(nr_pages: usize) -> Result<Self> {
        let zeroed = |n: usize| -> Result<KVec<AtomicUsize>> {
            let mut v = KVec::with_capacity(n, GFP_KERNEL)?;
            for _ in 0..n {
                v.push(AtomicUsize::new(0), GFP_KERNEL)?;
            }
            Ok(v)
        };
        let n = nr_pages.div_ceil(BITS);
        Ok(Self {
            words: zeroed(n)?,
            summary: zeroed(n.div_ceil(BITS))?,
            nr_pages,
            hint: AtomicBool::new(false),
        })
    }

    /// Sets the bits of pages `start..start + count` (clipped to the
    /// range).  Any context; never blocks.
    pub fn set(&self, start: usize, count: usize) {
        let end = start.saturating_add(count).min(self.nr_pages);
        let mut i = start;
        while i < end {
            let (w, b) = (i / BITS, i % BITS);
            let n = (BITS - b).min(end - i);
            let mask = if n == BITS {
                !0
            } else {
                ((1usize << n) - 1) << b
            };
            // Release: what the caller did to the pages before (the free
            // steps) is seen by whoever takes the bits.
            self.words[w].fetch_or(mask, Ordering::Release);
            self.summary[w / BITS].fetch_or(1 << (w % BITS), Ordering::Release);
            i += n;
        }
        // A read-modify-write, so that a taker's acquire of `hint`
        // synchronises with every setter before it, not only the last.
        self.hint.swap(true, Ordering::AcqRel);
    }

    /// Whether page `i`'s bit is set (a snapshot).
    pub fn is_set(&self, i: usize) -> bool {
        i < self.nr_pages && self.words[i / BITS].load(Ordering::Relaxed) & (1 << (i % BITS)) != 0
    }

    /// Clears page `i`'s bit and returns whether it was set.  Any context;
    /// never blocks.  The word's summary bit and `hint` stay as they are:
    /// a later pass finds the word empty.
    pub fn take(&self, i: usize) -> bool {
        if i >= self.nr_pages {
            return false;
        }
        let bit = 1 << (i % BITS);
        // Acquire: pairs with the setter's release, as a pass's swap does.
        self.words[i / BITS].fetch_and(!bit, Ordering::Acquire) & bit != 0
    }

    /// Whether some bit may be set.
    pub fn maybe_any(&self) -> bool {
        self.hint.load(Ordering::Acquire)
    }

    /// Clears every set bit and calls `f(start, count)` for each run of
    /// them, in page order; runs that cross a word boundary are joined.
    pub fn take_runs(&self, mut f: impl FnMut(usize, usize)) {
        if !self.hint.swap(false, Ordering::Acquire) {
            return;
        }
        let mut run: Option<(usize, usize)> = None;
        let words = self.summary.iter().enumerate().flat_map(|(s, sw)| {
            let mut set = if sw.load(Ordering::Relaxed) != 0 {
                sw.swap(0, Ordering::Acquire)
            } else {
                0
            };
            core::iter::from_fn(move || {
                let b = (set != 0).then(|| set.trailing_zeros() as usize)?;
                set &= set - 1;
                Some(s * BITS + b)
            })
        });
        for w in words {
            let mut bits = self.words[w].swap(0, Ordering::Acquire);
            while bits != 0 {
                let lo = bits.trailing_zeros() as usize;
                let len = (bits >> lo).trailing_ones() as usize;
                let start = w * BITS + lo;
                run = match run {
                    Some((s, n)) if s + n == start => Some((s, n + len)),
                    Some((s, n)) => {
                        f(s, n);
                        Some((start, len))
                    }
                    None => Some((start, len)),
                };
                bits = if lo + len >= BITS {
                    0
                } else {
                    bits & !(((1usize << len) - 1) << lo)
                };
            }
        }
        if let Some((s, n)) = run {
            f(s, n);
        }
    }

    /// Clears every set bit and calls `f(page)` for each, in page order.
    pub fn take_each(&self, mut f: impl FnMut(usize)) {
        self.take_runs(|s, n| (s..s + n).for_each(&mut f));
    }
}
