// SPDX-License-Identifier: GPL-2.0

//! DMEM: a store of discardable pages kept in lent GCMA area pages.
//!
//! DMEM is the secondary client of GCMA.  It keeps copies of pages the
//! kernel has already written elsewhere — clean file pages evicted from the
//! page cache, and swapped-out pages written through to the swap device —
//! in area pages that GCMA lends it.  Any entry may vanish at any time:
//! when a primary (contiguous) allocation claims its page, the entry is
//! discarded and a later load misses; the caller then reads the data back
//! from the file or the swap device.
//!
//! One [`Dmem`] instance serves one client.  The kernel has two: one for
//! clean file pages, keyed by [`FileKey`] (superblock id, inode number,
//! page index), and one for swap pages, keyed by
//! [`SwapKey`] (swap type, offset).
//!
//! This module is shared: it builds in the kernel crate and, unchanged, on
//! the host against the shim of the kernel crate (`tools/host`).  Every
//! service it needs from its environment comes through a trait:
//!
//! * [`Platform`]: the lock type and how to wait politely (spinlock and
//!   `cond_resched()` in the kernel; `std` or `loom` mutexes on the host);
//! * [`BucketMap`]: the ordered map of one hash bucket (`kernel::rbtree`
//!   in the kernel, `BTreeMap` on the host);
//! * [`PageSupply`]: where pages come from (`AreaMap::lend_secondary()`
//!   and `AreaMap::return_secondary()` in the kernel);
//! * [`PageAccess`]: copying bytes into and out of a page (a mapped
//!   `struct page` in the kernel, plain memory on the host).  The store
//!   itself never touches page memory.
//!
//! # Structure
//!
//! An instance has two kinds of state, under two kinds of lock:
//!
//! * The *index*: a hash table of [`BucketMap`]s, each under its own bucket
//!   lock, mapping a key to a [`Handle`] (area page index and binding
//!   sequence number).  A key's bucket is chosen by [`Key::bucket_hash`]:
//!   all pages of one file share a bucket, so invalidating a file visits
//!   one tree; swap offsets are grouped in clusters of
//!   `1 << SWAP_CLUSTER_SHIFT` pages.
//! * The *page table*, under the one page lock: per page the supply may
//!   lend (indexed by area page index), a [`Link`], holding the page's
//!   [`State`], its count of in-flight copies and its links in the LRU
//!   list, and a [`Slot`], holding the key and sequence number it is bound
//!   to.  They are two arrays, as most operations need only the first.
//!   The LRU list holds the bound pages ([`State::Filling`] and
//!   [`State::Ready`]) in the order they were stored; eviction takes the
//!   oldest idle one.
//!
//! The page table is the truth; the index is a hint.  A handle found in a
//! bucket is used only after checking, under the page lock, that its slot
//! is still bound with the same sequence number (every binding gets a new
//! one).  An index entry can therefore go stale (its page was evicted or
//! discarded by a path that does not hold the key's bucket lock), and
//! lookups treat a stale entry as a miss.  An eviction removes the entry it
//! made stale right afterwards with [`BucketMap::remove_if`].  A discard
//! does not: it leaves the key in the slot and puts the slot on the *stale
//! list*, so that a discard costs one page-lock section per chunk of pages
//! and no bucket lock at all.  Stale entries are removed later, also with
//! [`BucketMap::remove_if`]: by the store that binds the slot's page again
//! (the page was given back by its primary owner and lent anew), and a few
//! at a time by every store ([`REAP_PER_STORE`]), by range invalidations
//! and by [`Dmem::clear`] ([`Dmem::reap`]).  As a slot holds at most one
//! stale key, the index never holds more stale entries than there are
//! pages.
//!
//! # Page states
//!
//! ```text
//!           bind (store)              fill done
//!   Free ---------------> Filling ---------------> Ready
//!    ^                      |   \                  |  |
//!    |     unbind, busy     |    \  discard        |  | unbind (invalidate,
//!    |   (invalidate or     v     v                |  | replace, evict,
//!    |    replace)        Dead  Discarded <--------+  | exclusive load)
//!    |                      |       |    discard      |
//!    +----------------------+-------+-----------------+
//!      last copy done;      discarder, once   idle: straight to Free
//!      page given back      copies are 0      (page given back or reused)
//! ```
//!
//! * [`State::Free`]: the store does not hold the page.
//! * [`State::Filling`]: bound to a key; the store is copying data in.
//! * [`State::Ready`]: bound to a key; the data is valid and may be loaded.
//! * [`State::Dead`]: unbound (invalidated or replaced) while copies were in
//!   flight; the last copy to finish gives the page back to the supply.
//! * [`State::Discarded`]: a primary allocation claimed the page.  The page
//!   is never given back (GCMA's `finish_discard()` takes it); the
//!   discarder turns it [`State::Free`] once no copy is in flight.
//!
//! A slot discarded while bound keeps its key, on the stale list, in
//! [`State::Discarded`] and then [`State::Free`], until its stale index
//! entry is removed.
//!
//! Every slot counts its in-flight copies (`copiers`): the filling store
//! counts as one, and so does every load copying out.  A slot whose count
//! is not zero is never rebound nor given back, and its page is never
//! handed to a primary client: [`Dmem::discard_range`] marks the slot
//! [`State::Discarded`] and then waits for the count to drop to zero before
//! it reports the page free.
//!
//! # The discard race
//!
//! A primary allocation that claims a range calls [`Dmem::discard_range`]
//! for it, and writes into a page as soon as the call reports the page
//! free.  The guarantees are:
//!
//! * **No copy outlives a discard.**  Copies run without any lock, between
//!   two page-lock sections that raise and lower the slot's count.  The
//!   discarder marks the slot under the page lock, then polls the count
//!   under the page lock, calling [`Platform::relax`] between polls (which
//!   sleeps once the wait is not short, see there); when it
//!   sees zero, every copy has left the page, and the lock orders those
//!   copies before everything the new owner does.  (A count already zero
//!   when the slot is marked frees it in that same section.)
//!   [`Dmem::discard_range`] marks up to [`DISCARD_CHUNK`] slots per
//!   page-lock section, waits for the busy ones of the chunk, and only then
//!   reports the chunk's pages to its caller as free.
//! * **A load never returns the new owner's bytes.**  A load finds the slot
//!   [`State::Ready`] and raises the count under the page lock before it
//!   copies; after copying it looks again, and reports a miss if the slot
//!   was discarded meanwhile (the bytes are in fact still the old ones, as
//!   the discarder waited, but a discarded entry is gone).
//! * **A store never writes into a discarded page after the discard.**  The
//!   store binds the page and raises the count in one page-lock section;
//!   when its copy is done it finds the slot [`State::Discarded`] and
//!   reports [`Refusal::Discarded`] ("not stored").
//! * **No page escapes the discard.**  Pages are lent by the supply inside
//!   the page-lock section that binds them, so a discard of a page always
//!   finds it either [`State::Free`] (not held: nothing to do) or bound.
//!
//! # Lock order and sleeping
//!
//! `bucket lock -> page lock -> area map lock` (the last one taken inside
//! [`PageSupply::lend`] and [`PageSupply::give_back`]).  Two bucket locks
//! are never held together.  A store holds its key's bucket lock around the
//! page-lock section that binds its page, so that removing the key's old
//! entry, binding the new page and inserting the new index entry are one
//! step for concurrent stores of the same key.  Every other path takes the
//! page lock without a bucket lock, and takes a bucket lock (for index
//! cleanup) only after dropping the page lock.
//!
//! Nothing sleeps under any of these locks: the locks are spinlocks in the
//! kernel, the supply calls only take the area map's spinlock, and index
//! nodes are allocated before any lock is taken.  [`Dmem::store`],
//! [`Dmem::load`] and the invalidations never wait for anything else, so
//! they may run in reclaim and swap-out paths and under other spinlocks
//! (not in interrupt context: the locks are not IRQ-safe).  Copies
//! ([`PageAccess`]) run with no store lock held.  Only
//! [`Dmem::discard_range`] waits, for copies in flight to finish; GCMA
//! calls it from its discard hook, which may sleep.
//!
//! # Memory
//!
//! The page table is allocated when the instance is created, one [`Slot`]
//! per page the supply may lend.  The only allocation on the store path is
//! one index node, reserved before any lock is taken with `GFP_NOWAIT |
//! __GFP_NOWARN` (no sleeping, no recursion into reclaim, no warning): if it
//! fails, the store reports [`Refusal::NoMemory`] and drops the key's old
//! entry, which is stale now.  No operation returns an error.
//!
//! # Eviction
//!
//! A store takes, in this order: the page of the key's old entry if that is
//! idle (replacing in place), a page lent by the supply, or the page of the
//! least recently stored idle entry, which is evicted.  The eviction scan
//! looks at no more than [`EVICT_SCAN`] entries from the old end of the LRU
//! list, skipping entries being filled or loaded; if none is idle the store
//! is refused with [`Refusal::NoSpace`].  Loads do not move entries in the
//! LRU list.

