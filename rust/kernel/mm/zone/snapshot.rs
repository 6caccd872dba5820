// SPDX-License-Identifier: GPL-2.0

//! A racy read of one page of a zone, [`Zone::page_snapshot`]: the page's
//! flags and counts, each read once through a one-line helper, and what a
//! [`PageSnapshot`] makes of them (see the parent module's "Racy
//! snapshots").

use super::{OnlineMems, Zone};
use crate::bindings;
use core::marker::PhantomData;

/// What is read of one page (one racy snapshot of its state), by
/// [`Zone::page_snapshot`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageSnapshot {
    /// The order of the free buddy block the page heads (`PageBuddy()`),
    /// or `None` if it heads none.
    pub buddy_order: Option<u32>,
    /// The order of the compound page (folio) it belongs to, 0 if none.
    pub folio_order: u32,
    /// `PageReserved()`: boot-time and firmware reservations, the memory
    /// map, the kernel image.
    pub reserved: bool,
    /// The page (its folio's head) has no reference: free, but not in the
    /// buddy lists (per-cpu lists, pages being freed, free pages of a GCMA
    /// area or of the hugetlb pool).
    pub unreferenced: bool,
    /// The folio can be migrated: not a slab, and on an LRU list, with
    /// `movable_ops` (`__PageMovable()`), or a hugetlb page.
    pub movable: bool,
}

/// The `struct page` of an online page frame, read racily: every method
/// reads the page's words once, while the page allocator and the page's
/// owner may change them.
///
/// # Invariants
///
/// `ptr` points to the `struct page` of an online page frame.  The memory
/// map it lies in stays allocated and initialised for `'a`: memory
/// hot-remove, the only thing that tears a memory map down, is held off
/// while the borrowed [`OnlineMems`] lives.
#[derive(Clone, Copy)]
struct OnlinePage<'a> {
    ptr: *mut bindings::page,
    _online: PhantomData<&'a OnlineMems>,
}

impl<'a> OnlinePage<'a> {
    /// Returns the page of `pfn`, or `None` if `pfn` has no online
    /// `struct page`.
    fn of_pfn(pfn: usize, _online: &'a OnlineMems) -> Option<Self> {
        // SAFETY: `pfn_to_online_page()` may be asked about any pfn.
        let ptr = unsafe { bindings::rsmm_pfn_to_online_page(pfn as _) };
        // INVARIANT: a non-null result is the page of an online pfn, and
        // `_online` holds off hot-remove for `'a`.
        (!ptr.is_null()).then_some(Self {
            ptr,
            _online: PhantomData,
        })
    }

    /// Returns the zone the page belongs to (`page_zone()`).
    fn zone(self) -> *mut bindings::zone {
        // SAFETY: `ptr` is a valid `struct page` (type invariants).
        unsafe { bindings::rsmm_page_zone(self.ptr) }
    }

    /// Returns the order of the free buddy block the page heads
    /// (`PageBuddy()`), or `None` if it heads none.
    fn buddy_order(self) -> Option<u32> {
        // SAFETY: `ptr` is a valid `struct page` (type invariants).
        if !unsafe { bindings::rsmm_page_buddy(self.ptr) } {
            return None;
        }
        // SAFETY: as above.
        let order = unsafe { bindings::rsmm_buddy_order_racy(self.ptr) };
        // Changes under the zone lock: a snapshot, bounded.
        Some(order.min(255) as u32)
    }

    /// Returns the head of the compound page the page is part of, or the
    /// page itself if it is part of none (`compound_head()`).
    fn head(self) -> Self {
        // SAFETY: `ptr` is a valid `struct page` (type invariants).
        let ptr = unsafe { bindings::rsmm_compound_head(self.ptr) };
        // INVARIANT: a compound head found from a racy read is a `struct
        // page` of online memory too, in the memory map `_online` keeps.
        Self {
            ptr,
            _online: PhantomData,
        }
    }

    /// Returns the order of the compound page the page heads, 0 if none
    /// (`compound_order()`).
    fn compound_order(self) -> u32 {
        // SAFETY: `ptr` is a valid `struct page` (type invariants).
        unsafe { bindings::rsmm_compound_order(self.ptr) }
    }

    /// Returns whether `PG_reserved` is set.
    fn reserved(self) -> bool {
        // SAFETY: `ptr` is a valid `struct page` (type invariants).
        unsafe { bindings::rsmm_page_reserved_bit(self.ptr) }
    }

    /// Returns the page's reference count (`page_ref_count()`).
    fn ref_count(self) -> i32 {
        // SAFETY: `ptr` is a valid `struct page` (type invariants).
        unsafe { bindings::rsmm_page_ref_count(self.ptr) }
    }

    /// Returns whether the page belongs to the slab allocator
    /// (`PageSlab()`).
    fn slab(self) -> bool {
        // SAFETY: `ptr` is a valid `struct page` (type invariants).
        unsafe { bindings::rsmm_page_slab(self.ptr) }
    }

    /// Returns whether `PG_lru` is set.
    fn lru(self) -> bool {
        // SAFETY: `ptr` is a valid `struct page` (type invariants).
        unsafe { bindings::rsmm_page_lru_bit(self.ptr) }
    }

    /// Returns whether the page has `movable_ops` (`__PageMovable()`).
    fn movable_ops(self) -> bool {
        // SAFETY: `ptr` is a valid `struct page` (type invariants).
        unsafe { bindings::rsmm_page_movable_ops(self.ptr) }
    }

    /// Returns whether the page is a hugetlb page (`PageHuge()`).
    fn huge(self) -> bool {
        // SAFETY: `ptr` is a valid `struct page` (type invariants).
        unsafe { bindings::rsmm_page_huge(self.ptr) }
    }
}

impl Zone {
    /// Reads the page at `pfn` (a racy snapshot of its state), or returns
    /// `None` for a hole: a page frame without an online `struct page`, or
    /// whose page belongs to another zone.
    ///
    /// Any `pfn` may be asked for; `online` proves that memory hot-remove
    /// is held off, so that the memory map read stays in place.
    ///
    /// Flags are read as bits, without the checks of the `PageFoo()`
    /// accessors, and each word once: the page may change between two
    /// reads, so the fields of the snapshot need not agree with each other.
    pub fn page_snapshot(&self, pfn: usize, online: &OnlineMems) -> Option<PageSnapshot> {
        let page = OnlinePage::of_pfn(pfn, online)?;
        if page.zone() != self.as_ptr() {
            return None;
        }
        let buddy_order = page.buddy_order();
        let head = page.head();
        Some(PageSnapshot {
            buddy_order,
            folio_order: head.compound_order(),
            reserved: page.reserved(),
            unreferenced: head.ref_count() == 0,
            // A slab's own fields overlay `page->mapping`: never movable.
            movable: !head.slab() && (head.lru() || head.movable_ops() || head.huge()),
        })
    }
}
