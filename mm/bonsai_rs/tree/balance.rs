// SPDX-License-Identifier: GPL-2.0

//! Balance rules of the weight-balanced (bounded-balance) tree.
//!
//! Every node weighs `size + offset`, where `size` counts the nodes of its
//! subtree.  A node is in balance when neither child is "too light":
//! `delta * weight(light) >= weight(heavy)`.  A node out of balance is
//! restored by a single rotation when the heavy child's inner subtree is
//! light compared with its outer one (`weight(inner) < gamma *
//! weight(outer)`), and by a double rotation otherwise.
//!
//! Two parameter sets are provided:
//!
//! * [`BalanceParams::HIRAI_YAMAMOTO`], the default: `delta = 3`,
//!   `gamma = 2`, `weight = size + 1`.  Hirai and Yamamoto ("Balancing
//!   weight-balanced trees", JFP 2011) proved it is the only integer pair
//!   for which one rotation always restores balance after one insert or
//!   delete.
//! * [`BalanceParams::PAPER`], the Bonsai paper's: weight 4, ratio 1,
//!   `weight = size` (Adams' original formulation).  As in Adams' code a
//!   subtree of fewer than two nodes is always in balance.  (The paper's
//!   Figure 6 tests `ln && rn` instead, which never rebalances a node with
//!   an empty side and so lets sequential inserts build a list.)  It is
//!   kept for comparison; it has no proof of correctness, and
//!   [`BalanceParams::is_proven`] says so.

/// Parameters of the balance rule; see the module documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BalanceParams {
    delta: usize,
    gamma: usize,
    offset: usize,
}

impl Default for BalanceParams {
    fn default() -> Self {
        Self::HIRAI_YAMAMOTO
    }
}

impl BalanceParams {
    /// `delta = 3`, `gamma = 2`, weight = size + 1 (the default).
    pub const HIRAI_YAMAMOTO: Self = Self {
        delta: 3,
        gamma: 2,
        offset: 1,
    };

    /// The Bonsai paper's parameters: weight 4, ratio 1, weight = size.
    pub const PAPER: Self = Self {
        delta: 4,
        gamma: 1,
        offset: 0,
    };

    /// Other parameters, for experiments: balance factor `delta`, rotation
    /// ratio `gamma` (both at least 1), weight = size + `weight_offset` (0
    /// or 1; with 0, a subtree of fewer than two nodes is always in
    /// balance).  Balance is proven only for [`Self::HIRAI_YAMAMOTO`]; with
    /// others the tree stays correct but may drift out of balance
    /// ([`Self::max_height`] then no longer bounds its height).
    pub const fn custom(delta: usize, gamma: usize, weight_offset: usize) -> Self {
        Self {
            delta: if delta == 0 { 1 } else { delta },
            gamma: if gamma == 0 { 1 } else { gamma },
            offset: if weight_offset == 0 { 0 } else { 1 },
        }
    }

    /// The balance factor `delta`.
    pub const fn delta(self) -> usize {
        self.delta
    }

    /// The rotation-choice ratio `gamma`.
    pub const fn gamma(self) -> usize {
        self.gamma
    }

    /// What is added to a subtree's size to get its weight (1 or 0).
    pub const fn weight_offset(self) -> usize {
        self.offset
    }

    /// Whether these parameters are proven to keep every node in balance
    /// (true for [`Self::HIRAI_YAMAMOTO`] only).
    pub fn is_proven(self) -> bool {
        self == Self::HIRAI_YAMAMOTO
    }

    fn weight(self, size: usize) -> usize {
        size.saturating_add(self.offset)
    }

    /// Whether a child of `light` nodes is heavy enough next to a sibling
    /// of `heavy` nodes.
    pub(crate) fn light_ok(self, light: usize, heavy: usize) -> bool {
        if self.offset == 0 && light.saturating_add(heavy) < 2 {
            return true;
        }
        self.delta.saturating_mul(self.weight(light)) >= self.weight(heavy)
    }

    /// Whether a node with children of `left` and `right` nodes is in
    /// balance.
    pub(crate) fn balanced(self, left: usize, right: usize) -> bool {
        self.light_ok(left, right) && self.light_ok(right, left)
    }

    /// Whether a node out of balance, whose heavy child has an inner
    /// subtree of `inner` nodes and an outer one of `outer` nodes, is
    /// restored by a single rotation (otherwise: a double one).
    pub(crate) fn single_rotation(self, inner: usize, outer: usize) -> bool {
        self.weight(inner) < self.gamma.saturating_mul(self.weight(outer))
    }

    /// Smallest number of nodes `s` of a child that is in balance next to
    /// a sibling of `heavy` nodes.
    fn min_sibling(self, heavy: usize) -> usize {
        // Start below the answer and step up: `light_ok` is monotonic.
        let mut s = (heavy / self.delta).saturating_sub(1);
        while !self.light_ok(s, heavy) {
            s += 1;
        }
        s
    }

    /// Upper bound on the height (nodes on the longest root-to-leaf path)
    /// of a tree of `nodes` nodes in which every node is in balance.
    ///
    /// A tree of height `h` holds at least `m(h)` nodes, where `m(0) = 0`,
    /// `m(1) = 1` and `m(h) = 1 + m(h - 1) + s`, `s` being the fewest nodes
    /// that balance `m(h - 1)`.  The result is the largest `h` with
    /// `m(h) <= nodes`, capped at `cap`.
    pub fn max_height(self, nodes: usize, cap: usize) -> usize {
        let mut h = 0;
        let mut m = 0usize;
        while h < cap {
            let next = if h == 0 {
                1
            } else {
                1usize.saturating_add(m).saturating_add(self.min_sibling(m))
            };
            if next > nodes {
                break;
            }
            m = next;
            h += 1;
        }
        h
    }
}
