// SPDX-License-Identifier: GPL-2.0

//! Benchmark of RCX, run once at boot (section 3.4.2 of the thesis).
//!
//! This file is a module of the RCX crate (`mm/rcx_rs/rcx.rs` includes it
//! with `#[path]` when `CONFIG_RCX_BENCH` is set), because a
//! built-in crate cannot be imported by another one.  Its C side,
//! `bench.c`, calls [`rcx_bench_run`] from a late initcall and
//! provides the kthread and sleep calls declared in [`ffi`].
//!
//! A table of `b` buckets holds `b * n` random keys from `[0, 2bn)`;
//! `T` threads (bound to CPUs 0 to `T - 1`, filling node 0 first) then run
//! lookups, inserts and removes of uniform random keys, inserts and removes
//! each at `u / 2` of the operations.  For a list (`b = 1`, `n = 256`) and
//! a hash table (`b = 128`, `n = 32`), `u` in 0, 2, 20 and 40%, and 1 to 4
//! threads, each line gives the operations per microsecond of RCX (global
//! locks at once when they are free, otherwise phase 1 on the CPU's path:
//! RTM or the fallback), of RCX with the emulated
//! transaction, and of the RCU baseline (one global spinlock for the list,
//! one per bucket for the hash table), with phase-1 aborts per 100 updates,
//! and the ratio of RCX to the baseline.  Each figure is the median of
//! [`REPEATS`] runs of [`RUN_MS`], the structures taking turns in an order
//! that rotates from round to round, after one warm-up run of each; the
//! ratio is the median of the rounds' own ratios, with the lowest and the
//! highest in parentheses.  Every
//! cell starts from fresh structures filled alike, and every run after the
//! RCU callbacks of the runs before it have run.  Every line is prefixed
//! with `rcx: bench: `.

use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use kernel::ffi::{c_int, c_uint, c_void};

use kernel::{delay::MaySleep, prelude::*, processor::cpu_relax, time::Ktime};

use crate::{
    baseline::{RcuHash, RcuList},
    hash::RcxHash,
    htm_available,
    list::RcxList,
    Mode,
};

/// Logs a line of the benchmark, with `bench: ` after the crate prefix.
macro_rules! out {
    (err: $fmt:literal $($arg:tt)*) => {
        pr_err!(concat!("bench: ", $fmt) $($arg)*)
    };
    ($fmt:literal $($arg:tt)*) => {
        pr_info!(concat!("bench: ", $fmt) $($arg)*)
    };
}

/// The C side, in `mm/rcx_rs/bench.c`.
mod ffi {
    pub(super) use kernel::bindings::{
        rcx_bench_cond_resched, rcx_bench_msleep, rcx_bench_online_cpus, rcx_bench_thread_join,
        rcx_bench_thread_start,
    };
}

/// How long each measurement runs.
const RUN_MS: u32 = 150;
/// Runs of each cell; the table gives the median.  A multiple of three,
/// so that each structure runs first, second and third equally often.
const REPEATS: usize = 6;
const _: () = assert!(REPEATS % 3 == 0);
/// Most worker threads.
const MAX_THREADS: usize = 4;
/// Update rates, in percent.
const RATES: [u64; 4] = [0, 2, 20, 40];

/// A structure under test.
trait Subject: Sync {
    fn lookup(&self, k: u64) -> bool;
    fn insert(&self, k: u64) -> bool;
    fn remove(&self, k: u64) -> bool;
    /// Phase-1 aborts so far.
    fn aborts(&self) -> u64;
}

impl Subject for RcxList {
    fn lookup(&self, k: u64) -> bool {
        self.contains(k)
    }
    fn insert(&self, k: u64) -> bool {
        RcxList::insert(self, k, ()).unwrap_or(false)
    }
    fn remove(&self, k: u64) -> bool {
        RcxList::remove(self, k)
    }
    fn aborts(&self) -> u64 {
        self.stats().aborts()
    }
}

impl Subject for RcxHash {
    fn lookup(&self, k: u64) -> bool {
        self.contains(k)
    }
    fn insert(&self, k: u64) -> bool {
        RcxHash::insert(self, k, ()).unwrap_or(false)
    }
    fn remove(&self, k: u64) -> bool {
        RcxHash::remove(self, k)
    }
    fn aborts(&self) -> u64 {
        self.stats().aborts()
    }
}

