// SPDX-License-Identifier: GPL-2.0

//! Loom model: lock-free lookups racing updates that rotate, commit in
//! place, and substitute a successor, must never miss a range that stays
//! present, nor see a half-built node.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" cargo test --release -p bonsai-core --test loom`.

#![cfg(loom)]

use std::sync::Arc;

use bonsai_core::host_rcu::NoReclaim;
use bonsai_core::tree::{NodeReserve, RetiredList, Stats, Tree};
use kernel::prelude::*;
use loom::thread;

/// Ranges are `[k * 10, k * 10 + 5)` with value `k`.
fn range(k: usize) -> (usize, usize) {
    (k * 10, k * 10 + 5)
}

#[derive(Clone, Copy)]
enum Update {
    Insert(usize),
    Remove(usize),
}

/// Builds a tree from `keys` (in order), then races one `update` against
/// a reader looking up each key of `watch`, which stays present.
/// Returns the stats delta of the update.
fn race(keys: &'static [usize], update: Update, watch: &'static [usize]) -> Stats {
    let mut delta = Stats::default();
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    let out = Arc::new(std::sync::Mutex::new(Stats::default()));
    let out2 = out.clone();
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let runs2 = runs.clone();
    builder.check(move || {
        runs2.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tree = Arc::new(Tree::new());
        let mut reserve = NodeReserve::new();
        let mut retired = RetiredList::new();
        for &k in keys {
            reserve.fill(tree.reserve_bound(), GFP_KERNEL).unwrap();
            // SAFETY: no other writer or reader exists yet.
            let mut w = unsafe { tree.writer(&mut reserve, &mut retired) };
            let (s, e) = range(k);
            w.insert(s, e, k).unwrap();
        }
        reserve.fill(tree.reserve_bound(), GFP_KERNEL).unwrap();
        let before = tree.stats();

        let reader = {
            let tree = tree.clone();
            thread::spawn(move || {
                let g = NoReclaim;
                for &k in watch {
                    let (s, _) = range(k);
                    let e = tree.find(&g, s + 2);
                    assert!(e.is_some(), "lookup of {k} missed");
                    let e = e.unwrap();
                    assert_eq!((e.start, *e.value), (s, k));
                }
            })
        };
        let writer = {
            let tree = tree.clone();
            thread::spawn(move || {
                let mut retired = RetiredList::new();
                {
                    // SAFETY: this thread is the only writer.
                    let mut w = unsafe { tree.writer(&mut reserve, &mut retired) };
                    match update {
                        Update::Insert(k) => {
                            let (s, e) = range(k);
                            w.insert(s, e, k).unwrap();
                        }
                        Update::Remove(k) => w.remove(range(k).0).unwrap(),
                    }
                    w.check().unwrap();
                }
                retired
            })
        };
        reader.join().unwrap();
        let late = writer.join().unwrap();
        // Both threads are done: no lookup can hold a retired node.
        // SAFETY: as above.
        unsafe {
            retired.free();
            late.free();
        }
        let after = tree.stats();
        *out2.lock().unwrap() = Stats {
            allocated: after.allocated - before.allocated,
            retired: after.retired - before.retired,
            single_rotations: after.single_rotations - before.single_rotations,
            double_rotations: after.double_rotations - before.double_rotations,
            commits: after.commits - before.commits,
            root_stores: after.root_stores - before.root_stores,
            skipped: after.skipped - before.skipped,
        };
    });
    std::mem::swap(&mut delta, &mut out.lock().unwrap());
    println!("{} interleavings explored", runs.load(std::sync::atomic::Ordering::Relaxed));
    delta
}

/// Inserting 10 rotates 7-8-9 (single rotation below the root) and
/// commits the rotated subtree in place into 6.
#[test]
fn single_rotation_commit() {
    let d = race(
        &[4, 2, 6, 1, 3, 5, 7, 8, 9],
        Update::Insert(10),
        &[7, 8, 9, 6],
    );
    assert_eq!((d.single_rotations, d.double_rotations), (1, 0), "{d:?}");
    assert_eq!(d.root_stores, 0, "{d:?}");
}

/// Inserting 24 double-rotates 21-25-23 below the root; the new subtree
/// (rooted at 23) is committed in place into 20.
#[test]
fn double_rotation_commit() {
    let d = race(
        &[20, 10, 21, 5, 15, 25, 23],
        Update::Insert(24),
        &[21, 23, 25, 20],
    );
    assert_eq!((d.single_rotations, d.double_rotations), (0, 1), "{d:?}");
    assert_eq!(d.root_stores, 0, "{d:?}");
}

/// Removing 3 (two children) moves its successor 4 up from two levels
/// below: the path 5 is copied and committed in place into 7.
#[test]
fn successor_substitution() {
    let d = race(
        &[7, 3, 11, 1, 5, 9, 13, 0, 2, 4, 6],
        Update::Remove(3),
        &[4, 5, 6, 2],
    );
    assert_eq!(d.root_stores, 0, "{d:?}");
    assert!(d.allocated >= 2, "{d:?}");
}

/// Removing the root 4 of a tree whose right side is deep moves its
/// successor 5 to the root and rebalances; 5 must never be missed.
#[test]
fn root_substitution_with_rotation() {
    let d = race(&[4, 2, 6, 1, 5, 8, 7, 9], Update::Remove(4), &[5, 6, 7, 1]);
    assert_eq!(d.root_stores, 1, "{d:?}");
    assert!(d.single_rotations + d.double_rotations >= 1, "{d:?}");
}
