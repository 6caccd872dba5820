// SPDX-License-Identifier: GPL-2.0

//! Pages of an area with work pending, marked from any context.
//!
//! Two kinds of work reach an area where its map's lock cannot be taken:
//! the page allocator's free paths return blocks whose last reference went
//! (in any context, interrupts included), and `cma_release()` may be called
//! from interrupt context.  Each is recorded as bits of a [`PendingBits`],
//! one per page of the area, with atomic operations only, and done at the
//! area's next call in process context.  A bitmap needs no memory at the
//! time of the call and no field of the pages, and a page is never
//! recorded twice (a block returns once per allocation).

use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use kernel::prelude::*;

const BITS: usize = usize::BITS as usize;

/// A bit per page of an area, set by any context and taken in runs.
///
/// # Invariants
///
/// `words` has a bit for each of `nr_pages` pages; `hint` is set after
/// every bit set, and cleared only before a pass over the words, so a bit
/// set while `hint` is clear is found by the next pass.
pub(crate) struct PendingBits {
    words: KVec<AtomicUsize>,
    nr_pages: usize,
    hint: AtomicBool,
}

impl PendingBits {
    /// Returns a bitmap of `nr_pages` clear bits.
    pub(crate) fn new(nr_pages: usize) -> Result<Self> {
        let n = nr_pages.div_ceil(BITS);
        let mut words = KVec::with_capacity(n, GFP_KERNEL)?;
        for _ in 0..n {
            words.push(AtomicUsize::new(0), GFP_KERNEL)?;
        }
        Ok(Self {
            words,
            nr_pages,
            hint: AtomicBool::new(false),
        })
    }

    /// Sets the bits of pages `start..start + count` (clipped to the
    /// area).  Any context; never blocks.
    pub(crate) fn set(&self, start: usize, count: usize) {
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
            i += n;
        }
        self.hint.store(true, Ordering::Release);
    }

    /// Whether some bit may be set.
    pub(crate) fn maybe_any(&self) -> bool {
        self.hint.load(Ordering::Acquire)
    }

    /// Clears every set bit and calls `f(start, count)` for each run of
    /// them, in page order; runs that cross a word boundary are joined.
    pub(crate) fn take_runs(&self, mut f: impl FnMut(usize, usize)) {
        if !self.hint.swap(false, Ordering::Acquire) {
            return;
        }
        let mut run: Option<(usize, usize)> = None;
        for (w, word) in self.words.iter().enumerate() {
            let mut bits = word.swap(0, Ordering::Acquire);
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
    pub(crate) fn take_each(&self, mut f: impl FnMut(usize)) {
        self.take_runs(|s, n| (s..s + n).for_each(&mut f));
    }
}
