// SPDX-License-Identifier: GPL-2.0

//! Tests of the shared `area_map` module against a reference model.

use crate::area_map::{bitmap_words, summary_words, AllocOutcome, AllocStep, AreaMap};
use crate::baseline::{FirstFit, Scan};
use crate::bench::new_area_map;
use crate::rng::Rng;
use kernel::prelude::*;
use proptest::prelude::*;

const BITS: usize = usize::BITS as usize;

type Map = AreaMap<Vec<usize>>;

/// Reference model: one bool per page and bitmap, plain first fit.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Model {
    primary: Vec<bool>,
    lent: Vec<bool>,
    releasing: Vec<bool>,
    /// Pages taken out of use for good (`retire`).
    retired: Vec<bool>,
    /// Frame number of page 0: alignment is counted on `base + page`.
    base: usize,
}

impl Model {
    fn new(n: usize) -> Self {
        Self::with_base(n, 0)
    }

    fn with_base(n: usize, base: usize) -> Self {
        Model {
            primary: vec![false; n],
            lent: vec![false; n],
            releasing: vec![false; n],
            retired: vec![false; n],
            base,
        }
    }

    fn n(&self) -> usize {
        self.primary.len()
    }

    fn alloc(&mut self, count: usize, align_order: u32) -> Result<AllocOutcome> {
        if count == 0 || align_order >= usize::BITS {
            return Err(EINVAL);
        }
        let align = 1usize << align_order;
        // First page whose frame number is aligned.
        let mut start = (align - self.base % align) % align;
        while start.checked_add(count).is_some_and(|e| e <= self.n()) {
            if self.primary[start..start + count].iter().all(|p| !p) {
                self.primary[start..start + count].fill(true);
                let lent = self.lent[start..start + count]
                    .iter()
                    .filter(|l| **l)
                    .count();
                return Ok(AllocOutcome { start, count, lent });
            }
            match start.checked_add(align) {
                Some(s) => start = s,
                None => break,
            }
        }
        Err(ENOMEM)
    }

    fn range(&self, start: usize, count: usize) -> Result<std::ops::Range<usize>> {
        match start.checked_add(count) {
            Some(end) if count > 0 && end <= self.n() => Ok(start..end),
            _ => Err(EINVAL),
        }
    }

    fn primary_range(&self, start: usize, count: usize) -> Result<std::ops::Range<usize>> {
        let r = self.range(start, count)?;
        if self.primary[r.clone()].iter().all(|p| *p) {
            Ok(r)
        } else {
            Err(EINVAL)
        }
    }

    fn release(&mut self, start: usize, count: usize) -> Result {
        let r = self.primary_range(start, count)?;
        if self.lent[r.clone()].iter().any(|l| *l) {
            return Err(EBUSY);
        }
        self.primary[r.clone()].fill(false);
        self.releasing[r].fill(false);
        Ok(())
    }

    fn begin_release(&mut self, start: usize, count: usize) -> Result {
        let r = self.primary_range(start, count)?;
        if self.releasing[r.clone()].iter().any(|x| *x) {
            return Err(EEXIST);
        }
        self.releasing[r].fill(true);
        Ok(())
    }

    fn finish_discard(&mut self, start: usize, count: usize) -> Result<usize> {
        let r = self.primary_range(start, count)?;
        let n = self.lent[r.clone()].iter().filter(|l| **l).count();
        self.lent[r].fill(false);
        Ok(n)
    }

    fn lend(&mut self) -> Result<usize> {
        let page = (0..self.n())
            .rev()
            .find(|&i| !self.primary[i] && !self.lent[i])
            .ok_or(ENOMEM)?;
        self.lent[page] = true;
        Ok(page)
    }

    fn give_back(&mut self, page: usize) -> Result {
        if page < self.n() && self.lent[page] {
            self.lent[page] = false;
            Ok(())
        } else {
            Err(EINVAL)
        }
    }

    fn retire(&mut self, page: usize) -> Result {
        if page >= self.n() {
            return Err(EINVAL);
        }
        if self.lent[page] {
            return Err(EBUSY);
        }
        self.primary[page] = true;
        self.releasing[page] = true;
        self.retired[page] = true;
        Ok(())
    }

    fn lent_pages(&self) -> Vec<usize> {
        (0..self.n()).filter(|&i| self.lent[i]).collect()
    }
}

fn map(n: usize) -> Map {
    new_area_map(n)
}

/// Asserts that `m` is consistent and in the state of `model`.
fn same(m: &Map, model: &Model) {
    m.check_invariants().expect("invariants");
    let n = model.n();
    assert_eq!(m.nr_pages(), n);
    let prim = model.primary.iter().filter(|p| **p).count();
    let lent = model.lent.iter().filter(|l| **l).count();
    let both = (0..n)
        .filter(|&i| model.primary[i] && model.lent[i])
        .count();
    assert_eq!(m.primary_used(), prim);
    assert_eq!(m.secondary_lent(), lent);
    assert_eq!(m.pending_discard(), both);
    assert_eq!(m.free(), n + both - prim - lent);
    assert_eq!(
        m.releasing(),
        model.releasing.iter().filter(|r| **r).count()
    );
    assert_eq!(m.retired(), model.retired.iter().filter(|r| **r).count());
    for i in 0..n {
        assert_eq!(m.is_primary(i), model.primary[i], "primary bit {i}");
        assert_eq!(m.is_lent(i), model.lent[i], "lent bit {i}");
    }
    assert!(!m.is_primary(n) && !m.is_lent(n));
    let longest = model
        .primary
        .split(|p| *p)
        .map(|run| run.len())
        .max()
        .unwrap_or(0);
    assert_eq!(m.largest_primary_run(), longest);
}

