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

use crate::{bindings, c_str, delay::MaySleep, mm::MAX_PAGE_ORDER, str::CStr};
use core::sync::atomic::{AtomicI32, Ordering};

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
/// `first` is the `struct page` of frame `base_pfn`.
pub struct OwnedFrames {
    base_pfn: usize,
    nr_pages: usize,
    first: *mut bindings::page,
}

// SAFETY: `first` points into the memory map, which is never freed; the
// pages' state is only changed through this module's steps, whose rules
// do not depend on the thread (type invariant).
unsafe impl Send for OwnedFrames {}
// SAFETY: as above; `&OwnedFrames` only reads the three fields.
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
    /// # Safety
    ///
    /// `base_pfn..base_pfn + nr_pages` must be memory reserved in memblock
    /// for the caller alone, every page still as memblock left it, all of
    /// it in the memory map and in one zone.  It is given to the returned
    /// value for good: nobody else may ever allocate, free or map its
    /// pages, and no other `OwnedFrames` may cover any of them.
    pub unsafe fn adopt_reserved(base_pfn: usize, nr_pages: usize, ctx: &MaySleep) -> Self {
        // INVARIANT: the caller gives the frames to this value for good,
        // and they have `struct page`s.
        // SAFETY: the frame has a `struct page` (the caller's contract).
        let first = unsafe { bindings::pfn_to_page(base_pfn as _) };
        let frames = Self {
            base_pfn,
            nr_pages,
            first,
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
        frames
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
        // reference until it is built, and a handed-off page has one), and
        // not with tag-based KASAN (a lent page keeps the tag its lending
        // gave it, where the pages of an allocated block share one).
        let handoff =
            gfp & GFP_COMP == 0 && !cfg!(CONFIG_KASAN_SW_TAGS) && !cfg!(CONFIG_KASAN_HW_TAGS);
        ClaimedRun {
            frames: self,
            start,
            count,
            gfp,
            handoff,
            handed: 0,
            // SAFETY: FFI call reading a static key.
            check_pages: unsafe { bindings::rsmm_frames_check_pages_enabled() },
        }
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
        ReleasedRun {
            frames: self,
            start,
            count,
        }
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

/// A run of pages an allocation is assembling.
///
/// # Invariants
///
/// Pages `start..start + count` of `frames` were claimed for this
/// allocation alone; each is free, lent (to be taken through
/// [`ClaimedRun::take_lent`]), or one of the `handed` lent pages taken as
/// they are: allocation steps done and one reference, by which `finish`
/// tells them apart (a free page has none).  `handed` is 0 unless
/// `handoff`.
#[must_use = "a claimed run is finished into an allocation or given up"]
pub struct ClaimedRun<'a> {
    frames: &'a OwnedFrames,
    start: usize,
    count: usize,
    gfp: bindings::gfp_t,
    handoff: bool,
    handed: usize,
    /// `check_pages_enabled`, read once per run.
    check_pages: bool,
}

impl<'a> ClaimedRun<'a> {
    /// Returns the index of the run's first page.
    #[inline]
    pub fn start(&self) -> usize {
        self.start
    }

    /// Returns the number of pages in the run.
    #[inline]
    pub fn count(&self) -> usize {
        self.count
    }

    /// Returns how many lent pages the run took as they are.
    pub fn handed(&self) -> usize {
        self.handed
    }

    /// Takes a lent page of the run, which its borrower let go of.
    ///
    /// A page exactly as its lending left it becomes a page of the
    /// allocation as it is (it gets its reference; page_owner and the
    /// allocation tag keep the lending as its allocation until `finish`
    /// moves the tag), when the allocation allows it (plain pages, and no
    /// tag-based KASAN).  Otherwise it gets the free steps, whose checks
    /// report a page in a bad state, and is prepared with the free pages.
    /// Does not sleep.
    ///
    /// Returns the page back if it is not a page of this run.
    #[inline]
    pub fn take_lent(&mut self, page: LentPage<'a>) -> Result<(), LentPage<'a>> {
        if !core::ptr::eq(page.frames, self.frames) {
            return Err(page);
        }
        // SAFETY: a `LentPage` of our frames is lent, with no copy in
        // flight, and carries the one right to end its lending (its type
        // invariant), which passes to the run here.
        let outside = unsafe { self.take_lent_mask(page.index, 1) };
        if outside != 0 {
            return Err(page);
        }
        Ok(())
    }

    /// Takes the lent pages `base + i` of the run, for each bit `i` of
    /// `mask`, as [`ClaimedRun::take_lent`] takes one: a chunk of pages
    /// that their borrower let go of together, taken in one pass.  Page
    /// indices wrap, so `base` may lie below the range's first page.
    ///
    /// Returns the bits of the pages that are not in the run, which are
    /// left alone.
    ///
    /// # Safety
    ///
    /// Each page named that is in the run must be lent
    /// ([`OwnedFrames::lend`]), with no copy into or out of it in flight,
    /// and the caller must hold the one right to end its lending (no
    /// [`LentPage`] of it exists), which passes to the run.
    #[inline]
    pub unsafe fn take_lent_mask(&mut self, base: usize, mask: u64) -> u64 {
        let (mut m, mut outside, mut handed) = (mask, 0, 0);
        while m != 0 {
            let bit = m & m.wrapping_neg();
            m ^= bit;
            let index = base.wrapping_add(bit.trailing_zeros() as usize);
            if index.wrapping_sub(self.start) >= self.count {
                outside |= bit;
                continue;
            }
            // INVARIANT: the page is lent and the right to end its lending
            // is ours (the caller's contract).
            let page = LentPage {
                frames: self.frames,
                index,
            };
            if self.handoff && page.is_clean(self.check_pages) {
                // SAFETY: the page is lent, clean and ours to end; it
                // becomes a page of the run, handed off.
                unsafe { set_refcounted(self.frames.page(index)) };
                handed += 1;
            } else {
                // A page in a bad state is reported by the free steps, and
                // then prepared with the others: the run is the
                // allocation's already (unlike the page allocator, which
                // would drop the block and try another).
                let _ = page.give_back();
            }
        }
        // INVARIANT: `handoff` held for each page counted, and each has
        // its reference.
        self.handed += handed;
        outside
    }

    /// Gives the run's pages the state the page allocator gives an
    /// allocation with the run's `gfp`, and returns the first page.
    ///
    /// Free pages get `post_alloc_hook()` a naturally aligned block at a
    /// time, then one reference each; with `__GFP_COMP` (a power-of-two
    /// count) the run becomes one compound page with one reference on its
    /// head.  Handed-off pages keep their allocation steps; they are zeroed
    /// if the allocation asks for it or `init_on_free` wants a page's data
    /// gone before its next owner, and the allocation's tag replaces the
    /// lending's.  The pages are the caller's from here on.
    pub fn finish(self) -> *mut bindings::page {
        let first = self.frames.page(self.start);
        let (base, end) = (self.start, self.start + self.count);
        // SAFETY: FFI calls reading the gfp flags and boot-time settings.
        let zero = unsafe {
            bindings::rsmm_want_init_on_alloc(self.gfp) || bindings::rsmm_want_init_on_free()
        };
        // SAFETY: FFI call reading a static key.
        let tags = unsafe { bindings::rsmm_mem_alloc_profiling_enabled() };
        let handed_page = |page: *mut bindings::page| {
            // SAFETY: a handed-off page of the run, allocated and ours
            // (type invariant): it may be written, and its tag moved.
            unsafe {
                if zero {
                    bindings::rsmm_clear_highpage(page);
                }
                if tags {
                    bindings::rsmm_frames_pgalloc_tag_sub(page, 1);
                    bindings::rsmm_frames_pgalloc_tag_add_current(page, 1);
                }
            }
        };
        if self.handed == self.count {
            // The whole run, as it is when the area was fully lent.
            (base..end).for_each(|i| handed_page(self.frames.page(i)));
            return first;
        }
        if self.gfp & GFP_COMP != 0 && self.count.is_power_of_two() {
            let order = self.count.ilog2();
            // SAFETY: the run is free (no handoff for compound runs, type
            // invariant) and ours: it becomes one compound page.
            unsafe {
                bindings::rsmm_frames_post_alloc_hook(first, order, self.gfp);
                bindings::rsmm_frames_set_page_refcounted(first);
                bindings::rsmm_frames_prep_compound_page(first, order);
            }
            return first;
        }
        let pfn_base = self.frames.base_pfn;
        let mut i = base;
        while i < end {
            let page = self.frames.page(i);
            // SAFETY: a page of the run; its count may be read.
            if self.handed > 0 && unsafe { ref_count(page) } != 0 {
                handed_page(page);
                i += 1;
                continue;
            }
            let mut order = block_order(pfn_base + i, pfn_base + end);
            if self.handed > 0 {
                // The block stops before the first handed-off page in it.
                let n = 1usize << order;
                if let Some(j) = (1..n).find(|&j| {
                    // SAFETY: as above.
                    unsafe { ref_count(self.frames.page(i + j)) != 0 }
                }) {
                    order = j.ilog2();
                }
            }
            // SAFETY: pages `i..i + (1 << order)` of the run are free and
            // ours (type invariant): they get the allocation steps as one
            // block, then one reference each.
            unsafe {
                bindings::rsmm_frames_post_alloc_hook(page, order, self.gfp);
                bindings::rsmm_frames_set_page_refcounted(page);
                if order > 0 {
                    bindings::split_page(page, order);
                }
            }
            i += 1 << order;
        }
        first
    }

    /// Makes the run take no lent page as it is: each gets the free steps
    /// instead (a run that will be given up, as one with poisoned pages).
    /// Has no effect once a page was handed off.
    pub fn forbid_handoff(&mut self) {
        if self.handed == 0 {
            self.handoff = false;
        }
    }

    /// Gives up a run that took no lent page as it is (`handed() == 0`, as
    /// when no handoff was allowed): every page of it is free again.
    /// Returns the run's start and count, for the caller's bookkeeping to
    /// free, or the run itself if it holds handed-off pages.
    pub fn give_up(self) -> Result<(usize, usize), Self> {
        if self.handed > 0 {
            return Err(self);
        }
        Ok((self.start, self.count))
    }
}

/// What became of a released page (see [`ReleasedRun::put`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageFate {
    /// Its last reference went: it is free.
    Freed,
    /// Someone still holds a reference: the page allocator's free paths
    /// give it back to the owner when the last one goes.
    Referenced,
    /// Its last reference went and it is hardware-poisoned: it must be
    /// kept out of use for good.
    Poisoned,
    /// Its last reference went and the free steps found it in a bad state
    /// (and reported it): it must be kept out of use.
    Bad,
}

/// An allocation whose owner let go of it.
///
/// # Invariants
///
/// Pages `start..start + count` of `frames` are an allocation made by
/// [`ClaimedRun::finish`] (or part of one of plain pages) that its owner
/// released, and this value is the only release of them.
pub struct ReleasedRun<'a> {
    frames: &'a OwnedFrames,
    start: usize,
    count: usize,
}

