// SPDX-License-Identifier: GPL-2.0

//! Where an allocation may put its pages: the memory policy that applies to
//! an address of a VMA, the current task's cpuset, and the allocations of
//! folios that follow them; and the folio of a transparent huge page.
//!
//! An allocator of its own that serves the page fault or khugepaged in
//! place of the page allocator (guaranteed THP in GCMA) must keep to the
//! same nodes the page allocator would: [`VmaPolicy::placement`] gives
//! them for a fault, [`cpuset_allows`] filters them by the cpuset.
//!
//! C headers: [`include/linux/mempolicy.h`](srctree/include/linux/mempolicy.h),
//! [`include/linux/cpuset.h`](srctree/include/linux/cpuset.h),
//! [`include/linux/gfp.h`](srctree/include/linux/gfp.h)

use crate::{
    bindings,
    ffi::c_int,
    mm::{
        numa::{NodeId, NodeMask},
        virt::VmaRef,
    },
};
#[cfg(CONFIG_NUMA)]
use core::marker::PhantomData;
use core::ptr::NonNull;

/// Where an allocation goes.
pub struct Placement<'a> {
    /// The node to try first.
    pub preferred: c_int,
    /// The nodes the allocation must keep to; `None` for any node.
    pub allowed: Option<&'a NodeMask>,
}

/// The memory policy that applies to an address of a VMA
/// (`get_vma_policy()`), held for an allocation there.
///
/// # Invariants
///
/// `pol` is the policy `get_vma_policy()` returned for the VMA, with the
/// reference it took if the policy is shared, which drop gives back
/// (`mpol_cond_put()`); `ilx` is the interleave index it gave.
#[cfg(CONFIG_NUMA)]
pub struct VmaPolicy<'a> {
    pol: NonNull<bindings::mempolicy>,
    ilx: crate::ffi::c_ulong,
    _vma: PhantomData<&'a VmaRef>,
}

#[cfg(CONFIG_NUMA)]
impl<'a> VmaPolicy<'a> {
    /// Takes the policy of address `addr` of `vma` for an allocation of
    /// order `order`: the VMA's, the task's, or the system default.
    pub fn of(vma: &'a VmaRef, addr: usize, order: u32) -> Option<Self> {
        let mut ilx = 0;
        // SAFETY: the VMA is live and locked for `'a` (`VmaRef`'s
        // invariant), as `get_vma_policy()` wants; `ilx` is writable.
        let pol =
            unsafe { bindings::get_vma_policy(vma.as_raw(), addr as _, order as c_int, &mut ilx) };
        // INVARIANT: the policy and its reference, as taken.
        NonNull::new(pol).map(|pol| Self {
            pol,
            ilx,
            _vma: PhantomData,
        })
    }

    /// Where an allocation with `gfp` goes under the policy
    /// (`policy_nodemask()`), starting from the current node.  The nodes
    /// of a "preferred many" policy are preferences, which the page
    /// allocator goes beyond when they are full: they do not limit the
    /// allocation here either.
    pub fn placement(&self, gfp: bindings::gfp_t) -> Placement<'_> {
        // SAFETY: FFI call without preconditions.
        let mut nid = unsafe { bindings::numa_node_id() };
        // SAFETY: the policy is held (type invariant); `nid` is writable.
        let mask =
            unsafe { bindings::rsmm_policy_nodemask(gfp, self.pol.as_ptr(), self.ilx, &mut nid) };
        // SAFETY: the policy is held, and its mode never changes.
        let many = u32::from(unsafe { (*self.pol.as_ptr()).mode }) == bindings::MPOL_PREFERRED_MANY;
        let allowed = if many || mask.is_null() {
            None
        } else {
            // SAFETY: the mask is the policy's own (or the cpuset's it was
            // bound to), which does not change while the policy is held,
            // and the result borrows `self`.
            Some(unsafe { NodeMask::from_raw(mask) })
        };
        Placement {
            preferred: nid,
            allowed,
        }
    }
}

#[cfg(CONFIG_NUMA)]
impl Drop for VmaPolicy<'_> {
    fn drop(&mut self) {
        // SAFETY: the reference `get_vma_policy()` took, if any, given
        // back once (type invariant).
        unsafe { bindings::rsmm_mpol_cond_put(self.pol.as_ptr()) };
    }
}

/// Whether the current task's cpuset lets an allocation with `gfp` use
/// `node`: always without cpusets, and while no cpuset limits a task.
pub fn cpuset_allows(node: NodeId, gfp: bindings::gfp_t) -> bool {
    #[cfg(CONFIG_CPUSETS)]
    {
        // SAFETY: FFI calls without preconditions; `node` is a possible
        // node (`NodeId`'s invariant).
        unsafe {
            !bindings::rsmm_cpusets_enabled()
                || bindings::cpuset_node_allowed(node.index() as c_int, gfp)
        }
    }
    #[cfg(not(CONFIG_CPUSETS))]
    {
        let _ = (node, gfp);
        true
    }
}

/// Allocates a folio of order `order` for address `addr` of `vma`, under
/// the memory policy there (`vma_alloc_folio()`), a huge page's if
/// `hugepage`.  The folio and its reference are the caller's.  Sleeps if
/// `gfp` allows it.
pub fn vma_alloc_folio(
    gfp: bindings::gfp_t,
    order: u32,
    vma: &VmaRef,
    addr: usize,
    hugepage: bool,
) -> Option<NonNull<bindings::folio>> {
    // SAFETY: the VMA is live and locked (`VmaRef`'s invariant).
    NonNull::new(unsafe {
        bindings::rsmm_vma_alloc_folio_noprof(
            gfp,
            order as c_int,
            vma.as_raw(),
            addr as _,
            hugepage,
        )
    })
}

/// Allocates a folio of order `order` on node `nid`, or on another of
/// `allowed` (`None`: any node), as `__folio_alloc()` does.  The folio and
/// its reference are the caller's.  Sleeps if `gfp` allows it.
pub fn alloc_folio(
    gfp: bindings::gfp_t,
    order: u32,
    nid: c_int,
    allowed: Option<&NodeMask>,
) -> Option<NonNull<bindings::folio>> {
    let mask = allowed.map_or(core::ptr::null_mut(), NodeMask::as_raw);
    // SAFETY: the page allocator only reads the node mask.
    NonNull::new(unsafe { bindings::__folio_alloc_noprof(gfp, order, nid, mask) })
}

/// Makes the compound page `page` a large rmappable folio, as the page
/// allocator makes the folio of a transparent huge page
/// (`page_rmappable_folio()`), and returns the folio.
///
/// # Safety
///
/// `page` is the head of a compound page of order 2 or more that the
/// caller owns: allocated, and neither mapped nor shared yet.
pub unsafe fn rmappable_folio(page: NonNull<bindings::page>) -> NonNull<bindings::folio> {
    // SAFETY: the caller's contract; the folio is the page's own.
    let folio = unsafe { bindings::rsmm_page_rmappable_folio(page.as_ptr()) };
    // SAFETY: `page_rmappable_folio()` returns the folio of a non-NULL page.
    unsafe { NonNull::new_unchecked(folio) }
}
