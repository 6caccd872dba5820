// SPDX-License-Identifier: GPL-2.0

//! The `bonsai_store` suite: range stores through `RangeTree::write`,
//! against a model of the maple tree's overwrite semantics, with short
//! reserves, and next to readers.

use super::{digest, fault, Stress, SLOT, STRESS_READERS};
use crate::RangeTree;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use kernel::{
    delay::{self, MaySleep},
    kunit::suite::{spawn_workers, TestRng as Rng},
    kunit_expect, kunit_expect_eq, new_condvar, new_mutex,
    prelude::*,
    sync::{rcu, Arc},
    time::{ktime_ms_delta, Ktime},
};

/// Addresses of the range-store model.
const STORE_SPACE: usize = 1024;

/// A reference model of range stores with the maple tree's overwrite
/// semantics: for every address of `[0, STORE_SPACE)`, the range that
/// covers it and that range's value; an `end` of 0 means none.
struct StoreModel {
    cells: KVec<(usize, usize, u64)>,
}

impl StoreModel {
    fn new() -> Result<Self> {
        Ok(Self {
            cells: KVec::from_elem((0, 0, 0), STORE_SPACE, GFP_KERNEL)?,
        })
    }

    /// Stores `value` for `[start, end)` or, for `None`, clears it: every
    /// range it overlaps keeps only its parts outside `[start, end)`.
    fn store(&mut self, start: usize, end: usize, value: Option<u64>) {
        let mut i = start;
        while i < end {
            let (a, b, v) = self.cells[i];
            if b == 0 {
                i += 1;
                continue;
            }
            if a < start {
                self.cells[a..start].fill((a, start, v));
            }
            if b > end {
                self.cells[end..b].fill((end, b, v));
            }
            i = b.min(end);
        }
        let new = value.map_or((0, 0, 0), |v| (start, end, v));
        self.cells[start..end].fill(new);
    }

    /// The range containing `addr`, with its value.
    fn find(&self, addr: usize) -> Option<(usize, usize, u64)> {
        let c = self.cells[addr];
        (c.1 != 0).then_some(c)
    }

    /// Number of ranges.
    fn len(&self) -> usize {
        self.cells
            .iter()
            .enumerate()
            .filter(|(i, c)| c.1 != 0 && c.0 == *i)
            .count()
    }

    /// Whether `t` holds exactly the model's ranges and values.
    fn matches(&self, ctx: &mut MaySleep, t: &RangeTree<u64>) -> bool {
        let mut i = 0;
        let mut ok = true;
        t.for_each(ctx, |e| {
            while i < STORE_SPACE && self.cells[i].1 == 0 {
                i += 1;
            }
            if i == STORE_SPACE {
                ok = false;
                return;
            }
            let c = self.cells[i];
            ok &= c == (e.start, e.end, *e.value);
            // A range ends above its first address: progress.
            i = c.1;
        });
        while i < STORE_SPACE && self.cells[i].1 == 0 {
            i += 1;
        }
        ok && i == STORE_SPACE && t.len() == self.len()
    }
}

/// A store or clear of `[start, end)` on `t` through the two steps of
/// [`crate::WriteGuard`]: preallocation with `GFP_KERNEL`, then the
/// update.
fn store_or_clear<V: Copy + Send + Sync>(
    t: &RangeTree<V>,
    start: usize,
    end: usize,
    value: Option<V>,
) -> Result {
    let mut w = t.write();
    match value {
        Some(v) => {
            w.preallocate_store(start, end, GFP_KERNEL)?;
            w.store(start, end, v)
        }
        None => {
            w.preallocate_clear(start, end, GFP_KERNEL)?;
            w.clear(start, end)
        }
    }
}

