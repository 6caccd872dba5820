// SPDX-License-Identifier: GPL-2.0

//! Table 2 of the benchmark: lookups per second per reader next to a
//! writer with a duty cycle, for Bonsai, the rbtree under an `rwlock_t`
//! and the maple tree in RCU mode.

use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use kernel::ffi::{c_int, c_uint, c_ulong, c_void};

use kernel::{delay::MaySleep, prelude::*, processor::cpu_relax, sync::rcu};

use super::{cond_resched, ffi, msleep, now_ns, online_cpus, Fixed2, Rng, PAGE};
use crate::RangeTree;

/// Ranges that stay in the tree; readers look up addresses inside them.
const NR_RANGES: u64 = 1000;
/// Lowest address used.
const BASE: usize = 0x1_0000_0000;
/// Distance between two slots; permanent ranges take the even slots, the
/// writer inserts and removes ranges in the odd ones.
const STRIDE: usize = 16 * PAGE;
/// Length of every range.
const LEN: usize = 4 * PAGE;
/// Length of one measured cell, in milliseconds.
const CELL_MS: u32 = 150;
/// Rounds of every cell; the median one is reported.
const ROUNDS: usize = 5;
/// Length of the writer's duty-cycle slot, in nanoseconds.
const SLOT_NS: i64 = 1_000_000;
/// Writer duty cycles measured, in percent.
const DUTIES: [u32; 4] = [0, 10, 50, 100];
/// Order of the duties within a round (indices into [`DUTIES`]): read-only
/// next to full duty, whose lookup rates are compared round by round.
const ROUND_ORDER: [usize; 4] = [0, 3, 1, 2];
/// Fixed-point one of the duty ratios.
const RATIO_ONE: u64 = 10_000;
/// Most reader threads measured.
const MAX_READERS: usize = 7;

fn slot_start(slot: usize) -> usize {
    BASE + slot * STRIDE
}

/// A structure under test: ranges with non-zero `usize` values.
trait Subject: Sync {
    /// The value of the range containing `addr`, or 0 (`ctx` for
    /// structures whose lookups take a read-side token).
    fn lookup(&self, ctx: &mut MaySleep, addr: usize) -> usize;
    /// Inserts `[start, end)`; false on failure.
    fn insert(&self, start: usize, end: usize, value: usize) -> bool;
    /// Removes the range starting at `start`; false on failure.
    fn remove(&self, start: usize) -> bool;
}

impl Subject for RangeTree<usize> {
    #[inline]
    fn lookup(&self, ctx: &mut MaySleep, addr: usize) -> usize {
        self.with_range(ctx, addr, |e| *e.value).unwrap_or(0)
    }

    fn insert(&self, start: usize, end: usize, value: usize) -> bool {
        RangeTree::insert(self, start, end, value).is_ok()
    }

    fn remove(&self, start: usize) -> bool {
        RangeTree::remove(self, start).is_ok()
    }
}

/// The C calls of one baseline structure `T`.
struct COps<T> {
    new: unsafe extern "C" fn() -> *mut T,
    free: unsafe extern "C" fn(*mut T),
    lookup: unsafe extern "C" fn(*mut T, c_ulong) -> c_ulong,
    insert: unsafe extern "C" fn(*mut T, c_ulong, c_ulong, c_ulong) -> c_int,
    remove: unsafe extern "C" fn(*mut T, c_ulong) -> c_int,
}

/// A baseline of the C side.  Its calls are a constant, so that each
/// [`CTree`] calls them directly, as the Bonsai tree's are called.
trait Baseline: 'static {
    type Raw;
    const OPS: COps<Self::Raw>;
}

/// The rbtree under an `rwlock_t`.
struct Rb;

