// SPDX-License-Identifier: GPL-2.0

//! Benchmark of GCMA against CMA: latency of a contiguous allocation and
//! of its release, with the GCMA area lent to its secondary client.
//!
//! Compiled inside the GCMA crate (`mm/gcma_rs/gcma.rs` includes it when
//! `CONFIG_GCMA_BENCH` is set); the debugfs trigger and the
//! CMA calls are in `bench.c`.  Writing to `/sys/kernel/debug/gcma_bench`
//! runs it: for 64 to 32768 pages (powers of two), `reps` times each, it
//! times `cma_alloc()` and `cma_release()` separately on the default CMA
//! area (`reserved`, from `cma=`) and on the first GCMA area (`gcma0`,
//! served by GCMA through the CMA interface), alternating the two so that
//! both see the same memory pressure.
//!
//! Before every GCMA allocation, the benchmark stores synthetic pages in
//! DMEM's swap instance, under a swap type no swap device can have, until
//! `gcma0` has no free page left: every page the allocation takes is lent
//! and must be discarded first, the worst case for GCMA.  The share of the
//! area lent when each allocation starts is measured and reported, and
//! the synthetic entries are invalidated at the end.
//!
//! Symmetrically, before every CMA allocation the benchmark fills the free
//! pages of the CMA area with movable pages that the allocation has to
//! migrate (`gcma_bench_cma_fill()` in `bench.c`: clean, unmapped,
//! unevictable page-cache folios of an internal file, placed in the area's
//! free runs with `alloc_contig_range()`; the cheapest pages for CMA to
//! migrate).  The share of the CMA area in use when each CMA allocation
//! starts is measured and reported next to GCMA's lent share.
//!
//! For each size it prints mean, median, 99th percentile and maximum in
//! microseconds, of the allocation, of the release and of both, the
//! failures and the CMA/GCMA ratios, then every allocation latency,
//! sorted (`cdf` lines, for `tools/build/plot_cdf.py`).  It does so twice:
//! at normal priority, where the program keeping memory under pressure can
//! preempt a call, and at `SCHED_FIFO`, where a call runs until it sleeps.
//! A third pass allocates from GCMA alone with the phase probes of the
//! allocation path on (`crate::profile`) and prints where the time goes.
//! Sizes larger than either area are skipped, so a failure always means an
//! allocation that should have fit.

use crate::{
    dmem::{Refusal, StoreOutcome, SwapKey},
    dmem_client::{dmems, Client},
    dmem_kernel::KConfig,
    profile::{self, Phase},
    Area,
};
use kernel::{
    bindings, c_str, delay,
    ffi::{c_uint, c_ulong},
    mm::buddy::ContigPages,
    prelude::*,
};

mod ffi {
    pub(super) use kernel::bindings::{
        gcma_bench_alloc, gcma_bench_cma, gcma_bench_cma_fill, gcma_bench_cma_fill_start,
        gcma_bench_cma_fill_stats, gcma_bench_cma_fill_stop, gcma_bench_cma_pages,
        gcma_bench_flush_tlb, gcma_bench_ktime_ns, gcma_bench_now_ns, gcma_bench_pause,
        gcma_bench_release, gcma_bench_set_fifo,
    };
}

/// The benchmark's clock, `local_clock()`: cheap, and monotonic on the
/// CPU the benchmark's kthread is bound to.
pub(crate) fn now_ns() -> u64 {
    // SAFETY: FFI call without arguments.
    unsafe { ffi::gcma_bench_now_ns() }
}

/// Sleeps a little if the benchmark ran for 100 ms since it last did.
fn pause() {
    // SAFETY: FFI call from process context.
    unsafe { ffi::gcma_bench_pause() };
}

/// Smallest and largest request, in pages.
const MIN_PAGES: usize = 64;
const MAX_PAGES: usize = 32768;

/// Runs of the profile pass per size, at most.
const PROFILE_REPS: usize = 20;

