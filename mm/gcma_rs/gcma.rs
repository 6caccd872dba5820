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
//! - `thp`: guaranteed THP, the policy that lets THP faults and collapses
//!   take PMD-sized folios from areas reserved for them (`thp.c` is its C
//!   side).
//! - [`frag`]: fragmentation metrics of the zones (unusable free space
//!   index, the kernel's fragmentation index, pageblock pollution) for
//!   `/sys/kernel/debug/gcma/fragmentation` (`frag_debugfs.c`).
//!
//! This file holds the allocator state of each area in service, [`Area`],
//! and the functions the C glue (`area.c`) calls: `area.c` owns the
//! `struct page` side of an allocation and the entry points
//! `gcma_alloc()`/`gcma_release()`, which the CMA interface also reaches
//! for areas registered with CMA.

use core::{
    pin::Pin,
    sync::atomic::{AtomicUsize, Ordering},
};
use kernel::{
    bindings, delay,
    ffi::{c_int, c_uint, c_ulong, c_void},
    mm::page_ref::{self, PageRef},
    new_spinlock,
    prelude::*,
    sync::SpinLock,
};

// Items of these modules that only tests use are compiled only for them
// (`#[cfg(...)]` on each, saying which tests use it).
mod area_map;
mod boot;
mod dmem;
mod dmem_client;
mod dmem_kernel;
mod frag;
#[cfg(CONFIG_GCMA_THP)]
mod thp;

#[cfg(CONFIG_GCMA_KUNIT_TEST)]
mod dmem_tests;
#[cfg(CONFIG_GCMA_KUNIT_TEST)]
mod frag_tests;
#[cfg(CONFIG_GCMA_KUNIT_TEST)]
mod tests;
#[cfg(all(CONFIG_GCMA_KUNIT_TEST, CONFIG_GCMA_THP))]
mod thp_tests;

// The benchmark of GCMA against CMA (its C side is `bench.c`).
#[cfg(CONFIG_GCMA_BENCH)]
mod bench;

/// Phase timing of the allocation path, for the benchmark's profile pass.
///
/// The benchmark (`bench.rs`) switches it on for
/// its profile pass only; otherwise every probe is one relaxed load, and
/// without the benchmark none is compiled at all.  Time is summed per
/// phase over all allocations and discards while on.
pub(crate) mod profile {
    #[cfg(CONFIG_GCMA_BENCH)]
    use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    /// The phases timed.
    #[derive(Clone, Copy)]
    pub(crate) enum Phase {
        /// Map search and claim, under the map lock (all lock rounds).
        Search,
        /// The discard of the claimed range's lent pages
        /// (`dmem_client::discard()`), as the allocator sees it.
        Hook,
        /// The DMEM instances dropping the pages they hold (inside the
        /// hook; timed per chunk of pages).
        DmemDiscard,
        /// Giving them the state of allocated pages: the handoff, or the
        /// page allocator's free steps for a compound allocation (inside
        /// the hook; timed per chunk).
        PageState,
        /// Clearing the lent bits of the claimed range (map lock).
        Finish,
    }

    /// Number of [`Phase`]s.
    #[cfg(CONFIG_GCMA_BENCH)]
    pub(crate) const PHASES: usize = 5;

    #[cfg(CONFIG_GCMA_BENCH)]
    static ON: AtomicBool = AtomicBool::new(false);
    #[cfg(CONFIG_GCMA_BENCH)]
    static NS: [AtomicU64; PHASES] = [const { AtomicU64::new(0) }; PHASES];
    #[cfg(CONFIG_GCMA_BENCH)]
    static CALLS: [AtomicU64; PHASES] = [const { AtomicU64::new(0) }; PHASES];

    /// A start time, if profiling is on.
    #[inline]
    pub(crate) fn start() -> Option<u64> {
        #[cfg(CONFIG_GCMA_BENCH)]
        if ON.load(Ordering::Relaxed) {
            return Some(now_ns());
        }
        None
    }

