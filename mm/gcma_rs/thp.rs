// SPDX-License-Identifier: GPL-2.0

//! Guaranteed THP: the policy, the choice of area and the counters.
//!
//! When the buddy allocator has no free block of PMD order, a THP fault
//! falls back to base pages and the process loses the huge page for good
//! (until khugepaged collapses the range, which needs the same block).  An
//! area reserved with `gcma=<size>:thp` holds PMD-sized blocks that only
//! THP may take, so that the fault gets one anyway.  The thesis calls the
//! three policies `Thp.bd` (buddy only), `Thp.bc` (buddy, then GCMA) and
//! `Thp.cma` (GCMA first); here they are the modes `never`, `fallback` and
//! `always` of `/sys/kernel/mm/gcma/thp/mode`.
//!
//! The C glue (`thp.c`) asks [`decide`] where to look for each fault and
//! collapse, and this module picks the area ([`alloc`]) among those on the
//! nodes the allocation may use (the task's memory policy and cpuset, or
//! the collapse's node mask, as the page allocator would apply them): one
//! on the preferred node first, then any other allowed.  A full area is an
//! ordinary failure; the caller falls back to base pages.

use crate::Area;
use core::sync::atomic::{AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use kernel::{
    bindings,
    delay::MaySleep,
    ffi::{c_int, c_uint, c_ulong},
    mm::{
        numa::{self, NodeMask},
        virt::VmaRef,
        PMD_ORDER,
    },
    prelude::*,
};

/// The THP policy (`/sys/kernel/mm/gcma/thp/mode`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Mode {
    /// The buddy allocator only (`Thp.bd`).
    Never,
    /// The buddy allocator, then GCMA (`Thp.bc`).
    Fallback,
    /// GCMA, then the buddy allocator (`Thp.cma`).
    Always,
}

impl Mode {
    const ALL: [Mode; 3] = [Mode::Never, Mode::Fallback, Mode::Always];

    pub(crate) fn raw(self) -> c_uint {
        match self {
            Mode::Never => bindings::gcma_thp_mode_GCMA_THP_NEVER,
            Mode::Fallback => bindings::gcma_thp_mode_GCMA_THP_FALLBACK,
            Mode::Always => bindings::gcma_thp_mode_GCMA_THP_ALWAYS,
        }
    }

    fn from_raw(raw: c_uint) -> Option<Mode> {
        Self::ALL.into_iter().find(|m| m.raw() == raw)
    }

    /// The modes, in the order `/sys/kernel/mm/gcma/thp/mode` lists them.
    pub(crate) const fn all() -> [Mode; 3] {
        Self::ALL
    }

    /// The mode's name in `mode` (and in `gcma.thp_mode=`, which `thp.c`
    /// parses before Rust runs).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Never => "never",
            Mode::Fallback => "fallback",
            Mode::Always => "always",
        }
    }
}

/// Where an allocation looks, in order.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Plan {
    /// The buddy allocator only: the path as if GCMA did not exist.
    Buddy,
    /// The buddy allocator, then a THP area.
    BuddyThenGcma,
    /// A THP area, then the buddy allocator.
    GcmaThenBuddy,
}

impl Plan {
    fn raw(self) -> c_int {
        (match self {
            Plan::Buddy => bindings::gcma_thp_plan_GCMA_THP_PLAN_BUDDY,
            Plan::BuddyThenGcma => bindings::gcma_thp_plan_GCMA_THP_PLAN_BUDDY_GCMA,
            Plan::GcmaThenBuddy => bindings::gcma_thp_plan_GCMA_THP_PLAN_GCMA_BUDDY,
        }) as c_int
    }
}

/// What the faulting VMA says about a huge page at an address.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct FaultVma {
    /// Anonymous memory: GCMA serves no file or special mapping.
    pub(crate) anonymous: bool,
    /// THP allowed by the system settings, `madvise` and `prctl`.
    pub(crate) thp_allowed: bool,
    /// The PMD-aligned block lies inside the VMA.
    pub(crate) pmd_fits: bool,
}

impl FaultVma {
    /// Reads the facts of `vma` for the block at `haddr`.
    pub(crate) fn of(vma: &VmaRef, haddr: usize) -> Self {
        Self {
            anonymous: vma.is_anonymous(),
            thp_allowed: vma.thp_allowed(),
            pmd_fits: vma.pmd_fits(haddr),
        }
    }

    fn eligible(&self) -> bool {
        self.anonymous && self.thp_allowed && self.pmd_fits
    }
}

