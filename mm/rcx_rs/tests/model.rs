// SPDX-License-Identifier: GPL-2.0

//! Cases of the list and hash table against a model, and of the lifetime
//! of removed items (part of the `rcx_list` suite).

use super::Set;
use crate::{hash::RcxHash, list::RcxList, list::KEY_LIMIT, Mode, Rcx};
use core::sync::atomic::{AtomicUsize, Ordering};
use kernel::{
    delay::MaySleep,
    kunit::suite::TestRng as Rng,
    kunit_expect, kunit_expect_eq,
    prelude::*,
    sync::{rcu, Arc},
};

/// Keys of the model tests: few, so that inserts and removes collide.
const MODEL_KEYS: u64 = 96;
/// Operations of one model test.
const MODEL_OPS: usize = 3000;

/// Random inserts, removes and lookups agree with a model (a bitmap), and
/// the structure stays sorted and duplicate-free throughout.
pub(super) fn against_model(s: &impl Set, seed: u64) -> Result {
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

pub(super) fn list_model_fallback() -> Result {
    let l = RcxList::new(Mode::Fallback)?;
    kunit_expect_eq!(l.path_name(), "fallback");
    against_model(&l, 0x1111)?;
    kunit_expect_eq!(l.stats().aborts(), 0);
    Ok(())
}

pub(super) fn list_model_emulated() -> Result {
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

pub(super) fn list_model_auto() -> Result {
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
pub(super) fn list_model_shared_slots() -> Result {
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

pub(super) fn hash_model_fallback() -> Result {
    let h = RcxHash::new(Mode::Fallback, 8)?;
    kunit_expect_eq!(h.buckets(), 8);
    against_model(&h, 0x4444)?;
    kunit_expect_eq!(h.stats().aborts(), 0);
    Ok(())
}

pub(super) fn hash_model_emulated() -> Result {
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
pub(super) fn removal_frees_after_gp() -> Result {
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
pub(super) fn removal_links_back() -> Result {
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
