// SPDX-License-Identifier: GPL-2.0

//! Page frames that an allocator of its own owns for good.
//!
//! Some allocators own a range of physical memory for the life of the
//! system and never give its pages to the buddy allocator (GCMA's areas).
//! Their pages still go through the page allocator's allocation and free
//! steps (`post_alloc_hook()`, `free_pages_prepare()`), so that every
//! debugging option (KASAN, page poisoning, `init_on_alloc`/`init_on_free`,
//! `debug_pagealloc`, page_owner, allocation tags) treats them as it treats
//! buddy pages, and a page in a bad state is reported where the page
//! allocator would report it.
//!
//! [`OwnedFrames`] is such a range.  Each state a page can be in is a type,
//! and each step between states is a method that consumes one state and
//! returns the next:
//!
//! - **free**: no reference, the free steps done.  Only the owner's own
//!   bookkeeping (its map) knows which pages are free; it vouches for that
//!   when it claims them ([`OwnedFrames::claim`], [`OwnedFrames::lend`]).
//! - **lent** ([`LentPage`]): an order-0 page with the allocation steps
//!   done but no reference, so its memory may be copied to and from while
//!   the speculative references of pfn walkers fail on it.
//! - **claimed** ([`ClaimedRun`]): a run an allocation is assembling, of
//!   free pages and of lent pages it took over as they are
//!   ([`ClaimedRun::take_lent`]: the lent-to-allocated step without a
//!   round trip through the free state).
//! - **allocated**: handed to the caller as a `struct page` pointer
//!   ([`ClaimedRun::finish`]), plain pages with a reference each or one
//!   compound page; back through [`OwnedFrames::released`].
//!
//! The `unsafe` entry points are where the owner's bookkeeping stands in
//! for a check this module cannot make; every step after them is safe.
//!
//! The steps are reached through `mm/frames_rust.c`, plain functions of
//! vmlinux (the `rust/helpers` are exported to modules, and no page
//! allocator step may be).
//!
//! C headers: [`mm/internal.h`](srctree/mm/internal.h),
//! [`include/linux/page_ref.h`](srctree/include/linux/page_ref.h)

use crate::{bindings, c_str, delay::MaySleep, error::Result, mm::MAX_PAGE_ORDER, str::CStr};
use core::sync::atomic::{AtomicI32, Ordering};

mod bits;
mod run;

pub use bits::PageBits;
pub use run::{abandoned_runs, ClaimedRun, PageFate, ReleasedRun};

/// `__GFP_COMP` (a compound page), which bindgen does not export as a
/// constant.
pub const GFP_COMP: bindings::gfp_t = 1 << bindings::___GFP_COMP_BIT;

/// The order of the largest naturally aligned block that starts at `pfn`
/// and ends at or before `end`.
fn block_order(pfn: usize, end: usize) -> u32 {
    (pfn | (1 << MAX_PAGE_ORDER))
        .trailing_zeros()
        .min((end - pfn).ilog2())
        .min(MAX_PAGE_ORDER)
}

/// Reads the reference count of `page`, as `page_ref_count()` does (one
/// relaxed atomic load), without a call: this is on the path of every
/// page an allocation takes over.
///
/// # Safety
///
/// `page` must point to a `struct page` of the memory map.
#[inline]
unsafe fn ref_count(page: *mut bindings::page) -> i32 {
    // SAFETY: `_refcount` of a valid `struct page` is an aligned `int` that
    // C only accesses atomically; the caller guarantees validity.
    unsafe { AtomicI32::from_ptr(core::ptr::addr_of_mut!((*page)._refcount.counter)) }
        .load(Ordering::Relaxed)
}

/// Whether `page` is marked hardware-poisoned (`PageHWPoison()`), read
/// without a call: this is on the path of every page an allocation takes
/// over.
///
/// # Safety
///
/// `page` must point to a `struct page` of the memory map.
#[inline]
unsafe fn hwpoisoned(page: *mut bindings::page) -> bool {
    #[cfg(CONFIG_MEMORY_FAILURE)]
    {
        // SAFETY: `flags` of a valid `struct page` is an aligned word that
        // C changes with atomic bit operations; the caller guarantees
        // validity.
        let flags = unsafe {
            core::sync::atomic::AtomicUsize::from_ptr(core::ptr::addr_of_mut!((*page).flags))
        }
        .load(Ordering::Relaxed);
        flags & (1 << bindings::pageflags_PG_hwpoison) != 0
    }
    #[cfg(not(CONFIG_MEMORY_FAILURE))]
    {
        let _ = page;
        false
    }
}