impl Baseline for Rb {
    type Raw = ffi::RbTree;
    const OPS: COps<ffi::RbTree> = COps {
        new: ffi::bonsai_bench_rb_new,
        free: ffi::bonsai_bench_rb_free,
        lookup: ffi::bonsai_bench_rb_lookup,
        insert: ffi::bonsai_bench_rb_insert,
        remove: ffi::bonsai_bench_rb_remove,
    };
}

/// The maple tree in RCU mode.
struct Maple;

impl Baseline for Maple {
    type Raw = ffi::MapleTree;
    const OPS: COps<ffi::MapleTree> = COps {
        new: ffi::bonsai_bench_mt_new,
        free: ffi::bonsai_bench_mt_free,
        lookup: ffi::bonsai_bench_mt_lookup,
        insert: ffi::bonsai_bench_mt_insert,
        remove: ffi::bonsai_bench_mt_remove,
    };
}

/// A structure of baseline `B`.
///
/// # Invariants
///
/// `0` came from `B::OPS.new` and is freed only on drop.
struct CTree<B: Baseline>(NonNull<B::Raw>);

// SAFETY: the C functions may be called from any thread and synchronise
// internally: the rbtree's rwlock serialises writers against readers; the
// maple tree's lookups run under RCU and its updates take its own lock.
unsafe impl<B: Baseline> Sync for CTree<B> {}

impl<B: Baseline> CTree<B> {
    fn new() -> Result<Self> {
        // SAFETY: the constructors have no preconditions.
        let t = unsafe { (B::OPS.new)() };
        // INVARIANT: a non-null result is a fresh structure.
        NonNull::new(t).map(Self).ok_or(ENOMEM)
    }
}

impl<B: Baseline> Drop for CTree<B> {
    fn drop(&mut self) {
        // SAFETY: by the type invariant; `&mut self` means no user is left.
        unsafe { (B::OPS.free)(self.0.as_ptr()) };
    }
}

impl<B: Baseline> Subject for CTree<B> {
    fn lookup(&self, _ctx: &mut MaySleep, addr: usize) -> usize {
        // SAFETY: by the type invariant the structure is live.
        unsafe { (B::OPS.lookup)(self.0.as_ptr(), addr as c_ulong) }
    }

    fn insert(&self, start: usize, end: usize, value: usize) -> bool {
        // SAFETY: by the type invariant the structure is live.
        let r = unsafe {
            (B::OPS.insert)(
                self.0.as_ptr(),
                start as c_ulong,
                end as c_ulong,
                value as c_ulong,
            )
        };
        r == 0
    }

    fn remove(&self, start: usize) -> bool {
        // SAFETY: by the type invariant the structure is live.
        unsafe { (B::OPS.remove)(self.0.as_ptr(), start as c_ulong) == 0 }
    }
}

/// State shared by the threads of one cell.
struct Run<'a, S> {
    subject: &'a S,
    duty: u32,
    seed: u64,
    /// Threads that have started.
    started: AtomicUsize,
    /// Index the next reader takes in `lookups`.
    next_reader: AtomicUsize,
    go: AtomicBool,
    stop: AtomicBool,
    /// Lookups done by each reader.
    lookups: [AtomicU64; MAX_READERS],
    /// Lookups that did not find the expected range (must stay 0).
    wrong: AtomicU64,
    /// Writer operations (inserts and removes) done, and failed.
    writes: AtomicU64,
    write_failures: AtomicU64,
    /// Time the writer spent working, in nanoseconds.
    busy_ns: AtomicU64,
}

/// Waits for the start signal; false if the cell was called off.
fn wait_go<S>(ctx: &MaySleep, run: &Run<'_, S>) -> bool {
    while !run.go.load(Ordering::Acquire) {
        if run.stop.load(Ordering::Acquire) {
            return false;
        }
        cpu_relax();
        // Without preemption, let the coordinator and RCU run here.
        cond_resched(ctx);
    }
    true
}

