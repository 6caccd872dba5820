// SPDX-License-Identifier: GPL-2.0

//! Insert and remove: a descent that records the path and the subtree
//! sizes met on it, a budget check, then a bottom-up pass that rebuilds
//! and rebalances each level (see the parent module for the store rules
//! that keep lookups correct).
//!
//! # Cost
//!
//! An update changes the size of every subtree on its path by one, and a
//! rotation keeps the size of the subtree it rotates.  So the sizes of
//! both children of every level after the update follow from the sizes
//! recorded on the way down: the path child's changes by one, the
//! sibling's is what is left of the node's.  The plan decides balance
//! from those, once, without loading any sibling; only a level that
//! rotates reads the nodes around it.  A level that stays in balance
//! costs a size store, plus a child store where the subtree below it
//! changed.

use kernel::prelude::*;

use super::node::{size_of, store_link, Dir, Fate, Link, NodeRef};
use super::stack::{Slots, Stack};
use super::{bump, BalanceParams, InsertError, Writer, MAX_DEPTH};

// `Path::right` has one bit per level.
const _: () = assert!(MAX_DEPTH <= u64::BITS as usize);

/// A level of a [`Path`]: a node and the size of its subtree before the
/// update.
type Level<'n, V> = (NodeRef<'n, V>, usize);

/// The nodes from the root down an update path, each with the size of
/// its subtree before the update, and the direction taken at each.
struct Path<'s, 'n, V> {
    levels: Stack<'s, Level<'n, V>, MAX_DEPTH>,
    /// Bit `i` set: the path goes right at level `i`.
    right: u64,
    /// Bit `i` set: level `i` falls out of balance (set by the plan).
    unbalanced: u64,
    /// Size before the update of the subtree the last level's path side
    /// leads to: 0 for an insert (an empty child), the removed node's or
    /// its successor's for a remove.
    tail: usize,
}

impl<'s, 'n, V> Path<'s, 'n, V> {
    /// An empty path stored in `slots` (a local of the caller: see
    /// [`Stack`] for why).
    fn new(slots: &'s mut Slots<Level<'n, V>, MAX_DEPTH>) -> Self {
        Self {
            levels: Stack::new(slots),
            right: 0,
            unbalanced: 0,
            tail: 0,
        }
    }

    fn len(&self) -> usize {
        self.levels.len()
    }

    /// Appends node `n`, whose subtree holds `size` nodes, left towards
    /// `dir`; `ERANGE` beyond [`MAX_DEPTH`] levels.
    fn push(&mut self, n: NodeRef<'n, V>, size: usize, dir: Dir) -> Result {
        let i = self.levels.len();
        self.levels.push((n, size)).map_err(|_| ERANGE)?;
        // `i < MAX_DEPTH <= 64`, since the push succeeded.
        if dir == Dir::Right {
            self.right |= 1 << i;
        }
        Ok(())
    }

    fn node(&self, i: usize) -> Option<NodeRef<'n, V>> {
        self.levels.get(i).map(|(n, _)| n)
    }

    fn dir(&self, i: usize) -> Dir {
        if i < MAX_DEPTH && self.right & (1 << i) != 0 {
            Dir::Right
        } else {
            Dir::Left
        }
    }

    /// Decides whether each level falls out of balance once the update
    /// has added (`grow`) or taken away one node below it; returns the
    /// number of levels that do.
    fn plan_balance(&mut self, params: BalanceParams, grow: bool) -> usize {
        let mut n = 0;
        for i in 0..self.len() {
            // Balance does not care which child is on which side.
            let (child, sibling) = self.children_after(i, grow);
            // `i < MAX_DEPTH <= 64`.
            if !params.balanced(child, sibling) {
                self.unbalanced |= 1 << i;
                n += 1;
            }
        }
        n
    }

    /// Whether [`Self::plan_balance`] found level `i` out of balance.
    fn unbalanced(&self, i: usize) -> bool {
        i < MAX_DEPTH && self.unbalanced & (1 << i) != 0
    }

    /// Size of level `i`'s subtree once the update has added (`grow`) or
    /// taken away one node below it.
    fn size_after(&self, i: usize, grow: bool) -> usize {
        let size = self.levels.get(i).map_or(0, |(_, s)| s);
        if grow {
            size.saturating_add(1)
        } else {
            size.saturating_sub(1)
        }
    }

    /// Sizes of the path child and of the other child of level `i` once
    /// the update has added (`grow`) or taken away one node below it.
    fn children_after(&self, i: usize, grow: bool) -> (usize, usize) {
        let size = self.levels.get(i).map_or(0, |(_, s)| s);
        let child = self.levels.get(i + 1).map_or(self.tail, |(_, s)| s);
        // Saturating: only corrupt sizes could make these wrap.
        let sibling = size.saturating_sub(child).saturating_sub(1);
        let child = if grow {
            child.saturating_add(1)
        } else {
            child.saturating_sub(1)
        };
        (child, sibling)
    }
}

