// SPDX-License-Identifier: GPL-2.0

//! The decision against the model of mainline's `mprotect()`.

use crate::{
    decide::{decide, Decision, Neighbour, Reason, Request, Target},
    model::{self, Outcome, Prot, Vma, PAGE},
    vm, HostFlags,
};
use proptest::prelude::*;

/// `mmap(PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS)`'s flags.
const ANON: u64 = vm::VM_MAYREAD | vm::VM_MAYWRITE | vm::VM_MAYEXEC;

/// Flags a test VMA may carry besides its access bits, rarely.
const EXTRA: [u64; 15] = [
    vm::VM_ACCOUNT,
    vm::VM_NORESERVE,
    vm::VM_SOFTDIRTY,
    vm::VM_LOCKED_MASK,
    vm::VM_SHARED | vm::VM_MAYSHARE,
    vm::VM_HUGETLB,
    vm::VM_SPECIAL,
    vm::VM_MERGEABLE,
    vm::VM_UFFD_MISSING,
    vm::VM_GROWSDOWN,
    vm::VM_SEALED,
    vm::RSMM_VM_DROPPABLE,
    vm::RSMM_VM_FLAGS_CLEAR,
    vm::RSMM_VM_UFFD_MINOR,
    vm::RSMM_VM_SHADOW_STACK,
];

/// A VMA's flags: `base` (the may bits and `VM_ACCOUNT`, shared by the
/// VMAs of one space so that neighbours often match), random access bits
/// and, rarely, one flag of [`EXTRA`].
fn flags() -> impl Strategy<Value = (u64, Option<usize>)> {
    (
        prop::sample::select(vec![1u64, 3, 1, 3, 1, 3, 0, 2, 4, 5, 6, 7]),
        prop::option::weighted(0.15, 0..EXTRA.len()),
    )
}

fn base() -> impl Strategy<Value = u64> {
    (prop::bool::weighted(0.9), prop::bool::weighted(0.7)).prop_map(|(may, account)| {
        (if may { ANON } else { vm::VM_MAYREAD }) | if account { vm::VM_ACCOUNT } else { 0 }
    })
}

/// A VMA's attributes other than its range: (access, extra) flags,
/// anon_vma, its chain is singular, policy, name, userfaultfd context, has
/// `vm_ops`.
type Attrs = ((u64, Option<usize>), Option<u8>, bool, u8, u8, u8, bool);

/// A VMA's attributes other than its range.
fn attrs() -> impl Strategy<Value = Attrs> {
    (
        flags(),
        prop::option::weighted(0.7, prop::sample::select(vec![0u8, 0, 0, 1])),
        prop::bool::weighted(0.8),
        prop::sample::select(vec![0u8, 0, 0, 0, 0, 0, 0, 1]),
        prop::sample::select(vec![0u8, 0, 0, 0, 0, 0, 0, 1]),
        prop::sample::select(vec![0u8, 0, 0, 0, 0, 0, 0, 1]),
        prop::bool::weighted(0.1),
    )
}

/// An address space of 2 to 6 VMAs, mostly adjacent, mostly anonymous.
fn space() -> impl Strategy<Value = Vec<Vma>> {
    let vmas = (
        1usize..4,
        prop::bool::weighted(0.9),
        prop::bool::weighted(0.95),
        attrs(),
    );
    (base(), prop::collection::vec(vmas, 2..7)).prop_map(|(base, vmas)| {
        let mut addr = 0x1000 * PAGE;
        // Page offsets run on across gaps (as after mremap()), so that
        // only the addresses tell that two VMAs do not touch.
        let mut pgoff = addr / PAGE;
        let mut out = Vec::new();
        for (pages, adjacent, contiguous, attrs) in vmas {
            let ((access, extra), anon_vma, singular, policy, name, uffd, ops) = attrs;
            let flags = HostFlags(base | access | extra.map_or(0, |e| EXTRA[e]));
            if !adjacent {
                addr += PAGE;
            }
            let start = addr;
            addr += pages * PAGE;
            let file = ops.then_some(name);
            pgoff += pages;
            out.push(Vma {
                start,
                end: addr,
                flags,
                pgoff: pgoff + if contiguous { 0 } else { 1000 },
                anon_vma,
                chain_singular: anon_vma.is_some() && singular,
                policy,
                name,
                uffd_ctx: uffd,
                ops,
                close: ops && policy == 1,
                file,
            });
        }
        out
    })
}

