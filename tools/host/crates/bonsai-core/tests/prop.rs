// SPDX-License-Identifier: GPL-2.0

//! Differential test of the Bonsai tree against a `BTreeMap` model, with
//! the tree's invariants checked after every operation in debug builds.

#![cfg(not(loom))]

use std::collections::BTreeMap;

use bonsai_core::host_rcu::NoReclaim;
use bonsai_core::tree::{BalanceParams, NodeReserve, RetiredList, Tree};
use kernel::prelude::*;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Insert(usize, usize),
    Remove(usize),
    /// Removes the `n % len`-th range present.
    RemovePresent(usize),
    Find(usize),
    FindFrom(usize),
}

/// Addresses clustered near both ends of the address space.
fn addr() -> impl Strategy<Value = usize> {
    prop_oneof![
        4 => 0usize..256,
        1 => (usize::MAX - 64)..=usize::MAX,
        1 => any::<usize>(),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (addr(), 0usize..12).prop_map(|(s, l)| Op::Insert(s, s.saturating_add(l))),
        1 => addr().prop_map(Op::Remove),
        3 => any::<usize>().prop_map(Op::RemovePresent),
        1 => addr().prop_map(Op::Find),
        1 => addr().prop_map(Op::FindFrom),
    ]
}

fn params() -> impl Strategy<Value = BalanceParams> {
    prop_oneof![
        Just(BalanceParams::HIRAI_YAMAMOTO),
        Just(BalanceParams::PAPER)
    ]
}

/// The model: start -> (end, value).
type Model = BTreeMap<usize, (usize, u64)>;

fn model_find(m: &Model, a: usize) -> Option<(usize, usize, u64)> {
    let (&s, &(e, v)) = m.range(..=a).next_back()?;
    (a < e).then_some((s, e, v))
}

fn model_find_from(m: &Model, a: usize) -> Option<(usize, usize, u64)> {
    model_find(m, a).or_else(|| m.range(a..).next().map(|(&s, &(e, v))| (s, e, v)))
}

fn model_overlaps(m: &Model, s: usize, e: usize) -> bool {
    m.range(..e).next_back().is_some_and(|(_, &(pe, _))| pe > s)
}

fn run(params: BalanceParams, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let tree = Tree::with_params(params);
    let mut reserve = NodeReserve::new();
    let mut retired = RetiredList::new();
    let mut model = Model::new();
    let g = NoReclaim;
    for (i, op) in ops.into_iter().enumerate() {
        reserve.fill(tree.reserve_bound(), GFP_KERNEL).unwrap();
        // SAFETY: single-threaded test: this is the only writer.
        let mut w = unsafe { tree.writer(&mut reserve, &mut retired) };
        match op {
            Op::Insert(s, e) => {
                let got = w.insert(s, e, i as u64).map_err(|e| e.error);
                let want = if s >= e {
                    Err(EINVAL)
                } else if model_overlaps(&model, s, e) {
                    Err(EEXIST)
                } else {
                    model.insert(s, (e, i as u64));
                    Ok(())
                };
                prop_assert_eq!(got, want, "insert [{:#x}, {:#x})", s, e);
            }
            Op::Remove(s) => {
                let want = model.remove(&s).map(|_| ()).ok_or(ENOENT);
                prop_assert_eq!(w.remove(s), want, "remove {:#x}", s);
            }
            Op::RemovePresent(n) => {
                if !model.is_empty() {
                    let s = *model.keys().nth(n % model.len()).unwrap();
                    model.remove(&s);
                    prop_assert_eq!(w.remove(s), Ok(()), "remove {:#x}", s);
                }
            }
            Op::Find(a) => {
                let got = w.find(a).map(|e| (e.start, e.end, *e.value));
                prop_assert_eq!(got, model_find(&model, a));
                let got = tree.find(&g, a).map(|e| (e.start, e.end, *e.value));
                prop_assert_eq!(got, model_find(&model, a));
            }
            Op::FindFrom(a) => {
                let got = tree.find_from(&g, a).map(|e| (e.start, e.end, *e.value));
                prop_assert_eq!(got, model_find_from(&model, a));
            }
        }
        if cfg!(debug_assertions) {
            let report = w.check();
            prop_assert!(report.is_ok(), "{:?} after op {}", report, i);
            prop_assert_eq!(report.unwrap().len, model.len());
            let got: Vec<_> = w.iter().map(|e| (e.start, e.end, *e.value)).collect();
            let want: Vec<_> = model.iter().map(|(&s, &(e, v))| (s, e, v)).collect();
            prop_assert_eq!(got, want);
        }
        prop_assert_eq!(tree.stats().skipped, 0);
    }
    // SAFETY: single-threaded: no lookup is running.
    unsafe { retired.free() };
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(debug_assertions) { 256 } else { 1024 },
        ..ProptestConfig::default()
    })]

    #[test]
    fn matches_btreemap(params in params(), ops in prop::collection::vec(op(), 1..400)) {
        run(params, ops)?;
    }
}