#[test]
fn buffer_sizes() {
    assert_eq!(bitmap_words(1), 1);
    assert_eq!(bitmap_words(BITS), 1);
    assert_eq!(bitmap_words(BITS + 1), 2);
    // Three words per tree node (leaves rounded up to a power of two),
    // then the availability bitset.
    assert_eq!(summary_words(1), Some(3 + 1));
    assert_eq!(summary_words(3 * BITS), Some(3 * 4 + 1));
    assert_eq!(summary_words(BITS * BITS), Some(3 * BITS + 1));
    assert_eq!(summary_words(BITS * BITS + 1), Some(3 * 2 * BITS + 2 + 1));
    assert_eq!(
        summary_words(262_144),
        Some(3 * 262_144 / BITS + 262_144 / BITS / BITS + 1)
    );
    assert_eq!(summary_words(usize::MAX), None);
}

#[test]
fn new_rejects_bad_arguments() {
    let ok = |n| (vec![0; bitmap_words(n)], summary_words(n).unwrap());
    assert_eq!(
        Map::new(0, vec![], vec![], vec![], vec![0; 4]).err(),
        Some(EINVAL)
    );
    let (w, s) = ok(100);
    assert!(Map::new(100, w.clone(), w.clone(), w.clone(), vec![0; s]).is_ok());
    assert_eq!(
        Map::new(100, vec![0; 1], w.clone(), w.clone(), vec![0; s]).err(),
        Some(EINVAL)
    );
    assert_eq!(
        Map::new(100, w.clone(), vec![0; 3], w.clone(), vec![0; s]).err(),
        Some(EINVAL)
    );
    assert_eq!(
        Map::new(100, w.clone(), w.clone(), vec![0; 3], vec![0; s]).err(),
        Some(EINVAL)
    );
    assert_eq!(
        Map::new(100, w.clone(), w.clone(), w.clone(), vec![0; s + 1]).err(),
        Some(EINVAL)
    );
    assert_eq!(
        Map::new(100, w.clone(), w.clone(), w, vec![0; s - 1]).err(),
        Some(EINVAL)
    );
}

#[test]
fn new_clears_dirty_buffers() {
    let n = 200;
    let m = Map::new(
        n,
        vec![usize::MAX; bitmap_words(n)],
        vec![usize::MAX; bitmap_words(n)],
        vec![usize::MAX; bitmap_words(n)],
        vec![7; summary_words(n).unwrap()],
    )
    .unwrap();
    same(&m, &Model::new(n));
}

#[test]
fn every_count_reachable_and_full_area() {
    for n in [1, 2, 63, 64, 65, 127, 128, 129, 300, 1000, 4096 + 3] {
        for count in 1..=n {
            let mut m = map(n);
            let a = m.alloc_primary(count, 0).unwrap();
            assert_eq!(
                a,
                AllocOutcome {
                    start: 0,
                    count,
                    lent: 0
                }
            );
            if count < n {
                // The rest is reachable too, right after.
                assert_eq!(m.alloc_primary(n - count, 0).unwrap().start, count);
            }
            assert_eq!(m.free(), 0);
            assert_eq!(m.alloc_primary(1, 0).err(), Some(ENOMEM));
            m.check_invariants().unwrap();
            m.release_primary(0, n).unwrap();
            assert_eq!(m.free(), n);
        }
        let mut m = map(n);
        assert_eq!(m.alloc_primary(n + 1, 0).err(), Some(ENOMEM));
        assert_eq!(m.alloc_primary(usize::MAX, 0).err(), Some(ENOMEM));
        assert_eq!(m.alloc_primary(n, 0).unwrap().start, 0);
        m.check_invariants().unwrap();
    }
}

#[test]
fn bad_requests_have_no_side_effects() {
    let mut m = map(500);
    let mut model = Model::new(500);
    m.alloc_primary(10, 0).unwrap();
    model.alloc(10, 0).unwrap();
    m.lend_secondary().unwrap();
    model.lend().unwrap();
    same(&m, &model);
    assert_eq!(m.alloc_primary(0, 0).err(), Some(EINVAL));
    assert_eq!(m.alloc_primary(1, usize::BITS).err(), Some(EINVAL));
    assert_eq!(m.alloc_primary(1, u32::MAX).err(), Some(EINVAL));
    assert_eq!(m.alloc_primary(501, 0).err(), Some(ENOMEM));
    assert_eq!(m.alloc_primary(491, 0).err(), Some(ENOMEM));
    assert_eq!(m.alloc_primary(2, 9).err(), Some(ENOMEM));
    same(&m, &model);
}

