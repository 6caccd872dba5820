// SPDX-License-Identifier: GPL-2.0

//! Tests of the shared `of_node` module: the checks of a device-tree GCMA
//! area's node, with the messages the boot log gives.

use crate::of_node::{check_of_node, OfLimits, OfNode, OfNodeError};
use proptest::prelude::*;

/// arm64 with 4 KiB pages: pageblocks and PMDs of 2 MiB.
const ARM64: OfLimits = OfLimits {
    cma_align: 2 << 20,
    pmd_size: 2 << 20,
    thp_built: true,
    name_max: 15,
};

/// A kernel whose pageblocks (4 MiB) are larger than its PMDs (2 MiB), so
/// that a device area and a THP area need different alignments.
const BIG_PAGEBLOCK: OfLimits = OfLimits {
    cma_align: 4 << 20,
    ..ARM64
};

/// A node that makes an area: a 32 MiB reusable pool at 0x70000000.
fn good() -> OfNode<'static> {
    OfNode {
        name: b"gcma-cam@70000000",
        base: 0x7000_0000,
        size: 32 << 20,
        reusable: true,
        no_map: false,
        thp: false,
        dma_default: false,
    }
}

#[test]
fn fixed_cases() {
    let check = |n: OfNode<'_>| check_of_node(&n, &ARM64);
    assert_eq!(check(good()), Ok(8));
    assert_eq!(
        check(OfNode {
            name: b"gcma-dev",
            ..good()
        }),
        Ok(8)
    );
    assert_eq!(
        check(OfNode {
            reusable: false,
            ..good()
        }),
        Err(OfNodeError::NotReusableMapped)
    );
    assert_eq!(
        check(OfNode {
            no_map: true,
            ..good()
        }),
        Err(OfNodeError::NotReusableMapped)
    );
    let thp = OfNode {
        thp: true,
        ..good()
    };
    assert_eq!(check(thp), Ok(8));
    assert_eq!(
        check(OfNode {
            dma_default: true,
            ..thp
        }),
        Err(OfNodeError::ThpDefault)
    );
    let not_built = OfLimits {
        thp_built: false,
        ..ARM64
    };
    assert_eq!(
        check_of_node(&thp, &not_built),
        Err(OfNodeError::ThpNotBuilt)
    );
    // A device area needs CMA's alignment, a THP area the PMD size.
    let two_mib = OfNode {
        base: 0x7020_0000,
        size: 2 << 20,
        ..good()
    };
    assert_eq!(check(two_mib), Ok(8));
    assert_eq!(
        check(OfNode {
            base: 0x7010_0000,
            ..two_mib
        }),
        Err(OfNodeError::Unaligned {
            base: 0x7010_0000,
            size: 2 << 20,
            align: 2 << 20
        })
    );
    assert_eq!(
        check_of_node(&two_mib, &BIG_PAGEBLOCK),
        Err(OfNodeError::Unaligned {
            base: 0x7020_0000,
            size: 2 << 20,
            align: 4 << 20
        })
    );
    assert_eq!(
        check_of_node(
            &OfNode {
                thp: true,
                ..two_mib
            },
            &BIG_PAGEBLOCK
        ),
        Ok(8)
    );
    // Names: 1 to 15 bytes before the first '@'.
    let name = |n: &'static [u8]| check(OfNode { name: n, ..good() });
    assert_eq!(name(b"@70000000"), Err(OfNodeError::Name { max: 15 }));
    assert_eq!(name(b""), Err(OfNodeError::Name { max: 15 }));
    assert_eq!(name(b"fifteen-chars-x@1"), Ok(15));
    assert_eq!(
        name(b"sixteen-chars-xx@1"),
        Err(OfNodeError::Name { max: 15 })
    );
    assert_eq!(name(b"a@b@c"), Ok(1));
}

