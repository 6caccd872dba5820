// SPDX-License-Identifier: GPL-2.0

//! KUnit suites of the RCX crate.

use crate::{
    hash::RcxHash,
    list::{Item, RcxList, KEY_LIMIT},
    node_lock::{NodeLocks, CACHE_LINE},
    Attempt, GlobalSet, Header, Mode, Rcx, Stats,
};
use core::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use kernel::{
    delay::{self, MaySleep},
    kunit::suite::{spawn_workers, TestRng as Rng},
    kunit_expect, kunit_expect_eq,
    mm::numa::{self, NodeId},
    prelude::*,
    sync::{rcu, Arc},
};

/// Every node has a word, and every word owns a whole cache line.
fn node_lock_layout() -> Result {
    let locks = NodeLocks::new(GFP_KERNEL)?;
    kunit_expect_eq!(locks.len(), numa::nr_node_ids());
    let mut prev: Option<usize> = None;
    for node in NodeId::all() {
        let addr = locks.word_addr(node);
        kunit_expect_eq!(addr % CACHE_LINE, 0);
        if let Some(p) = prev {
            kunit_expect!(
                addr - p >= CACHE_LINE,
                "words {:#x} and {:#x} share a line",
                p,
                addr
            );
        }
        prev = Some(addr);
    }
    Ok(())
}

/// A word is won by one token at a time, and words of different nodes are
/// independent.
fn node_lock_exclusion() -> Result {
    let locks = NodeLocks::new(GFP_KERNEL)?;
    let here = numa::current_node();
    kunit_expect_eq!(locks.try_lock(here, 0), Err(EINVAL));
    kunit_expect_eq!(locks.try_lock(here, 1), Ok(()));
    kunit_expect_eq!(locks.holder(here), Some(1));
    kunit_expect_eq!(locks.try_lock(here, 2), Err(EBUSY));
    kunit_expect_eq!(locks.unlock(here, 2), Err(EPERM));
    kunit_expect_eq!(locks.holder(here), Some(1));
    for node in NodeId::all().filter(|n| *n != here) {
        kunit_expect_eq!(locks.holder(node), None);
        kunit_expect_eq!(locks.try_lock(node, 2), Ok(()));
        kunit_expect_eq!(locks.unlock(node, 2), Ok(()));
    }
    kunit_expect_eq!(locks.unlock(here, 1), Ok(()));
    kunit_expect_eq!(locks.holder(here), None);
    kunit_expect_eq!(locks.try_lock(here, 2), Ok(()));
    Ok(())
}

kernel::kunit_suite! {
    name: "rcx_node_lock",
    cases: [node_lock_layout, node_lock_exclusion],
}