#[test]
fn alignment_is_honoured() {
    let mut m = map(1024);
    assert_eq!(m.alloc_primary(1, 0).unwrap().start, 0);
    assert_eq!(m.alloc_primary(4, 2).unwrap().start, 4);
    assert_eq!(m.alloc_primary(1, 0).unwrap().start, 1);
    assert_eq!(m.alloc_primary(3, 0).unwrap().start, 8);
    assert_eq!(m.alloc_primary(100, 7).unwrap().start, 128);
    assert_eq!(m.alloc_primary(1, 9).unwrap().start, 512);
    // Only start 0 is aligned enough, and it is taken.
    assert_eq!(m.alloc_primary(1, 10).err(), Some(ENOMEM));
    assert_eq!(m.alloc_primary(1, 40).err(), Some(ENOMEM));
    m.release_primary(0, 1).unwrap();
    assert_eq!(m.alloc_primary(1, 40).unwrap().start, 0);
    m.check_invariants().unwrap();
}

#[test]
fn alignment_counts_frame_numbers() {
    // Page 0 of the area is frame 3 (mod 512): an order-k range must start
    // at a page `s` with `3 + s` a multiple of `1 << k`, for every order up
    // to the area's size.  Counting from page 0 instead gives start 0.
    let n = 1024;
    for base in [3usize, 0x7c001, 511, 0x100] {
        for order in 0..=10u32 {
            let mut m = map(n).with_base(base);
            let mut model = Model::with_base(n, base);
            let count = 1usize << order;
            let got = m.alloc_primary(count, order);
            assert_eq!(
                got,
                model.alloc(count, order),
                "base {base:#x} order {order}"
            );
            if let Ok(out) = got {
                assert_eq!((base + out.start) % count, 0);
            }
            // And again with the area fragmented by a first page taken.
            let mut m = map(n).with_base(base);
            let mut model = Model::with_base(n, base);
            assert_eq!(m.alloc_primary(1, 0), model.alloc(1, 0));
            assert_eq!(m.alloc_primary(count, order), model.alloc(count, order));
            same(&m, &model);
        }
    }
}

/// The orders the kernel this tier mirrors asks GCMA for (`kernel_config`,
/// from the configured kernel tree): every order up to `MAX_PAGE_ORDER`,
/// and the pageblock and PMD orders, are honoured in frame numbers on an
/// area that starts off every such boundary.
#[test]
fn kernel_orders_are_honoured() {
    use crate::kernel_config::{MAX_PAGE_ORDER, PAGEBLOCK_ORDER, PAGE_SHIFT, PAGE_SIZE, PMD_ORDER};
    const _: () = assert!(PAGE_SIZE == 1 << PAGE_SHIFT && PAGEBLOCK_ORDER <= MAX_PAGE_ORDER);
    let base = 3;
    let n = 4usize << MAX_PAGE_ORDER.max(PMD_ORDER);
    for order in (0..=MAX_PAGE_ORDER).chain([PAGEBLOCK_ORDER, PMD_ORDER]) {
        let mut m = map(n).with_base(base);
        let mut model = Model::with_base(n, base);
        let count = 1usize << order;
        let got = m.alloc_primary(count, order);
        assert_eq!(got, model.alloc(count, order), "order {order}");
        let out = got.expect("four blocks of the largest order hold an aligned one");
        assert_eq!((base + out.start) % count, 0, "order {order}");
    }
}

#[test]
fn bounded_search_resumes_where_it_stopped() {
    // Holes of 4 pages at odd pages: an aligned request of 4 fits each
    // hole only unaligned, so it tries each in turn.  With one try per call it must resume past each hole
    // and end at the same first fit as the unbounded search.
    let n = 4096;
    let mut m = map(n);
    let mut model = Model::new(n);
    m.alloc_primary(n, 0).unwrap();
    model.alloc(n, 0).unwrap();
    for start in (1..3000).step_by(8) {
        m.release_primary(start, 4).unwrap();
        model.release(start, 4).unwrap();
    }
    m.release_primary(3500, 4).unwrap();
    model.release(3500, 4).unwrap();
    let mut from = 0;
    let mut steps = 0;
    let out = loop {
        match m.alloc_primary_from(4, 2, from, 1).unwrap() {
            AllocStep::Done(out) => break out,
            AllocStep::Resume(next) => {
                assert!(next > from, "no progress from {from}");
                from = next;
                steps += 1;
            }
        }
    };
    assert_eq!(Ok(out), model.alloc(4, 2));
    assert!(steps > 300, "only {steps} steps");
    same(&m, &model);
    // A resumed search that finds nothing says so, unchanged.
    assert_eq!(m.alloc_primary_from(4, 2, 0, 1000).err(), Some(ENOMEM));
    same(&m, &model);
}