/// Swap type of the synthetic DMEM entries.  Swap types are below
/// `MAX_SWAPFILES` (32), so no swap device's entries can collide with
/// these, and the cleanup drops exactly them.
const FILL_SWAP_TYPE: u32 = u32::MAX;

/// Refused stores in a row after which a fill gives up.
const FILL_MAX_REFUSED: usize = 1000;

/// Latency samples per size, in the CDF lines.
const CDF_PER_LINE: usize = 40;

/// Keeps an area lent to DMEM's swap instance with synthetic pages.
struct Filler {
    /// The area to fill.
    area: &'static Area,
    /// The swap instance.
    client: &'static Client<KConfig<SwapKey>>,
    /// The page every store copies (zeroes).
    src: ContigPages,
    /// Offset of the next synthetic key.
    next: u64,
    /// Stores that stored.
    stored: u64,
    /// Stores refused (no index node, no space, ...).
    refused: u64,
    /// Fills that could not lend every free page.
    short: u64,
}

impl Filler {
    /// A filler for the area named `name`; `ENODEV` without DMEM or area.
    fn new(name: &CStr) -> Result<Self> {
        let d = dmems().ok_or(ENODEV)?;
        let span = d
            .areas
            .0
            .iter()
            .find(|s| s.area.name().as_bytes() == name.as_bytes());
        let Some(span) = span else {
            pr_err!("bench: {} is not in DMEM's areas\n", name);
            return Err(ENODEV);
        };
        Ok(Filler {
            area: span.area,
            client: &d.swap,
            src: ContigPages::alloc(None, 0, GFP_KERNEL | __GFP_ZERO)?,
            next: 0,
            stored: 0,
            refused: 0,
            short: 0,
        })
    }

    /// Stores synthetic pages until the area has no free page: DMEM's
    /// supply lends from the first area with a free page, and the area is
    /// the first one, so each store takes one of its pages (no eviction:
    /// the loop stops before the supply would run dry).
    fn fill(&mut self) {
        let Some(src) = self.src.page(0) else { return };
        let mut refused = 0;
        loop {
            let (total, used, lent) = self.area.page_counts();
            if used + lent >= total {
                return;
            }
            let key = SwapKey {
                swap_type: FILL_SWAP_TYPE,
                offset: self.next,
            };
            self.next += 1;
            match self.client.store(&key, src.clone()) {
                Some(StoreOutcome::Stored) => {
                    self.stored += 1;
                    refused = 0;
                }
                // The swap client is off: nothing can be lent.
                None => refused = FILL_MAX_REFUSED,
                Some(StoreOutcome::Refused(r)) => {
                    self.refused += 1;
                    refused += 1;
                    if r == Refusal::NoMemory {
                        // Memory is short; let reclaim run.
                        // SAFETY: the benchmark runs on its kthread, and
                        // `fill()` holds no lock here.
                        delay::cond_resched(&unsafe { delay::MaySleep::new() });
                    }
                }
            }
            if refused >= FILL_MAX_REFUSED {
                self.short += 1;
                return;
            }
            if self.next % 256 == 0 {
                pause();
            }
        }
    }

    /// Share of the area lent now, in hundredths of a percent.
    fn lent_bp(&self) -> u64 {
        let (total, _, lent) = self.area.page_counts();
        (lent * 10000 / total.max(1)) as u64
    }

    /// Invalidates every synthetic entry; returns how many there were.
    fn clear(&self) -> usize {
        let (lo, hi) = SwapKey::device_range(FILL_SWAP_TYPE);
        self.client.dmem.invalidate_range(&lo, &hi)
    }
}

/// Summary of sorted samples, in nanoseconds.
#[derive(Clone, Copy, Default)]
struct Summary {
    mean: u64,
    median: u64,
    p99: u64,
    max: u64,
}