use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicUsize, Ordering};
use kernel::alloc::Flags;
use kernel::prelude::*;

/// End-of-list marker of the LRU links; never a valid page index, as slot
/// storage holds fewer than `usize::MAX` elements.
const NIL: usize = usize::MAX;

/// Most LRU entries an eviction looks at, from the oldest, before giving up.
pub(crate) const EVICT_SCAN: usize = 16;

/// Slots [`Dmem::discard_range`] marks per page-lock section: the bits of a
/// `u64`.  It bounds the time the page lock is held to a few microseconds.
pub(crate) const DISCARD_CHUNK: usize = 64;

/// Stale index entries every store removes, at most, once it is done: more
/// than one, so the stale list shrinks while the store refills the pages.
pub(crate) const REAP_PER_STORE: usize = 2;

/// Swap pages of one cluster of `1 << SWAP_CLUSTER_SHIFT` offsets share a
/// bucket.
pub(crate) const SWAP_CLUSTER_SHIFT: u32 = 6;

/// Allocation flags of index nodes: the store runs in reclaim and swap-out
/// paths, so it must neither sleep nor recurse into reclaim, and a failure
/// is expected and harmless.
pub(crate) fn node_flags() -> Flags {
    GFP_NOWAIT | __GFP_NOWARN
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

    /// Lets other threads run while [`Dmem::discard_range`] waits for copies in
    /// flight; called with no lock held, `round` counting the calls of one
    /// wait from 0.  May sleep, and must once `round` grows: the copier may
    /// be a task of lower priority preempted on the waiter's CPU, which
    /// only a waiter that leaves the run queue lets finish.
    fn relax(round: u32);
}

/// A key of the store.
///
/// The order of keys must put every group of keys that share a bucket (see
/// [`Key::same_group`]) in one contiguous run.
pub(crate) trait Key: Ord + Clone + Send {
    /// Hash choosing the key's bucket.  Equal for keys of the same group.
    fn bucket_hash(&self) -> u64;

    /// Whether every key `k` with `lo <= k <= hi` has the bucket hash of
    /// `lo`, so a range invalidation need only visit that bucket.  `false`
    /// is always correct, and makes the invalidation visit every bucket.
    fn same_group(lo: &Self, hi: &Self) -> bool;
}

/// Mixes `v` into the hash `h`.
const fn mix(h: u64, v: u64) -> u64 {
    (h ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(31)
}

/// Key of a clean file page: the file, then the page index in the file.
///
/// The file is named by its superblock and inode number alone.  An entry
/// never outlives the in-memory inode it was stored from (evicting the
/// inode truncates its whole range, which drops its entries), and an inode
/// number is unique among the live inodes of a superblock, so the pair
/// names one file for as long as the entry exists.  Mutable inode fields
/// (the generation, which `EXT[24]_IOC_SETVERSION` rewrites without
/// touching the page cache) must not be part of the key: entries stored
/// under an old value would be orphaned and come back with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct FileKey {
    /// Identifier of the file system instance (superblock).
    pub(crate) sb: u32,
    /// Inode number.
    pub(crate) ino: u64,
    /// Page index in the file.
    pub(crate) index: u64,
}

impl FileKey {
    /// The inclusive key range of every page of one file.
    pub(crate) fn file_range(sb: u32, ino: u64) -> (FileKey, FileKey) {
        let key = |index| FileKey { sb, ino, index };
        (key(0), key(u64::MAX))
    }
}

impl Key for FileKey {
    fn bucket_hash(&self) -> u64 {
        mix(mix(0, self.sb.into()), self.ino)
    }

    fn same_group(lo: &Self, hi: &Self) -> bool {
        (lo.sb, lo.ino) == (hi.sb, hi.ino)
    }
}

/// Key of a swap page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct SwapKey {
    /// Swap type (index of the swap device).
    pub(crate) swap_type: u32,
    /// Offset in the swap device, in pages.
    pub(crate) offset: u64,
}

