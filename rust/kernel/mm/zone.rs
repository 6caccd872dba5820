// SPDX-License-Identifier: GPL-2.0

//! Memory zones and pageblocks, read-only: what fragmentation metrics need.
//!
//! Each online node has its zones (`DMA`, `DMA32`, `Normal`, `Movable`...),
//! each a range of page frame numbers whose free pages the buddy allocator
//! keeps in free lists per order.  A zone is cut into pageblocks of
//! [`pageblock_nr_pages`] pages, each tagged with a [`MigrateType`]: the
//! page allocator's anti-fragmentation groups allocations by mobility at
//! that granularity.
//!
//! # Racy snapshots
//!
//! Nothing here takes the zone lock: every number is read while the page
//! allocator may change it, exactly as `/proc/buddyinfo` and
//! `/proc/pagetypeinfo` read them.  A [`FreeArea`] or a
//! [`PageSnapshot`] is therefore a snapshot that may be inconsistent
//! with the zone's state at any single instant (a block may be counted
//! while it splits or merges), but each number read is a value the field
//! did hold.  The reads themselves are sound: a zone is never freed (see
//! [`Zone`]), and a `struct page` is only read for page frame numbers that
//! `pfn_to_online_page()` finds, whose memory map is always allocated and
//! initialised; memory hot-remove, the only thing that tears a memory map
//! down, is held off with `get_online_mems()` ([`OnlineMems`]) while a
//! page is read.
//!
//! This module is the mechanism only: what to make of the pages read (a
//! census of a pageblock, a measure of its pollution) is its users'
//! policy, e.g. GCMA's fragmentation metrics (`mm/gcma_rs/frag.rs`).
//!
//! C headers: [`include/linux/mmzone.h`](srctree/include/linux/mmzone.h),
//! [`include/linux/pageblock-flags.h`](srctree/include/linux/pageblock-flags.h),
//! [`include/linux/memory_hotplug.h`](srctree/include/linux/memory_hotplug.h)

use crate::{
    bindings,
    mm::{numa::NodeId, MAX_PAGE_ORDER},
    str::CStr,
    types::Opaque,
};
use core::{fmt, marker::PhantomData, ops::Range};

mod snapshot;

pub use snapshot::PageSnapshot;

/// Number of orders the buddy allocator keeps free lists for
/// (`NR_PAGE_ORDERS`, i.e. `MAX_PAGE_ORDER + 1`).
pub const NR_PAGE_ORDERS: usize = MAX_PAGE_ORDER as usize + 1;

/// Returns the order of a pageblock (`pageblock_order`): 9 on x86-64, the
/// order of a PMD-sized huge page.
pub fn pageblock_order() -> u32 {
    // SAFETY: FFI call without preconditions.
    unsafe { bindings::rsmm_pageblock_order() }
}

/// Returns the number of pages in a pageblock (`pageblock_nr_pages`).
///
/// # Examples
///
/// ```
/// use kernel::mm::{self, zone};
///
/// assert!(zone::pageblock_order() <= mm::MAX_PAGE_ORDER);
/// assert_eq!(zone::pageblock_nr_pages(), 1 << zone::pageblock_order());
/// ```
pub fn pageblock_nr_pages() -> usize {
    1 << pageblock_order()
}

/// A memory zone of a node (`struct zone`).
///
/// Zones are only handed out as `&'static Zone`: a zone is an element of
/// its node's `pg_data_t`, which Linux 6.12 allocates at boot for every
/// node that has memory then (and, with memory hotplug, for every possible
/// node) and never frees, even when the node goes offline.  Its fields
/// change while it is in use; they are only read, as racy snapshots (see
/// the [module documentation](self)).
///
/// # Invariants
///
/// `self.0` is a zone of a node's `pg_data_t`, which lives forever.
#[repr(transparent)]
pub struct Zone(Opaque<bindings::zone>);

// SAFETY: a zone is a kernel-wide object that the kernel itself uses from
// every CPU; this type only reads it, through racy-snapshot helpers.
unsafe impl Sync for Zone {}
// SAFETY: as above; `Zone` owns nothing.
unsafe impl Send for Zone {}

