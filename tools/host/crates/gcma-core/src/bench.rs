// SPDX-License-Identifier: GPL-2.0

//! Microbenchmark: primary allocation throughput of [`AreaMap`] against
//! first-fit bitmap scans on a fragmented area.
//!
//! The area is filled with chunks of random size, then a random half of
//! them is freed.  Every allocator gets the same fragmentation and the same
//! requests; as all three implement the same first-fit policy, they must
//! return the same pages, which is checked.  Two kinds of workload:
//!
//! * *fixed*: requests are allocated in batches, each batch released
//!   (untimed) before the next, so the fragmentation stays as made.  This
//!   favours first fit, which finds small requests in the low holes.
//! * *churn*: allocations live on; before each batch, random live
//!   allocations are released (untimed) until the area is at most
//!   [`Config::churn_target`] percent used, so the low area fills up as it
//!   does under a long-running load.
//!
//! Only allocation is timed, per batch.  The allocators take turns round
//! after round, and the table that ends the output gives, per workload,
//! `AreaMap`'s rate over that of the word-skipping scan in the same run.

use crate::area_map::{bitmap_words, summary_words, AllocStep, AreaMap};
use crate::baseline::{FirstFit, Scan};
use crate::rng::Rng;
use std::time::{Duration, Instant};

/// Benchmark parameters.
#[derive(Clone, Debug)]
pub struct Config {
    /// Pages in the area.
    pub pages: usize,
    /// Largest chunk used to fragment the area.
    pub max_chunk: usize,
    /// Timed requests per workload.
    pub ops: usize,
    /// Requests allocated in one timed batch.
    pub batch: usize,
    /// Timed passes per workload and allocator; the fastest counts.  The
    /// allocators take turns, round after round, so that a slow spell of
    /// the machine hits them alike.
    pub rounds: usize,
    /// Percentage of the area used at the start of each churn batch.
    pub churn_target: usize,
    /// Whether to run the baselines too (off for profiling `AreaMap`).
    pub baselines: bool,
    /// PRNG seed.
    pub seed: u64,
    /// Runs only the workloads whose name contains this.
    pub only: Option<String>,
    /// Times each fixed workload's requests this many times over on the
    /// same fragmented area (they leave it as they found it), so that a
    /// profile is not dominated by the untimed fragmentation.
    pub repeat: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            pages: 262_144,
            max_chunk: 64,
            ops: 4096,
            batch: 32,
            rounds: 3,
            churn_target: 90,
            baselines: true,
            seed: 0x6763_6d61,
            only: None,
            repeat: 1,
        }
    }
}

/// A primary allocator under test.
trait Allocator {
    fn alloc(&mut self, count: usize, align_order: u32) -> Option<usize>;
    fn release(&mut self, start: usize, count: usize);
}

impl Allocator for FirstFit {
    fn alloc(&mut self, count: usize, align_order: u32) -> Option<usize> {
        FirstFit::alloc(self, count, align_order)
    }

    fn release(&mut self, start: usize, count: usize) {
        FirstFit::release(self, start, count)
    }
}

impl Allocator for AreaMap<Vec<usize>> {
    fn alloc(&mut self, count: usize, align_order: u32) -> Option<usize> {
        // The kernel's entry point (`alloc_primary()` is compiled for tests
        // only); with no bound on the tries it never returns `Resume`.
        match self.alloc_primary_from(count, align_order, 0, usize::MAX) {
            Ok(AllocStep::Done(a)) => Some(a.start),
            _ => None,
        }
    }

    fn release(&mut self, start: usize, count: usize) {
        self.release_primary(start, count)
            .expect("release of an allocated range");
    }
}

/// Creates an empty [`AreaMap`] of `pages` pages.
pub(crate) fn new_area_map(pages: usize) -> AreaMap<Vec<usize>> {
    let words = bitmap_words(pages);
    let summary = summary_words(pages).expect("area too large");
    AreaMap::new(
        pages,
        vec![0; words],
        vec![0; words],
        vec![0; words],
        vec![0; summary],
    )
    .expect("valid area")
}

/// The allocators compared, first the one under test.
const ALLOCATORS: [&str; 3] = [
    "AreaMap (segment tree)",
    "first-fit, word skipping",
    "first-fit, bit by bit",
];