#[test]
fn release_in_two_steps_refuses_double_release() {
    let n = 300;
    let mut m = map(n);
    let mut model = Model::new(n);
    assert_eq!(m.alloc_primary(100, 0), model.alloc(100, 0));
    // Not allocated, or partly: refused, unchanged.
    assert_eq!(m.begin_release(100, 1).err(), Some(EINVAL));
    assert_eq!(m.begin_release(90, 20).err(), Some(EINVAL));
    assert_eq!(m.begin_release(0, 0).err(), Some(EINVAL));
    m.begin_release(0, 50).unwrap();
    model.begin_release(0, 50).unwrap();
    same(&m, &model);
    // Releasing pages stay allocated: no allocation takes them.
    assert_eq!(m.alloc_primary(1, 0), model.alloc(1, 0));
    assert_eq!(m.alloc_primary(1, 0).unwrap().start, 101);
    model.alloc(1, 0).unwrap();
    // A second release of any of them is refused.
    assert_eq!(m.begin_release(0, 50).err(), Some(EEXIST));
    assert_eq!(m.begin_release(49, 2).err(), Some(EEXIST));
    same(&m, &model);
    // Freed piecewise as their last references go.
    m.release_primary(10, 5).unwrap();
    model.release(10, 5).unwrap();
    same(&m, &model);
    let g = m.generation();
    m.release_primary(0, 10).unwrap();
    model.release(0, 10).unwrap();
    assert_ne!(m.generation(), g);
    m.release_primary(15, 35).unwrap();
    model.release(15, 35).unwrap();
    same(&m, &model);
    assert_eq!(m.releasing(), 0);
    // Freed pages cannot be released again.
    assert_eq!(m.begin_release(0, 1).err(), Some(EINVAL));
}

#[test]
fn aligned_fit_after_unaligned_runs() {
    // Free runs of length 5 at odd offsets only fit unaligned requests;
    // the aligned one must skip them and take a later run.
    let n = 640;
    let mut m = map(n);
    let mut model = Model::new(n);
    m.alloc_primary(n, 0).unwrap();
    model.alloc(n, 0).unwrap();
    for start in (3..400).step_by(16) {
        m.release_primary(start, 5).unwrap();
        model.release(start, 5).unwrap();
    }
    m.release_primary(500, 20).unwrap();
    model.release(500, 20).unwrap();
    for (count, align) in [(4, 2), (5, 0), (4, 3), (5, 1), (8, 2), (1, 6), (16, 3)] {
        assert_eq!(m.alloc_primary(count, align), model.alloc(count, align));
        same(&m, &model);
    }
}

#[test]
fn release_refuses_what_is_not_allocated() {
    let mut m = map(300);
    let mut model = Model::new(300);
    assert_eq!(m.alloc_primary(100, 0), model.alloc(100, 0));
    for (start, count) in [
        (0, 0),
        (0, 101),
        (99, 2),
        (100, 1),
        (250, 100),
        (300, 1),
        (usize::MAX, 2),
        (1, usize::MAX),
    ] {
        assert!(!m.is_primary_range(start, count));
        assert_eq!(m.release_primary(start, count).err(), Some(EINVAL));
        assert_eq!(m.finish_discard(start, count).err(), Some(EINVAL));
        same(&m, &model);
    }
    assert!(m.is_primary_range(0, 100));
    assert!(m.is_primary_range(99, 1));
    // Piecewise release is fine.
    m.release_primary(10, 20).unwrap();
    model.release(10, 20).unwrap();
    same(&m, &model);
    assert_eq!(m.release_primary(10, 1).err(), Some(EINVAL));
    m.release_primary(0, 10).unwrap();
    m.release_primary(30, 70).unwrap();
    assert_eq!(m.free(), 300);
}

#[test]
fn secondary_lending_and_discard_protocol() {
    let n = 200;
    let mut m = map(n);
    // Lent from the top down, only pages free in both bitmaps.
    m.alloc_primary(10, 0).unwrap();
    assert_eq!(m.lend_secondary().unwrap(), n - 1);
    assert_eq!(m.lend_secondary().unwrap(), n - 2);
    while m.lend_secondary().is_ok() {}
    assert_eq!(m.secondary_lent(), n - 10);
    assert_eq!(m.free(), 0);
    assert_eq!(m.lend_secondary().err(), Some(ENOMEM));
    assert!((10..n).all(|p| m.is_lent(p)) && (0..10).all(|p| !m.is_lent(p)));

    // A primary allocation takes lent pages and reports them.
    let a = m.alloc_primary(50, 3).unwrap();
    assert_eq!(
        a,
        AllocOutcome {
            start: 16,
            count: 50,
            lent: 50
        }
    );
    assert_eq!(m.pending_discard(), 50);
    assert_eq!(m.lent_in(16, 50).unwrap().count(), 50);
    assert_eq!(m.next_lent(0, n), Some(10));
    assert_eq!(m.next_lent(16, n), Some(16));
    assert_eq!(m.next_lent(17, 20), Some(17));
    // Still owned by the primary: never lent again, even when given back.
    m.return_secondary(20).unwrap();
    assert_eq!(m.return_secondary(20).err(), Some(EINVAL));
    assert_eq!(m.lend_secondary().err(), Some(ENOMEM));
    assert_eq!(m.pending_discard(), 49);
    assert_eq!(m.release_primary(16, 50).err(), Some(EBUSY));
    m.check_invariants().unwrap();

    // Discard one by one, as the kernel wrapper does without the lock.
    let mut from = a.start;
    let mut seen = Vec::new();
    while let Some(p) = m.next_lent(from, a.start + a.count) {
        seen.push(p);
        from = p + 1;
    }
    assert_eq!(seen.len(), 49);
    assert!(!seen.contains(&20));
    assert_eq!(m.finish_discard(a.start, a.count).unwrap(), 49);
    assert_eq!(m.pending_discard(), 0);
    assert_eq!(m.lent_in(16, 50).unwrap().count(), 0);
    assert_eq!(m.return_secondary(30).err(), Some(EINVAL));
    assert_eq!(m.secondary_lent(), n - 10 - 50);
    m.check_invariants().unwrap();

    // Released pages can be lent again.
    m.release_primary(16, 50).unwrap();
    assert_eq!(m.free(), 50);
    assert_eq!(m.lend_secondary().unwrap(), 65);
    m.check_invariants().unwrap();
    assert_eq!(m.return_secondary(n).err(), Some(EINVAL));
    assert_eq!(m.lent_in(0, 0).err(), Some(EINVAL));
    assert_eq!(m.lent_in(n, 1).err(), Some(EINVAL));
    assert_eq!(m.next_lent(n, usize::MAX), None);
}