impl SwapKey {
    /// The inclusive key range of every page of one swap device.
    pub(crate) fn device_range(swap_type: u32) -> (SwapKey, SwapKey) {
        (
            SwapKey {
                swap_type,
                offset: 0,
            },
            SwapKey {
                swap_type,
                offset: u64::MAX,
            },
        )
    }
}

impl Key for SwapKey {
    fn bucket_hash(&self) -> u64 {
        mix(
            mix(0, self.swap_type.into()),
            self.offset >> SWAP_CLUSTER_SHIFT,
        )
    }

    fn same_group(lo: &Self, hi: &Self) -> bool {
        lo.swap_type == hi.swap_type
            && lo.offset >> SWAP_CLUSTER_SHIFT == hi.offset >> SWAP_CLUSTER_SHIFT
    }
}

/// What the index maps a key to: a page and the sequence number of the
/// binding of the page to the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Handle {
    /// Area page index.
    pub(crate) page: usize,
    /// Sequence number of the binding; a handle whose number differs from
    /// the slot's is stale.
    pub(crate) seq: u64,
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

    /// Takes back a page lent by [`PageSupply::lend`].  Never called for a
    /// page passed to [`Dmem::discard_range`].
    fn give_back(&self, page: usize);
}

/// Copies page contents; the store never touches page memory itself.
///
/// Called with no store lock held; the copy may be preempted.
pub(crate) trait PageAccess {
    /// What a store copies from (a page of the page cache, or a swap page).
    type Src: ?Sized;
    /// What a load copies to.
    type Dst: ?Sized;

    /// Copies `src` into area page `page`.  Returns `false`, having copied
    /// nothing, if `page` is bad memory (hardware-poisoned): the store
    /// then refuses and gives the page back, and the supply keeps it out of
    /// use.
    fn copy_in(&self, page: usize, src: &Self::Src) -> bool;

    /// Copies area page `page` into `dst`.  Returns `false` if `page` is
    /// bad memory: `dst` then holds no data of the entry, which the load
    /// drops, reporting a miss.
    fn copy_out(&self, page: usize, dst: &mut Self::Dst) -> bool;
}

/// State of a page of the page table; see the module documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// Not held by the store.
    Free,
    /// Bound to a key; a store is copying data in.
    Filling,
    /// Bound to a key; holds its data.
    Ready,
    /// Unbound while copies were in flight; given back after the last one.
    Dead,
    /// Claimed by a primary allocation; freed by the discarder once no copy
    /// is in flight, never given back.
    Discarded,
}

/// The page-table entry of one page, first part: its state, copies and
/// list links, which every page-table operation goes through.
///
/// The entry is split in two arrays, this [`Link`] and the [`Slot`] with
/// the key, so that the operations that need no key, a discard above all,
/// go through a few bytes per page rather than the whole entry.
///
/// # Invariants
///
/// * The pages on the LRU list are exactly those in [`State::Filling`] and
///   [`State::Ready`]; their slot's `key` is `Some`.
/// * The pages on the stale list are in [`State::Free`] or
///   [`State::Discarded`]; their slot's `key` is `Some`, the key of the
///   binding they had when they were discarded (sequence number `seq`),
///   whose index entry may still be in the index.
/// * Every other page's slot has `key` `None`.
/// * `copiers` is 0 in [`State::Free`], at least 1 in [`State::Filling`]
///   (the store filling it) and in [`State::Dead`].
pub(crate) struct Link {
    /// State of the page.
    state: State,
    /// Copies in flight into or out of the page.
    copiers: u32,
    /// Next more recently stored page on the LRU list, or previous page on
    /// the stale list, or [`NIL`].
    prev: usize,
    /// Next less recently stored page on the LRU list, or next page on the
    /// stale list, or [`NIL`].
    next: usize,
}

impl Link {
    /// The link of a page the store does not hold.
    pub(crate) const fn new() -> Self {
        Link {
            state: State::Free,
            copiers: 0,
            prev: NIL,
            next: NIL,
        }
    }
}

impl Default for Link {
    fn default() -> Self {
        Self::new()
    }
}

/// The page-table entry of one page, second part: its binding.  See
/// [`Link`] for the invariants.
pub(crate) struct Slot<K> {
    /// Sequence number of the page's current or last binding.
    seq: u64,
    /// Key the page is bound to.
    key: Option<K>,
}

impl<K> Slot<K> {
    /// A slot of a page the store does not hold.
    pub(crate) const fn new() -> Self {
        Slot { seq: 0, key: None }
    }
}

impl<K> Default for Slot<K> {
    fn default() -> Self {
        Self::new()
    }
}

/// Why a store did not store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The index node could not be allocated.
    NoMemory,
    /// No page was free and no entry could be evicted.
    NoSpace,
    /// A primary allocation claimed the page while it was being filled.
    Discarded,
    /// The entry was invalidated or replaced while it was being filled.
    Superseded,
    /// The page lent for the copy is bad memory (hardware-poisoned).
    Poisoned,
}

/// Outcome of [`Dmem::store`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub(crate) enum StoreOutcome {
    /// The page is stored.
    Stored,
    /// The page is not stored, and the key holds no entry (unless a
    /// concurrent store put one).
    Refused(Refusal),
}

/// Counters of an instance, as returned by [`Dmem::stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Stats {
    /// Entries now stored (being filled or ready): pages bound to a key.
    pub(crate) stored_pages: usize,
    /// Pages held, including those unbound or discarded but still busy.
    pub(crate) held_pages: usize,
    /// Stores that stored.
    pub(crate) stores: usize,
    /// Loads that returned data.
    pub(crate) hits: usize,
    /// Loads that did not.
    pub(crate) misses: usize,
    /// Entries removed by invalidations.
    pub(crate) invalidations: usize,
    /// Held pages discarded for primary allocations.
    pub(crate) discards: usize,
    /// Entries evicted to make room for stores.
    pub(crate) evictions: usize,
    /// Stores refused with [`Refusal::NoMemory`].
    pub(crate) refused_nomem: usize,
    /// Stores refused with [`Refusal::NoSpace`].
    pub(crate) refused_nospace: usize,
    /// Stores refused with [`Refusal::Discarded`].
    pub(crate) refused_discarded: usize,
    /// Stores refused with [`Refusal::Superseded`].
    pub(crate) refused_superseded: usize,
    /// Copies that found their held page bad memory (hardware-poisoned):
    /// stores refused with [`Refusal::Poisoned`] and loads that missed and
    /// dropped their entry.
    pub(crate) poisoned: usize,
}

