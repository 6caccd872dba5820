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
//! The fault's and the collapse's allocations come here while the static
//! key of `include/linux/gcma_thp.h` is on ([`__gcma_vma_alloc_thp`],
//! [`__gcma_collapse_alloc_thp`]).  [`decide`] says where to look, and
//! this module picks the area ([`alloc`]) among those on the nodes the
//! allocation may use (the VMA's memory policy and the task's cpuset, or
//! the collapse's node mask, as the page allocator would apply them, on
//! `kernel::mm::mempolicy`): one on the preferred node first, then any
//! other allowed.  A full area is an ordinary failure; the caller falls
//! back to base pages.  The mode's switch flips the static key of the
//! hooks under a mutex made at boot ([`set_mode`]); `thp.c` keeps the boot
//! parameter and the key's definition.

use crate::Area;
use core::{
    pin::Pin,
    ptr::NonNull,
    sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering},
};
use kernel::{
    bindings, c_static_key_false,
    delay::MaySleep,
    ffi::{c_int, c_ulong},
    mm::{
        frames::GFP_COMP,
        mempolicy,
        numa::{self, NodeId, NodeMask},
        virt::VmaRef,
        PMD_ORDER,
    },
    new_mutex,
    prelude::*,
    sync::{once_ref::OnceRef, Mutex},
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

    /// The modes, in the order `/sys/kernel/mm/gcma/thp/mode` lists them.
    pub(crate) const fn all() -> [Mode; 3] {
        Self::ALL
    }

    /// The mode's name in `mode` and in `gcma.thp_mode=`.
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
    /// Runs the plan: `gcma` and `buddy` allocate from a THP area and from
    /// the page allocator; each is tried at most once, in the plan's
    /// order, until one gives a folio.
    fn run<T>(
        self,
        gcma: impl FnOnce() -> Option<T>,
        buddy: impl FnOnce() -> Option<T>,
    ) -> Option<T> {
        match self {
            Plan::Buddy => buddy(),
            Plan::BuddyThenGcma => buddy().or_else(gcma),
            Plan::GcmaThenBuddy => gcma().or_else(buddy),
        }
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
static AREAS: [OnceRef<Area>; MAX_AREAS] = [const { OnceRef::new() }; MAX_AREAS];
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
    // Those below `n` were set before it was raised.
    AREAS[..n].iter().filter_map(OnceRef::get)
}

/// What mode changes share, made once by [`init`].
struct Switch {
    /// Serialises mode changes with the static key that follows them.
    lock: Pin<KBox<Mutex<()>>>,
}

static SWITCH: OnceRef<Switch> = OnceRef::new();

/// Takes the THP areas among the areas in service and applies the boot
/// mode (`gcma.thp_mode=`), once, at boot; `ctx` lets it sleep.
///
/// Without a THP area the mode can still be set, but the hooks stay off.
pub(crate) fn init(thp_areas: impl Iterator<Item = &'static Area>, ctx: &MaySleep) -> Result {
    let mut n = 0;
    for area in thp_areas {
        if n == MAX_AREAS {
            break;
        }
        if AREAS[n].set(area).is_ok() {
            n += 1;
        }
    }
    NR_AREAS.store(n, Ordering::Release);
    let switch = KBox::new(
        Switch {
            lock: KBox::pin_init(new_mutex!((), "gcma_thp_mode"), GFP_KERNEL)?,
        },
        GFP_KERNEL,
    )?;
    SWITCH.set(KBox::leak(switch)).map_err(|_| EBUSY)?;
    set_mode(crate::boot_params::thp_mode(), ctx)?;
    if n > 0 {
        pr_info!("thp: {} area(s), mode {}\n", n, mode().name());
    }
    Ok(())
}

/// Sets the mode, and with it the static key of the fault and collapse
/// hooks (`gcma_thp_on`): on in a mode other than `never` while a THP area
/// is in service.  Sleeps, which `ctx` allows.  `ENODEV` before [`init`].
pub(crate) fn set_mode(m: Mode, ctx: &MaySleep) -> Result {
    let switch = SWITCH.get().ok_or(ENODEV)?;
    let _guard = switch.lock.lock();
    MODE.store(m as u8, Ordering::Relaxed);
    let key = c_static_key_false!(gcma_thp_on);
    if m != Mode::Never && have_areas() {
        key.enable(ctx);
    } else {
        key.disable(ctx);
    }
    Ok(())
}

/// Who allocates, for the counters.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum User {
    /// The anonymous PMD fault.
    Fault,
    /// khugepaged's collapse (or `MADV_COLLAPSE`).
    Collapse,
}

