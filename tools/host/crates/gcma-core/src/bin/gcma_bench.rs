// SPDX-License-Identifier: GPL-2.0

//! Microbenchmark of the GCMA primary allocator against first-fit bitmap
//! scans.  Usage: `gcma-bench [--map-only] [--only TEXT] [--repeat N]
//! [ROUNDS [SEED]]`; run it in release mode.
//!
//! * `--map-only` skips the baselines, for profiling;
//! * `--only TEXT` runs only the workloads whose name contains `TEXT`;
//! * `--repeat N` times each fixed workload's requests `N` times over on
//!   the same fragmented area, so that a profile shows the allocations
//!   rather than the untimed set-up.

fn main() {
    let mut cfg = gcma_core::bench::Config::default();
    let mut numbers = Vec::new();
    let usage = || -> ! {
        eprintln!("usage: gcma-bench [--map-only] [--only TEXT] [--repeat N] [ROUNDS [SEED]]");
        std::process::exit(2);
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--map-only" {
            cfg.baselines = false;
        } else if arg == "--only" {
            cfg.only = Some(args.next().unwrap_or_else(|| usage()));
        } else if arg == "--repeat" {
            let n = args.next().and_then(|n| n.parse::<usize>().ok());
            cfg.repeat = n.unwrap_or_else(|| usage()).max(1);
        } else if let Ok(n) = arg.parse::<u64>() {
            numbers.push(n);
        } else {
            usage();
        }
    }
    if let Some(&rounds) = numbers.first() {
        cfg.rounds = rounds.max(1) as usize;
    }
    if let Some(&seed) = numbers.get(1) {
        cfg.seed = seed;
    }
    gcma_core::bench::run(&cfg);
}