impl Subject for RcuList {
    fn lookup(&self, k: u64) -> bool {
        self.contains(k)
    }
    fn insert(&self, k: u64) -> bool {
        RcuList::insert(self, k).unwrap_or(false)
    }
    fn remove(&self, k: u64) -> bool {
        RcuList::remove(self, k)
    }
    fn aborts(&self) -> u64 {
        0
    }
}

impl Subject for RcuHash {
    fn lookup(&self, k: u64) -> bool {
        self.contains(k)
    }
    fn insert(&self, k: u64) -> bool {
        RcuHash::insert(self, k).unwrap_or(false)
    }
    fn remove(&self, k: u64) -> bool {
        RcuHash::remove(self, k)
    }
    fn aborts(&self) -> u64 {
        0
    }
}

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// What the workers of one measurement share.
struct Run<'a> {
    subject: &'a dyn Subject,
    keys: u64,
    rate: u64,
    /// Workers ready; they start together when `go` is set.
    ready: AtomicUsize,
    go: AtomicBool,
    stop: AtomicBool,
    ops: AtomicU64,
    updates: AtomicU64,
}

/// A worker's argument.
struct Worker<'a> {
    run: &'a Run<'a>,
    seed: u64,
}

/// A worker thread: random operations until told to stop.
///
/// # Safety
///
/// `arg` points to a `Worker` that outlives the thread (`measure` joins
/// its threads before returning).
unsafe extern "C" fn worker_main(arg: *mut c_void) -> c_int {
    // SAFETY: by the function's safety requirement.
    let w = unsafe { &*(arg as *const Worker<'_>) };
    let r = w.run;
    let mut rng = Rng(w.seed);
    r.ready.fetch_add(1, Ordering::AcqRel);
    while !r.go.load(Ordering::Acquire) {
        // The starter needs a CPU too, and the kernel may not preempt.
        // SAFETY: no precondition.
        unsafe { ffi::rcx_bench_cond_resched() };
        cpu_relax();
    }
    let (mut ops, mut updates) = (0u64, 0u64);
    while !r.stop.load(Ordering::Relaxed) {
        for _ in 0..64 {
            let x = rng.next();
            let k = (x >> 8) % r.keys;
            // Percent from the low byte, nearly uniform.
            let p = (x & 0xff) * 100 / 256;
            if p < r.rate {
                if p % 2 == 0 {
                    r.subject.insert(k);
                } else {
                    r.subject.remove(k);
                }
                updates += 1;
            } else {
                r.subject.lookup(k);
            }
            ops += 1;
        }
        // SAFETY: no precondition.
        unsafe { ffi::rcx_bench_cond_resched() };
    }
    r.ops.fetch_add(ops, Ordering::Relaxed);
    r.updates.fetch_add(updates, Ordering::Relaxed);
    0
}

/// One measurement: operations per microsecond (in hundredths) and aborts
/// per 100 updates (in hundredths).
fn measure(
    ctx: &MaySleep,
    subject: &dyn Subject,
    keys: u64,
    rate: u64,
    threads: usize,
) -> Result<(u64, u64)> {
    // The items that the runs before removed are freed by RCU callbacks,
    // which run on the CPUs that queued them, the workers' CPUs: without
    // this, a run would pay for the removals of the structure before it.
    kernel::sync::rcu::barrier(ctx);
    let run = Run {
        subject,
        keys,
        rate,
        ready: AtomicUsize::new(0),
        go: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        ops: AtomicU64::new(0),
        updates: AtomicU64::new(0),
    };
    let workers: [Worker<'_>; MAX_THREADS] = core::array::from_fn(|i| Worker {
        run: &run,
        seed: 0x9e37_79b9 + 7919 * i as u64 + rate * 104_729 + threads as u64,
    });
    let mut tasks = [core::ptr::null_mut::<c_void>(); MAX_THREADS];
    let mut started = 0;
    for (i, task) in tasks.iter_mut().enumerate().take(threads) {
        // SAFETY: `workers[i]` outlives the thread: it is joined below.
        *task = unsafe {
            ffi::rcx_bench_thread_start(
                Some(worker_main),
                &workers[i] as *const Worker<'_> as *mut c_void,
                i as c_uint,
            )
        };
        if task.is_null() {
            break;
        }
        started += 1;
    }
    let aborts0 = subject.aborts();
    let mut ns = 0;
    if started == threads {
        while run.ready.load(Ordering::Acquire) < threads {
            // SAFETY: no precondition.
            unsafe { ffi::rcx_bench_msleep(1) };
        }
        let t0 = Ktime::ktime_get();
        run.go.store(true, Ordering::Release);
        // SAFETY: no precondition.
        unsafe { ffi::rcx_bench_msleep(RUN_MS) };
        run.stop.store(true, Ordering::Relaxed);
        ns = (Ktime::ktime_get() - t0).to_ns();
    } else {
        // Release the workers that started, so they can be joined.
        run.stop.store(true, Ordering::Relaxed);
        run.go.store(true, Ordering::Release);
    }
    for task in tasks.iter().take(started) {
        // SAFETY: a task returned by `rcx_bench_thread_start`, joined once.
        unsafe { ffi::rcx_bench_thread_join(*task) };
    }
    if started < threads {
        return Err(ENOMEM);
    }
    let ops = run.ops.load(Ordering::Relaxed);
    let updates = run.updates.load(Ordering::Relaxed);
    let aborts = subject.aborts() - aborts0;
    let per_us = ops * 100_000 / (ns.max(1) as u64);
    let abort_rate = (aborts * 10_000).checked_div(updates).unwrap_or(0);
    Ok((per_us, abort_rate))
}

/// Fills the structures of `set` with the same `count` distinct random
/// keys from `[0, 2 * count)`, key by key, the structure that gets a key
/// first taking turns: each draws its items from the same slab pages as
/// the others, so that none walks items more scattered than theirs.
fn fill(set: [&dyn Subject; 3], count: u64, seed: u64) {
    let mut rng = Rng(seed);
    let mut n = 0;
    while n < count {
        let k = rng.next() % (2 * count);
        let first = (n % 3) as usize;
        let mut new = false;
        for i in 0..3 {
            new |= set[(first + i) % 3].insert(k);
        }
        if new {
            n += 1;
        }
    }
}

/// A fixed-point number in hundredths, printed as `x.yy`.
struct Fx(u64);

impl core::fmt::Display for Fx {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}.{:02}", self.0 / 100, self.0 % 100)
    }
}

