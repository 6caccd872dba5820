// SPDX-License-Identifier: GPL-2.0

//! KUnit suites of the GCMA crate: the area map against a reference
//! model, and the areas in service through the C entry points.

use crate::area_map::{bitmap_words, summary_words, AreaMap};
use kernel::{kunit::suite::TestRng as Rng, kunit_expect, kunit_expect_eq, prelude::*};

type Map = AreaMap<KVec<usize>>;

fn zeroed(n: usize) -> Result<KVec<usize>> {
    Ok(KVec::from_elem(0, n, GFP_KERNEL)?)
}

fn new_map(nr_pages: usize) -> Result<Map> {
    let words = bitmap_words(nr_pages);
    AreaMap::new(
        nr_pages,
        zeroed(words)?,
        zeroed(words)?,
        zeroed(words)?,
        zeroed(summary_words(nr_pages).ok_or(EINVAL)?)?,
    )
}

/// Reference model: one byte per page, `PRIMARY` and `LENT` bits, and the
/// length of the live allocation starting at each page (0 if none).
struct Model {
    pages: KVec<u8>,
    alloc_len: KVec<usize>,
}

const PRIMARY: u8 = 1;
const LENT: u8 = 2;

impl Model {
    fn new(n: usize) -> Result<Self> {
        Ok(Self {
            pages: KVec::from_elem(0, n, GFP_KERNEL)?,
            alloc_len: KVec::from_elem(0, n, GFP_KERNEL)?,
        })
    }

    /// Lowest aligned start of `count` pages none of which is primary.
    fn first_fit(&self, count: usize, align: usize) -> Option<usize> {
        let n = self.pages.len();
        let mut start = 0;
        while start + count <= n {
            match self.pages[start..start + count]
                .iter()
                .rposition(|p| p & PRIMARY != 0)
            {
                None => return Some(start),
                Some(busy) => start = (start + busy + 1).next_multiple_of(align),
            }
        }
        None
    }

    /// The first page at or after a random one (wrapping) for which `pred`
    /// holds.
    fn pick(&self, rng: &mut Rng, pred: impl Fn(usize) -> bool) -> Option<usize> {
        let n = self.pages.len();
        let from = rng.below(n);
        (0..n).map(|i| (from + i) % n).find(|&p| pred(p))
    }

    fn count(&self, bit: u8) -> usize {
        self.pages.iter().filter(|p| *p & bit != 0).count()
    }
}

/// Random allocations, releases, loans and returns agree with the model.
fn area_map_matches_model() -> Result {
    const PAGES: usize = 1000;
    let mut map = new_map(PAGES)?;
    let mut model = Model::new(PAGES)?;
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);

    for step in 0..4000 {
        match rng.below(10) {
            0..=3 => {
                let count = if rng.below(20) == 0 {
                    1 + rng.below(PAGES)
                } else {
                    1 + rng.below(48)
                };
                let align_order = rng.below(5) as u32;
                let want = model.first_fit(count, 1 << align_order);
                match (map.alloc_primary(count, align_order), want) {
                    (Ok(got), Some(start)) => {
                        kunit_expect_eq!(got.start, start);
                        let range = start..start + count;
                        let lent_in = model.pages[range.clone()]
                            .iter()
                            .filter(|p| *p & LENT != 0)
                            .count();
                        kunit_expect_eq!(got.lent, lent_in);
                        for p in range {
                            model.pages[p] |= PRIMARY;
                        }
                        // Discard the secondary pages the range took over.
                        map.finish_discard(start, count)?;
                        for p in start..start + count {
                            model.pages[p] &= !LENT;
                        }
                        model.alloc_len[start] = count;
                    }
                    (Err(e), None) => kunit_expect_eq!(e, ENOMEM),
                    (got, want) => {
                        kunit_expect!(
                            false,
                            "step {}: alloc({}, {}) = {:?}, model {:?}",
                            step,
                            count,
                            align_order,
                            got.map(|o| o.start),
                            want
                        );
                        return Err(EINVAL);
                    }
                }
            }
            4..=6 => {
                let Some(start) = model.pick(&mut rng, |p| model.alloc_len[p] != 0) else {
                    continue;
                };
                let count = core::mem::take(&mut model.alloc_len[start]);
                kunit_expect_eq!(map.release_primary(start, count), Ok(()));
                for p in start..start + count {
                    model.pages[p] &= !PRIMARY;
                }
            }
            7 | 8 => match map.lend_secondary() {
                Ok(page) => {
                    kunit_expect_eq!(model.pages[page], 0);
                    model.pages[page] |= LENT;
                }
                Err(e) => {
                    kunit_expect_eq!(e, ENOMEM);
                    kunit_expect_eq!(model.pages.iter().filter(|p| **p == 0).count(), 0);
                }
            },
            _ => {
                let Some(page) = model.pick(&mut rng, |p| model.pages[p] & LENT != 0) else {
                    continue;
                };
                kunit_expect_eq!(map.return_secondary(page), Ok(()));
                model.pages[page] &= !LENT;
            }
        }
        kunit_expect_eq!(map.primary_used(), model.count(PRIMARY));
        kunit_expect_eq!(map.secondary_lent(), model.count(LENT));
        if map.check_invariants().is_err() {
            kunit_expect!(false, "invariants broken after step {}", step);
            return Err(EINVAL);
        }
    }
    Ok(())
}

