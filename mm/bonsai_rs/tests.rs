// SPDX-License-Identifier: GPL-2.0

//! KUnit suites of the Bonsai crate.

use crate::{tree::BalanceParams, RangeTree};
use kernel::{kunit_expect, kunit_expect_eq, prelude::*};

/// Slots of the reference model: slot `k` covers addresses `[16k, 16k+16)`
/// and may hold one range `[16k, 16k + len)`.
const SLOTS: usize = 256;
const SLOT: usize = 16;

/// A deterministic generator (xorshift64*), so failures reproduce.
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

/// Random inserts, removes and lookups agree with a slot model, and the
/// tree passes its full check after every update.
fn run_against_model(params: BalanceParams, seed: u64) -> Result {
    let t = KBox::pin_init(RangeTree::<u64>::with_params(params), GFP_KERNEL)?;
    // Model: length of the range in each slot (0: none) and its value.
    let mut len = KVec::from_elem(0usize, SLOTS, GFP_KERNEL)?;
    let mut val = KVec::from_elem(0u64, SLOTS, GFP_KERNEL)?;
    let mut present = 0;
    let mut rng = Rng(seed);

    for step in 0..3000u64 {
        let k = rng.below(SLOTS);
        let start = k * SLOT;
        if rng.below(3) != 0 {
            let l = 1 + rng.below(SLOT);
            let got = t.insert(start, start + l, step);
            if len[k] == 0 {
                kunit_expect_eq!(got, Ok(()));
                len[k] = l;
                val[k] = step;
                present += 1;
            } else {
                kunit_expect_eq!(got, Err(EEXIST));
            }
        } else {
            let got = t.remove(start);
            if len[k] != 0 {
                kunit_expect_eq!(got, Ok(()));
                len[k] = 0;
                present -= 1;
            } else {
                kunit_expect_eq!(got, Err(ENOENT));
            }
        }
        kunit_expect_eq!(t.len(), present);
        if t.check().is_err() {
            kunit_expect!(false, "tree check failed after step {}", step);
            return Err(EINVAL);
        }
        // Probe a few addresses.
        for _ in 0..4 {
            let addr = rng.below(SLOTS * SLOT);
            let (ks, off) = (addr / SLOT, addr % SLOT);
            let want = (off < len[ks]).then(|| (ks * SLOT, ks * SLOT + len[ks], val[ks]));
            let got = t.with_range(addr, |e| (e.start, e.end, *e.value));
            kunit_expect_eq!(got, want);
        }
    }
    // In-order iteration returns exactly the model's ranges.
    let mut expect_k = 0;
    let mut ok = true;
    t.for_each(|e| {
        while expect_k < SLOTS && len[expect_k] == 0 {
            expect_k += 1;
        }
        ok &= expect_k < SLOTS && e.start == expect_k * SLOT && e.end == e.start + len[expect_k];
        expect_k += 1;
    });
    kunit_expect!(ok, "iteration differs from the model");
    let s = t.stats();
    kunit_expect!(
        s.single_rotations + s.double_rotations > 0,
        "no rotation happened"
    );
    Ok(())
}

fn matches_model_proven_params() -> Result {
    run_against_model(BalanceParams::HIRAI_YAMAMOTO, 0x1234_5678_9abc_def1)
}

fn matches_model_paper_params() -> Result {
    run_against_model(BalanceParams::PAPER, 0x0fed_cba9_8765_4321)
}

/// Ranges at the ends of the address space, empty ranges and overlaps.
fn boundaries_and_overlaps() -> Result {
    let t = KBox::pin_init(RangeTree::<u32>::new(), GFP_KERNEL)?;
    kunit_expect!(t.is_empty());
    kunit_expect_eq!(t.with_range(0, |e| e.start), None);
    kunit_expect_eq!(t.with_range_from(0, |e| e.start), None);
    kunit_expect_eq!(t.insert(5, 5, 0), Err(EINVAL));
    kunit_expect_eq!(t.insert(6, 5, 0), Err(EINVAL));
    kunit_expect_eq!(t.insert(0, 1, 1), Ok(()));
    kunit_expect_eq!(t.insert(usize::MAX - 1, usize::MAX, 2), Ok(()));
    kunit_expect_eq!(t.insert(100, 200, 3), Ok(()));
    kunit_expect_eq!(t.insert(150, 160, 4), Err(EEXIST));
    kunit_expect_eq!(t.insert(50, 101, 4), Err(EEXIST));
    kunit_expect_eq!(t.insert(199, 300, 4), Err(EEXIST));
    kunit_expect_eq!(t.insert(200, 300, 4), Ok(()));
    kunit_expect_eq!(t.with_range(0, |e| *e.value), Some(1));
    kunit_expect_eq!(t.with_range(1, |e| *e.value), None);
    kunit_expect_eq!(t.with_range(usize::MAX - 1, |e| *e.value), Some(2));
    kunit_expect_eq!(t.with_range(usize::MAX, |e| *e.value), None);
    kunit_expect_eq!(t.with_range(199, |e| *e.value), Some(3));
    kunit_expect_eq!(t.with_range(200, |e| *e.value), Some(4));
    kunit_expect_eq!(t.with_range_from(1, |e| e.start), Some(100));
    kunit_expect_eq!(t.with_range_from(300, |e| e.start), Some(usize::MAX - 1));
    kunit_expect_eq!(t.remove(150), Err(ENOENT));
    kunit_expect_eq!(t.remove(100), Ok(()));
    kunit_expect_eq!(t.with_range(150, |e| *e.value), None);
    kunit_expect_eq!(t.len(), 3);
    kunit_expect_eq!(t.check(), Ok(()));
    Ok(())
}

kernel::kunit_suite! {
    name: "bonsai_tree",
    cases: [matches_model_proven_params, matches_model_paper_params, boundaries_and_overlaps],
}