    /// Adds the time since `t0` (from [`start`] or a previous `end`) to
    /// `phase` and returns the current time, so phases can be chained.
    #[inline]
    pub(crate) fn end(phase: Phase, t0: Option<u64>) -> Option<u64> {
        #[cfg(CONFIG_GCMA_BENCH)]
        if let Some(t0) = t0 {
            let t = now_ns();
            NS[phase as usize].fetch_add(t.saturating_sub(t0), Ordering::Relaxed);
            CALLS[phase as usize].fetch_add(1, Ordering::Relaxed);
            return Some(t);
        }
        let _ = (phase, t0);
        None
    }

    /// The profile's clock, `local_clock()` in nanoseconds: cheap (under
    /// QEMU `ktime_get()` reads the HPET), and monotonic on one CPU, which
    /// is where the benchmark runs the profiled allocations (its kthread
    /// is bound to one).
    #[cfg(CONFIG_GCMA_BENCH)]
    #[inline]
    fn now_ns() -> u64 {
        // SAFETY: FFI call without preconditions.
        unsafe { kernel::bindings::rsmm_local_clock() }
    }

    /// Switches profiling on or off.
    #[cfg(CONFIG_GCMA_BENCH)]
    pub(crate) fn set(on: bool) {
        ON.store(on, Ordering::Relaxed);
    }

    /// Clears the sums.
    #[cfg(CONFIG_GCMA_BENCH)]
    pub(crate) fn reset() {
        for c in NS.iter().chain(CALLS.iter()) {
            c.store(0, Ordering::Relaxed);
        }
    }

    /// The sums: nanoseconds and probe count of each phase.
    #[cfg(CONFIG_GCMA_BENCH)]
    pub(crate) fn sums() -> [(u64, u64); PHASES] {
        core::array::from_fn(|i| {
            (
                NS[i].load(Ordering::Relaxed),
                CALLS[i].load(Ordering::Relaxed),
            )
        })
    }
}

use boot::GcmaArea;

/// Prefix of this crate's log lines (used by `pr_*!`).
const __LOG_PREFIX: &[u8] = b"gcma\0";

/// The page-state map of an area, on kernel-allocated buffers.
type Map = area_map::AreaMap<KVec<usize>>;

/// Unaligned fits an allocation tries under the area lock before it drops
/// the lock and lets other tasks run: each try is a tree search, so this
/// bounds the time the lock is held (with preemption off) to a few
/// microseconds however fragmented the area is.
const TRIES_PER_LOCK: usize = 32;

/// Times an allocation that found no room starts its search again from
/// the first page, when pages it had passed were freed while it did not
/// hold the lock.
const RESTARTS: usize = 2;

/// The allocator state of one area in service.
///
/// Created once per area by [`gcma_rs_init`] and never freed: `area.c`
/// keeps a pointer to it in `struct gcma_area::rs`.
#[pin_data]
struct Area {
    /// The C descriptor of the area.
    c: &'static boot::GcmaArea,
    /// Page frame number of page 0 of the map.
    base_pfn: usize,
    /// The map; every call on it is made under this lock, and nothing
    /// that may sleep or take another lock runs under it.
    #[pin]
    map: SpinLock<Map>,
    /// Allocations that succeeded.
    alloc_success: AtomicUsize,
    /// Allocations that found no room.
    alloc_fail: AtomicUsize,
    /// Lent pages discarded for allocations.
    discarded: AtomicUsize,
    /// Releases (calls of `gcma_release()` that released pages).
    released: AtomicUsize,
}

// SAFETY: `c` points to a static descriptor that is only read after boot,
// and the map is behind a lock: an `Area` may be used from any thread.
unsafe impl Send for Area {}
// SAFETY: as above; all mutable state is atomic or behind the lock.
unsafe impl Sync for Area {}

