// SPDX-License-Identifier: GPL-2.0

//! [`WriteGuard`], the writer of a Bonsai tree for range stores in two
//! steps: a preallocation that may sleep, then a store that neither
//! sleeps nor allocates.  One writer core for both users: a
//! [`RangeTree`], whose writer lock is its mutex, and the VMA index of an
//! address space ([`crate::vma`]), whose writer lock is the mmap lock held
//! for writing.
//!
//! [`RangeTree`]: crate::RangeTree

use core::ops::DerefMut;
use kernel::{
    alloc::Flags,
    prelude::*,
    sync::{
        lock::{mutex::MutexBackend, Guard},
        rcu,
    },
};

use crate::{retire::RetireBatch, tree, Hints, WriterState, RETIRE_BATCH};

/// The guard of a [`RangeTree`](crate::RangeTree)'s writer mutex.
pub(crate) type MutexState<'a, V> = Guard<'a, WriterState<V>, MutexBackend>;

/// The writer of a Bonsai tree for range stores, holding its writer lock:
/// made by [`RangeTree::write`](crate::RangeTree::write) (`S` is then the guard of the tree's
/// mutex) or by the VMA index under the mmap write lock (`S` borrows the
/// index's writer state, which that lock protects).
///
/// A range store comes in two steps, as in the maple tree
/// (`mas_preallocate()`, then `mas_store_prealloc()`):
///
/// 1. [`WriteGuard::preallocate_store`] (or `_clear`) fills the writer's
///    node reserve to what one store of the range needs on the tree as it
///    is ([`tree::Writer::store_need`]), and provides the box of the next
///    retirement batch.  It allocates with the caller's flags and, with
///    flags that allow it, sleeps.
/// 2. [`WriteGuard::store`] (or [`WriteGuard::clear`]) changes the tree.
///    It never allocates or sleeps, so it may run in an atomic section
///    (under a spinlock taken after the guard, say); if the reserve holds
///    fewer nodes than the store needs, or there is no batch box, it fails
///    with `EAGAIN` and changes nothing.
///
/// Nothing else changes the tree while the guard lives, so a store after
/// the preallocation for the same range, with no other store in between,
/// does not fail.  Nodes the store does not use stay in the reserve for
/// the next update (or until [`RangeTree::shrink`](crate::RangeTree::shrink)).  Replaced nodes join
/// the pending list; when the guard is dropped, a full batch of them
/// ([`RETIRE_BATCH`]) goes to RCU with one callback, which neither
/// allocates nor sleeps either.
///
/// # Invariants
///
/// `st` is the writer state of `tree`, and the tree's writer lock is held
/// while the value lives.  `hints` are the hints of that state.  The
/// writer state's spare batch box is present whenever its pending list is
/// not empty.
pub struct WriteGuard<'a, V, S = MutexState<'a, V>>
where
    V: Copy + Send + Sync + 'static,
    S: DerefMut<Target = WriterState<V>>,
{
    pub(crate) tree: &'a tree::Tree<V>,
    pub(crate) hints: &'a Hints,
    pub(crate) st: S,
}