/// Returns the zones of `node`, lowest (`DMA`) first, populated or not;
/// none if the node is offline.
///
/// # Examples
///
/// ```
/// use kernel::mm::{numa, zone};
///
/// let node = numa::current_node();
/// let mut populated = 0;
/// for z in zone::zones(node) {
///     assert!(z.node() == node);
///     assert_eq!(z.end_pfn(), z.start_pfn() + z.spanned_pages());
///     assert!(z.present_pages() <= z.spanned_pages());
///     assert!(z.managed_pages() <= z.present_pages());
///     if z.is_populated() {
///         populated += 1;
///         assert!(z.present_pages() > 0);
///     }
/// }
/// // The node of the running CPU has memory in QEMU and on the test machines.
/// assert!(populated > 0);
/// # Ok::<(), Error>(())
/// ```
pub fn zones(node: NodeId) -> impl Iterator<Item = &'static Zone> {
    (0u32..)
        .map(move |idx| {
            // SAFETY: FFI call; the helper checks the node id and the zone
            // index and returns NULL for a node that is offline or has no
            // `pg_data_t`.
            unsafe { bindings::rsmm_node_zone(node.as_u32() as _, idx) }
        })
        .take_while(|z| !z.is_null())
        // SAFETY: a non-NULL result is a zone of a `pg_data_t`, which is
        // never freed, so it may be borrowed for 'static.
        .map(|z| unsafe { Zone::from_raw(z) })
}

/// Returns the zones of all online nodes, node by node.
pub fn all_zones() -> impl Iterator<Item = &'static Zone> {
    NodeId::all().filter(|n| n.is_online()).flat_map(zones)
}

