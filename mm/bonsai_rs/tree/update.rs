// SPDX-License-Identifier: GPL-2.0

//! Insert and remove: a descent that records the path, a budget check,
//! then a bottom-up pass that rebuilds and rebalances each level (see the
//! parent module for the store rules that keep lookups correct).

use kernel::prelude::*;

use super::node::{size_of, store_link, Dir, Fate, Link, NodeRef};
use super::{bump, InsertError, Writer, MAX_DEPTH};

/// The nodes from the root down an update path, with the direction taken
/// at each.
struct Path<'n, V> {
    nodes: [Link<'n, V>; MAX_DEPTH],
    /// Bit `i` set: the path goes right at `nodes[i]`.
    right: u64,
    len: usize,
}

impl<'n, V> Path<'n, V> {
    fn new() -> Self {
        Self {
            nodes: [None; MAX_DEPTH],
            right: 0,
            len: 0,
        }
    }

    fn push(&mut self, n: NodeRef<'n, V>, dir: Dir) -> Result {
        let slot = self.nodes.get_mut(self.len).ok_or(ERANGE)?;
        *slot = Some(n);
        if dir == Dir::Right {
            self.right |= 1 << self.len;
        }
        self.len += 1;
        Ok(())
    }

    /// The levels `from..to` as `(index, node, direction)`, top down.
    fn levels(
        &self,
        from: usize,
        to: usize,
    ) -> impl DoubleEndedIterator<Item = (usize, NodeRef<'n, V>, Dir)> + '_ {
        let to = to.min(self.len);
        let from = from.min(to);
        self.nodes[from..to]
            .iter()
            .enumerate()
            .filter_map(move |(i, n)| {
                let i = i + from;
                let dir = if self.right & (1 << i) != 0 {
                    Dir::Right
                } else {
                    Dir::Left
                };
                n.map(|n| (i, n, dir))
            })
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

/// What an update plans to do.
struct Plan<'n, V> {
    path: Path<'n, V>,
    /// Upper bound of the nodes the update takes from the reserve.
    need: usize,
    /// For a remove: index in `path` of the removed node.
    at: usize,
    /// For a remove of a node with two children: its successor.
    succ: Link<'n, V>,
    /// For a remove: the removed node.
    victim: Link<'n, V>,
}

impl<'a, V: Copy> Writer<'a, V> {
    fn plan_insert<'n>(&self, start: usize, end: usize) -> Result<Plan<'n, V>> {
        if start >= end {
            return Err(EINVAL);
        }
        let key = &self.key;
        let params = self.tree.params;
        let mut path = Path::new();
        let mut cur = self.root();
        while let Some(n) = cur {
            let dir = if end <= n.start() {
                Dir::Left
            } else if start >= n.end() {
                Dir::Right
            } else {
                return Err(EEXIST);
            };
            path.push(n, dir)?;
            cur = n.child(dir);
        }
        // The new leaf, and at most two nodes per level that falls out of
        // balance (a rotation allocates one or two).
        let mut need = 1;
        for (_, n, dir) in path.levels(0, MAX_DEPTH) {
            let mut l = size_of(n.child(Dir::Left), key);
            let mut r = size_of(n.child(Dir::Right), key);
            match dir {
                Dir::Left => l = l.saturating_add(1),
                Dir::Right => r = r.saturating_add(1),
            }
            if !params.balanced(l, r) {
                need += 2;
            }
        }
        Ok(Plan {
            path,
            need,
            at: 0,
            succ: None,
            victim: None,
        })
    }

    fn plan_remove<'n>(&self, start: usize) -> Result<Plan<'n, V>> {
        let key = &self.key;
        let params = self.tree.params;
        let mut path = Path::new();
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
            path.push(n, dir)?;
            cur = n.child(dir);
        };
        let at = path.len;
        let mut succ = None;
        if victim.child(Dir::Left).is_some() {
            if let Some(r) = victim.child(Dir::Right) {
                path.push(victim, Dir::Right)?;
                let mut s = r;
                while let Some(l) = s.child(Dir::Left) {
                    path.push(s, Dir::Left)?;
                    s = l;
                }
                succ = Some(s);
            }
        }
        // Levels at and below the removed node (two children only) are
        // copied: one node each, two if a rotation is needed there; levels
        // above: two if a rotation is needed.
        let mut need = 0;
        for (i, n, dir) in path.levels(0, MAX_DEPTH) {
            let mut l = size_of(n.child(Dir::Left), key);
            let mut r = size_of(n.child(Dir::Right), key);
            match dir {
                Dir::Left => l = l.saturating_sub(1),
                Dir::Right => r = r.saturating_sub(1),
            }
            if !params.balanced(l, r) {
                need += 2;
            } else if i >= at {
                need += 1;
            }
        }
        Ok(Plan {
            path,
            need,
            at,
            succ,
            victim: Some(victim),
        })
    }

    /// Upper bound of the reserve nodes inserting `[start, end)` takes;
    /// fails as [`Writer::insert`] would (but never with `EAGAIN`).
    pub fn insert_need(&self, start: usize, end: usize) -> Result<usize> {
        Ok(self.plan_insert(start, end)?.need)
    }

    /// Upper bound of the reserve nodes removing the range that starts at
    /// `start` takes; fails as [`Writer::remove`] would (but never with
    /// `EAGAIN`).
    pub fn remove_need(&self, start: usize) -> Result<usize> {
        Ok(self.plan_remove(start)?.need)
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
        let plan = match self.plan_insert(start, end) {
            Ok(plan) => plan,
            Err(error) => return Err(InsertError { error, value }),
        };
        if self.reserve.len() < plan.need {
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
        let sub = self.rebuild_above(&plan.path, plan.path.len, Some(leaf), true);
        self.finish(sub, before, true);
        Ok(())
    }

    /// Removes the range that starts at `start`.
    ///
    /// Fails, leaving the tree unchanged, with `ENOENT` if no range starts
    /// there, `EAGAIN` if the reserve holds fewer than
    /// [`Writer::remove_need`] nodes, `ERANGE` if the tree is too deep.
    /// The removed value is dropped when the retired list is freed.
    pub fn remove(&mut self, start: usize) -> Result {
        let plan = self.plan_remove(start)?;
        if self.reserve.len() < plan.need {
            return Err(EAGAIN);
        }
        let Some(victim) = plan.victim else {
            return Err(ENOENT);
        };
        let before = (self.reserve.len(), self.retired.len());
        let (sub, changed) = match plan.succ {
            None => {
                // At most one child: it takes the victim's place.
                let child = victim.child(Dir::Left).or(victim.child(Dir::Right));
                (child, true)
            }
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
                for (_, n, _) in plan.path.levels(plan.at + 1, MAX_DEPTH).rev() {
                    let right = n.child(Dir::Right);
                    let (r, _) = self.settle(n, Zone::Copy, Dir::Left, true, sub, right);
                    sub = Some(r);
                }
                let left = victim.child(Dir::Left);
                let (r, _) = self.settle(fresh, Zone::Fresh, Dir::Right, true, left, sub);
                (Some(r), true)
            }
        };
        self.retired.push(victim, Fate::Owner, &self.key);
        let top = self.rebuild_above(&plan.path, plan.at, sub, changed);
        self.finish(top, before, false);
        Ok(())
    }

    /// Rebuilds levels `0..below` of `path` (nodes in the tree, committed
    /// in place), bottom up, given the new subtree at level `below`.
    ///
    /// Returns the new subtree at the root and whether it differs from
    /// the current root.
    fn rebuild_above<'n>(
        &mut self,
        path: &Path<'n, V>,
        below: usize,
        mut sub: Link<'n, V>,
        mut changed: bool,
    ) -> (Link<'n, V>, bool) {
        for (_, n, dir) in path.levels(0, below).rev() {
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
        let c = &self.tree.counters;
        if changed {
            store_link(&self.tree.root, top, &self.key);
            bump(&c.root_stores, 1);
        }
        bump(&c.allocated, before.0.saturating_sub(self.reserve.len()));
        bump(&c.retired, self.retired.len().saturating_sub(before.1));
        let len = &self.tree.len;
        let n = len.load(core::sync::atomic::Ordering::Relaxed);
        let n = if grew { n + 1 } else { n.saturating_sub(1) };
        len.store(n, core::sync::atomic::Ordering::Relaxed);
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
            bump(&self.tree.counters.skipped, 1);
        }
        let key = &self.key;
        let size = ls + rs + 1;
        match zone {
            Zone::InPlace => {
                if changed {
                    n.set_child(dir, if dir == Dir::Left { left } else { right }, key);
                    bump(&self.tree.counters.commits, 1);
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
                    bump(&self.tree.counters.skipped, 1);
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
                let ctr = &self.tree.counters;
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
        let ctr = &self.tree.counters;
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
