// SPDX-License-Identifier: GPL-2.0

//! Per-NUMA-node lock words.
//!
//! Each RCX item carries one lock word per possible NUMA node.  Updaters on
//! node `n` compete only for word `n` of an item, so two updaters on
//! different nodes never write the same cache line in phase 1 of an update.
//! For that to hold, every word sits alone on its cache line: a word shares
//! its line with neither another word nor the item's other fields.

use core::sync::atomic::{AtomicUsize, Ordering};
use kernel::{
    alloc::Flags,
    mm::numa::{self, NodeId},
    prelude::*,
};

pub use kernel::processor::{CacheAligned, CACHE_LINE};

kernel::static_assert!(core::mem::size_of::<CacheAligned<AtomicUsize>>() == CACHE_LINE);

/// The value of a lock word nobody holds.
const FREE: usize = 0;

/// One lock word per possible NUMA node, in an allocation of its own.
///
/// A word holds [`FREE`] or the non-zero token of the updater that won it.
///
/// # Invariants
///
/// `words.len() == numa::nr_node_ids()`.
pub struct NodeLocks {
    words: KVec<CacheAligned<AtomicUsize>>,
}

impl NodeLocks {
    /// Allocates one free word for each possible node.
    pub fn new(flags: Flags) -> Result<Self> {
        let n = numa::nr_node_ids();
        let mut words = KVec::with_capacity(n, flags)?;
        for _ in 0..n {
            words.push(CacheAligned(AtomicUsize::new(FREE)), flags)?;
        }
        // INVARIANT: one word was pushed per possible node.
        Ok(Self { words })
    }

    /// Returns the words as an update sees them.
    pub fn words(&self) -> NodeWords<'_> {
        // INVARIANT: one word per possible node (type invariant).
        NodeWords(&self.words)
    }

    /// Tries to take `node`'s word for `token`; see [`NodeWords::try_lock`].
    pub fn try_lock(&self, node: NodeId, token: usize) -> Result {
        self.words().try_lock(node, token)
    }

    /// Releases `node`'s word held by `token`; see [`NodeWords::unlock`].
    pub fn unlock(&self, node: NodeId, token: usize) -> Result {
        self.words().unlock(node, token)
    }

    /// Returns the token holding `node`'s word, if any.
    pub fn holder(&self, node: NodeId) -> Option<usize> {
        self.words().holder(node)
    }

    /// Returns the number of words, i.e. `nr_node_ids` at creation.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// Returns whether there are no words (never true on a booted system).
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Returns the address of `node`'s word, for layout checks.
    pub fn word_addr(&self, node: NodeId) -> usize {
        self.words().word_addr(node)
    }
}

/// Allocates the words of `slots` lock slots in one array, slot after
/// slot, `nr_node_ids` words each: [`NodeWords::of_slot`] hands out a
/// slot's words.
pub(crate) fn alloc_slot_words(
    slots: usize,
    flags: Flags,
) -> Result<KVec<CacheAligned<AtomicUsize>>> {
    let n = slots.checked_mul(numa::nr_node_ids()).ok_or(EINVAL)?;
    let mut words = KVec::with_capacity(n, flags)?;
    for _ in 0..n {
        words.push(CacheAligned(AtomicUsize::new(FREE)), flags)?;
    }
    Ok(words)
}

/// The per-node words of one item (or lock slot), borrowed: one word per
/// possible node, each on its own cache line.
///
/// # Invariants
///
/// `self.0.len() == numa::nr_node_ids()`.
#[derive(Clone, Copy)]
pub struct NodeWords<'a>(&'a [CacheAligned<AtomicUsize>]);

impl<'a> NodeWords<'a> {
    /// Returns the words of slot `slot` of an array from
    /// [`alloc_slot_words`]; `slot` is below the slot count the array was
    /// allocated for (indexing would panic otherwise).
    ///
    /// `nodes` is `nr_node_ids`, which the update side reads once when it
    /// allocates the array (the kernel fixes it at boot), so that finding a
    /// slot costs no call.
    pub(crate) fn of_slot(
        words: &'a [CacheAligned<AtomicUsize>],
        slot: usize,
        nodes: usize,
    ) -> Self {
        debug_assert_eq!(nodes, numa::nr_node_ids());
        // Wrapping: an overflow only yields a range that the indexing
        // rejects, so no check of its own is needed on the update path.
        let start = slot.wrapping_mul(nodes);
        // INVARIANT: `nodes` is `nr_node_ids`.
        NodeWords(&words[start..start.wrapping_add(nodes)])
    }

    fn word(&self, node: NodeId) -> &'a AtomicUsize {
        // By the type invariants of `NodeWords` and `NodeId`, the index is
        // in bounds; indexing cannot panic.
        &self.0[node.index()].0
    }

    /// Tries to take `node`'s word for the updater identified by `token`.
    ///
    /// Returns `EINVAL` for the reserved token 0 and `EBUSY` if the word is
    /// held.  Success has acquire ordering: what the previous holder wrote
    /// before releasing the word is visible.
    pub fn try_lock(&self, node: NodeId, token: usize) -> Result {
        if token == FREE {
            return Err(EINVAL);
        }
        self.word(node)
            .compare_exchange(FREE, token, Ordering::Acquire, Ordering::Relaxed)
            .map(|_| ())
            .map_err(|_| EBUSY)
    }

    /// Releases `node`'s word held by `token`, with release ordering.
    ///
    /// Returns `EPERM`, and leaves the word alone, if `token` does not hold it.
    pub fn unlock(&self, node: NodeId, token: usize) -> Result {
        self.word(node)
            .compare_exchange(token, FREE, Ordering::Release, Ordering::Relaxed)
            .map(|_| ())
            .map_err(|_| EPERM)
    }

    /// Releases `node`'s word, which `token` holds, with a release store
    /// instead of [`NodeWords::unlock`]'s compare-and-exchange: the update
    /// path, which took the word itself, needs no check, and an atomic
    /// read-modify-write per item is what an uncontended update pays for.
    /// Debug builds check the holder.
    pub(crate) fn release_held(&self, node: NodeId, token: usize) {
        let w = self.word(node);
        debug_assert_eq!(w.load(Ordering::Relaxed), token);
        let _ = token;
        w.store(FREE, Ordering::Release);
    }

    /// Returns the token holding `node`'s word, if any.
    pub fn holder(&self, node: NodeId) -> Option<usize> {
        match self.word(node).load(Ordering::Relaxed) {
            FREE => None,
            t => Some(t),
        }
    }

    /// Returns a pointer to `node`'s word, for the RTM transaction of
    /// phase 1 (`htm.c`), which reads and writes it inside a transaction.
    pub(crate) fn word_ptr(&self, node: NodeId) -> *mut usize {
        self.word(node).as_ptr()
    }

    /// Returns the address of `node`'s word, for layout checks.
    pub fn word_addr(&self, node: NodeId) -> usize {
        self.word(node) as *const AtomicUsize as usize
    }

    /// Returns the number of words, `nr_node_ids`.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Returns whether there are no words (never true on a booted system).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
