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

    const fn weight(self, size: usize) -> usize {
        size.saturating_add(self.offset)
    }

    /// Whether a child of `light` nodes is heavy enough next to a sibling
    /// of `heavy` nodes.
    pub(crate) const fn light_ok(self, light: usize, heavy: usize) -> bool {
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
    const fn min_sibling(self, heavy: usize) -> usize {
        // Start below the answer and step up: `light_ok` is monotonic.
        let mut s = (heavy / self.delta).saturating_sub(1);
        while !self.light_ok(s, heavy) {
            s += 1;
        }
        s
    }

    /// `m(h)` (see [`Self::max_height`]) for `h` in `0..HEIGHT_TABLE_LEN`.
    const fn min_nodes_table(self) -> [usize; HEIGHT_TABLE_LEN] {
        let mut t = [0; HEIGHT_TABLE_LEN];
        let mut h = 1;
        while h < HEIGHT_TABLE_LEN {
            t[h] = if h == 1 {
                1
            } else {
                1usize
                    .saturating_add(t[h - 1])
                    .saturating_add(self.min_sibling(t[h - 1]))
            };
            h += 1;
        }
        t
    }

    /// For each bit length `b` of a node count, the largest `h` with
    /// `m(h) <= 2^(b - 1)` (0 for `b = 0`): where the search for a count
    /// of that length starts.
    const fn height_by_bits(t: &[usize; HEIGHT_TABLE_LEN]) -> [u8; BITS_TABLE_LEN] {
        let mut by_bits = [0; BITS_TABLE_LEN];
        let mut b = 1;
        while b < BITS_TABLE_LEN {
            let n = 1usize << (b - 1);
            let mut h = 0;
            while h + 1 < HEIGHT_TABLE_LEN && t[h + 1] <= n {
                h += 1;
            }
            // `h < HEIGHT_TABLE_LEN <= 255`.
            by_bits[b] = h as u8;
            b += 1;
        }
        by_bits
    }

    /// The tables of the named parameter sets.
    fn tables(self) -> Option<&'static HeightTables> {
        if self == Self::HIRAI_YAMAMOTO {
            Some(&HIRAI_YAMAMOTO_TABLES)
        } else if self == Self::PAPER {
            Some(&PAPER_TABLES)
        } else {
            None
        }
    }

    /// Upper bound on the height (nodes on the longest root-to-leaf path)
    /// of a tree of `nodes` nodes in which every node is in balance.
    ///
    /// A tree of height `h` holds at least `m(h)` nodes, where `m(0) = 0`,
    /// `m(1) = 1` and `m(h) = 1 + m(h - 1) + s`, `s` being the fewest nodes
    /// that balance `m(h - 1)`.  The result is the largest `h` with
    /// `m(h) <= nodes`, capped at `cap`.
    ///
    /// Stepping through the recurrence, as
    /// [`Self::max_height_by_recurrence`] does, costs about as much as an
    /// update (it once ran twice per update), so for the named parameter
    /// sets `m(h)` is tabulated at compile time, with where to start
    /// looking in it for each bit length of `nodes`: a few steps from
    /// there find the answer.
    pub fn max_height(self, nodes: usize, cap: usize) -> usize {
        if let Some(HeightTables { min_nodes, by_bits }) = self.tables() {
            let bits = (usize::BITS - nodes.leading_zeros()) as usize;
            // The start has `m(h) <= 2^(bits - 1) <= nodes`.  A level adds
            // at least a `1 / delta` share to `m`, so fewer than
            // `delta + 1` values of `m` fall within one doubling: this
            // takes at most a few steps.
            let mut h = by_bits.get(bits).map_or(0, |&h| usize::from(h));
            while min_nodes.get(h + 1).is_some_and(|&m| m <= nodes) {
                h += 1;
            }
            // Exact unless the table ran out and the cap lies beyond it.
            if h + 1 < HEIGHT_TABLE_LEN || cap < HEIGHT_TABLE_LEN {
                return h.min(cap);
            }
        }
        self.max_height_by_recurrence(nodes, cap)
    }

    /// `m(h)`: the fewest nodes of a tree of height `h` in which every
    /// node is in balance (see [`Self::max_height`]).
    pub(crate) fn min_nodes_of_height(self, h: usize) -> usize {
        if let Some(m) = self.tables().and_then(|t| t.min_nodes.get(h)) {
            return *m;
        }
        let mut m = 0usize;
        for i in 1..=h {
            m = if i == 1 {
                1
            } else {
                1usize.saturating_add(m).saturating_add(self.min_sibling(m))
            };
            if m == usize::MAX {
                break;
            }
        }
        m
    }

    /// [`Self::max_height`], computed step by step through the
    /// recurrence; used for custom parameters and beyond the tables.
    pub fn max_height_by_recurrence(self, nodes: usize, cap: usize) -> usize {
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

/// Heights `0..HEIGHT_TABLE_LEN` are tabulated: enough for
/// [`MAX_DEPTH`](super::MAX_DEPTH), the cap of every writer's question.
const HEIGHT_TABLE_LEN: usize = 65;

/// Bit lengths of a `usize`: `0..=usize::BITS`.
const BITS_TABLE_LEN: usize = usize::BITS as usize + 1;

/// `m(h)` of a parameter set, and where to start looking in it.
struct HeightTables {
    /// `m(h)` for `h` in `0..HEIGHT_TABLE_LEN`.
    min_nodes: [usize; HEIGHT_TABLE_LEN],
    /// See [`BalanceParams::height_by_bits`].
    by_bits: [u8; BITS_TABLE_LEN],
}

impl HeightTables {
    const fn new(p: BalanceParams) -> Self {
        let min_nodes = p.min_nodes_table();
        Self {
            by_bits: BalanceParams::height_by_bits(&min_nodes),
            min_nodes,
        }
    }
}

// A deeper `MAX_DEPTH` would send every writer through the recurrence.
const _: () = assert!(super::MAX_DEPTH < HEIGHT_TABLE_LEN);

static HIRAI_YAMAMOTO_TABLES: HeightTables = HeightTables::new(BalanceParams::HIRAI_YAMAMOTO);
static PAPER_TABLES: HeightTables = HeightTables::new(BalanceParams::PAPER);
