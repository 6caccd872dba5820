// SPDX-License-Identifier: GPL-2.0

//! The `rcx_stress` suite: concurrent updaters on shared keys, run
//! separately with more CPUs.

use super::Set;
use crate::{hash::RcxHash, list::RcxList, Attempt, Header, Mode, Rcx};
use core::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use kernel::{
    delay::{self, MaySleep},
    kunit::suite::{spawn_workers, TestRng as Rng},
    kunit_expect_eq,
    mm::numa::{self, NodeId},
    prelude::*,
    sync::{rcu, Arc},
};

/// Workers of a stress case.
const STRESS_WORKERS: usize = 4;
/// Operations of each worker.
const STRESS_OPS: usize = 20000;
/// Keys of the stress cases: few, so that updates contend.
const STRESS_KEYS: u64 = 48;

/// A structure under stress, with what its workers did to each key.
struct Stress<S> {
    s: S,
    /// Successful inserts minus successful removes, per key.
    net: KVec<AtomicIsize>,
    errors: AtomicUsize,
    done: AtomicUsize,
}

fn stress_worker<S: Set>(st: Arc<Stress<S>>, seed: u64) {
    // SAFETY: the body of a work item of `spawn_workers`: process context,
    // no atomic section active.
    let mut ctx = unsafe { MaySleep::new() };
    let mut rng = Rng::new(seed);
    for i in 0..STRESS_OPS {
        let k = rng.below_u64(STRESS_KEYS);
        match rng.below_u64(4) {
            0 => match st.s.ins(k) {
                Ok(true) => {
                    st.net[k as usize].fetch_add(1, Ordering::Relaxed);
                }
                Ok(false) => {}
                Err(_) => {
                    st.errors.fetch_add(1, Ordering::Relaxed);
                }
            },
            1 => {
                if st.s.rem(k) {
                    st.net[k as usize].fetch_sub(1, Ordering::Relaxed);
                }
            }
            _ => {
                // A value, if found, is always the one inserted with it.
                if st.s.has(k) && st.s.val(&mut ctx, k).is_some_and(|v| v != k * 3) {
                    st.errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        if i % 64 == 0 {
            delay::cond_resched(&ctx);
        }
    }
    st.done.fetch_add(1, Ordering::Release);
}

/// Runs the workers on the unbound workqueue, waits for them, then checks
/// the structure: sorted, no duplicates, and exactly the keys that the
/// successful operations leave present.
fn stress<S: Set + Send + Sync + 'static>(s: S, name: &str) -> Result {
    // SAFETY: called by the KUnit cases below, in their process context,
    // with no atomic section active.
    let ctx = unsafe { MaySleep::new() };
    let mut net = KVec::with_capacity(STRESS_KEYS as usize, GFP_KERNEL)?;
    for k in 0..STRESS_KEYS {
        // Start half full.
        let present = k % 2 == 0;
        if present {
            s.ins(k)?;
        }
        net.push(AtomicIsize::new(present as isize), GFP_KERNEL)?;
    }
    let st = Arc::new(
        Stress {
            s,
            net,
            errors: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
        },
        GFP_KERNEL,
    )?;
    let guard = spawn_workers(&ctx, STRESS_WORKERS, |i| {
        let w = st.clone();
        move || stress_worker(w, 0x5eed_0000 + i as u64)
    });
    let workers = guard.started();
    while st.done.load(Ordering::Acquire) < workers {
        delay::msleep(&ctx, 10);
    }
    kunit_expect_eq!(workers, STRESS_WORKERS);
    kunit_expect_eq!(st.errors.load(Ordering::Relaxed), 0);
    let mut present = 0;
    let mut bad = 0;
    for k in 0..STRESS_KEYS {
        let n = st.net[k as usize].load(Ordering::Relaxed);
        if (n != 0 && n != 1) || st.s.has(k) != (n == 1) {
            bad += 1;
        }
        present += (n == 1) as usize;
    }
    kunit_expect_eq!(bad, 0);
    kunit_expect_eq!(st.s.check(), Ok(present));
    let c = st.s.stats();
    pr_info!(
        concat!(
            "stress {}: {} workers x {} ops on {} cpus; ",
            "aborts: {} conflict, {} other, {} explicit; {} fallbacks; {} revalidations\n"
        ),
        name,
        workers,
        STRESS_OPS,
        kernel::processor::nr_cpu_ids(),
        c.aborts_conflict,
        c.aborts_other,
        c.aborts_explicit,
        c.fallbacks,
        c.revalidations
    );
    rcu::barrier(&ctx);
    Ok(())
}

fn stress_list_fallback() -> Result {
    stress(RcxList::<u64>::new(Mode::Fallback)?, "list/fallback")
}

/// Every update through the emulated transaction, contended or not.
fn stress_list_emulated() -> Result {
    let rcx = Rcx::new(Mode::Emulated { abort_one_in: 16 })?.phase1_always();
    stress(RcxList::<u64>::with_rcx(rcx)?, "list/emulated")
}

fn stress_hash_fallback() -> Result {
    stress(RcxHash::<u64>::new(Mode::Fallback, 4)?, "hash/fallback")
}

/// Uncontended updates take their global locks at once, the others the
/// emulated transaction.
fn stress_hash_emulated() -> Result {
    let h = RcxHash::<u64>::new(Mode::Emulated { abort_one_in: 16 }, 4)?;
    stress(h, "hash/emulated")
}

/// Two lock slots for all items: concurrent updates share slots all the
/// time, in and across updates (emulated transactions, which abort on a
/// word the other holds, and the ordered fallback mixed).
fn stress_list_shared_slots() -> Result {
    let rcx = Rcx::with_slots(Mode::Emulated { abort_one_in: 16 }, 2)?;
    stress(RcxList::<u64>::with_rcx(rcx)?, "list/2 slots")
}

/// An update that finds a global lock held goes through phase 1: a worker
/// holds `b`'s global lock until it sees a node word of `b` taken, which
/// only phase 1 takes; the update, which names `a` and `b`, then runs
/// holding its node's words.  (Needs two CPUs: the worker spins with the
/// lock held.)
fn contended_attempt_takes_phase1() -> Result {
    // SAFETY: a KUnit case runs in process context, with no atomic
    // section active.
    let ctx = unsafe { MaySleep::new() };
    let a = KBox::pin_init(Header::new(GFP_KERNEL), GFP_KERNEL)?;
    let b = Arc::pin_init(Header::new(GFP_KERNEL), GFP_KERNEL)?;
    // 1: the worker holds the lock; 2: it saw a word and released it;
    // 3: it gave up waiting and released it.
    let state = Arc::new(AtomicUsize::new(0), GFP_KERNEL)?;
    let (bw, sw) = (b.clone(), state.clone());
    let guard = spawn_workers(&ctx, 1, move |_| {
        let (b, state) = (bw.clone(), sw.clone());
        move || {
            let hr = Header::view(&b);
            let guard = hr.global.lock(0);
            state.store(1, Ordering::Release);
            let t0 = kernel::time::Ktime::ktime_get();
            let seen = loop {
                if NodeId::all().any(|n| hr.locks.holder(n).is_some()) {
                    break true;
                }
                if (kernel::time::Ktime::ktime_get() - t0).to_ms() > 5000 {
                    break false;
                }
                kernel::processor::cpu_relax();
            };
            drop(guard);
            state.store(if seen { 2 } else { 3 }, Ordering::Release);
        }
    });
    let started = guard.started();
    kunit_expect_eq!(started, 1);
    if started != 1 {
        return Err(ENOMEM);
    }
    while state.load(Ordering::Acquire) == 0 {
        delay::msleep(&ctx, 1);
    }
    let rcx = Rcx::new(Mode::Fallback)?;
    let words_held = |h: &Header| h.node_locks().holder(numa::current_node()).is_some();
    kunit_expect_eq!(
        rcx.attempt([a.view(), Header::view(&b)], || {
            words_held(&a) && words_held(&b)
        }),
        Attempt::Done
    );
    while state.load(Ordering::Acquire) == 1 {
        delay::msleep(&ctx, 1);
    }
    kunit_expect_eq!(state.load(Ordering::Acquire), 2);
    Ok(())
}

kernel::kunit_suite! {
    name: "rcx_stress",
    cases: [
        #[slow] stress_list_fallback,
        #[slow] stress_list_emulated,
        #[slow] stress_hash_fallback,
        #[slow] stress_hash_emulated,
        #[slow] stress_list_shared_slots,
        contended_attempt_takes_phase1,
    ],
}
