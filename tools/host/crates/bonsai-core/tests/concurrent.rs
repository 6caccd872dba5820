// SPDX-License-Identifier: GPL-2.0

//! Stress test on real threads: lookups race a writer that inserts and
//! removes ranges and frees retired nodes after grace periods of the host
//! RCU stand-in.  Ranges that are never removed must always be found.

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