/// An item without a value is no larger than a baseline node, 32 bytes
/// (one kmalloc-32 object): its lock state is its slot's and a removal is
/// told by the direction of its link.  The slot's global lock and each of its node words
/// own a cache line, and the slot is the same for the same item.
fn item_layout() -> Result {
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
fn emulated_txn_outcomes() -> Result {
    let rcx = Rcx::new(Mode::Emulated { abort_one_in: 0 })?;
    let a = KBox::new(Header::new(GFP_KERNEL)?, GFP_KERNEL)?;
    let b = KBox::new(Header::new(GFP_KERNEL)?, GFP_KERNEL)?;
    // SAFETY: the headers are at their final addresses, in their boxes,
    // and not used yet.
    unsafe {
        a.init();
        b.init();
    }
    let node = numa::current_node();
    kunit_expect_eq!(b.node_locks().try_lock(node, 99), Ok(()));
    kunit_expect!(!rcx.emulated_txn(&[a.as_ref(), b.as_ref()], node, 1, 0));
    kunit_expect_eq!(a.node_locks().holder(node), None);
    kunit_expect_eq!(b.node_locks().holder(node), Some(99));
    kunit_expect_eq!(b.node_locks().unlock(node, 99), Ok(()));
    kunit_expect!(rcx.emulated_txn(&[a.as_ref(), b.as_ref()], node, 1, 0));
    kunit_expect_eq!(a.node_locks().holder(node), Some(1));
    kunit_expect_eq!(b.node_locks().holder(node), Some(1));
    kunit_expect_eq!(a.node_locks().unlock(node, 1), Ok(()));
    kunit_expect_eq!(b.node_locks().unlock(node, 1), Ok(()));
    // One in one: every attempt aborts.
    kunit_expect!(!rcx.emulated_txn(&[a.as_ref()], node, 1, 1));
    kunit_expect_eq!(a.node_locks().holder(node), None);
    let st = rcx.stats();
    kunit_expect_eq!(
        (st.aborts_explicit, st.aborts_other, st.aborts_conflict),
        (1, 1, 0)
    );
    Ok(())
}

/// Returns `MAX_ITEMS` initialised headers, each in a box of its own.
fn boxed_headers() -> Result<KVec<KBox<Header>>> {
    let mut hs = KVec::new();
    for _ in 0..crate::MAX_ITEMS {
        let h = KBox::new(Header::new(GFP_KERNEL)?, GFP_KERNEL)?;
        // SAFETY: the header is at its final address, in its box (moving
        // the box does not move it), and not used yet.
        unsafe { h.init() };
        hs.push(h, GFP_KERNEL)?;
    }
    Ok(hs)
}

/// An attempt holds the current node's word on each of the 1 to
/// `MAX_ITEMS` items it names while its update runs, on every phase-1
/// path, and releases every lock afterwards, also when the update fails
/// its revalidation.  (More than `MAX_ITEMS` items do not compile.)
fn attempt_holds_named_items() -> Result {
    let hs = boxed_headers()?;
    let (a, b, c) = (&hs[0], &hs[1], &hs[2]);
    // Inside an attempt preemption is off: the current node is the one
    // the attempt locked for.
    let held = |items: &[&KBox<Header>]| {
        let node = numa::current_node();
        items.iter().all(|h| h.node_locks().holder(node).is_some())
    };
    for mode in [
        Mode::Fallback,
        Mode::Emulated { abort_one_in: 0 },
        Mode::Emulated { abort_one_in: 1 },
    ] {
        let rcx = Rcx::new(mode)?.phase1_always();
        kunit_expect_eq!(rcx.attempt([a.as_ref()], || held(&[a])), Attempt::Done);
        // Items that share a slot name its header more than once: it is
        // locked once (twice would wait forever on the updater's own
        // word) and released.
        kunit_expect_eq!(
            rcx.attempt([a.as_ref(), a.as_ref()], || held(&[a])),
            Attempt::Done
        );
        kunit_expect_eq!(
            rcx.attempt([b.as_ref(), a.as_ref(), b.as_ref()], || held(&[a, b])),
            Attempt::Done
        );
        kunit_expect_eq!(
            rcx.attempt([b.as_ref(), a.as_ref()], || held(&[a, b])),
            Attempt::Done
        );
        kunit_expect_eq!(
            rcx.attempt([c.as_ref(), a.as_ref(), b.as_ref()], || held(&[a, b, c])),
            Attempt::Done
        );
        kunit_expect_eq!(
            rcx.attempt([a.as_ref(), c.as_ref()], || false),
            Attempt::Retry
        );
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
fn uncontended_attempt_skips_phase1() -> Result {
    let hs = boxed_headers()?;
    let (a, b, c) = (&hs[0], &hs[1], &hs[2]);
    // A trylock of a lock this CPU holds fails at once.
    let globals_only = |items: &[&KBox<Header>]| {
        items.iter().all(|h| {
            let hr = h.as_ref();
            NodeId::all().all(|n| hr.locks.holder(n).is_none())
                && GlobalSet::try_lock(&[hr.global]).is_none()
        })
    };
    let all = [a, b, c];
    for mode in [Mode::Fallback, Mode::Emulated { abort_one_in: 1 }] {
        let rcx = Rcx::new(mode)?;
        kunit_expect_eq!(
            rcx.attempt([c.as_ref(), a.as_ref(), b.as_ref()], || globals_only(&all)),
            Attempt::Done
        );
        kunit_expect_eq!(
            rcx.attempt([b.as_ref(), b.as_ref()], || globals_only(&[b])),
            Attempt::Done
        );
        kunit_expect_eq!(rcx.attempt([a.as_ref()], || false), Attempt::Retry);
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
            kunit_expect!(GlobalSet::try_lock(&[h.as_ref().global]).is_some());
        }
    }
    Ok(())
}

/// Dropping a guard releases its global lock: taking the lock again, at
/// every rank (ranks past `MAX_ITEMS` share the last subclass), neither
/// deadlocks nor makes lockdep complain.
fn global_guard_releases() -> Result {
    let h = KBox::new(Header::new(GFP_KERNEL)?, GFP_KERNEL)?;
    // SAFETY: the header is at its final address, in its box, and not
    // used yet.
    unsafe { h.init() };
    let mut taken = 0;
    for rank in 0..crate::MAX_ITEMS + 2 {
        let guard = h.as_ref().global.lock(rank);
        taken += 1;
        drop(guard);
    }
    kunit_expect_eq!(taken, crate::MAX_ITEMS + 2);
    Ok(())
}

/// Keys of the model tests: few, so that inserts and removes collide.
const MODEL_KEYS: u64 = 96;
/// Operations of one model test.
const MODEL_OPS: usize = 3000;

/// The operations a model test needs from a structure.
trait Set {
    fn ins(&self, k: u64) -> Result<bool>;
    fn rem(&self, k: u64) -> bool;
    fn has(&self, k: u64) -> bool;
    fn val(&self, ctx: &mut MaySleep, k: u64) -> Option<u64>;
    fn check(&self) -> Result<usize>;
    fn stats(&self) -> Stats;
}

/// Both structures offer the same operations under the same names.
macro_rules! impl_set {
    ($($t:ident),*) => {$(
        impl Set for $t<u64> {
            fn ins(&self, k: u64) -> Result<bool> {
                self.insert(k, k.wrapping_mul(3))
            }
            fn rem(&self, k: u64) -> bool {
                self.remove(k)
            }
            fn has(&self, k: u64) -> bool {
                self.contains(k)
            }
            fn val(&self, ctx: &mut MaySleep, k: u64) -> Option<u64> {
                self.with_value(ctx, k, |v| *v)
            }
            fn check(&self) -> Result<usize> {
                $t::check(self)
            }
            fn stats(&self) -> Stats {
                $t::stats(self)
            }
        }
    )*};
}

impl_set!(RcxList, RcxHash);

/// Random inserts, removes and lookups agree with a model (a bitmap), and
/// the structure stays sorted and duplicate-free throughout.
fn against_model(s: &impl Set, seed: u64) -> Result {
    // SAFETY: called by the KUnit cases below, in their process context,
    // with no atomic section active.
    let mut ctx = unsafe { MaySleep::new() };
    let mut model = KVec::from_elem(false, MODEL_KEYS as usize, GFP_KERNEL)?;
    let mut rng = Rng::new(seed);
    let mut errors = 0;
    for i in 0..MODEL_OPS {
        let k = rng.below_u64(MODEL_KEYS);
        let present = &mut model[k as usize];
        let ok = match rng.below_u64(3) {
            0 => {
                let r = s.ins(k)? != *present;
                *present = true;
                r
            }
            1 => {
                let r = s.rem(k) == *present;
                *present = false;
                r
            }
            _ => s.has(k) == *present && s.val(&mut ctx, k) == present.then_some(k * 3),
        };
        if !ok {
            errors += 1;
        }
        if i % 256 == 0 {
            let n = model.iter().filter(|p| **p).count();
            kunit_expect_eq!(s.check(), Ok(n));
        }
    }
    kunit_expect_eq!(errors, 0);
    let n = model.iter().filter(|p| **p).count();
    kunit_expect_eq!(s.check(), Ok(n));
    for k in 0..MODEL_KEYS {
        kunit_expect_eq!(s.has(k), model[k as usize]);
    }
    kunit_expect_eq!(s.ins(KEY_LIMIT), Err(EINVAL));
    kunit_expect!(!s.rem(KEY_LIMIT));
    kunit_expect!(!s.has(KEY_LIMIT));
    Ok(())
}

/// Injected aborts of the emulation: one in three attempts.
const INJECT: Mode = Mode::Emulated { abort_one_in: 3 };

fn list_model_fallback() -> Result {
    let l = RcxList::new(Mode::Fallback)?;
    kunit_expect_eq!(l.path_name(), "fallback");
    against_model(&l, 0x1111)?;
    kunit_expect_eq!(l.stats().aborts(), 0);
    Ok(())
}

fn list_model_emulated() -> Result {
    // Every update through phase 1: alone, the list's locks are always
    // free, and the default would skip it.
    let l = RcxList::with_rcx(Rcx::new(INJECT)?.phase1_always())?;
    kunit_expect_eq!(l.path_name(), "emulated");
    against_model(&l, 0x2222)?;
    let st = l.stats();
    // Alone, the emulation aborts only when told to.
    kunit_expect!(st.aborts_other > 0, "no injected abort");
    kunit_expect_eq!(st.aborts_conflict + st.aborts_explicit, 0);
    Ok(())
}

fn list_model_auto() -> Result {
    let l = RcxList::new(Mode::Auto)?;
    let want = if crate::htm_available() {
        "htm"
    } else {
        "fallback"
    };
    kunit_expect_eq!(l.path_name(), want);
    against_model(&l, 0x3333)
}

/// With one lock slot every item of every update shares it, and with two
/// some do: the updates lock each slot once and still agree with the
/// model.
fn list_model_shared_slots() -> Result {
    for (slots, mode, seed) in [
        (1, Mode::Fallback, 0x6666),
        (2, INJECT, 0x7777),
        (4, Mode::Fallback, 0x8888),
    ] {
        let l = RcxList::with_rcx(Rcx::with_slots(mode, slots)?)?;
        against_model(&l, seed)?;
        let l = RcxList::with_rcx(Rcx::with_slots(mode, slots)?.phase1_always())?;
        against_model(&l, seed + 2)?;
        let h = RcxHash::with_rcx(Rcx::with_slots(mode, slots)?, 3)?;
        against_model(&h, seed + 1)?;
    }
    kunit_expect!(Rcx::with_slots(Mode::Fallback, 3).is_err());
    kunit_expect!(Rcx::with_slots(Mode::Fallback, 0).is_err());
    Ok(())
}

fn hash_model_fallback() -> Result {
    let h = RcxHash::new(Mode::Fallback, 8)?;
    kunit_expect_eq!(h.buckets(), 8);
    against_model(&h, 0x4444)?;
    kunit_expect_eq!(h.stats().aborts(), 0);
    Ok(())
}

fn hash_model_emulated() -> Result {
    let h = RcxHash::with_rcx(Rcx::new(INJECT)?.phase1_always(), 5)?;
    against_model(&h, 0x5555)?;
    kunit_expect!(h.stats().aborts_other > 0, "no injected abort");
    kunit_expect!(RcxHash::<u64>::new(Mode::Fallback, 0).is_err());
    Ok(())
}

/// A value that counts its drops.
struct Counted(Arc<AtomicUsize>);

// SAFETY: dropping a `Counted` adds to an atomic counter and drops an
// `Arc` of an atomic.
unsafe impl rcu::AtomicDrop for Counted {}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// A removed item's value is dropped once, after a grace period (not
/// while a reader may still use it), and dropping the list drops the
/// values of the items left in it.
fn removal_frees_after_gp() -> Result {
    // SAFETY: a KUnit case runs in process context, with no atomic
    // section active.
    let mut ctx = unsafe { MaySleep::new() };
    let drops = Arc::new(AtomicUsize::new(0), GFP_KERNEL)?;
    let l: RcxList<Option<Counted>> = RcxList::new(Mode::Fallback)?;
    for k in 0..64 {
        l.insert(k, Some(Counted(drops.clone())))?;
    }
    // A duplicate insert drops the value it was given, at once.
    kunit_expect_eq!(l.insert(3, Some(Counted(drops.clone()))), Ok(false));
    kunit_expect_eq!(drops.load(Ordering::Relaxed), 1);
    {
        // Inside a read-side section, removed values stay alive.
        let _guard = rcu::read_lock(&mut ctx);
        for k in (0..64).step_by(2) {
            kunit_expect!(l.remove(k));
        }
        kunit_expect_eq!(drops.load(Ordering::Relaxed), 1);
    }
    kunit_expect_eq!(l.check(), Ok(32));
    let mut keys = KVec::new();
    l.for_each_key(&mut ctx, |k| {
        let _ = keys.push(k, GFP_ATOMIC);
    });
    kunit_expect_eq!(keys.len(), 32);
    kunit_expect!(keys.iter().enumerate().all(|(i, k)| *k == 2 * i as u64 + 1));
    rcu::barrier(&ctx);
    kunit_expect_eq!(drops.load(Ordering::Relaxed), 1 + 32);
    drop(l);
    kunit_expect_eq!(drops.load(Ordering::Relaxed), 1 + 64);
    Ok(())
}

/// A removal points the removed item's link back to its predecessor (an
/// item has no removal mark): a reader that still holds the item sees it
/// removed, reads its key, steps back and walks on to every key after it;
/// the key is gone for lookups and removals, and can be inserted anew.
fn removal_links_back() -> Result {
    // SAFETY: a KUnit case runs in process context, with no atomic
    // section active.
    let mut ctx = unsafe { MaySleep::new() };
    let list: RcxList<u64> = RcxList::new(Mode::Fallback)?;
    for k in 1..=4 {
        list.insert(k, 10 * k)?;
    }
    list.with_first(&mut ctx, |first| {
        kunit_expect_eq!(first.key(), 1);
        kunit_expect!(!first.is_removed());
        kunit_expect_eq!(list.key_after(first), 2);
        kunit_expect!(list.remove(1));
        kunit_expect!(first.is_removed());
        kunit_expect_eq!(first.key(), 1);
        // Back to the head sentinel (key 0), then on to the keys after 1.
        kunit_expect_eq!(list.key_after(first), 0);
        kunit_expect!(list.contains_from(first, 2));
        kunit_expect!(list.contains_from(first, 4));
        kunit_expect!(!list.contains_from(first, 1));
        kunit_expect!(!list.remove(1));
        kunit_expect!(!list.contains(1));
    });
    // (Not inside the walk above: its section holds the token.)
    kunit_expect_eq!(list.with_value(&mut ctx, 2, |v| *v), Some(20));
    // A removed item in the middle links back to the item before it, and
    // a second removal under the same reader sends it back once more.
    list.for_each_item(&mut ctx, |item| {
        if item.key() != 3 {
            return;
        }
        kunit_expect!(list.remove(3));
        kunit_expect!(item.is_removed());
        kunit_expect_eq!(list.key_after(item), 2);
        kunit_expect!(list.remove(2));
        kunit_expect!(list.contains_from(item, 4));
        kunit_expect!(!list.contains_from(item, 3));
    });
    kunit_expect_eq!(list.check(), Ok(1));
    for k in 1..=3 {
        kunit_expect_eq!(list.insert(k, 10 * k + 1), Ok(true));
    }
    kunit_expect_eq!(list.with_value(&mut ctx, 1, |v| *v), Some(11));
    list.with_first(&mut ctx, |first| kunit_expect!(!first.is_removed()));
    kunit_expect_eq!(list.check(), Ok(4));
    rcu::barrier(&ctx);
    Ok(())
}

/// Updates of the phase-1 test below.
const ABORT_INSERTS: u64 = 8;

/// With every transaction aborting, updates still complete: after a
/// bounded number of aborts phase 1 takes the ordered fallback.  The
/// updates run on a worker so that a path that retried forever fails the
/// case instead of hanging the run.
fn aborting_txn_falls_back() -> Result {
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

/// The suite of the list and hash table (one suite per module).
mod list_suite {
    use super::*;

    kernel::kunit_suite! {
        name: "rcx_list",
        cases: [
            item_layout,
            emulated_txn_outcomes,
            attempt_holds_named_items,
            uncontended_attempt_skips_phase1,
            global_guard_releases,
            list_model_fallback,
            list_model_emulated,
            list_model_auto,
            list_model_shared_slots,
            hash_model_fallback,
            hash_model_emulated,
            removal_frees_after_gp,
            removal_links_back,
            aborting_txn_falls_back,
        ],
    }
}

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
    let a = KBox::new(Header::new(GFP_KERNEL)?, GFP_KERNEL)?;
    let b = Arc::new(Header::new(GFP_KERNEL)?, GFP_KERNEL)?;
    // SAFETY: the headers are at their final addresses and not used yet.
    unsafe {
        a.init();
        b.init();
    }
    // 1: the worker holds the lock; 2: it saw a word and released it;
    // 3: it gave up waiting and released it.
    let state = Arc::new(AtomicUsize::new(0), GFP_KERNEL)?;
    let (bw, sw) = (b.clone(), state.clone());
    let guard = spawn_workers(&ctx, 1, move |_| {
        let (b, state) = (bw.clone(), sw.clone());
        move || {
            let hr = Header::as_ref(&b);
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
        rcx.attempt([a.as_ref(), Header::as_ref(&b)], || {
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

/// The concurrent suite, run separately with more CPUs.
mod stress_suite {
    use super::*;

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
}
