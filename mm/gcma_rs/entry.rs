// SPDX-License-Identifier: GPL-2.0

//! The functions C calls into the allocator (`include/linux/gcma.h`).
//!
//! A contiguous allocation enters Rust once, at `gcma_alloc_gfp_noprof()`,
//! and comes back with its pages prepared: the search, the discard of lent
//! pages (DMEM) and the page allocator's allocation steps all run in Rust.
//! What it calls back into C is one-line: the page allocator's steps
//! (`rust/helpers/mm.c`), the clock, and the tracepoints and messages of
//! `area.c`.  A release enters at `gcma_release()`, and the page
//! allocator's free paths at `__gcma_free_page()`.

use crate::{area_in_pfn_range, area_of_pfn, boot::GcmaArea, Area, LAT_BUCKETS};
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::{
    bindings,
    delay::MaySleep,
    ffi::{c_uint, c_ulong},
    mm::{frames::GFP_COMP, pages_in_order},
    prelude::*,
    processor::{in_task, local_clock_ns, might_sleep},
};

/// Returns the state of the area `area` describes, if it is in service.
///
/// # Safety
///
/// `area` must be NULL or point to a descriptor of `reserve.c`'s table.
unsafe fn state_of(area: *mut bindings::gcma_area) -> Option<&'static Area> {
    if area.is_null() {
        return None;
    }
    // SAFETY: a descriptor of the table lives forever and its boot-time
    // fields are fixed (the caller's contract and `GcmaArea`'s invariant);
    // `GcmaArea` is a transparent wrapper of it.
    let c = unsafe { &*area.cast::<GcmaArea>() };
    c.state()
}

/// The time since `t0` in nanoseconds, from the CPU-local clock (cheap on
/// every machine, where `ktime_get_ns()` may read a slow clocksource such
/// as the HPET).  The caller may have moved to another CPU meanwhile: a
/// negative difference counts as 0.
fn ns_since(t0: u64) -> u64 {
    local_clock_ns().saturating_sub(t0)
}

impl Area {
    /// Allocates `count` pages aligned to `1 << align` pages and gives them
    /// the state of an allocation with `gfp`; see `gcma_alloc_gfp_noprof()`.
    /// Returns the first page, or NULL.  May sleep, which `ctx` allows.
    pub(crate) fn alloc_pages(
        &self,
        ctx: &MaySleep,
        count: usize,
        mut align: u32,
        mut gfp: bindings::gfp_t,
    ) -> *mut bindings::page {
        might_sleep();
        if count == 0 {
            return core::ptr::null_mut();
        }
        self.drain_returned();
        if count == 1 {
            // An order-0 page is never compound.
            gfp &= !GFP_COMP;
        }
        if gfp & GFP_COMP != 0 {
            if !count.is_power_of_two() {
                // SAFETY: the descriptor is the area's.
                unsafe { bindings::gcma_warn_compound_count(self.c.as_ptr(), count as _) };
                return core::ptr::null_mut();
            }
            align = align.max(count.ilog2());
        }
        // SAFETY: the descriptor is the area's.
        unsafe { bindings::gcma_trace_alloc_start(self.c.as_ptr(), count as _, align) };
        let t0 = local_clock_ns();
        let (page, ret) = match self.alloc(ctx, count, align, gfp) {
            Ok(page) => (page, 0),
            Err(e) => (core::ptr::null_mut(), e.to_errno()),
        };
        let ns = ns_since(t0);
        let bucket = if ns == 0 { 0 } else { ns.ilog2() as usize };
        self.lat[bucket.min(LAT_BUCKETS - 1)].fetch_add(1, Ordering::Relaxed);
        // SAFETY: the descriptor is the area's; `page` is NULL or the
        // allocation's first page.
        unsafe {
            bindings::gcma_alloc_done(self.c.as_ptr(), page, count as _, align, ret, ns, gfp)
        };
        page
    }
}

/// Allocates contiguous pages from a GCMA area (`include/linux/gcma.h`).
///
/// `count` pages whose first page frame number is a multiple of
/// `1 << align`, with `gfp` passed to the page allocator's allocation steps
/// (`__GFP_ZERO` and `init_on_alloc` zero the pages, `__GFP_NOWARN` is
/// honoured; with `__GFP_COMP` the count must be a power of two, and the
/// pages form one compound page aligned to its size).  Pages lent to
/// secondary clients in the range are discarded first.  The caller's
/// allocation tag counts the pages (`gcma_alloc_gfp()` sets one).
///
/// Returns the first page, or NULL if `count` is 0, the area is not in
/// service or has no free range, or `__GFP_COMP` is asked for a count that
/// is not a power of two.
///
/// # Safety
///
/// Process context (the call may sleep); `area` is NULL or a descriptor
/// of `reserve.c`'s table.
#[no_mangle]
pub(crate) unsafe extern "C" fn gcma_alloc_gfp_noprof(
    area: *mut bindings::gcma_area,
    count: c_ulong,
    align: c_uint,
    gfp: bindings::gfp_t,
) -> *mut bindings::page {
    // SAFETY: process context, where the task may sleep (the caller's
    // contract), for the whole call.
    let ctx = unsafe { MaySleep::new() };
    // SAFETY: the caller's contract.
    match unsafe { state_of(area) } {
        Some(a) => a.alloc_pages(&ctx, count, align, gfp),
        None => core::ptr::null_mut(),
    }
}