fn prot() -> impl Strategy<Value = Prot> {
    (
        prop::sample::select(vec![1u8, 3, 1, 3, 1, 3, 0, 2, 4, 5, 6, 7]),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.1),
    )
        .prop_map(|(p, read_implies_exec, mdwe)| Prot {
            read: p & 1 != 0,
            write: p & 2 != 0,
            exec: p & 4 != 0,
            read_implies_exec,
            mdwe,
        })
}

fn request(v: &Vma, p: &Prot) -> Request {
    Request {
        start: v.start,
        end: v.end,
        read: p.read,
        write: p.write,
        exec: p.exec,
        grows: false,
        arch_bits: false,
        read_implies_exec: p.read_implies_exec,
        pkey: false,
        mdwe: p.mdwe,
    }
}

/// What the fast path reads under its hold: the VMA and its neighbours,
/// with everything but the neighbours' flags reduced to `compatible` (the
/// C side of phase 2 computes it with mainline's own tests).
fn inputs(
    space: &[Vma],
    i: usize,
) -> (
    Target<HostFlags>,
    Option<Neighbour<HostFlags>>,
    Option<Neighbour<HostFlags>>,
) {
    let v = &space[i];
    let target = Target {
        start: v.start,
        end: v.end,
        flags: v.flags,
        anonymous: v.anonymous(),
        has_anon_vma: v.anon_vma.is_some(),
        removable: !v.close,
    };
    let prev = i.checked_sub(1).map(|p| {
        let p = &space[p];
        Neighbour {
            flags: p.flags,
            adjacent: p.end == v.start,
            compatible: model::can_merge_after(p, v, p.flags),
        }
    });
    let next = space.get(i + 1).map(|n| Neighbour {
        flags: n.flags,
        adjacent: v.end == n.start,
        compatible: model::can_merge_before(n, v, n.flags),
    });
    (target, prev, next)
}

fn decide_at(space: &[Vma], i: usize, p: &Prot) -> Decision<HostFlags> {
    let (t, prev, next) = inputs(space, i);
    decide(
        &request(&space[i], p),
        Some(&t),
        prev.as_ref(),
        next.as_ref(),
    )
}

/// The flag a kind's reason stands for.
fn kind_flag(r: Reason) -> Option<u64> {
    Some(match r {
        Reason::Shared => vm::VM_SHARED | vm::VM_MAYSHARE,
        Reason::Hugetlb => vm::VM_HUGETLB,
        Reason::Special => vm::VM_SPECIAL,
        Reason::Locked => vm::VM_LOCKED_MASK,
        Reason::Uffd => vm::VM_UFFD_MISSING | vm::VM_UFFD_WP | vm::RSMM_VM_UFFD_MINOR,
        Reason::Ksm => vm::VM_MERGEABLE,
        Reason::Grows => vm::VM_GROWSDOWN | vm::VM_GROWSUP,
        Reason::Pkey => vm::RSMM_VM_FLAGS_CLEAR,
        Reason::ShadowStack => vm::RSMM_VM_SHADOW_STACK,
        Reason::Droppable => vm::RSMM_VM_DROPPABLE,
        Reason::Sealed => vm::VM_SEALED,
        _ => return None,
    })
}