/// Who asks.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Request {
    /// The anonymous PMD fault, in the VMA it describes.
    Fault(FaultVma),
    /// khugepaged's anonymous collapse (or `MADV_COLLAPSE`), which has
    /// checked and will recheck the VMA under the mmap lock itself.
    Collapse,
}

/// The decision: where an allocation for `req` looks, in `mode`, with or
/// without a THP area in service.
///
/// The buddy allocator comes first unless the mode says `always`, and is
/// always tried: GCMA only adds a source.  A VMA that should not get a
/// huge page (not anonymous, THP not allowed, the block not inside it)
/// gets the plain buddy path, whatever the mode: the fault path checked
/// these already, and this keeps GCMA from serving a VMA it should not if
/// the fault path ever changes.
pub(crate) fn decide(mode: Mode, have_area: bool, req: Request) -> Plan {
    if !have_area {
        return Plan::Buddy;
    }
    if let Request::Fault(vma) = req {
        if !vma.eligible() {
            return Plan::Buddy;
        }
    }
    match mode {
        Mode::Never => Plan::Buddy,
        Mode::Fallback => Plan::BuddyThenGcma,
        Mode::Always => Plan::GcmaThenBuddy,
    }
}

/// Upper bound on THP areas (that of all areas).
const MAX_AREAS: usize = bindings::GCMA_MAX_AREAS as usize;

/// The THP areas in service, set once at boot by [`init`]; the first
/// [`NR_AREAS`] are non-NULL.
static AREAS: [AtomicPtr<Area>; MAX_AREAS] =
    [const { AtomicPtr::new(core::ptr::null_mut()) }; MAX_AREAS];
static NR_AREAS: AtomicUsize = AtomicUsize::new(0);
static MODE: AtomicU8 = AtomicU8::new(Mode::Never as u8);

/// The counters of `/sys/kernel/mm/gcma/thp/stat`.
struct Counters {
    fault_alloc: AtomicU64,
    fault_fail: AtomicU64,
    collapse_alloc: AtomicU64,
    collapse_fail: AtomicU64,
}

static COUNTERS: Counters = Counters {
    fault_alloc: AtomicU64::new(0),
    fault_fail: AtomicU64::new(0),
    collapse_alloc: AtomicU64::new(0),
    collapse_fail: AtomicU64::new(0),
};

pub(crate) fn mode() -> Mode {
    match MODE.load(Ordering::Relaxed) {
        m if m == Mode::Fallback as u8 => Mode::Fallback,
        m if m == Mode::Always as u8 => Mode::Always,
        _ => Mode::Never,
    }
}

/// The THP areas in service.
pub(crate) fn areas() -> impl Iterator<Item = &'static Area> {
    let n = NR_AREAS.load(Ordering::Acquire);
    AREAS[..n].iter().filter_map(|a| {
        // SAFETY: the pointers were made from `&'static Area`s by `init`
        // and published before `NR_AREAS` (release); those below it are
        // set for good.
        unsafe { a.load(Ordering::Relaxed).as_ref() }
    })
}

/// Takes the THP areas among the areas in service, once, at boot.
pub(crate) fn init(thp_areas: impl Iterator<Item = &'static Area>) {
    let mut n = 0;
    for area in thp_areas {
        if n == MAX_AREAS {
            break;
        }
        AREAS[n].store((area as *const Area).cast_mut(), Ordering::Relaxed);
        n += 1;
    }
    NR_AREAS.store(n, Ordering::Release);
}

/// A PMD-sized compound page from a THP area on a node of `allowed`, on
/// node `nid` if one has room there, else on any other allowed; NULL if
/// none has room.  An area on a node outside `allowed` is never used.
///
/// `gfp` goes to the page allocator's allocation steps (it includes
/// `__GFP_COMP`).  May sleep, which `ctx` allows: pages lent to DMEM are
/// discarded first.
pub(crate) fn alloc(
    ctx: &MaySleep,
    gfp: bindings::gfp_t,
    nid: c_int,
    allowed: &NodeMask,
    user: c_uint,
) -> *mut bindings::page {
    let (ok, fail) = if user == bindings::gcma_thp_user_GCMA_THP_COLLAPSE {
        (&COUNTERS.collapse_alloc, &COUNTERS.collapse_fail)
    } else {
        (&COUNTERS.fault_alloc, &COUNTERS.fault_fail)
    };
    let node = |a: &Area| numa::node_of_pfn(a.base_pfn).ok();
    let usable = || areas().filter(|&a| node(a).is_some_and(|n| allowed.contains(n)));
    let on_node = |a: &Area| node(a).is_some_and(|n| n.as_u32() as c_int == nid);
    let local = usable().filter(|&a| on_node(a));
    let remote = usable().filter(|&a| !on_node(a));
    for area in Iterator::chain(local, remote) {
        let page = area.alloc_pages(ctx, 1 << PMD_ORDER, PMD_ORDER, gfp);
        if !page.is_null() {
            ok.fetch_add(1, Ordering::Relaxed);
            return page;
        }
    }
    fail.fetch_add(1, Ordering::Relaxed);
    core::ptr::null_mut()
}

