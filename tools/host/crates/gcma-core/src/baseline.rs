// SPDX-License-Identifier: GPL-2.0

//! Baselines for the benchmark: first-fit scans of a plain primary bitmap,
//! as in the GCMA thesis (and the CMA bitmap it follows).
//!
//! Both return the same page as `AreaMap::alloc_primary`: the lowest
//! aligned start of `count` free pages.

const BITS: usize = usize::BITS as usize;

/// Scan strategy of a [`FirstFit`] bitmap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scan {
    /// Test one bit at a time, as the thesis describes.
    BitByBit,
    /// Skip whole words when looking for a free or a used page, like the
    /// kernel's `bitmap_find_next_zero_area`.
    WordSkipping,
}

/// A first-fit primary allocator over a plain bitmap.
#[derive(Clone, Debug)]
pub struct FirstFit {
    nr_pages: usize,
    bits: Vec<usize>,
    scan: Scan,
}

impl FirstFit {
    /// An all-free area of `nr_pages` pages searched with `scan`.
    pub fn new(nr_pages: usize, scan: Scan) -> Self {
        FirstFit {
            nr_pages,
            bits: vec![0; nr_pages.div_ceil(BITS)],
            scan,
        }
    }

    fn test(&self, page: usize) -> bool {
        self.bits[page / BITS] & (1 << (page % BITS)) != 0
    }

    /// First used page in `from..end`, or `end`.
    fn next_used(&self, from: usize, end: usize) -> usize {
        match self.scan {
            Scan::BitByBit => (from..end).find(|&p| self.test(p)).unwrap_or(end),
            Scan::WordSkipping => {
                if from >= end {
                    return end;
                }
                let mut w = from / BITS;
                let mut x = self.bits[w] & (usize::MAX << (from % BITS));
                loop {
                    if x != 0 {
                        return (w * BITS + x.trailing_zeros() as usize).min(end);
                    }
                    w += 1;
                    if w * BITS >= end {
                        return end;
                    }
                    x = self.bits[w];
                }
            }
        }
    }

    /// First free page at or after `from`, or `nr_pages`.
    fn next_free(&self, from: usize) -> usize {
        match self.scan {
            Scan::BitByBit => (from..self.nr_pages)
                .find(|&p| !self.test(p))
                .unwrap_or(self.nr_pages),
            Scan::WordSkipping => {
                if from >= self.nr_pages {
                    return self.nr_pages;
                }
                let mut w = from / BITS;
                let mut x = !self.bits[w] & (usize::MAX << (from % BITS));
                loop {
                    if x != 0 {
                        return (w * BITS + x.trailing_zeros() as usize).min(self.nr_pages);
                    }
                    w += 1;
                    if w >= self.bits.len() {
                        return self.nr_pages;
                    }
                    x = !self.bits[w];
                }
            }
        }
    }

    /// Lowest start, multiple of `1 << align_order`, of `count` free pages.
    pub fn find(&self, count: usize, align_order: u32) -> Option<usize> {
        let align = 1usize << align_order;
        if count == 0 || count > self.nr_pages {
            return None;
        }
        let mut start = 0;
        loop {
            start = self.next_free(start).next_multiple_of(align);
            let end = start.checked_add(count)?;
            if end > self.nr_pages {
                return None;
            }
            let used = self.next_used(start, end);
            if used == end {
                return Some(start);
            }
            start = used + 1;
        }
    }

    fn set(&mut self, start: usize, count: usize, value: bool) {
        for p in start..start + count {
            let m = 1 << (p % BITS);
            if value {
                self.bits[p / BITS] |= m;
            } else {
                self.bits[p / BITS] &= !m;
            }
        }
    }

    /// Allocates as [`FirstFit::find`] and marks the pages used.
    pub fn alloc(&mut self, count: usize, align_order: u32) -> Option<usize> {
        let start = self.find(count, align_order)?;
        self.set(start, count, true);
        Some(start)
    }

    /// Marks `start..start + count` free.
    pub fn release(&mut self, start: usize, count: usize) {
        self.set(start, count, false);
    }
}
