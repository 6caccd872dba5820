// SPDX-License-Identifier: GPL-2.0

//! Stress test on real threads: lookups race a writer that inserts and
//! removes ranges and frees retired nodes after grace periods of the host
//! RCU stand-in.  Ranges that are never removed must always be found; in
//! the range-store test, addresses whose value no store changes.

#![cfg(not(loom))]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bonsai_core::host_tree::HostTree;
use bonsai_core::rng::Rng;
use bonsai_core::tree::BalanceParams;

/// Even keys stay; odd keys come and go.  Range of key `k`: `[8k, 8k + 5)`.
const KEYS: usize = 4096;

fn stress(params: BalanceParams) {
    let t = Arc::new(HostTree::<usize>::new(params));
    for k in (0..KEYS).step_by(2) {
        t.insert(k * 8, k * 8 + 5, k).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let lookups = Arc::new(AtomicUsize::new(0));
    let readers: Vec<_> = (0..3)
        .map(|i| {
            let (t, stop, lookups) = (t.clone(), stop.clone(), lookups.clone());
            std::thread::spawn(move || {
                let mut rng = Rng::new(100 + i);
                while !stop.load(Relaxed) {
                    let g = t.read();
                    for _ in 0..64 {
                        let k = rng.below(KEYS as u64 / 2) as usize * 2;
                        let e = t.tree().find(&g, k * 8 + 4);
                        let e = e.unwrap_or_else(|| panic!("missed {k}"));
                        assert_eq!((e.start, *e.value), (k * 8, k));
                        // The next range: odd key k + 1 or even key k + 2.
                        let n = t.tree().find_from(&g, k * 8 + 5).map(|e| e.start);
                        if k + 2 < KEYS {
                            assert!(n == Some(k * 8 + 8) || n == Some(k * 8 + 16));
                        }
                    }
                    lookups.fetch_add(64, Relaxed);
                }
            })
        })
        .collect();
    let mut rng = Rng::new(1);
    let mut odd = vec![false; KEYS];
    let deadline = Instant::now() + Duration::from_millis(1500);
    let mut updates = 0;
    while Instant::now() < deadline {
        let k = rng.below(KEYS as u64 / 2) as usize * 2 + 1;
        if odd[k] {
            t.remove(k * 8).unwrap();
        } else {
            t.insert(k * 8, k * 8 + 5, k).unwrap();
        }
        odd[k] = !odd[k];
        updates += 1;
        if updates % 256 == 0 {
            t.reclaim();
        }
    }
    stop.store(true, Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    let report = t.update(|w| w.check().unwrap()).unwrap();
    assert_eq!(report.len, KEYS / 2 + odd.iter().filter(|&&b| b).count());
    assert_eq!(t.tree().stats().skipped, 0);
    println!(
        "{params:?}: {updates} updates, {} lookups",
        lookups.load(Relaxed)
    );
}

#[test]
fn lookups_race_updates() {
    stress(BalanceParams::HIRAI_YAMAMOTO);
}

#[test]
fn lookups_race_updates_paper_params() {
    stress(BalanceParams::PAPER);
}

/// Keys the store test's writer and readers work on: few, so that the
/// readers often run into the ranges being changed.
const HOT: usize = 32;

/// Range stores on real threads: the writer trims, splits, overwrites and
/// rewrites ranges around `[8k, 8k + 3)` of every even key `k` (value
/// `k`), which every store keeps; readers must always find it, in a range
/// that starts at `8k`.
fn stress_stores(params: BalanceParams) {
    let t = Arc::new(HostTree::<usize>::new(params));
    for k in 0..KEYS {
        t.store(k * 8, k * 8 + 5, k).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|i| {
            let (t, stop) = (t.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut rng = Rng::new(200 + i);
                while !stop.load(Relaxed) {
                    let g = t.read();
                    for _ in 0..64 {
                        let k = rng.below(HOT as u64 / 2) as usize * 2;
                        let a = k * 8 + 1 + rng.below(2) as usize;
                        let e = t.tree().find(&g, a);
                        let e = e.unwrap_or_else(|| panic!("missed {a:#x}"));
                        assert_eq!((e.start, *e.value), (k * 8, k), "at {a:#x}");
                        let e = t.tree().find_from(&g, a).map(|e| (e.start, *e.value));
                        assert_eq!(e, Some((k * 8, k)), "find_from {a:#x}");
                    }
                }
            })
        })
        .collect();
    let mut rng = Rng::new(2);
    let deadline = Instant::now() + Duration::from_millis(1500);
    let mut updates = 0;
    while Instant::now() < deadline {
        let k = rng.below(HOT as u64 / 2) as usize * 2;
        let b = k * 8;
        match rng.below(5) {
            // Trims [8k, 8k + 5) and overwrites the odd slot.
            0 => t.store(b + 3, b + 12, k + 1).unwrap(),
            // Rewrites [8k, 8k + 3) (or more) back to [8k, 8k + 5).
            1 => t.store(b, b + 5, k).unwrap(),
            // Splits or trims.
            2 => t.store(b + 4, b + 5, usize::MAX).unwrap(),
            3 => t.clear(b + 4, b + 10).unwrap(),
            // Covers several ranges of the odd slot.
            _ => t.store(b + 6, b + 15, k + 1).unwrap(),
        }
        updates += 1;
        if updates % 256 == 0 {
            t.reclaim();
        }
    }
    stop.store(true, Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    t.update(|w| w.check().unwrap()).unwrap();
    assert_eq!(t.tree().stats().skipped, 0);
    println!("{params:?}: {updates} stores");
}

#[test]
fn lookups_race_stores() {
    stress_stores(BalanceParams::HIRAI_YAMAMOTO);
}
