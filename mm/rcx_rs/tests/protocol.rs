// SPDX-License-Identifier: GPL-2.0

//! Cases of the update protocol: the layout of an item's lock state, the
//! phase-1 paths, attempts on named items and the global locks (part of
//! the `rcx_list` suite).

use crate::{
    list::{Item, RcxList},
    node_lock::CACHE_LINE,
    Attempt, GlobalSet, Header, Mode, Rcx, Stats,
};
use core::sync::atomic::{AtomicUsize, Ordering};
use kernel::{
    delay::{self, MaySleep},
    kunit::suite::spawn_workers,
    kunit_expect, kunit_expect_eq,
    mm::numa::{self, NodeId},
    prelude::*,
    sync::{rcu, Arc},
};

/// An item without a value is no larger than a baseline node, 32 bytes
/// (one kmalloc-32 object): its lock state is its slot's and a removal is
/// told by the direction of its link.  The slot's global lock and each of its node words
/// own a cache line, and the slot is the same for the same item.
pub(super) fn item_layout() -> Result {
    // SAFETY: a KUnit case runs in process context, with no atomic
    // section active.
    let mut ctx = unsafe { MaySleep::new() };
    let list: RcxList = RcxList::new(Mode::Fallback)?;
    list.insert(7, ())?;
    kunit_expect_eq!(core::mem::size_of::<Item<()>>(), 32);
    kunit_expect_eq!(
        core::mem::size_of::<Item<Option<KBox<u64>>>>(),
        32 + core::mem::size_of::<usize>()
    );
    list.with_first(&mut ctx, |item: &Item<()>| {
        kunit_expect_eq!(item.key(), 7);
        let slot = list.rcx().slot_of(item);
        kunit_expect!(core::ptr::eq(
            slot.global,
            list.rcx().slot_of(item as *const Item<()>).global
        ));
        let g = slot.global as *const _ as usize;
        kunit_expect_eq!(g % CACHE_LINE, 0);
        kunit_expect_eq!(slot.locks.len(), numa::nr_node_ids());
        for node in NodeId::all() {
            let w = slot.locks.word_addr(node);
            kunit_expect_eq!(w % CACHE_LINE, 0);
            kunit_expect!(
                w + CACHE_LINE <= g || w >= g + CACHE_LINE,
                "word {:#x} on the global lock's line",
                w
            );
        }
    });
    // Items spread over the slots: 65 items of a 512-slot table do not
    // land on a few.  Slab objects come in runs of equally spaced
    // addresses, which Fibonacci hashing spreads perfectly within a run but
    // not across runs: for random runs of 1 to 64 objects 32 to 128 bytes
    // apart, 1 in 50 sets of 65 hit fewer than 48 slots, about 1 in 20000
    // fewer than 32 (a simulation of the hash; KUnit once saw 44).  A hash
    // that ignored the address, or used bits the alignment fixes, would
    // put them on a handful.
    for k in 0..64 {
        list.insert(100 + k, ())?;
    }
    // (A walk is an RCU read-side section: no allocation in it.)
    let mut slots = [0usize; 65];
    let (mut n, mut distinct) = (0, 0);
    list.for_each_item(&mut ctx, |item| {
        let g = list.rcx().slot_of(item).global as *const _ as usize;
        if n < slots.len() {
            if !slots[..distinct].contains(&g) {
                slots[distinct] = g;
                distinct += 1;
            }
            n += 1;
        }
    });
    kunit_expect_eq!(n, 65);
    kunit_expect!(distinct >= 32, "65 items on {} slots", distinct);
    Ok(())
}