impl Zone {
    /// Borrows the zone at `ptr` for good.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a zone of a `pg_data_t` (which is never freed).
    pub(crate) unsafe fn from_raw(ptr: *mut bindings::zone) -> &'static Self {
        // INVARIANT: by the function's safety requirement.
        // SAFETY: `Zone` is a transparent wrapper of the C struct, and the
        // struct lives forever by the function's safety requirement.
        unsafe { &*ptr.cast::<Self>() }
    }

    fn as_ptr(&self) -> *mut bindings::zone {
        self.0.get()
    }

    /// Returns the zone's name (`"DMA"`, `"DMA32"`, `"Normal"`, ...).
    pub fn name(&self) -> &'static CStr {
        // SAFETY: the zone is valid (type invariant); its `name` points to
        // a static string set at boot.
        unsafe { CStr::from_char_ptr(bindings::rsmm_zone_name(self.as_ptr())) }
    }

    /// Returns the node the zone belongs to.
    pub fn node(&self) -> NodeId {
        // SAFETY: the zone is valid (type invariant).
        let nid = unsafe { bindings::rsmm_zone_nid(self.as_ptr()) };
        NodeId::from_kernel(nid as u32)
    }

    /// Returns the zone's index in its node (`zone_idx()`: 0 for the
    /// lowest zone).
    pub fn index(&self) -> usize {
        // SAFETY: the zone is valid (type invariant).
        unsafe { bindings::rsmm_zone_idx(self.as_ptr()) as usize }
    }

    /// Returns the first page frame number the zone spans.
    pub fn start_pfn(&self) -> usize {
        // SAFETY: the zone is valid (type invariant); a racy read.
        unsafe { bindings::rsmm_zone_start_pfn(self.as_ptr()) as usize }
    }

    /// Returns the number of page frames the zone spans, holes included.
    pub fn spanned_pages(&self) -> usize {
        // SAFETY: the zone is valid (type invariant); a racy read.
        unsafe { bindings::rsmm_zone_spanned_pages(self.as_ptr()) as usize }
    }

    /// Returns the page frame number right after the zone's span.
    pub fn end_pfn(&self) -> usize {
        self.start_pfn() + self.spanned_pages()
    }

    /// Returns the page frame numbers the zone spans (one snapshot of its
    /// start and size).
    pub fn pfns(&self) -> Range<usize> {
        let start = self.start_pfn();
        start..start + self.spanned_pages()
    }

    /// Returns the number of pages that exist in the zone's span (spanned
    /// pages less the holes).
    pub fn present_pages(&self) -> usize {
        // SAFETY: the zone is valid (type invariant); a racy read.
        unsafe { bindings::rsmm_zone_present_pages(self.as_ptr()) as usize }
    }

    /// Returns the number of pages the buddy allocator manages in the zone
    /// (present pages less those reserved at boot).
    pub fn managed_pages(&self) -> usize {
        // SAFETY: the zone is valid (type invariant); an atomic read.
        unsafe { bindings::rsmm_zone_managed_pages(self.as_ptr()) as usize }
    }

    /// Returns whether the zone has memory (`populated_zone()`).
    pub fn is_populated(&self) -> bool {
        self.present_pages() != 0
    }

    /// Returns the number of free blocks of `order` in the zone's buddy
    /// lists (`free_area[order].nr_free`, a racy read), 0 for an order the
    /// buddy allocator does not have.
    pub fn free_blocks(&self, order: u32) -> usize {
        if order as usize >= NR_PAGE_ORDERS {
            return 0;
        }
        // SAFETY: the zone is valid (type invariant) and `order` is below
        // `NR_PAGE_ORDERS`, checked just above.
        unsafe { bindings::rsmm_zone_nr_free(self.as_ptr(), order) as usize }
    }

    /// Returns a snapshot of the free blocks per order.
    ///
    /// The orders are read one after the other while the allocator runs,
    /// so the snapshot is racy (see the [module documentation](self)); its
    /// total is that of the counts it holds.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::mm::{numa, zone};
    ///
    /// for z in zone::zones(numa::current_node()) {
    ///     let free = z.free_area();
    ///     let sum: usize = (0..zone::NR_PAGE_ORDERS).map(|o| free.nr_free[o] << o).sum();
    ///     assert_eq!(free.free_pages(), sum);
    ///     if !z.is_populated() {
    ///         assert_eq!(free.free_pages(), 0);
    ///     }
    /// }
    /// ```
    pub fn free_area(&self) -> FreeArea {
        FreeArea {
            nr_free: core::array::from_fn(|o| self.free_blocks(o as u32)),
        }
    }

    /// Iterates over the pageblocks the zone spans, in pfn order, from a
    /// snapshot of the zone's span.
    ///
    /// The first and last pageblocks may stick out of the zone when its
    /// span is not pageblock-aligned; [`Pageblock::pfns`] is the part in
    /// the zone.  The iterator itself reads no page and never sleeps.
    ///
    /// # Examples
    ///
    /// The pageblocks tile the zone's span:
    ///
    /// ```
    /// use kernel::mm::{numa, zone};
    ///
    /// let nr = zone::pageblock_nr_pages();
    /// for z in zone::zones(numa::current_node()).filter(|z| z.is_populated()) {
    ///     let span = z.pfns();
    ///     let mut next = span.start;
    ///     for pb in z.pageblocks() {
    ///         assert_eq!(pb.pfns().start, next);
    ///         assert_eq!(pb.start_pfn() % nr, 0);
    ///         assert!(pb.start_pfn() <= next && pb.pfns().end <= pb.start_pfn() + nr);
    ///         assert!(!pb.pfns().is_empty());
    ///         next = pb.pfns().end;
    ///     }
    ///     assert_eq!(next, span.end);
    /// }
    /// ```
    pub fn pageblocks(&'static self) -> Pageblocks {
        let pfns = self.pfns();
        Pageblocks {
            zone: self,
            next: pfns.start,
            end: pfns.end,
        }
    }
}

impl fmt::Debug for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node{}/{}", self.node().as_u32(), self.name())
    }
}

/// A snapshot of a zone's free blocks per order (racy: see the [module
/// documentation](self)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FreeArea {
    /// Free blocks of each order (`free_area[order].nr_free`).
    pub nr_free: [usize; NR_PAGE_ORDERS],
}

impl FreeArea {
    /// Returns the free pages the snapshot holds: the sum of
    /// `nr_free[order] << order`.
    pub fn free_pages(&self) -> usize {
        self.nr_free
            .iter()
            .enumerate()
            .map(|(order, n)| n << order)
            .sum()
    }
}