/// Random stores and clears of `RangeTree` (ranges short and long, into
/// gaps, over many ranges, inside one) agree with the model of the maple
/// tree's overwrite semantics; the tree passes its full check after every
/// step; every node is freed in the end.
fn store_matches_model() -> Result {
    // SAFETY: a KUnit case runs in process context, with no atomic
    // section active.
    let mut ctx = unsafe { MaySleep::new() };
    rcu::barrier(&ctx);
    let base = fault::live();
    let (mut stores, mut clears) = (0usize, 0usize);
    {
        let t = KBox::pin_init(RangeTree::<u64>::new(), GFP_KERNEL)?;
        let mut m = StoreModel::new()?;
        let mut rng = Rng::new(0x5707_e000_0000_0001);
        {
            let mut w = t.write();
            kunit_expect_eq!(w.preallocate_store(5, 5, GFP_KERNEL), Err(EINVAL));
            kunit_expect_eq!(w.preallocate_clear(6, 5, GFP_KERNEL), Err(EINVAL));
            kunit_expect_eq!(w.store(5, 5, 0), Err(EINVAL));
            kunit_expect_eq!(w.clear(6, 5), Err(EINVAL));
        }
        for step in 0..2000u64 {
            let start = rng.below(STORE_SPACE - 1);
            let len = match rng.below(8) {
                0 => 1 + rng.below(256),
                1 | 2 => 1 + rng.below(48),
                _ => 1 + rng.below(12),
            };
            let end = (start + len).min(STORE_SPACE);
            let value = if rng.below(4) == 0 {
                clears += 1;
                None
            } else {
                stores += 1;
                Some(step)
            };
            kunit_expect_eq!(store_or_clear(&t, start, end, value), Ok(()));
            m.store(start, end, value);
            if t.check().is_err() || !m.matches(&mut ctx, &t) {
                kunit_expect!(
                    false,
                    "step {}: {} of [{}, {}) differs from the model",
                    step,
                    if value.is_some() { "store" } else { "clear" },
                    start,
                    end
                );
                return Err(EINVAL);
            }
            for _ in 0..4 {
                let addr = rng.below(STORE_SPACE);
                let got = t.with_range(&mut ctx, addr, |e| (e.start, e.end, *e.value));
                kunit_expect_eq!(got, m.find(addr));
            }
        }
        let c = t.counters();
        pr_info!(
            "stores: {} stores and {} clears, {} ranges left; {} nodes allocated, {} rotations, {} reserved\n",
            stores,
            clears,
            c.ranges,
            c.tree.allocated,
            c.tree.single_rotations + c.tree.double_rotations,
            c.nodes_reserved
        );
        kunit_expect!(c.ranges > 0, "the model emptied out");
    }
    rcu::barrier(&ctx);
    kunit_expect_eq!(fault::live(), base);
    Ok(())
}

