// SPDX-License-Identifier: GPL-2.0

//! Benchmark of the Bonsai tree, run once at boot.
//!
//! This directory is a module of the Bonsai crate (`mm/bonsai_rs/bonsai.rs`
//! includes it when `CONFIG_BONSAI_BENCH` is set), because a built-in crate
//! cannot be imported by another one: this file holds what both tables
//! share, `structure.rs` the first table and `rate.rs` the second.  Its
//! C side, `bench.c`, calls [`bonsai_bench_run`] from a
//! late initcall and provides the baselines and kernel services declared
//! in [`ffi`].  Two tables go to the kernel log, every line prefixed with
//! `bonsai: bench: `:
//!
//! 1. Structure: `N` ranges inserted in random or sequential order, for
//!    both balance parameter sets, with the nodes allocated, nodes retired
//!    and rotations per insert, and the height reached next to its bound.
//! 2. The paper's isolated-VM microbenchmark (section 7.3): about 1,000
//!    ranges; `R` reader threads look up random addresses (each one inside
//!    a range, as a page fault's would be) while one writer inserts and
//!    removes a range for a given share of every millisecond.  Bonsai
//!    (`RangeTree::with_range`) is compared with an rbtree under an
//!    `rwlock_t` and with a maple tree in RCU mode, in the same run.

use kernel::ffi::c_uint;

use kernel::{delay::MaySleep, prelude::*, time::Ktime};

/// Logs a line of the benchmark: `pr_info!`, or `pr_err!` after `err:`,
/// with `bench: ` after the crate's `bonsai: ` prefix.
macro_rules! out {
    (err: $fmt:literal $($arg:tt)*) => {
        pr_err!(concat!("bench: ", $fmt) $($arg)*)
    };
    ($fmt:literal $($arg:tt)*) => {
        pr_info!(concat!("bench: ", $fmt) $($arg)*)
    };
}

mod rate;
mod structure;

/// The C side, in `mm/bonsai_rs/bench.c`.
mod ffi {
    pub(super) use kernel::bindings::{
        bonsai_bench_cond_resched, bonsai_bench_msleep, bonsai_bench_mt_free,
        bonsai_bench_mt_insert, bonsai_bench_mt_lookup, bonsai_bench_mt_new,
        bonsai_bench_mt_remove, bonsai_bench_online_cpus, bonsai_bench_rb_free,
        bonsai_bench_rb_insert, bonsai_bench_rb_lookup, bonsai_bench_rb_new,
        bonsai_bench_rb_remove, bonsai_bench_thread_join, bonsai_bench_thread_start,
    };

    /// An rbtree of ranges under an `rwlock_t`.
    pub(super) type RbTree = kernel::bindings::bonsai_bench_rb;

    /// A maple tree of ranges in RCU mode.
    pub(super) type MapleTree = kernel::bindings::bonsai_bench_mt;
}

fn msleep(_ctx: &MaySleep, ms: u32) {
    // SAFETY: FFI call without preconditions; `_ctx` proves the caller may
    // sleep.
    unsafe { ffi::bonsai_bench_msleep(ms as c_uint) };
}

fn cond_resched(_ctx: &MaySleep) {
    // SAFETY: FFI call without preconditions; `_ctx` proves the caller may
    // sleep.
    unsafe { ffi::bonsai_bench_cond_resched() };
}

fn online_cpus() -> u32 {
    // SAFETY: FFI call without preconditions.
    unsafe { ffi::bonsai_bench_online_cpus() }
}

fn now_ns() -> i64 {
    Ktime::ktime_get().to_ns()
}

/// xorshift64*: cheap per-thread pseudo-random numbers.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (`n > 0`), with a negligible bias.
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

/// Formats `num / den` with two decimals.
struct Fixed2(u64, u64);

impl core::fmt::Display for Fixed2 {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        use core::fmt::Write;
        let hundredths = self.0.saturating_mul(100).checked_div(self.1).unwrap_or(0);
        let int = hundredths / 100;
        // Right-align in the requested width: digits, the point, 2 decimals.
        let mut len = 4;
        let mut rest = int / 10;
        while rest > 0 {
            len += 1;
            rest /= 10;
        }
        for _ in len..f.width().unwrap_or(0) {
            f.write_char(' ')?;
        }
        write!(f, "{}.{:02}", int, hundredths % 100)
    }
}

/// Page-sized ranges, so that addresses look like those of mappings.
const PAGE: usize = 4096;

/// Runs the benchmark; called once at boot by `bench.c`.
#[no_mangle]
extern "C" fn bonsai_bench_run() {
    // SAFETY: called by the late initcall of `bench.c`:
    // process context, no atomic section active.
    let ctx = unsafe { MaySleep::new() };
    if let Err(e) = structure::structure_table(&ctx) {
        out!(err: "structure table failed: {:?}\n", e);
    }
    if let Err(e) = rate::rate_table(&ctx) {
        out!(err: "microbenchmark failed: {:?}\n", e);
    }
}