impl Area {
    /// Allocates `count` pages whose first page frame number is aligned to
    /// `1 << align` pages and returns the first page's index in the area
    /// and the number of discarded pages handed off to it.
    ///
    /// The search holds the lock for at most [`TRIES_PER_LOCK`] tries at a
    /// time.  When it resumes, pages below where it stopped may have been
    /// freed meanwhile: a search that then finds no room starts over from
    /// the first page (at most [`RESTARTS`] times), so that an allocation
    /// fails only if, during one whole pass, no aligned range was free.
    ///
    /// Pages lent to secondary clients inside the range are discarded
    /// outside the lock, as the `area_map` protocol requires, before the
    /// range is returned; with `handoff` the allocation takes them as they
    /// are (see `gcma_take_discarded()`).
    ///
    /// A range found to hold hardware-poisoned pages is not returned: they
    /// are taken out of use for good ([`Area::retire_poisoned`]) and the
    /// search starts again.
    fn alloc(&self, count: usize, align: u32, handoff: bool) -> Result<(usize, usize)> {
        let out = loop {
            let out = self.search(count, align)?;
            if !self.retire_poisoned(&out) {
                break out;
            }
        };
        let handed = if out.lent > 0 {
            self.discard(out.start, out.count, handoff)
        } else {
            0
        };
        self.alloc_success.fetch_add(1, Ordering::Relaxed);
        Ok((out.start, handed))
    }

    /// Claims `count` free pages aligned to `1 << align` pages, as
    /// [`Area::alloc`] describes, and returns the range.
    fn search(&self, count: usize, align: u32) -> Result<area_map::AllocOutcome> {
        let t0 = profile::start();
        let (mut from, mut restarts) = (0, 0);
        let mut generation = self.map.lock().generation();
        let out = loop {
            let (res, now) = {
                let mut map = self.map.lock();
                let res = map.alloc_primary_from(count, align, from, TRIES_PER_LOCK);
                (res, map.generation())
            };
            match res {
                Ok(area_map::AllocStep::Done(out)) => break out,
                Ok(area_map::AllocStep::Resume(next)) => {
                    from = next;
                    // SAFETY: `alloc()` serves `gcma_rs_alloc()`, whose C
                    // caller `gcma_alloc_gfp_noprof()` calls `might_sleep()`; the
                    // map lock was released with its block above.
                    delay::cond_resched(&unsafe { delay::MaySleep::new() });
                }
                Err(e) if e == ENOMEM && from > 0 && now != generation && restarts < RESTARTS => {
                    (from, generation) = (0, now);
                    restarts += 1;
                }
                Err(e) => {
                    if e == ENOMEM {
                        self.alloc_fail.fetch_add(1, Ordering::Relaxed);
                    }
                    return Err(e);
                }
            }
        };
        profile::end(profile::Phase::Search, t0);
        Ok(out)
    }

    /// Page `page` of the area.
    pub(crate) fn page(&self, page: usize) -> &PageRef {
        // SAFETY: the pages of an area are in the memory map for the life
        // of the system; a `&PageRef` is only used here to read the page's
        // flags (its memory is read through `PageRef`s of their users).
        unsafe { PageRef::from_raw(bindings::pfn_to_page((self.base_pfn + page) as _)) }
    }

    /// Logs that page `page` was taken out of use for good (bad memory).
    pub(crate) fn note_retired(&self, page: usize) {
        pr_warn!(
            "{}: page at pfn {:#x} is hardware-poisoned: taken out of use\n",
            self.name(),
            self.base_pfn + page
        );
    }

