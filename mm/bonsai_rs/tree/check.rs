// SPDX-License-Identifier: GPL-2.0

//! Debug verification of a tree's invariants, under the writer lock.

use super::node::{size_of, Dir, Link, WriteKey};
use super::{BalanceParams, Writer, MAX_DEPTH};

/// What [`Writer::check`] found in a sound tree.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// Ranges counted.
    pub len: usize,
    /// Nodes on the longest root-to-leaf path.
    pub height: usize,
    /// Nodes out of balance (0 unless the balance parameters are unproven).
    pub unbalanced: usize,
}

/// An invariant violation found by [`Writer::check`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckError {
    /// A range with `start >= end`.
    Empty {
        /// Start of the range.
        start: usize,
    },
    /// A range out of order with, or overlapping, an ancestor's.
    Order {
        /// Start of the range.
        start: usize,
    },
    /// A node whose recorded subtree size is wrong.
    Size {
        /// Start of the node's range.
        start: usize,
        /// Size recorded in the node.
        recorded: usize,
        /// Size counted.
        actual: usize,
    },
    /// A node out of balance, with proven balance parameters.
    Balance {
        /// Start of the node's range.
        start: usize,
        /// Nodes in the left subtree.
        left: usize,
        /// Nodes in the right subtree.
        right: usize,
    },
    /// The tree's length differs from the nodes counted.
    Len {
        /// Length recorded in the tree.
        recorded: usize,
        /// Nodes counted.
        actual: usize,
    },
    /// Deeper than twice [`MAX_DEPTH`]: not checked further.
    TooDeep,
}

struct Walk<'k> {
    key: &'k WriteKey,
    params: BalanceParams,
    unbalanced: usize,
}

impl Walk<'_> {
    /// Checks the subtree at `link`, whose ranges must lie within
    /// `[lo, hi)` (`hi = None`: no upper bound); returns (size, height).
    fn walk<V>(
        &mut self,
        link: Link<'_, V>,
        lo: usize,
        hi: Option<usize>,
        depth: usize,
    ) -> Result<(usize, usize), CheckError> {
        let Some(n) = link else {
            return Ok((0, 0));
        };
        if depth >= 2 * MAX_DEPTH {
            return Err(CheckError::TooDeep);
        }
        let (start, end) = (n.start(), n.end());
        if start >= end {
            return Err(CheckError::Empty { start });
        }
        if start < lo || hi.is_some_and(|hi| end > hi) {
            return Err(CheckError::Order { start });
        }
        let (ls, lh) = self.walk(n.child(Dir::Left), lo, Some(start), depth + 1)?;
        let (rs, rh) = self.walk(n.child(Dir::Right), end, hi, depth + 1)?;
        let size = ls + rs + 1;
        let recorded = n.size(self.key);
        if recorded != size {
            return Err(CheckError::Size {
                start,
                recorded,
                actual: size,
            });
        }
        if !self.params.balanced(ls, rs) {
            if self.params.is_proven() {
                return Err(CheckError::Balance {
                    start,
                    left: ls,
                    right: rs,
                });
            }
            self.unbalanced += 1;
        }
        Ok((size, lh.max(rh) + 1))
    }
}

impl<V: Copy> Writer<'_, V> {
    /// Verifies the tree: ranges non-empty, ordered and disjoint; every
    /// size field right; every node in balance (an error only with proven
    /// parameters, otherwise counted in the report); the length right.
    ///
    /// Recursive, `O(n)`: for debugging and tests.
    pub fn check(&self) -> Result<CheckReport, CheckError> {
        let mut w = Walk {
            key: &self.key,
            params: self.tree.params,
            unbalanced: 0,
        };
        let root = self.root();
        let (len, height) = w.walk(root, 0, None, 0)?;
        let recorded = self.tree.len();
        if recorded != len || size_of(root, &self.key) != len {
            return Err(CheckError::Len {
                recorded,
                actual: len,
            });
        }
        Ok(CheckReport {
            len,
            height,
            unbalanced: w.unbalanced,
        })
    }
}