/// Gives `page`, which has no reference, its first one, as
/// `set_page_refcounted()` does.  Without the `page_ref` tracepoints
/// (`CONFIG_DEBUG_PAGE_REF`), which only the C helper fires, that is one
/// atomic store, made here without a call: this is on the path of every
/// page an allocation takes over.
///
/// # Safety
///
/// `page` must point to a `struct page` of the memory map, with no
/// reference, not a tail page, that the caller may make allocated.
#[inline]
unsafe fn set_refcounted(page: *mut bindings::page) {
    if cfg!(CONFIG_DEBUG_PAGE_REF) || cfg!(CONFIG_DEBUG_VM) {
        // SAFETY: the caller's contract; the helper also checks it.
        unsafe { bindings::rsmm_frames_set_page_refcounted(page) };
        return;
    }
    // SAFETY: as in `ref_count`; `atomic_set()` is a relaxed store.
    unsafe { AtomicI32::from_ptr(core::ptr::addr_of_mut!((*page)._refcount.counter)) }
        .store(1, Ordering::Relaxed);
}

/// A range of page frames owned by one allocator for the life of the
/// system, outside the buddy allocator.
///
/// # Invariants
///
/// Every frame of `base_pfn..base_pfn + nr_pages` has a `struct page` in
/// the memory map, lies in one zone, and belongs to this value for good:
/// the buddy allocator never hands it out, and its state changes only
/// through this module's steps (the page allocator's free paths, which
/// give a block whose last reference went back to its owner, included).
/// `first` is the `struct page` of frame `base_pfn`.  `bad` has a bit for
/// each frame, set only for a page that a [`ClaimedRun`] counts among its
/// bad pages, or that one dropped without being given up leaked.
pub struct OwnedFrames {
    base_pfn: usize,
    nr_pages: usize,
    first: *mut bindings::page,
    /// The lent pages of claimed runs that their free steps found in a bad
    /// state (see [`ClaimedRun::take_lent_mask`]): the record is kept here,
    /// not in the `struct page`, whose fields may belong to whoever still
    /// holds a reference to the page.
    bad: PageBits,
}

// SAFETY: `first` points into the memory map, which is never freed; the
// pages' state is only changed through this module's steps, whose rules
// do not depend on the thread (type invariant).
unsafe impl Send for OwnedFrames {}
// SAFETY: as above; `&OwnedFrames` only reads the first three fields, and
// changes `bad` with atomic operations only.
unsafe impl Sync for OwnedFrames {}

impl OwnedFrames {
    /// Takes memory that memblock reserved for the caller and makes all of
    /// it free pages of the returned range.
    ///
    /// Memblock leaves its pages `PageReserved` with a reference each.
    /// Each naturally aligned block gets the page allocator's free steps,
    /// as memory memblock releases to the buddy allocator does, so the
    /// allocation steps later find what they expect.  The pageblocks wholly
    /// inside the range are isolated for good, so that memory offlining
    /// fails to isolate them (`-EBUSY`) instead of retrying for ever on
    /// pages that never become buddy pages; no free list changes, as no
    /// page of the range is on one.
    ///
    /// The range's own bookkeeping is allocated first: if that fails, the
    /// memory is left as memblock left it, and the error returned.
    ///
    /// # Safety
    ///
    /// `base_pfn..base_pfn + nr_pages` must be memory reserved in memblock
    /// for the caller alone, every page still as memblock left it, all of
    /// it in the memory map and in one zone.  It is given to the returned
    /// value for good: nobody else may ever allocate, free or map its
    /// pages, and no other `OwnedFrames` may cover any of them.
    pub unsafe fn adopt_reserved(base_pfn: usize, nr_pages: usize, ctx: &MaySleep) -> Result<Self> {
        let bad = PageBits::new(nr_pages)?;
        // INVARIANT: the caller gives the frames to this value for good,
        // and they have `struct page`s; no run exists yet, and no bit of
        // `bad` is set.
        // SAFETY: the frame has a `struct page` (the caller's contract).
        let first = unsafe { bindings::pfn_to_page(base_pfn as _) };
        let frames = Self {
            base_pfn,
            nr_pages,
            first,
            bad,
        };
        let end = base_pfn + nr_pages;
        let mut pfn = base_pfn;
        while pfn < end {
            let order = block_order(pfn, end);
            let n = 1usize << order;
            for i in 0..n {
                let page = frames.page(pfn - base_pfn + i);
                // SAFETY: the page is ours (the caller's contract) and in
                // the memory map; nobody else looks at its count or flags.
                unsafe {
                    bindings::rsmm_frames_clear_page_reserved(page);
                    bindings::rsmm_frames_set_page_count(page, 0);
                }
            }
            let first = frames.page(pfn - base_pfn);
            // SAFETY: as above.  Memblock's pages were never tagged: mark
            // the block's first page so (the free steps drop its tag), and
            // they have no state the free steps could report.
            unsafe {
                bindings::rsmm_frames_clear_page_tag_ref(first);
                bindings::rsmm_frames_free_pages_prepare(first, order);
            }
            pfn += n;
            crate::delay::cond_resched(ctx);
        }
        frames.isolate_pageblocks();
        Ok(frames)
    }