/// The three structures of a cell: RCX, RCX with the emulated
/// transaction, and the RCU baseline.
type Set<R, B> = (R, R, B);

/// One table: `b` buckets of `n` keys, the three structures, every rate
/// and thread count.
///
/// Each cell measures structures of its own, built by `make`, filled with
/// the same keys in turns (see [`fill`]) and checked by `check`
/// afterwards, so that no structure brings into a cell the item placement
/// its updates left in the cells before (RCX goes on updating at four
/// threads where the baseline's lock holders stall).  The structures run
/// in turns whose order rotates from round to round: with a fixed order,
/// RCX and RCX-emu, whose lookups are the same code, differed by up to
/// 2.3x on read-only cells of one boot, the first in the round ahead.
fn table<R: Subject, B: Subject>(
    ctx: &MaySleep,
    name: &str,
    b: usize,
    n: u64,
    make: impl Fn() -> Result<Set<R, B>>,
    check: impl Fn(&R) -> Result,
    threads: usize,
) -> Result {
    let keys = 2 * b as u64 * n;
    out!(
        "{}: b={} n={} keys [0, {}); ops/us, aborts per 100 updates in ()\n",
        name,
        b,
        n,
        keys
    );
    out!("  u%  thr        rcx       rcx-emu           rcu   rcu-htm  rcx/rcu (runs)\n");
    // A first run of each structure translates and caches its code, which
    // under TCG made whichever cell came first up to a quarter slower.
    {
        let (rcx, emu, rcu) = make()?;
        let set: [&dyn Subject; 3] = [&rcx, &emu, &rcu];
        fill(set, b as u64 * n, 0xfeed_beef);
        for s in set {
            measure(ctx, s, keys, RATES[RATES.len() - 1], 1)?;
        }
    }
    for rate in RATES {
        for t in 1..=threads {
            let (rcx, emu, rcu) = make()?;
            let set: [&dyn Subject; 3] = [&rcx, &emu, &rcu];
            fill(set, b as u64 * n, 0xfeed_beef);
            // The structures take turns, and each cell is the median of
            // its runs: a host hiccup costs one run, not the ratio.
            let mut rounds = [[(0, 0); 3]; REPEATS];
            for (i, round) in rounds.iter_mut().enumerate() {
                for j in 0..3 {
                    let k = (i + j) % 3;
                    round[k] = measure(ctx, set[k], keys, rate, t)?;
                }
            }
            check(&rcx)?;
            check(&emu)?;
            let [(a, aa), (e, ea), (r, _)]: [(u64, u64); 3] =
                core::array::from_fn(|j| median(core::array::from_fn(|i| rounds[i][j])));
            // RCX over the baseline round by round: the two ran within a
            // few hundred milliseconds of each other, so the host's drift
            // (tens of percent within seconds under TCG on a busy host)
            // mostly falls on both; the spread shows what is left.
            let mut ratios: [u64; REPEATS] = core::array::from_fn(|i| {
                (rounds[i][0].0 * 100)
                    .checked_div(rounds[i][2].0)
                    .unwrap_or(0)
            });
            ratios.sort_unstable();
            out!(
                "  {:>2}  {:>3}  {:>6} ({:>5})  {:>6} ({:>5})  {:>6}      n/a  {:>7} ({}-{})\n",
                rate,
                t,
                Fx(a).to_string_lossy(),
                Fx(aa).to_string_lossy(),
                Fx(e).to_string_lossy(),
                Fx(ea).to_string_lossy(),
                Fx(r).to_string_lossy(),
                Fx(ratios[REPEATS / 2]).to_string_lossy(),
                Fx(ratios[0]),
                Fx(ratios[REPEATS - 1])
            );
        }
    }
    Ok(())
}