#[test]
fn agrees_with_baselines_on_a_fragmented_area() {
    let n = 20_000;
    let mut m = map(n);
    let mut bit = FirstFit::new(n, Scan::BitByBit);
    let mut word = FirstFit::new(n, Scan::WordSkipping);
    let mut rng = Rng::new(7);
    let mut live: Vec<(usize, usize)> = Vec::new();
    for step in 0..6000 {
        if rng.range(0, 2) > 0 || live.is_empty() {
            let count = match rng.range(0, 9) {
                0..=5 => rng.range(1, 16),
                6..=8 => rng.range(17, 200),
                _ => rng.range(201, 3000),
            };
            let align = rng.range(0, 6) as u32;
            let got = m.alloc_primary(count, align).ok().map(|a| a.start);
            assert_eq!(got, bit.alloc(count, align), "step {step}");
            assert_eq!(got, word.alloc(count, align), "step {step}");
            if let Some(s) = got {
                live.push((s, count));
            }
        } else {
            let (s, c) = live.swap_remove(rng.range(0, live.len() - 1));
            m.release_primary(s, c).unwrap();
            bit.release(s, c);
            word.release(s, c);
        }
        if step % 500 == 0 {
            m.check_invariants().unwrap();
        }
    }
    m.check_invariants().unwrap();
}

#[test]
fn hints_see_windows_a_release_completes() {
    let mut m = map(256);
    let mut model = Model::new(256);
    for p in 0..4 {
        assert_eq!(m.alloc_primary(1, 0).unwrap().start, p);
        model.alloc(1, 0).unwrap();
    }
    assert_eq!(m.alloc_primary(4, 0).unwrap().start, 4);
    model.alloc(4, 0).unwrap();
    m.release_primary(2, 1).unwrap();
    model.release(2, 1).unwrap();
    // Page 2 alone is too short for two pages: the search for two moves
    // past it.
    assert_eq!(m.alloc_primary(2, 0).unwrap().start, 8);
    model.alloc(2, 0).unwrap();
    same(&m, &model);
    // Freeing page 3 completes a window of two pages that starts below
    // the freed page: the first fit is there.
    m.release_primary(3, 1).unwrap();
    model.release(3, 1).unwrap();
    same(&m, &model);
    assert_eq!(m.alloc_primary(2, 0).unwrap().start, 2);
    model.alloc(2, 0).unwrap();
    same(&m, &model);
}

/// A map and its model with every page allocated.
fn full(n: usize) -> (Map, Model) {
    let (mut m, mut model) = (map(n), Model::new(n));
    assert_eq!(m.alloc_primary(n, 0), model.alloc(n, 0));
    (m, model)
}

/// Releases `start..start + count` from both, which must agree.
fn release_both(m: &mut Map, model: &mut Model, start: usize, count: usize) {
    assert_eq!(
        m.release_primary(start, count),
        model.release(start, count),
        "release {start}+{count}"
    );
}

#[test]
fn small_windows_at_every_offset() {
    // Small unaligned requests search whole words from their hint.  Put a
    // hole of `len` pages at every page of an area of four words, the last
    // one partial, with a hole one page too short just below it, and
    // sometimes a page free at 0 that drags the hints down, so that the
    // search crosses the words one by one and then turns to the tree.  The
    // windows lie inside words, end at a word's last page, straddle two
    // words, or run into the end of the area, where the padding bits must
    // not count as free.
    let n = 3 * BITS + 5;
    for k in 1..=8 {
        for p in 0..n {
            for len in [k - 1, k, k + 1] {
                for far in [false, true] {
                    if len == 0 || p + len > n {
                        continue;
                    }
                    let (mut m, mut model) = full(n);
                    release_both(&mut m, &mut model, p, len);
                    if k > 1 && p >= k {
                        release_both(&mut m, &mut model, p - k, k - 1);
                    }
                    if far && p > k + 1 {
                        release_both(&mut m, &mut model, 0, 1);
                    }
                    let want = model.alloc(k, 0);
                    assert_eq!(m.alloc_primary(k, 0), want, "k {k} hole {p}+{len}");
                    // And again, from the hint the first search left.
                    let want = model.alloc(k, 0);
                    assert_eq!(m.alloc_primary(k, 0), want, "k {k} hole {p}+{len}");
                    same(&m, &model);
                }
            }
        }
    }
}