/// Sorts `ns` and summarises it; `None` if it is empty.
fn summarise(ns: &mut [u64]) -> Option<Summary> {
    let n = ns.len();
    if n == 0 {
        return None;
    }
    ns.sort_unstable();
    let sum: u64 = ns.iter().sum();
    // Nearest-rank percentile: the ceil(0.99 n)-th smallest.
    let p99 = (n * 99).div_ceil(100).max(1) - 1;
    Some(Summary {
        mean: sum / n as u64,
        median: ns[n / 2],
        p99: ns[p99],
        max: ns[n - 1],
    })
}

/// Latencies of one allocator at one size.
struct Series {
    alloc: KVec<u64>,
    release: KVec<u64>,
    both: KVec<u64>,
    failures: usize,
}

impl Series {
    fn new(reps: usize) -> Result<Self> {
        Ok(Series {
            alloc: KVec::with_capacity(reps, GFP_KERNEL)?,
            release: KVec::with_capacity(reps, GFP_KERNEL)?,
            both: KVec::with_capacity(reps, GFP_KERNEL)?,
            failures: 0,
        })
    }

    /// Times one allocation of `count` pages from `cma` and its release.
    fn time_one(&mut self, cma: *mut bindings::cma, count: usize) -> Result {
        // SAFETY: FFI calls; `cma` is a CMA area found by name, and the
        // pages released are exactly those just allocated.
        let (t0, t1, t2) = unsafe {
            let t0 = ffi::gcma_bench_now_ns();
            let pages = ffi::gcma_bench_alloc(cma, count as c_ulong);
            let t1 = ffi::gcma_bench_now_ns();
            if pages.is_null() {
                self.failures += 1;
                return Ok(());
            }
            ffi::gcma_bench_release(cma, pages, count as c_ulong);
            (t0, t1, ffi::gcma_bench_now_ns())
        };
        self.alloc.push(t1 - t0, GFP_KERNEL)?;
        self.release.push(t2 - t1, GFP_KERNEL)?;
        self.both.push(t2 - t0, GFP_KERNEL)?;
        Ok(())
    }
}

/// Microseconds with one decimal, for the tables.
struct Us(u64);

impl core::fmt::Display for Us {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}.{}", self.0 / 1000, self.0 % 1000 / 100)
    }
}

/// A ratio `a / b` with two decimals (`b` taken as at least 1).
struct Ratio(u64, u64);

impl core::fmt::Display for Ratio {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Latencies in nanoseconds stay far below `u64::MAX / 100`.
        let r = self.0.saturating_mul(100) / self.1.max(1);
        write!(f, "{}.{:02}", r / 100, r % 100)
    }
}

/// A share in hundredths of a percent, as a percentage.
struct Pct(u64);

impl core::fmt::Display for Pct {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}.{:02}", self.0 / 100, self.0 % 100)
    }
}

fn find(name: &CStr) -> Option<(*mut bindings::cma, usize)> {
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
    let t0 = now_ns();
    for _ in 0..CALLS {
        // SAFETY: the clocks are plain FFI calls without arguments.
        unsafe { clock() };
    }
    (now_ns() - t0) / CALLS
}

/// Results of one size in one pass.
struct SizeRun {
    pages: usize,
    cma: Series,
    gcma: Series,
    /// Lowest and summed share of the area lent at the start of a GCMA
    /// allocation, in hundredths of a percent.
    lent_min: u64,
    lent_sum: u64,
    /// Lowest and summed share of the CMA area in use at the start of a
    /// CMA allocation, in hundredths of a percent.
    occupied_min: u64,
    occupied_sum: u64,
}

/// The sizes that fit both areas, ascending.
fn sizes(fit: usize) -> impl Iterator<Item = usize> {
    core::iter::successors(Some(MIN_PAGES), |&c| Some(c * 2))
        .take_while(|&c| c <= MAX_PAGES)
        .filter(move |&c| c <= fit)
}

