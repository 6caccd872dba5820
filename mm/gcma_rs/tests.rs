// SPDX-License-Identifier: GPL-2.0

//! KUnit suites of the GCMA crate.

use crate::area_map::{bitmap_words, summary_words, AreaMap};
use kernel::{kunit_expect, kunit_expect_eq, prelude::*};

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
        zeroed(summary_words(nr_pages).ok_or(EINVAL)?)?,
    )
}

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
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
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);

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
    kunit_expect_eq!(map.release_primary(5, 10), Err(EINVAL));
    kunit_expect_eq!(map.release_primary(PAGES - 1, 2), Err(EINVAL));
    kunit_expect_eq!(map.primary_used(), 10);
    kunit_expect_eq!(map.release_primary(0, 10), Ok(()));
    kunit_expect_eq!(map.check_invariants(), Ok(()));
    Ok(())
}

kernel::kunit_suite! {
    name: "gcma_area_map",
    cases: [area_map_matches_model, area_map_edges],
}
