// SPDX-License-Identifier: GPL-2.0

//! NUMA node identifiers.
//!
//! The number of possible nodes is known only at boot (`nr_node_ids`), so
//! per-node data is sized at run time with [`nr_node_ids`], never with a
//! compile-time constant.

use crate::{bindings, error::code::EINVAL, error::Result};
use core::fmt;

/// The id of a possible NUMA node.
///
/// Node ids below `nr_node_ids` may have holes (ids of nodes that can
/// never exist, whose `NODE_DATA()` is null), so the bound alone does not
/// make an id valid.
///
/// # Invariants
///
/// `self.0 < nr_node_ids()` and `node_possible(self.0)`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(u32);

impl NodeId {
    /// Returns the node id `id`, or `EINVAL` if no such node can exist
    /// (`id` at or above `nr_node_ids`, or a hole below it).
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
        if Self::valid(id, nr_node_ids(), node_possible) {
            // INVARIANT: checked just above.
            Ok(Self(id))
        } else {
            Err(EINVAL)
        }
    }

    /// Returns whether `id` names a node when there are `nr` node ids and
    /// `possible` tells the possible ones.
    fn valid(id: u32, nr: usize, possible: impl Fn(u32) -> bool) -> bool {
        (id as usize) < nr && possible(id)
    }

    /// Returns the id of the node the kernel assigned one of its objects to
    /// (a zone, a page): the kernel assigns possible nodes only.
    pub(crate) fn from_kernel(id: u32) -> Self {
        // INVARIANT: the kernel never assigns an object to an impossible
        // node.
        Self(id)
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

    /// Iterates over the possible nodes in increasing order (the ids below
    /// `nr_node_ids()` that are not holes).
    pub fn all() -> impl Iterator<Item = NodeId> {
        let nr = nr_node_ids();
        // INVARIANT: `valid` checks both halves of the invariant.
        (0..nr as u32)
            .filter(move |&id| Self::valid(id, nr, node_possible))
            .map(NodeId)
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
/// assert!(numa::online_nodes() <= numa::nr_node_ids());
/// assert!(numa::current_node().index() < numa::nr_node_ids());
/// assert!(numa::current_node().is_online());
/// ```
pub fn nr_node_ids() -> usize {
    // SAFETY: FFI call without preconditions.
    unsafe { bindings::rust_nr_node_ids() as usize }
}

/// Returns whether `id` is a possible node (`node_possible()`): node ids
/// below [`nr_node_ids`] may have holes, which are not.
pub fn node_possible(id: u32) -> bool {
    // SAFETY: FFI call without preconditions; the helper checks the id
    // against `nr_node_ids` before it looks at the possible-node mask.
    unsafe { bindings::rsmm_node_possible(id as _) }
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
    // INVARIANT: the node of a CPU that runs is a possible node.
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

/// A set of nodes, as the C `nodemask_t` holds it (a memory policy's
/// nodes, the nodes an allocation may use).
///
/// # Invariants
///
/// Wraps a `nodemask_t` whose bitmap has `MAX_NUMNODES` bits.
#[repr(transparent)]
pub struct NodeMask(bindings::nodemask_t);

impl NodeMask {
    /// Borrows the C node mask at `mask`.
    ///
    /// # Safety
    ///
    /// `mask` points to a `nodemask_t` that nobody writes during `'a`.
    pub unsafe fn from_raw<'a>(mask: *const bindings::nodemask_t) -> &'a NodeMask {
        // SAFETY: `NodeMask` is a transparent wrapper of `nodemask_t`; the
        // caller guarantees it stays unchanged for `'a`.
        unsafe { &*mask.cast::<NodeMask>() }
    }

    /// The C node mask, for calls that only read it.
    pub fn as_raw(&self) -> *mut bindings::nodemask_t {
        core::ptr::from_ref(&self.0).cast_mut()
    }

    /// Whether `node` is in the set.
    pub fn contains(&self, node: NodeId) -> bool {
        let bits = usize::BITS as usize;
        // Node ids are below `nr_node_ids <= MAX_NUMNODES`, the bitmap's
        // size (type invariants): the word always exists.
        self.0
            .bits
            .get(node.index() / bits)
            .is_some_and(|&w| (w >> (node.index() % bits)) & 1 != 0)
    }
}

#[cfg(all(CONFIG_KUNIT, CONFIG_RUST_KERNEL_DOCTESTS))]
mod tests {
    //! KUnit suite `rust_kernel_mm_numa`, built alongside the kernel
    //! crate's doctests.

    use super::*;
    use crate::{kunit_expect, kunit_expect_eq};

    /// A sparse node map, as on machines whose firmware numbers nodes with
    /// holes (x86 and QEMU number them densely): ids in the holes are
    /// refused although they are below the number of node ids.
    fn sparse_map_holes_refused() -> Result {
        // Possible nodes 0, 2 and 5 of 6 node ids.
        let mask: u64 = 0b10_0101;
        let possible = |id: u32| id < 64 && mask & (1 << id) != 0;
        for id in 0..8 {
            kunit_expect_eq!(NodeId::valid(id, 6, possible), possible(id) && id < 6);
        }
        kunit_expect!(!NodeId::valid(1, 6, possible), "hole 1 accepted");
        kunit_expect!(!NodeId::valid(4, 6, possible), "hole 4 accepted");
        kunit_expect!(NodeId::valid(5, 6, possible));
        Ok(())
    }

    /// On this machine: exactly the possible nodes are node ids, and every
    /// node the iterator yields is one.
    fn possible_nodes_only() -> Result {
        let nr = nr_node_ids() as u32;
        for id in 0..nr + 4 {
            kunit_expect_eq!(NodeId::new(id).is_ok(), node_possible(id));
        }
        kunit_expect!(!node_possible(nr), "node {} possible", nr);
        kunit_expect!(!node_possible(u32::MAX));
        let mut n = 0;
        for node in NodeId::all() {
            kunit_expect!(node_possible(node.as_u32()), "{:?} not possible", node);
            n += 1;
        }
        kunit_expect!(
            n >= online_nodes(),
            "{} nodes, {} online",
            n,
            online_nodes()
        );
        kunit_expect!(node_possible(current_node().as_u32()));
        Ok(())
    }

    crate::kunit_suite! {
        name: "rust_kernel_mm_numa",
        cases: [sparse_map_holes_refused, possible_nodes_only],
    }
}
