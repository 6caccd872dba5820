// SPDX-License-Identifier: GPL-2.0

//! The checks of a device-tree GCMA area: a `/reserved-memory` node that
//! is a reusable `shared-dma-pool` with the `guarantee` property.
//!
//! `of.c` reads the node's properties and the range the reserved-memory
//! code placed, checks that the range belongs to nobody else (that needs
//! memblock and the flattened tree), and asks here whether the node
//! itself makes a GCMA area, through `boot_params.rs`, which prints the
//! reason of a refusal.
//!
//! This module is pure: no kernel call, no allocation, no `unsafe`.  The
//! host tier compiles it unchanged (`tools/host/crates/gcma-core`) and
//! tests every rule.

use core::fmt;

/// What `of.c` found in a node.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OfNode<'a> {
    /// The node's full name, `<name>[@<unit address>]`.
    pub(crate) name: &'a [u8],
    /// The range the reserved-memory code placed: physical base and size.
    pub(crate) base: u64,
    pub(crate) size: u64,
    /// `reusable`: the pool's memory may be used by the kernel meanwhile.
    pub(crate) reusable: bool,
    /// `no-map`: the range is not in the kernel's linear map.
    pub(crate) no_map: bool,
    /// `linux,gcma-thp`: the area serves transparent huge pages only.
    pub(crate) thp: bool,
    /// `linux,cma-default`: the area is to be the default DMA area.
    pub(crate) dma_default: bool,
}

/// The properties of the running kernel that the checks depend on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OfLimits {
    /// `CMA_MIN_ALIGNMENT_BYTES`, a power of two: a device area's base and
    /// size are multiples of it.
    pub(crate) cma_align: u64,
    /// `PMD_SIZE`, a power of two: a THP area's base and size are
    /// multiples of it.
    pub(crate) pmd_size: u64,
    /// Whether the kernel is built with `CONFIG_GCMA_THP`.
    pub(crate) thp_built: bool,
    /// The longest area name, `GCMA_AREA_NAME_LEN - 1`.
    pub(crate) name_max: usize,
}

/// Why a node is refused.  Its `Display` is the reason the boot message
/// gives between "<node>: " and "; not reserved".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OfNodeError {
    /// Not `reusable`, or `no-map`: GCMA lends the pages, so they must be
    /// the kernel's.
    NotReusableMapped,
    /// `linux,gcma-thp` with `linux,cma-default`.
    ThpDefault,
    /// `linux,gcma-thp` in a kernel without `CONFIG_GCMA_THP`.
    ThpNotBuilt,
    /// Base or size not a multiple of the alignment the area needs.
    Unaligned {
        /// The range and the alignment, for the message.
        base: u64,
        size: u64,
        align: u64,
    },
    /// An empty name, or one longer than `max`.
    Name {
        /// The longest name, for the message.
        max: usize,
    },
}

impl fmt::Display for OfNodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            OfNodeError::NotReusableMapped => {
                f.write_str("a \"guarantee\" pool must be \"reusable\" and mapped (no \"no-map\")")
            }
            OfNodeError::ThpDefault => f.write_str(
                "\"linux,gcma-thp\" and \"linux,cma-default\" together: \
                 a THP area cannot serve devices",
            ),
            OfNodeError::ThpNotBuilt => f.write_str("\"linux,gcma-thp\" needs CONFIG_GCMA_THP"),
            // As C's `%pa` prints a 64-bit `phys_addr_t`.
            OfNodeError::Unaligned { base, size, align } => write!(
                f,
                "[{base:#018x}+{size:#018x}] is not aligned to {align:#018x} bytes"
            ),
            OfNodeError::Name { max } => write!(
                f,
                "an area's name (the node name before '@') has 1 to {max} characters"
            ),
        }
    }
}

/// Checks a node, and returns the length of the area's name: the node's
/// name up to its unit address.
pub(crate) fn check_of_node(node: &OfNode<'_>, limits: &OfLimits) -> Result<usize, OfNodeError> {
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
    if (node.base | node.size) & (align - 1) != 0 {
        return Err(OfNodeError::Unaligned {
            base: node.base,
            size: node.size,
            align,
        });
    }
    let len = node
        .name
        .iter()
        .position(|&c| c == b'@')
        .unwrap_or(node.name.len());
    if len == 0 || len > limits.name_max {
        return Err(OfNodeError::Name {
            max: limits.name_max,
        });
    }
    Ok(len)
}
