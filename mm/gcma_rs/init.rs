// SPDX-License-Identifier: GPL-2.0

//! Taking the areas over at boot: `gcma_rs_init()`, which `reserve.c`
//! calls at `subsys_initcall` time, refuses an area that spans zones,
//! sets up the allocator state of the others and puts them in service,
//! then starts guaranteed THP, the debugfs files and DMEM on them.

use crate::{area_map, dmem_client, sysfs, Area, Map, IN_SERVICE, LAT_BUCKETS, NR_IN_SERVICE};
use core::sync::atomic::{AtomicUsize, Ordering};
use kernel::{
    delay,
    ffi::c_int,
    mm::{
        frames::{OwnedFrames, PageBits},
        gcma::{reserved_areas, ReservedArea},
    },
    new_spinlock,
    prelude::*,
    sync::{Arc, UniqueArc},
    workqueue::new_work,
};

/// Sets up the allocator state of one reserved area and puts it in
/// service.
///
/// # Safety
///
/// Called once per area, in process context, before anything else uses
/// the area's pages, for an area that lies in one zone.
unsafe fn init_area(area: &'static ReservedArea, ctx: &delay::MaySleep) -> Result<&'static Area> {
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
    let returned = PageBits::new(nr_pages)?;
    let deferred = PageBits::new(nr_pages)?;
    let failed_copies = PageBits::new(nr_pages)?;
    let n = NR_IN_SERVICE.load(Ordering::Relaxed);
    if n >= IN_SERVICE.len() {
        return Err(ENOSPC);
    }
    // Every allocation is made before the pages are adopted (the adoption
    // makes its own before it changes a page): a failure leaves them
    // reserved, as memblock left them.
    let slot = UniqueArc::<Area>::new_uninit(GFP_KERNEL)?;
    // SAFETY: the area was reserved in memblock for GCMA alone at boot,
    // `gcma_rs_init()` refuses an area that spans zones, and this is its
    // one adoption (the caller's contract).
    let frames = unsafe { OwnedFrames::adopt_reserved(area.base_pfn(), nr_pages, ctx) }?;
    let state = match slot.write_pin_init(pin_init!(Area {
        c: area,
        base_pfn: area.base_pfn(),
        frames,
        map <- new_spinlock!(map, "gcma_area"),
        returned,
        deferred,
        failed_copies,
        release_work <- new_work!("gcma_area::release_work"),
        lat: [const { AtomicUsize::new(0) }; LAT_BUCKETS],
        alloc_success: AtomicUsize::new(0),
        alloc_fail: AtomicUsize::new(0),
        discarded: AtomicUsize::new(0),
        bad: AtomicUsize::new(0),
        released: AtomicUsize::new(0),
    })) {
        Ok(state) => Arc::from(state),
        Err(e) => match e {},
    };
    // One reference is never dropped: the area stays for good.
    let ptr = Arc::into_raw(state);
    // SAFETY: `ptr` comes from `Arc::into_raw` and is never released.
    let state: &'static Area = unsafe { &*ptr };
    // The free paths send the area's pages back to it before the entry
    // points can find it, hence before its first allocation; then the
    // sysfs files appear (its debugfs files come once every area is in
    // service, `crate::debugfs::init()`).
    area.enter_service(ctx);
    if IN_SERVICE[n].set(state).is_err() {
        // `n` is the count of set entries, and only this call, which runs
        // once, raises it.
        return Err(EBUSY);
    }
    NR_IN_SERVICE.store(n + 1, Ordering::Release);
    sysfs::add_area(state);
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
/// An area that spans zones is refused (its memory goes to the page
/// allocator); one whose state cannot be set up is reported and left
/// reserved but unused.  The call itself always succeeds so that boot
/// goes on.
///
/// # Safety
///
/// Called once, from process context, before any other function of this
/// crate that touches the areas (the boot parameters' functions of
/// `boot_params.rs` run earlier, from the architecture's setup code, and
/// touch only their own statics): each area's state is created here and
/// published to the C side, and a second call would publish a second
/// state for the same pages.
#[no_mangle]
pub(crate) unsafe extern "C" fn gcma_rs_init() -> c_int {
    // SAFETY: this function runs in process context, with no atomic
    // section active (its own contract).
    let ctx = unsafe { delay::MaySleep::new() };
    if let Some(n) = crate::boot_params::REQUESTS.unserved() {
        pr_err!("gcma= ignored ({n} area(s)): this architecture does not reserve GCMA areas\n");
    }
    // The areas in service, for DMEM; a failed push only costs DMEM the
    // area.
    let mut ready: KVec<&'static Area> = KVec::new();
    for area in reserved_areas() {
        if let Some((pfn, zone, other)) = area.zone_crossing() {
            pr_err!(
                "{}: [{:#018x}+{:#018x}] spans zones {} (node {}) and {} (node {}) at pfn {:#x}; \
                 not used, its memory goes to the page allocator\n",
                area.name(),
                area.base_pfn() << kernel::mm::PAGE_SHIFT,
                area.nr_pages() << kernel::mm::PAGE_SHIFT,
                zone.name(),
                zone.node().as_u32(),
                other.name(),
                other.node().as_u32(),
                pfn
            );
            // SAFETY: nothing was made of the area yet (this function runs
            // once, before any other function of the crate that touches the
            // areas: its own contract), and the loop moves on without it.
            unsafe { area.refuse() };
            continue;
        }
        // SAFETY: this function runs once, in process context (its own
        // contract), each reserved area appears once, and this one lies in
        // one zone (checked above).
        match unsafe { init_area(area, &ctx) } {
            Ok(a) => {
                if ready.push(a, GFP_KERNEL).is_err() {
                    pr_warn!("{}: not used by DMEM: no memory\n", area.name());
                }
            }
            Err(e) => pr_err!("{}: cannot set up the area: {:?}\n", area.name(), e),
        }
    }
    #[cfg(CONFIG_GCMA_THP)]
    {
        // A mode and files wherever "gcma=" reserved an area.
        if reserved_areas().next().is_some() {
            // Without the mode's lock (no memory) the hooks stay off, and
            // there are no files to change the mode through.
            match crate::thp::init(ready.iter().copied().filter(|a| a.is_thp()), &ctx) {
                Ok(()) => sysfs::add_thp(),
                Err(e) => pr_err!("thp: not started: {:?}\n", e),
            }
        }
    }
    #[cfg(CONFIG_DEBUG_FS)]
    crate::debugfs::init();
    if !ready.is_empty() {
        pr_info!("{} area(s) ready\n", ready.len());
        #[cfg(CONFIG_GCMA_DMEM_VERIFY)]
        crate::dmem_verify::init(&ctx);
        if let Err(e) = dmem_client::init(&ready, &ctx) {
            pr_err!("dmem: not started: {:?}\n", e);
        }
    }
    0
}
