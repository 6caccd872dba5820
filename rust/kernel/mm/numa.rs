// SPDX-License-Identifier: GPL-2.0

//! NUMA node identifiers.
//!
//! The number of possible nodes is known only at boot (`nr_node_ids`), so
//! per-node data is sized at run time with [`nr_node_ids`], never with a
//! compile-time constant.

use crate::{bindings, error::code::EINVAL, error::Result};
use core::fmt;

/// A NUMA node id that is below `nr_node_ids`, i.e. a possible node.
///
/// # Invariants
///
/// `self.0 < nr_node_ids()`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(u32);

impl NodeId {
    /// Returns the node id `id`, or `EINVAL` if no such node can exist.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::mm::numa::{self, NodeId};
    ///
    /// assert_eq!(NodeId::new(0)?.as_u32(), 0);
    /// assert!(NodeId::new(numa::nr_node_ids() as u32).is_err());
    /// # Ok::<(), Error>(())
    /// ```
    pub fn new(id: u32) -> Result<Self> {
        if (id as usize) < nr_node_ids() {
            // INVARIANT: checked just above.
            Ok(Self(id))
        } else {
            Err(EINVAL)
        }
    }

    /// Returns the node id as a number.
    pub const fn as_u32(self) -> u32 {
        self.0
    }

    /// Returns the node id as an index into per-node arrays.
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// Returns whether the node is online (has memory or CPUs in use).
    pub fn is_online(self) -> bool {
        // SAFETY: the id is below `nr_node_ids` by the type invariant.
        unsafe { bindings::node_online(self.0 as _) }
    }

    /// Iterates over the possible nodes, `0..nr_node_ids()`.
    pub fn all() -> impl Iterator<Item = NodeId> {
        // INVARIANT: every id yielded is below `nr_node_ids()`.
        (0..nr_node_ids() as u32).map(NodeId)
    }
}

impl fmt::Debug for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node{}", self.0)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Returns the number of possible node ids: per-node arrays need this many
/// entries.
///
/// # Examples
///
/// ```
/// use kernel::mm::numa;
///
/// assert!(numa::nr_node_ids() >= 1);
/// assert!(numa::online_nodes() <= numa::nr_node_ids());
/// assert!(numa::current_node().index() < numa::nr_node_ids());
/// ```
pub fn nr_node_ids() -> usize {
    // SAFETY: FFI call without preconditions.
    unsafe { bindings::rust_nr_node_ids() as usize }
}

/// Returns the number of online nodes.
pub fn online_nodes() -> usize {
    // SAFETY: FFI call without preconditions.
    unsafe { bindings::num_online_nodes() as usize }
}

/// Returns the node of the CPU the caller runs on.
///
/// Unless preemption or migration is disabled, the task may move to another
/// node right after the call; the answer is then a hint, which is all that
/// per-node data placement needs.
pub fn current_node() -> NodeId {
    // SAFETY: FFI call without preconditions.
    let id = unsafe { bindings::numa_node_id() };
    // INVARIANT: the kernel never reports a node id at or above `nr_node_ids`.
    NodeId(id as u32)
}

/// Returns the node of the page frame `pfn`, or `EINVAL` if the frame has no
/// `struct page` (a hole in the memory map).
pub fn node_of_pfn(pfn: usize) -> Result<NodeId> {
    // SAFETY: FFI call; the helper checks `pfn_valid()` before looking at
    // the page.
    let nid = unsafe { bindings::rsmm_pfn_to_nid(pfn as _) };
    if nid < 0 {
        return Err(EINVAL);
    }
    // INVARIANT: the kernel never assigns a page to an impossible node.
    Ok(NodeId(nid as u32))
}