/// Checks one decision against what mainline does; returns the space
/// after the call, as the fast path (or, on a fallback, mainline) leaves it.
fn check_one(space: &[Vma], i: usize, p: &Prot) -> Result<Vec<Vma>, TestCaseError> {
    let d = decide_at(space, i, p);
    let mut mainline = space.to_vec();
    let r = model::mprotect(&mut mainline, i, p);
    let old = space[i].flags;
    match d {
        Decision::Fast {
            flags,
            stat_class_changed,
        } => {
            prop_assert_eq!(
                r,
                Ok(Outcome::InPlace),
                "fast path where mainline does not change in place"
            );
            let mut fast = space.to_vec();
            fast[i].flags = flags;
            prop_assert_eq!(&fast, &mainline, "fast path differs from mainline");
            let class = |f: HostFlags| {
                (
                    f.0 & (vm::VM_WRITE | vm::VM_SHARED | vm::VM_STACK) == vm::VM_WRITE,
                    f.0 & (vm::VM_WRITE | vm::VM_EXEC | vm::VM_STACK) == vm::VM_EXEC,
                )
            };
            prop_assert_eq!(stat_class_changed, class(old) != class(flags));
            Ok(fast)
        }
        Decision::Unchanged => {
            prop_assert_eq!(r, Ok(Outcome::Unchanged));
            Ok(mainline)
        }
        Decision::Fallback(Reason::Merge) => {
            prop_assert_eq!(
                r,
                Ok(Outcome::Merged),
                "merge predicted, mainline did not merge"
            );
            Ok(mainline)
        }
        Decision::Fallback(Reason::Accounting) => {
            prop_assert!(r.is_ok());
            let v = mainline
                .iter()
                .find(|v| v.start <= space[i].start && space[i].start < v.end)
                .unwrap();
            prop_assert_ne!(v.flags.has(vm::VM_ACCOUNT), old.has(vm::VM_ACCOUNT));
            Ok(mainline)
        }
        Decision::Fallback(Reason::Denied) => {
            prop_assert_eq!(r, Err(model::Error::Access));
            Ok(mainline)
        }
        Decision::Fallback(Reason::NotAnonymous) => {
            prop_assert!(!space[i].anonymous());
            Ok(mainline)
        }
        Decision::Fallback(reason) => {
            let flag = kind_flag(reason);
            prop_assert!(flag.is_some(), "unexpected reason {:?}", reason);
            prop_assert!(
                old.has(flag.unwrap()),
                "{:?} without its flag: {:?}",
                reason,
                old
            );
            Ok(mainline)
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    /// Whenever the decision says "fast", mainline changes exactly the
    /// VMA's flags, to the same value; whenever mainline would merge, the
    /// decision says so; every other fallback names a flag the VMA has,
    /// an accounting change or a failing check.
    #[test]
    fn decision_matches_mainline(space in space(), i in 0usize..6, p in prot()) {
        let i = i % space.len();
        check_one(&space, i, &p)?;
    }

    /// A sequence of calls, each decided on the state the previous ones
    /// left (as the RCX update that commits a change decides it again on
    /// the neighbours it holds), ends in the layout mainline's sequence
    /// ends in.
    #[test]
    fn serial_calls_match_mainline(
        space in space(),
        calls in prop::collection::vec((0usize..6, prot()), 1..24),
    ) {
        let mut fast = space.clone();
        let mut mainline = space;
        for (i, p) in calls {
            if mainline.is_empty() {
                break;
            }
            let i = i % mainline.len();
            prop_assert_eq!(fast.len(), mainline.len());
            fast = check_one(&fast, i, &p)?;
            let _ = model::mprotect(&mut mainline, i, &p);
            prop_assert_eq!(&fast, &mainline);
        }
    }
}

fn rw() -> Prot {
    Prot {
        read: true,
        write: true,
        exec: false,
        read_implies_exec: false,
        mdwe: false,
    }
}

fn ro() -> Prot {
    Prot {
        write: false,
        ..rw()
    }
}

/// Two adjacent private anonymous VMAs that were written to, with flags
/// `a` and `b`.
fn pair(a: u64, b: u64) -> Vec<Vma> {
    let v = |start: usize, flags: u64| Vma {
        start,
        end: start + PAGE,
        flags: HostFlags(ANON | vm::VM_ACCOUNT | flags),
        pgoff: start / PAGE,
        anon_vma: Some((start / PAGE) as u8 & 1),
        chain_singular: true,
        policy: 0,
        name: 0,
        uffd_ctx: 0,
        ops: false,
        close: false,
        file: None,
    };
    vec![v(0x10000, a), v(0x10000 + PAGE, b)]
}

#[test]
fn range_reasons() {
    let s = pair(vm::VM_READ, vm::VM_READ | vm::VM_WRITE);
    let (t, prev, next) = inputs(&s, 0);
    let mut req = request(&s[0], &rw());
    req.end += PAGE;
    assert_eq!(
        decide(&req, Some(&t), prev.as_ref(), next.as_ref()),
        Decision::Fallback(Reason::Several)
    );
    req.end = s[0].end - PAGE / 2;
    req.start = s[0].start + PAGE / 2;
    assert_eq!(
        decide(&req, Some(&t), prev.as_ref(), next.as_ref()),
        Decision::Fallback(Reason::Partial)
    );
    req.start = s[0].end;
    assert_eq!(
        decide(&req, Some(&t), prev.as_ref(), next.as_ref()),
        Decision::Fallback(Reason::NoVma)
    );
    assert_eq!(
        decide::<HostFlags>(&req, None, None, None),
        Decision::Fallback(Reason::NoVma)
    );
    let mut req = request(&s[0], &rw());
    req.grows = true;
    assert_eq!(
        decide(&req, Some(&t), prev.as_ref(), next.as_ref()),
        Decision::Fallback(Reason::Grows)
    );
    req.grows = false;
    req.pkey = true;
    assert_eq!(
        decide(&req, Some(&t), prev.as_ref(), next.as_ref()),
        Decision::Fallback(Reason::Pkey)
    );
}

/// Two VMAs whose anon_vmas differ never merge: toggling both is all fast.
#[test]
fn toggles_of_unmergeable_neighbours_are_fast() {
    let s = pair(vm::VM_READ, vm::VM_READ | vm::VM_WRITE);
    assert!(matches!(
        decide_at(&s, 0, &rw()),
        Decision::Fast {
            stat_class_changed: true,
            ..
        }
    ));
    assert!(matches!(decide_at(&s, 1, &ro()), Decision::Fast { .. }));
    assert_eq!(decide_at(&s, 0, &ro()), Decision::Unchanged);
}

/// Why the commit decides again on the neighbours it holds: two calls
/// decided on the same old state are each fast, and committed together
/// they leave a layout that no order of mainline's calls gives.  Decided
/// one after the other, as RCX orders the commits of neighbours, the
/// second sees the first and merges.
#[test]
fn stale_decisions_differ_from_every_serial_order() {
    // Two VMAs split from one mapping (one anon_vma): they merge whenever
    // their flags are equal.  VMA 0 is read+exec, VMA 1 read+write.
    let mut u = pair(vm::VM_READ | vm::VM_EXEC, vm::VM_READ | vm::VM_WRITE);
    u[1].anon_vma = u[0].anon_vma;
    // Call A makes VMA 1 read-only, call B makes VMA 0 read-only.
    let a = decide_at(&u, 1, &ro());
    let b = decide_at(&u, 0, &ro());
    let (Decision::Fast { flags: fa, .. }, Decision::Fast { flags: fb, .. }) = (a, b) else {
        panic!("both fast on the old state: {a:?}, {b:?}");
    };
    let mut stale = u.clone();
    stale[1].flags = fa;
    stale[0].flags = fb;
    assert!(stale[0].flags.0 == stale[1].flags.0 && stale[0].end == stale[1].start);
    for order in [[1usize, 0], [0, 1]] {
        let mut m = u.clone();
        for i in order {
            let i = i.min(m.len() - 1);
            model::mprotect(&mut m, i, &ro()).unwrap();
        }
        assert_eq!(m.len(), 1, "mainline merges in either order");
    }
    // Decided after A's commit, B merges: the slow path does it.
    let mut after_a = u.clone();
    after_a[1].flags = fa;
    assert_eq!(
        decide_at(&after_a, 0, &ro()),
        Decision::Fallback(Reason::Merge)
    );
}

#[test]
fn reasons_have_distinct_names() {
    let mut names: Vec<_> = Reason::ALL.iter().map(|r| r.name()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), Reason::ALL.len());
    for (i, r) in Reason::ALL.iter().enumerate() {
        assert_eq!(*r as usize, i);
    }
}

/// The generators reach every outcome the properties check, often enough
/// for the properties to mean something.
#[test]
fn outcomes_are_covered() {
    use proptest::{strategy::ValueTree, test_runner::TestRunner};
    use std::collections::BTreeMap;

    let mut runner = TestRunner::deterministic();
    let strategy = (space(), 0usize..6, prot());
    let mut seen = BTreeMap::new();
    for _ in 0..4000 {
        let (space, i, p) = strategy.new_tree(&mut runner).unwrap().current();
        let key = match decide_at(&space, i % space.len(), &p) {
            Decision::Fast { .. } => "fast",
            Decision::Unchanged => "unchanged",
            Decision::Fallback(r) => r.name(),
        };
        *seen.entry(key).or_insert(0u32) += 1;
    }
    for key in [
        "fast",
        "unchanged",
        "merge",
        "accounting",
        "denied",
        "not_anonymous",
        "shared",
        "ksm",
    ] {
        let n = seen.get(key).copied().unwrap_or(0);
        assert!(n >= 10, "{key}: {n} of 4000 ({seen:?})");
    }
}