/// Event counters; relaxed atomics, as they order nothing.
#[derive(Default)]
struct Counters {
    /// See [`Stats::stores`].
    stores: AtomicUsize,
    /// See [`Stats::hits`].
    hits: AtomicUsize,
    /// See [`Stats::misses`].
    misses: AtomicUsize,
    /// See [`Stats::invalidations`].
    invalidations: AtomicUsize,
    /// See [`Stats::discards`].
    discards: AtomicUsize,
    /// See [`Stats::evictions`].
    evictions: AtomicUsize,
    /// Refused stores, indexed by [`Counters::refusal_index`] (those
    /// refused with [`Refusal::Poisoned`] are counted in `poisoned`).
    refused: [AtomicUsize; 4],
    /// See [`Stats::poisoned`].
    poisoned: AtomicUsize,
}

impl Counters {
    /// Adds `n` to `c`.
    fn add(c: &AtomicUsize, n: usize) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// Reads `c`.
    fn get(c: &AtomicUsize) -> usize {
        c.load(Ordering::Relaxed)
    }

    /// Index of `r` in `refused`.
    fn refusal_index(r: Refusal) -> usize {
        match r {
            Refusal::NoMemory => 0,
            Refusal::NoSpace => 1,
            Refusal::Discarded => 2,
            Refusal::Superseded => 3,
            // Out of `refused`: counted in `poisoned`.
            Refusal::Poisoned => 4,
        }
    }
}

/// An index entry [`Pages::bind`] made stale, for the caller to remove:
/// its key and handle, and whether it was evicted (`true`) or is the stale
/// entry of a discarded page bound again (`false`).
type Displaced<K> = (K, Handle, bool);

/// Outcome of [`Pages::unbind`].
enum Unbound {
    /// The handle was stale: nothing done.
    Stale,
    /// The page was idle and is now [`State::Free`]: the caller gives it
    /// back or reuses it.
    Idle(usize),
    /// Copies are in flight: the page is [`State::Dead`] and the last copy
    /// gives it back.
    Busy,
}

/// The page table and LRU list, under the page lock.
///
/// # Invariants
///
/// * `links` and `slots` have the same length.
/// * The LRU list, from `head` (most recently stored) to `tail` through
///   `next`, holds exactly the pages in [`State::Filling`] or
///   [`State::Ready`], and there are `bound` of them; `prev` links mirror
///   `next` links.
/// * The stale list, from `stale_head` through `next`, holds exactly the
///   pages not on the LRU list whose slot's `key` is `Some`, and there are
///   `stale` of them; `prev` links mirror `next` links.
/// * `held` is the number of pages not in [`State::Free`].
/// * `next_seq` is above every slot's `seq`.
struct Pages<K, S, L> {
    /// One slot per page the supply may lend.
    slots: S,
    /// One link per page the supply may lend.
    links: L,
    /// Most recently stored bound page, or [`NIL`].
    head: usize,
    /// Least recently stored bound page, or [`NIL`].
    tail: usize,
    /// Slots in [`State::Filling`] or [`State::Ready`].
    bound: usize,
    /// First slot of the stale list, or [`NIL`].
    stale_head: usize,
    /// Slots on the stale list.
    stale: usize,
    /// Slots not in [`State::Free`].
    held: usize,
    /// Sequence number of the next binding.
    next_seq: u64,
    /// The slots' key type.
    _key: PhantomData<K>,
}

impl<K: Key, S: DerefMut<Target = [Slot<K>]>, L: DerefMut<Target = [Link]>> Pages<K, S, L> {
    /// Puts bound page `p` at the head of the LRU list.
    fn push_head(&mut self, p: usize) {
        let old = self.head;
        if let Some(s) = self.links.get_mut(p) {
            s.prev = NIL;
            s.next = old;
        }
        match self.links.get_mut(old) {
            Some(s) => s.prev = p,
            None => self.tail = p,
        }
        self.head = p;
    }

    /// Takes page `p` off the LRU list.
    fn unlink(&mut self, p: usize) {
        let Some(s) = self.links.get_mut(p) else {
            return;
        };
        let (prev, next) = (s.prev, s.next);
        s.prev = NIL;
        s.next = NIL;
        self.close_lru_gap(prev, next);
    }

    /// Links `before` and `after` ([`NIL`] for the list's ends) to each
    /// other on the LRU list, over the pages that were between them.
    fn close_lru_gap(&mut self, before: usize, after: usize) {
        match self.links.get_mut(before) {
            Some(s) => s.next = after,
            None => self.head = after,
        }
        match self.links.get_mut(after) {
            Some(s) => s.prev = before,
            None => self.tail = before,
        }
    }

    /// Marks the held pages among `lo..hi` discarded, for
    /// [`Dmem::discard_range`]: the idle ones become free, the busy ones
    /// [`State::Discarded`], and the bound ones leave the LRU list for the
    /// stale list.  Returns the bits, relative to `base`, of the pages freed
    /// (`done`) and of the busy ones.
    ///
    /// Pages lent one after the other sit next to each other on the LRU
    /// list too, in one direction or the other, so the bound pages of a
    /// range mostly form a few stretches of it.  Each stretch moves to the
    /// stale list whole, keeping its own links: per page, only its state
    /// changes and one link of its neighbour is read.
    ///
    /// Out of line: the loop every discarded page goes through stays small
    /// and in one place, whatever its caller inlines around it.
    #[inline(never)]
    fn mark_discarded(&mut self, base: usize, lo: usize, hi: usize) -> (u64, u64) {
        let (mut done, mut busy) = (0u64, 0u64);
        // The stretch of the LRU list marked so far, from its most recently
        // stored page to its least recently stored one.
        let mut run: Option<(usize, usize)> = None;
        let mut moved = 0;
        for page in lo..hi {
            let Some(s) = self.links.get_mut(page) else {
                break;
            };
            let bit = 1u64 << (page - base);
            let bound = match s.state {
                State::Free | State::Discarded => continue,
                State::Dead => false,
                State::Filling | State::Ready => true,
            };
            if s.copiers == 0 {
                s.state = State::Free;
                done |= bit;
            } else {
                s.state = State::Discarded;
                busy |= bit;
            }
            if !bound {
                continue;
            }
            // The key stays in the slot: its index entry is stale from now
            // on.
            moved += 1;
            run = Some(match run {
                None => (page, page),
                Some((first, last)) if self.next_of(last) == page => (first, page),
                Some((first, last)) if self.prev_of(first) == page => (page, last),
                Some((first, last)) => {
                    self.move_to_stale(first, last);
                    (page, page)
                }
            });
        }
        if let Some((first, last)) = run {
            self.move_to_stale(first, last);
        }
        self.bound -= moved;
        self.stale += moved;
        self.held -= done.count_ones() as usize;
        (done, busy)
    }

