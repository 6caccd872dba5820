// SPDX-License-Identifier: GPL-2.0

//! Loom model: lock-free lookups racing updates that rotate, commit in
//! place and substitute a successor must never miss a range that stays
//! present, nor see a half-built node; lookups racing range stores that
//! trim, split, remove and rewrite ranges must find every address whose
//! value the store keeps.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" cargo test --release -p bonsai-core --test loom`
//! (`LOOM_MAX_PREEMPTIONS` overrides the default bound of 4).
//!
//! Checked by mutation when this model was written: rotating in place as
//! in the paper's Figure 3, removing the successor without copying the
//! path above it, and publishing with relaxed instead of release stores
//! each make at least one of these tests fail.

#![cfg(loom)]

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use bonsai_core::host_rcu::NoReclaim;
use bonsai_core::tree::{NodeReserve, RetiredList, Stats, Tree};
use kernel::prelude::*;
use loom::thread;

/// Ranges are `[k * 10, k * 10 + 5)` with value `k`.
fn range(k: usize) -> (usize, usize) {
    (k * 10, k * 10 + 5)
}

#[derive(Clone, Copy, Debug)]
enum Update {
    Insert(usize),
    Remove(usize),
}

struct Case {
    /// Keys inserted, in order, before the race.
    keys: &'static [usize],
    /// Updates the writer makes during the race.
    updates: &'static [Update],
    /// Keys present throughout, which the reader looks up.
    watch: &'static [usize],
}

fn diff(after: Stats, before: Stats) -> Stats {
    Stats {
        allocated: after.allocated - before.allocated,
        retired: after.retired - before.retired,
        single_rotations: after.single_rotations - before.single_rotations,
        double_rotations: after.double_rotations - before.double_rotations,
        commits: after.commits - before.commits,
        root_stores: after.root_stores - before.root_stores,
        skipped: after.skipped - before.skipped,
    }
}

/// The reader: every watched key is found by `find` and `find_from`, and
/// comes out of an iteration, which is strictly increasing.
fn read(tree: &Tree<usize>, watch: &[usize]) {
    let g = NoReclaim;
    for &k in watch {
        let (s, e) = range(k);
        let f = tree.find(&g, s + 2).map(|e| (e.start, e.end, *e.value));
        assert_eq!(f, Some((s, e, k)), "find of {k} missed");
        let f = tree.find_from(&g, s).map(|e| (e.start, *e.value));
        assert_eq!(f, Some((s, k)), "find_from of {k} missed");
    }
    let mut last = None;
    let mut seen = 0;
    for e in tree.iter(&g) {
        assert!(last.is_none_or(|l| l < e.start), "iteration out of order");
        last = Some(e.start);
        assert_eq!(e.start, range(*e.value).0, "torn entry");
        seen += usize::from(watch.contains(e.value));
    }
    assert_eq!(seen, watch.len(), "iteration missed a watched range");
}