/// Releases pages allocated by `gcma_alloc_gfp_noprof()`.
///
/// Drops the allocation's reference of every page; a page someone else
/// still holds is freed by the page allocator's free path when its last
/// reference goes.  Plain pages may be released piecewise, a compound page
/// only whole.  Outside process context the release is queued and done by
/// a work item (`gcma_flush_releases()` waits for it).
///
/// Returns `false` if `pages` is not in `area` (the caller frees them
/// elsewhere); `true` otherwise, including for a release refused as a
/// caller's bug, which is logged and changes nothing.
///
/// # Safety
///
/// Any context in which `cma_release()` may be called; `area` is NULL or
/// a descriptor of `reserve.c`'s table; `pages` is NULL or a valid
/// `struct page`.
#[no_mangle]
pub(crate) unsafe extern "C" fn gcma_release(
    area: *mut bindings::gcma_area,
    pages: *const bindings::page,
    count: c_ulong,
) -> bool {
    // SAFETY: the caller's contract.
    let Some(a) = (unsafe { state_of(area) }) else {
        return false;
    };
    if pages.is_null() {
        return false;
    }
    // SAFETY: `pages` is a valid `struct page` (the caller's contract).
    let pfn = unsafe { bindings::page_to_pfn(pages) } as usize;
    let Some(start) = a.frames.index_of_pfn(pfn) else {
        return false;
    };
    let count: usize = count;
    // A release queued for process context is traced when it is done.
    let res = if in_task() {
        a.release(start, count)
            .map(|()| a.trace_released(start, count))
    } else {
        a.defer_release(start, count)
    };
    if let Err(why) = res {
        a.refuse_release(start, count, why);
    }
    true
}

/// Waits until the releases queued from interrupt context are done.
///
/// # Safety
///
/// Process context (the call sleeps); `area` is NULL or a descriptor of
/// `reserve.c`'s table.
#[no_mangle]
pub(crate) unsafe extern "C" fn gcma_flush_releases(area: *mut bindings::gcma_area) {
    // SAFETY: the caller's contract.
    if let Some(a) = unsafe { state_of(area) } {
        // SAFETY: the work item is a field of an area that lives forever,
        // initialised by `new_work!`; flushing it may sleep, which the
        // caller allows.
        unsafe {
            bindings::flush_work(kernel::workqueue::Work::raw_get(&a.release_work));
        }
    }
}

/// Fills `*st` with the counters of an area, all zero if the area is not in
/// service.
///
/// # Safety
///
/// Process context; `area` as for [`gcma_release`]; `st` valid for writes.
#[no_mangle]
pub(crate) unsafe extern "C" fn gcma_stats(
    area: *mut bindings::gcma_area,
    st: *mut bindings::gcma_stats,
) {
    // SAFETY: `area` is NULL or a descriptor of the table, and `st` is
    // valid for writes (the caller's contract).
    unsafe {
        let snapshot = state_of(area).map_or_else(Default::default, Area::stats);
        st.write(snapshot);
    }
}

/// Returns the descriptor of the area in service that holds page frame
/// `pfn`, or NULL: for the page allocator's pfn walkers, through
/// `gcma_pfn_in_area()`, and the THP tests.  Any context.
#[no_mangle]
pub(crate) extern "C" fn gcma_area_of_pfn(pfn: c_ulong) -> *mut bindings::gcma_area {
    area_of_pfn(pfn).map_or(core::ptr::null_mut(), |a| a.c.as_ptr())
}

/// Returns a page frame of `start_pfn..end_pfn` that lies in an area in
/// service, or `end_pfn` if none does: for `gcma_area_pfn()`, which
/// the page allocator's pageblock isolation calls with the zone lock held.
/// Any context.
#[no_mangle]
pub(crate) extern "C" fn gcma_area_pfn_in_range(start_pfn: c_ulong, end_pfn: c_ulong) -> c_ulong {
    area_in_pfn_range(start_pfn, end_pfn).map_or(end_pfn, |a| start_pfn.max(a.frames.base_pfn()))
}

/// Whether a block running past its area was reported (once).
static STRADDLE_WARNED: AtomicBool = AtomicBool::new(false);

/// Takes back a block of an area from the page allocator's free paths.
///
/// `page` heads a block of order `order` whose last reference went and
/// whose free steps succeeded.  The block is recorded as returned and
/// freed in the area's map at the area's next call in process context
/// (the map's lock is never taken here).  Any context, interrupts
/// included; called through `gcma_free_page()`, behind a static key.
///
/// Returns `true` if the block belongs to an area and was taken.
///
/// # Safety
///
/// `page` must be a valid `struct page`.
#[no_mangle]
pub(crate) unsafe extern "C" fn __gcma_free_page(page: *mut bindings::page, order: c_uint) -> bool {
    // SAFETY: `page` is a valid `struct page` (the caller's contract).
    let pfn = unsafe { bindings::page_to_pfn(page) } as usize;
    let Some(a) = area_of_pfn(pfn) else {
        return false;
    };
    let Some(start) = a.frames.index_of_pfn(pfn) else {
        return false;
    };
    let n = pages_in_order(order);
    // A block never straddles the end of an area: it was allocated in it.
    if start + n > a.frames.nr_pages() && !STRADDLE_WARNED.swap(true, Ordering::Relaxed) {
        pr_warn!(
            "{}: freed block at pfn {:#x} (order {}) runs past the area\n",
            a.name(),
            pfn,
            order
        );
    }
    a.returned.set(start, n);
    true
}
