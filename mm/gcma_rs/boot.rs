// SPDX-License-Identifier: GPL-2.0

//! The areas that `reserve.c` reserved at boot.
//!
//! This module is the crate's only window onto C state; it copies what it
//! needs out of the C table (and hands its descriptor pointers to the calls
//! into `area.c`), so the rest of the crate deals in plain values.

use kernel::{
    bindings,
    mm::{numa, numa::NodeId, PAGE_SHIFT},
    str::CStr,
};

/// One reserved area, as `reserve.c` recorded it.
pub(crate) struct ReservedArea {
    area: *mut bindings::gcma_area,
}

impl ReservedArea {
    /// Returns the area's name, `gcma<N>`.
    pub(crate) fn name(&self) -> &'static CStr {
        // SAFETY: `reserve.c` fills `name` with `snprintf`, which always
        // NUL-terminates inside the array; the table lives forever.
        unsafe { CStr::from_char_ptr((*self.area).name.as_ptr()) }
    }

    /// Returns the physical address of the area.
    fn base(&self) -> u64 {
        // SAFETY: written during early boot only, before any Rust code.
        unsafe { (*self.area).base }
    }

    /// Returns the size of the area in bytes.
    fn size(&self) -> u64 {
        // SAFETY: as for `base`.
        unsafe { (*self.area).size }
    }

    /// Returns the page frame number of the area's first page.
    pub(crate) fn base_pfn(&self) -> usize {
        (self.base() >> PAGE_SHIFT) as usize
    }

    /// Returns the number of pages in the area.
    pub(crate) fn nr_pages(&self) -> usize {
        (self.size() >> PAGE_SHIFT) as usize
    }

    /// Returns the C descriptor, for the calls into `area.c`.
    pub(crate) fn as_ptr(&self) -> *mut bindings::gcma_area {
        self.area
    }

    /// Whether the area is also registered as a CMA area.
    pub(crate) fn has_cma(&self) -> bool {
        // SAFETY: `cma` is written during early boot only.
        !unsafe { (*self.area).cma }.is_null()
    }

    /// Returns the NUMA node of the area's first page.
    pub(crate) fn node(&self) -> Option<NodeId> {
        numa::node_of_pfn(self.base_pfn()).ok()
    }
}

/// Returns the areas reserved at boot, in command-line order.
pub(crate) fn reserved_areas() -> impl Iterator<Item = ReservedArea> {
    // SAFETY: FFI call without preconditions.
    let n = unsafe { bindings::gcma_nr_reserved_areas() };
    (0..n).filter_map(|i| {
        // SAFETY: FFI call; any index is allowed (NULL beyond the end).
        let ptr = unsafe { bindings::gcma_reserved_area(i) };
        // A non-NULL result points into a static table whose fields read
        // here are written only during early boot, before any Rust code.
        (!ptr.is_null()).then_some(ReservedArea { area: ptr })
    })
}