/// The migrate type of a pageblock (`enum migratetype`): which
/// allocations the page allocator serves from it first.
///
/// `Cma` occurs only with `CONFIG_CMA` and `Isolate` only with
/// `CONFIG_MEMORY_ISOLATION`, as in the C enum; any other value is
/// `Other`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MigrateType {
    /// Kernel allocations that cannot move (`MIGRATE_UNMOVABLE`).
    Unmovable,
    /// Pages that can be migrated: user memory, page cache
    /// (`MIGRATE_MOVABLE`).
    Movable,
    /// Pages that can be reclaimed, such as shrinkable slab caches
    /// (`MIGRATE_RECLAIMABLE`).
    Reclaimable,
    /// Reserved for high-order atomic allocations (`MIGRATE_HIGHATOMIC`).
    HighAtomic,
    /// A CMA area's pageblock: movable allocations only (`MIGRATE_CMA`).
    Cma,
    /// Being isolated, e.g. for a contiguous allocation or memory offlining
    /// (`MIGRATE_ISOLATE`).
    Isolate,
    /// A value this enum does not know.
    Other(u32),
}

impl MigrateType {
    /// Returns the migrate type of the C value `v`.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::{bindings, mm::zone::MigrateType};
    ///
    /// let movable = MigrateType::from_raw(bindings::migratetype_MIGRATE_MOVABLE);
    /// assert_eq!(movable, MigrateType::Movable);
    /// assert_eq!(MigrateType::from_raw(1000), MigrateType::Other(1000));
    /// assert_eq!(MigrateType::Unmovable.name(), "Unmovable");
    /// ```
    pub fn from_raw(v: u32) -> Self {
        match v {
            bindings::migratetype_MIGRATE_UNMOVABLE => Self::Unmovable,
            bindings::migratetype_MIGRATE_MOVABLE => Self::Movable,
            bindings::migratetype_MIGRATE_RECLAIMABLE => Self::Reclaimable,
            bindings::migratetype_MIGRATE_HIGHATOMIC => Self::HighAtomic,
            #[cfg(CONFIG_CMA)]
            bindings::migratetype_MIGRATE_CMA => Self::Cma,
            #[cfg(CONFIG_MEMORY_ISOLATION)]
            bindings::migratetype_MIGRATE_ISOLATE => Self::Isolate,
            v => Self::Other(v),
        }
    }

    /// Returns the name `/proc/pagetypeinfo` gives the type.
    pub fn name(self) -> &'static str {
        match self {
            Self::Unmovable => "Unmovable",
            Self::Movable => "Movable",
            Self::Reclaimable => "Reclaimable",
            Self::HighAtomic => "HighAtomic",
            Self::Cma => "CMA",
            Self::Isolate => "Isolate",
            Self::Other(_) => "Other",
        }
    }
}

/// One pageblock of a zone.
///
/// # Examples
///
/// The pages of a pageblock, read under [`OnlineMems`]:
///
/// ```
/// use kernel::mm::{numa, zone::{self, MigrateType, OnlineMems}};
///
/// // SAFETY: a doctest runs in its KUnit case's process context, with no
/// // atomic section active.
/// let ctx = unsafe { kernel::delay::MaySleep::new() };
/// let mut blocks = 0;
/// let mut typed = 0;
/// for z in zone::zones(numa::current_node()).filter(|z| z.is_populated()) {
///     for pb in z.pageblocks() {
///         let online = OnlineMems::get(&ctx);
///         let read = pb.pfns().filter_map(|pfn| z.page_snapshot(pfn, &online)).count();
///         assert!(read <= pb.pfns().len());
///         blocks += 1;
///         if let Some(MigrateType::Movable | MigrateType::Unmovable) = pb.migrate_type() {
///             typed += 1;
///         }
///         drop(online);
///         kernel::delay::cond_resched(&ctx);
///     }
/// }
/// assert!(blocks > 0);
/// assert!(typed > 0);
/// ```
#[derive(Clone)]
pub struct Pageblock {
    zone: &'static Zone,
    start: usize,
    pfns: Range<usize>,
}

impl Pageblock {
    /// Returns the zone the pageblock was found in.
    pub fn zone(&self) -> &'static Zone {
        self.zone
    }

    /// Returns the first page frame number of the pageblock (a multiple of
    /// [`pageblock_nr_pages`], possibly below the zone's start).
    pub fn start_pfn(&self) -> usize {
        self.start
    }

    /// Returns the page frame numbers of the pageblock inside the zone's
    /// span (as the span was when the iteration began).
    pub fn pfns(&self) -> Range<usize> {
        self.pfns.clone()
    }

    /// Returns the migrate type of the pageblock, or `None` when its first
    /// page frame in the zone is not online (then its flags cannot be
    /// read).
    pub fn migrate_type(&self) -> Option<MigrateType> {
        // SAFETY: FFI call; the helper reads the pageblock flags only of a
        // pfn that `pfn_to_online_page()` finds, whose section and flags
        // are always allocated.
        let mt = unsafe { bindings::rsmm_pfn_migratetype(self.pfns.start as _) };
        u32::try_from(mt).ok().map(MigrateType::from_raw)
    }
}

