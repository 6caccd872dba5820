// SPDX-License-Identifier: GPL-2.0

//! Range stores with the maple tree's overwrite semantics, built on the
//! writer core of [`Writer::insert`] and [`Writer::remove`].
//!
//! [`Writer::store`] puts `[start, end)` into the tree whatever it
//! overlaps: every range it covers goes, a range it covers partly keeps
//! the part outside (both parts, if the store falls inside it), and the
//! new range goes in.  [`Writer::clear`] does the same without the new
//! range.  This is what a `mas_store()` of an entry or of `NULL` does to
//! the ranges of a maple tree (without its merging of adjacent `NULL`
//! ranges, which a tree of ranges does not hold).
//!
//! # Steps
//!
//! 1. A range `[a, b)` that starts below `start` and ends above it is
//!    *trimmed* to `[a, start)`: a copy with the shorter range and the same
//!    value takes its place (the rewrite store of the parent module).  If
//!    it also ends above `end`, its upper part `[end, b)` is inserted.
//! 2. A range `[a, b)` with `start <= a < end < b` is trimmed to `[end, b)`.
//! 3. Every other range inside `[start, end)` is removed, except, for a
//!    store, the lowest: the *keeper*.
//! 4. The keeper is rewritten to `[start, end)` with the new value, at its
//!    place in the tree; without one, `[start, end)` is inserted.
//!
//! Trims and the keeper's rewrite cost one node each and change no size,
//! so they never rebalance.  After steps 1 to 3 no range but the keeper
//! overlaps `[start, end)`, so its ancestors and its subtrees lie on the
//! same sides of `[start, end)` as of its old range, and the rewritten
//! node keeps the tree ordered.  A lookup racing a store finds the ranges
//! outside `[start, end)` that the store keeps, whole or trimmed, at
//! every moment, except the upper part of a range the store splits
//! between steps 1 and its insert; inside `[start, end)` it may find an
//! old range, the new one, or nothing.
//!
//! # Memory
//!
//! The node count is bounded before anything changes: [`Writer::store_need`]
//! and [`Writer::clear_need`] walk the ranges the store overlaps and add
//! one node per trim and rewrite, the planned need of the first insert or
//! remove (trims change no shape or size, so it can be planned before
//! them), except for a split, and [`Tree::reserve_bound`] per further
//! insert and remove.  A store into a gap, over exactly one range, or a
//! clear of one range thus asks for what the update itself needs, as
//! [`Writer::insert_need`] and [`Writer::remove_need`] would say.  The
//! store fails with `EAGAIN`, changing nothing, if the
//! reserve holds fewer: the preallocation step (the caller's, before the
//! section where the store must not sleep) fills the reserve to that bound.
//! A store over `r` ranges needs `O(r log n)` nodes in the worst case;
//! nodes it does not use stay in the reserve.
//!
//! Planning an insert or remove walks a path and costs about as much as
//! doing it, so [`Writer::store_bound`] offers a bound without planning:
//! one walk over the overlapped ranges, [`Tree::reserve_bound`] for each
//! insert and remove, for a store or a clear alike.  A store checks the
//! reserve against that bound first and plans only when it falls short,
//! so a caller that preallocates by [`Writer::store_bound`] pays for one
//! walk of the ranges before its update and none for the check.
//!
//! [`Tree::reserve_bound`]: super::Tree::reserve_bound

use kernel::prelude::*;

use super::node::{store_link, Dir};
use super::{bump, InsertError, Writer};

/// What a store or clear of `[start, end)` meets in the tree.
struct StorePlan {
    /// The range that starts below `start` and ends above it.
    left: Option<(usize, usize)>,
    /// Whether `left` also ends above `end`: the store splits it.
    split: bool,
    /// The range that starts in `[start, end)` and ends above `end`.
    right: Option<(usize, usize)>,
    /// The lowest range inside `[start, end)`.
    first: Option<(usize, usize)>,
    /// Start of the second lowest range inside `[start, end)`.
    second: Option<usize>,
    /// Ranges inside `[start, end)`.
    covered: usize,
    /// The range of the store or clear, `[start, end)`.
    range: (usize, usize),
}

impl<'a, V: Copy> Writer<'a, V> {
    /// Finds what a store or clear of `[start, end)` changes.
    fn plan_ranges(&self, start: usize, end: usize) -> Result<StorePlan> {
        if start >= end {
            return Err(EINVAL);
        }
        let mut plan = StorePlan {
            left: None,
            split: false,
            right: None,
            first: None,
            second: None,
            covered: 0,
            range: (start, end),
        };
        let mut cur = self.find_from(start).map(|e| (e.start, e.end));
        if let Some((s, e)) = cur {
            if s < start {
                plan.left = Some((s, e));
                plan.split = e > end;
                cur = if plan.split {
                    None
                } else {
                    self.find_from(e).map(|e| (e.start, e.end))
                };
            }
        }
        while let Some((s, e)) = cur {
            if s >= end {
                break;
            }
            if e > end {
                plan.right = Some((s, e));
                break;
            }
            if plan.first.is_none() {
                plan.first = Some((s, e));
            } else if plan.second.is_none() {
                plan.second = Some(s);
            }
            plan.covered += 1;
            // `find_from(e)` returns ranges ending above `e`: progress.
            cur = self.find_from(e).map(|e| (e.start, e.end));
        }
        Ok(plan)
    }