#[test]
fn short_ranges_at_every_offset() {
    // Ranges of at most BITS pages are claimed and freed by code that
    // handles one or two words alike.  Free, lend in, claim and release
    // such ranges at every offset, ending inside a word, at its last page
    // or in the next word, with the lent or releasing pages in the first
    // or the second word.
    let n = 3 * BITS + 5;
    for s in 0..n {
        let to_end = BITS - s % BITS;
        for count in [1, 2, 7, to_end - 1, to_end, to_end + 1, BITS - 1, BITS] {
            if count == 0 || s + count > n {
                continue;
            }
            let (mut m, mut model) = full(n);
            // The range is all that is free; lend its first page.
            release_both(&mut m, &mut model, s, 1);
            assert_eq!(m.lend_secondary(), model.lend());
            if count > 1 {
                release_both(&mut m, &mut model, s + 1, count - 1);
            }
            same(&m, &model);
            // First fit claims it back, lent page included.
            assert_eq!(m.alloc_primary(count, 0), model.alloc(count, 0));
            same(&m, &model);
            // Lent: the release is refused, unless a page of the range is
            // not allocated, which takes precedence.
            release_both(&mut m, &mut model, s, count);
            if count > 1 {
                release_both(&mut m, &mut model, s + count - 1, 1);
                release_both(&mut m, &mut model, s, count);
                assert_eq!(m.alloc_primary(1, 0).map(|a| a.start), Ok(s + count - 1));
                model.alloc(1, 0).unwrap();
            }
            assert_eq!(m.finish_discard(s, count), model.finish_discard(s, count));
            // Releasing pages in the first word only (all of them there),
            // then in the second: the release counts them, no more.
            let first = to_end.min(count);
            assert_eq!(m.begin_release(s, first), model.begin_release(s, first));
            release_both(&mut m, &mut model, s, count);
            same(&m, &model);
            assert_eq!(m.alloc_primary(count, 0), model.alloc(count, 0));
            let half = count / 2;
            assert_eq!(
                m.begin_release(s + half, count - half),
                model.begin_release(s + half, count - half)
            );
            release_both(&mut m, &mut model, s, count);
            same(&m, &model);
            // Lend its last page this time, then claim and release it whole.
            assert_eq!(m.lend_secondary(), model.lend());
            assert_eq!(m.alloc_primary(count, 0), model.alloc(count, 0));
            assert_eq!(m.finish_discard(s, count), model.finish_discard(s, count));
            assert_eq!(m.begin_release(s, count), model.begin_release(s, count));
            release_both(&mut m, &mut model, s, count);
            same(&m, &model);
        }
    }
}

#[test]
fn padding_past_the_end_is_never_free() {
    // The bits past the last page are set in the primary bitmap: they
    // must never make a window, be lent, or count as used.
    for n in [1, 3, BITS - 1, BITS + 1, 2 * BITS + 3] {
        let (mut m, mut model) = full(n);
        assert_eq!(m.primary_used(), n);
        let tail = n.min(3);
        release_both(&mut m, &mut model, n - tail, tail);
        assert_eq!(m.largest_primary_run(), tail);
        assert_eq!(m.alloc_primary(tail + 1, 0).err(), Some(ENOMEM));
        assert!(!m.is_primary(n));
        for _ in 0..tail {
            let p = m.lend_secondary().unwrap();
            assert!(p < n && p >= n - tail);
        }
        assert_eq!(m.lend_secondary().err(), Some(ENOMEM));
        assert_eq!(m.free(), 0);
        let a = m.alloc_primary(tail, 0).unwrap();
        assert_eq!((a.start, a.lent), (n - tail, tail));
        assert_eq!(m.alloc_primary(1, 0).err(), Some(ENOMEM));
        m.check_invariants().unwrap();
    }
}

#[test]
fn stale_tree_is_caught_up_before_use() {
    let n = 64 * BITS;
    let mut m = map(n);
    let mut model = Model::new(n);
    assert_eq!(m.alloc_primary(n, 0).unwrap().start, 0);
    model.alloc(n, 0).unwrap();
    // A window of 40 pages far up, then small changes near the start,
    // which leave the tree stale there.
    let far = 50 * BITS + 3;
    m.release_primary(far, 40).unwrap();
    model.release(far, 40).unwrap();
    for p in [BITS + 5, 2 * BITS + 1, 7] {
        m.release_primary(p, 1).unwrap();
        model.release(p, 1).unwrap();
        same(&m, &model);
    }
    // Another window of 40, in a stale leaf further than a search scans
    // word by word, and the longest run, in a stale leaf too.
    let near = 5 * BITS + 3;
    m.release_primary(near, 40).unwrap();
    model.release(near, 40).unwrap();
    m.release_primary(BITS - 50, 50).unwrap();
    model.release(BITS - 50, 50).unwrap();
    same(&m, &model);
    assert_eq!(m.largest_primary_run(), 50);
    assert_eq!(m.alloc_primary(45, 0).unwrap().start, BITS - 50);
    model.alloc(45, 0).unwrap();
    same(&m, &model);
    // Only the tree, brought up to date, knows of the near window.
    assert_eq!(m.alloc_primary(40, 0).unwrap().start, near);
    model.alloc(40, 0).unwrap();
    assert_eq!(m.alloc_primary(20, 0).unwrap().start, far);
    model.alloc(20, 0).unwrap();
    assert_eq!(m.alloc_primary(1, 0).unwrap().start, 7);
    model.alloc(1, 0).unwrap();
    assert_eq!(m.alloc_primary(2, 0).unwrap().start, BITS - 5);
    model.alloc(2, 0).unwrap();
    same(&m, &model);
}

