// SPDX-License-Identifier: GPL-2.0

//! Microbenchmark of the GCMA primary allocator against first-fit bitmap
//! scans.  Usage: `gcma-bench [--map-only] [ROUNDS [SEED]]`; run it in
//! release mode.  `--map-only` skips the baselines, for profiling.

fn main() {
    let mut cfg = gcma_core::bench::Config::default();
    let mut numbers = Vec::new();
    for arg in std::env::args().skip(1) {
        if arg == "--map-only" {
            cfg.baselines = false;
        } else if let Ok(n) = arg.parse::<u64>() {
            numbers.push(n);
        } else {
            eprintln!("usage: gcma-bench [--map-only] [ROUNDS [SEED]]");
            std::process::exit(2);
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