    /// Upper bound of the reserve nodes the store (`store`) or clear that
    /// `plan` describes takes.  `exact` plans the first insert or remove
    /// on the tree as it is; without it, every insert and remove counts
    /// [`Tree::reserve_bound`], which bounds what any one of them takes,
    /// so the result is never below the exact one and costs no walk.
    ///
    /// [`Tree::reserve_bound`]: super::Tree::reserve_bound
    fn need_of(&self, plan: &StorePlan, store: bool, exact: bool) -> Result<usize> {
        // Trims and rewrites change neither the shape of the tree nor its
        // sizes: the first insert or remove after them can be planned on
        // the tree as it is, exactly.  Later ones take at most the bound
        // of a tree of up to twice the length plus 16 (see
        // `Tree::reserve_bound`), which holds through the store, as it
        // adds at most two ranges.
        let per_op = self.tree.reserve_bound();
        let keep = usize::from(store && plan.first.is_some());
        let mut need = usize::from(plan.left.is_some()) + usize::from(plan.right.is_some());
        if plan.split {
            // Two inserts; the first one's path has to cross the range
            // it splits, which its plan would find overlapping.
            need += 2 * per_op;
        } else {
            // The removes; a store keeps the lowest covered range.
            let removed = plan.covered - keep;
            let head = if keep == 1 {
                plan.second
            } else {
                plan.first.map(|f| f.0)
            };
            if let Some(s) = head {
                let first = if exact { self.remove_need(s)? } else { per_op };
                need = need.saturating_add(first);
                need = need.saturating_add(per_op.saturating_mul(removed - 1));
            }
            if store {
                let last = if keep == 1 {
                    // The keeper's rewrite.
                    1
                } else if exact && plan.left.is_none() && plan.right.is_none() {
                    // Into a gap: the insert is the only update.
                    self.insert_need(plan.range.0, plan.range.1)?
                } else {
                    per_op
                };
                need = need.saturating_add(last);
            }
        }
        Ok(need)
    }

    /// Checks that the reserve holds what the update `plan` describes
    /// needs: first against the bound that costs no walk, which the
    /// reserve filled by [`Writer::store_bound`] meets, then, only if
    /// that fails, against the exact need.  `EAGAIN` if it holds fewer.
    ///
    /// The cheap bound counts [`Tree::reserve_bound`] for the first insert
    /// or remove too, which bounds it only while the tree is as balanced
    /// as proven parameters keep it ([`BalanceParams::is_proven`]); with
    /// other parameters the exact need is always planned.
    ///
    /// [`Tree::reserve_bound`]: super::Tree::reserve_bound
    /// [`BalanceParams::is_proven`]: super::BalanceParams::is_proven
    fn check_reserve(&self, plan: &StorePlan, store: bool) -> Result {
        let have = self.reserve.len();
        let cheap_ok = self.tree.params.is_proven() && have >= self.need_of(plan, store, false)?;
        if cheap_ok || have >= self.need_of(plan, store, true)? {
            Ok(())
        } else {
            Err(EAGAIN)
        }
    }

    /// Upper bound of the reserve nodes a [`Writer::store`] or
    /// [`Writer::clear`] of `[start, end)` takes on the tree as it is,
    /// whichever of the two follows; `EINVAL` if `start >= end`.
    ///
    /// One walk over the ranges `[start, end)` overlaps, no planned
    /// update: every insert and remove counts [`Tree::reserve_bound`].
    /// That bounds each of them while the tree is as balanced as proven
    /// parameters keep it; with other parameters a store may still find
    /// a reserve of this size short (`EAGAIN`, nothing changed).
    /// This is the preallocation step's question when it is cheaper to
    /// keep a few nodes more than to plan (the VMA index's hooks, which
    /// do not say whether a store or a clear follows).
    ///
    /// [`Tree::reserve_bound`]: super::Tree::reserve_bound
    pub fn store_bound(&self, start: usize, end: usize) -> Result<usize> {
        let plan = self.plan_ranges(start, end)?;
        Ok(self
            .need_of(&plan, true, false)?
            .max(self.need_of(&plan, false, false)?))
    }

    /// Upper bound of the reserve nodes a [`Writer::store`] of
    /// `[start, end)` takes on the tree as it is; `EINVAL` if
    /// `start >= end`.
    ///
    /// This is the preallocation step's question: a reserve holding as
    /// many nodes lets the store run without failing, as long as the tree
    /// does not change in between.
    pub fn store_need(&self, start: usize, end: usize) -> Result<usize> {
        let plan = self.plan_ranges(start, end)?;
        self.need_of(&plan, true, true)
    }

