// SPDX-License-Identifier: GPL-2.0

//! Table 1 of the benchmark: the structure of trees built by random and
//! sequential inserts, for both balance parameter sets.

use kernel::{delay::MaySleep, prelude::*};

use super::{cond_resched, now_ns, Fixed2, Rng, PAGE};
use crate::tree;

/// Figures of one tree built by [`build`].
struct Shape {
    stats: tree::Stats,
    report: tree::CheckReport,
    ns: i64,
}

/// Inserts `n` page-sized ranges into a private tree, in random or
/// ascending order, and returns its counters and shape.
///
/// The tree is local and never published, so this function is its only
/// writer and it has no reader: replaced nodes are freed without waiting
/// for a grace period.
fn build(
    ctx: &MaySleep,
    params: tree::BalanceParams,
    n: usize,
    random: bool,
    seed: u64,
) -> Result<Shape> {
    let t = tree::Tree::<usize>::with_params(params);
    let mut reserve = tree::NodeReserve::new();
    let mut retired = tree::RetiredList::new();
    let mut rng = Rng::new(seed);
    let start_ns = now_ns();
    let mut i = 0;
    while i < n {
        // Random pages out of 2^28; a collision (EEXIST) just draws again.
        let page = if random {
            rng.below(1 << 28) as usize
        } else {
            i
        };
        reserve.fill(t.reserve_bound(), GFP_KERNEL)?;
        let inserted = {
            // SAFETY: `t` is local to this function: no other writer exists.
            let mut w = unsafe { t.writer(&mut reserve, &mut retired) };
            w.insert(page * PAGE, (page + 1) * PAGE, page + 1)
        };
        match inserted {
            Ok(()) => i += 1,
            Err(e) if e.error == EEXIST => {}
            Err(e) => return Err(e.error),
        }
        if retired.len() >= 4096 {
            let old = core::mem::take(&mut retired);
            // SAFETY: no lookup ever ran on `t`: nobody else can hold a node.
            unsafe { old.free() };
        }
        if i % 1024 == 0 {
            cond_resched(ctx);
        }
    }
    let ns = now_ns() - start_ns;
    let report = {
        // SAFETY: as above, this is the only writer of the local tree.
        let w = unsafe { t.writer(&mut reserve, &mut retired) };
        w.check().map_err(|e| {
            out!(err: "tree check failed: {:?}\n", e);
            EINVAL
        })?
    };
    let stats = t.stats();
    drop(t);
    // SAFETY: no lookup ever ran on the tree these nodes came from.
    unsafe { retired.free() };
    Ok(Shape { stats, report, ns })
}

pub(super) fn structure_table(ctx: &MaySleep) -> Result {
    out!("Bonsai structure: per insert, and height (root-to-leaf nodes) vs its bound\n");
    out!(
        "{:<8} {:>7} {:<6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>5} {:>5} {:>7}\n",
        "params",
        "N",
        "order",
        "alloc",
        "retire",
        "rot1",
        "rot2",
        "commit",
        "height",
        "bound",
        "unbal",
        "ns/ins"
    );
    let sets = [
        ("hirai", tree::BalanceParams::HIRAI_YAMAMOTO),
        ("paper", tree::BalanceParams::PAPER),
    ];
    for n in [1_000usize, 100_000] {
        for random in [true, false] {
            for (name, params) in sets {
                let s = build(ctx, params, n, random, n as u64)?;
                let per = |c: usize| Fixed2(c as u64, n as u64);
                out!(
                    "{:<8} {:>7} {:<6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>5} {:>5} {:>7}\n",
                    name,
                    n,
                    if random { "random" } else { "seq" },
                    per(s.stats.allocated),
                    per(s.stats.retired),
                    per(s.stats.single_rotations),
                    per(s.stats.double_rotations),
                    per(s.stats.commits),
                    s.report.height,
                    params.max_height(n, 1000),
                    s.report.unbalanced,
                    s.ns / n as i64
                );
            }
        }
    }
    Ok(())
}