/// Makes allocator `which` (an index in [`ALLOCATORS`]), fragmented.
/// Returns it with the number of pages it has in use.
fn fragmented(which: usize, cfg: &Config) -> (Box<dyn Allocator>, usize) {
    let mut a: Box<dyn Allocator> = match which {
        0 => Box::new(new_area_map(cfg.pages)),
        1 => Box::new(FirstFit::new(cfg.pages, Scan::WordSkipping)),
        _ => Box::new(FirstFit::new(cfg.pages, Scan::BitByBit)),
    };
    let mut rng = Rng::new(cfg.seed);
    let mut start = 0;
    let mut chunks = Vec::new();
    while start < cfg.pages {
        let count = rng.range(1, cfg.max_chunk).min(cfg.pages - start);
        assert_eq!(a.alloc(count, 0), Some(start));
        chunks.push((start, count));
        start += count;
    }
    let mut used = cfg.pages;
    for (start, count) in chunks {
        if rng.coin() {
            a.release(start, count);
            used -= count;
        }
    }
    (a, used)
}

/// A request: page count and alignment order.
type Request = (usize, u32);

fn small(r: &mut Rng) -> Request {
    (r.range(1, 8), 0)
}

fn medium(r: &mut Rng) -> Request {
    (r.range(9, 64), r.range(0, 3) as u32)
}

fn large(r: &mut Rng) -> Request {
    (r.range(65, 256), r.range(0, 4) as u32)
}

/// Longer than any free run of the fragmented area (at most
/// [`Config::max_chunk`] pages per chunk, and a run of 1024 would need
/// dozens of freed chunks in a row): every request fails, and the workload
/// measures how fast an allocator finds that out.
fn huge(r: &mut Rng) -> Request {
    (r.range(1024, 4096), 0)
}

fn mix(r: &mut Rng) -> Request {
    match r.range(0, 9) {
        0..=5 => small(r),
        6..=8 => medium(r),
        _ => large(r),
    }
}

/// How a workload treats its allocations.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Fixed,
    Churn,
}

/// One workload.
struct Workload {
    name: &'static str,
    kind: Kind,
    gen: fn(&mut Rng) -> Request,
}

const WORKLOADS: [Workload; 7] = [
    Workload {
        name: "fixed: small 1-8, unaligned",
        kind: Kind::Fixed,
        gen: small,
    },
    Workload {
        name: "fixed: medium 9-64, align 1-8",
        kind: Kind::Fixed,
        gen: medium,
    },
    Workload {
        name: "fixed: large 65-256, align 1-16",
        kind: Kind::Fixed,
        gen: large,
    },
    Workload {
        name: "fixed: huge 1024-4096, never fits",
        kind: Kind::Fixed,
        gen: huge,
    },
    Workload {
        name: "fixed: mix 60/30/10 small/medium/large",
        kind: Kind::Fixed,
        gen: mix,
    },
    Workload {
        name: "churn: small 1-8, unaligned",
        kind: Kind::Churn,
        gen: small,
    },
    Workload {
        name: "churn: mix 60/30/10 small/medium/large",
        kind: Kind::Churn,
        gen: mix,
    },
];

/// Runs workload `w` once on allocator `which`; returns the time spent
/// allocating and the results.
fn pass(which: usize, w: &Workload, cfg: &Config) -> (Duration, Vec<Option<usize>>) {
    let (mut a, mut used) = fragmented(which, cfg);
    let mut rng = Rng::new(cfg.seed ^ 0x5eed);
    let requests: Vec<Request> = (0..cfg.ops).map(|_| (w.gen)(&mut rng)).collect();
    let target = cfg.pages / 100 * cfg.churn_target;
    let mut live: Vec<(usize, usize)> = Vec::new();
    let mut spent = Duration::ZERO;
    let mut results = Vec::with_capacity(requests.len());
    let mut got = Vec::with_capacity(cfg.batch);

    if w.kind == Kind::Churn {
        // Warm up: fill the area up to the target, untimed.
        while used < target {
            let (count, align) = (w.gen)(&mut rng);
            if let Some(start) = a.alloc(count, align) {
                live.push((start, count));
                used += count;
            }
        }
    }
    let repeat = match w.kind {
        Kind::Fixed => cfg.repeat.max(1),
        Kind::Churn => 1,
    };
    let batches = requests
        .chunks(cfg.batch)
        .cycle()
        .take(repeat * cfg.ops.div_ceil(cfg.batch));
    for chunk in batches {
        if w.kind == Kind::Churn {
            while used > target && !live.is_empty() {
                let (start, count) = live.swap_remove(rng.range(0, live.len() - 1));
                a.release(start, count);
                used -= count;
            }
        }
        let t = Instant::now();
        for &(count, align) in chunk {
            got.push(a.alloc(count, align));
        }
        spent += t.elapsed();
        for (&(count, _), r) in chunk.iter().zip(&got) {
            if let Some(start) = *r {
                match w.kind {
                    Kind::Fixed => a.release(start, count),
                    Kind::Churn => {
                        live.push((start, count));
                        used += count;
                    }
                }
            }
        }
        if results.len() < requests.len() {
            results.append(&mut got);
        } else {
            got.clear();
        }
    }
    (spent / repeat as u32, results)
}