/// How a level on the update path is rebuilt when it stays in balance.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Zone {
    /// A node in the tree keeps its place: its path child is committed
    /// in place (paper, section 3.3).
    InPlace,
    /// A node between a removed node and its successor: copied.
    Copy,
    /// A node made for this update and not yet published: set directly.
    Fresh,
}

/// Orders `(light_side, heavy_side)` children of a node as `(left, right)`.
fn orient<'n, V>(
    heavy: Dir,
    light_side: Link<'n, V>,
    heavy_side: Link<'n, V>,
) -> (Link<'n, V>, Link<'n, V>) {
    match heavy {
        Dir::Right => (light_side, heavy_side),
        Dir::Left => (heavy_side, light_side),
    }
}

/// What a remove plans to do, besides its path.
struct RemovePlan<'n, V> {
    /// Upper bound of the nodes the update takes from the reserve.
    need: usize,
    /// Index in the path of the removed node (its length if the node,
    /// having at most one child, was not pushed).
    at: usize,
    /// The removed node.
    victim: NodeRef<'n, V>,
    /// For a node with two children: its successor.
    succ: Link<'n, V>,
}

impl<'a, V: Copy> Writer<'a, V> {
    /// Records the path an insert of `[start, end)` takes; returns an
    /// upper bound of the reserve nodes it needs.
    fn plan_insert<'n>(
        &self,
        path: &mut Path<'_, 'n, V>,
        start: usize,
        end: usize,
    ) -> Result<usize> {
        if start >= end {
            return Err(EINVAL);
        }
        let key = &self.key;
        let mut cur = self.root();
        while let Some(n) = cur {
            let dir = if end <= n.start() {
                Dir::Left
            } else if start >= n.end() {
                Dir::Right
            } else {
                return Err(EEXIST);
            };
            path.push(n, n.size(key), dir)?;
            cur = n.child(dir);
        }
        // The new leaf, and at most two nodes per level that falls out of
        // balance (a rotation allocates one or two).
        Ok(1 + 2 * path.plan_balance(self.tree.params, true))
    }

    /// Records the path a remove of the range starting at `start` takes,
    /// down to the successor of a node with two children.
    fn plan_remove<'n>(
        &self,
        path: &mut Path<'_, 'n, V>,
        start: usize,
    ) -> Result<RemovePlan<'n, V>> {
        let key = &self.key;
        let mut cur = self.root();
        let victim = loop {
            let Some(n) = cur else {
                return Err(ENOENT);
            };
            let dir = if start < n.start() {
                Dir::Left
            } else if start > n.start() {
                Dir::Right
            } else {
                break n;
            };
            path.push(n, n.size(key), dir)?;
            cur = n.child(dir);
        };
        let at = path.len();
        let mut succ = None;
        path.tail = victim.size(key);
        if victim.child(Dir::Left).is_some() {
            if let Some(r) = victim.child(Dir::Right) {
                path.push(victim, victim.size(key), Dir::Right)?;
                let mut s = r;
                while let Some(l) = s.child(Dir::Left) {
                    path.push(s, s.size(key), Dir::Left)?;
                    s = l;
                }
                path.tail = s.size(key);
                succ = Some(s);
            }
        }
        // Levels at and below the removed node (two children only) are
        // copied: one node each, two if a rotation is needed there; levels
        // above: two if a rotation is needed.
        let rotations = path.plan_balance(self.tree.params, false);
        let need = 2 * rotations + (at..path.len()).filter(|&i| !path.unbalanced(i)).count();
        Ok(RemovePlan {
            need,
            at,
            victim,
            succ,
        })
    }

    /// Upper bound of the reserve nodes inserting `[start, end)` takes;
    /// fails as [`Writer::insert`] would (but never with `EAGAIN`).
    pub fn insert_need(&self, start: usize, end: usize) -> Result<usize> {
        self.plan_insert(&mut Path::new(&mut Slots::uninit()), start, end)
    }

    /// Upper bound of the reserve nodes removing the range that starts at
    /// `start` takes; fails as [`Writer::remove`] would (but never with
    /// `EAGAIN`).
    pub fn remove_need(&self, start: usize) -> Result<usize> {
        Ok(self
            .plan_remove(&mut Path::new(&mut Slots::uninit()), start)?
            .need)
    }

    /// Inserts `[start, end)` with `value`.
    ///
    /// Fails, leaving the tree unchanged and giving the value back, with
    /// `EINVAL` if `start >= end`, `EEXIST` if the range overlaps one in the
    /// tree, `EAGAIN` if the reserve holds fewer than
    /// [`Writer::insert_need`] nodes, `ERANGE` if the tree is too deep.
    pub fn insert(
        &mut self,
        start: usize,
        end: usize,
        value: V,
    ) -> core::result::Result<(), InsertError<V>> {
        // Built here and borrowed, not returned: moving it would copy it.
        let mut slots = Slots::uninit();
        let mut path = Path::new(&mut slots);
        let need = match self.plan_insert(&mut path, start, end) {
            Ok(need) => need,
            Err(error) => return Err(InsertError { error, value }),
        };
        if self.reserve.len() < need {
            return Err(InsertError {
                error: EAGAIN,
                value,
            });
        }
        let before = (self.reserve.len(), self.retired.len());
        let leaf = match self.reserve.alloc(start, end, value, 1, &self.key) {
            Ok(leaf) => leaf,
            Err(value) => {
                return Err(InsertError {
                    error: EAGAIN,
                    value,
                })
            }
        };
        let top = self.rebuild_above(&path, path.len(), Some(leaf), true, true);
        self.finish(top, before, true);
        Ok(())
    }

    /// Removes the range that starts at `start`.
    ///
    /// Fails, leaving the tree unchanged, with `ENOENT` if no range starts
    /// there, `EAGAIN` if the reserve holds fewer than
    /// [`Writer::remove_need`] nodes, `ERANGE` if the tree is too deep.
    /// The removed value is dropped when the retired list is freed.
    pub fn remove(&mut self, start: usize) -> Result {
        let mut slots = Slots::uninit();
        let mut path = Path::new(&mut slots);
        let plan = self.plan_remove(&mut path, start)?;
        if self.reserve.len() < plan.need {
            return Err(EAGAIN);
        }
        let victim = plan.victim;
        let before = (self.reserve.len(), self.retired.len());
        let sub = match plan.succ {
            // At most one child: it takes the victim's place.
            None => victim.child(Dir::Left).or(victim.child(Dir::Right)),
            Some(succ) => {
                // The successor's replacement, made first so that nothing
                // is published if the reserve were somehow empty.
                let Some(fresh) =
                    self.reserve
                        .replace(succ, None, None, 0, self.retired, &self.key)
                else {
                    return Err(EAGAIN);
                };
                // Copy the path below the victim, bottom up; the successor
                // leaves, its right child takes its place.
                let mut sub = succ.child(Dir::Right);
                for i in (plan.at + 1..path.len()).rev() {
                    let Some(n) = path.node(i) else {
                        continue;
                    };
                    let right = n.child(Dir::Right);
                    let (r, _) = self.settle(n, Zone::Copy, Dir::Left, true, sub, right);
                    sub = Some(r);
                }
                let left = victim.child(Dir::Left);
                let (r, _) = self.settle(fresh, Zone::Fresh, Dir::Right, true, left, sub);
                Some(r)
            }
        };
        self.retired.push(victim, Fate::Owner, &self.key);
        let top = self.rebuild_above(&path, plan.at, sub, true, false);
        self.finish(top, before, false);
        Ok(())
    }

    /// Rebuilds levels `0..below` of `path` (nodes in the tree, committed
    /// in place), bottom up, given the new subtree at level `below`, which
    /// has one node more (`grew`) or less than the one it replaces.
    ///
    /// Returns the new subtree at the root and whether it differs from
    /// the current root.
    fn rebuild_above<'n>(
        &mut self,
        path: &Path<'_, 'n, V>,
        below: usize,
        mut sub: Link<'n, V>,
        mut changed: bool,
        grew: bool,
    ) -> (Link<'n, V>, bool) {
        for i in (0..below).rev() {
            let Some(n) = path.node(i) else {
                continue;
            };
            let dir = path.dir(i);
            if !path.unbalanced(i) {
                // The common case, planned without loading the sibling.
                let key = &self.key;
                if changed {
                    n.set_child(dir, sub, key);
                    bump(&self.tree.hot.0.counters.commits, 1);
                }
                n.set_size(path.size_after(i, grew), key);
                sub = Some(n);
                changed = false;
                continue;
            }
            let (left, right) = match dir {
                Dir::Left => (sub, n.child(Dir::Right)),
                Dir::Right => (n.child(Dir::Left), sub),
            };
            let (r, c) = self.settle(n, Zone::InPlace, dir, changed, left, right);
            sub = Some(r);
            changed = c;
        }
        (sub, changed)
    }

    /// Publishes a new root if needed and updates the counters.
    fn finish(&mut self, (top, changed): (Link<'_, V>, bool), before: (usize, usize), grew: bool) {
        let c = &self.tree.hot.0.counters;
        if changed {
            store_link(&self.tree.root.0, top, &self.key);
            bump(&c.root_stores, 1);
        }
        bump(&c.allocated, before.0.saturating_sub(self.reserve.len()));
        bump(&c.retired, self.retired.len().saturating_sub(before.1));
        let n = self.tree.len();
        let n = if grew { n + 1 } else { n.saturating_sub(1) };
        self.tree.hot.0.set_len(n, self.tree.params);
    }

    /// Rebuilds one level: node `n` gets children `left` and `right` (one
    /// of which is the rebuilt subtree on side `dir`, which differs from
    /// n's current child there if `changed`).  Rebalances if needed.
    ///
    /// Returns the subtree now standing for `n`, and whether it differs
    /// from `n` itself.
    fn settle<'n>(
        &mut self,
        n: NodeRef<'n, V>,
        zone: Zone,
        dir: Dir,
        changed: bool,
        left: Link<'n, V>,
        right: Link<'n, V>,
    ) -> (NodeRef<'n, V>, bool) {
        let key = &self.key;
        let params = self.tree.params;
        let ls = size_of(left, key);
        let rs = size_of(right, key);
        if !params.balanced(ls, rs) {
            let heavy = if params.light_ok(ls, rs) {
                Dir::Left
            } else {
                Dir::Right
            };
            let (light, heavy_child) = match heavy {
                Dir::Right => (left, right),
                Dir::Left => (right, left),
            };
            if let Some(b) = heavy_child {
                if let Some(root) = self.rotate(n, zone, light, b, heavy) {
                    return (root, true);
                }
            }
            // Only reachable with corrupt sizes: stay unbalanced.
            bump(&self.tree.hot.0.counters.skipped, 1);
        }
        let key = &self.key;
        let size = ls + rs + 1;
        match zone {
            Zone::InPlace => {
                if changed {
                    n.set_child(dir, if dir == Dir::Left { left } else { right }, key);
                    bump(&self.tree.hot.0.counters.commits, 1);
                }
                n.set_size(size, key);
                (n, false)
            }
            Zone::Fresh => {
                n.set_child(Dir::Left, left, key);
                n.set_child(Dir::Right, right, key);
                n.set_size(size, key);
                (n, true)
            }
            Zone::Copy => match self
                .reserve
                .replace(n, left, right, size, self.retired, key)
            {
                Some(copy) => (copy, true),
                None => {
                    // Only reachable with corrupt sizes: commit in place
                    // instead, which keeps memory safety but may let a
                    // concurrent lookup miss the successor.
                    bump(&self.tree.hot.0.counters.skipped, 1);
                    n.set_child(dir, if dir == Dir::Left { left } else { right }, key);
                    n.set_size(size, key);
                    (n, false)
                }
            },
        }
    }

    /// Rotates so that the heavy child `b` (on side `heavy`) or its inner
    /// child rises above `a`, whose other child is `light`.  `a` is copied
    /// (and retired) unless it is `Zone::Fresh`.
    ///
    /// Returns the new subtree root, or `None`, having changed nothing, if
    /// the reserve is too short.
    fn rotate<'n>(
        &mut self,
        a: NodeRef<'n, V>,
        zone: Zone,
        light: Link<'n, V>,
        b: NodeRef<'n, V>,
        heavy: Dir,
    ) -> Option<NodeRef<'n, V>> {
        let key = &self.key;
        let params = self.tree.params;
        let inner = b.child(heavy.opp());
        let outer = b.child(heavy);
        let light_size = size_of(light, key);
        let inner_size = size_of(inner, key);
        let outer_size = size_of(outer, key);
        let copy_a = usize::from(zone != Zone::Fresh);
        let c = match inner {
            Some(c) if !params.single_rotation(inner_size, outer_size) => c,
            _ => {
                // Single rotation: a' = (light, a, inner) becomes b's inner
                // child, a superset of the old one.
                if self.reserve.len() < copy_a {
                    return None;
                }
                let a_size = light_size + inner_size + 1;
                let a2 = self.pivot(a, zone, heavy, light, inner, a_size)?;
                let key = &self.key;
                b.set_child(heavy.opp(), Some(a2), key);
                b.set_size(a_size + outer_size + 1, key);
                let ctr = &self.tree.hot.0.counters;
                bump(&ctr.single_rotations, 1);
                bump(&ctr.commits, 1);
                return Some(b);
            }
        };
        // Double rotation: a' = (light, a, c's light-side child) and
        // b' = (c's heavy-side child, b, outer) become c's children, each a
        // superset of the child it replaces.
        if self.reserve.len() < copy_a + 1 {
            return None;
        }
        let c_light = c.child(heavy.opp());
        let c_heavy = c.child(heavy);
        let a_size = light_size + size_of(c_light, key) + 1;
        let b_size = size_of(c_heavy, key) + outer_size + 1;
        let (bl, br) = orient(heavy, c_heavy, outer);
        // Neither can fail: the reserve holds `copy_a + 1` nodes.
        let b2 = self
            .reserve
            .replace(b, bl, br, b_size, self.retired, &self.key)?;
        let a2 = self.pivot(a, zone, heavy, light, c_light, a_size)?;
        let key = &self.key;
        c.set_child(heavy.opp(), Some(a2), key);
        c.set_child(heavy, Some(b2), key);
        c.set_size(a_size + b_size + 1, key);
        let ctr = &self.tree.hot.0.counters;
        bump(&ctr.double_rotations, 1);
        bump(&ctr.commits, 2);
        Some(c)
    }

    /// Makes `a'`: `a` with children `light` (on the light side) and `x`
    /// (on the heavy side): a copy, or `a` itself when fresh.
    fn pivot<'n>(
        &mut self,
        a: NodeRef<'n, V>,
        zone: Zone,
        heavy: Dir,
        light: Link<'n, V>,
        x: Link<'n, V>,
        size: usize,
    ) -> Option<NodeRef<'n, V>> {
        let (l, r) = orient(heavy, light, x);
        if zone == Zone::Fresh {
            a.set_child(Dir::Left, l, &self.key);
            a.set_child(Dir::Right, r, &self.key);
            a.set_size(size, &self.key);
            Some(a)
        } else {
            self.reserve.replace(a, l, r, size, self.retired, &self.key)
        }
    }
}
