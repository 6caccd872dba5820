// SPDX-License-Identifier: GPL-2.0

//! The RCX sorted list (listings 3.3 to 3.7 of the thesis).
//!
//! A singly linked list of items in ascending key order between two
//! sentinels, `head` and `tail` (whose key, `u64::MAX`, is reserved).
//! Lookups walk it under RCU alone.  An update names the items whose links
//! it writes, an insertion the item it links the new one after, a removal
//! the item and its predecessor; [`Rcx::attempt`] locks them, the update
//! revalidates (the links found by the walk unchanged) and publishes with
//! release stores.  The thesis's listings also lock the item after them;
//! that is not needed, because every change of a link locks the item that
//! holds the link: an insertion before that item or its removal would have
//! to change the link the update holds locked.
//! A removed item is freed after a grace period.
//!
//! A removal points the removed item's link back to its predecessor, the
//! item that linked to it.  Linked items link forward, to a larger key, so
//! a link that goes back says that its item was removed, and the link
//! comparisons of a revalidation also tell that the items they compare are
//! still linked: an item needs no removal mark, and readers need none of
//! the work a mark costs them.  Their walk is the RCU baseline's, a load of
//! the link and a load of the key per step.  A reader standing on an item
//! while it is removed steps back to the predecessor, whose key is below
//! the one it looks for, and walks on from there; it takes one step back
//! per removal it meets, so its walk is bounded by the list's length plus
//! the removals that happen under it.

use core::{
    mem,
    ptr::{self, NonNull},
    sync::atomic::{AtomicPtr, Ordering},
};
use kernel::{
    delay::MaySleep,
    prelude::*,
    sync::rcu::{self, AtomicDrop, HasRcuHead, RcuHead},
};

use crate::{backoff, Attempt, HeaderRef, Mode, Rcx, Stats};

/// The key of the tail sentinel, which no item may use.
pub const KEY_LIMIT: u64 = u64::MAX;

/// An RCX-protected list item (listing 3.3, without the lock state and the
/// removal mark): the key, the link readers follow, the RCU head and the
/// value.  The item's node words and global lock are those of its lock
/// slot in the [`Rcx`] (see the crate documentation), and a removal is told
/// by the direction of the link, so an item without a value is the size of
/// the RCU baseline's node, 32 bytes.
///
/// # Invariants
///
/// Only the tail sentinel's `next` is null.  A linked item other than the
/// head sentinel links to an item with a larger key.  An item unlinked by a
/// removal links to the item that linked to it when it was removed (its
/// predecessor, linked at that moment), whose key is smaller, or equal if
/// that is the head sentinel (key 0) and the item's key is 0.
#[repr(C)]
pub struct Item<V> {
    key: u64,
    next: AtomicPtr<Item<V>>,
    rcu: RcuHead,
    value: V,
}

// SAFETY: `rcu` is a field of type `RcuHead` used only by `drop_after_gp`.
unsafe impl<V> HasRcuHead for Item<V> {
    const RCU_HEAD_OFFSET: usize = mem::offset_of!(Self, rcu);
}

// SAFETY: an item has no `Drop` of its own; dropping it drops its `V`,
// which is `AtomicDrop`, and fields without drop glue.
unsafe impl<V: AtomicDrop> AtomicDrop for Item<V> {}

// SAFETY: an item is shared between readers and updaters only through
// atomics and the locks of its slot; its value is `Send` and `Sync`.
unsafe impl<V: Send + Sync> Send for Item<V> {}
// SAFETY: see above.
unsafe impl<V: Send + Sync> Sync for Item<V> {}

impl<V> Item<V> {
    /// Allocates an item and leaks it.
    fn alloc(key: u64, value: V, next: *mut Item<V>) -> Result<NonNull<Self>> {
        let b = KBox::new(
            Item {
                key,
                // INVARIANT: not yet linked, not removed.
                next: AtomicPtr::new(next),
                rcu: RcuHead::new(),
                value,
            },
            GFP_KERNEL,
        )?;
        // SAFETY: `KBox::into_raw` never returns null.
        Ok(unsafe { NonNull::new_unchecked(KBox::into_raw(b)) })
    }

