// SPDX-License-Identifier: GPL-2.0

//! Prints the Bonsai benchmarks.
//!
//! * `bonsai-bench [N...]` (default: 1000 100000): the structure table,
//!   per-insert node allocations, retirements, rotations and the resulting
//!   height, for random and sequential inserts and both balance parameter
//!   sets.
//! * `bonsai-bench churn [PAIRS [ROUNDS [VARIANT...]]]` (default: 200000
//!   pairs, 5 rounds, every variant): the kernel benchmark's writer
//!   (insert and remove a range in a tree of 1000), in nanoseconds per
//!   operation, for the variants of `bonsai_core::churn`; the variants take
//!   turns in every round, and the median round is reported with its ratio
//!   to the first variant.
//! * `bonsai-bench lookups [PAIRS [MS [RANGES]]]` (default: 50 pairs of
//!   20 ms phases, 1000 ranges): lookups per second of one reader thread next to the
//!   `kernel` writer, which alternates between idling and working all the
//!   time, and the median ratio of busy to idle (the kernel table's
//!   "lookups at 100% duty / read-only").

use bonsai_core::churn::{self, Variant};

fn churn_table(args: &[String]) {
    let pairs = args.first().map_or(200_000, |a| a.parse().expect("PAIRS"));
    let rounds: usize = args.get(1).map_or(5, |a| a.parse().expect("ROUNDS"));
    let variants: Vec<Variant> = if args.len() > 2 {
        args[2..]
            .iter()
            .map(|a| Variant::parse(a).unwrap_or_else(|| panic!("unknown variant {a}")))
            .collect()
    } else {
        Variant::ALL.to_vec()
    };
    let mut ns = vec![Vec::new(); variants.len()];
    for r in 0..rounds {
        for (i, &v) in variants.iter().enumerate() {
            ns[i].push(churn::run(v, pairs, 1 + r as u64));
        }
    }
    println!(
        "churn: {} ranges, {} insert+remove pairs, {} rounds; ns per operation",
        churn::NR_RANGES,
        pairs,
        rounds
    );
    println!("{:>8} | {:>8} {:>6} | rounds", "variant", "median", "ratio");
    let median = |v: &[f64]| {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        s[s.len() / 2]
    };
    let base = median(&ns[0]);
    for (i, v) in variants.iter().enumerate() {
        let m = median(&ns[i]);
        let all: Vec<String> = ns[i].iter().map(|x| format!("{x:.0}")).collect();
        println!(
            "{:>8} | {:>8.1} {:>6.2} | {}",
            v.name(),
            m,
            m / base,
            all.join(" ")
        );
    }
}

fn lookup_table(args: &[String]) {
    let pairs = args.first().map_or(50, |a| a.parse().expect("PAIRS"));
    let ms = args.get(1).map_or(20, |a| a.parse().expect("MS"));
    let ranges = args
        .get(2)
        .map_or(churn::NR_RANGES, |a| a.parse().expect("RANGES"));
    let (ratio, idle) = churn::lookup_ratio(pairs, ms, ranges);
    println!(
        "lookups: 1 reader, {} ranges, {} busy phases of {} ms between idle ones: {:.0} lookups/s next to the idle writer, busy/idle {:.3} (median)",
        ranges,
        pairs,
        ms,
        idle,
        ratio
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("lookups") {
        lookup_table(&args[1..]);
        return;
    }
    if args.first().map(String::as_str) == Some("churn") {
        churn_table(&args[1..]);
        return;
    }
    let sizes: Vec<usize> = args
        .iter()
        .map(|a| a.parse().expect("sizes are numbers"))
        .collect();
    let sizes = if sizes.is_empty() {
        vec![1_000, 100_000]
    } else {
        sizes
    };
    bonsai_core::bench::print_table(&sizes);
}