    /// Marks the pageblocks wholly inside the range isolated.
    fn isolate_pageblocks(&self) {
        if self.nr_pages == 0 {
            return;
        }
        // SAFETY: FFI call without preconditions.
        let block = 1usize << unsafe { bindings::rsmm_pageblock_order() };
        let end = self.base_pfn + self.nr_pages;
        // SAFETY: the first page is in the memory map (type invariant).
        let zone = unsafe { bindings::rsmm_page_zone(self.page(0)) };
        // SAFETY: `zone` is the zone of our pages, which lives as long as
        // they do; the lock is released below.
        let flags = unsafe { bindings::rsmm_frames_zone_lock_irqsave(zone) };
        let mut pfn = self.base_pfn.next_multiple_of(block);
        while pfn + block <= end {
            // SAFETY: the pageblock is ours (type invariant) and the zone
            // lock, which protects its migrate type, is held.
            unsafe {
                bindings::rsmm_frames_set_pageblock_migratetype(
                    self.page(pfn - self.base_pfn),
                    bindings::migratetype_MIGRATE_ISOLATE as _,
                )
            };
            pfn += block;
        }
        // SAFETY: locked above with these flags.
        unsafe { bindings::rsmm_frames_zone_unlock_irqrestore(zone, flags) };
    }

    /// Returns the frame number of page 0 of the range.
    #[inline]
    pub fn base_pfn(&self) -> usize {
        self.base_pfn
    }

    /// Returns the number of pages in the range.
    #[inline]
    pub fn nr_pages(&self) -> usize {
        self.nr_pages
    }

    /// Returns the index in the range of page frame `pfn`, if it is one of
    /// ours.
    #[inline]
    pub fn index_of_pfn(&self, pfn: usize) -> Option<usize> {
        let i = pfn.checked_sub(self.base_pfn)?;
        (i < self.nr_pages).then_some(i)
    }

    /// Returns the `struct page` of page `i` of the range.
    #[inline]
    fn page(&self, i: usize) -> *mut bindings::page {
        debug_assert!(i < self.nr_pages);
        if cfg!(all(CONFIG_SPARSEMEM, not(CONFIG_SPARSEMEM_VMEMMAP))) {
            // Classic sparsemem: the memory map is contiguous per section
            // only (`nth_page()`).
            // SAFETY: the frame has a `struct page` (type invariant).
            unsafe { bindings::pfn_to_page((self.base_pfn + i) as _) }
        } else {
            // A flat or virtually mapped memory map is contiguous.
            self.first.wrapping_add(i)
        }
    }

    /// Returns the `struct page` of page `i`, or NULL if there is none.
    ///
    /// The pointer gives no right to the page: what the caller may do with
    /// it depends on the state the page is in.
    pub fn page_ptr(&self, i: usize) -> *mut bindings::page {
        if i < self.nr_pages {
            self.page(i)
        } else {
            core::ptr::null_mut()
        }
    }

    /// Whether page `i` is marked hardware-poisoned (`false` beyond the
    /// range).
    pub fn is_hwpoisoned(&self, i: usize) -> bool {
        // SAFETY: a page of the range is in the memory map, and its flags
        // may be read in any state.
        i < self.nr_pages && unsafe { bindings::rsmm_page_hwpoisoned(self.page(i)) }
    }