    /// The `next` link of page `p`, or [`NIL`].
    fn next_of(&self, p: usize) -> usize {
        self.links.get(p).map_or(NIL, |s| s.next)
    }

    /// The `prev` link of page `p`, or [`NIL`].
    fn prev_of(&self, p: usize) -> usize {
        self.links.get(p).map_or(NIL, |s| s.prev)
    }

    /// Moves the stretch of the LRU list from `first` to `last` (following
    /// `next`) to the head of the stale list; the caller counts its pages.
    fn move_to_stale(&mut self, first: usize, last: usize) {
        self.close_lru_gap(self.prev_of(first), self.next_of(last));
        let old = self.stale_head;
        if let Some(s) = self.links.get_mut(first) {
            s.prev = NIL;
        }
        if let Some(s) = self.links.get_mut(last) {
            s.next = old;
        }
        if let Some(s) = self.links.get_mut(old) {
            s.prev = last;
        }
        self.stale_head = first;
    }

    /// Takes page `p` off the stale list, if it is on it, and returns the
    /// stale index entry it stood for.
    fn take_stale(&mut self, p: usize) -> Option<(K, Handle)> {
        let l = self.links.get(p)?;
        if matches!(l.state, State::Filling | State::Ready) {
            return None;
        }
        let (prev, next) = (l.prev, l.next);
        let s = self.slots.get_mut(p)?;
        let key = s.key.take()?;
        let h = Handle {
            page: p,
            seq: s.seq,
        };
        if let Some(l) = self.links.get_mut(p) {
            l.prev = NIL;
            l.next = NIL;
        }
        match self.links.get_mut(prev) {
            Some(s) => s.next = next,
            None => self.stale_head = next,
        }
        if let Some(s) = self.links.get_mut(next) {
            s.prev = prev;
        }
        self.stale -= 1;
        Some((key, h))
    }

    /// Takes the first page off the stale list and returns the stale index
    /// entry it stood for.
    fn pop_stale(&mut self) -> Option<(K, Handle)> {
        self.take_stale(self.stale_head)
    }

    /// Whether `h` names the current binding of its page, in `state`.
    fn is(&self, h: Handle, state: State) -> bool {
        self.links.get(h.page).is_some_and(|l| l.state == state)
            && self.slots.get(h.page).is_some_and(|s| s.seq == h.seq)
    }

    /// Unbinds the binding `h` if it is current: the page leaves the LRU
    /// list and becomes [`State::Free`] if idle, [`State::Dead`] if not.
    fn unbind(&mut self, h: Handle) -> Unbound {
        if !self.is(h, State::Ready) && !self.is(h, State::Filling) {
            return Unbound::Stale;
        }
        self.unlink(h.page);
        self.bound -= 1;
        if let Some(s) = self.slots.get_mut(h.page) {
            s.key = None;
        }
        let Some(s) = self.links.get_mut(h.page) else {
            return Unbound::Stale;
        };
        if s.copiers == 0 {
            s.state = State::Free;
            self.held -= 1;
            Unbound::Idle(h.page)
        } else {
            s.state = State::Dead;
            Unbound::Busy
        }
    }

    /// As [`Pages::unbind`], giving an idle page back; returns whether the
    /// binding was current.
    fn unbind_release(&mut self, h: Handle, supply: &impl PageSupply) -> bool {
        match self.unbind(h) {
            Unbound::Stale => false,
            Unbound::Idle(p) => {
                supply.give_back(p);
                true
            }
            Unbound::Busy => true,
        }
    }

    /// Evicts the least recently stored idle [`State::Ready`] entry among
    /// the [`EVICT_SCAN`] oldest, and returns its page, now [`State::Free`],
    /// with its key and handle.
    fn evict(&mut self) -> Option<(usize, K, Handle)> {
        let mut p = self.tail;
        for _ in 0..EVICT_SCAN {
            let l = self.links.get(p)?;
            if l.state == State::Ready && l.copiers == 0 {
                let s = self.slots.get(p)?;
                let h = Handle {
                    page: p,
                    seq: s.seq,
                };
                let key = s.key.clone()?;
                return match self.unbind(h) {
                    Unbound::Idle(p) => Some((p, key, h)),
                    _ => None,
                };
            }
            p = l.prev;
        }
        None
    }

    /// Finds a page for a new entry of `key` and binds it, in
    /// [`State::Filling`] with the store counted as a copier.  `old` is the
    /// key's previous handle, just removed from the index: its page is
    /// unbound, and reused if idle.  Returns the new handle and the index
    /// entry the caller must remove, if any: the entry evicted (`true`), or
    /// the stale entry of a discarded page lent again (`false`).
    fn bind(
        &mut self,
        key: &K,
        old: Option<Handle>,
        supply: &impl PageSupply,
    ) -> Result<(Handle, Option<Displaced<K>>), Refusal> {
        let spare = match old.map(|h| self.unbind(h)) {
            Some(Unbound::Idle(p)) => {
                // Held again right away.
                self.held += 1;
                Some(p)
            }
            _ => None,
        };
        let mut victim = None;
        let page = if let Some(p) = spare {
            p
        } else if let Some(p) = supply.lend() {
            if self.links.get(p).map(|s| s.state) != Some(State::Free) {
                // A page out of range or already held: the supply broke its
                // contract.  Leave it alone rather than corrupt the table.
                return Err(Refusal::NoSpace);
            }
            victim = self.take_stale(p).map(|(k, h)| (k, h, false));
            self.held += 1;
            p
        } else if let Some((p, k, h)) = self.evict() {
            victim = Some((k, h, true));
            self.held += 1;
            p
        } else {
            return Err(Refusal::NoSpace);
        };
        let seq = self.next_seq;
        self.next_seq += 1;
        if let Some(l) = self.links.get_mut(page) {
            l.state = State::Filling;
            l.copiers = 1;
        }
        if let Some(s) = self.slots.get_mut(page) {
            s.seq = seq;
            s.key = Some(key.clone());
        }
        self.push_head(page);
        self.bound += 1;
        Ok((Handle { page, seq }, victim))
    }