/// The emulated transaction takes all words or none: a taken word makes
/// it abort explicitly and leaves the other words free; injected aborts
/// are counted as capacity/other.
pub(super) fn emulated_txn_outcomes() -> Result {
    let rcx = Rcx::new(Mode::Emulated { abort_one_in: 0 })?;
    let a = KBox::pin_init(Header::new(GFP_KERNEL), GFP_KERNEL)?;
    let b = KBox::pin_init(Header::new(GFP_KERNEL), GFP_KERNEL)?;
    let node = numa::current_node();
    kunit_expect_eq!(b.node_locks().try_lock(node, 99), Ok(()));
    kunit_expect!(!rcx.emulated_txn(&[a.view(), b.view()], node, 1, 0));
    kunit_expect_eq!(a.node_locks().holder(node), None);
    kunit_expect_eq!(b.node_locks().holder(node), Some(99));
    kunit_expect_eq!(b.node_locks().unlock(node, 99), Ok(()));
    kunit_expect!(rcx.emulated_txn(&[a.view(), b.view()], node, 1, 0));
    kunit_expect_eq!(a.node_locks().holder(node), Some(1));
    kunit_expect_eq!(b.node_locks().holder(node), Some(1));
    kunit_expect_eq!(a.node_locks().unlock(node, 1), Ok(()));
    kunit_expect_eq!(b.node_locks().unlock(node, 1), Ok(()));
    // One in one: every attempt aborts.
    kunit_expect!(!rcx.emulated_txn(&[a.view()], node, 1, 1));
    kunit_expect_eq!(a.node_locks().holder(node), None);
    let st = rcx.stats();
    kunit_expect_eq!(
        (st.aborts_explicit, st.aborts_other, st.aborts_conflict),
        (1, 1, 0)
    );
    Ok(())
}

/// Returns `MAX_ITEMS` initialised headers, each in a box of its own.
fn boxed_headers() -> Result<KVec<Pin<KBox<Header>>>> {
    let mut hs = KVec::new();
    for _ in 0..crate::MAX_ITEMS {
        let h = KBox::pin_init(Header::new(GFP_KERNEL), GFP_KERNEL)?;
        hs.push(h, GFP_KERNEL)?;
    }
    Ok(hs)
}

/// An attempt holds the current node's word on each of the 1 to
/// `MAX_ITEMS` items it names while its update runs, on every phase-1
/// path, and releases every lock afterwards, also when the update fails
/// its revalidation.  (More than `MAX_ITEMS` items do not compile.)
pub(super) fn attempt_holds_named_items() -> Result {
    let hs = boxed_headers()?;
    let (a, b, c) = (&hs[0], &hs[1], &hs[2]);
    // Inside an attempt preemption is off: the current node is the one
    // the attempt locked for.
    let held = |items: &[&Pin<KBox<Header>>]| {
        let node = numa::current_node();
        items.iter().all(|h| h.node_locks().holder(node).is_some())
    };
    for mode in [
        Mode::Fallback,
        Mode::Emulated { abort_one_in: 0 },
        Mode::Emulated { abort_one_in: 1 },
    ] {
        let rcx = Rcx::new(mode)?.phase1_always();
        kunit_expect_eq!(rcx.attempt([a.view()], || held(&[a])), Attempt::Done);
        // Items that share a slot name its header more than once: it is
        // locked once (twice would wait forever on the updater's own
        // word) and released.
        kunit_expect_eq!(
            rcx.attempt([a.view(), a.view()], || held(&[a])),
            Attempt::Done
        );
        kunit_expect_eq!(
            rcx.attempt([b.view(), a.view(), b.view()], || held(&[a, b])),
            Attempt::Done
        );
        kunit_expect_eq!(
            rcx.attempt([b.view(), a.view()], || held(&[a, b])),
            Attempt::Done
        );
        kunit_expect_eq!(
            rcx.attempt([c.view(), a.view(), b.view()], || held(&[a, b, c])),
            Attempt::Done
        );
        kunit_expect_eq!(rcx.attempt([a.view(), c.view()], || false), Attempt::Retry);
        kunit_expect_eq!(rcx.stats().revalidations, 1);
        for h in hs.iter() {
            for node in NodeId::all() {
                kunit_expect_eq!(h.node_locks().holder(node), None);
            }
        }
    }
    Ok(())
}