impl<V, S> WriteGuard<'_, V, S>
where
    V: Copy + Send + Sync + 'static,
    S: DerefMut<Target = WriterState<V>>,
{
    /// Runs `f` on a writer of the tree, with the guard's reserve and
    /// pending list, and whether the spare batch box is present.
    fn with_writer<R>(&mut self, f: impl FnOnce(&mut tree::Writer<'_, V>, bool) -> R) -> R {
        let st = &mut *self.st;
        let spare = st.spare.is_some();
        let r = {
            // SAFETY: by the type invariant the writer lock is held while
            // `self` lives; the writer is dropped at the end of this block.
            let mut w = unsafe { self.tree.writer(&mut st.reserve, &mut st.pending) };
            f(&mut w, spare)
        };
        self.hints.publish(st);
        r
    }

    /// Fills the reserve to `need` nodes and provides the spare batch box,
    /// allocating with `flags`.
    fn preallocate(&mut self, need: usize, flags: Flags) -> Result {
        let st = &mut *self.st;
        let r = st.reserve.fill(need, flags).and_then(|()| {
            if st.spare.is_none() {
                st.spare = Some(RetireBatch::new_box(flags)?);
            }
            Ok(())
        });
        self.hints.publish(st);
        r
    }

    /// Preallocation step of a [`WriteGuard::store`] of `[start, end)`:
    /// fills the reserve to [`tree::Writer::store_need`] nodes, allocating
    /// with `flags`; may sleep if `flags` allow it.
    ///
    /// Fails with `EINVAL` if `start >= end` and `ENOMEM` if an allocation
    /// fails (the nodes allocated before stay in the reserve).  The tree is
    /// not changed either way.
    pub fn preallocate_store(&mut self, start: usize, end: usize, flags: Flags) -> Result {
        let need = self.with_writer(|w, _| w.store_need(start, end))?;
        self.preallocate(need, flags)
    }

    /// Preallocation step of a [`WriteGuard::clear`] of `[start, end)`;
    /// see [`WriteGuard::preallocate_store`].
    pub fn preallocate_clear(&mut self, start: usize, end: usize, flags: Flags) -> Result {
        let need = self.with_writer(|w, _| w.clear_need(start, end))?;
        self.preallocate(need, flags)
    }

    /// Stores `value` for `[start, end)`, replacing whatever the tree held
    /// there: the ranges it covers go, those it overlaps keep their parts
    /// outside it (see [`tree::Writer::store`]).  Never allocates or
    /// sleeps.
    ///
    /// Fails with `EINVAL` if `start >= end` and with `EAGAIN` if the
    /// reserve holds fewer nodes than the store needs (see
    /// [`WriteGuard::preallocate_store`]); the tree is unchanged on failure.
    pub fn store(&mut self, start: usize, end: usize, value: V) -> Result {
        self.with_writer(|w, spare| {
            // INVARIANT: an update that retires nodes (every store does)
            // runs only with the spare batch box present.
            if !spare {
                // For the error code only (`EINVAL` before `EAGAIN`).
                w.store_need(start, end)?;
                return Err(EAGAIN);
            }
            w.store(start, end, value).map_err(Error::from)
        })
    }

    /// Removes what the tree holds in `[start, end)`, trimming the ranges
    /// that reach outside it.  Never allocates or sleeps.
    ///
    /// Fails as [`WriteGuard::store`] does (see
    /// [`WriteGuard::preallocate_clear`]); clearing a range that holds
    /// nothing succeeds and changes nothing.
    pub fn clear(&mut self, start: usize, end: usize) -> Result {
        self.with_writer(|w, spare| {
            // INVARIANT: an update that retires nodes runs only with the
            // spare batch box present; a clear of nothing (need 0)
            // retires none.
            if !spare && w.clear_need(start, end)? > 0 {
                return Err(EAGAIN);
            }
            w.clear(start, end)
        })
    }

    /// Nodes in the reserve.
    pub fn reserve_len(&self) -> usize {
        self.st.reserve.len()
    }

    /// Frees reserve nodes after a store that preallocated for many
    /// ranges: if the reserve holds more than four times what one insert
    /// or remove needs ([`tree::Tree::reserve_bound`]), it keeps twice
    /// that.  Below, the nodes stay: what the preallocation of a store
    /// over one to three ranges asks for ([`tree::Writer::store_bound`]:
    /// up to three times the bound) is then mostly there already, and
    /// the next preallocation allocates only what the last store used,
    /// instead of freeing and allocating the same surplus around every
    /// store.  Never sleeps.
    pub(crate) fn trim_reserve(&mut self) {
        let bound = self.tree.reserve_bound();
        if self.st.reserve.len() > bound.saturating_mul(4).saturating_add(4) {
            self.st
                .reserve
                .trim(bound.saturating_mul(2).saturating_add(2));
            self.hints.publish(&self.st);
        }
    }

    /// Fills the reserve to `need` nodes more than [`tree::Tree::reserve_bound`]
    /// and provides the spare batch box, allocating with `flags`: what
    /// one insert or remove needs, plus `need`.
    pub(crate) fn preallocate_bound(&mut self, need: usize, flags: Flags) -> Result {
        let bound = self.tree.reserve_bound();
        self.preallocate(bound.saturating_add(need), flags)
    }

    /// Runs `f` on a writer of the tree (for the plain inserts and removes
    /// and the checks of the VMA index).
    pub(crate) fn with_tree_writer<R>(
        &mut self,
        f: impl FnOnce(&mut tree::Writer<'_, V>) -> R,
    ) -> R {
        self.with_writer(|w, _| f(w))
    }
}

impl<V, S> Drop for WriteGuard<'_, V, S>
where
    V: Copy + Send + Sync + 'static,
    S: DerefMut<Target = WriterState<V>>,
{
    fn drop(&mut self) {
        let st = &mut *self.st;
        let batch = if st.pending.len() >= RETIRE_BATCH {
            st.take_batch()
        } else {
            None
        };
        self.hints.publish(st);
        // Under the writer lock still (`st` is dropped after this body):
        // `call_rcu()` neither sleeps nor allocates.
        if let Some(b) = batch {
            rcu::drop_after_gp(b);
        }
    }
}