/// Long random runs, beyond what shrinking-friendly cases reach.
#[test]
fn long_random_runs() {
    use bonsai_core::rng::Rng;
    for (seed, params) in [
        (1, BalanceParams::HIRAI_YAMAMOTO),
        (2, BalanceParams::PAPER),
        (3, BalanceParams::HIRAI_YAMAMOTO),
    ] {
        let mut rng = Rng::new(seed);
        let ops = (0..5000)
            .map(|_| {
                let s = rng.below(2000) as usize;
                match rng.below(10) {
                    0..=5 => Op::Insert(s, s + 1 + rng.below(8) as usize),
                    6..=8 => Op::RemovePresent(rng.next_u64() as usize),
                    _ => Op::Find(s),
                }
            })
            .collect();
        run(params, ops).unwrap();
    }
}

/// Range stores against a model of the maple tree's range store.
mod stores {
    use super::*;

    #[derive(Clone, Debug)]
    pub(super) enum StoreOp {
        Store(usize, usize),
        Clear(usize, usize),
        /// A store (`true`) or clear with a reserve `1 + n % need` nodes
        /// short of its need: must fail and change nothing.
        Short(bool, usize, usize, usize),
        /// A store (`true`) or clear with a reserve of exactly
        /// `store_bound()` nodes, the VMA index's preallocation: with
        /// proven parameters it must succeed, and the bound is at least
        /// either exact need; with others it may fail, changing nothing.
        Bounded(bool, usize, usize),
        /// A plain insert and remove on the same tree.
        Insert(usize, usize),
        RemovePresent(usize),
        Find(usize),
        FindFrom(usize),
    }

    /// Ranges from one address to a few dozen, now and then a long one
    /// that covers many.
    fn range() -> impl Strategy<Value = (usize, usize)> {
        let len = prop_oneof![8 => 1usize..24, 1 => 24usize..300, 1 => Just(usize::MAX)];
        (addr(), len).prop_map(|(s, l)| (s, s.saturating_add(l)))
    }

    pub(super) fn store_op() -> impl Strategy<Value = StoreOp> {
        prop_oneof![
            8 => range().prop_map(|(s, e)| StoreOp::Store(s, e)),
            2 => range().prop_map(|(s, e)| StoreOp::Clear(s, e)),
            1 => (any::<bool>(), range(), any::<usize>())
                .prop_map(|(st, (s, e), n)| StoreOp::Short(st, s, e, n)),
            2 => (any::<bool>(), range()).prop_map(|(st, (s, e))| StoreOp::Bounded(st, s, e)),
            2 => range().prop_map(|(s, e)| StoreOp::Insert(s, e)),
            1 => any::<usize>().prop_map(StoreOp::RemovePresent),
            1 => addr().prop_map(StoreOp::Find),
            1 => addr().prop_map(StoreOp::FindFrom),
        ]
    }

    /// The maple tree's store of `value` (`None`: erase) over
    /// `[s, e)`: every entry the range overlaps goes, its parts outside
    /// the range stay with its value, then the new entry goes in.
    fn model_store(m: &mut Model, s: usize, e: usize, value: Option<u64>) {
        let hit: Vec<_> = m
            .range(..e)
            .rev()
            .take_while(|(_, &(end, _))| end > s)
            .map(|(&a, &(b, v))| (a, b, v))
            .collect();
        for (a, b, v) in hit {
            m.remove(&a);
            if a < s {
                m.insert(a, (s, v));
            }
            if b > e {
                m.insert(e, (b, v));
            }
        }
        if let Some(v) = value {
            m.insert(s, (e, v));
        }
    }

