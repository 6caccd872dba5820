// SPDX-License-Identifier: GPL-2.0

//! Tests of the shared `of_node` module: the checks of a device-tree GCMA
//! area's node, with the messages the boot log gives.

use crate::of_node::{check_of_node, OfLimits, OfNode, OfNodeError};
use proptest::prelude::*;

const ARM64: OfLimits = OfLimits {
    cma_align: 4 << 20,
    pmd_size: 2 << 20,
    thp_built: true,
    name_max: 15,
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
    assert_eq!(
        check_of_node(
            &thp,
            &OfLimits {
                thp_built: false,
                ..ARM64
            }
        ),
        Err(OfNodeError::ThpNotBuilt)
    );
    // A device area needs CMA's alignment, a THP area the PMD size.
    let two_mib = OfNode {
        base: 0x7020_0000,
        size: 2 << 20,
        ..good()
    };
    assert_eq!(
        check(two_mib),
        Err(OfNodeError::Unaligned {
            base: 0x7020_0000,
            size: 2 << 20,
            align: 4 << 20
        })
    );
    assert_eq!(
        check(OfNode {
            thp: true,
            ..two_mib
        }),
        Ok(8)
    );
    // Names: 1 to 15 bytes before '@'.
    assert_eq!(
        check(OfNode {
            name: b"@70000000",
            ..good()
        }),
        Err(OfNodeError::Name { max: 15 })
    );
    assert_eq!(
        check(OfNode {
            name: b"",
            ..good()
        }),
        Err(OfNodeError::Name { max: 15 })
    );
    assert_eq!(
        check(OfNode {
            name: b"fifteen-chars-x@1",
            ..good()
        }),
        Ok(15)
    );
    assert_eq!(
        check(OfNode {
            name: b"sixteen-chars-xx@1",
            ..good()
        }),
        Err(OfNodeError::Name { max: 15 })
    );
    assert_eq!(
        check(OfNode {
            name: b"a@b@c",
            ..good()
        }),
        Ok(1)
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

proptest! {
    /// Every node taken is reusable, mapped, aligned as its kind needs, a
    /// THP area only where THP is built and never the default DMA area, and
    /// its name is the node's up to the first '@', 1 to 15 bytes; every
    /// node refused breaks one of these rules.
    #[test]
    fn taken_exactly_when_the_rules_hold(
        name in proptest::collection::vec(prop_oneof![Just(b'@'), Just(b'a'), Just(b'-')], 0..20),
        base_pages in 0u64..4096,
        size_pages in 0u64..4096,
        reusable: bool,
        no_map: bool,
        thp: bool,
        dma_default: bool,
        thp_built: bool,
    ) {
        let node = OfNode {
            name: &name,
            base: base_pages << 12,
            size: size_pages << 12,
            reusable,
            no_map,
            thp,
            dma_default,
        };
        let limits = OfLimits { thp_built, ..ARM64 };
        let len = name.iter().position(|&c| c == b'@').unwrap_or(name.len());
        let align = if thp { limits.pmd_size } else { limits.cma_align };
        let ok = reusable
            && !no_map
            && !(thp && dma_default)
            && (!thp || thp_built)
            && node.base % align == 0
            && node.size % align == 0
            && (1..=15).contains(&len);
        match check_of_node(&node, &limits) {
            Ok(n) => {
                prop_assert!(ok);
                prop_assert_eq!(n, len);
            }
            Err(_) => prop_assert!(!ok),
        }
    }
}