#[test]
fn lending_on_a_three_level_area() {
    let n = BITS * BITS * BITS + 7;
    let mut m = map(n);
    let mut rng = Rng::new(11);
    // Primary ranges spread over the area.
    m.alloc_primary(n, 0).unwrap();
    let mut start = 0;
    while start < n {
        let count = rng.range(1, 5000).min(n - start);
        if rng.range(0, 3) > 0 {
            m.release_primary(start, count).unwrap();
        }
        start += count;
    }
    m.check_invariants().unwrap();
    let free = m.free();
    let mut last = usize::MAX;
    let mut lent = Vec::new();
    while let Ok(p) = m.lend_secondary() {
        assert!(p < last && !m.is_primary(p));
        last = p;
        lent.push(p);
    }
    assert_eq!(lent.len(), free);
    assert_eq!(m.free(), 0);
    m.check_invariants().unwrap();
    // Given back pages are lent again, highest first.
    let mut back: Vec<usize> = (0..300)
        .map(|_| lent[rng.range(0, lent.len() - 1)])
        .collect();
    back.sort_unstable();
    back.dedup();
    for &p in &back {
        m.return_secondary(p).unwrap();
    }
    m.check_invariants().unwrap();
    for &p in back.iter().rev() {
        assert_eq!(m.lend_secondary().unwrap(), p);
    }
    assert_eq!(m.lend_secondary().err(), Some(ENOMEM));
    m.check_invariants().unwrap();
}

#[test]
fn retired_pages_are_never_handed_out() {
    let n = 3 * BITS;
    let mut m = map(n);
    let lent = m.lend_secondary().unwrap();
    assert_eq!(m.retire(lent), Err(EBUSY));
    m.return_secondary(lent).unwrap();
    // A free page, a page of a claimed range, and a released page kept out
    // of use.
    m.retire(BITS).unwrap();
    let a = m.alloc_primary(4, 0).unwrap();
    assert_eq!(a.start, 0);
    m.retire(2).unwrap();
    m.release_primary(0, 2).unwrap();
    m.release_primary(3, 1).unwrap();
    let b = m.alloc_primary(1, 0).unwrap();
    m.begin_release(b.start, 1).unwrap();
    m.retire(b.start).unwrap();
    assert_eq!(m.retired(), 3);
    m.check_invariants().unwrap();
    // Every other page can still be allocated, none of the retired ones.
    let mut got = Vec::new();
    while let Ok(a) = m.alloc_primary(1, 0) {
        got.push(a.start);
    }
    assert_eq!(got.len(), n - 3);
    assert!(!got.contains(&2) && !got.contains(&BITS) && !got.contains(&b.start));
    if let Ok(p) = m.lend_secondary() {
        panic!("lent page {p} of a full area");
    }
    // A retired page cannot be released: it is releasing already.
    assert_eq!(m.begin_release(2, 1), Err(EEXIST));
    assert_eq!(m.retire(n), Err(EINVAL));
    m.check_invariants().unwrap();
    // A test's undo: the page is free again, and only a retired one can be.
    for p in got {
        m.release_primary(p, 1).unwrap();
    }
    assert_eq!(m.unretire(1), Err(EINVAL));
    m.unretire(2).unwrap();
    assert_eq!(m.retired(), 2);
    assert_eq!(m.free(), n - 2);
    m.check_invariants().unwrap();
    // Page 0 (`b`) is still retired; 1 and 2 are free.
    assert_eq!(b.start, 0);
    assert_eq!(m.alloc_primary(2, 0).unwrap().start, 1);
    m.check_invariants().unwrap();
}

/// One step of a random sequence.
#[derive(Clone, Debug)]
enum Op {
    Alloc {
        count: usize,
        align: u32,
    },
    /// Release a live allocation, whole or its first half.
    ReleaseLive {
        pick: usize,
        half: bool,
    },
    ReleaseAny {
        start: usize,
        count: usize,
    },
    Lend,
    /// Return a lent page (the `pick`-th).
    ReturnLent {
        pick: usize,
    },
    ReturnAny {
        page: usize,
    },
    /// Finish discarding in a live allocation.
    FinishLive {
        pick: usize,
    },
    FinishAny {
        start: usize,
        count: usize,
    },
    /// Begin releasing a live allocation, whole.
    BeginLive {
        pick: usize,
    },
    BeginAny {
        start: usize,
        count: usize,
    },
    /// Retire a page outside every live allocation (bad memory).
    Retire {
        page: usize,
    },
}

fn op(n: usize) -> impl Strategy<Value = Op> {
    let size = prop_oneof![0..=n + 2, 0..=8usize, Just(n), Just(usize::MAX)];
    let align = prop_oneof![4 => 0..=4u32, 1 => 5..=10u32, 1 => Just(usize::BITS)];
    prop_oneof![
        4 => (size.clone(), align).prop_map(|(count, align)| Op::Alloc { count, align }),
        3 => (any::<usize>(), any::<bool>())
            .prop_map(|(pick, half)| Op::ReleaseLive { pick, half }),
        1 => (0..=n + 1, size.clone()).prop_map(|(start, count)| Op::ReleaseAny { start, count }),
        3 => Just(Op::Lend),
        2 => any::<usize>().prop_map(|pick| Op::ReturnLent { pick }),
        1 => (0..=n + 1).prop_map(|page| Op::ReturnAny { page }),
        2 => any::<usize>().prop_map(|pick| Op::FinishLive { pick }),
        1 => (0..=n + 1, size.clone()).prop_map(|(start, count)| Op::FinishAny { start, count }),
        1 => any::<usize>().prop_map(|pick| Op::BeginLive { pick }),
        1 => (0..=n + 1, size).prop_map(|(start, count)| Op::BeginAny { start, count }),
        1 => (0..=n + 1).prop_map(|page| Op::Retire { page }),
    ]
}