    pub(super) fn run(params: BalanceParams, ops: Vec<StoreOp>) -> Result<(), TestCaseError> {
        let tree = Tree::with_params(params);
        let mut model = Model::new();
        run_on(&tree, &mut model, ops)
    }

    /// `ops` on `tree`, which holds what `model` does.
    pub(super) fn run_on(
        tree: &Tree<u64>,
        model: &mut Model,
        ops: Vec<StoreOp>,
    ) -> Result<(), TestCaseError> {
        let proven = tree.params().is_proven();
        let mut reserve = NodeReserve::new();
        let mut retired = RetiredList::new();
        let g = NoReclaim;
        for (i, op) in ops.into_iter().enumerate() {
            let v = i as u64;
            let need =
                |reserve: &mut NodeReserve<u64>, retired: &mut RetiredList<u64>, st, s, e| {
                    // SAFETY: single-threaded test: this is the only writer.
                    let w = unsafe { tree.writer(reserve, retired) };
                    if st {
                        w.store_need(s, e)
                    } else {
                        w.clear_need(s, e)
                    }
                };
            match op {
                StoreOp::Store(s, e) | StoreOp::Clear(s, e) => {
                    let st = matches!(op, StoreOp::Store(..));
                    let got = need(&mut reserve, &mut retired, st, s, e);
                    if s >= e {
                        prop_assert_eq!(got, Err(EINVAL));
                    }
                    // Exactly the need: a bound too low fails the store.
                    let n = got.unwrap_or(0);
                    reserve.trim(n);
                    reserve.fill(n, GFP_KERNEL).unwrap();
                    // SAFETY: single-threaded test: this is the only writer.
                    let mut w = unsafe { tree.writer(&mut reserve, &mut retired) };
                    let got = if st {
                        w.store(s, e, v).map_err(|e| e.error)
                    } else {
                        w.clear(s, e)
                    };
                    if s >= e {
                        prop_assert_eq!(got, Err(EINVAL));
                    } else {
                        prop_assert_eq!(got, Ok(()), "{:?} [{:#x}, {:#x})", op, s, e);
                        model_store(model, s, e, st.then_some(v));
                    }
                }
                StoreOp::Short(st, s, e, k) => {
                    let n = match need(&mut reserve, &mut retired, st, s, e) {
                        Ok(n) if n > 0 => n,
                        _ => continue,
                    };
                    reserve.trim(0);
                    reserve.fill(n - 1 - k % n, GFP_KERNEL).unwrap();
                    let stats = tree.stats();
                    // SAFETY: single-threaded test: this is the only writer.
                    let mut w = unsafe { tree.writer(&mut reserve, &mut retired) };
                    let got = if st {
                        w.store(s, e, v).map_err(|e| e.error)
                    } else {
                        w.clear(s, e)
                    };
                    prop_assert_eq!(got, Err(EAGAIN));
                    prop_assert_eq!(tree.stats(), stats);
                }
                StoreOp::Bounded(st, s, e) => {
                    // SAFETY: single-threaded test: this is the only writer.
                    let w = unsafe { tree.writer(&mut reserve, &mut retired) };
                    let bound = w.store_bound(s, e);
                    if s >= e {
                        prop_assert_eq!(bound, Err(EINVAL));
                        continue;
                    }
                    let bound = bound.unwrap();
                    let (sn, cn) = (w.store_need(s, e).unwrap(), w.clear_need(s, e).unwrap());
                    prop_assert!(
                        !proven || (bound >= sn && bound >= cn),
                        "bound {} below a need ({}, {}) for [{:#x}, {:#x})",
                        bound,
                        sn,
                        cn,
                        s,
                        e
                    );
                    reserve.trim(bound);
                    reserve.fill(bound, GFP_KERNEL).unwrap();
                    // SAFETY: single-threaded test: this is the only writer.
                    let mut w = unsafe { tree.writer(&mut reserve, &mut retired) };
                    let stats = tree.stats();
                    let got = if st {
                        w.store(s, e, v).map_err(|e| e.error)
                    } else {
                        w.clear(s, e)
                    };
                    if !proven && got == Err(EAGAIN) {
                        prop_assert_eq!(tree.stats(), stats);
                        continue;
                    }
                    prop_assert_eq!(got, Ok(()), "{:?} [{:#x}, {:#x})", op, s, e);
                    model_store(model, s, e, st.then_some(v));
                }
                StoreOp::Insert(s, e) => {
                    reserve.fill(tree.reserve_bound(), GFP_KERNEL).unwrap();
                    // SAFETY: single-threaded test: this is the only writer.
                    let mut w = unsafe { tree.writer(&mut reserve, &mut retired) };
                    let got = w.insert(s, e, v).map_err(|e| e.error);
                    let want = if s >= e {
                        Err(EINVAL)
                    } else if model_overlaps(model, s, e) {
                        Err(EEXIST)
                    } else {
                        model.insert(s, (e, v));
                        Ok(())
                    };
                    prop_assert_eq!(got, want, "insert [{:#x}, {:#x})", s, e);
                }
                StoreOp::RemovePresent(n) => {
                    if model.is_empty() {
                        continue;
                    }
                    let s = *model.keys().nth(n % model.len()).unwrap();
                    model.remove(&s);
                    reserve.fill(tree.reserve_bound(), GFP_KERNEL).unwrap();
                    // SAFETY: single-threaded test: this is the only writer.
                    let mut w = unsafe { tree.writer(&mut reserve, &mut retired) };
                    prop_assert_eq!(w.remove(s), Ok(()), "remove {:#x}", s);
                }
                StoreOp::Find(a) => {
                    let got = tree.find(&g, a).map(|e| (e.start, e.end, *e.value));
                    prop_assert_eq!(got, model_find(model, a));
                }
                StoreOp::FindFrom(a) => {
                    let got = tree.find_from(&g, a).map(|e| (e.start, e.end, *e.value));
                    prop_assert_eq!(got, model_find_from(model, a));
                }
            }
            // SAFETY: single-threaded test: this is the only writer.
            let w = unsafe { tree.writer(&mut reserve, &mut retired) };
            let report = w.check();
            prop_assert!(report.is_ok(), "{:?} after op {}", report, i);
            let got: Vec<_> = w.iter().map(|e| (e.start, e.end, *e.value)).collect();
            let want: Vec<_> = model.iter().map(|(&s, &(e, v))| (s, e, v)).collect();
            prop_assert_eq!(got, want, "after op {}", i);
            prop_assert_eq!(tree.stats().skipped, 0);
        }
        // SAFETY: single-threaded: no lookup is running.
        unsafe { retired.free() };
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(debug_assertions) { 256 } else { 1024 },
        ..ProptestConfig::default()
    })]

    #[test]
    fn stores_match_maple_model(
        params in params(),
        ops in prop::collection::vec(stores::store_op(), 1..300),
    ) {
        stores::run(params, ops)?;
    }
}