/// Sets the mode; returns 1 if the hooks must be on (a mode other than
/// `never`, and a THP area in service), 0 if not, `-EINVAL` for an unknown
/// mode.
#[no_mangle]
pub(crate) extern "C" fn gcma_rs_thp_set_mode(raw: c_uint) -> c_int {
    let Some(m) = Mode::from_raw(raw) else {
        return EINVAL.to_errno();
    };
    MODE.store(m as u8, Ordering::Relaxed);
    (m != Mode::Never && NR_AREAS.load(Ordering::Acquire) > 0) as c_int
}

/// The mode, as `enum gcma_thp_mode`.
#[no_mangle]
pub(crate) extern "C" fn gcma_rs_thp_mode() -> c_uint {
    mode().raw()
}

/// The number of THP areas in service.
#[no_mangle]
pub(crate) extern "C" fn gcma_rs_thp_nr_areas() -> c_uint {
    NR_AREAS.load(Ordering::Acquire) as c_uint
}

/// The plan of an anonymous PMD fault at `haddr` in `vma`, as `enum
/// gcma_thp_plan`.
///
/// # Safety
///
/// `vma` is the faulting VMA, and the caller (the fault path) holds its
/// mmap lock or its per-VMA lock for the duration of the call.
#[no_mangle]
pub(crate) unsafe extern "C" fn gcma_rs_thp_fault_plan(
    vma: *mut bindings::vm_area_struct,
    haddr: c_ulong,
) -> c_int {
    // SAFETY: the caller holds a lock that protects `vma` during the call.
    let vma = unsafe { VmaRef::from_raw(vma) };
    let req = Request::Fault(FaultVma::of(vma, haddr));
    decide(mode(), NR_AREAS.load(Ordering::Acquire) > 0, req).raw()
}

/// The plan of an anonymous collapse, as `enum gcma_thp_plan`.
#[no_mangle]
pub(crate) extern "C" fn gcma_rs_thp_collapse_plan() -> c_int {
    decide(
        mode(),
        NR_AREAS.load(Ordering::Acquire) > 0,
        Request::Collapse,
    )
    .raw()
}

/// A compound page of PMD order from a THP area for `user` (`enum
/// gcma_thp_user`) on a node of `allowed`, preferably on `nid`, or NULL.
/// May sleep.
///
/// # Safety
///
/// Process context, where the task may sleep (the anonymous PMD fault and
/// khugepaged's collapse, `include/linux/gcma_thp.h`, hold no spinlock and
/// are not in an RCU read-side section when they allocate); `allowed`
/// points to a node mask that nobody changes during the call.
#[no_mangle]
pub(crate) unsafe extern "C" fn gcma_rs_thp_alloc(
    gfp: bindings::gfp_t,
    nid: c_int,
    allowed: *const bindings::nodemask_t,
    user: c_uint,
) -> *mut bindings::page {
    // SAFETY: guaranteed by the caller.
    let allowed = unsafe { NodeMask::from_raw(allowed) };
    // SAFETY: process context, where the task may sleep (the caller's
    // contract), for the whole call.
    let ctx = unsafe { MaySleep::new() };
    alloc(&ctx, gfp, nid, allowed, user)
}

/// The counters of guaranteed THP (`/sys/kernel/mm/gcma/thp/stat`).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct Stats {
    /// PMD faults that got their folio from GCMA.
    pub(crate) fault_alloc: u64,
    /// PMD faults that asked GCMA and found no room.
    pub(crate) fault_fail: u64,
    /// Anonymous collapses that got their folio from GCMA.
    pub(crate) collapse_alloc: u64,
    /// Anonymous collapses that asked GCMA and found no room.
    pub(crate) collapse_fail: u64,
}

/// The counters now.
pub(crate) fn stats() -> Stats {
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    Stats {
        fault_alloc: get(&COUNTERS.fault_alloc),
        fault_fail: get(&COUNTERS.fault_fail),
        collapse_alloc: get(&COUNTERS.collapse_alloc),
        collapse_fail: get(&COUNTERS.collapse_fail),
    }
}