    /// Upper bound of the reserve nodes a [`Writer::clear`] of
    /// `[start, end)` takes; see [`Writer::store_need`].
    pub fn clear_need(&self, start: usize, end: usize) -> Result<usize> {
        let plan = self.plan_ranges(start, end)?;
        self.need_of(&plan, false, true)
    }

    /// Stores `value` for `[start, end)`, replacing whatever the tree held
    /// there (see the module documentation).  Never allocates.
    ///
    /// Fails, leaving the tree unchanged and giving the value back, with
    /// `EINVAL` if `start >= end` and `EAGAIN` if the reserve holds fewer
    /// than [`Writer::store_need`] nodes.  With balance parameters that
    /// are not proven, or a tree deeper than [`MAX_DEPTH`], a step may
    /// still fail (`EAGAIN`, `ERANGE`) after earlier steps took effect:
    /// the tree is then sound but holds the store half done.
    ///
    /// [`MAX_DEPTH`]: super::MAX_DEPTH
    pub fn store(
        &mut self,
        start: usize,
        end: usize,
        value: V,
    ) -> core::result::Result<(), InsertError<V>> {
        let fail = move |error| InsertError { error, value };
        let plan = self.plan_ranges(start, end).map_err(fail)?;
        self.check_reserve(&plan, true).map_err(fail)?;
        self.cut(&plan, start, end).map_err(fail)?;
        match plan.first {
            Some((s, e)) => {
                // The other covered ranges start in `[e, end)`.
                self.remove_within(e, end).map_err(fail)?;
                self.rewrite_at(s, (start, end), Some(value))
                    .map_err(fail)?;
                Ok(())
            }
            None => self.insert(start, end, value),
        }
    }

    /// Removes what the tree holds in `[start, end)`, trimming the ranges
    /// that reach outside it (see the module documentation).  Never
    /// allocates.
    ///
    /// Fails as [`Writer::store`] does; clearing a range that holds
    /// nothing succeeds and changes nothing.
    pub fn clear(&mut self, start: usize, end: usize) -> Result {
        let plan = self.plan_ranges(start, end)?;
        self.check_reserve(&plan, false)?;
        self.cut(&plan, start, end)?;
        self.remove_within(start, end)
    }

    /// Steps 1 and 2: trims the ranges that reach out of `[start, end)`.
    fn cut(&mut self, plan: &StorePlan, start: usize, end: usize) -> Result {
        if let Some((s, e)) = plan.left {
            let value = self.rewrite_at(s, (s, start), None)?;
            if plan.split {
                self.insert(end, e, value).map_err(Error::from)?;
            }
        }
        if let Some((s, e)) = plan.right {
            self.rewrite_at(s, (end, e), None)?;
        }
        Ok(())
    }

    /// Removes every range that starts in `[from, end)`; none may reach
    /// beyond `end`.
    fn remove_within(&mut self, from: usize, end: usize) -> Result {
        loop {
            let s = match self.find_from(from) {
                Some(e) if e.start >= from && e.start < end => e.start,
                _ => return Ok(()),
            };
            self.remove(s)?;
        }
    }

    /// Puts a node with range `range` in the place of the node of the
    /// range that starts at `at`, with the value `value` or, for `None`,
    /// a copy of the old one; returns the old value.
    ///
    /// The caller makes sure that the new range keeps the tree ordered at
    /// that place (see the module documentation).  Fails with `ENOENT` if
    /// no range starts at `at`, with `EAGAIN` if the reserve is empty,
    /// changing nothing.
    fn rewrite_at(&mut self, at: usize, range: (usize, usize), value: Option<V>) -> Result<V> {
        let mut parent = None;
        let mut cur = self.root();
        let n = loop {
            let Some(n) = cur else {
                return Err(ENOENT);
            };
            let dir = if at < n.start() {
                Dir::Left
            } else if at > n.start() {
                Dir::Right
            } else {
                break n;
            };
            parent = Some((n, dir));
            cur = n.child(dir);
        };
        let old = *n.value();
        let new = self
            .reserve
            .rewrite(
                n,
                range,
                value.unwrap_or(old),
                value.is_none(),
                self.retired,
                &self.key,
            )
            .map_err(|_| EAGAIN)?;
        let c = &self.tree.hot.0.counters;
        match parent {
            Some((p, dir)) => {
                p.set_child(dir, Some(new), &self.key);
                bump(&c.commits, 1);
            }
            None => {
                store_link(&self.tree.root.0, Some(new), &self.key);
                bump(&c.root_stores, 1);
            }
        }
        bump(&c.allocated, 1);
        bump(&c.retired, 1);
        Ok(old)
    }
}
