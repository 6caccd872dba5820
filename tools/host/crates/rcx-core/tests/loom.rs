// SPDX-License-Identifier: GPL-2.0

//! Loom model of the RCX two-phase update: two updaters, three items.
//!
//! Every interleaving (up to loom's preemption bound) must keep each item
//! to one updater in its critical section (`update` asserts it), finish
//! (loom reports a deadlock if all threads block, and a livelock as an
//! exhausted branch budget), and leave every lock free.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" cargo test --release -p rcx-core --test loom`.

#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use rcx_core::{update, update_try_globals_first, Item, Phase1};

/// Updater A names items 0 and 1 on `node_a`, updater B items 2 and 1
/// (listed in reverse, so only the address sort orders them) on `node_b`.
fn race(node_a: usize, how_a: Phase1, node_b: usize, how_b: Phase1) {
    loom::model(move || {
        let items = Arc::new([Item::new(), Item::new(), Item::new()]);
        let i2 = items.clone();
        let b = thread::spawn(move || {
            update(&mut [&i2[2], &i2[1]], node_b, 2, how_b, || {});
        });
        update(&mut [&items[0], &items[1]], node_a, 1, how_a, || {});
        b.join().unwrap();
        assert!(items.iter().all(Item::is_free));
    });
}

#[test]
fn same_node_fallback() {
    race(0, Phase1::Fallback, 0, Phase1::Fallback);
}

#[test]
fn same_node_emulated() {
    race(0, Phase1::Emulated, 0, Phase1::Emulated);
}

#[test]
fn same_node_mixed() {
    race(0, Phase1::Fallback, 0, Phase1::Emulated);
}

#[test]
fn two_nodes_fallback() {
    race(0, Phase1::Fallback, 1, Phase1::Fallback);
}

#[test]
fn two_nodes_emulated() {
    race(0, Phase1::Emulated, 1, Phase1::Emulated);
}

/// Three items all named by both updaters, in opposite orders: only the
/// address sort keeps the two from waiting on each other in a cycle.
fn opposite_orders(node_a: usize, how_a: Phase1, node_b: usize, how_b: Phase1) {
    loom::model(move || {
        let items = Arc::new([Item::new(), Item::new(), Item::new()]);
        let i2 = items.clone();
        let b = thread::spawn(move || {
            update(&mut [&i2[2], &i2[1], &i2[0]], node_b, 2, how_b, || {});
        });
        update(
            &mut [&items[0], &items[1], &items[2]],
            node_a,
            1,
            how_a,
            || {},
        );
        b.join().unwrap();
        assert!(items.iter().all(Item::is_free));
    });
}

#[test]
fn opposite_orders_same_node_fallback() {
    opposite_orders(0, Phase1::Fallback, 0, Phase1::Fallback);
}

#[test]
fn opposite_orders_two_nodes_fallback() {
    opposite_orders(0, Phase1::Fallback, 1, Phase1::Fallback);
}

#[test]
fn opposite_orders_two_nodes_mixed() {
    opposite_orders(0, Phase1::Emulated, 1, Phase1::Fallback);
}

/// Updater A names item 1 twice and item 0 (two of its items share a
/// slot), updater B items 1 and 2: A takes item 1 once, or it would wait
/// for itself, and the two still exclude each other on item 1.
fn slot_named_twice(how_a: Phase1, how_b: Phase1) {
    loom::model(move || {
        let items = Arc::new([Item::new(), Item::new(), Item::new()]);
        let i2 = items.clone();
        let b = thread::spawn(move || {
            update(&mut [&i2[1], &i2[2]], 0, 2, how_b, || {});
        });
        update(&mut [&items[1], &items[0], &items[1]], 0, 1, how_a, || {});
        b.join().unwrap();
        assert!(items.iter().all(Item::is_free));
    });
}

#[test]
fn slot_named_twice_fallback() {
    slot_named_twice(Phase1::Fallback, Phase1::Fallback);
}

#[test]
fn slot_named_twice_emulated() {
    slot_named_twice(Phase1::Emulated, Phase1::Fallback);
}

/// Updater A tries the global locks first (items 0 and 1), updater B goes
/// through phase 1 (items 1 and 2, or all three in the opposite order):
/// A's tries never wait, so the two still exclude each other on item 1
/// and neither waits forever, whichever of A's paths runs.
fn try_first_against_phase1(node_b: usize, how_b: Phase1, all_three: bool) {
    loom::model(move || {
        let items = Arc::new([Item::new(), Item::new(), Item::new()]);
        let i2 = items.clone();
        let b = thread::spawn(move || {
            if all_three {
                update(&mut [&i2[2], &i2[1], &i2[0]], node_b, 2, how_b, || {});
            } else {
                update(&mut [&i2[2], &i2[1]], node_b, 2, how_b, || {});
            }
        });
        update_try_globals_first(&mut [&items[1], &items[0]], 0, 1, Phase1::Fallback, || {});
        b.join().unwrap();
        assert!(items.iter().all(Item::is_free));
    });
}

#[test]
fn try_first_against_fallback_same_node() {
    try_first_against_phase1(0, Phase1::Fallback, false);
}

#[test]
fn try_first_against_emulated_two_nodes() {
    try_first_against_phase1(1, Phase1::Emulated, false);
}

#[test]
fn try_first_against_opposite_order() {
    try_first_against_phase1(0, Phase1::Fallback, true);
}

/// Both updaters try the global locks first, on overlapping items named
/// in opposite orders: a failed try releases what it took and falls back
/// to phase 1, so neither deadlocks nor overlaps the other.
#[test]
fn try_first_both() {
    loom::model(|| {
        let items = Arc::new([Item::new(), Item::new(), Item::new()]);
        let i2 = items.clone();
        let b = thread::spawn(move || {
            update_try_globals_first(&mut [&i2[2], &i2[1], &i2[0]], 1, 2, Phase1::Fallback, || {});
        });
        update_try_globals_first(&mut [&items[0], &items[1]], 0, 1, Phase1::Fallback, || {});
        b.join().unwrap();
        assert!(items.iter().all(Item::is_free));
    });
}