impl fmt::Debug for Pageblock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pageblock {:#x}..{:#x}", self.pfns.start, self.pfns.end)
    }
}

/// The pageblocks of a zone, from [`Zone::pageblocks`].
pub struct Pageblocks {
    zone: &'static Zone,
    next: usize,
    end: usize,
}

impl Iterator for Pageblocks {
    type Item = Pageblock;

    fn next(&mut self) -> Option<Pageblock> {
        if self.next >= self.end {
            return None;
        }
        let nr = pageblock_nr_pages();
        let start = self.next & !(nr - 1);
        let end = (start + nr).min(self.end);
        let pb = Pageblock {
            zone: self.zone,
            start,
            pfns: self.next..end,
        };
        self.next = end;
        Some(pb)
    }
}

/// Holds off memory hot-remove (`get_online_mems()`) while it lives, so
/// that pages can be read with [`Zone::page_snapshot`].
///
/// Memory hotplug waits for it: hold it for a pageblock's worth of reads,
/// not across a whole zone.
///
/// The guard stays with the task that took it (`!Send`): the read lock it
/// stands for is released by its owner.
pub struct OnlineMems(PhantomData<*mut ()>);

impl OnlineMems {
    /// Holds off memory hot-remove until the guard is dropped.  May sleep
    /// (`ctx`).
    pub fn get(_ctx: &crate::delay::MaySleep) -> Self {
        // SAFETY: FFI call; it may sleep, which `_ctx` allows.
        unsafe { bindings::rsmm_get_online_mems() };
        Self(PhantomData)
    }
}

impl Drop for OnlineMems {
    fn drop(&mut self) {
        // SAFETY: pairs with the `get_online_mems()` of `get`.
        unsafe { bindings::rsmm_put_online_mems() };
    }
}

#[cfg(all(CONFIG_KUNIT, CONFIG_RUST_KERNEL_DOCTESTS))]
mod tests {
    //! KUnit suite `rust_kernel_mm_zone`, built alongside the kernel
    //! crate's doctests: the real zones and the pages read from them.  The
    //! census built on these reads is GCMA's, and tested there
    //! (`mm/gcma_rs/frag_tests.rs`).

    use super::*;
    use crate::{error::Result, kunit_expect};

    /// The real zones of every online node: names, nodes, and every page
    /// frame of a populated zone's span read once; the frames that are not
    /// present are among the holes and reserved pages found.
    fn real_zones_read() -> Result {
        // SAFETY: a KUnit case runs in process context, with no atomic
        // section active.
        let ctx = unsafe { crate::delay::MaySleep::new() };
        let mut populated = 0;
        for z in all_zones() {
            kunit_expect!(z.node().is_online(), "{:?} on an offline node", z);
            kunit_expect!(!z.name().as_bytes().is_empty());
            if !z.is_populated() {
                continue;
            }
            populated += 1;
            let (mut frames, mut holes, mut reserved) = (0, 0, 0);
            for pb in z.pageblocks() {
                let online = OnlineMems::get(&ctx);
                for pfn in pb.pfns() {
                    frames += 1;
                    match z.page_snapshot(pfn, &online) {
                        None => holes += 1,
                        Some(p) if p.reserved => reserved += 1,
                        Some(_) => {}
                    }
                }
                drop(online);
                crate::delay::cond_resched(&ctx);
            }
            kunit_expect!(frames == z.spanned_pages(), "{:?}: {} frames", z, frames);
            kunit_expect!(
                holes + reserved >= z.spanned_pages() - z.present_pages(),
                "{:?}: {} holes, {} reserved, present {}",
                z,
                holes,
                reserved,
                z.present_pages()
            );
        }
        kunit_expect!(populated > 0);
        Ok(())
    }

    crate::kunit_suite! {
        name: "rust_kernel_mm_zone",
        cases: [real_zones_read],
    }
}