/// Reader thread: looks up addresses inside the permanent ranges until
/// told to stop, checking that each lookup finds its range.
///
/// # Safety
///
/// `arg` points to a [`Run`] that outlives the thread.
unsafe extern "C" fn reader_main<S: Subject>(arg: *mut c_void) -> c_int {
    // SAFETY: the body of a kthread: process context, no atomic section
    // active.
    let mut ctx = unsafe { MaySleep::new() };
    // SAFETY: per the function's contract.
    let run = unsafe { &*arg.cast::<Run<'_, S>>() };
    let idx = run.next_reader.fetch_add(1, Ordering::Relaxed);
    run.started.fetch_add(1, Ordering::AcqRel);
    if !wait_go(&ctx, run) {
        return 0;
    }
    let mut rng = Rng::new(run.seed ^ ((idx as u64 + 1) << 32));
    let (mut n, mut wrong) = (0u64, 0u64);
    while !run.stop.load(Ordering::Relaxed) {
        for _ in 0..64 {
            let r = rng.next();
            let slot = 2 * (((r & 0xffff_ffff) * NR_RANGES) >> 32) as usize;
            let addr = slot_start(slot) + (r >> 32) as usize % LEN;
            if run.subject.lookup(&mut ctx, addr) != slot + 1 {
                wrong += 1;
            }
        }
        n += 64;
        cond_resched(&ctx);
    }
    run.lookups[idx].store(n, Ordering::Relaxed);
    run.wrong.fetch_add(wrong, Ordering::Relaxed);
    0
}

/// Writer thread: in every 1 ms slot, inserts and removes a range in a
/// random odd slot for `duty` percent of the slot, then idles.
///
/// # Safety
///
/// `arg` points to a [`Run`] that outlives the thread.
unsafe extern "C" fn writer_main<S: Subject>(arg: *mut c_void) -> c_int {
    // SAFETY: the body of a kthread: process context, no atomic section
    // active.
    let ctx = unsafe { MaySleep::new() };
    // SAFETY: per the function's contract.
    let run = unsafe { &*arg.cast::<Run<'_, S>>() };
    run.started.fetch_add(1, Ordering::AcqRel);
    if !wait_go(&ctx, run) {
        return 0;
    }
    let mut rng = Rng::new(run.seed ^ 0x5752_4954);
    let busy_target = SLOT_NS * i64::from(run.duty) / 100;
    let (mut ops, mut failures, mut busy) = (0u64, 0u64, 0i64);
    while !run.stop.load(Ordering::Relaxed) {
        let slot_begin = now_ns();
        let mut t = slot_begin;
        while t - slot_begin < busy_target && !run.stop.load(Ordering::Relaxed) {
            let slot = 2 * rng.below(NR_RANGES) as usize + 1;
            let start = slot_start(slot);
            if !run.subject.insert(start, start + LEN, slot + 1) {
                failures += 1;
            }
            if !run.subject.remove(start) {
                failures += 1;
            }
            ops += 2;
            cond_resched(&ctx);
            t = now_ns();
        }
        busy += t - slot_begin;
        // Idle by spinning, as a writer CPU of its own would, so that the
        // readers' share of the host is the same at every duty cycle (and
        // a sleep's overshoot does not shorten the duty).
        while now_ns() - slot_begin < SLOT_NS && !run.stop.load(Ordering::Relaxed) {
            cpu_relax();
            cond_resched(&ctx);
        }
    }
    run.writes.store(ops, Ordering::Relaxed);
    run.write_failures.store(failures, Ordering::Relaxed);
    run.busy_ns.store(busy as u64, Ordering::Relaxed);
    0
}

/// A kthread started by [`Thread::start`], joined when dropped.
///
/// # Invariants
///
/// `0` is a task from `bonsai_bench_thread_start()`, not yet joined.
struct Thread(NonNull<c_void>);

impl Thread {
    /// Starts `f(arg)` on `cpu`.
    ///
    /// # Safety
    ///
    /// `f` may be called with `arg` on another CPU until the returned
    /// thread is dropped.
    unsafe fn start(
        f: unsafe extern "C" fn(*mut c_void) -> c_int,
        arg: *mut c_void,
        cpu: u32,
    ) -> Result<Self> {
        // SAFETY: per the function's contract `arg` suits `f`.
        let t = unsafe { ffi::bonsai_bench_thread_start(Some(f), arg, cpu as c_uint) };
        // INVARIANT: a non-null result is a started, unjoined task.
        NonNull::new(t).map(Self).ok_or(ENOMEM)
    }
}

impl Drop for Thread {
    fn drop(&mut self) {
        // SAFETY: by the type invariant the task is started and unjoined;
        // it is joined once, here.
        unsafe { ffi::bonsai_bench_thread_join(self.0.as_ptr()) };
    }
}

/// Result of one cell.
#[derive(Clone, Copy, Default)]
struct Cell {
    /// Mean lookups per second per reader.
    lookups: u64,
    /// Writer operations per second.
    writes: u64,
    /// Share of the time the writer actually worked, in percent.
    busy_pct: u64,
    wrong: u64,
    write_failures: u64,
}

/// Runs one cell: `readers` reader threads on CPUs 1.. and the writer on
/// CPU 0, for [`CELL_MS`].
fn run_cell<S: Subject>(
    ctx: &MaySleep,
    subject: &S,
    readers: usize,
    duty: u32,
    seed: u64,
) -> Result<Cell> {
    let ncpus = online_cpus();
    let run = Run {
        subject,
        duty,
        seed,
        started: AtomicUsize::new(0),
        next_reader: AtomicUsize::new(0),
        go: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        lookups: Default::default(),
        wrong: AtomicU64::new(0),
        writes: AtomicU64::new(0),
        write_failures: AtomicU64::new(0),
        busy_ns: AtomicU64::new(0),
    };
    let arg = (&run as *const Run<'_, S>).cast_mut().cast::<c_void>();
    let mut threads = KVec::with_capacity(readers + 1, GFP_KERNEL)?;
    let mut spawn = |f: unsafe extern "C" fn(*mut c_void) -> c_int, cpu: u32| -> Result {
        // SAFETY: `run` outlives `threads`, whose drop below joins every
        // thread before `run` goes out of scope; `f` takes a `Run<S>`.
        let t = unsafe { Thread::start(f, arg, cpu)? };
        threads.push(t, GFP_KERNEL)?;
        Ok(())
    };
    let mut res = spawn(writer_main::<S>, 0);
    for i in 0..readers {
        if res.is_ok() {
            res = spawn(reader_main::<S>, (1 + i as u32) % ncpus);
        }
    }
    let window = res.map(|()| {
        // Wait (up to 10 s) for every thread to be ready.
        let mut waited = 0;
        while run.started.load(Ordering::Acquire) < readers + 1 && waited < 10_000 {
            msleep(ctx, 1);
            waited += 1;
        }
        let t0 = now_ns();
        run.go.store(true, Ordering::Release);
        msleep(ctx, CELL_MS);
        run.stop.store(true, Ordering::Release);
        (t0, now_ns())
    });
    // Calls the cell off if a thread failed to start.
    run.stop.store(true, Ordering::Release);
    drop(threads);
    let (t0, t1) = window?;
    let secs_ns = (t1 - t0).max(1) as u64;
    let total: u64 = run.lookups.iter().map(|c| c.load(Ordering::Relaxed)).sum();
    let per_sec = |n: u64| n.saturating_mul(1_000_000_000) / secs_ns;
    Ok(Cell {
        lookups: per_sec(total) / readers as u64,
        writes: per_sec(run.writes.load(Ordering::Relaxed)),
        busy_pct: run.busy_ns.load(Ordering::Relaxed) * 100 / secs_ns,
        wrong: run.wrong.load(Ordering::Relaxed),
        write_failures: run.write_failures.load(Ordering::Relaxed),
    })
}

/// Structures measured, in table order.
const NAMES: [&str; 3] = ["bonsai", "rbtree", "maple"];

type Cells = [[[Cell; DUTIES.len()]; MAX_READERS]; NAMES.len()];
/// The cells of every round of one reader count, by round, duty, structure.
type Rounds = [[[Cell; NAMES.len()]; DUTIES.len()]; ROUNDS];

/// Inserts the permanent ranges into `subject`, in `order`.
fn fill<S: Subject>(subject: &S, order: &[u32]) -> Result {
    for &k in order {
        let slot = 2 * k as usize;
        if !subject.insert(slot_start(slot), slot_start(slot) + LEN, slot + 1) {
            out!(err: "filling a tree failed at range {}\n", k);
            return Err(EINVAL);
        }
    }
    Ok(())
}

/// The round with the median lookup rate, with the errors of all rounds.
fn median(rounds: &mut [Cell; ROUNDS]) -> Cell {
    rounds.sort_unstable_by_key(|c| c.lookups);
    let mut m = rounds[ROUNDS / 2];
    m.wrong = rounds.iter().map(|c| c.wrong).sum();
    m.write_failures = rounds.iter().map(|c| c.write_failures).sum();
    m
}

fn ratio(a: u64, b: u64) -> Fixed2 {
    Fixed2(a, b)
}

pub(super) fn rate_table(ctx: &MaySleep) -> Result {
    let ncpus = online_cpus() as usize;
    let max_readers = ncpus.saturating_sub(1).clamp(1, MAX_READERS);
    // One random insertion order of the permanent ranges for all three.
    let mut order = KVec::with_capacity(NR_RANGES as usize, GFP_KERNEL)?;
    for k in 0..NR_RANGES as u32 {
        order.push(k, GFP_KERNEL)?;
    }
    let mut rng = Rng::new(42);
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let mut cells: KBox<Cells> = KBox::new(Default::default(), GFP_KERNEL)?;
    let mut rounds: KBox<Rounds> = KBox::new(Default::default(), GFP_KERNEL)?;
    // Lookups at full duty over read-only, in RATIO_ONE units, per structure
    // and reader count: the rounds' own ratios, sorted.
    let mut full_duty = [[[0u64; ROUNDS]; MAX_READERS]; NAMES.len()];

    let start = now_ns();
    let bonsai = KBox::pin_init(RangeTree::<usize>::new(), GFP_KERNEL)?;
    if let Err(e) = bonsai.as_ref().debugfs_register(kernel::c_str!("bench")) {
        pr_warn!("bench: no debugfs view of the tree: {:?}\n", e);
    }
    let rbtree = CTree::<Rb>::new()?;
    let maple = CTree::<Maple>::new()?;
    fill(&*bonsai, &order)?;
    fill(&rbtree, &order)?;
    fill(&maple, &order)?;
    // The three structures take turns in every cell, and every round runs
    // every duty, so that drift in what the host gives the guest (under
    // TCG, on a loaded host, it moves by tens of percent within seconds)
    // hits the structures and the duties alike.  The full-duty ratio pairs
    // the two cells of one round, taken a few hundred milliseconds apart.
    let last = DUTIES.len() - 1;
    for r in 1..=max_readers {
        for (i, round) in rounds.iter_mut().enumerate() {
            for d in ROUND_ORDER {
                let duty = DUTIES[d];
                let seed = ((r as u64) << 16) | (u64::from(duty) << 8) | i as u64;
                round[d][0] = run_cell(ctx, &*bonsai, r, duty, seed)?;
                round[d][1] = run_cell(ctx, &rbtree, r, duty, seed)?;
                round[d][2] = run_cell(ctx, &maple, r, duty, seed)?;
            }
        }
        for (s, out) in cells.iter_mut().enumerate() {
            for (d, cell) in out[r - 1].iter_mut().enumerate() {
                *cell = median(&mut core::array::from_fn(|i| rounds[i][d][s]));
            }
            let mut ratios: [u64; ROUNDS] = core::array::from_fn(|i| {
                let (busy, idle) = (rounds[i][last][s].lookups, rounds[i][0][s].lookups);
                busy.saturating_mul(RATIO_ONE) / idle.max(1)
            });
            ratios.sort_unstable();
            full_duty[s][r - 1] = ratios;
        }
    }
    let secs = (now_ns() - start) / 1_000_000_000;
    // Every reader is gone; wait out any straggling grace period anyway.
    rcu::synchronize_rcu(ctx);
    bonsai.flush(ctx);
    // The benchmark runs once, at boot.  Its Bonsai tree (about 1,000
    // ranges) is kept for the life of the system so that its counters stay
    // readable in /sys/kernel/debug/bonsai/bench/stats.
    core::mem::forget(bonsai);

    out!(
        "Isolated-VM microbenchmark: {} ranges, {} CPUs, writer on CPU 0, median of {} rounds of {} ms ({} s)\n",
        NR_RANGES,
        ncpus,
        ROUNDS,
        CELL_MS,
        secs
    );
    out!(
        "{:>2} {:>4} | {:>9} {:>9} {:>9} | {:>7} {:>7} {:>7} | {:>8} {:>8} | {:>11}\n",
        "R",
        "duty",
        "bonsai",
        "rbtree",
        "maple",
        "bonsai",
        "rbtree",
        "maple",
        "bon/mapl",
        "bon/rb",
        "writer busy"
    );
    out!(
        "{:>2} {:>4} | {:>29} | {:>23} | {:>17} | {:>11}\n",
        "",
        "%",
        "lookups/s per reader",
        "writer ops/s",
        "lookup ratio",
        "% b/r/m"
    );
    let mut wrong = 0;
    let mut failures = 0;
    for r in 0..max_readers {
        for (d, &duty) in DUTIES.iter().enumerate() {
            let [b, rb, mt] = [cells[0][r][d], cells[1][r][d], cells[2][r][d]];
            for c in [b, rb, mt] {
                wrong += c.wrong;
                failures += c.write_failures;
            }
            out!(
                "{:>2} {:>4} | {:>9} {:>9} {:>9} | {:>7} {:>7} {:>7} | {:>8} {:>8} | {:>3} {:>3} {:>3}\n",
                r + 1,
                duty,
                b.lookups,
                rb.lookups,
                mt.lookups,
                b.writes,
                rb.writes,
                mt.writes,
                ratio(b.lookups, mt.lookups),
                ratio(b.lookups, rb.lookups),
                b.busy_pct,
                rb.busy_pct,
                mt.busy_pct
            );
        }
    }
    out!(
        "Lookups at {}% duty / read-only: median of the rounds' own ratios (lowest-highest)\n",
        DUTIES[last]
    );
    for r in 0..max_readers {
        // Median, lowest and highest of a structure's ratios at `r + 1` readers.
        let spread = |by_readers: &[[u64; ROUNDS]; MAX_READERS]| {
            let (x, one) = (&by_readers[r], |v| ratio(v, RATIO_ONE));
            (one(x[ROUNDS / 2]), one(x[0]), one(x[ROUNDS - 1]))
        };
        let [(b0, b1, b2), (r0, r1, r2), (m0, m1, m2)] = full_duty.each_ref().map(spread);
        out!(
            "R={}: bonsai {} ({}-{}), rbtree {} ({}-{}), maple {} ({}-{})\n",
            r + 1,
            b0,
            b1,
            b2,
            r0,
            r1,
            r2,
            m0,
            m1,
            m2
        );
    }
    if wrong > 0 || failures > 0 {
        out!(err:
            "{} lookups missed a present range, {} writer operations failed\n",
            wrong,
            failures
        );
        return Err(EINVAL);
    }
    out!("every lookup found its range; every writer operation succeeded\n");
    Ok(())
}
