// SPDX-License-Identifier: GPL-2.0

//! Memory management: page geometry, contiguous buddy allocations, NUMA
//! node identifiers, address spaces and their VMAs, and zones and
//! pageblocks.
//!
//! C headers: [`include/linux/mm.h`](srctree/include/linux/mm.h),
//! [`include/linux/gfp.h`](srctree/include/linux/gfp.h),
//! [`include/linux/nodemask.h`](srctree/include/linux/nodemask.h),
//! [`include/linux/mmzone.h`](srctree/include/linux/mmzone.h)

pub mod buddy;
pub mod folio;
pub mod frames;
#[cfg(CONFIG_GCMA)]
pub mod gcma;
pub mod mempolicy;
mod mmap;
pub mod numa;
pub mod page_access;
pub mod virt;
pub mod zone;

pub use mmap::{Mm, MmWithUser, MmapReadGuard, MmapWriteLocked};

pub use crate::page::{PAGE_MASK, PAGE_SHIFT, PAGE_SIZE};

/// Largest order the buddy allocator hands out (`MAX_PAGE_ORDER`).
pub const MAX_PAGE_ORDER: u32 = crate::bindings::MAX_PAGE_ORDER;

/// Order of a PMD-sized (transparent huge) page: 9 with 4 KiB pages, i.e. 2 MiB.
#[cfg(not(CONFIG_ARM64))]
pub const PMD_ORDER: u32 = crate::bindings::PMD_SHIFT - crate::bindings::PAGE_SHIFT;

/// Order of a PMD-sized (transparent huge) page: 9 with 4 KiB pages, i.e. 2 MiB.
///
/// arm64's `PMD_SHIFT` is a function-like macro that bindgen cannot
/// evaluate; every level of its page tables translates `PAGE_SHIFT - 3`
/// bits (a page of 8-byte entries), so the order is that.
#[cfg(CONFIG_ARM64)]
pub const PMD_ORDER: u32 = crate::bindings::PAGE_SHIFT - 3;

/// Number of base pages in a block of the given order.
///
/// # Examples
///
/// ```
/// use kernel::mm;
///
/// assert_eq!(mm::pages_in_order(0), 1);
/// assert_eq!(mm::pages_in_order(mm::PMD_ORDER) * mm::PAGE_SIZE, 2 << 20);
/// ```
pub const fn pages_in_order(order: u32) -> usize {
    1usize << order
}