/// One table: `pick` selects the samples (allocation, release, both).
fn print_table(pass: usize, what: &str, runs: &mut [SizeRun], pick: fn(&mut Series) -> &mut [u64]) {
    pr_info!(
        "bench: pass {} {} latency, us: pages | CMA mean median p99 max fail | GCMA mean median p99 max fail | CMA/GCMA mean median | GCMA p99/median | lent% min mean | CMA occupied% min mean\n",
        pass,
        what
    );
    for r in runs.iter_mut() {
        let n = r.gcma.alloc.len().max(1) as u64;
        let (cf, gf) = (r.cma.failures, r.gcma.failures);
        let (lent_min, lent_mean) = (r.lent_min, r.lent_sum / n);
        let nc = r.cma.alloc.len().max(1) as u64;
        let (occ_min, occ_mean) = (r.occupied_min, r.occupied_sum / nc);
        match (summarise(pick(&mut r.cma)), summarise(pick(&mut r.gcma))) {
            (Some(c), Some(g)) => pr_info!(
                "bench: {} {:5} | {} {} {} {} {} | {} {} {} {} {} | {} {} | {} | {} {} | {} {}\n",
                what,
                r.pages,
                Us(c.mean),
                Us(c.median),
                Us(c.p99),
                Us(c.max),
                cf,
                Us(g.mean),
                Us(g.median),
                Us(g.p99),
                Us(g.max),
                gf,
                Ratio(c.mean, g.mean),
                Ratio(c.median, g.median),
                Ratio(g.p99, g.median),
                Pct(lent_min),
                Pct(lent_mean),
                Pct(occ_min),
                Pct(occ_mean)
            ),
            _ => pr_info!(
                "bench: {} {:5} | CMA {} failed | GCMA {} failed\n",
                what,
                r.pages,
                cf,
                gf
            ),
        }
    }
}

/// A log line being built.
struct Line(KVec<u8>);

impl core::fmt::Write for Line {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        self.0
            .extend_from_slice(s.as_bytes(), GFP_KERNEL)
            .map_err(|_| core::fmt::Error)
    }
}

/// Prints the sorted allocation latencies of `ns`, [`CDF_PER_LINE`] a
/// line, in microseconds.
fn print_cdf(pass: usize, alloc: &str, pages: usize, ns: &mut [u64]) {
    use core::fmt::Write;

    ns.sort_unstable();
    let n = ns.len();
    for (part, chunk) in ns.chunks(CDF_PER_LINE).enumerate() {
        let mut line = Line(KVec::new());
        if chunk.iter().any(|&v| write!(line, " {}", Us(v)).is_err()) {
            return;
        }
        let Ok(s) = core::str::from_utf8(&line.0) else {
            return;
        };
        pr_info!(
            "bench: cdf pass={} alloc={} pages={} n={} part={}:{}\n",
            pass,
            alloc,
            pages,
            n,
            part,
            s
        );
    }
}

