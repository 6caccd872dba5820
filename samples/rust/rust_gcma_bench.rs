// SPDX-License-Identifier: GPL-2.0

//! Benchmark of GCMA against CMA: latency of a contiguous allocation and
//! its release.
//!
//! Compiled inside the GCMA crate (`mm/gcma_rs/gcma.rs` includes it when
//! `CONFIG_SAMPLE_RUST_GCMA_BENCH` is set); the debugfs trigger and the
//! CMA calls are in `gcma_bench.c`.  Writing to `/sys/kernel/debug/gcma_bench`
//! runs it: for 64 to 32768 pages (powers of two), `reps` times each, it
//! times `cma_alloc()` + `cma_release()` on the default CMA area
//! (`reserved`, from `cma=`) and on the first GCMA area (`gcma0`, served by
//! GCMA through the CMA interface), alternating the two so that both see
//! the same memory pressure, and prints mean, median, 99th percentile and
//! maximum in microseconds, failures, and the CMA/GCMA ratio of the means.
//! It does so twice: at normal priority, where the program keeping memory
//! under pressure can preempt a call, and at `SCHED_FIFO`, where a call
//! runs until it sleeps.
//! Sizes larger than either area are skipped, so a failure always means an
//! allocation that should have fit.

use kernel::{
    c_str,
    ffi::{c_char, c_uint, c_ulong, c_void},
    prelude::*,
};

mod ffi {
    use super::*;

    extern "C" {
        pub(super) fn gcma_bench_cma(name: *const c_char) -> *mut c_void;
        pub(super) fn gcma_bench_cma_pages(cma: *mut c_void) -> c_ulong;
        pub(super) fn gcma_bench_alloc(cma: *mut c_void, count: c_ulong) -> *mut c_void;
        pub(super) fn gcma_bench_release(
            cma: *mut c_void,
            pages: *mut c_void,
            count: c_ulong,
        ) -> bool;
        pub(super) fn gcma_bench_now_ns() -> u64;
        pub(super) fn gcma_bench_ktime_ns() -> u64;
        pub(super) fn gcma_bench_pause();
        pub(super) fn gcma_bench_set_fifo();
    }
}

/// Smallest and largest request, in pages.
const MIN_PAGES: usize = 64;
const MAX_PAGES: usize = 32768;

/// Latencies of one area at one size.
struct Samples {
    ns: KVec<u64>,
    failures: usize,
}

/// Summary of [`Samples`], in nanoseconds.
struct Summary {
    mean: u64,
    median: u64,
    p99: u64,
    max: u64,
}

impl Samples {
    fn summary(&mut self) -> Option<Summary> {
        let n = self.ns.len();
        if n == 0 {
            return None;
        }
        self.ns.sort_unstable();
        let sum: u64 = self.ns.iter().sum();
        // Nearest-rank percentile: the ceil(0.99 n)-th smallest.
        let p99 = (n * 99).div_ceil(100).max(1) - 1;
        Some(Summary {
            mean: sum / n as u64,
            median: self.ns[n / 2],
            p99: self.ns[p99],
            max: self.ns[n - 1],
        })
    }
}

/// Times one allocation and release of `count` pages from `cma`.
fn time_one(cma: *mut c_void, count: usize, s: &mut Samples) -> Result {
    // SAFETY: FFI calls; `cma` is a CMA area found by name, and the pages
    // released are exactly those just allocated.
    unsafe {
        let t0 = ffi::gcma_bench_now_ns();
        let pages = ffi::gcma_bench_alloc(cma, count as c_ulong);
        if pages.is_null() {
            s.failures += 1;
            return Ok(());
        }
        ffi::gcma_bench_release(cma, pages, count as c_ulong);
        let t1 = ffi::gcma_bench_now_ns();
        s.ns.push(t1 - t0, GFP_KERNEL)?;
    }
    Ok(())
}

/// Microseconds with one decimal, for the table.
struct Us(u64);

impl core::fmt::Display for Us {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}.{}", self.0 / 1000, self.0 % 1000 / 100)
    }
}

fn find(name: &CStr) -> Option<(*mut c_void, usize)> {
    // SAFETY: FFI call with a NUL-terminated name.
    let cma = unsafe { ffi::gcma_bench_cma(name.as_char_ptr()) };
    if cma.is_null() {
        pr_err!("bench: no CMA area named {}\n", name);
        return None;
    }
    // SAFETY: `cma` is a CMA area.
    Some((cma, unsafe { ffi::gcma_bench_cma_pages(cma) } as usize))
}