    /// Ends a copy into or out of the page of `h`, and returns the page's
    /// state before the end.  The last copy out of a [`State::Dead`] page
    /// gives the page back.
    fn end_copy(&mut self, h: Handle, supply: &impl PageSupply) -> State {
        let Some(s) = self.links.get_mut(h.page) else {
            return State::Free;
        };
        let state = s.state;
        s.copiers = s.copiers.saturating_sub(1);
        if state == State::Dead && s.copiers == 0 {
            s.state = State::Free;
            self.held -= 1;
            supply.give_back(h.page);
        }
        state
    }
}

/// Type parameters of a [`Dmem`] instance.
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

/// The page lock of an instance of configuration `C`.
type PagesLock<C> = <<C as Config>::Platform as Platform>::Lock<
    Pages<<C as Config>::Key, <C as Config>::Slots, <C as Config>::Links>,
>;

/// Source type of the copier of `C`.
type Src<C> = <<C as Config>::Access as PageAccess>::Src;

/// Destination type of the copier of `C`.
type Dst<C> = <<C as Config>::Access as PageAccess>::Dst;

/// A DMEM instance: the store of one client.
///
/// # Invariants
///
/// `buckets` is not empty; `supply` lends only pages below the number of
/// slots (a page it lends otherwise is refused and never given back);
/// there are as many links as slots.
pub(crate) struct Dmem<C: Config> {
    /// The hash table of the index.
    buckets: C::Buckets,
    /// The page table and LRU list.
    pages: PagesLock<C>,
    /// Page supply.
    supply: C::Supply,
    /// Page copier.
    access: C::Access,
    /// Whether a load drops the entry it hits (swap: the page is in memory
    /// again and its swap slot will be rewritten or freed).
    exclusive_loads: bool,
    /// The length of the stale list as of the last page-lock section that
    /// changed it, so that [`Dmem::reap`] need not take the lock to find
    /// the list empty.
    stale_hint: AtomicUsize,
    /// Event counters.
    counters: Counters,
}

impl<C: Config> Dmem<C> {
    /// Creates an empty bucket, for the bucket array given to
    /// [`Dmem::new`].
    pub(crate) fn new_bucket() -> Result<BucketLock<C>> {
        Lock::new(C::Map::new(), LockClass::Bucket)
    }

    /// Creates an instance over `buckets` (from [`Dmem::new_bucket`]),
    /// `slots` and `links` (one of each per page `supply` may lend; they
    /// are reset to [`State::Free`]).  With `exclusive_loads`, a load that
    /// hits drops the entry.
    ///
    /// Fails with `EINVAL` if `buckets` is empty or a bucket is not, or if
    /// `slots` and `links` differ in length, and with the lock
    /// constructor's error.
    pub(crate) fn new(
        buckets: C::Buckets,
        mut slots: C::Slots,
        mut links: C::Links,
        supply: C::Supply,
        access: C::Access,
        exclusive_loads: bool,
    ) -> Result<Self> {
        if buckets.is_empty() || slots.len() != links.len() {
            return Err(EINVAL);
        }
        let mut nonempty = false;
        for b in buckets.iter() {
            b.with(|m| m.for_each(|_, _| nonempty = true));
        }
        if nonempty {
            return Err(EINVAL);
        }
        for s in slots.iter_mut() {
            *s = Slot::new();
        }
        for l in links.iter_mut() {
            *l = Link::new();
        }
        let pages = Pages {
            slots,
            links,
            head: NIL,
            tail: NIL,
            bound: 0,
            stale_head: NIL,
            stale: 0,
            held: 0,
            next_seq: 1,
            _key: PhantomData,
        };
        Ok(Dmem {
            buckets,
            pages: Lock::new(pages, LockClass::Pages)?,
            supply,
            access,
            exclusive_loads,
            stale_hint: AtomicUsize::new(0),
            counters: Counters::default(),
        })
    }

    /// The page supply.
    pub(crate) fn supply(&self) -> &C::Supply {
        &self.supply
    }

    /// The page copier.
    pub(crate) fn access(&self) -> &C::Access {
        &self.access
    }

    /// Whether a load that hits drops its entry.
    pub(crate) fn exclusive_loads(&self) -> bool {
        self.exclusive_loads
    }

    /// The bucket of `key`.
    fn bucket(&self, key: &C::Key) -> &BucketLock<C> {
        // `buckets` is not empty (type invariant), so the index is in range
        // and the length is not zero.
        let n = self.buckets.len() as u64;
        &self.buckets[(key.bucket_hash() % n) as usize]
    }

    /// Removes the index entry `key -> h` if still there.
    fn forget(&self, key: &C::Key, h: Handle) {
        self.bucket(key).with(|m| m.remove_if(key, h));
    }

    /// Counts and returns a refusal.
    fn refuse(&self, r: Refusal) -> StoreOutcome {
        if r == Refusal::Poisoned {
            Counters::add(&self.counters.poisoned, 1);
        } else if let Some(c) = self.counters.refused.get(Counters::refusal_index(r)) {
            Counters::add(c, 1);
        }
        StoreOutcome::Refused(r)
    }

    /// Removes the entry of `key`, if any; returns whether there was one.
    fn drop_key(&self, key: &C::Key) -> bool {
        match self.bucket(key).with(|m| m.remove(key)) {
            Some(h) => self.pages.with(|t| t.unbind_release(h, &self.supply)),
            None => false,
        }
    }

    /// Stores a copy of `src` under `key`, replacing the key's entry.
    ///
    /// Never sleeps.  When the page cannot be stored, the key's old entry is
    /// dropped all the same (it is stale) and the reason is returned.
    pub(crate) fn store(&self, key: &C::Key, src: &Src<C>) -> StoreOutcome {
        let Ok(node) = C::Map::reserve(node_flags()) else {
            self.drop_key(key);
            return self.refuse(Refusal::NoMemory);
        };
        let bound = self.bucket(key).with(|m| {
            let old = m.remove(key);
            let bound = self.pages.with(|t| {
                let bound = t.bind(key, old, &self.supply);
                self.stale_hint.store(t.stale, Ordering::Relaxed);
                bound
            });
            if let Ok((h, _)) = bound {
                // `key` was just removed, under this lock: nothing displaced.
                m.insert(node, key.clone(), h);
            }
            bound
        });
        let (h, victim) = match bound {
            Ok(b) => b,
            Err(r) => return self.refuse(r),
        };
        if let Some((vkey, vh, evicted)) = victim {
            if evicted {
                Counters::add(&self.counters.evictions, 1);
            }
            self.forget(&vkey, vh);
        }

        let copied = self.access.copy_in(h.page, src);

        let outcome = self.pages.with(|t| {
            let was = t.end_copy(h, &self.supply);
            if was == State::Filling && copied {
                if let Some(s) = t.links.get_mut(h.page) {
                    s.state = State::Ready;
                }
            }
            was
        });
        self.reap(REAP_PER_STORE);
        match outcome {
            State::Filling if copied => {
                Counters::add(&self.counters.stores, 1);
                StoreOutcome::Stored
            }
            State::Filling => {
                // Bad memory: unbound and given back (still `Filling`, so
                // no load started on it); the supply keeps it out of use.
                self.forget(key, h);
                self.pages.with(|t| t.unbind_release(h, &self.supply));
                self.refuse(Refusal::Poisoned)
            }
            State::Discarded => {
                self.forget(key, h);
                self.refuse(Refusal::Discarded)
            }
            _ => {
                self.forget(key, h);
                self.refuse(Refusal::Superseded)
            }
        }
    }