/// Races the case's updates against a reader; returns the update stats.
fn race(case: Case) -> Stats {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(4);
    }
    let out = Arc::new(Mutex::new(Stats::default()));
    let runs = Arc::new(AtomicUsize::new(0));
    let (out2, runs2) = (out.clone(), runs.clone());
    let Case {
        keys,
        updates,
        watch,
    } = case;
    builder.check(move || {
        runs2.fetch_add(1, Relaxed);
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
        let before = tree.stats();

        let reader = {
            let tree = tree.clone();
            thread::spawn(move || read(&tree, watch))
        };
        let writer = {
            let tree = tree.clone();
            thread::spawn(move || {
                let mut retired = RetiredList::new();
                for &u in updates {
                    reserve.fill(tree.reserve_bound(), GFP_KERNEL).unwrap();
                    // SAFETY: this thread is the only writer.
                    let mut w = unsafe { tree.writer(&mut reserve, &mut retired) };
                    match u {
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
        // SAFETY: both threads are done: no lookup can hold a retired node.
        unsafe {
            retired.free();
            late.free();
        }
        *out2.lock().unwrap() = diff(tree.stats(), before);
    });
    println!("{} interleavings explored", runs.load(Relaxed));
    let d = *out.lock().unwrap();
    d
}

/// Inserting 10 rotates 7-8-9 (single rotation below the root) and
/// commits the rotated subtree in place into 6.
#[test]
fn single_rotation_commit() {
    let d = race(Case {
        keys: &[4, 2, 6, 1, 3, 5, 7, 8, 9],
        updates: &[Update::Insert(10)],
        watch: &[7, 8, 9, 6],
    });
    assert_eq!((d.single_rotations, d.double_rotations), (1, 0), "{d:?}");
    assert_eq!(d.root_stores, 0, "{d:?}");
}

/// Inserting 24 double-rotates 21-25-23 below the root; the new subtree
/// (rooted at 23) is committed in place into 20.
#[test]
fn double_rotation_commit() {
    let d = race(Case {
        keys: &[20, 10, 21, 5, 15, 25, 23],
        updates: &[Update::Insert(24)],
        watch: &[21, 23, 25, 20],
    });
    assert_eq!((d.single_rotations, d.double_rotations), (0, 1), "{d:?}");
    assert_eq!(d.root_stores, 0, "{d:?}");
}

/// Removing 3 (two children) moves its successor 4 up from two levels
/// below: node 5 on the way is copied, and the new subtree is committed
/// in place into 7.
#[test]
fn successor_substitution() {
    let d = race(Case {
        keys: &[7, 3, 11, 1, 5, 9, 13, 0, 2, 4, 6],
        updates: &[Update::Remove(3)],
        watch: &[4, 5, 6, 2],
    });
    assert_eq!(d.root_stores, 0, "{d:?}");
    assert!(d.allocated >= 2, "{d:?}");
}

/// Removing the root 4 moves its successor 5 to the root; the copy of 6
/// on the way is out of balance and rotated.
#[test]
fn root_substitution_with_rotation() {
    let d = race(Case {
        keys: &[4, 2, 6, 1, 5, 8, 7, 9],
        updates: &[Update::Remove(4)],
        watch: &[5, 6, 7, 1],
    });
    assert_eq!(d.root_stores, 1, "{d:?}");
    assert!(d.single_rotations + d.double_rotations >= 1, "{d:?}");
}

/// Removing a leaf unbalances its parent's parent, which rotates the
/// other side up (a rotation above a removal), then an insert rotates
/// again.
#[test]
fn remove_then_insert() {
    let d = race(Case {
        keys: &[4, 2, 6, 1, 3, 5, 8, 7, 9],
        updates: &[Update::Remove(1), Update::Remove(3), Update::Insert(10)],
        watch: &[2, 6, 7, 8, 9],
    });
    assert!(d.single_rotations + d.double_rotations >= 1, "{d:?}");
}

/// Removing the root 10 puts its successor 11 in a fresh node whose left
/// side is now too heavy: a single rotation stores the fresh node into
/// the live node 3 before the new root is published.
#[test]
fn substitute_single_rotation() {
    let d = race(Case {
        keys: &[10, 3, 11, 1, 5, 12, 2, 4, 6],
        updates: &[Update::Remove(10)],
        watch: &[11, 12, 5, 3],
    });
    assert_eq!((d.single_rotations, d.double_rotations), (1, 0), "{d:?}");
}

/// As above, with a double rotation lifting the live node 5.
#[test]
fn substitute_double_rotation() {
    let d = race(Case {
        keys: &[10, 3, 11, 1, 5, 12, 4, 6, 7],
        updates: &[Update::Remove(10)],
        watch: &[11, 12, 5, 6, 1],
    });
    assert_eq!((d.single_rotations, d.double_rotations), (0, 1), "{d:?}");
}

/// A range store of the writer: `Some(v)` stores `v`, `None` clears.
type Store = (usize, usize, Option<usize>);

/// Races the range stores against a reader that looks up addresses whose
/// value stays the same throughout (`watch`: address and value): each
/// must always be found, in a range that contains it, with its value,
/// by `find`, `find_from` and an iteration, whose ends increase.
/// Returns the update stats.
fn race_stores(
    keys: &'static [usize],
    stores: &'static [Store],
    watch: &'static [(usize, usize)],
) -> Stats {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(4);
    }
    let out = Arc::new(Mutex::new(Stats::default()));
    let out2 = out.clone();
    builder.check(move || {
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
        let before = tree.stats();
        let reader = {
            let tree = tree.clone();
            thread::spawn(move || {
                let g = NoReclaim;
                for &(a, v) in watch {
                    let f = tree
                        .find(&g, a)
                        .map(|e| (e.start <= a && a < e.end, *e.value));
                    assert_eq!(f, Some((true, v)), "find of {a:#x} missed");
                    let f = tree.find_from(&g, a).map(|e| (e.start <= a, *e.value));
                    assert_eq!(f, Some((true, v)), "find_from of {a:#x} missed");
                }
                let mut last_end = 0;
                let mut seen = 0;
                for e in tree.iter(&g) {
                    assert!(e.end > last_end, "iteration went back");
                    last_end = e.end;
                    seen += watch
                        .iter()
                        .filter(|&&(a, v)| e.start <= a && a < e.end && v == *e.value)
                        .count();
                }
                assert_eq!(seen, watch.len(), "iteration missed a watched address");
            })
        };
        let writer = {
            let tree = tree.clone();
            thread::spawn(move || {
                let mut retired = RetiredList::new();
                for &(s, e, v) in stores {
                    // SAFETY: this thread is the only writer.
                    let w = unsafe { tree.writer(&mut reserve, &mut retired) };
                    let need = match v {
                        Some(_) => w.store_need(s, e),
                        None => w.clear_need(s, e),
                    };
                    let need = need.unwrap();
                    reserve.fill(need, GFP_KERNEL).unwrap();
                    // SAFETY: as above.
                    let mut w = unsafe { tree.writer(&mut reserve, &mut retired) };
                    match v {
                        Some(v) => w.store(s, e, v).unwrap(),
                        None => w.clear(s, e).unwrap(),
                    }
                    w.check().unwrap();
                }
                retired
            })
        };
        reader.join().unwrap();
        let late = writer.join().unwrap();
        // SAFETY: both threads are done: no lookup can hold a retired node.
        unsafe {
            retired.free();
            late.free();
        }
        *out2.lock().unwrap() = diff(tree.stats(), before);
    });
    let d = *out.lock().unwrap();
    d
}

/// A store over `[12, 33)` trims 1 to `[10, 12)` and 3 to `[33, 35)` and
/// rewrites 2 (the keeper) to the new range, in place: the trimmed parts
/// stay visible throughout.
#[test]
fn store_trims_and_rewrites() {
    let d = race_stores(
        &[3, 1, 5, 0, 2, 4, 6],
        &[(12, 33, Some(100))],
        &[(10, 1), (11, 1), (33, 3), (34, 3), (2, 0), (40, 4)],
    );
    assert_eq!((d.allocated, d.retired), (3, 3), "{d:?}");
}

/// A clear over `[12, 42)` trims 1 and 4 and removes 2 and 3 (the root),
/// while the trimmed parts and the ranges around stay visible.
#[test]
fn clear_trims_and_removes() {
    let d = race_stores(
        &[3, 1, 5, 0, 2, 4, 6],
        &[(12, 42, None)],
        &[(11, 1), (43, 4), (0, 0), (61, 6)],
    );
    assert_eq!(d.retired, d.allocated + 2, "{d:?}");
}

/// A store inside 2 splits it; its lower part stays visible, then a store
/// over `[21, 35)` trims the lower part again, removes the upper part and
/// 3, and rewrites the middle range.
#[test]
fn store_splits_then_overwrites() {
    race_stores(
        &[3, 1, 5, 0, 2, 4, 6],
        &[(22, 23, Some(100)), (21, 35, Some(101))],
        &[(20, 2), (40, 4), (10, 1)],
    );
}