/// A store or clear whose reserve is short fails with `EAGAIN` and
/// changes nothing: a reserve filled for a smaller store, and, for random
/// stores and clears, a reserve filled to every count short of what the
/// preallocation step asks (its allocations failing one after the other,
/// the box of the retirement batch last); with the full reserve the
/// update succeeds and agrees with the model.
fn short_reserve_is_eagain() -> Result {
    // SAFETY: a KUnit case runs in process context, with no atomic
    // section active.
    let mut ctx = unsafe { MaySleep::new() };
    rcu::barrier(&ctx);
    let base = fault::live();
    let (mut failures, mut ops) = (0usize, 0usize);
    {
        let t = KBox::pin_init(RangeTree::<u64>::new(), GFP_KERNEL)?;
        let mut m = StoreModel::new()?;
        for k in 0..STORE_SPACE / SLOT {
            t.insert(k * SLOT, k * SLOT + 8, k as u64)?;
            m.store(k * SLOT, k * SLOT + 8, Some(k as u64));
        }

        // The reserve of a store into a gap is short for one over many
        // ranges.
        t.shrink(&ctx);
        {
            let mut w = t.write();
            w.preallocate_store(8, 9, GFP_KERNEL)?;
            let have = w.reserve_len();
            let (len, sum, stats) = (t.len(), digest(&mut ctx, &t), t.stats());
            kunit_expect_eq!(w.store(4, 40 * SLOT, 7), Err(EAGAIN));
            kunit_expect_eq!(w.clear(4, 40 * SLOT), Err(EAGAIN));
            kunit_expect_eq!(w.reserve_len(), have);
            kunit_expect_eq!(t.len(), len);
            kunit_expect_eq!(digest(&mut ctx, &t), sum);
            kunit_expect_eq!(t.stats(), stats);
            kunit_expect_eq!(w.store(8, 9, 7), Ok(()));
            m.store(8, 9, Some(7));
        }
        kunit_expect!(m.matches(&mut ctx, &t));

        let mut rng = Rng::new(0x5707_e000_0000_0002);
        for op in 0..48u64 {
            let start = rng.below(STORE_SPACE - 1);
            let len = if rng.below(2) == 0 {
                1 + rng.below(2 * SLOT)
            } else {
                1 + rng.below(8 * SLOT)
            };
            let end = (start + len).min(STORE_SPACE);
            let value = (rng.below(3) != 0).then_some(1000 + op);
            // The retired nodes of the last update go to RCU and are freed
            // now, so that the count of live nodes moves only with this
            // one: failed attempts retire nothing.
            t.shrink(&ctx);
            rcu::barrier(&ctx);
            let mut allowed = 0;
            loop {
                // An empty reserve and no spare batch box: the
                // preallocation allocates everything the update needs.
                t.shrink(&ctx);
                let (len, sum, stats, live) =
                    (t.len(), digest(&mut ctx, &t), t.stats(), fault::live());
                let mut w = t.write();
                fault::fail_after(allowed);
                let p = match value {
                    Some(_) => w.preallocate_store(start, end, GFP_KERNEL),
                    None => w.preallocate_clear(start, end, GFP_KERNEL),
                };
                fault::stop();
                let r = match value {
                    Some(v) => w.store(start, end, v),
                    None => w.clear(start, end),
                };
                let reserved = w.reserve_len() as isize;
                drop(w);
                if p.is_ok() {
                    kunit_expect_eq!(r, Ok(()));
                    break;
                }
                kunit_expect_eq!(p, Err(ENOMEM));
                // A clear of nothing needs no node and retires none.
                if r != Ok(()) || value.is_some() {
                    kunit_expect_eq!(r, Err(EAGAIN));
                    failures += 1;
                }
                kunit_expect_eq!(t.len(), len);
                kunit_expect_eq!(digest(&mut ctx, &t), sum);
                kunit_expect_eq!(t.stats(), stats);
                // The nodes allocated before the failure are in the
                // reserve: none was used.
                kunit_expect_eq!(fault::live() - reserved, live);
                allowed += 1;
                if allowed > 2000 {
                    kunit_expect!(false, "preallocation never succeeded");
                    return Err(EINVAL);
                }
            }
            m.store(start, end, value);
            ops += 1;
            if t.check().is_err() || !m.matches(&mut ctx, &t) {
                kunit_expect!(
                    false,
                    "op {}: [{}, {}) differs from the model",
                    op,
                    start,
                    end
                );
                return Err(EINVAL);
            }
        }
    }
    rcu::barrier(&ctx);
    kunit_expect_eq!(fault::live(), base);
    kunit_expect!(failures > ops, "too few short reserves: {}", failures);
    pr_info!(
        "short reserves: {} stores and clears, {} failed with EAGAIN, tree unchanged\n",
        ops,
        failures
    );
    Ok(())
}

/// Slots of the store stress test; even slots hold the stable ranges.
/// Few, so that lookups often meet the range a store is trimming.
const STORE_STRESS_SLOTS: usize = 128;

/// First address of the part of stable range `k` (an even slot) that
/// the writer of the store stress test never stores to or clears.
fn kept_start(k: usize) -> usize {
    k * SLOT + 4
}

/// Length of that part.
const KEPT_LEN: usize = 8;

