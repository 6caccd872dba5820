// SPDX-License-Identifier: GPL-2.0

//! Baselines of the RCX benchmark: RCU-protected sorted lists whose
//! updaters serialise on a spinlock, as a list with one global lock
//! ([`RcuList`]) and as a hash table with one lock per bucket
//! ([`RcuHash`]).  Readers are the same plain RCU walks as RCX's.

use core::{
    mem,
    ptr::{self, NonNull},
    sync::atomic::{AtomicPtr, Ordering},
};
use kernel::{
    prelude::*,
    sync::rcu::{self, AtomicDrop, HasRcuHead, RcuHead},
};

use crate::{hash::bucket_of, list::KEY_LIMIT, GlobalLock};

/// An item of a baseline list: key, link, and the RCU head.
struct Node {
    key: u64,
    next: AtomicPtr<Node>,
    rcu: RcuHead,
}

// SAFETY: `rcu` is a field of type `RcuHead` used only by `drop_after_gp`.
unsafe impl HasRcuHead for Node {
    const RCU_HEAD_OFFSET: usize = mem::offset_of!(Self, rcu);
}

// SAFETY: a node has no drop glue.
unsafe impl AtomicDrop for Node {}

impl Node {
    fn alloc(key: u64, next: *mut Node) -> Result<NonNull<Node>> {
        let b = KBox::new(
            Node {
                key,
                next: AtomicPtr::new(next),
                rcu: RcuHead::new(),
            },
            GFP_KERNEL,
        )?;
        // SAFETY: `KBox::into_raw` never returns null.
        Ok(unsafe { NonNull::new_unchecked(KBox::into_raw(b)) })
    }
}

/// A sorted list between a head and a tail sentinel with one update lock.
///
/// # Invariants
///
/// `head` leads, through ascending keys, to the tail (key [`KEY_LIMIT`],
/// null link); linked nodes came from `KBox::into_raw` and are owned by the
/// list; unlinked nodes are freed after a grace period.
#[pin_data(PinnedDrop)]
struct LockedList {
    head: NonNull<Node>,
    #[pin]
    lock: GlobalLock,
}

// SAFETY: shared only through atomics and the spinlock.
unsafe impl Send for LockedList {}
// SAFETY: see above.
unsafe impl Sync for LockedList {}

impl LockedList {
    fn new() -> Result<Pin<KBox<Self>>> {
        let tail = Node::alloc(KEY_LIMIT, ptr::null_mut())?;
        let head = match Node::alloc(0, tail.as_ptr()) {
            Ok(h) => h,
            Err(e) => {
                // SAFETY: from `KBox::into_raw`, never published.
                drop(unsafe { KBox::from_raw(tail.as_ptr()) });
                return Err(e);
            }
        };
        let l = KBox::pin_init(
            pin_init!(Self {
                head,
                lock <- GlobalLock::new(),
            }),
            GFP_KERNEL,
        );
        if l.is_err() {
            // SAFETY: from `KBox::into_raw`, never published: no list was
            // made to own them.
            unsafe {
                drop(KBox::from_raw(head.as_ptr()));
                drop(KBox::from_raw(tail.as_ptr()));
            }
        }
        l
    }

    fn node<'g>(p: *mut Node, _guard: &'g rcu::Guard<'_>) -> &'g Node {
        // SAFETY: `p` was loaded from a link walked from `head` under
        // `_guard`; walks stop at the tail, and unlinked nodes are freed
        // only after a grace period.
        unsafe { &*p }
    }