/// Pass `pass`: every size, `reps` times, both areas alternately, the
/// GCMA area filled before each GCMA allocation.  Returns the failures of
/// CMA and of GCMA.
fn pass(
    pass: usize,
    (cma, cma_pages): (*mut bindings::cma, usize),
    (gcma, gcma_pages): (*mut bindings::cma, usize),
    reps: usize,
    filler: &mut Filler,
) -> Result<(usize, usize)> {
    let mut runs = KVec::new();
    for count in sizes(cma_pages.min(gcma_pages)) {
        let mut r = SizeRun {
            pages: count,
            cma: Series::new(reps)?,
            gcma: Series::new(reps)?,
            lent_min: u64::MAX,
            lent_sum: 0,
            occupied_min: u64::MAX,
            occupied_sum: 0,
        };
        for _ in 0..reps {
            pause();
            filler.fill();
            // SAFETY: FFI call from process context, between
            // `gcma_bench_cma_fill_start()` and `gcma_bench_cma_fill_stop()`.
            let occupied = u64::from(unsafe { ffi::gcma_bench_cma_fill() });
            r.occupied_min = r.occupied_min.min(occupied);
            r.occupied_sum += occupied;
            r.cma.time_one(cma, count)?;
            let lent = filler.lent_bp();
            r.lent_min = r.lent_min.min(lent);
            r.lent_sum += lent;
            r.gcma.time_one(gcma, count)?;
        }
        runs.push(r, GFP_KERNEL)?;
    }
    let skipped = sizes(MAX_PAGES).count() - runs.len();
    if skipped > 0 {
        pr_info!(
            "bench: pass {}: {} size(s) skipped: larger than an area\n",
            pass,
            skipped
        );
    }
    print_table(pass, "alloc", &mut runs, |s| &mut s.alloc);
    print_table(pass, "release", &mut runs, |s| &mut s.release);
    print_table(pass, "alloc+release", &mut runs, |s| &mut s.both);
    for r in runs.iter_mut() {
        print_cdf(pass, "cma", r.pages, &mut r.cma.alloc);
        print_cdf(pass, "gcma", r.pages, &mut r.gcma.alloc);
    }
    let cma_failed = runs.iter().map(|r| r.cma.failures).sum();
    let gcma_failed = runs.iter().map(|r| r.gcma.failures).sum();
    Ok((cma_failed, gcma_failed))
}

/// The profile pass: GCMA alone, the area filled and the TLBs flushed
/// before every allocation, the probes of the allocation path on.  Prints, per allocation, the
/// time of each phase, what is left for the C side (`cma_alloc()`, the
/// page allocator's allocation steps, `split_page()`), and per discarded
/// page the cost of each part of a discard.  Returns the failures.
fn profile_pass(
    (gcma, gcma_pages): (*mut bindings::cma, usize),
    cma_pages: usize,
    reps: usize,
    filler: &mut Filler,
    clock: u64,
) -> Result<usize> {
    pr_info!(
        "bench: profile, GCMA, area filled, TLB flushed, {} runs per size, 3 probes per allocation and 2 per chunk of {} pages ({} ns each): ns per allocation: pages | alloc | search | hook | finish | outside Rust | ns per discarded page: hook (dmem-discard page-state) | floor us | alloc/floor\n",
        reps,
        crate::dmem::DISCARD_CHUNK,
        clock
    );
    let mut failures = 0;
    for count in sizes(cma_pages.min(gcma_pages)) {
        let mut s = Series::new(reps)?;
        let mut discarded = 0u64;
        profile::reset();
        for _ in 0..reps {
            pause();
            filler.fill();
            let (_, _, lent) = filler.area.page_counts();
            // Cold, as in the timed passes (see `gcma_bench_flush_tlb()`).
            // SAFETY: FFI call from process context.
            unsafe { ffi::gcma_bench_flush_tlb() };
            profile::set(true);
            s.time_one(gcma, count)?;
            profile::set(false);
            let (_, _, after) = filler.area.page_counts();
            discarded += lent.saturating_sub(after) as u64;
        }
        failures += s.failures;
        let Some(a) = summarise(&mut s.alloc) else {
            continue;
        };
        let n = s.alloc.len() as u64;
        let sums = profile::sums();
        let per = |p: Phase| sums[p as usize].0 / n;
        let page = |p: Phase| sums[p as usize].0 / discarded.max(1);
        let rust = per(Phase::Search) + per(Phase::Hook) + per(Phase::Finish);
        let outside = a.mean.saturating_sub(rust);
        // The floor: the work the returned pages need, measured here:
        // the search, the C side, and per page only the discard itself
        // (DMEM marking the page, then its page-state step: the handoff).
        let floor = per(Phase::Search)
            + per(Phase::Finish)
            + outside
            + (sums[Phase::DmemDiscard as usize].0 + sums[Phase::PageState as usize].0) / n;
        pr_info!(
            "bench: profile {:5} | {} | {} | {} | {} | {} | {} ({} {}) | {} | {}\n",
            count,
            a.mean,
            per(Phase::Search),
            per(Phase::Hook),
            per(Phase::Finish),
            outside,
            page(Phase::Hook),
            page(Phase::DmemDiscard),
            page(Phase::PageState),
            Us(floor),
            Ratio(a.mean, floor)
        );
    }
    profile::set(false);
    Ok(failures)
}