/// A reader of the store stress test: looks up the kept parts of the
/// stable ranges until told to stop; each must be found, with its value.
fn store_reader(s: Arc<Stress>, seed: u64) {
    // SAFETY: the body of a work item of `spawn_workers`: process context,
    // no atomic section active.
    let mut ctx = unsafe { MaySleep::new() };
    let mut rng = Rng::new(seed);
    let (mut n, mut misses) = (0usize, 0usize);
    while !s.stop.load(Ordering::Acquire) {
        for _ in 0..256 {
            let k = 2 * rng.below(STORE_STRESS_SLOTS / 2);
            let addr = kept_start(k) + rng.below(KEPT_LEN);
            if s.tree.with_range(&mut ctx, addr, |e| *e.value) != Some(k) {
                misses += 1;
            }
            n += 1;
        }
        delay::cond_resched(&ctx);
    }
    s.lookups.fetch_add(n, Ordering::Relaxed);
    s.misses.fetch_add(misses, Ordering::Relaxed);
    let mut done = s.done.lock();
    *done += 1;
    s.done_cv.notify_all();
}

/// How long the writer of the store stress test runs.
const STORE_STRESS_MS: i64 = 3000;

/// What the writer of the store stress test did.
#[derive(Default)]
struct StoreStressOps {
    stores: usize,
    clears: usize,
    regrows: usize,
    trims: usize,
    splits: usize,
}

/// The range containing `addr` in the stress tree.
fn stress_find(ctx: &mut MaySleep, t: &RangeTree<usize>, addr: usize) -> Option<(usize, usize)> {
    t.with_range(ctx, addr, |e| (e.start, e.end))
}

/// The writer of the store stress test, for `STORE_STRESS_MS`.  Stable range
/// `k` (an even slot) starts as the whole slot; its kept part is never
/// written.  Random stores and clears fall between the kept parts of
/// stable ranges `k` and `k + 2`, so they trim the ends of both (a store
/// inside the end of `k` splits it, keeping the kept part in the lower
/// piece) and cover whatever earlier ones left in the odd slot between.  In
/// turns, a stable range grows back by a store of its value over itself
/// and the free addresses next to it (a rewrite of exactly one range).
fn store_stress_writer(s: &Stress) -> Result<StoreStressOps> {
    // SAFETY: called by the KUnit case below on its own thread: process
    // context, no atomic section active.  (The case's token is lent to
    // the workers' guard meanwhile.)
    let ctx = &mut unsafe { MaySleep::new() };
    let mut rng = Rng::new(0x5707_e000_0000_0003);
    let mut ops = StoreStressOps::default();
    let t = &s.tree;
    let start = Ktime::ktime_get();
    while ktime_ms_delta(Ktime::ktime_get(), start) < STORE_STRESS_MS {
        for _ in 0..64 {
            let k = 2 * rng.below(STORE_STRESS_SLOTS / 2 - 1);
            let (lo, hi) = stress_find(ctx, t, kept_start(k)).ok_or(ENOENT)?;
            let op = rng.below(3);
            if op == 0 {
                // Grow stable range `k` back over free addresses of its
                // slot, after clearing the rest of the slot (which holds
                // no kept address): the store covers that range alone.
                if lo > k * SLOT {
                    store_or_clear(t, k * SLOT, lo, None)?;
                }
                if hi < (k + 1) * SLOT {
                    store_or_clear(t, hi, (k + 1) * SLOT, None)?;
                }
                let mut new_lo = k * SLOT + rng.below(lo - k * SLOT + 1);
                let mut new_hi = hi + rng.below((k + 1) * SLOT - hi + 1);
                if t.with_range_from(ctx, new_lo, |e| e.start) != Some(lo) {
                    new_lo = lo;
                }
                if t.with_range_from(ctx, hi, |e| e.start)
                    .is_some_and(|next| next < new_hi)
                {
                    new_hi = hi;
                }
                store_or_clear(t, new_lo, new_hi, Some(k))?;
                ops.regrows += 1;
            } else {
                // Between the kept parts of `k` and `k + 2`.
                let zone = kept_start(k) + KEPT_LEN;
                let zone_end = kept_start(k + 2);
                let (next_lo, _) = stress_find(ctx, t, kept_start(k + 2)).ok_or(ENOENT)?;
                let (a, b) = if op == 1 && hi > zone {
                    // From inside the end of `k`: trims or splits it.
                    let a = zone + rng.below(hi - zone);
                    (a, a + 1 + rng.below(zone_end - a))
                } else {
                    let a = zone + rng.below(zone_end - zone - 1);
                    // A store strictly inside range `k + 2` would split it
                    // with the kept part in the upper piece, which lookups
                    // miss until it is inserted (see `tree::Writer::store`):
                    // start at that range instead, which trims it.
                    (a.min(next_lo), a + 1 + rng.below(zone_end - a))
                };
                if a < hi || b > next_lo {
                    ops.trims += 1;
                }
                if a < hi && b < hi {
                    ops.splits += 1;
                }
                if rng.below(3) == 0 {
                    store_or_clear(t, a, b, None)?;
                    ops.clears += 1;
                } else {
                    store_or_clear(t, a, b, Some(usize::MAX - a))?;
                    ops.stores += 1;
                }
            }
        }
        delay::cond_resched(ctx);
    }
    Ok(ops)
}