/// Measured throughput of one allocator on one workload.
#[derive(Clone, Debug)]
pub struct Measure {
    /// Allocator name.
    pub allocator: &'static str,
    /// Workload name.
    pub workload: &'static str,
    /// Allocations per second (best round).
    pub ops_per_sec: f64,
    /// Fraction of requests that succeeded.
    pub success: f64,
}

/// Runs the benchmark, prints a table and returns the measures.
///
/// Each workload gets a paragraph with the rate of every allocator and
/// `AreaMap`'s speedup over it; a summary table ends the output, with the
/// ratio of `AreaMap`'s rate to that of the word-skipping scan, measured in
/// the same run.
pub fn run(cfg: &Config) -> Vec<Measure> {
    let (probe, used) = fragmented(0, cfg);
    drop(probe);
    println!(
        "area {} pages, fragmented with chunks of 1..={} pages, half freed: {} used",
        cfg.pages, cfg.max_chunk, used
    );
    println!(
        "{} timed allocations per workload, batches of {}, churn at {}% use, best of {} rounds\n",
        cfg.ops, cfg.batch, cfg.churn_target, cfg.rounds
    );
    let allocators = if cfg.baselines { ALLOCATORS.len() } else { 1 };
    let mut measures = Vec::new();
    let workloads = WORKLOADS.iter().filter(|w| {
        cfg.only
            .as_ref()
            .is_none_or(|o| w.name.contains(o.as_str()))
    });
    for w in workloads {
        let mut expected = None;
        let mut best = vec![Duration::MAX; allocators];
        for _ in 0..cfg.rounds {
            for (which, name) in ALLOCATORS.iter().enumerate().take(allocators) {
                let (spent, got) = pass(which, w, cfg);
                // Same answers from everyone, or the comparison is moot.
                let expected = expected.get_or_insert_with(|| got.clone());
                assert_eq!(&got, expected, "{name} disagrees on {}", w.name);
                best[which] = best[which].min(spent);
            }
        }
        let rates: Vec<f64> = best
            .iter()
            .map(|b| cfg.ops as f64 / b.as_secs_f64())
            .collect();
        let results = expected.unwrap_or_default();
        let success = results.iter().filter(|r| r.is_some()).count() as f64 / cfg.ops as f64;
        println!("{} (success {:.1}%)", w.name, success * 100.0);
        for (which, rate) in rates.iter().enumerate() {
            println!(
                "  {:<26} {:>12.0} allocs/s   AreaMap speedup x{:.2}",
                ALLOCATORS[which],
                rate,
                rates[0] / rate
            );
            measures.push(Measure {
                allocator: ALLOCATORS[which],
                workload: w.name,
                ops_per_sec: *rate,
                success,
            });
        }
        println!();
    }
    if cfg.baselines {
        print_summary(&measures);
    }
    measures
}

/// Prints one line per workload: the rates of `AreaMap` and of the
/// word-skipping scan, in millions of allocations per second, and their
/// ratio.
fn print_summary(measures: &[Measure]) {
    println!(
        "{:<40} {:>10} {:>10} {:>8}",
        "workload", "AreaMap", "word-skip", "ratio"
    );
    for m in measures.iter().filter(|m| m.allocator == ALLOCATORS[0]) {
        let Some(base) = measures
            .iter()
            .find(|b| b.workload == m.workload && b.allocator == ALLOCATORS[1])
        else {
            continue;
        };
        println!(
            "{:<40} {:>9.2}M {:>9.2}M {:>7.2}x",
            m.workload,
            m.ops_per_sec / 1e6,
            base.ops_per_sec / 1e6,
            m.ops_per_sec / base.ops_per_sec
        );
    }
}