/// Returns the run with the median rate among `runs` (sorted by rate).
fn median(mut runs: [(u64, u64); REPEATS]) -> (u64, u64) {
    runs.sort_unstable_by_key(|r| r.0);
    runs[REPEATS / 2]
}

/// Formats into a small stack buffer, for padded columns.
trait Lossy {
    fn to_string_lossy(&self) -> Small;
}

/// A short string on the stack.
struct Small {
    buf: [u8; 24],
    len: usize,
}

impl core::fmt::Write for Small {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let end = self.len + s.len();
        if end > self.buf.len() {
            return Err(core::fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

impl core::fmt::Display for Small {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Only whole `str`s were written.
        f.pad(core::str::from_utf8(&self.buf[..self.len]).unwrap_or("?"))
    }
}

impl Lossy for Fx {
    fn to_string_lossy(&self) -> Small {
        let mut s = Small {
            buf: [0; 24],
            len: 0,
        };
        let _ = core::fmt::write(&mut s, format_args!("{}", self));
        s
    }
}

fn run_all(ctx: &MaySleep) -> Result {
    // SAFETY: no precondition.
    let cpus = unsafe { ffi::rcx_bench_online_cpus() } as usize;
    let threads = cpus.clamp(1, MAX_THREADS);
    let path = RcxList::<()>::new(Mode::Auto)?.path_name();
    out!(
        "{} cpus, {} nodes; rcx phase 1: {}; rcu-htm: {}\n",
        cpus,
        kernel::mm::numa::online_nodes(),
        path,
        if htm_available() {
            "not implemented"
        } else {
            "unavailable (no RTM)"
        }
    );
    out!("rcx-emu: RCX with the emulated transaction; rcu: RCU with spinlocked updaters\n");
    let emu = Mode::Emulated { abort_one_in: 0 };
    table(
        ctx,
        "list",
        1,
        256,
        || {
            Ok((
                RcxList::new(Mode::Auto)?,
                RcxList::new(emu)?,
                RcuList::new()?,
            ))
        },
        |l: &RcxList| l.check().map(|_| ()),
        threads,
    )?;
    table(
        ctx,
        "hash",
        128,
        32,
        || {
            Ok((
                RcxHash::new(Mode::Auto, 128)?,
                RcxHash::new(emu, 128)?,
                RcuHash::new(128)?,
            ))
        },
        |h: &RcxHash| h.check().map(|_| ()),
        threads,
    )?;
    kernel::sync::rcu::barrier(ctx);
    out!("done\n");
    Ok(())
}

/// Runs the benchmark; called once at boot by `bench.c`.
#[no_mangle]
extern "C" fn rcx_bench_run() {
    // SAFETY: called by the late initcall of `bench.c`: process
    // context, no atomic section active.
    let ctx = unsafe { MaySleep::new() };
    if let Err(e) = run_all(&ctx) {
        out!(err: "failed: {:?}\n", e);
    }
}