/// The whole area can be taken at once; bad requests fail without effect.
fn area_map_edges() -> Result {
    const PAGES: usize = 777;
    let mut map = new_map(PAGES)?;
    kunit_expect_eq!(map.alloc_primary(0, 0).map(|o| o.start), Err(EINVAL));
    kunit_expect_eq!(
        map.alloc_primary(PAGES + 1, 0).map(|o| o.start),
        Err(ENOMEM)
    );
    kunit_expect_eq!(map.primary_used(), 0);
    kunit_expect_eq!(map.alloc_primary(PAGES, 0).map(|o| o.start), Ok(0));
    kunit_expect_eq!(map.free(), 0);
    kunit_expect_eq!(map.alloc_primary(1, 0).map(|o| o.start), Err(ENOMEM));
    kunit_expect_eq!(map.lend_secondary(), Err(ENOMEM));
    kunit_expect_eq!(map.release_primary(0, PAGES), Ok(()));
    // Releasing what is not allocated is refused and changes nothing.
    kunit_expect_eq!(map.alloc_primary(10, 0).map(|o| o.start), Ok(0));
    kunit_expect!(map.is_primary_range(0, 10));
    kunit_expect!(!map.is_primary_range(5, 10));
    kunit_expect!(!map.is_primary_range(0, 0));
    kunit_expect!(!map.is_primary_range(PAGES - 1, 2));
    kunit_expect_eq!(map.release_primary(5, 10), Err(EINVAL));
    kunit_expect_eq!(map.release_primary(PAGES - 1, 2), Err(EINVAL));
    kunit_expect_eq!(map.primary_used(), 10);
    kunit_expect_eq!(map.release_primary(0, 10), Ok(()));
    kunit_expect_eq!(map.check_invariants(), Ok(()));
    Ok(())
}

/// `PageBits` (the free path's queue) under a race: setters mark the
/// pages of their own regions in runs of random length, crossing word
/// boundaries and the partial last word, while the taker takes runs.
/// Every page must be taken exactly once, each pass's runs must be in
/// order and maximal (never adjacent), and nothing may be left.
fn pending_bits_race() -> Result {
    use kernel::mm::frames::PageBits;
    use kernel::{delay, kunit::suite::spawn_workers, sync::Arc};

    const PAGES: usize = 1000;
    const WORKERS: usize = 3;
    let bits = Arc::new(PageBits::new(PAGES)?, GFP_KERNEL)?;
    let mut taken = KVec::from_elem(0u8, PAGES, GFP_KERNEL)?;
    let take = |bits: &PageBits, taken: &mut KVec<u8>| -> Result {
        let mut last_end: Option<usize> = None;
        let mut bad = false;
        bits.take_runs(|start, n| {
            // In order, and not adjacent to the previous run.
            bad |= n == 0 || last_end.is_some_and(|e| start <= e);
            last_end = Some(start + n);
            for t in &mut taken[start..(start + n).min(PAGES)] {
                *t = t.saturating_add(1);
            }
        });
        kunit_expect!(!bad, "runs out of order, adjacent or empty");
        Ok(())
    };
    // SAFETY: KUnit runs cases in process context, with no atomic
    // section active.
    let ctx = unsafe { delay::MaySleep::new() };
    {
        let workers = spawn_workers(&ctx, WORKERS, |w| {
            let bits = bits.clone();
            move || {
                let (lo, hi) = (w * PAGES / WORKERS, (w + 1) * PAGES / WORKERS);
                let mut rng = Rng::new(0xb175_0000 + w as u64);
                let mut p = lo;
                while p < hi {
                    let n = (1 + rng.below(100)).min(hi - p);
                    bits.set(p, n);
                    p += n;
                    kernel::processor::cpu_relax();
                }
            }
        });
        kunit_expect_eq!(workers.started(), WORKERS);
        for _ in 0..200 {
            take(&bits, &mut taken)?;
            delay::cond_resched(&ctx);
        }
    }
    // The workers are done: what is left comes out now.
    take(&bits, &mut taken)?;
    take(&bits, &mut taken)?;
    let wrong = taken.iter().filter(|&&t| t != 1).count();
    kunit_expect_eq!(wrong, 0);
    kunit_expect!(
        !bits.maybe_any() || {
            let mut any = false;
            bits.take_runs(|_, _| any = true);
            !any
        }
    );
    // Clipping: a run past the end sets only the pages inside.
    bits.set(PAGES - 3, 10);
    let mut runs = KVec::new();
    bits.take_runs(|s, n| {
        let _ = runs.push((s, n), GFP_KERNEL);
    });
    kunit_expect_eq!(&runs[..], &[(PAGES - 3, 3)][..]);
    Ok(())
}

