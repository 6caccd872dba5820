// SPDX-License-Identifier: GPL-2.0

//! What a DMEM instance needs from its environment, as traits: locks and
//! waiting ([`Platform`], [`Lock`]), the ordered map of a hash bucket
//! ([`BucketMap`]), where pages come from ([`PageSupply`]) and how their
//! bytes are copied ([`PageAccess`]), bundled by [`Config`].
//!
//! Separate from the store because the kernel (`dmem_kernel.rs`) and the
//! host tier (`tools/host/crates/dmem-core`) implement these, and nothing
//! else of the module.

use super::{Handle, Key, Link, Slot};
use core::ops::{Deref, DerefMut};
use kernel::alloc::Flags;
use kernel::prelude::*;

/// Allocation flags of index nodes: the store runs in reclaim and swap-out
/// paths, so it must neither sleep nor recurse into reclaim, and a failure
/// is expected and harmless.  Those paths run with `PF_MEMALLOC` (kswapd,
/// direct reclaim), which would let the allocation take the memory
/// reserves; they are for what reclaim needs to make progress, not for a
/// copy DMEM may drop at any time, so `__GFP_NOMEMALLOC` refuses them.
pub(crate) fn node_flags() -> Flags {
    GFP_NOWAIT | __GFP_NOWARN | __GFP_NOMEMALLOC
}

/// Lock classes of an instance; the kernel gives each its own lockdep class
/// (the page lock nests inside a bucket lock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LockClass {
    /// A bucket lock.
    Bucket,
    /// The page lock.
    Pages,
}

/// A lock protecting a `T`: a spinlock in the kernel.
pub(crate) trait Lock<T>: Sized {
    /// Creates a lock of class `class` holding `value`.
    fn new(value: T, class: LockClass) -> Result<Self>;

    /// Runs `f` with the lock held.  `f` must not sleep.
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R;
}

/// The environment's synchronisation services.
pub(crate) trait Platform {
    /// The lock type.
    type Lock<T: Send>: Lock<T> + Send + Sync;

    /// What a caller shows to prove it may sleep: in the kernel the task's
    /// `kernel::delay::MaySleep` token, which code inside an RCU read-side
    /// section or under a spinlock cannot lend; on the host `()`.
    type SleepCtx;

    /// Lets other threads run while [`Dmem::discard_range`] waits for copies in
    /// flight; called with no lock held, `round` counting the calls of one
    /// wait from 0.  May sleep, and must once `round` grows: the copier may
    /// be a task of lower priority preempted on the waiter's CPU, which
    /// only a waiter that leaves the run queue lets finish.
    ///
    /// [`Dmem::discard_range`]: super::Dmem::discard_range
    fn relax(ctx: &Self::SleepCtx, round: u32);
}

/// The ordered map of one hash bucket.
///
/// In the kernel this is `kernel::rbtree::RBTree<K, Handle>`, its node an
/// `RBTreeNodeReservation` (`reserve`: `RBTreeNodeReservation::new`;
/// `insert`: `into_node` then `RBTree::insert`; `pop_range`:
/// `cursor_lower_bound` then `Cursor::remove_current`).  The module cannot
/// name `kernel::rbtree` itself, as the host shim of the kernel crate does
/// not mirror it.  Every method runs under the bucket lock: none may sleep
/// or allocate.
pub(crate) trait BucketMap<K>: Send + Sized {
    /// Memory for one entry, allocated in advance.
    type Node: Send;

    /// Creates an empty map.
    fn new() -> Self;

    /// Allocates a node, with `flags`.
    fn reserve(flags: Flags) -> Result<Self::Node>;

    /// Maps `key` to `handle` in `node`, and returns the handle `key` was
    /// mapped to before, if any.
    fn insert(&mut self, node: Self::Node, key: K, handle: Handle) -> Option<Handle>;

    /// Returns the handle `key` maps to.
    fn get(&self, key: &K) -> Option<Handle>;

    /// Removes `key` and returns its handle.
    fn remove(&mut self, key: &K) -> Option<Handle>;

    /// Removes and returns the smallest entry whose key is in `lo..=hi`.
    fn pop_range(&mut self, lo: &K, hi: &K) -> Option<(K, Handle)>;

    /// Removes and returns the smallest entry.
    fn pop_first(&mut self) -> Option<(K, Handle)>;

    /// Calls `f` on every entry, in key order.
    fn for_each(&self, f: impl FnMut(&K, Handle));

    /// Removes `key` if it maps to `handle`; returns whether it did.
    fn remove_if(&mut self, key: &K, handle: Handle) -> bool {
        if self.get(key) == Some(handle) {
            self.remove(key);
            true
        } else {
            false
        }
    }
}

