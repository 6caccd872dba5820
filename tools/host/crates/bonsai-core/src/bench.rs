// SPDX-License-Identifier: GPL-2.0

//! Structure benchmark: what inserts (and removes) cost the tree in node
//! allocations, retirements and rotations, and how deep it gets, for both
//! balance parameter sets.  The `bonsai-bench` binary prints the table.

use std::time::Instant;

use kernel::prelude::*;

use crate::rng::Rng;
use crate::tree::{BalanceParams, NodeReserve, RetiredList, Stats, Tree};

/// Order of the inserted ranges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Shuffled.
    Random,
    /// Ascending addresses.
    Sequential,
}

/// One measurement.
#[derive(Clone, Copy, Debug)]
pub struct Row {
    /// Ranges inserted.
    pub n: usize,
    /// Insert order.
    pub pattern: Pattern,
    /// Balance parameters.
    pub params: BalanceParams,
    /// Counters after the inserts.
    pub insert: Stats,
    /// Counters of removing every range again (random order), minus
    /// `insert`.
    pub remove: Stats,
    /// Height after the inserts.
    pub height: usize,
    /// Nodes out of balance after the inserts (0 with proven parameters).
    pub unbalanced: usize,
    /// Nanoseconds per insert (wall clock, host, single thread).
    pub ns_per_insert: f64,
}

fn sub(a: Stats, b: Stats) -> Stats {
    Stats {
        allocated: a.allocated - b.allocated,
        retired: a.retired - b.retired,
        single_rotations: a.single_rotations - b.single_rotations,
        double_rotations: a.double_rotations - b.double_rotations,
        commits: a.commits - b.commits,
        root_stores: a.root_stores - b.root_stores,
        skipped: a.skipped - b.skipped,
    }
}

/// Inserts `n` ranges in `pattern` order, then removes them all.
pub fn measure(n: usize, pattern: Pattern, params: BalanceParams, seed: u64) -> Row {
    let mut keys: Vec<usize> = (0..n).collect();
    let mut rng = Rng::new(seed);
    if pattern == Pattern::Random {
        rng.shuffle(&mut keys);
    }
    let tree = Tree::with_params(params);
    let mut reserve = NodeReserve::new();
    let mut retired = RetiredList::new();
    let t0 = Instant::now();
    for &k in &keys {
        reserve.fill(tree.reserve_bound(), GFP_KERNEL).unwrap();
        // SAFETY: single-threaded: the only writer.
        let mut w = unsafe { tree.writer(&mut reserve, &mut retired) };
        w.insert(k * 16, k * 16 + 8, k).unwrap();
    }
    let ns_per_insert = t0.elapsed().as_nanos() as f64 / n.max(1) as f64;
    let insert = tree.stats();
    // SAFETY: single-threaded: the only writer.
    let report = unsafe { tree.writer(&mut reserve, &mut retired) }
        .check()
        .unwrap();
    rng.shuffle(&mut keys);
    for &k in &keys {
        reserve.fill(tree.reserve_bound(), GFP_KERNEL).unwrap();
        // SAFETY: single-threaded: the only writer.
        let mut w = unsafe { tree.writer(&mut reserve, &mut retired) };
        w.remove(k * 16).unwrap();
    }
    // SAFETY: single-threaded: no lookup is running.
    unsafe { retired.free() };
    Row {
        n,
        pattern,
        params,
        insert,
        remove: sub(tree.stats(), insert),
        height: report.height,
        unbalanced: report.unbalanced,
        ns_per_insert,
    }
}

fn per(x: usize, n: usize) -> f64 {
    x as f64 / n.max(1) as f64
}

fn name(p: BalanceParams) -> &'static str {
    if p == BalanceParams::HIRAI_YAMAMOTO {
        "(3,2) w=n+1"
    } else if p == BalanceParams::PAPER {
        "paper (4,1) w=n"
    } else {
        "custom"
    }
}

/// Measures every combination and prints a table.
pub fn print_table(sizes: &[usize]) {
    println!(
        "{:>7} {:>10} {:>16} | {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} | {:>6} {:>6} {:>6} | {:>7}",
        "n",
        "order",
        "params",
        "alloc",
        "retire",
        "rot",
        "single",
        "double",
        "height",
        "r.allo",
        "r.reti",
        "r.rot",
        "ns/ins"
    );
    println!(
        "{:>7} {:>10} {:>16} | {:^41} | {:^20} |",
        "", "", "", "per insert", "per remove"
    );
    for &n in sizes {
        for pattern in [Pattern::Random, Pattern::Sequential] {
            for params in [BalanceParams::HIRAI_YAMAMOTO, BalanceParams::PAPER] {
                let r = measure(n, pattern, params, 42);
                let (i, d) = (r.insert, r.remove);
                println!(
                    "{:>7} {:>10} {:>16} | {:>6.3} {:>6.3} {:>6.3} {:>6.3} {:>6.3} {:>6} | {:>6.3} {:>6.3} {:>6.3} | {:>7.0}{}",
                    n,
                    format!("{pattern:?}"),
                    name(params),
                    per(i.allocated, n),
                    per(i.retired, n),
                    per(i.single_rotations + i.double_rotations, n),
                    per(i.single_rotations, n),
                    per(i.double_rotations, n),
                    r.height,
                    per(d.allocated, n),
                    per(d.retired, n),
                    per(d.single_rotations + d.double_rotations, n),
                    r.ns_per_insert,
                    if r.unbalanced > 0 {
                        format!("  ({} nodes out of balance)", r.unbalanced)
                    } else {
                        String::new()
                    }
                );
            }
        }
    }
}