    /// Why the allocated pages `start..start + count` cannot be released as
    /// one release, or `Ok` if they can: a compound page is released whole,
    /// and a run of plain pages must not reach into one.
    ///
    /// Reads page flags only; the answer is meaningful only for pages the
    /// caller owns (their shape cannot change under it).
    pub fn release_shape(&self, start: usize, count: usize) -> Result<(), &'static CStr> {
        match start.checked_add(count) {
            Some(end) if count > 0 && end <= self.nr_pages => {}
            _ => return Err(c_str!("range not in the area")),
        }
        let page = self.page(start);
        // SAFETY: pages of the range are in the memory map; their flags may
        // be read in any state.
        if unsafe { bindings::rsmm_page_head(page) } {
            // SAFETY: as above; a head page's order is in its own fields.
            let nr = unsafe { bindings::rsmm_compound_nr(page) } as usize;
            return if nr == count {
                Ok(())
            } else {
                Err(c_str!("not the whole folio"))
            };
        }
        // SAFETY: as above.
        if (start..start + count).any(|i| unsafe { bindings::rsmm_page_compound(self.page(i)) }) {
            return Err(c_str!("part of a folio"));
        }
        Ok(())
    }

    /// Claims the free pages `start..start + count` for an allocation with
    /// `gfp` (as the page allocator takes it).
    ///
    /// # Safety
    ///
    /// The pages must be in the range, and each either free or lent; the
    /// caller's bookkeeping must have claimed them for this allocation
    /// alone, and every lent one among them must reach the run through
    /// [`ClaimedRun::take_lent`] (or [`LentPage::give_back`]) before the
    /// run is finished.
    pub unsafe fn claim(&self, start: usize, count: usize, gfp: bindings::gfp_t) -> ClaimedRun<'_> {
        debug_assert!(count > 0 && start + count <= self.nr_pages);
        // A lent page may become one of an allocation as it is only for
        // plain pages (the tail pages of a compound page must have no
        // reference until it is built, and a handed-off page has one), not
        // with tag-based KASAN (a lent page keeps the tag its lending gave
        // it, where the pages of an allocated block share one), and not
        // with KMSAN: the allocation steps mark a new page's memory
        // uninitialised (`kmsan_alloc_page()`), while a handed-off page's
        // shadow still says initialised wherever DMEM copied data into it,
        // so KMSAN would miss the new owner's reads of memory it never
        // wrote.
        let handoff = gfp & GFP_COMP == 0
            && !cfg!(CONFIG_KASAN_SW_TAGS)
            && !cfg!(CONFIG_KASAN_HW_TAGS)
            && !cfg!(CONFIG_KMSAN);
        // SAFETY: FFI call reading a static key.
        let check_pages = unsafe { bindings::rsmm_frames_check_pages_enabled() };
        // INVARIANT: the caller claimed the pages for this run alone, each
        // free or lent (the function's contract); none is handed off yet.
        ClaimedRun::new(self, start, count, gfp, handoff, check_pages)
    }

    /// Lends the free page `i`: gives it the allocation steps (it may be
    /// poisoned for KASAN or unmapped by `debug_pagealloc` while free) but
    /// no reference.  Does not sleep.
    ///
    /// The allocation is counted under the caller's allocation tag.
    ///
    /// # Safety
    ///
    /// Page `i` must be free, and the caller's bookkeeping must have marked
    /// it lent to the caller alone.
    pub unsafe fn lend(&self, i: usize) -> LentPage<'_> {
        // SAFETY: the page is free and the caller's alone (the function's
        // contract): the allocation steps may run on it.
        unsafe {
            bindings::rsmm_frames_post_alloc_hook(
                self.page(i),
                0,
                bindings::GFP_NOWAIT | bindings::__GFP_NOWARN,
            )
        };
        LentPage {
            frames: self,
            index: i,
        }
    }

    /// Takes up again the lending of page `i` that [`LentPage::keep`]
    /// handed to the caller's bookkeeping.
    ///
    /// # Safety
    ///
    /// Page `i` must be lent ([`OwnedFrames::lend`]), no copy into or out
    /// of it may be in flight, and no other [`LentPage`] of it may exist:
    /// the caller's bookkeeping holds the one right to end the lending.
    #[inline]
    pub unsafe fn lent(&self, i: usize) -> LentPage<'_> {
        debug_assert!(i < self.nr_pages);
        LentPage {
            frames: self,
            index: i,
        }
    }

    /// Takes back the allocated pages `start..start + count` from their
    /// owner, who let go of them.
    ///
    /// # Safety
    ///
    /// The pages must be an allocation [`ClaimedRun::finish`] made, or
    /// part of one of plain pages ([`OwnedFrames::release_shape`] accepts
    /// the range), whose owner released them, and no other release of any
    /// of them may be in flight.
    pub unsafe fn released(&self, start: usize, count: usize) -> ReleasedRun<'_> {
        // INVARIANT: the caller's contract.
        ReleasedRun::new(self, start, count)
    }

    /// Stores `value` in the private field of page `i`, for the owner of
    /// an allocation to pass along with it (a release deferred to process
    /// context records its page count there).
    ///
    /// # Safety
    ///
    /// Page `i` must be the first page of an allocation that the caller
    /// owns, not a tail page of a compound page.
    pub unsafe fn set_private(&self, i: usize, value: usize) {
        // SAFETY: the page's private field is its owner's, the caller.
        unsafe { bindings::rsmm_set_page_private(self.page(i), value as _) }
    }

    /// Returns the private field of page `i` and clears it.
    ///
    /// # Safety
    ///
    /// As for [`OwnedFrames::set_private`].
    pub unsafe fn take_private(&self, i: usize) -> usize {
        let page = self.page(i);
        // SAFETY: the page's private field is its owner's, the caller.
        unsafe {
            let v = bindings::rsmm_page_private(page) as usize;
            bindings::rsmm_set_page_private(page, 0);
            v
        }
    }

    /// Whether page `i` is an allocated page with a reference, the
    /// first page of an allocation that a release may name.
    pub fn is_referenced_head(&self, i: usize) -> bool {
        if i >= self.nr_pages {
            return false;
        }
        let page = self.page(i);
        // SAFETY: a page of the range is in the memory map; its count and
        // flags may be read in any state.
        unsafe { !bindings::rsmm_page_tail(page) && ref_count(page) > 0 }
    }
}