/// Mean cost of one call of `clock`, in nanoseconds, over 1000 calls.
fn clock_cost(clock: unsafe extern "C" fn() -> u64) -> u64 {
    const CALLS: u64 = 1000;
    // SAFETY: the clocks are plain FFI calls without arguments.
    let (t0, t1) = unsafe {
        let t0 = ffi::gcma_bench_now_ns();
        for _ in 0..CALLS {
            clock();
        }
        (t0, ffi::gcma_bench_now_ns())
    };
    (t1 - t0) / CALLS
}

/// The table of pass `pass`: every size, `reps` times, both areas
/// alternately.  Returns the failures of CMA and of GCMA.
fn table(
    pass: usize,
    (cma, cma_pages): (*mut c_void, usize),
    (gcma, gcma_pages): (*mut c_void, usize),
    reps: usize,
) -> Result<(usize, usize)> {
    pr_info!(
        "bench: pass {}: pages | CMA mean median p99 max fail | GCMA mean median p99 max fail | CMA/GCMA mean\n",
        pass
    );
    let (mut cma_failed, mut gcma_failed) = (0, 0);
    let mut count = MIN_PAGES;
    while count <= MAX_PAGES {
        if count > cma_pages.min(gcma_pages) {
            // Neither area could be asked for more than it holds.
            pr_info!("bench: {:5} | skipped: larger than an area\n", count);
            count *= 2;
            continue;
        }
        let mut c = Samples {
            ns: KVec::with_capacity(reps, GFP_KERNEL)?,
            failures: 0,
        };
        let mut g = Samples {
            ns: KVec::with_capacity(reps, GFP_KERNEL)?,
            failures: 0,
        };
        for _ in 0..reps {
            time_one(cma, count, &mut c)?;
            time_one(gcma, count, &mut g)?;
            // SAFETY: FFI call from process context.
            unsafe { ffi::gcma_bench_pause() };
        }
        match (c.summary(), g.summary()) {
            (Some(cs), Some(gs)) => pr_info!(
                "bench: {:5} | {} {} {} {} {} | {} {} {} {} {} | {}.{:02}\n",
                count,
                Us(cs.mean),
                Us(cs.median),
                Us(cs.p99),
                Us(cs.max),
                c.failures,
                Us(gs.mean),
                Us(gs.median),
                Us(gs.p99),
                Us(gs.max),
                g.failures,
                cs.mean / gs.mean.max(1),
                cs.mean * 100 / gs.mean.max(1) % 100
            ),
            _ => pr_info!(
                "bench: {:5} | CMA {} of {} failed | GCMA {} of {} failed\n",
                count,
                c.failures,
                reps,
                g.failures,
                reps
            ),
        }
        cma_failed += c.failures;
        gcma_failed += g.failures;
        count *= 2;
    }
    Ok((cma_failed, gcma_failed))
}

fn run(reps: usize) -> Result {
    let (Some(cma), Some(gcma)) = (find(c_str!("reserved")), find(c_str!("gcma0"))) else {
        return Err(ENODEV);
    };
    pr_info!(
        "bench: alloc+release latency, us; CMA 'reserved' {} pages, GCMA 'gcma0' {} pages, {} runs per size\n",
        cma.1,
        gcma.1,
        reps
    );
    pr_info!(
        "bench: clock reads: local_clock {} ns (used), ktime_get_ns {} ns\n",
        clock_cost(ffi::gcma_bench_now_ns),
        clock_cost(ffi::gcma_bench_ktime_ns)
    );
    // First as any task would call, then with the pressure kept off the
    // CPU while a call runs: the first includes the time a call waits
    // for the CPU, the second is the allocators' own cost.
    pr_info!("bench: pass 1 of 2: normal priority, preemptible by the pressure program\n");
    let (c1, g1) = table(1, cma, gcma, reps)?;
    // SAFETY: FFI call from the benchmark's own kthread.
    unsafe { ffi::gcma_bench_set_fifo() };
    pr_info!("bench: pass 2 of 2: SCHED_FIFO, a timed call runs until it sleeps\n");
    let (c2, g2) = table(2, cma, gcma, reps)?;
    pr_info!(
        "bench: done: {} CMA and {} GCMA allocations failed\n",
        c1 + c2,
        g1 + g2
    );
    Ok(())
}

/// Entry point of the debugfs trigger in `gcma_bench.c`.
#[no_mangle]
pub(crate) extern "C" fn gcma_bench_run(reps: c_uint) {
    if let Err(e) = run(reps as usize) {
        pr_err!("bench: failed: {:?}\n", e);
    }
}
