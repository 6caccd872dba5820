// SPDX-License-Identifier: GPL-2.0

//! A host-side wrapper doing what the kernel crate root does around the
//! shared tree: a writer lock, a node reserve kept across updates, and
//! retired nodes freed after a grace period of a [`HostRcu`].

use std::sync::{Mutex, MutexGuard};

use kernel::prelude::*;

use crate::host_rcu::{HostGuard, HostRcu};
use crate::tree::{BalanceParams, InsertError, NodeReserve, RetiredList, Tree, Writer};

/// Retired nodes kept before a reclaim is forced.
const RECLAIM_BATCH: usize = 4096;

struct State<V> {
    reserve: NodeReserve<V>,
    retired: RetiredList<V>,
}

/// A tree with its writer lock, reserve and RCU domain.
pub struct HostTree<V: Copy> {
    tree: Tree<V>,
    rcu: HostRcu,
    state: Mutex<State<V>>,
}

impl<V: Copy> Default for HostTree<V> {
    fn default() -> Self {
        Self::new(BalanceParams::default())
    }
}

impl<V: Copy> HostTree<V> {
    /// An empty tree with the given balance parameters.
    pub fn new(params: BalanceParams) -> Self {
        Self {
            tree: Tree::with_params(params),
            rcu: HostRcu::new(),
            state: Mutex::new(State {
                reserve: NodeReserve::new(),
                retired: RetiredList::new(),
            }),
        }
    }

    /// The tree, for lookups and statistics.
    pub fn tree(&self) -> &Tree<V> {
        &self.tree
    }

    /// Enters a read-side critical section.
    pub fn read(&self) -> HostGuard<'_> {
        self.rcu.read_lock()
    }

    fn lock(&self) -> MutexGuard<'_, State<V>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` as the writer, after filling the reserve to the tree's
    /// bound (`ENOMEM` if that fails, without running `f`).
    pub fn update<R>(&self, f: impl FnOnce(&mut Writer<'_, V>) -> R) -> Result<R> {
        let mut guard = self.lock();
        let st = &mut *guard;
        st.reserve.fill(self.tree.reserve_bound(), GFP_KERNEL)?;
        let r = {
            // SAFETY: the state mutex is the writer lock; it is held until
            // the writer is dropped at the end of this block.
            let mut w = unsafe { self.tree.writer(&mut st.reserve, &mut st.retired) };
            f(&mut w)
        };
        if st.retired.len() >= RECLAIM_BATCH {
            let list = core::mem::take(&mut st.retired);
            drop(guard);
            self.rcu.free_after_grace_period(list);
        }
        Ok(r)
    }

    /// Inserts `[start, end)`.
    pub fn insert(&self, start: usize, end: usize, value: V) -> Result {
        self.update(|w| {
            w.insert(start, end, value)
                .map_err(|e: InsertError<V>| e.error)
        })?
    }

    /// Removes the range starting at `start`.
    pub fn remove(&self, start: usize) -> Result {
        self.update(|w| w.remove(start))?
    }

    /// Runs `f` as the writer after the preallocation step of a range
    /// store: the reserve is filled to what `need` asks of the tree
    /// (`ENOMEM` if that fails, without running `f`).
    fn update_with<R>(
        &self,
        need: impl FnOnce(&Writer<'_, V>) -> Result<usize>,
        f: impl FnOnce(&mut Writer<'_, V>) -> R,
    ) -> Result<R> {
        let mut guard = self.lock();
        let st = &mut *guard;
        let n = {
            // SAFETY: the state mutex is the writer lock, held throughout.
            let w = unsafe { self.tree.writer(&mut st.reserve, &mut st.retired) };
            need(&w)?
        };
        st.reserve.fill(n, GFP_KERNEL)?;
        let r = {
            // SAFETY: as above.
            let mut w = unsafe { self.tree.writer(&mut st.reserve, &mut st.retired) };
            f(&mut w)
        };
        if st.retired.len() >= RECLAIM_BATCH {
            let list = core::mem::take(&mut st.retired);
            drop(guard);
            self.rcu.free_after_grace_period(list);
        }
        Ok(r)
    }

    /// Stores `value` for `[start, end)`, overwriting what the range
    /// covers (see [`Writer::store`]).
    pub fn store(&self, start: usize, end: usize, value: V) -> Result {
        self.update_with(
            |w| w.store_need(start, end),
            |w| w.store(start, end, value).map_err(Error::from),
        )?
    }

    /// Clears `[start, end)` (see [`Writer::clear`]).
    pub fn clear(&self, start: usize, end: usize) -> Result {
        self.update_with(|w| w.clear_need(start, end), |w| w.clear(start, end))?
    }

    /// Frees the retired nodes after a grace period.
    pub fn reclaim(&self) {
        let list = core::mem::take(&mut self.lock().retired);
        self.rcu.free_after_grace_period(list);
    }

    /// Nodes waiting for a grace period.
    pub fn pending(&self) -> usize {
        self.lock().retired.len()
    }
}

impl<V: Copy> Drop for HostTree<V> {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        let list = core::mem::take(&mut st.retired);
        // SAFETY: `&mut self`: no lookup can run on this tree any more.
        unsafe { list.free() };
    }
}
