// SPDX-License-Identifier: GPL-2.0

//! Building a whole tree at once from ranges in address order.
//!
//! Inserting `n` sorted ranges one by one plans and walks a path for each
//! and rebalances on the way (`O(n log n)`, with rotations that allocate
//! and retire nodes).  When all the ranges are known before the tree is
//! used (the VMA index of a child that `fork()` has just copied), the
//! tree can be built bottom-up in `O(n)` instead: each subtree takes the
//! middle range of its slice as its root and the halves on either side as
//! its children.  Sibling subtrees then differ in size by at most one
//! node, which every [`BalanceParams`] with a delta of 2 or more accepts
//! (the two named sets have 3 and 4; a tree with a smaller delta is
//! refused), and exactly `n` nodes are taken from the reserve.  Nothing
//! is published before the whole tree is built: one release store of the
//! root makes it visible.
//!
//! [`BalanceParams`]: super::BalanceParams

use kernel::prelude::*;

use super::node::{size_of, store_link, Link};
use super::{bump, Writer, MAX_DEPTH};

impl<'a, V: Copy> Writer<'a, V> {
    /// Fills the empty tree with `ranges`, `(start, end, value)` in
    /// address order.  Takes exactly `ranges.len()` nodes from the
    /// reserve.
    ///
    /// Fails, changing nothing, with `EEXIST` if the tree is not empty,
    /// `EINVAL` if a range is empty or does not lie above the one before
    /// it, or if the tree's balance parameters have a delta below 2 (they
    /// would not accept siblings one node apart), `EAGAIN` if the reserve
    /// holds fewer nodes than there are ranges.  An empty slice succeeds
    /// and changes nothing.
    pub fn build_sorted(&mut self, ranges: &[(usize, usize, V)]) -> Result {
        if self.root().is_some() {
            return Err(EEXIST);
        }
        if self.tree.params.delta() < 2 {
            return Err(EINVAL);
        }
        let mut last_end = 0;
        for (i, &(start, end, _)) in ranges.iter().enumerate() {
            if start >= end || (i > 0 && start < last_end) {
                return Err(EINVAL);
            }
            last_end = end;
        }
        if self.reserve.len() < ranges.len() {
            return Err(EAGAIN);
        }
        if ranges.is_empty() {
            return Ok(());
        }
        let top = self.build_slice(ranges, 0);
        // The reserve held a node per range, so the whole tree was built;
        // were a node missing, a part of it would be: never publish that.
        if size_of(top, &self.key) != ranges.len() {
            return Err(EAGAIN);
        }
        store_link(&self.tree.root.0, top, &self.key);
        let c = &self.tree.hot.0.counters;
        bump(&c.root_stores, 1);
        bump(&c.allocated, ranges.len());
        self.tree.hot.0.set_len(ranges.len(), self.tree.params);
        Ok(())
    }

    /// The subtree of `ranges`, at `depth` below the root.  The reserve
    /// holds at least `ranges.len()` nodes (checked by the caller, and each
    /// call takes one node per range of its slice).
    fn build_slice<'n>(&mut self, ranges: &[(usize, usize, V)], depth: usize) -> Link<'n, V> {
        if ranges.is_empty() {
            return None;
        }
        // A slice of `n` ranges gives a subtree of height `ilog2(n) + 1`:
        // within `MAX_DEPTH` for any slice that fits in memory.
        debug_assert!(depth < MAX_DEPTH);
        let mid = ranges.len() / 2;
        let left = self.build_slice(&ranges[..mid], depth + 1);
        let right = self.build_slice(&ranges[mid + 1..], depth + 1);
        let (start, end, value) = ranges[mid];
        // The caller checked that the reserve holds a node per range.
        // Should it not, the subtree is cut short here, and `build_sorted`
        // sees the root's size fall short and publishes nothing.
        // The size from what was built, so that a cut shows at the root.
        let size = 1 + size_of(left, &self.key) + size_of(right, &self.key);
        self.reserve
            .alloc_with((start, end), value, (left, right), size, &self.key)
            .ok()
    }
}