/// A node that breaks several rules is refused for the first of them, in
/// the order the C code checked them (which decides the boot message).
#[test]
fn first_rule_broken_is_reported() {
    let not_built = OfLimits {
        thp_built: false,
        ..ARM64
    };
    let misaligned = OfNode {
        base: 0x7000_1000,
        name: b"@1",
        ..good()
    };
    let check = |n: OfNode<'_>, l: &OfLimits| check_of_node(&n, l);
    assert_eq!(
        check(
            OfNode {
                no_map: true,
                thp: true,
                dma_default: true,
                ..misaligned
            },
            &not_built
        ),
        Err(OfNodeError::NotReusableMapped)
    );
    assert_eq!(
        check(
            OfNode {
                thp: true,
                dma_default: true,
                ..misaligned
            },
            &not_built
        ),
        Err(OfNodeError::ThpDefault)
    );
    assert_eq!(
        check(
            OfNode {
                thp: true,
                ..misaligned
            },
            &not_built
        ),
        Err(OfNodeError::ThpNotBuilt)
    );
    assert!(matches!(
        check(misaligned, &ARM64),
        Err(OfNodeError::Unaligned { .. })
    ));
    assert_eq!(
        check(
            OfNode {
                base: 0x7000_0000,
                ..misaligned
            },
            &ARM64
        ),
        Err(OfNodeError::Name { max: 15 })
    );
}

/// The messages are those of the C code they replace (`%pa` is 0x and 16
/// hex digits), which the arm64 scenario `gcma_of` and the documentation
/// quote.
#[test]
fn messages() {
    let msg = |e: OfNodeError| e.to_string();
    assert_eq!(
        msg(OfNodeError::NotReusableMapped),
        "a \"guarantee\" pool must be \"reusable\" and mapped (no \"no-map\")"
    );
    assert_eq!(
        msg(OfNodeError::ThpDefault),
        "\"linux,gcma-thp\" and \"linux,cma-default\" together: a THP area cannot serve devices"
    );
    assert_eq!(
        msg(OfNodeError::ThpNotBuilt),
        "\"linux,gcma-thp\" needs CONFIG_GCMA_THP"
    );
    assert_eq!(
        msg(OfNodeError::Unaligned {
            base: 0x7210_0000,
            size: 0x10_0000,
            align: 0x20_0000
        }),
        "[0x0000000072100000+0x0000000000100000] is not aligned to 0x0000000000200000 bytes"
    );
    assert_eq!(
        msg(OfNodeError::Name { max: 15 }),
        "an area's name (the node name before '@') has 1 to 15 characters"
    );
}

/// The result [`check_of_node`] must give, rule by rule in its order.
fn expected(node: &OfNode<'_>, limits: &OfLimits) -> Result<usize, OfNodeError> {
    if !node.reusable || node.no_map {
        return Err(OfNodeError::NotReusableMapped);
    }
    if node.thp && node.dma_default {
        return Err(OfNodeError::ThpDefault);
    }
    if node.thp && !limits.thp_built {
        return Err(OfNodeError::ThpNotBuilt);
    }
    let align = if node.thp {
        limits.pmd_size
    } else {
        limits.cma_align
    };
    if !node.base.is_multiple_of(align) || !node.size.is_multiple_of(align) {
        return Err(OfNodeError::Unaligned {
            base: node.base,
            size: node.size,
            align,
        });
    }
    let len = node
        .name
        .split(|&c| c == b'@')
        .next()
        .map_or(0, <[u8]>::len);
    if !(1..=limits.name_max).contains(&len) {
        return Err(OfNodeError::Name {
            max: limits.name_max,
        });
    }
    Ok(len)
}

/// A physical address or size: a multiple of 2 MiB half the time, else
/// any page (so that both sides of the alignment rules are seen).
fn placement() -> impl Strategy<Value = u64> {
    prop_oneof![
        (0u64..64).prop_map(|b| b << 21),
        (0u64..32768).prop_map(|p| p << 12)
    ]
}

proptest! {
    /// Every node gets exactly the result the rules give in their order:
    /// the length of the area's name, or the first rule it breaks.
    #[test]
    fn result_follows_the_rules(
        name in proptest::collection::vec(
            prop_oneof![3 => Just(b'a'), 1 => Just(b'@'), 1 => Just(b'-')],
            0..20,
        ),
        base in placement(),
        size in placement(),
        reusable in proptest::bool::weighted(0.9),
        no_map in proptest::bool::weighted(0.1),
        thp: bool,
        dma_default in proptest::bool::weighted(0.2),
        thp_built in proptest::bool::weighted(0.9),
        big_pageblock: bool,
    ) {
        let node = OfNode { name: &name, base, size, reusable, no_map, thp, dma_default };
        let limits = OfLimits {
            thp_built,
            ..if big_pageblock { BIG_PAGEBLOCK } else { ARM64 }
        };
        prop_assert_eq!(check_of_node(&node, &limits), expected(&node, &limits));
    }
}