    /// Returns the key.
    pub fn key(&self) -> u64 {
        self.key
    }

    /// Returns whether the item was removed (it is unlinked): whether its
    /// link goes back to a key that is not larger.  Stable while the
    /// caller holds the item's slot; a hint otherwise.
    pub fn is_removed(&self) -> bool {
        let next = self.next.load(Ordering::Acquire);
        if next.is_null() {
            // The tail sentinel, never removed.
            return false;
        }
        // The list hands out `&Item`s only inside the read-side section of
        // the walk that found them (`with_first`, `for_each_item`), and the
        // borrow cannot outlive it.  The head sentinel, the one linked item
        // whose link may go to an equal key, is never handed out.
        // SAFETY: what an item reachable in that section links to was
        // linked during the section (type invariants of `ListCore`), so it
        // is not freed before the section ends.
        let next_key = unsafe { (*next).key };
        next_key <= self.key
    }

    /// Returns the item's lock slot in `rcx`.
    fn hdr<'a>(&self, rcx: &'a Rcx) -> HeaderRef<'a> {
        rcx.slot_of(self)
    }
}

/// An RCX sorted list without its update side, so that a hash table can
/// share one [`Rcx`] among its buckets.
///
/// # Invariants
///
/// `head` and `tail` are valid items allocated by [`Item::alloc`]; from
/// `head`, `next` links visit every linked item in strictly ascending key
/// order and end at `tail`.  Linked items are owned by the list; an
/// unlinked item links back to its predecessor at its removal (see
/// [`Item`]) and is handed to [`rcu::drop_after_gp`] by the updater that
/// unlinked it.  So every item a walk reaches, forward or back, was linked
/// at some moment of the walk's read-side section, and is freed only after
/// it.  The sentinels hold `V::default()`, which no lookup returns.
pub(crate) struct ListCore<V: Send + Sync + AtomicDrop + 'static> {
    head: NonNull<Item<V>>,
}

// SAFETY: items are `Send` and `Sync` (see `Item`); the list only holds
// pointers to them.
unsafe impl<V: Send + Sync + AtomicDrop> Send for ListCore<V> {}
// SAFETY: see above.
unsafe impl<V: Send + Sync + AtomicDrop> Sync for ListCore<V> {}

impl<V: Send + Sync + AtomicDrop + Default + 'static> ListCore<V> {
    /// Returns an empty list: the two sentinels.
    pub(crate) fn new() -> Result<Self> {
        let tail = Item::alloc(KEY_LIMIT, V::default(), ptr::null_mut())?;
        let head = match Item::alloc(0, V::default(), tail.as_ptr()) {
            Ok(h) => h,
            Err(e) => {
                // SAFETY: `tail` came from `KBox::into_raw` and nobody saw it.
                drop(unsafe { KBox::from_raw(tail.as_ptr()) });
                return Err(e);
            }
        };
        // INVARIANT: head links to tail.
        Ok(Self { head })
    }
}