/// Long random store runs over a small address space, where stores
/// overlap often and the tree holds hundreds of ranges.
#[test]
fn long_random_store_runs() {
    use bonsai_core::rng::Rng;
    use stores::StoreOp;
    for (seed, params) in [
        (4, BalanceParams::HIRAI_YAMAMOTO),
        (5, BalanceParams::PAPER),
    ] {
        let mut rng = Rng::new(seed);
        let ops = (0..4000)
            .map(|_| {
                let s = rng.below(3000) as usize;
                let len = if rng.below(20) == 0 {
                    1 + rng.below(600)
                } else {
                    1 + rng.below(12)
                } as usize;
                match rng.below(13) {
                    0..=6 => StoreOp::Store(s, s + len),
                    7 | 8 => StoreOp::Clear(s, s + len),
                    9 => StoreOp::Insert(s, s + len),
                    10 => StoreOp::RemovePresent(rng.next_u64() as usize),
                    11 => StoreOp::Bounded(rng.below(2) == 0, s, s + len),
                    _ => StoreOp::Short(rng.below(2) == 0, s, s + len, rng.next_u64() as usize),
                }
            })
            .collect();
        stores::run(params, ops).unwrap();
    }
}

/// Sorted, disjoint ranges: `n` gaps and lengths, laid out upwards.
fn sorted_ranges() -> impl Strategy<Value = Vec<(usize, usize, u64)>> {
    prop::collection::vec((0usize..5, 1usize..40), 0..700).prop_map(|v| {
        let mut at = 0usize;
        v.into_iter()
            .enumerate()
            .map(|(i, (gap, len))| {
                let s = at + gap;
                at = s + len;
                (s, at, i as u64)
            })
            .collect()
    })
}

