// SPDX-License-Identifier: GPL-2.0

//! Unit tests of the shared tree modules.

use kernel::alloc::fault;
use kernel::prelude::*;

use crate::host_rcu::NoReclaim;
use crate::host_tree::HostTree;
use crate::rng::Rng;
use crate::tree::{BalanceParams, CheckReport, NodeReserve, RetiredList, Tree, Writer, MAX_DEPTH};

const BOTH: [BalanceParams; 2] = [BalanceParams::HIRAI_YAMAMOTO, BalanceParams::PAPER];

/// A tree with its reserve and retired list, driven single-threaded.
struct Bare<V: Copy> {
    tree: Tree<V>,
    reserve: NodeReserve<V>,
    retired: RetiredList<V>,
}

impl<V: Copy> Bare<V> {
    fn new(params: BalanceParams) -> Self {
        Self {
            tree: Tree::with_params(params),
            reserve: NodeReserve::new(),
            retired: RetiredList::new(),
        }
    }

    fn w<R>(&mut self, f: impl FnOnce(&mut Writer<'_, V>) -> R) -> R {
        // SAFETY: `&mut self` serialises writers: this is the only one.
        let mut w = unsafe { self.tree.writer(&mut self.reserve, &mut self.retired) };
        f(&mut w)
    }

    fn fill(&mut self) {
        let n = self.tree.reserve_bound();
        self.reserve.fill(n, GFP_KERNEL).unwrap();
    }

    fn insert(&mut self, start: usize, end: usize, v: V) -> Result {
        self.fill();
        self.w(|w| w.insert(start, end, v).map_err(Error::from))
    }

    fn remove(&mut self, start: usize) -> Result {
        self.fill();
        self.w(|w| w.remove(start))
    }

    fn check(&mut self) -> CheckReport {
        self.w(|w| w.check()).expect("invariant violated")
    }

    fn ranges(&self) -> Vec<(usize, usize)> {
        self.tree
            .iter(&NoReclaim)
            .map(|e| (e.start, e.end))
            .collect()
    }

    fn reclaim(&mut self) {
        let list = core::mem::take(&mut self.retired);
        // SAFETY: single-threaded: no lookup is running.
        unsafe { list.free() };
    }
}

impl<V: Copy> Drop for Bare<V> {
    fn drop(&mut self) {
        self.reclaim();
    }
}

#[test]
fn empty_tree() {
    let mut t = Bare::<u32>::new(BalanceParams::default());
    let g = NoReclaim;
    assert!(t.tree.is_empty());
    assert!(t.tree.find(&g, 0).is_none());
    assert!(t.tree.find(&g, usize::MAX).is_none());
    assert!(t.tree.find_from(&g, 0).is_none());
    assert_eq!(t.tree.iter(&g).count(), 0);
    assert_eq!(t.remove(0), Err(ENOENT));
    assert_eq!(t.check(), CheckReport::default());
}

#[test]
fn rejects_empty_ranges() {
    let mut t = Bare::new(BalanceParams::default());
    assert_eq!(t.insert(5, 5, 0), Err(EINVAL));
    assert_eq!(t.insert(6, 5, 0), Err(EINVAL));
    assert_eq!(t.insert(usize::MAX, usize::MAX, 0), Err(EINVAL));
    assert!(t.tree.is_empty());
}

#[test]
fn rejects_overlaps() {
    let mut t = Bare::new(BalanceParams::default());
    t.insert(100, 200, 1).unwrap();
    for (s, e) in [
        (100, 200),
        (50, 101),
        (199, 300),
        (120, 130),
        (0, 1000),
        (150, 151),
    ] {
        let err = t.w(|w| w.insert(s, e, 9)).unwrap_err();
        assert_eq!(err.error, EEXIST, "[{s}, {e})");
        assert_eq!(err.value, 9);
    }
    // Adjacent ranges do not overlap.
    t.insert(50, 100, 2).unwrap();
    t.insert(200, 250, 3).unwrap();
    assert_eq!(t.ranges(), vec![(50, 100), (100, 200), (200, 250)]);
    t.check();
}

#[test]
fn boundaries() {
    let mut t = Bare::new(BalanceParams::default());
    let top = usize::MAX;
    t.insert(0, 1, 'a').unwrap();
    t.insert(top - 1, top, 'z').unwrap();
    t.insert(1 << 40, top - 1, 'm').unwrap();
    let g = NoReclaim;
    assert_eq!(*t.tree.find(&g, 0).unwrap().value, 'a');
    assert!(t.tree.find(&g, 1).is_none());
    assert_eq!(*t.tree.find(&g, top - 1).unwrap().value, 'z');
    assert_eq!(*t.tree.find(&g, top - 2).unwrap().value, 'm');
    // `end` is exclusive: the last address is never covered.
    assert!(t.tree.find(&g, top).is_none());
    assert!(t.tree.find_from(&g, top).is_none());
    assert_eq!(t.tree.find_from(&g, 1).unwrap().start, 1 << 40);
    assert_eq!(t.tree.find_from(&g, top - 1).unwrap().start, top - 1);
    assert_eq!(t.ranges(), vec![(0, 1), (1 << 40, top - 1), (top - 1, top)]);
    assert_eq!(t.insert(top - 1, top, 'x'), Err(EEXIST));
    t.remove(top - 1).unwrap();
    t.insert(top - 5, top, 'y').unwrap_err();
    t.remove(1 << 40).unwrap();
    t.insert(top - 5, top, 'y').unwrap();
    assert_eq!(*t.tree.find(&g, top - 1).unwrap().value, 'y');
    t.remove(0).unwrap();
    t.check();
}

#[test]
fn find_and_find_from() {
    let mut t = Bare::new(BalanceParams::default());
    for i in 0..100usize {
        t.insert(i * 10, i * 10 + 5, i).unwrap();
    }
    let g = NoReclaim;
    for a in 0..1000usize {
        let f = t.tree.find(&g, a).map(|e| *e.value);
        assert_eq!(f, (a % 10 < 5).then_some(a / 10), "find {a}");
        let n = t.tree.find_from(&g, a).map(|e| *e.value);
        let want = if a % 10 < 5 { a / 10 } else { a / 10 + 1 };
        assert_eq!(n, (want < 100).then_some(want), "find_from {a}");
    }
    let w = t.w(|w| w.find(42).map(|e| (e.start, e.end)));
    assert_eq!(w, Some((40, 45)));
    let n = t.w(|w| w.iter().count());
    assert_eq!(n, 100);
}

/// Removes `victim` from a tree holding `keys` and checks the rest.
fn remove_and_check(keys: &[usize], victim: usize) {
    for params in BOTH {
        let mut t = Bare::new(params);
        for &k in keys {
            t.insert(k, k + 1, k).unwrap();
        }
        t.check();
        t.remove(victim).unwrap();
        t.check();
        let mut want: Vec<_> = keys
            .iter()
            .filter(|&&k| k != victim)
            .map(|&k| (k, k + 1))
            .collect();
        want.sort();
        assert_eq!(t.ranges(), want);
        assert_eq!(t.remove(victim), Err(ENOENT));
    }
}

#[test]
fn remove_leaf_root_interior() {
    // 0..15 inserted in this order makes a perfect tree rooted at 7.
    let keys = [7, 3, 11, 1, 5, 9, 13, 0, 2, 4, 6, 8, 10, 12, 14];
    remove_and_check(&keys, 7); // root, two children
    remove_and_check(&keys, 3); // interior, successor one level down
    remove_and_check(&keys, 0); // leaf
    remove_and_check(&keys, 14); // leaf
    remove_and_check(&[1], 1); // only node
    remove_and_check(&[1, 2], 1); // root with one child
    remove_and_check(&[2, 1], 2);
    let seq: Vec<usize> = (0..200).collect();
    for v in [0, 1, 50, 100, 127, 199] {
        remove_and_check(&seq, v);
    }
}

#[test]
fn remove_everything_in_every_order() {
    for params in BOTH {
        let mut rng = Rng::new(7);
        for round in 0..50 {
            let mut t = Bare::new(params);
            let mut keys: Vec<usize> = (0..64).map(|i| i * 3).collect();
            rng.shuffle(&mut keys);
            for &k in &keys {
                t.insert(k, k + 2, k).unwrap();
                t.check();
            }
            rng.shuffle(&mut keys);
            for (i, &k) in keys.iter().enumerate() {
                t.remove(k).unwrap();
                let r = t.check();
                assert_eq!(r.len, keys.len() - i - 1, "round {round}");
            }
            assert!(t.tree.is_empty());
        }
    }
}

#[test]
fn short_reserve_is_eagain_and_changes_nothing() {
    let mut t = Bare::new(BalanceParams::default());
    for i in 0..20usize {
        t.insert(i * 2, i * 2 + 1, i).unwrap();
    }
    t.reserve.trim(0);
    let before = t.ranges();
    let need = t.w(|w| w.insert_need(100, 101)).unwrap();
    assert!(need >= 1);
    let e = t.w(|w| w.insert(100, 101, 77)).unwrap_err();
    assert_eq!((e.error, e.value), (EAGAIN, 77));
    let need = t.w(|w| w.remove_need(10)).unwrap();
    assert!(need >= 1, "node 10 has two children");
    assert_eq!(t.w(|w| w.remove(10)), Err(EAGAIN));
    assert_eq!(t.w(|w| w.remove_need(11)), Err(ENOENT));
    assert_eq!(t.ranges(), before);
    t.check();
    // The exact need is enough.
    t.reserve.fill(need, GFP_KERNEL).unwrap();
    t.w(|w| w.remove(10)).unwrap();
    t.check();
}

/// Rotations copy values: after heavy churn every range still carries the
/// value inserted with it, and nothing leaks once the tree is gone.
#[test]
fn values_survive_copies_and_nothing_leaks() {
    for params in BOTH {
        let live = fault::live();
        {
            let mut t = Bare::<(usize, u64)>::new(params);
            let mut rng = Rng::new(3);
            let mut present = std::collections::BTreeSet::new();
            for _ in 0..3000 {
                let k = rng.below(500) as usize;
                if present.contains(&k) {
                    t.remove(k).unwrap();
                    present.remove(&k);
                } else {
                    t.insert(k, k + 1, (k, !(k as u64))).unwrap();
                    present.insert(k);
                }
                if rng.below(10) == 0 {
                    t.reclaim();
                }
            }
            t.check();
            let s = t.tree.stats();
            assert_eq!(s.allocated - s.retired, t.tree.len(), "{s:?}");
            assert_eq!(s.skipped, 0);
            assert!(s.single_rotations + s.double_rotations > 0, "{s:?}");
            let got: Vec<_> = t
                .tree
                .iter(&NoReclaim)
                .map(|e| (e.start, *e.value))
                .collect();
            let want: Vec<_> = present.iter().map(|&k| (k, (k, !(k as u64)))).collect();
            assert_eq!(got, want);
        }
        assert_eq!(fault::live(), live, "leaked allocations");
    }
}

#[test]
fn allocation_failure_is_enomem_and_changes_nothing() {
    let live = fault::live();
    {
        let mut t = Bare::new(BalanceParams::default());
        for i in 0..100usize {
            t.insert(i * 4, i * 4 + 2, i).unwrap();
        }
        let before = t.ranges();
        let stats = t.tree.stats();
        for nth in 0..5 {
            // Empty the reserve so that the fill must allocate.
            t.reserve.trim(0);
            fault::fail_after(nth);
            let r = t.reserve.fill(t.tree.reserve_bound(), GFP_KERNEL);
            fault::clear();
            assert_eq!(r, Err(ENOMEM));
            assert_eq!(t.reserve.len(), nth as usize);
            assert_eq!(t.ranges(), before);
            assert_eq!(t.tree.stats(), stats);
            t.check();
        }
        // A reserve that failed to fill is still usable once refilled.
        t.insert(2, 3, 1000).unwrap();
        t.remove(2).unwrap();
        assert_eq!(t.ranges(), before);
    }
    assert_eq!(fault::live(), live, "leaked allocations");
}

#[test]
fn reserve_frees_unused_nodes() {
    let live = fault::live();
    let mut r = NodeReserve::<u64>::new();
    r.fill(10, GFP_KERNEL).unwrap();
    assert_eq!(r.len(), 10);
    assert_eq!(fault::live(), live + 10);
    r.fill(4, GFP_KERNEL).unwrap();
    assert_eq!(r.len(), 10);
    r.trim(3);
    assert_eq!(fault::live(), live + 3);
    drop(r);
    assert_eq!(fault::live(), live);
}

#[test]
fn retired_lists_append() {
    let mut t = Bare::new(BalanceParams::default());
    for i in 0..50usize {
        t.insert(i, i + 1, i).unwrap();
    }
    let mut all = core::mem::take(&mut t.retired);
    for i in 0..25usize {
        t.remove(i * 2).unwrap();
    }
    let n = all.len() + t.retired.len();
    all.append(&mut t.retired);
    assert_eq!(all.len(), n);
    assert!(t.retired.is_empty());
    // SAFETY: single-threaded: no lookup is running.
    unsafe { all.free() };
    t.check();
}

#[test]
fn sequential_inserts_stay_balanced() {
    for params in BOTH {
        let mut t = Bare::new(params);
        for i in 0..5000usize {
            t.insert(i, i + 1, ()).unwrap();
        }
        let r = t.check();
        let bound = params.max_height(5000, usize::MAX);
        assert!(r.height <= bound, "{params:?}: {r:?} > {bound}");
        for i in (0..5000usize).rev() {
            t.insert(10_000 + i, 10_001 + i, ()).unwrap();
        }
        t.check();
    }
}

#[test]
fn max_height_bounds() {
    let hy = BalanceParams::HIRAI_YAMAMOTO;
    assert_eq!(hy.max_height(0, 100), 0);
    assert_eq!(hy.max_height(1, 100), 1);
    assert_eq!(hy.max_height(2, 100), 2);
    assert_eq!(hy.max_height(3, 100), 3);
    assert_eq!(hy.max_height(4, 100), 3);
    assert_eq!(hy.max_height(usize::MAX, 7), 7);
    // The claim made in the documentation of `MAX_DEPTH`.
    assert!(hy.max_height(100_000_000, usize::MAX) <= MAX_DEPTH);
    let p = BalanceParams::PAPER;
    assert_eq!(p.max_height(2, 100), 2);
    assert_eq!(p.max_height(3, 100), 2);
    assert!(p.max_height(1_000_000, usize::MAX) > hy.max_height(1_000_000, usize::MAX));
}

/// An update records its path in a stack of [`MAX_DEPTH`] levels: a leaf
/// may go at depth `MAX_DEPTH + 1`, one level deeper fails with `ERANGE`
/// and changes nothing.
#[test]
fn paths_deeper_than_max_depth_are_erange() {
    // A delta this large never rebalances: ascending inserts make a list.
    let mut t = Bare::new(BalanceParams::custom(usize::MAX, 1, 1));
    for k in 0..=MAX_DEPTH {
        t.insert(k, k + 1, k).unwrap();
    }
    assert_eq!(t.check().height, MAX_DEPTH + 1);
    let before = t.ranges();
    t.fill();
    let (reserve, stats) = (t.reserve.len(), t.tree.stats());
    let e = t.w(|w| w.insert(1000, 1001, 7)).unwrap_err();
    assert_eq!((e.error, e.value), (ERANGE, 7));
    assert_eq!(t.w(|w| w.insert_need(1000, 1001)), Err(ERANGE));
    // A remove that misses goes as deep, and fails the same way rather
    // than with ENOENT.
    assert_eq!(t.w(|w| w.remove(1000)), Err(ERANGE));
    assert_eq!(t.ranges(), before);
    assert_eq!((t.reserve.len(), t.tree.stats()), (reserve, stats));
    // The deepest node is within reach: its path is the 64 above it.
    t.remove(MAX_DEPTH).unwrap();
    t.insert(MAX_DEPTH, MAX_DEPTH + 1, 0).unwrap();
    t.check();
}

/// The reserve bound the writer keeps up to date is the one its
/// definition gives for the current length, as the length grows and
/// shrinks across the heights' thresholds.
#[test]
fn reserve_bound_follows_the_length() {
    for params in [BOTH[0], BOTH[1], BalanceParams::custom(2, 1, 1)] {
        let want = |len: usize| 2 * params.max_height(2 * len + 16, MAX_DEPTH) + 1;
        let mut t = Bare::new(params);
        assert_eq!(t.tree.reserve_bound(), want(0), "{params:?}");
        let mut rng = Rng::new(8);
        let mut present = Vec::new();
        let mut bounds = std::collections::BTreeSet::new();
        for step in 0..6000 {
            // Grow to about 2000 ranges, then shrink to nothing.
            let grow = if step < 3000 {
                rng.below(4) != 0
            } else {
                rng.below(4) == 0
            };
            if grow || present.is_empty() {
                let k = rng.next_u64() as usize >> 2;
                if t.insert(k, k + 1, ()).is_ok() {
                    present.push(k);
                }
            } else {
                let k = present.swap_remove(rng.below(present.len() as u64) as usize);
                t.remove(k).unwrap();
            }
            let len = t.tree.len();
            assert_eq!(t.tree.reserve_bound(), want(len), "{params:?} len={len}");
            bounds.insert(t.tree.reserve_bound());
        }
        assert!(bounds.len() > 5, "too few thresholds crossed: {bounds:?}");
    }
}

#[test]
fn max_height_tables_match_the_recurrence() {
    let custom = BalanceParams::custom(3, 2, 0);
    let mut rng = Rng::new(5);
    for params in [BOTH[0], BOTH[1], custom] {
        let probe = |n: usize| {
            for cap in [0, 1, 2, 13, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 1000] {
                let slow = params.max_height_by_recurrence(n, cap);
                assert_eq!(
                    params.max_height(n, cap),
                    slow,
                    "{params:?} n={n} cap={cap}"
                );
            }
        };
        for n in 0..5000 {
            probe(n);
        }
        // Around every threshold, and sizes from every order of magnitude.
        for h in 1..=70 {
            // The fewest nodes of height `h`: binary search, the height
            // growing with the nodes.
            let (mut lo, mut hi) = (0usize, usize::MAX);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if params.max_height_by_recurrence(mid, usize::MAX) >= h {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            for n in [lo.saturating_sub(1), lo, lo.saturating_add(1)] {
                probe(n);
            }
        }
        for _ in 0..2000 {
            probe(rng.next_u64() as usize >> rng.below(64));
        }
        probe(usize::MAX);
    }
}

#[test]
fn insert_and_remove_need_cover_use() {
    // The need computed before an update bounds what it takes.
    for params in BOTH {
        let mut t = Bare::new(params);
        let mut rng = Rng::new(11);
        let mut present = std::collections::BTreeSet::new();
        for _ in 0..4000 {
            let k = rng.below(300) as usize;
            t.fill();
            let before = t.reserve.len();
            let need = if present.remove(&k) {
                let need = t.w(|w| w.remove_need(k)).unwrap();
                t.w(|w| w.remove(k)).unwrap();
                need
            } else {
                present.insert(k);
                let need = t.w(|w| w.insert_need(k, k + 1)).unwrap();
                t.w(|w| w.insert(k, k + 1, k)).unwrap();
                need
            };
            let used = before - t.reserve.len();
            assert!(used <= need, "used {used} > need {need}");
            assert!(need <= t.tree.reserve_bound().max(need));
        }
        t.check();
    }
}

#[test]
fn host_tree_wrapper() {
    let t = HostTree::default();
    for i in 0..1000usize {
        t.insert(i * 2, i * 2 + 1, i).unwrap();
    }
    assert_eq!(t.insert(0, 1, 0), Err(EEXIST));
    for i in 0..500usize {
        t.remove(i * 4).unwrap();
    }
    {
        let g = t.read();
        assert_eq!(t.tree().iter(&g).count(), 500);
        assert_eq!(*t.tree().find(&g, 2).unwrap().value, 1);
    }
    t.reclaim();
    assert_eq!(t.pending(), 0);
    t.update(|w| w.check().unwrap()).unwrap();
}

/// Range stores: `(start, end, value)` of every range, in order.
fn entries(t: &Bare<u32>) -> Vec<(usize, usize, u32)> {
    t.tree
        .iter(&NoReclaim)
        .map(|e| (e.start, e.end, *e.value))
        .collect()
}

impl Bare<u32> {
    /// The preallocation step, then the store: the reserve holds exactly
    /// what `store_need` asks, so an unsound bound fails the store.
    fn store(&mut self, start: usize, end: usize, v: u32) -> Result {
        let need = self.w(|w| w.store_need(start, end))?;
        self.reserve.trim(need);
        self.reserve.fill(need, GFP_KERNEL).unwrap();
        self.w(|w| w.store(start, end, v).map_err(Error::from))
    }

    fn clear(&mut self, start: usize, end: usize) -> Result {
        let need = self.w(|w| w.clear_need(start, end))?;
        self.reserve.trim(need);
        self.reserve.fill(need, GFP_KERNEL).unwrap();
        self.w(|w| w.clear(start, end))
    }
}

#[test]
fn store_overwrites_like_the_maple_tree() {
    for params in BOTH {
        let mut t = Bare::<u32>::new(params);
        t.store(10, 20, 1).unwrap();
        t.store(30, 40, 2).unwrap();
        t.store(50, 60, 3).unwrap();
        assert_eq!(entries(&t), [(10, 20, 1), (30, 40, 2), (50, 60, 3)]);
        // Trims on both sides.
        t.store(15, 35, 4).unwrap();
        assert_eq!(
            entries(&t),
            [(10, 15, 1), (15, 35, 4), (35, 40, 2), (50, 60, 3)]
        );
        // A split.
        t.store(52, 55, 5).unwrap();
        let want = [(10, 15, 1), (15, 35, 4), (35, 40, 2), (50, 52, 3)];
        assert_eq!(entries(&t)[..4], want);
        assert_eq!(entries(&t)[4..], [(52, 55, 5), (55, 60, 3)]);
        // Exactly over one range: rewritten in place.
        let before = t.tree.stats();
        t.store(15, 35, 6).unwrap();
        let after = t.tree.stats();
        assert_eq!(after.allocated - before.allocated, 1);
        assert_eq!(after.single_rotations, before.single_rotations);
        assert_eq!(entries(&t)[1], (15, 35, 6));
        // Over several ranges and the gaps between them, touching none
        // outside: the lowest is rewritten, the others removed.
        t.store(15, 52, 7).unwrap();
        assert_eq!(
            entries(&t),
            [(10, 15, 1), (15, 52, 7), (52, 55, 5), (55, 60, 3)]
        );
        // Into a gap.
        t.store(0, 10, 8).unwrap();
        t.store(60, 61, 9).unwrap();
        assert_eq!(entries(&t).len(), 6);
        t.check();
        // Clears: inside one range, across several, over nothing.
        t.clear(53, 54).unwrap();
        assert_eq!(entries(&t)[3..5], [(52, 53, 5), (54, 55, 5)]);
        t.clear(12, 58).unwrap();
        assert_eq!(
            entries(&t),
            [(0, 10, 8), (10, 12, 1), (58, 60, 3), (60, 61, 9)]
        );
        let before = t.tree.stats();
        assert_eq!(t.w(|w| w.clear_need(20, 50)), Ok(0));
        t.clear(20, 50).unwrap();
        assert_eq!(t.tree.stats(), before);
        // Everything.
        t.store(0, usize::MAX, 10).unwrap();
        assert_eq!(entries(&t), [(0, usize::MAX, 10)]);
        t.store(usize::MAX - 1, usize::MAX, 11).unwrap();
        t.store(0, 1, 12).unwrap();
        assert_eq!(
            entries(&t),
            [
                (0, 1, 12),
                (1, usize::MAX - 1, 10),
                (usize::MAX - 1, usize::MAX, 11)
            ]
        );
        t.clear(0, usize::MAX).unwrap();
        assert!(t.tree.is_empty());
        assert_eq!(t.check().len, 0);
        // Empty ranges.
        assert_eq!(t.store(5, 5, 0), Err(EINVAL));
        assert_eq!(t.clear(6, 5), Err(EINVAL));
    }
}

#[test]
fn store_short_reserve_is_eagain_and_changes_nothing() {
    let live = fault::live();
    for params in BOTH {
        let mut t = Bare::<u32>::new(params);
        let mut rng = Rng::new(5);
        for i in 0..300u32 {
            let s = rng.below(4000) as usize;
            t.store(s, s + 1 + rng.below(20) as usize, i).unwrap();
        }
        let mut stores = 0;
        for i in 0..300u32 {
            let s = rng.below(4000) as usize;
            let e = s + 1 + rng.below(if i % 3 == 0 { 400 } else { 30 }) as usize;
            let clear = i % 4 == 0;
            let need = if clear {
                t.w(|w| w.clear_need(s, e)).unwrap()
            } else {
                t.w(|w| w.store_need(s, e)).unwrap()
            };
            if need == 0 {
                continue;
            }
            let before = (entries(&t), t.tree.stats(), t.retired.len());
            t.reserve.trim(0);
            t.reserve.fill(need - 1, GFP_KERNEL).unwrap();
            if clear {
                assert_eq!(t.w(|w| w.clear(s, e)), Err(EAGAIN));
            } else {
                let err = t.w(|w| w.store(s, e, 1000 + i)).unwrap_err();
                assert_eq!((err.error, err.value), (EAGAIN, 1000 + i));
            }
            assert_eq!((entries(&t), t.tree.stats(), t.retired.len()), before);
            assert_eq!(t.reserve.len(), need - 1);
            t.check();
            // One more node is enough.
            t.reserve.fill(need, GFP_KERNEL).unwrap();
            if clear {
                t.w(|w| w.clear(s, e)).unwrap();
            } else {
                t.w(|w| w.store(s, e, i).map_err(Error::from)).unwrap();
                stores += 1;
            }
            t.check();
        }
        assert!(stores > 100);
        let s = t.tree.stats();
        assert_eq!(s.allocated - s.retired, t.tree.len(), "{s:?}");
    }
    assert_eq!(fault::live(), live, "leaked allocations");
}

#[test]
fn host_tree_stores() {
    let t = HostTree::default();
    for i in 0..100usize {
        t.store(i * 10, i * 10 + 10, i).unwrap();
    }
    t.store(5, 995, 1000).unwrap();
    t.clear(500, 600).unwrap();
    {
        let g = t.read();
        let got: Vec<_> = t.tree().iter(&g).map(|e| (e.start, e.end)).collect();
        assert_eq!(got, [(0, 5), (5, 500), (600, 995), (995, 1000)]);
        assert_eq!(*t.tree().find(&g, 700).unwrap().value, 1000);
        assert_eq!(*t.tree().find(&g, 996).unwrap().value, 99);
    }
    assert_eq!(t.store(3, 3, 0), Err(EINVAL));
    t.reclaim();
    t.update(|w| w.check().unwrap()).unwrap();
}

/// The preallocation asks for exactly what the common stores need: an
/// insert's or a remove's own plan, or one node for a rewrite.
#[test]
fn store_need_of_common_stores_is_the_plain_need() {
    let mut t = Bare::<u32>::new(BalanceParams::default());
    for i in 0..1000u32 {
        let s = i as usize * 10;
        t.store(s, s + 5, i).unwrap();
    }
    let bound = t.tree.reserve_bound();
    for i in 0..1000usize {
        let s = i * 10;
        // Into a gap.
        let need = t.w(|w| w.store_need(s + 6, s + 8)).unwrap();
        assert_eq!(Ok(need), t.w(|w| w.insert_need(s + 6, s + 8)));
        // Over exactly one range, or over one and the gap after it.
        assert_eq!(t.w(|w| w.store_need(s, s + 5)), Ok(1));
        assert_eq!(t.w(|w| w.store_need(s, s + 10)), Ok(1));
        // A clear of one range.
        let need = t.w(|w| w.clear_need(s, s + 5)).unwrap();
        assert_eq!(Ok(need), t.w(|w| w.remove_need(s)));
        // A trim: one node.
        assert_eq!(t.w(|w| w.clear_need(s + 4, s + 6)), Ok(1));
        // Two ranges: the plan of the first remove, the bound for the
        // second.
        if i + 1 < 1000 {
            let need = t.w(|w| w.clear_need(s, s + 15)).unwrap();
            let first = t.w(|w| w.remove_need(s)).unwrap();
            assert_eq!(need, first + bound);
        }
    }
    // The needs are enough.
    for i in (0..1000usize).step_by(7) {
        let s = i * 10;
        t.store(s + 6, s + 8, 1).unwrap();
        t.clear(s, s + 5).unwrap();
    }
    t.check();
}
