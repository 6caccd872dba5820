// SPDX-License-Identifier: GPL-2.0

//! Prints the Bonsai structure benchmark: per-insert node allocations,
//! retirements, rotations and the resulting height, for random and
//! sequential inserts and both balance parameter sets.
//!
//! Usage: `bonsai-bench [N...]` (default: 1000 100000).

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("sizes are numbers"))
        .collect();
    let sizes = if sizes.is_empty() {
        vec![1_000, 100_000]
    } else {
        sizes
    };
    bonsai_core::bench::print_table(&sizes);
}