fn run(reps: usize) -> Result {
    let (Some(cma), Some(gcma)) = (find(c_str!("reserved")), find(c_str!("gcma0"))) else {
        return Err(ENODEV);
    };
    let mut filler = Filler::new(c_str!("gcma0"))?;
    pr_info!(
        "bench: latency, us; CMA 'reserved' {} pages, GCMA 'gcma0' {} pages, {} runs per size; gcma0 filled with DMEM swap pages before each GCMA allocation, the free runs of 'reserved' with movable page-cache folios before each CMA allocation\n",
        cma.1,
        gcma.1,
        reps
    );
    let clock = clock_cost(ffi::gcma_bench_now_ns);
    pr_info!(
        "bench: clock reads: local_clock {} ns (used), ktime_get_ns {} ns\n",
        clock,
        clock_cost(ffi::gcma_bench_ktime_ns)
    );
    // First as any task would call, then with the pressure kept off the
    // CPU while a call runs: the first includes the time a call waits
    // for the CPU, the second is the allocators' own cost.
    // SAFETY: FFI call from process context; `cma.0` is a CMA area.
    kernel::error::to_result(unsafe { ffi::gcma_bench_cma_fill_start(cma.0) })?;
    pr_info!("bench: pass 1 of 2: normal priority, preemptible by the pressure program\n");
    let passes = pass(1, cma, gcma, reps, &mut filler).and_then(|(c1, g1)| {
        // SAFETY: FFI call from the benchmark's own kthread.
        unsafe { ffi::gcma_bench_set_fifo() };
        pr_info!("bench: pass 2 of 2: SCHED_FIFO, a timed call runs until it sleeps\n");
        let (c2, g2) = pass(2, cma, gcma, reps, &mut filler)?;
        Ok((c1, g1, c2, g2))
    });
    let (mut added, mut dropped, mut failed_runs): (c_ulong, c_ulong, c_ulong) = (0, 0, 0);
    // SAFETY: FFI calls from process context, after the start; the
    // pointers are valid for writes.
    unsafe {
        ffi::gcma_bench_cma_fill_stats(&mut added, &mut dropped, &mut failed_runs);
        ffi::gcma_bench_cma_fill_stop();
    }
    pr_info!(
        "bench: CMA fill: {} folios added, {} dropped after migrating out of the area, {} free runs not taken\n",
        added,
        dropped,
        failed_runs
    );
    let (c1, g1, c2, g2) = passes?;
    let g3 = profile_pass(gcma, cma.1, reps.min(PROFILE_REPS), &mut filler, clock)?;
    let cleared = filler.clear();
    let (total, used, lent) = filler.area.page_counts();
    pr_info!(
        "bench: fill: {} synthetic pages stored, {} stores refused, {} fills short; {} invalidated at the end; gcma0 now {} of {} pages lent, {} used\n",
        filler.stored,
        filler.refused,
        filler.short,
        cleared,
        lent,
        total,
        used
    );
    pr_info!(
        "bench: done: {} CMA and {} GCMA allocations failed\n",
        c1 + c2,
        g1 + g2 + g3
    );
    Ok(())
}

/// Entry point of the debugfs trigger in `bench.c`.
#[no_mangle]
pub(crate) extern "C" fn gcma_bench_run(reps: c_uint) {
    if let Err(e) = run(reps as usize) {
        pr_err!("bench: failed: {:?}\n", e);
    }
}
