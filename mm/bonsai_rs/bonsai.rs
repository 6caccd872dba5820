// SPDX-License-Identifier: GPL-2.0

//! The Bonsai tree: an RCU-compatible balanced tree of address ranges.
//!
//! [`tree`] holds the algorithm (after Clements, Kaashoek and Zeldovich,
//! "Scalable Address Spaces Using RCU Balanced Trees", ASPLOS 2012); it
//! builds unchanged on the host (`tools/host/crates/bonsai-core`).  This
//! crate root supplies what the algorithm leaves to its environment:
//!
//! - the atomics ([`platform`]) and the RCU read guard as the proof of a
//!   read-side critical section;
//! - [`RangeTree`], the safe kernel interface: a tree with its writer
//!   mutex, which reserves the nodes an update may need before taking the
//!   mutex and frees replaced nodes after an RCU grace period.

use kernel::{
    new_mutex,
    prelude::*,
    sync::{rcu, Mutex},
};

pub mod tree;

#[cfg(CONFIG_BONSAI_KUNIT_TEST)]
mod tests;

/// Prefix of this crate's log lines (used by `pr_*!`).
const __LOG_PREFIX: &[u8] = b"bonsai\0";

/// The atomics the shared tree code uses: the kernel's are `core`'s.
pub(crate) mod platform {
    pub(crate) use core::sync::atomic::{AtomicPtr, Ordering};
}

// SAFETY: a guard keeps its task inside an RCU read-side critical section
// until dropped, and `RangeTree` frees retired nodes only after
// `synchronize_rcu()`, which waits for every such section.
unsafe impl tree::ReadSide for rcu::Guard {}

/// A Bonsai tree of ranges with values of type `V`, safe to share: lookups
/// run concurrently with one writer at a time.
///
/// # Invariants
///
/// `tree` is only updated through writers created while `writer` is held.
#[pin_data]
pub struct RangeTree<V> {
    tree: tree::Tree<V>,
    #[pin]
    writer: Mutex<()>,
}

impl<V: Send + Sync> RangeTree<V> {
    /// Creates an empty tree with the default (proven) balance parameters.
    pub fn new() -> impl PinInit<Self> {
        Self::with_params(tree::BalanceParams::HIRAI_YAMAMOTO)
    }

    /// Creates an empty tree with the given balance parameters.
    pub fn with_params(params: tree::BalanceParams) -> impl PinInit<Self> {
        pin_init!(Self {
            tree: tree::Tree::with_params(params),
            writer <- new_mutex!(()),
        })
    }

    /// Runs `f` as the only writer, with a reserve filled beforehand.
    ///
    /// The nodes an update may need are allocated before the mutex is
    /// taken, so an allocation failure (`ENOMEM`) leaves the tree as it
    /// was.  Nodes the update replaced are freed after a grace period,
    /// once the mutex is released.  Sleeps.
    fn update<R>(&self, f: impl FnOnce(&mut tree::Writer<'_, V>) -> R) -> Result<R> {
        let mut reserve = tree::NodeReserve::new();
        reserve.fill(self.tree.reserve_bound(), GFP_KERNEL)?;
        let mut retired = tree::RetiredList::new();
        let ret = {
            let _guard = self.writer.lock();
            // SAFETY: `_guard` holds the writer mutex until the writer,
            // scoped to this block, is dropped.
            let mut w = unsafe { self.tree.writer(&mut reserve, &mut retired) };
            f(&mut w)
        };
        if !retired.is_empty() {
            rcu::synchronize_rcu();
            // SAFETY: the nodes were unpublished by the writer above, and
            // the grace period just waited for every reader that might
            // still have been looking at them.
            unsafe { retired.free() };
        }
        Ok(ret)
    }

    /// Inserts `value` for `[start, end)`.
    ///
    /// Fails with `EINVAL` if `start >= end`, `EEXIST` if the range
    /// overlaps one in the tree and `ENOMEM` if nodes cannot be allocated;
    /// the tree is unchanged on failure.
    pub fn insert(&self, start: usize, end: usize, value: V) -> Result {
        self.update(|w| w.insert(start, end, value).map_err(Error::from))?
    }

    /// Removes the range starting at `start`; `ENOENT` if there is none.
    pub fn remove(&self, start: usize) -> Result {
        self.update(|w| w.remove(start))?
    }

    /// Returns `f` applied to the range containing `addr`, looked up
    /// without taking the writer mutex.
    pub fn with_range<R>(&self, addr: usize, f: impl FnOnce(tree::Entry<'_, V>) -> R) -> Option<R> {
        let guard = rcu::read_lock();
        self.tree.find(&guard, addr).map(f)
    }

    /// Returns `f` applied to the first range ending above `addr`.
    pub fn with_range_from<R>(
        &self,
        addr: usize,
        f: impl FnOnce(tree::Entry<'_, V>) -> R,
    ) -> Option<R> {
        let guard = rcu::read_lock();
        self.tree.find_from(&guard, addr).map(f)
    }

    /// Calls `f` on every range in address order, inside one read-side
    /// critical section.
    pub fn for_each(&self, mut f: impl FnMut(tree::Entry<'_, V>)) {
        let guard = rcu::read_lock();
        for e in self.tree.iter(&guard) {
            f(e);
        }
    }

    /// Returns the number of ranges.
    pub fn len(&self) -> usize {
        self.tree.len()
    }

    /// Returns whether the tree is empty.
    pub fn is_empty(&self) -> bool {
        self.tree.is_empty()
    }

    /// Returns the tree's update counters.
    pub fn stats(&self) -> tree::Stats {
        self.tree.stats()
    }

    /// Verifies order, sizes and balance of the whole tree (`O(n)`, for
    /// tests and debugging).  A broken tree gives `EINVAL`, with the
    /// details in the kernel log.
    pub fn check(&self) -> Result {
        let mut reserve = tree::NodeReserve::new();
        let mut retired = tree::RetiredList::new();
        let _guard = self.writer.lock();
        // SAFETY: the writer mutex is held while the writer lives.
        let w = unsafe { self.tree.writer(&mut reserve, &mut retired) };
        w.check().map(|_| ()).map_err(|e| {
            pr_err!("tree check failed: {:?}\n", e);
            EINVAL
        })
    }
}
