// SPDX-License-Identifier: GPL-2.0

//! Host version of `kernel::alloc`: allocation flags, [`AllocError`] and
//! the [`KBox`] owning pointer, with the kernel's signatures.
//!
//! Allocations go to the host heap.  The host-only [`fault`] module counts
//! them per thread and can make a chosen allocation fail, so tests can
//! check the `ENOMEM` paths and look for leaks.

pub mod fault;
#[allow(unsafe_code)]
pub mod kbox;

pub use self::kbox::{Box, KBox, KVBox, VBox};

/// Indicates an allocation error.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct AllocError;

impl From<AllocError> for crate::error::Error {
    fn from(_: AllocError) -> Self {
        crate::error::code::ENOMEM
    }
}

/// Flags to be used when allocating memory, as in the kernel.
///
/// The host ignores them apart from carrying them through, and the
/// memory-reserve rule of [`fault::only_reserves_left`].
#[derive(Clone, Copy, PartialEq)]
pub struct Flags(u32);

impl Flags {
    /// Get the raw representation of this flag.
    pub fn as_raw(self) -> u32 {
        self.0
    }

    /// Check whether `flags` is contained in `self`.
    pub fn contains(self, flags: Flags) -> bool {
        (self & flags) == flags
    }
}

impl core::ops::BitOr for Flags {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self::Output {
        Self(self.0 | rhs.0)
    }
}

impl core::ops::BitAnd for Flags {
    type Output = Self;
    fn bitand(self, rhs: Self) -> Self::Output {
        Self(self.0 & rhs.0)
    }
}

impl core::ops::Not for Flags {
    type Output = Self;
    fn not(self) -> Self::Output {
        Self(!self.0)
    }
}

impl core::fmt::Debug for Flags {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Flags({:#x})", self.0)
    }
}

/// Allocation flags, with distinct (not the kernel's) bit values.
pub mod flags {
    use super::Flags;

    /// Zeroes out the allocated memory.
    pub const __GFP_ZERO: Flags = Flags(1 << 0);
    /// Allocate memory from the high memory zone.
    pub const __GFP_HIGHMEM: Flags = Flags(1 << 1);
    /// Suppress allocation failure reports.
    pub const __GFP_NOWARN: Flags = Flags(1 << 2);
    /// Users cannot sleep and need the allocation to succeed.
    pub const GFP_ATOMIC: Flags = Flags(1 << 3);
    /// Typical for kernel-internal allocations; may sleep.
    pub const GFP_KERNEL: Flags = Flags(1 << 4);
    /// `GFP_KERNEL` accounted to the memory cgroup.
    pub const GFP_KERNEL_ACCOUNT: Flags = Flags(1 << 4 | 1 << 5);
    /// For allocations that must not sleep nor dip into reserves.
    pub const GFP_NOWAIT: Flags = Flags(1 << 6);
    /// Never use the memory reserves, even in reclaim.
    pub const __GFP_NOMEMALLOC: Flags = Flags(1 << 7);
}