    /// Copies the entry of `key` into `dst` and returns `true`, or returns
    /// `false` (a miss) if there is none, it is still being filled, or it
    /// was discarded for a primary allocation while being copied.  With
    /// exclusive loads, a hit drops the entry.  Never sleeps.
    pub(crate) fn load(&self, key: &C::Key, dst: &mut Dst<C>) -> bool {
        let h = self.bucket(key).with(|m| m.get(key));
        let started = h.filter(|&h| {
            self.pages.with(|t| {
                if !t.is(h, State::Ready) {
                    return false;
                }
                t.links.get_mut(h.page).map(|s| s.copiers += 1).is_some()
            })
        });
        let Some(h) = started else {
            Counters::add(&self.counters.misses, 1);
            return false;
        };

        let copied = self.access.copy_out(h.page, dst);

        let (hit, dropped) = self.pages.with(|t| match t.end_copy(h, &self.supply) {
            // Bad memory: the entry goes, and its page back to the supply,
            // which keeps it out of use.
            State::Ready | State::Dead if !copied => (false, t.unbind_release(h, &self.supply)),
            State::Ready => {
                let dropped = self.exclusive_loads && t.unbind_release(h, &self.supply);
                (true, dropped)
            }
            // Unbound by a concurrent invalidation or replacement after the
            // copy started: the bytes are the entry's, the load came first.
            State::Dead => (true, false),
            // Claimed by a primary allocation: the entry is gone.
            _ => (false, false),
        });
        if dropped {
            self.forget(key, h);
        }
        if !copied {
            Counters::add(&self.counters.poisoned, 1);
        }
        let c = if hit {
            &self.counters.hits
        } else {
            &self.counters.misses
        };
        Counters::add(c, 1);
        hit
    }

    /// Drops the entry of `key`; returns whether there was one.
    pub(crate) fn invalidate(&self, key: &C::Key) -> bool {
        let dropped = self.drop_key(key);
        if dropped {
            Counters::add(&self.counters.invalidations, 1);
        }
        dropped
    }

    /// Drops every entry whose key is in `lo..=hi`, and returns how many.
    /// Visits one bucket if [`Key::same_group`] says so, all otherwise.
    pub(crate) fn invalidate_range(&self, lo: &C::Key, hi: &C::Key) -> usize {
        if lo > hi {
            return 0;
        }
        let mut dropped = 0;
        let mut drain = |b: &BucketLock<C>| {
            while let Some((_, h)) = b.with(|m| m.pop_range(lo, hi)) {
                if self.pages.with(|t| t.unbind_release(h, &self.supply)) {
                    dropped += 1;
                }
            }
        };
        if C::Key::same_group(lo, hi) {
            drain(self.bucket(lo));
        } else {
            self.buckets.iter().for_each(drain);
        }
        Counters::add(&self.counters.invalidations, dropped);
        self.reap(REAP_PER_STORE);
        dropped
    }

    /// Drops every entry (not counted as invalidations), e.g. before the
    /// instance goes away.  Pages still being copied are given back by the
    /// last copy.
    pub(crate) fn clear(&self) {
        for b in self.buckets.iter() {
            while let Some((_, h)) = b.with(|m| m.pop_first()) {
                self.pages.with(|t| t.unbind_release(h, &self.supply));
            }
        }
        // The index is empty: this only takes the keys out of the slots.
        self.reap(usize::MAX);
    }

    /// Drops the data in area page `page`, which a primary allocation has
    /// claimed, and returns once no copy into or out of the page is in
    /// flight: the caller may then overwrite it.  The page is not given
    /// back to the supply.  Returns whether the store held the page.
    ///
    /// As [`Dmem::discard_range`] for one page.
    pub(crate) fn discard(&self, page: usize) -> bool {
        self.discard_range(page, 1, |_, _| {}) != 0
    }

    /// Drops the data in the pages `first..first + count`, which a primary
    /// allocation has claimed, and returns how many of them the store held.
    ///
    /// Works in chunks of [`DISCARD_CHUNK`] pages, aligned to the chunk
    /// size: one page-lock section marks the held pages of a chunk
    /// discarded, the bound ones leave the LRU list for the stale list (their
    /// index entries are removed later, see the module documentation), and
    /// the idle ones are free at once; the busy ones are then waited for.
    /// Once no copy into or out of any page of the chunk is in flight,
    /// `freed(base, mask)` is called with no lock held, for the pages
    /// `base + i` of the bits `i` set in `mask`: the pages of the chunk the
    /// store held, which the caller may overwrite from then on.  The pages
    /// are not given back to the supply.
    ///
    /// Each page must be claimed by one primary allocation at a time: a page
    /// already being discarded by a concurrent call is left to that call.
    /// May sleep (through [`Platform::relax`]) while copies drain; must be
    /// called with no lock of this instance held.
    pub(crate) fn discard_range(
        &self,
        first: usize,
        count: usize,
        mut freed: impl FnMut(usize, u64),
    ) -> usize {
        let end = first.saturating_add(count);
        let mut discarded = 0;
        let mut base = first - first % DISCARD_CHUNK;
        while base < end {
            let lo = first.max(base);
            let hi = end.min(base + DISCARD_CHUNK);
            // Bits of the pages held (`done`: free now; `busy`: copies in
            // flight), relative to `base`; `None` if the store holds no
            // page at all (the other instance holds the range).
            let marked = self.pages.with(|t| {
                if t.held == 0 {
                    return None;
                }
                let out = t.mark_discarded(base, lo, hi);
                self.stale_hint.store(t.stale, Ordering::Relaxed);
                Some(out)
            });
            let Some((mut done, mut busy)) = marked else {
                break;
            };
            let held = (done | busy).count_ones() as usize;
            let mut round = 0;
            while busy != 0 {
                C::Platform::relax(round);
                round = round.saturating_add(1);
                self.pages.with(|t| {
                    let mut left = busy;
                    while left != 0 {
                        let i = left.trailing_zeros() as usize;
                        left &= left - 1;
                        let Some(s) = t.links.get_mut(base + i) else {
                            continue;
                        };
                        if s.copiers == 0 {
                            s.state = State::Free;
                            t.held -= 1;
                            busy &= !(1u64 << i);
                            done |= 1u64 << i;
                        }
                    }
                });
            }
            if done != 0 {
                freed(base, done);
            }
            discarded += held;
            base += DISCARD_CHUNK;
        }
        Counters::add(&self.counters.discards, discarded);
        discarded
    }

