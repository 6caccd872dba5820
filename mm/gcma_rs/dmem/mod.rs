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
//! __GFP_NOWARN | __GFP_NOMEMALLOC` (no sleeping, no recursion into
//! reclaim, no warning, and none of the reserves that `PF_MEMALLOC` would
//! open to a store made in reclaim): if it fails, the store reports
//! [`Refusal::NoMemory`] and drops the key's old entry, which is stale
//! now.  No operation returns an error.
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
//!
//! # Files
//!
//! This file holds the store's tuning constants and the types of its
//! results; each part of the store has a file of its own:
//!
//! * `env.rs`: the traits the environment implements, and [`Config`];
//! * `key.rs`: keys, their buckets, and index [`Handle`]s;
//! * `pages.rs`: the page table, its lists and the page state machine;
//! * `store.rs`: [`Dmem`] itself, its index and counters.
//!
//! [`State`]: pages::State
//! [`State::Free`]: pages::State::Free
//! [`State::Filling`]: pages::State::Filling
//! [`State::Ready`]: pages::State::Ready
//! [`State::Dead`]: pages::State::Dead
//! [`State::Discarded`]: pages::State::Discarded

mod env;
mod key;
mod pages;
mod store;

#[cfg(CONFIG_GCMA_KUNIT_TEST)]
pub(crate) use env::node_flags;
pub(crate) use env::{
    BucketLock, BucketMap, Config, FillCopy, IdlePage, Lock, LockClass, PageAccess, PageSupply,
    Platform, ReadCopy,
};
pub(crate) use key::{FileKey, Handle, Key, SwapKey};
pub(crate) use pages::{Link, Slot};
pub(crate) use store::Dmem;

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