/// Where the store's pages come from: a GCMA area in the kernel.
///
/// Both methods are called with the page lock held, and must not sleep.
pub(crate) trait PageSupply {
    /// Lends a free page to the store and returns its index, below the
    /// number of slots of the instance; `None` if there is none.
    fn lend(&self) -> Option<usize>;

    /// Takes back a page lent by [`PageSupply::lend`] that the store is
    /// done with.  Never called for a page passed to
    /// [`Dmem::discard_range`].
    ///
    /// [`Dmem::discard_range`]: super::Dmem::discard_range
    fn give_back(&self, page: IdlePage);
}

/// A lent page the store is done with: unbound, with no copy into or out
/// of it in flight, and not discarded.  Only the page table makes one
/// (`pages.rs`), at the moment that becomes true, and hands it to
/// [`PageSupply::give_back`], which consumes it: an implementation may
/// rely on the page being its to take back.
#[must_use = "a page the store is done with goes back to its supply"]
pub(crate) struct IdlePage {
    page: usize,
}

impl IdlePage {
    /// Made by the page table only, when page `page` becomes idle.
    pub(super) fn new(page: usize) -> Self {
        Self { page }
    }

    /// The page's index.
    pub(crate) fn page(&self) -> usize {
        self.page
    }
}

/// The store's one copy into a page: bound to a new entry, `Filling`,
/// with the storing task as its only copier, so nobody reads it, gives it
/// back or hands it to an allocation until the copy ends (a discard waits
/// for it).  Only the store makes one (`store.rs`), for the length of the
/// [`PageAccess::copy_in`] call it is lent to.
pub(crate) struct FillCopy {
    page: usize,
}

impl FillCopy {
    /// Made by the store only, for the copy into page `page`.
    pub(super) fn new(page: usize) -> Self {
        Self { page }
    }

    /// The page's index.
    pub(crate) fn page(&self) -> usize {
        self.page
    }
}

/// A copy out of a page: its entry is `Ready` and the loading task is
/// counted among its copiers, so nobody writes it, gives it back or hands
/// it to an allocation until the copy ends.  Only the store makes one
/// (`store.rs`), for the length of the [`PageAccess::copy_out`] call it
/// is lent to.
pub(crate) struct ReadCopy {
    page: usize,
}

impl ReadCopy {
    /// Made by the store only, for the copy out of page `page`.
    pub(super) fn new(page: usize) -> Self {
        Self { page }
    }

    /// The page's index.
    pub(crate) fn page(&self) -> usize {
        self.page
    }
}

/// Copies page contents; the store never touches page memory itself.
///
/// Called with no store lock held; the copy may be preempted.  The page
/// comes as a permit that only the store makes, while its state machine
/// keeps everyone else off the page: an implementation may rely on that
/// for the copy's length.
pub(crate) trait PageAccess {
    /// What a store copies from (a page of the page cache, or a swap page,
    /// borrowed for reading for `'a`).
    type Src<'a>;
    /// What a load copies to (a page borrowed for writing for `'a`).
    type Dst<'a>;

    /// Copies `src` into the area page of `to`.  Returns `false`, having
    /// copied nothing usable, if either page is bad memory
    /// (hardware-poisoned): the store then refuses and gives the area page
    /// back, and the supply keeps it out of use if it is the bad one.
    fn copy_in(&self, to: &FillCopy, src: Self::Src<'_>) -> bool;

    /// Copies the area page of `from` into `dst`.  Returns `false` if the
    /// page is bad memory: `dst` then holds no data of the entry, which
    /// the load drops, reporting a miss.
    fn copy_out(&self, from: &ReadCopy, dst: Self::Dst<'_>) -> bool;
}

/// Type parameters of a [`Dmem`] instance.
///
/// [`Dmem`]: super::Dmem
pub(crate) trait Config: Sized {
    /// Locks and waiting.
    type Platform: Platform;
    /// Keys.
    type Key: Key;
    /// Map of one bucket.
    type Map: BucketMap<Self::Key>;
    /// Storage of the bucket array (`KVec` in the kernel).
    type Buckets: Deref<Target = [BucketLock<Self>]> + Send + Sync;
    /// Storage of the page table's slots (`KVVec` in the kernel).
    type Slots: DerefMut<Target = [Slot<Self::Key>]> + Send;
    /// Storage of the page table's links (`KVVec` in the kernel).
    type Links: DerefMut<Target = [Link]> + Send;
    /// Page supply.
    type Supply: PageSupply;
    /// Page copier.
    type Access: PageAccess;
}

/// A bucket: its map under its lock.
pub(crate) type BucketLock<C> = <<C as Config>::Platform as Platform>::Lock<<C as Config>::Map>;
