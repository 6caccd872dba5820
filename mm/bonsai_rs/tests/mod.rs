// SPDX-License-Identifier: GPL-2.0

//! KUnit suites of the Bonsai crate, one file per suite (`tree`:
//! `bonsai_tree`; `store`: `bonsai_store`), with the node allocator's fault
//! injection (`fault`) and what both suites share.

use crate::RangeTree;
use core::sync::atomic::{AtomicBool, AtomicUsize};
use kernel::{
    delay::MaySleep,
    prelude::*,
    sync::{CondVar, Mutex},
};

pub(crate) mod fault;
mod store;
mod tree;

/// Slots of the reference model: slot `k` covers addresses `[16k, 16k+16)`
/// and may hold one range `[16k, 16k + len)`.
const SLOTS: usize = 256;
const SLOT: usize = 16;

/// A digest of the ranges and values of a tree, to tell it unchanged.
fn digest(ctx: &mut MaySleep, t: &RangeTree<u64>) -> u64 {
    let mut h = 0u64;
    t.for_each(ctx, |e| {
        h = h.rotate_left(7) ^ (e.start as u64) ^ ((e.end as u64) << 20) ^ (*e.value << 40);
    });
    h
}

/// Reader threads of the stress test.
const STRESS_READERS: usize = 2;

/// State shared by the stress test and its readers.
#[pin_data]
struct Stress {
    #[pin]
    tree: RangeTree<usize>,
    stop: AtomicBool,
    lookups: AtomicUsize,
    misses: AtomicUsize,
    /// Readers finished.
    #[pin]
    done: Mutex<usize>,
    #[pin]
    done_cv: CondVar,
}