kernel::kunit_suite! {
    name: "gcma_area_map",
    cases: [area_map_matches_model, area_map_edges, pending_bits_race],
}

/// The areas in service, through the C entry points.
mod registry {
    use super::Rng;
    use core::sync::atomic::{AtomicUsize, Ordering};
    use kernel::mm::gcma::ReservedArea;
    use kernel::{
        bindings, delay,
        kunit::suite::spawn_workers,
        kunit_expect, kunit_expect_eq, new_condvar, new_mutex,
        prelude::*,
        sync::{Arc, CondVar, Mutex},
    };

    /// The first area reserved at boot (the KUnit kernel boots with
    /// `gcma=16M`), or `ENODEV`.
    fn first_area() -> Result<&'static ReservedArea> {
        let area = kernel::mm::gcma::reserved_areas().next();
        kunit_expect!(area.is_some(), "no GCMA area: boot with gcma=16M");
        area.ok_or(ENODEV)
    }

    fn stats(area: &ReservedArea) -> bindings::gcma_stats {
        crate::entry::__gcma_stats(area.as_ptr())
    }

    fn alloc(area: &ReservedArea, count: usize, align: u32) -> *mut bindings::page {
        // SAFETY: `area` is a reserved area; no_warn is set as some calls
        // are meant to fail.
        unsafe { bindings::gcma_alloc(area.as_ptr(), count as _, align, true) }
    }

    fn release(area: &ReservedArea, page: *mut bindings::page, count: usize) -> bool {
        // SAFETY: `area` is a reserved area; `gcma_release` checks that the
        // range is allocated and refuses it otherwise.
        unsafe { bindings::gcma_release(area.as_ptr(), page, count as _) }
    }

    /// Page frame number of a page of the memory map.
    fn pfn(page: *mut bindings::page) -> usize {
        // SAFETY: vmemmap: `page` points into the memory map.
        unsafe { bindings::page_to_pfn(page) as usize }
    }

    /// Allocations through the C entry points land in the area, aligned, and
    /// are counted; releases give the pages back.
    fn registry_alloc_release() -> Result {
        let area = first_area()?;
        let before = stats(area);
        kunit_expect_eq!(before.total_pages, 16 << (20 - kernel::mm::PAGE_SHIFT));
        let (base_pfn, nr_pages) = (area.base_pfn(), area.nr_pages());

        let a = alloc(area, 100, 0);
        let b = alloc(area, 64, 6);
        kunit_expect!(!a.is_null() && !b.is_null(), "allocations failed");
        if a.is_null() || b.is_null() {
            return Err(ENOMEM);
        }
        for (p, n) in [(a, 100), (b, 64)] {
            kunit_expect!(pfn(p) >= base_pfn && pfn(p) + n <= base_pfn + nr_pages);
        }
        // Aligned as a frame number, whatever the area's base.
        kunit_expect_eq!(pfn(b) % 64, 0);
        let mid = stats(area);
        kunit_expect_eq!(mid.primary_used_pages, before.primary_used_pages + 164);
        kunit_expect_eq!(mid.alloc_success, before.alloc_success + 2);
        // A range may be released piecewise.
        kunit_expect!(release(area, a, 50));
        // SAFETY: `a` is the first of 100 contiguous pages of the memory map.
        kunit_expect!(release(area, unsafe { a.add(50) }, 50));
        kunit_expect!(release(area, b, 64));
        let after = stats(area);
        kunit_expect_eq!(after.primary_used_pages, before.primary_used_pages);
        kunit_expect_eq!(after.released, before.released + 3);
        Ok(())
    }

    /// Bad requests have no effect: count 0, more than the area, a double
    /// release, a release of pages never allocated.  Releases of a range
    /// in the area are never refused (refusing makes CMA callers free the
    /// pages to the buddy allocator): wrong ones are logged and ignored.
    fn registry_bad_requests() -> Result {
        let area = first_area()?;
        let before = stats(area);
        let nr_pages = before.total_pages as usize;
        kunit_expect!(alloc(area, 0, 0).is_null());
        kunit_expect!(alloc(area, nr_pages + 1, 0).is_null());
        kunit_expect!(alloc(area, 1, 200).is_null());
        let st = stats(area);
        kunit_expect_eq!(st.alloc_fail, before.alloc_fail + 1);
        kunit_expect_eq!(st.primary_used_pages, before.primary_used_pages);

        let p = alloc(area, 8, 0);
        kunit_expect!(!p.is_null());
        if p.is_null() {
            return Err(ENOMEM);
        }
        kunit_expect!(release(area, p, 8));
        let released = stats(area).released;
        // Ignored with a log line, nothing changed.
        kunit_expect!(release(area, p, 8));
        kunit_expect!(release(area, p, 0));
        let q = alloc(area, 4, 0);
        kunit_expect!(!q.is_null());
        // Overlaps pages that are not allocated: ignored, `q` still in use.
        kunit_expect!(release(area, q, 8));
        kunit_expect_eq!(
            stats(area).primary_used_pages,
            before.primary_used_pages + 4
        );
        kunit_expect_eq!(stats(area).released, released);
        kunit_expect!(release(area, q, 4));
        kunit_expect_eq!(stats(area).primary_used_pages, before.primary_used_pages);
        Ok(())
    }

    /// State shared by the workers of [`registry_concurrent`].
    #[pin_data]
    struct Shared {
        area: &'static ReservedArea,
        failures: AtomicUsize,
        #[pin]
        done: Mutex<usize>,
        #[pin]
        done_cv: CondVar,
    }

    const WORKERS: usize = 3;
    const ROUNDS: usize = 300;

    /// Fills each of the `count` pages from `page` with words made of `tag`
    /// and the page's index, or, with `check`, counts the pages that do not
    /// hold them (any page written by another worker meanwhile).
    fn stamp(page: *mut bindings::page, count: usize, tag: u64, check: bool) -> usize {
        let words = kernel::mm::PAGE_SIZE / core::mem::size_of::<u64>();
        let mut wrong = 0;
        for i in 0..count {
            let want = (tag << 32) | i as u64;
            // SAFETY: `page` is the first of `count` contiguous pages of the
            // memory map, allocated to this worker.
            let p = unsafe { page.add(i) };
            // SAFETY: the page is ours; the mapping is dropped below, in the
            // reverse order of mapping.
            let va = unsafe { bindings::kmap_local_page(p) }.cast::<u64>();
            for w in 0..words {
                // SAFETY: `va` maps the whole page: `words` aligned words.
                let word = unsafe { va.add(w) };
                if check {
                    // SAFETY: as above.
                    wrong += usize::from(unsafe { word.read_volatile() } != want);
                } else {
                    // SAFETY: as above.
                    unsafe { word.write_volatile(want) };
                }
            }
            // SAFETY: `va` is the mapping made above, the last one made.
            unsafe { bindings::kunmap_local(va.cast()) };
        }
        usize::from(wrong > 0)
    }

    /// One worker: allocates ranges of 1 to 64 pages, fills them with its
    /// own pattern, lets the other workers run, checks the pattern and
    /// releases them; records a failure for any allocation or release
    /// refused (the area has room for all workers at once) or for a range
    /// found overwritten (two workers given the same pages).
    fn worker(s: Arc<Shared>, seed: u64) {
        let area = s.area;
        let mut rng = Rng::new(seed);
        let mut failures = 0;
        for round in 0..ROUNDS {
            let count = 1 + rng.below(64);
            let p = alloc(area, count, rng.below(3) as u32);
            if p.is_null() {
                failures += 1;
                continue;
            }
            let tag = seed ^ round as u64;
            stamp(p, count, tag, false);
            // SAFETY: a worker of the case (or the case itself): process
            // context, no atomic section active.
            delay::cond_resched(&unsafe { delay::MaySleep::new() });
            failures += stamp(p, count, tag, true);
            if !release(area, p, count) {
                failures += 1;
            }
        }
        s.failures.fetch_add(failures, Ordering::Relaxed);
        let mut done = s.done.lock();
        *done += 1;
        s.done_cv.notify_all();
    }

    /// Allocations and releases from workers on `system_unbound` and from the
    /// test thread never fail nor leak.
    fn registry_concurrent() -> Result {
        let area = first_area()?;
        let before = stats(area);
        let s = Arc::pin_init(
            pin_init!(Shared {
                area,
                failures: AtomicUsize::new(0),
                done <- new_mutex!(0),
                done_cv <- new_condvar!(),
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: a KUnit case runs in process context, with no atomic
        // section active.
        let ctx = unsafe { delay::MaySleep::new() };
        let workers = spawn_workers(&ctx, WORKERS, |i| {
            let w = s.clone();
            move || worker(w, 0x5eed_0000 + i as u64)
        });
        let started = workers.started();
        worker(s.clone(), 0x5eed_ffff);
        {
            let mut done = s.done.lock();
            while *done < started + 1 {
                s.done_cv.wait(&mut done);
            }
        }
        kunit_expect_eq!(started, WORKERS);
        kunit_expect_eq!(s.failures.load(Ordering::Relaxed), 0);
        let after = stats(area);
        kunit_expect_eq!(after.primary_used_pages, before.primary_used_pages);
        kunit_expect_eq!(
            after.alloc_success,
            before.alloc_success + ((WORKERS + 1) * ROUNDS) as u64
        );
        Ok(())
    }

    /// A claimed run dropped without being finished or given up is
    /// reported and counted (`abandoned_runs()`); one finished, or given
    /// up, is not.
    fn registry_abandoned_run() -> Result {
        use kernel::mm::frames::{abandoned_runs, GFP_COMP};
        // SAFETY: a KUnit case runs in its own kthread, in process context,
        // with no lock held and outside any RCU read-side section.
        let ctx = unsafe { delay::MaySleep::new() };
        let c = first_area()?;
        let area = crate::area_of_descriptor(c.as_ptr()).ok_or(ENODEV)?;
        let before = stats(c);
        let abandoned = abandoned_runs();
        // Compound: no lent page is taken as it is, so a run given up or
        // dropped holds free pages only, which the test gives back.
        let gfp = bindings::GFP_KERNEL | GFP_COMP | bindings::__GFP_NOWARN;

        // Finished, through the C entry point (which sets the allocation
        // tag the page allocator's steps want).
        let page = alloc(c, 4, 2);
        kunit_expect!(!page.is_null());
        kunit_expect!(release(c, page, 4));
        kunit_expect_eq!(abandoned_runs(), abandoned);

        // Given up: each page reported free, for the caller's map.
        let (run, _) = area.claim(&ctx, 4, 2, gfp)?;
        let (start, count) = (run.start(), run.count());
        let mut fates = 0;
        run.give_up(|_, fate| {
            fates += 1;
            kunit_expect_eq!(fate, kernel::mm::frames::PageFate::Freed);
        });
        kunit_expect_eq!(fates, 4);
        kunit_expect!(area.map.lock().release_primary(start, count).is_ok());
        kunit_expect_eq!(abandoned_runs(), abandoned);
        // Given up through the area: freed in the map too.
        let (run, _) = area.claim(&ctx, 4, 2, gfp)?;
        area.give_up(run);
        kunit_expect_eq!(abandoned_runs(), abandoned);
        kunit_expect_eq!(stats(c).primary_used_pages, before.primary_used_pages);

        let (run, _) = area.claim(&ctx, 4, 2, gfp)?;
        let (start, count) = (run.start(), run.count());
        kunit_expect_eq!(run.handed(), 0);
        drop(run);
        kunit_expect_eq!(abandoned_runs(), abandoned + 1);
        kunit_expect!(area.map.lock().release_primary(start, count).is_ok());

        kunit_expect_eq!(stats(c).primary_used_pages, before.primary_used_pages);
        Ok(())
    }

    kernel::kunit_suite! {
        name: "gcma_registry",
        cases: [
            registry_alloc_release,
            registry_bad_requests,
            registry_concurrent,
            registry_abandoned_run
        ],
    }
}
