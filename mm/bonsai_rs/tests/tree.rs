// SPDX-License-Identifier: GPL-2.0

//! The `bonsai_tree` suite: inserts, removes and lookups against a model,
//! allocation failures, batched retirement, and lookups next to a
//! writer.

use super::{digest, fault, Stress, SLOT, SLOTS, STRESS_READERS};
use crate::{tree::BalanceParams, RangeTree, RETIRE_BATCH};
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use kernel::{
    c_str,
    delay::{self, MaySleep},
    kunit::suite::{spawn_workers, TestRng as Rng},
    kunit_expect, kunit_expect_eq, new_condvar, new_mutex,
    prelude::*,
    sync::{rcu, Arc},
    time::{ktime_ms_delta, Ktime},
};

/// Random inserts, removes and lookups agree with a slot model, and the
/// tree passes its full check after every update.
fn run_against_model(params: BalanceParams, seed: u64) -> Result {
    // SAFETY: called by the KUnit cases below, in their process context,
    // with no atomic section active.
    let mut ctx = unsafe { MaySleep::new() };
    let t = KBox::pin_init(RangeTree::<u64>::with_params(params), GFP_KERNEL)?;
    // Model: length of the range in each slot (0: none) and its value.
    let mut len = KVec::from_elem(0usize, SLOTS, GFP_KERNEL)?;
    let mut val = KVec::from_elem(0u64, SLOTS, GFP_KERNEL)?;
    let mut present = 0;
    let mut rng = Rng::new(seed);

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
            let got = t.with_range(&mut ctx, addr, |e| (e.start, e.end, *e.value));
            kunit_expect_eq!(got, want);
        }
    }
    // In-order iteration returns exactly the model's ranges.
    let mut expect_k = 0;
    let mut ok = true;
    t.for_each(&mut ctx, |e| {
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
    // SAFETY: a KUnit case runs in process context, with no atomic
    // section active.
    let mut ctx = unsafe { MaySleep::new() };
    let t = KBox::pin_init(RangeTree::<u32>::new(), GFP_KERNEL)?;
    kunit_expect!(t.is_empty());
    kunit_expect_eq!(t.with_range(&mut ctx, 0, |e| e.start), None);
    kunit_expect_eq!(t.with_range_from(&mut ctx, 0, |e| e.start), None);
    kunit_expect_eq!(t.insert(5, 5, 0), Err(EINVAL));
    kunit_expect_eq!(t.insert(6, 5, 0), Err(EINVAL));
    kunit_expect_eq!(t.insert(0, 1, 1), Ok(()));
    kunit_expect_eq!(t.insert(usize::MAX - 1, usize::MAX, 2), Ok(()));
    kunit_expect_eq!(t.insert(100, 200, 3), Ok(()));
    kunit_expect_eq!(t.insert(150, 160, 4), Err(EEXIST));
    kunit_expect_eq!(t.insert(50, 101, 4), Err(EEXIST));
    kunit_expect_eq!(t.insert(199, 300, 4), Err(EEXIST));
    kunit_expect_eq!(t.insert(200, 300, 4), Ok(()));
    kunit_expect_eq!(t.with_range(&mut ctx, 0, |e| *e.value), Some(1));
    kunit_expect_eq!(t.with_range(&mut ctx, 1, |e| *e.value), None);
    kunit_expect_eq!(
        t.with_range(&mut ctx, usize::MAX - 1, |e| *e.value),
        Some(2)
    );
    kunit_expect_eq!(t.with_range(&mut ctx, usize::MAX, |e| *e.value), None);
    kunit_expect_eq!(t.with_range(&mut ctx, 199, |e| *e.value), Some(3));
    kunit_expect_eq!(t.with_range(&mut ctx, 200, |e| *e.value), Some(4));
    kunit_expect_eq!(t.with_range_from(&mut ctx, 1, |e| e.start), Some(100));
    kunit_expect_eq!(
        t.with_range_from(&mut ctx, 300, |e| e.start),
        Some(usize::MAX - 1)
    );
    kunit_expect_eq!(t.remove(150), Err(ENOENT));
    kunit_expect_eq!(t.remove(100), Ok(()));
    kunit_expect_eq!(t.with_range(&mut ctx, 150, |e| *e.value), None);
    kunit_expect_eq!(t.len(), 3);
    kunit_expect_eq!(t.check(), Ok(()));
    Ok(())
}

/// Node allocation fails at every point an insert or a remove allocates
/// (each node of the reserve top-up and the box of the next retirement
/// batch): the update fails with `ENOMEM`, the tree is unchanged and no
/// node is leaked; with one more allocation allowed, it succeeds.
fn alloc_failure_leaves_tree_unchanged() -> Result {
    // SAFETY: a KUnit case runs in process context, with no atomic
    // section active.
    let mut ctx = unsafe { MaySleep::new() };
    rcu::barrier(&ctx);
    let base = fault::live();
    let (mut failures, mut ops) = (0usize, 0usize);
    {
        let t = KBox::pin_init(RangeTree::<u64>::new(), GFP_KERNEL)?;
        for k in 0..48 {
            t.insert(2 * k * SLOT, 2 * k * SLOT + 8, k as u64)?;
        }
        let mut rng = Rng::new(0x5eed_fa11_0000_0001);
        for _ in 0..64 {
            let k = rng.below(96);
            let start = k * SLOT;
            let present = t.with_range(&mut ctx, start, |_| ()).is_some();
            // Retired nodes of the last update go to RCU now, so that the
            // count of live nodes moves only with this update.
            t.shrink(&ctx);
            rcu::barrier(&ctx);
            let mut allowed = 0;
            loop {
                // Empty reserve and no spare batch: this update allocates
                // everything it needs.
                t.shrink(&ctx);
                let (len, sum, stats, live) =
                    (t.len(), digest(&mut ctx, &t), t.stats(), fault::live());
                fault::fail_after(allowed);
                let r = if present {
                    t.remove(start)
                } else {
                    t.insert(start, start + 8, k as u64)
                };
                fault::stop();
                if r != Err(ENOMEM) {
                    kunit_expect_eq!(r, Ok(()));
                    kunit_expect_eq!(t.with_range(&mut ctx, start, |_| ()).is_some(), !present);
                    break;
                }
                failures += 1;
                kunit_expect_eq!(t.len(), len);
                kunit_expect_eq!(digest(&mut ctx, &t), sum);
                kunit_expect_eq!(t.stats(), stats);
                kunit_expect_eq!(fault::live(), live);
                allowed += 1;
                if allowed > 200 {
                    kunit_expect!(false, "update never succeeded");
                    return Err(EINVAL);
                }
            }
            ops += 1;
            kunit_expect_eq!(t.check(), Ok(()));
        }
    }
    rcu::barrier(&ctx);
    kunit_expect_eq!(fault::live(), base);
    kunit_expect!(failures > ops, "too few injected failures: {}", failures);
    pr_info!(
        "fault injection: {} updates, {} allocation failures, no leak\n",
        ops,
        failures
    );
    Ok(())
}

/// Replaced nodes reach RCU in batches of at least `RETIRE_BATCH`, `flush`
/// hands over the rest, and every node is freed once the callbacks ran.
fn retirement_is_batched() -> Result {
    // SAFETY: a KUnit case runs in process context, with no atomic
    // section active.
    let ctx = unsafe { MaySleep::new() };
    rcu::barrier(&ctx);
    let base = fault::live();
    {
        let t = KBox::pin_init(RangeTree::<u64>::new(), GFP_KERNEL)?;
        for k in 0..300 {
            t.insert(k * SLOT, k * SLOT + 1, k as u64)?;
        }
        for k in (0..300).step_by(3) {
            t.remove(k * SLOT)?;
        }
        let c = t.counters();
        kunit_expect!(c.rcu_batches > 0);
        kunit_expect!(c.nodes_pending < RETIRE_BATCH);
        kunit_expect!(c.tree.retired - c.nodes_pending >= c.rcu_batches * RETIRE_BATCH);
        kunit_expect_eq!(c.ranges, 200);
        t.flush(&ctx);
        let d = t.counters();
        kunit_expect_eq!(d.nodes_pending, 0);
        kunit_expect_eq!(
            d.rcu_batches,
            c.rcu_batches + usize::from(c.nodes_pending > 0)
        );
        // The debugfs view: one registration per tree; the name is free
        // again once the tree is gone.
        kunit_expect_eq!(t.as_ref().debugfs_register(c_str!("kunit")), Ok(()));
        kunit_expect_eq!(t.as_ref().debugfs_register(c_str!("kunit2")), Err(EBUSY));
    }
    let t = KBox::pin_init(RangeTree::<u64>::new(), GFP_KERNEL)?;
    kunit_expect_eq!(t.as_ref().debugfs_register(c_str!("kunit")), Ok(()));
    drop(t);
    rcu::barrier(&ctx);
    kunit_expect_eq!(fault::live(), base);
    Ok(())
}

/// Slots of the stress test; even slots hold ranges for the whole run,
/// odd ones are inserted and removed all along.
const STRESS_SLOTS: usize = 1024;
/// How long the writer of the stress test runs.
const STRESS_MS: i64 = 4000;

/// A reader of the stress test: looks up stable ranges until told to
/// stop; each must be found, with its value.
fn stress_reader(s: Arc<Stress>, seed: u64) {
    // SAFETY: the body of a work item of `spawn_workers`: process context,
    // no atomic section active.
    let mut ctx = unsafe { MaySleep::new() };
    let mut rng = Rng::new(seed);
    let (mut n, mut misses) = (0usize, 0usize);
    while !s.stop.load(Ordering::Acquire) {
        for _ in 0..256 {
            let k = 2 * rng.below(STRESS_SLOTS / 2);
            let addr = k * SLOT + rng.below(8);
            let got = s.tree.with_range(&mut ctx, addr, |e| (e.start, *e.value));
            if got != Some((k * SLOT, k)) {
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

/// Slots above the stable ones that the writer of the stress test fills
/// and empties in address order, which rotates the tree all the time.
const STRESS_SWEEP: usize = 256;

/// The writer of the stress test, for `STRESS_MS`: in turns, toggles 64
/// random odd slots, then inserts a range in each slot above the stable
/// ones in ascending order and removes them in a strided order.
fn stress_writer(ctx: &MaySleep, s: &Stress) -> Result<usize> {
    let mut present = KVec::from_elem(false, STRESS_SLOTS / 2, GFP_KERNEL)?;
    let mut rng = Rng::new(0x0dd5_1075_cafe_f00d);
    let start = Ktime::ktime_get();
    let mut updates = 0;
    while ktime_ms_delta(Ktime::ktime_get(), start) < STRESS_MS {
        for _ in 0..64 {
            let i = rng.below(STRESS_SLOTS / 2);
            let k = 2 * i + 1;
            if present[i] {
                s.tree.remove(k * SLOT)?;
            } else {
                s.tree.insert(k * SLOT, k * SLOT + 8, k)?;
            }
            present[i] = !present[i];
            updates += 1;
        }
        // Ascending inserts rotate singly; removals in a strided order
        // (37 is prime to the sweep length) also rotate doubly.
        for k in STRESS_SLOTS..STRESS_SLOTS + STRESS_SWEEP {
            s.tree.insert(k * SLOT, k * SLOT + 8, k)?;
            delay::cond_resched(ctx);
        }
        for j in 0..STRESS_SWEEP {
            let k = STRESS_SLOTS + j * 37 % STRESS_SWEEP;
            s.tree.remove(k * SLOT)?;
            delay::cond_resched(ctx);
        }
        updates += 2 * STRESS_SWEEP;
        delay::cond_resched(ctx);
    }
    Ok(updates)
}

/// Lookups of ranges present for the whole run, on workqueue threads,
/// never miss while the test thread inserts and removes other ranges and
/// so rotates the tree constantly.
fn concurrent_lookups_never_miss() -> Result {
    // SAFETY: a KUnit case runs in process context, with no atomic
    // section active.
    let ctx = unsafe { MaySleep::new() };
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
    for k in (0..STRESS_SLOTS).step_by(2) {
        s.tree.insert(k * SLOT, k * SLOT + 8, k)?;
    }
    let workers = spawn_workers(&ctx, STRESS_READERS, |i| {
        let r = s.clone();
        move || stress_reader(r, 0x1234_0000 + i as u64)
    });
    let readers = workers.started();
    let before = s.tree.stats();
    let start = Ktime::ktime_get();
    let updates = stress_writer(&ctx, &s);
    s.stop.store(true, Ordering::Release);
    {
        let mut done = s.done.lock();
        while *done < readers {
            s.done_cv.wait(&mut done);
        }
    }
    let ms = ktime_ms_delta(Ktime::ktime_get(), start);
    let updates = updates?;
    let after = s.tree.stats();
    let c = s.tree.counters();
    let single = after.single_rotations - before.single_rotations;
    let double = after.double_rotations - before.double_rotations;
    let lookups = s.lookups.load(Ordering::Relaxed);
    let misses = s.misses.load(Ordering::Relaxed);
    pr_info!(
        "stress: {} readers, {} lookups, {} misses; {} updates, {} single and {} double rotations, {} RCU batches; {} ms\n",
        readers,
        lookups,
        misses,
        updates,
        single,
        double,
        c.rcu_batches,
        ms
    );
    kunit_expect_eq!(readers, STRESS_READERS);
    kunit_expect_eq!(misses, 0);
    kunit_expect!(lookups > 0, "no lookup ran");
    kunit_expect!(single + double > 0, "no rotation happened");
    kunit_expect_eq!(s.tree.check(), Ok(()));
    Ok(())
}

kernel::kunit_suite! {
    name: "bonsai_tree",
    cases: [
        matches_model_proven_params,
        matches_model_paper_params,
        boundaries_and_overlaps,
        #[slow] alloc_failure_leaves_tree_unchanged,
        retirement_is_batched,
        #[slow] concurrent_lookups_never_miss,
    ],
}
