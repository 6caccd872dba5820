// SPDX-License-Identifier: GPL-2.0

//! The functions C calls into the allocator (`include/linux/gcma.h`).
//!
//! A contiguous allocation enters Rust once, at `gcma_alloc_gfp_noprof()`,
//! and comes back with its pages prepared: the search, the discard of lent
//! pages (DMEM) and the page allocator's allocation steps all run in Rust.
//! What it calls back into C is one-line: the page allocator's steps
//! (`rust/helpers/mm.c`), the clock, and the tracepoints and messages of
//! `area.c` (through `kernel::mm::gcma`).  A release enters at
//! `__gcma_release()`, and the page allocator's free paths at
//! `__gcma_free_page()`.
//!
//! The area pointers C passes are never dereferenced here: an entry point
//! looks the area up among those in service by address
//! ([`area_of_descriptor`]), so a pointer that is no area's finds none.

use crate::{area_in_pfn_range, area_of_descriptor, area_of_pfn, Area, LAT_BUCKETS};
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::{
    bindings,
    delay::MaySleep,
    ffi::{c_uint, c_ulong},
    mm::{frames::GFP_COMP, pages_in_order},
    prelude::*,
    processor::{in_task, local_clock_ns, might_sleep},
};

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
                self.c.warn_compound_count(count);
                return core::ptr::null_mut();
            }
            align = align.max(count.ilog2());
        }
        self.c.trace_alloc_start(count, align);
        let t0 = local_clock_ns();
        let (page, pfn, ret) = match self.alloc(ctx, count, align, gfp) {
            Ok((page, start)) => (page, Some(self.frames.base_pfn() + start), 0),
            Err(e) => (core::ptr::null_mut(), None, e.to_errno()),
        };
        let ns = ns_since(t0);
        let bucket = if ns == 0 { 0 } else { ns.ilog2() as usize };
        self.lat[bucket.min(LAT_BUCKETS - 1)].fetch_add(1, Ordering::Relaxed);
        self.c.alloc_done(pfn, count, align, ret, ns, gfp);
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
/// Process context (the call may sleep).
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
    match area_of_descriptor(area) {
        Some(a) => a.alloc_pages(&ctx, count, align, gfp),
        None => core::ptr::null_mut(),
    }
}

/// Releases the `count` pages from page frame `pfn` allocated by
/// `gcma_alloc_gfp_noprof()` (`gcma_release()` in `area.c` takes the first
/// page, as `cma_release()` gives it).
///
/// Drops the allocation's reference of every page; a page someone else
/// still holds is freed by the page allocator's free path when its last
/// reference goes.  Plain pages may be released piecewise, a compound page
/// only whole.  Outside process context the release is queued and done by
/// a work item (`gcma_flush_releases()` waits for it).
///
/// Returns `false` if `pfn` is not in `area` (the caller frees the pages
/// elsewhere); `true` otherwise, including for a release refused as a
/// caller's bug (a range that is not an allocation, or a double release),
/// which is logged and changes nothing.
///
/// # Safety
///
/// Any context in which `cma_release()` may be called.  The pages are an
/// allocation of the caller's (or the part of one it releases), which it
/// stops using: the map can tell a range that is not allocated, not one
/// that someone else allocated.
#[no_mangle]
pub(crate) unsafe extern "C" fn __gcma_release(
    area: *const bindings::gcma_area,
    pfn: c_ulong,
    count: c_ulong,
) -> bool {
    let Some(a) = area_of_descriptor(area) else {
        return false;
    };
    let Some(start) = a.frames.index_of_pfn(pfn) else {
        return false;
    };
    let count: usize = count;
    // A release queued for process context is traced when it is done.
    // SAFETY: the pages are the caller's allocation, which it stops using
    // (this function's contract).
    let res = unsafe {
        if in_task() {
            a.release(start, count)
                .map(|()| a.trace_released(start, count))
        } else {
            a.defer_release(start, count)
        }
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
/// Process context (the call sleeps).
#[no_mangle]
pub(crate) unsafe extern "C" fn gcma_flush_releases(area: *mut bindings::gcma_area) {
    if let Some(a) = area_of_descriptor(area) {
        // SAFETY: the work item is a field of an area that lives forever,
        // initialised by `new_work!`; flushing it may sleep, which the
        // caller allows.
        unsafe {
            bindings::flush_work(kernel::workqueue::Work::raw_get(&a.release_work));
        }
    }
}

/// Returns the counters of an area, all zero if the area is not in
/// service (`gcma_stats()` in `<linux/gcma.h>`).  Process context.
#[no_mangle]
pub(crate) extern "C" fn __gcma_stats(area: *const bindings::gcma_area) -> bindings::gcma_stats {
    area_of_descriptor(area).map_or_else(Default::default, Area::stats)
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
/// The block of order `order` at page frame `pfn` lost its last
/// reference, and its free steps succeeded.  The block is recorded as returned and
/// freed in the area's map at the area's next call in process context
/// (the map's lock is never taken here).  Any context, interrupts
/// included; called through `gcma_free_page()`, behind a static key.
///
/// Returns `true` if the block belongs to an area and was taken.
///
/// # Safety
///
/// The block lost its last reference and went through the page
/// allocator's free steps: its pages are nobody's.
#[no_mangle]
pub(crate) unsafe extern "C" fn __gcma_free_page(pfn: c_ulong, order: c_uint) -> bool {
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