/// Lookups of addresses that stay mapped, on workqueue threads, never
/// miss while the test thread stores and clears ranges around them: the
/// ranges that hold them are trimmed, split (the kept addresses in the
/// lower part) and grown back by rewrites all along.
fn concurrent_stores_never_miss() -> Result {
    // SAFETY: a KUnit case runs in process context, with no atomic
    // section active.
    let mut ctx = unsafe { MaySleep::new() };
    let s = Arc::pin_init(
        pin_init!(Stress {
            tree <- RangeTree::new(),
            stop: AtomicBool::new(false),
            lookups: AtomicUsize::new(0),
            misses: AtomicUsize::new(0),
            done <- new_mutex!(0),
            done_cv <- new_condvar!(),
        }),
        GFP_KERNEL,
    )?;
    for k in (0..STORE_STRESS_SLOTS).step_by(2) {
        s.tree.insert(k * SLOT, (k + 1) * SLOT, k)?;
    }
    let workers = spawn_workers(&ctx, STRESS_READERS, |i| {
        let r = s.clone();
        move || store_reader(r, 0x5707_0000 + i as u64)
    });
    let readers = workers.started();
    let before = s.tree.stats();
    let ops = store_stress_writer(&s);
    s.stop.store(true, Ordering::Release);
    {
        let mut done = s.done.lock();
        while *done < readers {
            s.done_cv.wait(&mut done);
        }
    }
    drop(workers);
    let ops = ops?;
    let after = s.tree.stats();
    let lookups = s.lookups.load(Ordering::Relaxed);
    let misses = s.misses.load(Ordering::Relaxed);
    pr_info!(
        "store stress: {} readers, {} lookups, {} misses; {} stores, {} clears ({} trimming a stable range, {} splitting one), {} regrows; {} commits, {} rotations\n",
        readers,
        lookups,
        misses,
        ops.stores,
        ops.clears,
        ops.trims,
        ops.splits,
        ops.regrows,
        after.commits - before.commits,
        (after.single_rotations + after.double_rotations)
            - (before.single_rotations + before.double_rotations)
    );
    kunit_expect_eq!(readers, STRESS_READERS);
    kunit_expect_eq!(misses, 0);
    kunit_expect!(lookups > 0, "no lookup ran");
    kunit_expect!(
        ops.trims > 0 && ops.splits > 0 && ops.regrows > 0,
        "no trim, split or regrow"
    );
    kunit_expect_eq!(s.tree.check(), Ok(()));
    for k in (0..STORE_STRESS_SLOTS).step_by(2) {
        let v = s.tree.with_range(&mut ctx, kept_start(k), |e| *e.value);
        kunit_expect_eq!(v, Some(k));
    }
    Ok(())
}

kernel::kunit_suite! {
    name: "bonsai_store",
    cases: [
        store_matches_model,
        #[slow] short_reserve_is_eagain,
        #[slow] concurrent_stores_never_miss,
    ],
}