mod build {
    use super::*;

    /// A tree built from `ranges` in one go must hold them all, pass the
    /// invariant check (balance included), take exactly one node per
    /// range, and then take random range stores as a tree built by
    /// inserts does.
    pub(super) fn run(
        params: BalanceParams,
        ranges: Vec<(usize, usize, u64)>,
        stores: Vec<stores::StoreOp>,
    ) -> Result<(), TestCaseError> {
        let tree = Tree::with_params(params);
        let mut reserve = NodeReserve::new();
        let mut retired = RetiredList::new();
        let n = ranges.len();
        reserve.fill(n + 5, GFP_KERNEL).unwrap();
        {
            // SAFETY: single-threaded test: this is the only writer.
            let mut w = unsafe { tree.writer(&mut reserve, &mut retired) };
            prop_assert_eq!(w.build_sorted(&ranges), Ok(()));
            prop_assert_eq!(w.reserve_len(), 5);
            let report = w.check();
            prop_assert!(report.is_ok(), "{:?}", report);
            let got: Vec<_> = w.iter().map(|e| (e.start, e.end, *e.value)).collect();
            prop_assert_eq!(got, ranges.clone());
            if n > 0 {
                // Not on a tree that holds ranges already.
                prop_assert_eq!(w.build_sorted(&ranges), Err(EEXIST));
            }
        }
        prop_assert_eq!(tree.len(), n);
        prop_assert_eq!(retired.len(), 0);
        // SAFETY: single-threaded: no lookup is running.
        unsafe { retired.free() };
        let mut model = ranges
            .iter()
            .map(|&(s, e, v)| (s, (e, v)))
            .collect::<BTreeMap<_, _>>();
        stores::run_on(&tree, &mut model, stores)
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(debug_assertions) { 128 } else { 512 },
        ..ProptestConfig::default()
    })]

    #[test]
    fn built_tree_matches_inserted(
        params in params(),
        ranges in sorted_ranges(),
        ops in prop::collection::vec(stores::store_op(), 0..60),
    ) {
        build::run(params, ranges, ops)?;
    }
}

/// What build_sorted refuses, changing nothing.
#[test]
fn build_sorted_refuses() {
    let tree = Tree::<u64>::new();
    let mut reserve = NodeReserve::new();
    let mut retired = RetiredList::new();
    reserve.fill(8, GFP_KERNEL).unwrap();
    // SAFETY: single-threaded test: this is the only writer.
    let mut w = unsafe { tree.writer(&mut reserve, &mut retired) };
    assert_eq!(w.build_sorted(&[(5, 5, 0)]), Err(EINVAL));
    assert_eq!(w.build_sorted(&[(1, 4, 0), (3, 6, 1)]), Err(EINVAL));
    assert_eq!(w.build_sorted(&[(4, 6, 0), (1, 2, 1)]), Err(EINVAL));
    let many: Vec<_> = (0..9).map(|i| (2 * i, 2 * i + 1, i as u64)).collect();
    assert_eq!(w.build_sorted(&many), Err(EAGAIN));
    assert_eq!(w.reserve_len(), 8);
    assert_eq!(w.build_sorted(&[]), Ok(()));
    assert_eq!(w.iter().count(), 0);
    // Adjacent ranges are fine.
    assert_eq!(w.build_sorted(&[(1, 4, 0), (4, 6, 1)]), Ok(()));
    assert_eq!(w.reserve_len(), 6);
    assert!(w.check().is_ok());
    // A delta below 2 would not accept siblings one node apart.
    let strict = Tree::<u64>::with_params(BalanceParams::custom(1, 2, 1));
    // SAFETY: single-threaded test: this is the only writer.
    let mut w = unsafe { strict.writer(&mut reserve, &mut retired) };
    assert_eq!(w.build_sorted(&[(1, 4, 0), (4, 6, 1)]), Err(EINVAL));
    assert_eq!(w.reserve_len(), 6);
}
