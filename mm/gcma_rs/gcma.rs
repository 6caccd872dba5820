// SPDX-License-Identifier: GPL-2.0

//! GCMA: the guaranteed contiguous memory allocator.
//!
//! A GCMA area is reserved at boot (`gcma=<size>[@<base>]`, see
//! `reserve.c`) and owned by GCMA for good: the buddy allocator never sees
//! its pages.  Its primary clients allocate physically contiguous ranges of
//! any page count; its secondary clients borrow single pages whose contents
//! can be dropped at any time (clean page cache, write-through swap), so a
//! primary allocation reclaims them by discarding, never by migrating.
//!
//! Modules:
//!
//! - [`area_map`]: the two bitmaps of an area (primary-owned, lent to
//!   secondary clients) and the summary tree that keeps searches fast.  It
//!   has no kernel dependencies and also builds on the host
//!   (`tools/host/crates/gcma-core`).
//! - [`boot`]: the areas `reserve.c` set aside at boot.

use kernel::prelude::*;

// The client paths that use the rest of the map's interface (CMA routing,
// secondary lending) build on this crate; until then parts of it are used
// only by the tests.
#[allow(dead_code)]
mod area_map;
mod boot;

#[cfg(CONFIG_GCMA_KUNIT_TEST)]
mod tests;

/// Prefix of this crate's log lines (used by `pr_*!`).
const __LOG_PREFIX: &[u8] = b"gcma\0";

/// Sets up the allocator state of one reserved area and reports it.
fn init_area(area: &boot::ReservedArea) -> Result {
    let nr_pages = area.nr_pages();
    let words = area_map::bitmap_words(nr_pages);
    let summary = area_map::summary_words(nr_pages).ok_or(EINVAL)?;
    let zeroed = |n: usize| -> Result<KVec<usize>> { Ok(KVec::from_elem(0, n, GFP_KERNEL)?) };
    let map = area_map::AreaMap::new(nr_pages, zeroed(words)?, zeroed(words)?, zeroed(summary)?)?;
    pr_info!(
        "{}: {} pages from pfn {:#x}, node {}, {} free\n",
        area.name(),
        nr_pages,
        area.base_pfn(),
        area.node().map_or(-1, |n| n.as_u32() as i64),
        map.free()
    );
    Ok(())
}

/// Called by `reserve.c` at `subsys_initcall` time, once memory management
/// is up, to take over the areas reserved at boot.
///
/// An area whose state cannot be set up is reported and left reserved but
/// unused; the call itself always succeeds so that boot goes on.
#[no_mangle]
pub extern "C" fn gcma_rs_init() -> core::ffi::c_int {
    let mut ready = 0;
    for area in boot::reserved_areas() {
        match init_area(&area) {
            Ok(()) => ready += 1,
            Err(e) => pr_err!("{}: cannot set up the area: {:?}\n", area.name(), e),
        }
    }
    if ready > 0 {
        pr_info!("{} area(s) ready\n", ready);
    }
    0
}