impl<V: Send + Sync + AtomicDrop + 'static> ListCore<V> {
    /// Returns the item behind a link loaded under `_guard`.
    fn item<'g>(p: *mut Item<V>, _guard: &'g rcu::Guard<'_>) -> &'g Item<V> {
        // SAFETY: `p` was loaded from a link reachable from `head` inside
        // the read-side section of `_guard`; the list never stores null in
        // a link it walks past (only `tail.next` is null and walks stop at
        // `tail`), and what a walk reaches is freed only after its section
        // (type invariants).
        unsafe { &*p }
    }

    /// Returns what `item` links to: its successor, or its predecessor if
    /// `item` was removed.
    fn next<'g>(item: &'g Item<V>, guard: &'g rcu::Guard<'_>) -> &'g Item<V> {
        Self::item(item.next.load(Ordering::Acquire), guard)
    }

    /// Returns the last item with a key below `key` and its successor,
    /// whose key is at least `key` (listing 3.5, lines 4 to 9).  A link
    /// that goes back (its item was removed under the walk) leads to a key
    /// below `key`, so the loop walks on from there.
    #[inline(never)]
    fn find<'g>(&self, key: u64, guard: &'g rcu::Guard<'_>) -> (&'g Item<V>, &'g Item<V>) {
        let mut prev = Self::item(self.head.as_ptr(), guard);
        let mut next = Self::next(prev, guard);
        while next.key < key {
            prev = next;
            next = Self::next(prev, guard);
        }
        (prev, next)
    }

    /// Returns the value of `key`'s item if it is in the list.
    pub(crate) fn get<'g>(&self, key: u64, guard: &'g rcu::Guard<'_>) -> Option<&'g V> {
        if key == KEY_LIMIT {
            return None;
        }
        let (_, next) = self.find(key, guard);
        (next.key == key).then_some(&next.value)
    }

    /// Inserts `key` with `value` (listing 3.5): `Ok(true)` if it was
    /// inserted, `Ok(false)` if the key was there already.
    pub(crate) fn insert(&self, rcx: &Rcx, key: u64, value: V) -> Result<bool> {
        if key == KEY_LIMIT {
            return Err(EINVAL);
        }
        // Allocated once, before any lock, and reused across retries.
        let new = Item::alloc(key, value, ptr::null_mut())?;
        loop {
            // SAFETY: no code of the caller runs under the guard, and the
            // update does not sleep (its lock attempts spin).
            let guard = unsafe { rcu::Guard::new_unchecked() };
            let (prev, next) = self.find(key, &guard);
            if next.key == key {
                drop(guard);
                // SAFETY: `new` came from `KBox::into_raw` and was never
                // published.
                drop(unsafe { KBox::from_raw(new.as_ptr()) });
                return Ok(false);
            }
            let next_ptr = next as *const Item<V> as *mut Item<V>;
            // SAFETY: `new` is not yet published; we own it.
            unsafe { new.as_ref() }
                .next
                .store(next_ptr, Ordering::Relaxed);
            // Only `prev` is written, so only `prev` is locked: whatever
            // changes `prev.next` (an insertion after `prev`, the removal of
            // `next` or of `prev`) locks `prev`.
            let r = rcx.attempt([prev.hdr(rcx)], || {
                // A removed `prev` links back, to a key below `next`'s, so
                // not to `next`; a linked one that still links to `next`
                // keeps `next` linked.
                if prev.next.load(Ordering::Relaxed) != next_ptr {
                    return false;
                }
                // Release: readers that find `new` see its fields.
                prev.next.store(new.as_ptr(), Ordering::Release);
                true
            });
            drop(guard);
            if r == Attempt::Done {
                return Ok(true);
            }
            backoff();
        }
    }

    /// Removes `key` (listing 3.7): `true` if it was in the list.
    pub(crate) fn remove(&self, rcx: &Rcx, key: u64) -> bool {
        if key == KEY_LIMIT {
            return false;
        }
        loop {
            // SAFETY: no code of the caller runs under the guard, and the
            // update does not sleep (its lock attempts spin).
            let guard = unsafe { rcu::Guard::new_unchecked() };
            let (p, e) = self.find(key, &guard);
            if e.key != key {
                return false;
            }
            let p_ptr = p as *const Item<V> as *mut Item<V>;
            let e_ptr = e as *const Item<V> as *mut Item<V>;
            let n_ptr = e.next.load(Ordering::Acquire);
            let n = Self::item(n_ptr, &guard);
            if n.key <= e.key {
                // `e` was removed meanwhile (its link goes back): look
                // again.
                drop(guard);
                backoff();
                continue;
            }
            // `p` and `e` are written, and locked; `n` is not: removing it
            // or inserting before it would change `e.next`, which needs
            // `e`'s lock.
            let r = rcx.attempt([p.hdr(rcx), e.hdr(rcx)], || {
                // Links equal to the ones the walk saw: a removed `p`
                // would link back, to a key below `e`'s, so `p` is linked
                // and so are `e` and `n`.
                if p.next.load(Ordering::Relaxed) != e_ptr
                    || e.next.load(Ordering::Relaxed) != n_ptr
                {
                    return false;
                }
                p.next.store(n_ptr, Ordering::Release);
                // INVARIANT: `e` is unlinked and links back to `p`, linked
                // (checked above, under its slot's lock).  Release, after
                // the store to `p.next`: a reader that steps back to `p`
                // finds `p` linking past `e`, and so never steps back and
                // forth between the two.
                e.next.store(p_ptr, Ordering::Release);
                true
            });
            drop(guard);
            if r == Attempt::Done {
                // SAFETY: `e` was allocated by `Item::alloc` and we just
                // unlinked it, under its slot's global lock, and pointed
                // its link back, so that no other updater's revalidation
                // accepts it again; readers that still see it are covered
                // by the grace period.
                rcu::drop_after_gp(unsafe { KBox::from_raw(e_ptr) });
                return true;
            }
            backoff();
        }
    }

    /// Walks the list and checks it: ascending keys (so no removed item,
    /// whose link goes back, is linked), no duplicate, ending at the tail.
    /// Returns the item count.
    pub(crate) fn check(&self) -> Result<usize> {
        // SAFETY: no code of the caller runs under the guard, and the walk
        // does not sleep.
        let guard = unsafe { rcu::Guard::new_unchecked() };
        let mut n = 0;
        let mut cur = Self::item(self.head.as_ptr(), &guard);
        let mut last: Option<u64> = None;
        loop {
            let next_ptr = cur.next.load(Ordering::Acquire);
            if next_ptr.is_null() {
                return Err(EINVAL);
            }
            let next = Self::item(next_ptr, &guard);
            if next.key == KEY_LIMIT && next.next.load(Ordering::Relaxed).is_null() {
                return Ok(n);
            }
            if last.is_some_and(|l| l >= next.key) {
                return Err(EINVAL);
            }
            last = Some(next.key);
            n += 1;
            cur = next;
        }
    }

    /// Calls `f` with every linked item in order (sentinels excluded),
    /// inside the read-side section of `guard`.
    pub(crate) fn for_each_item<'g>(
        &self,
        guard: &'g rcu::Guard<'_>,
        mut f: impl FnMut(&'g Item<V>),
    ) {
        let mut cur = Self::item(self.head.as_ptr(), guard);
        loop {
            let next = Self::next(cur, guard);
            if next.key == KEY_LIMIT {
                return;
            }
            f(next);
            cur = next;
        }
    }

    /// Returns the first linked item, or the tail, for layout checks.
    pub(crate) fn first<'g>(&self, guard: &'g rcu::Guard<'_>) -> &'g Item<V> {
        let head = Self::item(self.head.as_ptr(), guard);
        Self::next(head, guard)
    }
}