    /// Takes the hardware-poisoned pages of the freshly claimed range `out`
    /// out of use and frees the others, having its lent pages discarded
    /// (not handed off).  Returns `false`, changing nothing, if the range
    /// has no poisoned page: always when no page of the system is
    /// poisoned, which is then known without reading a `struct page`.
    ///
    /// A page poisoned while free has no reference and is no buddy page:
    /// `memory_failure()` only marks it, so GCMA finds it where it takes
    /// pages (here, and where DMEM borrows or copies them).  Each call
    /// that returns `true` retires at least one page, which no later search
    /// finds: the caller's retries end.
    fn retire_poisoned(&self, out: &area_map::AllocOutcome) -> bool {
        let end = out.start + out.count;
        if !page_ref::any_hwpoisoned() || !(out.start..end).any(|p| self.page(p).is_hwpoisoned()) {
            return false;
        }
        if out.lent > 0 {
            self.discard(out.start, out.count, false);
        }
        // The range is the caller's: nobody else changes its bits.  The
        // flags are read again, a page at a time under the lock.
        let mut run = out.start;
        for p in out.start..end {
            if !self.page(p).is_hwpoisoned() {
                continue;
            }
            let retired = {
                let mut map = self.map.lock();
                if p > run {
                    let _ = map.release_primary(run, p - run);
                }
                map.retire(p).is_ok()
            };
            if retired {
                self.note_retired(p);
            }
            run = p + 1;
        }
        if end > run {
            let _ = self.map.lock().release_primary(run, end - run);
        }
        true
    }

    /// Has the secondary clients drop the lent pages of the freshly
    /// claimed range `start..start + count` (handing them off to the
    /// allocation with `handoff`), then clears their bits; returns how many
    /// pages were handed off.
    ///
    /// The whole range goes to DMEM in one call: its instances know which
    /// pages they hold, and handle them in chunks, so neither the map's
    /// lock nor DMEM is entered once per page.  Pages lent in
    /// the range when it was claimed stay lent until this clears them, and
    /// no page of the range can be lent anew meanwhile (it is
    /// primary-owned).
    fn discard(&self, start: usize, count: usize, handoff: bool) -> usize {
        let t = profile::start();
        let pfn = self.base_pfn + start;
        // No GCMA lock is held here, as `discard` wants.
        let handed = dmem_client::discard(self.c, pfn, count, handoff);
        let t = profile::end(profile::Phase::Hook, t);
        // The range is primary-owned, so this cannot fail.
        let dropped = self.map.lock().finish_discard(start, count).unwrap_or(0);
        profile::end(profile::Phase::Finish, t);
        self.discarded.fetch_add(dropped, Ordering::Relaxed);
        handed
    }

    /// Marks the allocated range `start..start + count` releasing: its
    /// owner let go of it.  `EINVAL` if any page of it is not allocated,
    /// `EEXIST` if any is releasing already (a double release).
    fn begin_release(&self, start: usize, count: usize) -> Result {
        self.map.lock().begin_release(start, count)?;
        self.released.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Frees `start..start + count`, whose last reference is gone; `EINVAL`
    /// if any page of it is not allocated.
    fn free(&self, start: usize, count: usize) -> Result {
        self.map.lock().release_primary(start, count)
    }

    /// Pages of the area: in all, owned by primary clients, and lent to
    /// secondary clients (a snapshot).
    // Used only by the benchmark and the THP KUnit suite.
    #[cfg(any(CONFIG_GCMA_BENCH, all(CONFIG_GCMA_KUNIT_TEST, CONFIG_GCMA_THP)))]
    pub(crate) fn page_counts(&self) -> (usize, usize, usize) {
        let map = self.map.lock();
        (map.nr_pages(), map.primary_used(), map.secondary_lent())
    }

    /// Whether the area was reserved for THP (`gcma=<size>:thp`).
    pub(crate) fn is_thp(&self) -> bool {
        self.c.is_thp()
    }

    /// The area's name, `gcma<N>`.
    pub(crate) fn name(&self) -> &'static CStr {
        self.c.name()
    }
}