/// A PMD-sized compound page from a THP area on a node `allowed` accepts,
/// on node `nid` if one has room there, else on any other allowed; NULL if
/// none has room.  An area on a node `allowed` refuses is never used.
///
/// `gfp` goes to the page allocator's allocation steps (it includes
/// `__GFP_COMP`).  May sleep, which `ctx` allows: pages lent to DMEM are
/// discarded first.
pub(crate) fn alloc(
    ctx: &MaySleep,
    gfp: bindings::gfp_t,
    nid: c_int,
    allowed: impl Fn(NodeId) -> bool,
    user: User,
) -> *mut bindings::page {
    let (ok, fail) = match user {
        User::Collapse => (&COUNTERS.collapse_alloc, &COUNTERS.collapse_fail),
        User::Fault => (&COUNTERS.fault_alloc, &COUNTERS.fault_fail),
    };
    let node = |a: &Area| numa::node_of_pfn(a.base_pfn).ok();
    let usable = || areas().filter(|&a| node(a).is_some_and(&allowed));
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

/// The folio of a THP from an area, on node `nid` or another of `allowed`
/// (`None`: any) that the current task's cpuset lets `gfp` use, as the
/// page allocator would choose; `None` if no such area has room.  May
/// sleep, which `ctx` allows.
fn area_folio(
    ctx: &MaySleep,
    gfp: bindings::gfp_t,
    nid: c_int,
    allowed: Option<&NodeMask>,
    user: User,
) -> Option<NonNull<bindings::folio>> {
    let ok =
        |n: NodeId| allowed.map_or(true, |m| m.contains(n)) && mempolicy::cpuset_allows(n, gfp);
    let gfp = gfp | GFP_COMP | bindings::__GFP_NOWARN;
    let page = NonNull::new(alloc(ctx, gfp, nid, ok, user))?;
    // SAFETY: a compound page of PMD order that the allocation just made
    // ours.
    Some(unsafe { mempolicy::rmappable_folio(page) })
}

/// The folio of an anonymous PMD fault at `haddr` in `vma` from an area,
/// on the nodes the VMA's memory policy gives.
fn fault_folio(
    ctx: &MaySleep,
    gfp: bindings::gfp_t,
    vma: &VmaRef,
    haddr: usize,
) -> Option<NonNull<bindings::folio>> {
    #[cfg(CONFIG_NUMA)]
    {
        let policy = mempolicy::VmaPolicy::of(vma, haddr, PMD_ORDER)?;
        let at = policy.placement(gfp);
        area_folio(ctx, gfp, at.preferred, at.allowed, User::Fault)
    }
    #[cfg(not(CONFIG_NUMA))]
    {
        let _ = (vma, haddr);
        let nid = numa::current_node().as_u32() as c_int;
        area_folio(ctx, gfp, nid, None, User::Fault)
    }
}

/// The folio of an anonymous PMD fault at `haddr` in `vma`, for
/// `gcma_vma_alloc_thp()` (`include/linux/gcma_thp.h`) while guaranteed THP
/// is on: from the page allocator, a THP area, or both, in the order the
/// mode gives ([`decide`]); NULL if neither has one.  The folio and its
/// reference are the caller's.
///
/// # Safety
///
/// Called by the anonymous PMD fault, which holds `vma`'s mmap lock or
/// per-VMA lock for the call, and may sleep: it holds no spinlock and is
/// in no RCU read-side section when it allocates.
#[no_mangle]
pub(crate) unsafe extern "C" fn __gcma_vma_alloc_thp(
    gfp: bindings::gfp_t,
    vma: *mut bindings::vm_area_struct,
    haddr: c_ulong,
) -> *mut bindings::folio {
    // SAFETY: the fault path holds a lock that keeps `vma` during the call.
    let vma = unsafe { VmaRef::from_raw(vma) };
    // SAFETY: the fault path may sleep here (the caller's contract).
    let ctx = unsafe { MaySleep::new() };
    let plan = decide(
        mode(),
        have_areas(),
        Request::Fault(FaultVma::of(vma, haddr)),
    );
    plan.run(
        || fault_folio(&ctx, gfp, vma, haddr),
        || mempolicy::vma_alloc_folio(gfp, PMD_ORDER, vma, haddr, true),
    )
    .map_or(core::ptr::null_mut(), NonNull::as_ptr)
}

/// The folio of an anonymous collapse by khugepaged (or `MADV_COLLAPSE`),
/// for `gcma_collapse_alloc_thp()`, on node `nid` or another of `nmask`
/// (NULL: any): as [`__gcma_vma_alloc_thp`], the order from [`decide`].
///
/// # Safety
///
/// Called by the collapse, which may sleep there; `nmask` is NULL or
/// points to a node mask that nobody changes during the call.
#[no_mangle]
pub(crate) unsafe extern "C" fn __gcma_collapse_alloc_thp(
    gfp: bindings::gfp_t,
    nid: c_int,
    nmask: *mut bindings::nodemask_t,
) -> *mut bindings::folio {
    // SAFETY: NULL, or a mask nobody changes during the call (the caller's
    // contract).
    let allowed = (!nmask.is_null()).then(|| unsafe { NodeMask::from_raw(nmask) });
    // SAFETY: the collapse may sleep here (the caller's contract).
    let ctx = unsafe { MaySleep::new() };
    let plan = decide(mode(), have_areas(), Request::Collapse);
    plan.run(
        || area_folio(&ctx, gfp, nid, allowed, User::Collapse),
        || mempolicy::alloc_folio(gfp, PMD_ORDER, nid, allowed),
    )
    .map_or(core::ptr::null_mut(), NonNull::as_ptr)
}

/// Whether a THP area is in service.
fn have_areas() -> bool {
    NR_AREAS.load(Ordering::Acquire) > 0
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