/// An update whose global locks are all free takes them at once and
/// skips phase 1: inside it, every named slot's global lock is held and
/// no node word is, on every phase-1 path.  With `phase1_always` the same
/// update holds the node words (see `attempt_holds_named_items`).
pub(super) fn uncontended_attempt_skips_phase1() -> Result {
    let hs = boxed_headers()?;
    let (a, b, c) = (&hs[0], &hs[1], &hs[2]);
    // A trylock of a lock this CPU holds fails at once.
    let globals_only = |items: &[&Pin<KBox<Header>>]| {
        items.iter().all(|h| {
            let hr = h.view();
            NodeId::all().all(|n| hr.locks.holder(n).is_none())
                && GlobalSet::try_lock(&[hr.global]).is_none()
        })
    };
    let all = [a, b, c];
    for mode in [Mode::Fallback, Mode::Emulated { abort_one_in: 1 }] {
        let rcx = Rcx::new(mode)?;
        kunit_expect_eq!(
            rcx.attempt([c.view(), a.view(), b.view()], || globals_only(&all)),
            Attempt::Done
        );
        kunit_expect_eq!(
            rcx.attempt([b.view(), b.view()], || globals_only(&[b])),
            Attempt::Done
        );
        kunit_expect_eq!(rcx.attempt([a.view()], || false), Attempt::Retry);
        // No transaction ran, so none aborted, even one in one.
        kunit_expect_eq!(
            rcx.stats(),
            Stats {
                revalidations: 1,
                ..Stats::default()
            }
        );
        // Everything was released: the locks can be taken again.
        for h in hs.iter() {
            kunit_expect!(GlobalSet::try_lock(&[h.view().global]).is_some());
        }
    }
    Ok(())
}

/// Dropping a guard releases its global lock: taking the lock again, at
/// every rank (ranks past `MAX_ITEMS` share the last subclass), neither
/// deadlocks nor makes lockdep complain.
pub(super) fn global_guard_releases() -> Result {
    let h = KBox::pin_init(Header::new(GFP_KERNEL), GFP_KERNEL)?;
    let mut taken = 0;
    for rank in 0..crate::MAX_ITEMS + 2 {
        let guard = h.view().global.lock(rank);
        taken += 1;
        drop(guard);
    }
    kunit_expect_eq!(taken, crate::MAX_ITEMS + 2);
    Ok(())
}

/// Updates of the phase-1 test below.
const ABORT_INSERTS: u64 = 8;

/// With every transaction aborting, updates still complete: after a
/// bounded number of aborts phase 1 takes the ordered fallback.  The
/// updates run on a worker so that a path that retried forever fails the
/// case instead of hanging the run.
pub(super) fn aborting_txn_falls_back() -> Result {
    // SAFETY: a KUnit case runs in process context, with no atomic
    // section active.
    let ctx = unsafe { MaySleep::new() };
    let rcx = Rcx::new(Mode::Emulated { abort_one_in: 1 })?.phase1_always();
    let l = Arc::new(RcxList::<u64>::with_rcx(rcx)?, GFP_KERNEL)?;
    let done = Arc::new(AtomicUsize::new(0), GFP_KERNEL)?;
    let (lw, dw) = (l.clone(), done.clone());
    let guard = spawn_workers(&ctx, 1, move |_| {
        let (l, done) = (lw.clone(), dw.clone());
        move || {
            for k in 0..ABORT_INSERTS {
                if l.insert(k, k) == Ok(true) {
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }
            for k in (0..ABORT_INSERTS).step_by(2) {
                if l.remove(k) {
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }
            done.fetch_add(1000, Ordering::Release);
        }
    });
    let started = guard.started();
    kunit_expect_eq!(started, 1);
    // Seconds are plenty: the updates take microseconds each.
    for _ in 0..500 {
        if done.load(Ordering::Acquire) >= 1000 {
            break;
        }
        delay::msleep(&ctx, 10);
    }
    let updates = ABORT_INSERTS + ABORT_INSERTS / 2;
    kunit_expect_eq!(done.load(Ordering::Acquire), 1000 + updates as usize);
    if done.load(Ordering::Acquire) < 1000 {
        return Err(EBUSY);
    }
    kunit_expect_eq!(l.check(), Ok((ABORT_INSERTS / 2) as usize));
    // Alone, every update took the fallback once, after exactly the
    // bounded number of (injected) aborts.
    let st = l.stats();
    kunit_expect_eq!(st.fallbacks, updates);
    kunit_expect_eq!(st.aborts_other, updates * crate::MAX_TXN_ABORTS as u64);
    kunit_expect_eq!(st.aborts_conflict + st.aborts_explicit, 0);
    // The fallback path proper never counts a fallback.
    let f = RcxList::<u64>::new(Mode::Fallback)?;
    kunit_expect_eq!(f.insert(1, 0), Ok(true));
    kunit_expect!(f.remove(1));
    kunit_expect_eq!(f.stats(), Stats::default());
    drop(f);
    rcu::barrier(&ctx);
    Ok(())
}