/// Sets up the allocator state of one reserved area and puts it in
/// service.
fn init_area(area: &'static boot::GcmaArea) -> Result<&'static Area> {
    let nr_pages = area.nr_pages();
    let words = area_map::bitmap_words(nr_pages);
    let summary = area_map::summary_words(nr_pages).ok_or(EINVAL)?;
    let zeroed = |n: usize| -> Result<KVec<usize>> { Ok(KVec::from_elem(0, n, GFP_KERNEL)?) };
    let map = Map::new(
        nr_pages,
        zeroed(words)?,
        zeroed(words)?,
        zeroed(words)?,
        zeroed(summary)?,
    )?
    // Alignment is that of page frame numbers.
    .with_base(area.base_pfn());
    let free = map.free();
    let state = KBox::pin_init(
        pin_init!(Area {
            c: area,
            base_pfn: area.base_pfn(),
            map <- new_spinlock!(map, "gcma_area"),
            alloc_success: AtomicUsize::new(0),
            alloc_fail: AtomicUsize::new(0),
            discarded: AtomicUsize::new(0),
            released: AtomicUsize::new(0),
        }),
        GFP_KERNEL,
    )?;
    // SAFETY: the box is leaked right away and never moved out of.
    let state: &'static Area = KBox::leak(unsafe { Pin::into_inner_unchecked(state) });
    // SAFETY: `area.as_ptr()` is the descriptor of a reserved area and
    // `state` lives forever; this is the one attach of this area (the
    // caller, `gcma_rs_init()`, runs once).
    unsafe { bindings::gcma_area_attach(area.as_ptr(), (state as *const Area).cast::<c_void>()) };
    pr_info!(
        "{}: {} pages from pfn {:#x}, node {}, {} free{}\n",
        area.name(),
        nr_pages,
        area.base_pfn(),
        area.node().map_or(-1, |n| n.as_u32() as i64),
        free,
        if area.has_cma() {
            ", CMA interface"
        } else if state.is_thp() {
            ", THP only"
        } else {
            ""
        }
    );
    Ok(state)
}

/// Called by `reserve.c` at `subsys_initcall` time, once memory management
/// is up, to take over the areas reserved at boot.
///
/// An area whose state cannot be set up is reported and left reserved but
/// unused; the call itself always succeeds so that boot goes on.
///
/// # Safety
///
/// Called once, from process context, before any other function of this
/// crate: each area's state is created here and published to the C side,
/// and a second call would publish a second state for the same pages.
#[no_mangle]
pub unsafe extern "C" fn gcma_rs_init() -> c_int {
    // The areas in service, for DMEM; a failed push only costs DMEM the
    // area.
    let mut ready: KVec<&'static Area> = KVec::new();
    for area in boot::reserved_areas() {
        match init_area(area) {
            Ok(a) => {
                if ready.push(a, GFP_KERNEL).is_err() {
                    pr_warn!("{}: not used by DMEM: no memory\n", area.name());
                }
            }
            Err(e) => pr_err!("{}: cannot set up the area: {:?}\n", area.name(), e),
        }
    }
    #[cfg(CONFIG_GCMA_THP)]
    thp::init(ready.iter().copied().filter(|a| a.is_thp()));
    if !ready.is_empty() {
        pr_info!("{} area(s) ready\n", ready.len());
        if let Err(e) = dmem_client::init(&ready) {
            pr_err!("dmem: not started: {:?}\n", e);
        }
    }
    0
}

/// Returns the area behind the `rs` pointer of a `struct gcma_area`.
///
/// # Safety
///
/// `rs` must be the value [`init_area`] gave to `gcma_area_attach()`.
unsafe fn area_of(rs: *const c_void) -> &'static Area {
    // SAFETY: by the function's contract `rs` points to a leaked `Area`.
    unsafe { &*rs.cast::<Area>() }
}

