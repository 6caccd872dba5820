// SPDX-License-Identifier: GPL-2.0

//! KUnit suites of the Bonsai crate.

use crate::{tree::BalanceParams, RangeTree, RETIRE_BATCH};
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use kernel::{
    c_str,
    delay::{self, MaySleep},
    kunit::suite::{spawn_workers, TestRng as Rng},
    kunit_expect, kunit_expect_eq, new_condvar, new_mutex,
    prelude::*,
    sync::{rcu, Arc, CondVar, Mutex},
    time::{ktime_ms_delta, Ktime},
};

/// Fault injection and live-node count of the node allocator, consulted by
/// the shared tree code through `crate::platform`.
///
/// The state is global: only one case may inject faults at a time, which
/// holds since KUnit runs cases one after the other.
pub(crate) mod fault {
    use core::sync::atomic::{AtomicIsize, Ordering};

    /// Allocations still allowed to succeed; negative: no injection.
    static ALLOWED: AtomicIsize = AtomicIsize::new(-1);
    /// Nodes allocated minus nodes freed, over all trees.
    static LIVE: AtomicIsize = AtomicIsize::new(0);

    /// Whether the next allocation fails: after `ALLOWED` more successes.
    pub(crate) fn inject_alloc_failure() -> bool {
        match ALLOWED.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            (n > 0).then(|| n - 1)
        }) {
            // Allowed, and one allocation fewer to go.
            Ok(_) => false,
            // Zero: fail; negative: no injection.
            Err(n) => n == 0,
        }
    }

    /// Counts a node allocated.
    pub(crate) fn node_allocated() {
        LIVE.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a node freed.
    pub(crate) fn node_freed() {
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }

    /// Lets `n` more allocations succeed, then fails every one.
    pub(crate) fn fail_after(n: usize) {
        ALLOWED.store(n as isize, Ordering::Relaxed);
    }

    /// Stops injecting failures.
    pub(crate) fn stop() {
        ALLOWED.store(-1, Ordering::Relaxed);
    }

    /// Nodes allocated and not freed.
    pub(crate) fn live() -> isize {
        LIVE.load(Ordering::Relaxed)
    }
}

/// Slots of the reference model: slot `k` covers addresses `[16k, 16k+16)`
/// and may hold one range `[16k, 16k + len)`.
const SLOTS: usize = 256;
const SLOT: usize = 16;

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

/// A digest of the ranges and values of a tree, to tell it unchanged.
fn digest(ctx: &mut MaySleep, t: &RangeTree<u64>) -> u64 {
    let mut h = 0u64;
    t.for_each(ctx, |e| {
        h = h.rotate_left(7) ^ (e.start as u64) ^ ((e.end as u64) << 20) ^ (*e.value << 40);
    });
    h
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
/// Reader threads of the stress test.
const STRESS_READERS: usize = 2;
/// How long the writer of the stress test runs.
const STRESS_MS: i64 = 4000;

/// State shared by the stress test and its readers.
#[pin_data]
struct Stress {
    #[pin]
    tree: RangeTree<usize>,
    stop: AtomicBool,
    lookups: AtomicUsize,
    misses: AtomicUsize,
    /// Readers finished.
    #[pin]
    done: Mutex<usize>,
    #[pin]
    done_cv: CondVar,
}

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

/// The suite of range stores through `RangeTree::write`.
mod store_suite {
    use super::*;

    kernel::kunit_suite! {
        name: "bonsai_store",
        cases: [
            store_matches_model,
            short_reserve_is_eagain,
            #[slow] concurrent_stores_never_miss,
        ],
    }
}

kernel::kunit_suite! {
    name: "bonsai_tree",
    cases: [
        matches_model_proven_params,
        matches_model_paper_params,
        boundaries_and_overlaps,
        alloc_failure_leaves_tree_unchanged,
        retirement_is_batched,
        #[slow] concurrent_lookups_never_miss,
    ],
}
