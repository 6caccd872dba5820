// SPDX-License-Identifier: GPL-2.0

//! Benchmarks of the Rust memory-management building blocks.
//!
//! Built into the performance kernel, this runs once at boot and prints a
//! table of what the abstractions under `kernel::mm` and
//! `kernel::sync::rcu` cost, measured against the same work done through
//! the C calls they wrap (the "raw" rows), so that the overhead of the safe
//! layer is visible.  The subsystem benchmarks (GCMA against CMA, Bonsai
//! against the rbtree and maple tree, RCX against RCU) join this module.

use kernel::{
    bindings,
    mm::{buddy::ContigPages, numa},
    prelude::*,
    sync::rcu,
    time::Ktime,
};

module! {
    type: MmBench,
    name: "rust_mm_bench",
    author: "Rust MM developers",
    description: "Benchmarks of the Rust mm abstractions",
    license: "GPL",
}

struct MmBench;

/// Rounds each measurement is repeated for; the best round is reported.
const ROUNDS: u32 = 5;

/// Runs `f` `iters` times and returns the mean cost in nanoseconds.
fn mean_ns(iters: u32, mut f: impl FnMut()) -> i64 {
    let start = Ktime::ktime_get();
    for _ in 0..iters {
        f();
    }
    (Ktime::ktime_get() - start).to_ns() / i64::from(iters)
}

/// Times allocating and freeing a block of `order`, through
/// [`ContigPages`] and through the raw C calls.
///
/// The two are run in alternating rounds and each keeps its best round, so
/// that warm-up and drift do not favour whichever runs second.
fn bench_buddy(order: u32, iters: u32) -> (i64, i64) {
    let mut failures = 0u32;
    let (mut safe, mut raw) = (i64::MAX, i64::MAX);
    for _ in 0..ROUNDS {
        safe = safe.min(mean_ns(iters, || {
            if ContigPages::alloc(None, order, GFP_KERNEL).is_err() {
                failures += 1;
            }
        }));
        raw = raw.min(mean_ns(iters, || {
            // SAFETY: a valid order and node; the block is freed right away.
            let page = unsafe {
                bindings::alloc_pages_node(bindings::NUMA_NO_NODE, bindings::GFP_KERNEL, order)
            };
            if page.is_null() {
                failures += 1;
            } else {
                // SAFETY: `page` is the block of this order allocated just above.
                unsafe { bindings::__free_pages(page, order) };
            }
        }));
    }
    if failures > 0 {
        pr_warn!("order {}: {} allocation failures\n", order, failures);
    }
    (safe, raw)
}

impl kernel::Module for MmBench {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        pr_info!(
            "NUMA: {} possible node(s), {} online; running on node {}\n",
            numa::nr_node_ids(),
            numa::online_nodes(),
            numa::current_node()
        );
        pr_info!(
            "{:<28} {:>10} {:>10}\n",
            "operation (best of 5 rounds)",
            "safe ns",
            "raw ns"
        );
        for order in [0u32, 4, 9] {
            let (safe, raw) = bench_buddy(order, 2000);
            pr_info!(
                "buddy alloc+free order {:<5} {:>10} {:>10}\n",
                order,
                safe,
                raw
            );
        }
        // SAFETY: a module's init runs in process context, with no atomic
        // section active.
        let mut ctx = unsafe { kernel::delay::MaySleep::new() };
        let (mut guard_ns, mut raw_ns) = (i64::MAX, i64::MAX);
        for _ in 0..ROUNDS {
            guard_ns = guard_ns.min(mean_ns(200_000, || drop(rcu::read_lock(&mut ctx))));
            raw_ns = raw_ns.min(mean_ns(200_000, || {
                // SAFETY: balanced lock and unlock on the same task.
                unsafe { bindings::rcu_read_lock() };
                // SAFETY: ends the critical section entered just above.
                unsafe { bindings::rcu_read_unlock() };
            }));
        }
        pr_info!(
            "{:<28} {:>10} {:>10}\n",
            "rcu read lock+unlock",
            guard_ns,
            raw_ns
        );
        Ok(MmBench)
    }
}
