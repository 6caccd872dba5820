// SPDX-License-Identifier: GPL-2.0

//! The areas that `reserve.c` reserved at boot.
//!
//! This module is the crate's only window onto the C table of areas: a
//! [`GcmaArea`] reads the fields fixed at boot, publishes the allocator
//! state of an area in service, and hands its descriptor pointer to the
//! calls into `area.c`.

use crate::Area;
use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::{
    bindings,
    mm::{numa, numa::NodeId, PAGE_SHIFT},
    str::CStr,
    types::Opaque,
};

/// One reserved area: the C descriptor `reserve.c` filled at boot.
///
/// Handed out only as `&'static GcmaArea`.
///
/// # Invariants
///
/// Wraps an entry of `reserve.c`'s static table of areas, which lives as
/// long as the kernel.  Its `name`, `base`, `size`, `cma` and `thp` are
/// written during early boot only, before any Rust code runs, and never
/// change afterwards; `name` is NUL-terminated inside its array.  `rs` is
/// NULL until [`GcmaArea::publish`] sets it, once, to a leaked [`Area`];
/// it is only accessed atomically.  The rest of the descriptor belongs to
/// `area.c` and is reached only through the calls that take
/// [`GcmaArea::as_ptr`].
#[repr(transparent)]
pub(crate) struct GcmaArea(Opaque<bindings::gcma_area>);

// SAFETY: the fields read from Rust never change after early boot (type
// invariant); everything else in the descriptor is protected by `area.c`'s
// own locks, whichever thread calls it.
unsafe impl Sync for GcmaArea {}
// SAFETY: as above; a `GcmaArea` is never moved (it is only borrowed).
unsafe impl Send for GcmaArea {}

impl GcmaArea {
    /// Returns the area's name, `gcma<N>`.
    pub(crate) fn name(&self) -> &'static CStr {
        // SAFETY: `name` is NUL-terminated inside its array and never
        // changes, and the table lives forever (type invariant).
        unsafe { CStr::from_char_ptr((*self.0.get()).name.as_ptr()) }
    }

    /// Returns the physical address of the area.
    fn base(&self) -> u64 {
        // SAFETY: written during early boot only (type invariant).
        unsafe { (*self.0.get()).base }
    }

    /// Returns the size of the area in bytes.
    fn size(&self) -> u64 {
        // SAFETY: as for `base`.
        unsafe { (*self.0.get()).size }
    }

    /// Returns the page frame number of the area's first page.
    pub(crate) fn base_pfn(&self) -> usize {
        (self.base() >> PAGE_SHIFT) as usize
    }

    /// Returns the number of pages in the area.
    pub(crate) fn nr_pages(&self) -> usize {
        (self.size() >> PAGE_SHIFT) as usize
    }

    /// The `rs` field, accessed atomically.
    fn rs(&self) -> &AtomicPtr<Area> {
        // SAFETY: `rs` is a pointer-sized, aligned field of a descriptor
        // that lives forever, only ever accessed atomically (type
        // invariant; C reads it with `smp_load_acquire()`).
        unsafe { AtomicPtr::from_ptr(core::ptr::addr_of_mut!((*self.0.get()).rs).cast()) }
    }

    /// Returns the allocator state of the area, if it is in service.
    pub(crate) fn state(&self) -> Option<&'static Area> {
        let p = self.rs().load(Ordering::Acquire);
        // SAFETY: a non-NULL `rs` is a leaked `Area` (type invariant).
        (!p.is_null()).then(|| unsafe { &*p })
    }

    /// Publishes `state` as the area's allocator state and puts the area
    /// in service.  The page allocator's free paths check the area's pfns
    /// first (no page of it can be freed before an allocation, which needs
    /// the state), then allocations may start, then the sysfs files
    /// appear (its debugfs files come once every area is in service,
    /// `crate::debugfs::init()`).  Called once per area, once the free path can find
    /// `state` by pfn ([`crate::area_of_pfn`]).
    pub(crate) fn publish(&'static self, state: &'static Area) {
        // SAFETY: the descriptor is ours.
        unsafe { bindings::gcma_area_check_frees(self.as_ptr()) };
        // INVARIANT: `state` is leaked, and this is the area's one
        // publication (`init_area()`'s contract).  Release: the pages are
        // ready before the area can be seen in service.
        self.rs()
            .store((state as *const Area).cast_mut(), Ordering::Release);
        crate::sysfs::add_area(self);
    }

    /// Returns the C descriptor, for the calls into `area.c`.
    pub(crate) fn as_ptr(&self) -> *mut bindings::gcma_area {
        self.0.get()
    }

    /// Whether the area is also registered as a CMA area.
    pub(crate) fn has_cma(&self) -> bool {
        // SAFETY: `cma` is written during early boot only (type invariant).
        !unsafe { (*self.0.get()).cma }.is_null()
    }

    /// Whether the area serves transparent huge pages only (`:thp`).
    pub(crate) fn is_thp(&self) -> bool {
        // SAFETY: `thp` is written during early boot only (type invariant).
        unsafe { (*self.0.get()).thp }
    }

    /// Returns the NUMA node of the area's first page.
    pub(crate) fn node(&self) -> Option<NodeId> {
        numa::node_of_pfn(self.base_pfn()).ok()
    }
}

/// Returns the areas reserved at boot, in command-line order.
pub(crate) fn reserved_areas() -> impl Iterator<Item = &'static GcmaArea> {
    // SAFETY: FFI call without preconditions.
    let n = unsafe { bindings::gcma_nr_reserved_areas() };
    (0..n).filter_map(|i| {
        // SAFETY: FFI call; any index is allowed (NULL beyond the end).
        let ptr = unsafe { bindings::gcma_reserved_area(i) };
        // SAFETY: a non-NULL result points into `reserve.c`'s static table
        // of areas, whose fields read from Rust are written only during
        // early boot, before any Rust code: the type invariant holds for
        // the rest of the kernel's life.  `GcmaArea` is a transparent
        // wrapper of the C struct.
        (!ptr.is_null()).then(|| unsafe { &*ptr.cast::<GcmaArea>() })
    })
}