impl<V: Send + Sync + AtomicDrop + 'static> Drop for ListCore<V> {
    fn drop(&mut self) {
        // No reader or updater is left (we have `&mut self`); free every
        // linked item, sentinels included.
        let mut p = self.head.as_ptr();
        while !p.is_null() {
            // SAFETY: by the type invariants, linked items and the sentinels
            // came from `KBox::into_raw` and are owned by the list.
            let b = unsafe { KBox::from_raw(p) };
            p = b.next.load(Ordering::Relaxed);
        }
    }
}

/// An RCX-protected sorted list of `u64` keys below [`KEY_LIMIT`], each
/// with a value (`()` for a set; an `Option` for optional values, free of
/// cost when the value type has a niche, as a `KBox` or `Arc` has).
pub struct RcxList<V: Send + Sync + AtomicDrop + Default + 'static = ()> {
    rcx: Rcx,
    core: ListCore<V>,
}

impl<V: Send + Sync + AtomicDrop + Default + 'static> RcxList<V> {
    /// Returns an empty list whose updates win the node words as `mode` says.
    pub fn new(mode: Mode) -> Result<Self> {
        Self::with_rcx(Rcx::new(mode)?)
    }

    /// Returns an empty list whose updates go through `rcx` (tests pass
    /// one with few lock slots).
    pub(crate) fn with_rcx(rcx: Rcx) -> Result<Self> {
        Ok(Self {
            rcx,
            core: ListCore::new()?,
        })
    }

    /// Returns the update side, for tests.
    // Used only by the KUnit suites.
    #[cfg(CONFIG_RCX_KUNIT_TEST)]
    pub(crate) fn rcx(&self) -> &Rcx {
        &self.rcx
    }

    /// Calls `f` with every item in key order, for tests.
    // Used only by the KUnit suites.
    #[cfg(CONFIG_RCX_KUNIT_TEST)]
    pub(crate) fn for_each_item(&self, ctx: &mut MaySleep, f: impl FnMut(&Item<V>)) {
        let guard = rcu::read_lock(ctx);
        self.core.for_each_item(&guard, f)
    }

    /// Returns whether `key` is in the list (a plain RCU reader).
    pub fn contains(&self, key: u64) -> bool {
        // SAFETY: no code of the caller runs under the guard, and the
        // lookup does not sleep.
        let guard = unsafe { rcu::Guard::new_unchecked() };
        self.core.get(key, &guard).is_some()
    }

    /// Calls `f` with `key`'s value if the key is in the list, inside an
    /// RCU read-side section, which borrows `ctx`: `f` cannot sleep
    /// through the token.
    pub fn with_value<R>(
        &self,
        ctx: &mut MaySleep,
        key: u64,
        f: impl FnOnce(&V) -> R,
    ) -> Option<R> {
        let guard = rcu::read_lock(ctx);
        self.core.get(key, &guard).map(f)
    }

    /// Inserts `key`: `Ok(true)` if inserted, `Ok(false)` if present (the
    /// value is dropped), `EINVAL` for [`KEY_LIMIT`], `ENOMEM`.
    pub fn insert(&self, key: u64, value: V) -> Result<bool> {
        self.core.insert(&self.rcx, key, value)
    }

    /// Removes `key`; returns whether it was present.
    pub fn remove(&self, key: u64) -> bool {
        self.core.remove(&self.rcx, key)
    }

    /// Checks the list (see [`RcxList::check`]) and returns its length.
    pub fn check(&self) -> Result<usize> {
        self.core.check()
    }

    /// Calls `f` with every key in ascending order, inside one read-side
    /// section (see [`RcxList::with_value`]).
    pub fn for_each_key(&self, ctx: &mut MaySleep, mut f: impl FnMut(u64)) {
        let guard = rcu::read_lock(ctx);
        self.core.for_each_item(&guard, |item| f(item.key))
    }

    /// Returns the update counters.
    pub fn stats(&self) -> Stats {
        self.rcx.stats()
    }

    /// Returns the name of the phase-1 path in use.
    pub fn path_name(&self) -> &'static str {
        self.rcx.path_name()
    }

    /// Calls `f` with the first item (or the tail sentinel), for checks,
    /// inside a read-side section (see [`RcxList::with_value`]).
    pub fn with_first<R>(&self, ctx: &mut MaySleep, f: impl FnOnce(&Item<V>) -> R) -> R {
        let guard = rcu::read_lock(ctx);
        f(self.core.first(&guard))
    }

    /// Returns the key of the item `item` links to (its successor, or its
    /// predecessor if it was removed), for tests.  `item` comes from one
    /// of the list's walks, inside the read-side section that still
    /// protects it; what it links to was linked during that section, so it
    /// is protected too.
    // Used only by the KUnit suites.
    #[cfg(CONFIG_RCX_KUNIT_TEST)]
    pub(crate) fn key_after(&self, item: &Item<V>) -> u64 {
        // SAFETY: nested in the section that protects `item`; no code of
        // the caller runs under the guard, and the walk does not sleep.
        let guard = unsafe { rcu::Guard::new_unchecked() };
        ListCore::next(item, &guard).key
    }

    /// Walks on from `item` as a lookup of `key` does from the head, and
    /// returns whether it finds `key`, for tests of readers standing on an
    /// item while it is removed.  `item` is protected as for
    /// [`RcxList::key_after`].
    // Used only by the KUnit suites.
    #[cfg(CONFIG_RCX_KUNIT_TEST)]
    pub(crate) fn contains_from(&self, item: &Item<V>, key: u64) -> bool {
        // SAFETY: nested in the section that protects `item`; no code of
        // the caller runs under the guard, and the walk does not sleep.
        let guard = unsafe { rcu::Guard::new_unchecked() };
        let mut next = ListCore::next(item, &guard);
        while next.key < key {
            next = ListCore::next(next, &guard);
        }
        next.key == key
    }
}