impl ReleasedRun<'_> {
    /// Drops the owner's references.
    ///
    /// A compound page goes through `put_page()`, the teardown and free
    /// path of any folio; the free path gives it back to the owner when its
    /// last reference goes (now, or later).  Each plain page is passed to
    /// `fate` with what became of it; pages whose last reference went get
    /// the free steps first.  Returns `false` for a compound page (`fate`
    /// is not called), `true` for plain pages.
    pub fn put(self, mut fate: impl FnMut(usize, PageFate)) -> bool {
        let first = self.frames.page(self.start);
        // SAFETY: the allocation is ours to release (type invariant); a
        // head page stands for its whole compound page.
        if unsafe { bindings::rsmm_page_head(first) } {
            // SAFETY: as above: the owner's reference is dropped once.
            unsafe { bindings::rsmm_put_page(first) };
            return false;
        }
        for i in self.start..self.start + self.count {
            let page = self.frames.page(i);
            // SAFETY: a plain page of the allocation, whose owner's
            // reference this drops once (type invariant).
            let what = if !unsafe { bindings::rsmm_put_page_testzero(page) } {
                PageFate::Referenced
            // SAFETY: the last reference went: the free steps may run.
            } else if unsafe { bindings::rsmm_frames_free_pages_prepare(page, 0) } {
                PageFate::Freed
            } else if self.frames.is_hwpoisoned(i) {
                PageFate::Poisoned
            } else {
                PageFate::Bad
            };
            fate(i, what);
        }
        true
    }
}