    /// Removes up to `max` stale index entries (of pages discarded while
    /// bound), oldest discards last; returns how many it removed.  Never
    /// sleeps; takes the page lock and then one bucket lock per entry.
    pub(crate) fn reap(&self, max: usize) -> usize {
        let mut n = 0;
        while n < max && self.stale_hint.load(Ordering::Relaxed) != 0 {
            let Some((key, h)) = self.pages.with(|t| {
                let e = t.pop_stale();
                self.stale_hint.store(t.stale, Ordering::Relaxed);
                e
            }) else {
                break;
            };
            self.forget(&key, h);
            n += 1;
        }
        n
    }

    /// Returns the handle of the entry of `key`, if it is ready (a
    /// snapshot, for tests and debugging).
    pub(crate) fn handle_of(&self, key: &C::Key) -> Option<Handle> {
        let h = self.bucket(key).with(|m| m.get(key))?;
        self.pages.with(|t| t.is(h, State::Ready)).then_some(h)
    }

    /// Returns the counters.
    pub(crate) fn stats(&self) -> Stats {
        let (stored_pages, held_pages) = self.pages.with(|t| (t.bound, t.held));
        let c = &self.counters;
        let refused = |r| {
            c.refused
                .get(Counters::refusal_index(r))
                .map_or(0, Counters::get)
        };
        Stats {
            stored_pages,
            held_pages,
            stores: Counters::get(&c.stores),
            hits: Counters::get(&c.hits),
            misses: Counters::get(&c.misses),
            invalidations: Counters::get(&c.invalidations),
            discards: Counters::get(&c.discards),
            evictions: Counters::get(&c.evictions),
            refused_nomem: refused(Refusal::NoMemory),
            refused_nospace: refused(Refusal::NoSpace),
            refused_discarded: refused(Refusal::Discarded),
            refused_superseded: refused(Refusal::Superseded),
            poisoned: Counters::get(&c.poisoned),
        }
    }

    /// Checks the consistency of a quiescent instance (no operation in
    /// flight): the page-table invariants, no page busy, dead or discarded,
    /// the index and the bound pages in one-to-one correspondence, every
    /// live index entry naming a ready page bound to its key in the key's
    /// bucket, and every other index entry a stale entry of a slot on the
    /// stale list.  Returns the number of live entries.
    ///
    /// Fails with `EINVAL` on the first inconsistency.  Costs time linear in
    /// the size of the instance: for debugging and tests.
    pub(crate) fn check_quiescent(&self) -> Result<usize> {
        let ok = |cond: bool| if cond { Ok(()) } else { Err(EINVAL) };
        let (mut entries, mut stale_entries) = (0usize, 0usize);
        for (i, b) in self.buckets.iter().enumerate() {
            b.with(|m| {
                let mut res = Ok(());
                m.for_each(|k, h| {
                    let (live, stale) = self.pages.with(|t| {
                        let s = t.slots.get(h.page);
                        let keyed = s.and_then(|s| s.key.as_ref()) == Some(k)
                            && s.is_some_and(|s| s.seq == h.seq);
                        let ready = t.is(h, State::Ready);
                        (keyed && ready, keyed && !ready && t.is(h, State::Free))
                    });
                    entries += usize::from(live);
                    stale_entries += usize::from(stale);
                    if !(live || stale) || !core::ptr::eq(self.bucket(k), &self.buckets[i]) {
                        res = Err(EINVAL);
                    }
                });
                res
            })?;
        }
        self.pages.with(|t| {
            let (mut held, mut bound, mut keyed_free) = (0usize, 0usize, 0usize);
            ok(t.links.len() == t.slots.len())?;
            for (s, l) in t.slots.iter().zip(t.links.iter()) {
                ok(l.copiers == 0)?;
                match l.state {
                    State::Free => keyed_free += usize::from(s.key.is_some()),
                    State::Ready => {
                        ok(s.key.is_some())?;
                        held += 1;
                        bound += 1;
                    }
                    _ => return Err(EINVAL),
                }
            }
            ok(held == t.held && bound == t.bound && bound == entries)?;
            ok(keyed_free == t.stale && stale_entries <= t.stale)?;
            // Walk the LRU list both ways.
            let (mut n, mut p, mut prev) = (0usize, t.head, NIL);
            while p != NIL {
                let (s, l) = (t.slots.get(p).ok_or(EINVAL)?, t.links.get(p).ok_or(EINVAL)?);
                ok(l.state == State::Ready && l.prev == prev && s.seq < t.next_seq)?;
                n += 1;
                ok(n <= bound)?;
                prev = p;
                p = l.next;
            }
            ok(n == bound && t.tail == prev)?;
            // And the stale list.
            let (mut n, mut p, mut prev) = (0usize, t.stale_head, NIL);
            while p != NIL {
                let (s, l) = (t.slots.get(p).ok_or(EINVAL)?, t.links.get(p).ok_or(EINVAL)?);
                ok(l.state == State::Free && s.key.is_some() && l.prev == prev)?;
                n += 1;
                ok(n <= t.stale)?;
                prev = p;
                p = l.next;
            }
            ok(n == t.stale)?;
            Ok(entries)
        })
    }

    /// Entries on the stale list (a snapshot, for tests and debugging).
    pub(crate) fn stale_entries(&self) -> usize {
        self.pages.with(|t| t.stale)
    }
}

impl<C: Config> Drop for Dmem<C> {
    fn drop(&mut self) {
        self.clear();
    }
}