fn scenario() -> impl Strategy<Value = (usize, usize, Vec<Op>)> {
    prop_oneof![
        4 => 1..=3 * BITS + 5,
        4 => 1..=700usize,
        1 => Just(BITS),
        1 => Just(2 * BITS),
        // Two levels of availability bitset.
        1 => BITS * BITS - 3..=BITS * BITS + 2 * BITS,
    ]
    .prop_flat_map(|n| {
        // Frame number of page 0: aligned, or deliberately odd.
        let base = prop_oneof![Just(0usize), 0..4096usize, Just(0x7c001)];
        (Just(n), base, proptest::collection::vec(op(n), 1..200))
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn matches_reference_model((n, base, ops) in scenario()) {
        let mut m = map(n).with_base(base);
        let mut model = Model::with_base(n, base);
        let mut live: Vec<(usize, usize)> = Vec::new();
        for op in ops {
            match op {
                Op::Alloc { count, align } => {
                    let got = m.alloc_primary(count, align);
                    prop_assert_eq!(got, model.alloc(count, align));
                    if let Ok(a) = got {
                        prop_assert_eq!((base + a.start) % (1usize << align), 0);
                        prop_assert!(live.iter().all(|&(s, c)| a.start + count <= s || s + c <= a.start));
                        live.push((a.start, count));
                    }
                }
                Op::ReleaseLive { pick, half } => {
                    if live.is_empty() {
                        continue;
                    }
                    let i = pick % live.len();
                    let (s, c) = live[i];
                    let k = if half && c > 1 { c / 2 } else { c };
                    let got = m.release_primary(s, k);
                    prop_assert_eq!(got, model.release(s, k));
                    if got.is_ok() {
                        if k == c {
                            live.swap_remove(i);
                        } else {
                            live[i] = (s + k, c - k);
                        }
                    }
                }
                Op::ReleaseAny { start, count } => {
                    // Nobody releases a retired page: it has no owner.
                    let end = start.saturating_add(count).min(n);
                    if model.retired.get(start..end).is_some_and(|r| r.iter().any(|x| *x)) {
                        continue;
                    }
                    let got = m.release_primary(start, count);
                    prop_assert_eq!(got, model.release(start, count));
                    if got.is_ok() {
                        // Split the live entries around the released range.
                        let end = start + count;
                        let mut next = Vec::new();
                        for (s, c) in live.drain(..) {
                            let e = s + c;
                            if e <= start || end <= s {
                                next.push((s, c));
                                continue;
                            }
                            if s < start {
                                next.push((s, start - s));
                            }
                            if end < e {
                                next.push((end, e - end));
                            }
                        }
                        live = next;
                    }
                }
                Op::Lend => prop_assert_eq!(m.lend_secondary(), model.lend()),
                Op::ReturnLent { pick } => {
                    let lent = model.lent_pages();
                    if !lent.is_empty() {
                        let p = lent[pick % lent.len()];
                        prop_assert_eq!(m.return_secondary(p), model.give_back(p));
                    }
                }
                Op::ReturnAny { page } => {
                    prop_assert_eq!(m.return_secondary(page), model.give_back(page));
                }
                Op::FinishLive { pick } => {
                    if live.is_empty() {
                        continue;
                    }
                    let (s, c) = live[pick % live.len()];
                    let lent: Vec<usize> = m.lent_in(s, c).unwrap().collect();
                    let expect: Vec<usize> = (s..s + c).filter(|&p| model.lent[p]).collect();
                    prop_assert_eq!(lent, expect);
                    prop_assert_eq!(m.finish_discard(s, c), model.finish_discard(s, c));
                }
                Op::FinishAny { start, count } => {
                    prop_assert_eq!(
                        m.finish_discard(start, count),
                        model.finish_discard(start, count)
                    );
                }
                Op::BeginLive { pick } => {
                    if live.is_empty() {
                        continue;
                    }
                    let (s, c) = live[pick % live.len()];
                    prop_assert_eq!(m.begin_release(s, c), model.begin_release(s, c));
                }
                Op::BeginAny { start, count } => {
                    prop_assert_eq!(
                        m.begin_release(start, count),
                        model.begin_release(start, count)
                    );
                }
                Op::Retire { page } => {
                    // A page of a live allocation is retired by the code
                    // that claimed it only before its owner sees it, and
                    // a retired page is never retired again.
                    if live.iter().any(|&(s, c)| s <= page && page < s + c)
                        || model.retired.get(page).is_some_and(|r| *r)
                    {
                        continue;
                    }
                    prop_assert_eq!(m.retire(page), model.retire(page));
                }
            }
            same(&m, &model);
        }
    }
}