/// Allocates `count` pages aligned to `1 << align` pages; on success
/// stores the index of the first one in `*start` and the number of
/// discarded pages handed off to it in `*handed`, and returns 0, else
/// `-EINVAL` (`count == 0`, bad alignment) or `-ENOMEM`.  `handoff` is
/// passed to the discard of lent pages.
///
/// # Safety
///
/// `rs` as for [`area_of`]; `start` and `handed` must be valid for writes.
#[no_mangle]
pub unsafe extern "C" fn gcma_rs_alloc(
    rs: *const c_void,
    count: c_ulong,
    align: c_uint,
    handoff: bool,
    start: *mut c_ulong,
    handed: *mut c_ulong,
) -> c_int {
    // SAFETY: guaranteed by the caller.
    let area = unsafe { area_of(rs) };
    match area.alloc(count, align, handoff) {
        Ok((s, d)) => {
            // SAFETY: guaranteed by the caller.
            unsafe {
                *start = s;
                *handed = d;
            }
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// Marks `start..start + count` releasing (see `gcma_release()`): 0;
/// `-EINVAL` if any page of it is not allocated, `-EEXIST` if any is
/// releasing already; nothing changes on error.
///
/// # Safety
///
/// `rs` as for [`area_of`].
#[no_mangle]
pub unsafe extern "C" fn gcma_rs_begin_release(
    rs: *const c_void,
    start: c_ulong,
    count: c_ulong,
) -> c_int {
    // SAFETY: guaranteed by the caller.
    let area = unsafe { area_of(rs) };
    match area.begin_release(start, count) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// Frees `start..start + count`, whose pages have no reference left: 0, or
/// `-EINVAL` with nothing changed if any page of it is not allocated.
///
/// # Safety
///
/// `rs` as for [`area_of`].
#[no_mangle]
pub unsafe extern "C" fn gcma_rs_free(rs: *const c_void, start: c_ulong, count: c_ulong) -> c_int {
    // SAFETY: guaranteed by the caller.
    let area = unsafe { area_of(rs) };
    match area.free(start, count) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// Takes page `page`, released and found hardware-poisoned when its last
/// reference went, out of use for good: 0, or `-EINVAL`/`-EBUSY` with
/// nothing changed (see `AreaMap::retire`).
///
/// # Safety
///
/// `rs` as for [`area_of`].
#[no_mangle]
pub unsafe extern "C" fn gcma_rs_retire(rs: *const c_void, page: c_ulong) -> c_int {
    // SAFETY: guaranteed by the caller.
    let area = unsafe { area_of(rs) };
    let ret = area.map.lock().retire(page);
    match ret {
        Ok(()) => {
            area.note_retired(page);
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// Fills `*st` with the counters of the area.
///
/// # Safety
///
/// `rs` as for [`area_of`]; `st` must be valid for writes.
#[no_mangle]
pub unsafe extern "C" fn gcma_rs_stats(rs: *const c_void, st: *mut bindings::gcma_stats) {
    // SAFETY: guaranteed by the caller.
    let area = unsafe { area_of(rs) };
    let (total, used, lent, releasing, retired) = {
        let map = area.map.lock();
        (
            map.nr_pages(),
            map.primary_used(),
            map.secondary_lent(),
            map.releasing(),
            map.retired(),
        )
    };
    let get = |c: &AtomicUsize| c.load(Ordering::Relaxed) as u64;
    let snapshot = bindings::gcma_stats {
        total_pages: total as u64,
        // Retired pages are primary-owned and releasing in the map, but
        // nobody's.
        primary_used_pages: used.saturating_sub(retired) as u64,
        secondary_lent_pages: lent as u64,
        alloc_success: get(&area.alloc_success),
        alloc_fail: get(&area.alloc_fail),
        discarded_pages: get(&area.discarded),
        released: get(&area.released),
        release_pending_pages: releasing.saturating_sub(retired) as u64,
        hwpoisoned_pages: retired as u64,
    };
    // SAFETY: guaranteed by the caller.
    unsafe { st.write(snapshot) };
}