    #[inline(never)]
    fn find<'g>(&self, key: u64, guard: &'g rcu::Guard<'_>) -> (&'g Node, &'g Node) {
        let mut prev = Self::node(self.head.as_ptr(), guard);
        let mut next = Self::node(prev.next.load(Ordering::Acquire), guard);
        while next.key < key {
            prev = next;
            next = Self::node(prev.next.load(Ordering::Acquire), guard);
        }
        (prev, next)
    }

    fn contains(&self, key: u64) -> bool {
        // SAFETY: no code of the caller runs under the guard, and the
        // lookup does not sleep.
        let guard = unsafe { rcu::Guard::new_unchecked() };
        key != KEY_LIMIT && self.find(key, &guard).1.key == key
    }

    fn insert(&self, key: u64) -> Result<bool> {
        if key == KEY_LIMIT {
            return Err(EINVAL);
        }
        let new = Node::alloc(key, ptr::null_mut())?;
        // SAFETY: no code of the caller runs under the guard, and the
        // update does not sleep (it holds a spinlock).
        let guard = unsafe { rcu::Guard::new_unchecked() };
        let held = self.lock.lock(0);
        let (prev, next) = self.find(key, &guard);
        let done = next.key != key;
        if done {
            // SAFETY: `new` is not published yet; we own it.
            unsafe { new.as_ref() }
                .next
                .store(next as *const Node as *mut Node, Ordering::Relaxed);
            prev.next.store(new.as_ptr(), Ordering::Release);
        }
        drop(held);
        drop(guard);
        if !done {
            // SAFETY: from `KBox::into_raw`, never published.
            drop(unsafe { KBox::from_raw(new.as_ptr()) });
        }
        Ok(done)
    }

    fn remove(&self, key: u64) -> bool {
        if key == KEY_LIMIT {
            return false;
        }
        // SAFETY: no code of the caller runs under the guard, and the
        // update does not sleep (it holds a spinlock).
        let guard = unsafe { rcu::Guard::new_unchecked() };
        let held = self.lock.lock(0);
        let (prev, e) = self.find(key, &guard);
        let found = e.key == key;
        let e_ptr = e as *const Node as *mut Node;
        if found {
            prev.next
                .store(e.next.load(Ordering::Relaxed), Ordering::Release);
        }
        drop(held);
        drop(guard);
        if found {
            // SAFETY: unlinked under the lock, so by nobody else; readers
            // are covered by the grace period.
            rcu::drop_after_gp(unsafe { KBox::from_raw(e_ptr) });
        }
        found
    }
}

#[pinned_drop]
impl PinnedDrop for LockedList {
    fn drop(self: Pin<&mut Self>) {
        let mut p = self.head.as_ptr();
        while !p.is_null() {
            // SAFETY: linked nodes are owned by the list (invariants).
            let b = unsafe { KBox::from_raw(p) };
            p = b.next.load(Ordering::Relaxed);
        }
    }
}

/// An RCU sorted list whose updaters serialise on one global spinlock.
pub struct RcuList(Pin<KBox<LockedList>>);

impl RcuList {
    /// Returns an empty list.
    pub fn new() -> Result<Self> {
        Ok(Self(LockedList::new()?))
    }

    /// Returns whether `key` is in the list.
    pub fn contains(&self, key: u64) -> bool {
        self.0.contains(key)
    }

    /// Inserts `key`; `Ok(false)` if it was there.
    pub fn insert(&self, key: u64) -> Result<bool> {
        self.0.insert(key)
    }

    /// Removes `key`; returns whether it was there.
    pub fn remove(&self, key: u64) -> bool {
        self.0.remove(key)
    }
}

/// An RCU hash table whose buckets are sorted lists, each with its own
/// update spinlock.
pub struct RcuHash(KVec<Pin<KBox<LockedList>>>);

impl RcuHash {
    /// Returns an empty table of `buckets` buckets (at least one).
    pub fn new(buckets: usize) -> Result<Self> {
        if buckets == 0 {
            return Err(EINVAL);
        }
        let mut v = KVec::with_capacity(buckets, GFP_KERNEL)?;
        for _ in 0..buckets {
            v.push(LockedList::new()?, GFP_KERNEL)?;
        }
        Ok(Self(v))
    }

    fn bucket(&self, key: u64) -> &LockedList {
        &self.0[bucket_of(key, self.0.len())]
    }

    /// Returns whether `key` is in the table.
    pub fn contains(&self, key: u64) -> bool {
        self.bucket(key).contains(key)
    }

    /// Inserts `key`; `Ok(false)` if it was there.
    pub fn insert(&self, key: u64) -> Result<bool> {
        self.bucket(key).insert(key)
    }

    /// Removes `key`; returns whether it was there.
    pub fn remove(&self, key: u64) -> bool {
        self.bucket(key).remove(key)
    }
}