/// A lent page: allocation steps done, no reference.
///
/// # Invariants
///
/// Page `index` of `frames` was lent by [`OwnedFrames::lend`], is lent
/// still, and this value is the one right to end the lending.
#[must_use = "a lent page is given back, taken by an allocation, or kept"]
pub struct LentPage<'a> {
    frames: &'a OwnedFrames,
    index: usize,
}

impl<'a> LentPage<'a> {
    /// Returns the page's index in its range.
    #[inline]
    pub fn index(&self) -> usize {
        self.index
    }

    /// Hands the right to end the lending to the caller's bookkeeping,
    /// which takes it up again with [`OwnedFrames::lent`].
    #[inline]
    pub fn keep(self) -> usize {
        self.index
    }

    /// Ends the lending: runs the page allocator's free steps, which check
    /// the page and report one in a bad state.  Does not sleep.
    ///
    /// Returns the index of the page, now free (`Ok`), or found in a bad
    /// state (`Err`), which must then be kept out of use.
    pub fn give_back(self) -> Result<usize, usize> {
        // SAFETY: the page is lent and this value the one right to end the
        // lending (type invariant): its free steps may run.
        if unsafe { bindings::rsmm_frames_free_pages_prepare(self.frames.page(self.index), 0) } {
            Ok(self.index)
        } else {
            Err(self.index)
        }
    }

    /// Whether the page is exactly as its lending left it: no reference,
    /// mapping, mapcount, page flag or memcg charge.  The reference count
    /// and the poison flag are always checked; the rest only where the page
    /// allocator checks the pages it hands out and takes back
    /// (`check_pages`, from `check_pages_enabled`).
    #[inline]
    fn is_clean(&self, check_pages: bool) -> bool {
        let page = self.frames.page(self.index);
        // SAFETY: the page is in the memory map; its fields may be read.
        unsafe {
            if ref_count(page) != 0 || hwpoisoned(page) {
                return false;
            }
            if !check_pages {
                return true;
            }
            bindings::rsmm_page_mapcount_raw(page) == -1
                && !bindings::rsmm_page_has_mapping(page)
                && !bindings::rsmm_page_has_memcg_data(page)
                && !bindings::rsmm_page_flags_checked_at_prep(page)
        }
    }
}
