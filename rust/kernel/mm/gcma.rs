// SPDX-License-Identifier: GPL-2.0

//! The C half of GCMA, seen from Rust.
//!
//! GCMA's allocator is a Rust crate (`mm/gcma_rs/`), but a few of its
//! parts are C because the architecture's setup code calls them, or they
//! are C objects that macros make: the table of areas that the boot
//! reservation fills (`reserve.c`, `of.c`), the tracepoints, rate-limited
//! messages and allocation tags (`area.c`), the static keys of DMEM's
//! hooks and of guaranteed THP (`dmem_switch.c`, `thp.c`).  This module
//! wraps them, so that the crate reaches them through safe calls whose
//! contracts are checked here once; and it makes the device reads of
//! DMEM's verify mode ([`verify`]), whose steps on a folio outside the
//! page cache (a file system's `->read_folio()`, a `bio` of the swap
//! device) the crate should not see.
//!
//! C header: [`include/linux/gcma.h`](srctree/include/linux/gcma.h)

use crate::{
    bindings,
    ffi::c_int,
    mm::{numa, numa::NodeId, zone::Zone, PAGE_SHIFT},
    str::CStr,
    types::Opaque,
};

/// One area the boot reservation made: an entry of `reserve.c`'s table.
///
/// Handed out only as `&'static ReservedArea`, by [`reserved_areas`].
///
/// # Invariants
///
/// Wraps an entry of `reserve.c`'s static table of areas, which lives as
/// long as the kernel.  Its `name`, `base`, `size`, `cma` and `thp` are
/// written during early boot only, before the crate that owns the areas
/// takes them over, and never change afterwards; `name` is NUL-terminated
/// inside its array.  The area is RAM that memblock reserved: each of its
/// page frames has a `struct page` in the memory map, until the area is
/// refused ([`ReservedArea::refuse`], after which its owner never uses it
/// again).  The rest of the entry belongs to the C glue and is reached
/// only through the functions of this type.
#[repr(transparent)]
pub struct ReservedArea(Opaque<bindings::gcma_area>);

// SAFETY: the fields read from Rust never change after early boot (type
// invariant); what the C glue changes, it changes under its own locks or
// with `WRITE_ONCE()`, whichever thread calls it.
unsafe impl Sync for ReservedArea {}
// SAFETY: as above; a `ReservedArea` is never moved (it is only borrowed).
unsafe impl Send for ReservedArea {}

impl ReservedArea {
    /// Returns the area's name: `gcma<N>` for a "gcma=" area, the node's
    /// name for a device-tree area.
    pub fn name(&self) -> &'static CStr {
        // SAFETY: `name` is NUL-terminated inside its array and never
        // changes, and the table lives forever (type invariant).
        unsafe { CStr::from_char_ptr((*self.0.get()).name.as_ptr()) }
    }

    /// Returns the page frame number of the area's first page.
    pub fn base_pfn(&self) -> usize {
        // SAFETY: written during early boot only (type invariant).
        let base = unsafe { (*self.0.get()).base };
        (base >> PAGE_SHIFT) as usize
    }

    /// Returns the number of pages in the area.
    pub fn nr_pages(&self) -> usize {
        // SAFETY: written during early boot only (type invariant).
        let size = unsafe { (*self.0.get()).size };
        (size >> PAGE_SHIFT) as usize
    }

    /// Whether the area is also registered as a CMA area.
    pub fn has_cma(&self) -> bool {
        // SAFETY: written during early boot only (type invariant).
        !unsafe { (*self.0.get()).cma }.is_null()
    }

    /// Whether the area serves transparent huge pages only (`:thp`).
    pub fn is_thp(&self) -> bool {
        // SAFETY: written during early boot only (type invariant).
        unsafe { (*self.0.get()).thp }
    }

    /// Returns the NUMA node of the area's first page.
    pub fn node(&self) -> Option<NodeId> {
        numa::node_of_pfn(self.base_pfn()).ok()
    }

    /// Returns the C descriptor, for C functions that take it and for
    /// telling which area a C caller means ([`ReservedArea::is`]).
    pub fn as_ptr(&self) -> *mut bindings::gcma_area {
        self.0.get()
    }

    /// Whether `ptr`, which a C caller passed, is this area's descriptor.
    /// Only the address is compared: any pointer is allowed.
    pub fn is(&self, ptr: *const bindings::gcma_area) -> bool {
        core::ptr::eq(self.0.get().cast_const(), ptr)
    }

    /// Returns where the area leaves the zone of its first page: the first
    /// page frame in another zone, with the two zones.  `None` if the area
    /// lies in one zone, as CMA requires of its areas and
    /// [`OwnedFrames::adopt_reserved`] of its ranges: the page allocator's
    /// pfn walkers (compaction, isolation, hotplug) take a pageblock to be
    /// in one zone.  memblock cannot tell at reservation whether a fixed
    /// base puts an area across a zone or node boundary.
    ///
    /// Looks at every page frame of the area.
    ///
    /// [`OwnedFrames::adopt_reserved`]: crate::mm::frames::OwnedFrames::adopt_reserved
    pub fn zone_crossing(&self) -> Option<(usize, &'static Zone, &'static Zone)> {
        // SAFETY: the page frames of the area have `struct page`s (type
        // invariant), and the zone of a page is a zone of a `pg_data_t`,
        // which is never freed.
        let zone_of = |pfn: usize| unsafe {
            Zone::from_raw(bindings::rsmm_page_zone(bindings::pfn_to_page(pfn as _)))
        };
        let base = self.base_pfn();
        let first = zone_of(base);
        (base + 1..base + self.nr_pages())
            .map(|pfn| (pfn, zone_of(pfn)))
            .find(|&(_, zone)| !core::ptr::eq(zone, first))
            .map(|(pfn, zone)| (pfn, first, zone))
    }

    /// Refuses the area: it is never put in service, and its memory goes
    /// to the page allocator (which may offline it, so the area's page
    /// frames may lose their `struct page`s).  [`reserved_areas`] skips
    /// it from then on.  The C side warns and does nothing for an area in
    /// service or already refused.
    ///
    /// # Safety
    ///
    /// The area was not put in service ([`ReservedArea::enter_service`]):
    /// its pages are still as memblock left them, and nothing refers to
    /// them.  The caller never uses this reference, nor any other to the
    /// area, again.
    pub unsafe fn refuse(&self) {
        // SAFETY: a descriptor of the table (type invariant) whose memory
        // nobody uses (the caller's contract).
        unsafe { bindings::gcma_area_refuse(self.0.get()) };
    }

    /// Makes the page allocator's free paths send the area's pages back to
    /// GCMA (its pfn span joins the one `gcma_free_page()` tests, and the
    /// static key goes on), and marks the area in service for the C side
    /// (the dma-buf heaps take only areas in service).
    ///
    /// The owner calls it before the first page of the area can be
    /// allocated, so that no page of it reaches the buddy lists.  Calls
    /// are serialised in C, and calling it again changes nothing.  Sleeps
    /// (it takes a mutex and flips a static key), which `_ctx` allows.
    pub fn enter_service(&self, _ctx: &crate::delay::MaySleep) {
        // SAFETY: a descriptor of the table (type invariant), in process
        // context.
        unsafe { bindings::gcma_area_enter_service(self.0.get()) };
    }

    /// Traces the start of an allocation (`gcma:gcma_alloc_start`).
    pub fn trace_alloc_start(&self, count: usize, align: u32) {
        // SAFETY: a descriptor of the table (type invariant); the call
        // only reads its name.
        unsafe { bindings::gcma_trace_alloc_start(self.0.get(), count as _, align) };
    }

    /// Traces the end of an allocation (`gcma:gcma_alloc_finish`): its
    /// first page frame (`None` if it failed), its error (0 if it
    /// succeeded) and its time; a failure without `__GFP_NOWARN` in `gfp`
    /// is also logged, rate-limited.
    pub fn alloc_done(
        &self,
        pfn: Option<usize>,
        count: usize,
        align: u32,
        err: c_int,
        ns: u64,
        gfp: bindings::gfp_t,
    ) {
        let pfn = pfn.map_or(!0, |p| p as _);
        // SAFETY: a descriptor of the table (type invariant); the call
        // only reads its name.
        unsafe { bindings::gcma_alloc_done(self.0.get(), pfn, count as _, align, err, ns, gfp) };
    }

    /// Logs (rate-limited) a compound allocation refused because `count`
    /// is not a power of two.
    pub fn warn_compound_count(&self, count: usize) {
        // SAFETY: a descriptor of the table (type invariant); the call
        // only reads its name.
        unsafe { bindings::gcma_warn_compound_count(self.0.get(), count as _) };
    }

    /// Traces a release done (`gcma:gcma_release`).
    pub fn release_done(&self, pfn: usize, count: usize) {
        // SAFETY: a descriptor of the table (type invariant); the call
        // only reads its name.
        unsafe { bindings::gcma_release_done(self.0.get(), pfn as _, count as _) };
    }

    /// Logs (rate-limited) and traces a release refused as the caller's
    /// bug, for the reason `why`.
    pub fn release_refused(&self, pfn: usize, count: usize, why: &CStr) {
        // SAFETY: a descriptor of the table (type invariant); `why` is
        // NUL-terminated and outlives the call, which only prints it.
        unsafe {
            bindings::gcma_release_refused(self.0.get(), pfn as _, count as _, why.as_char_ptr())
        };
    }
}

/// Returns the areas the boot reservation made and did not refuse, in
/// the order of the table ("gcma=" areas first, in command-line order).
pub fn reserved_areas() -> impl Iterator<Item = &'static ReservedArea> {
    // SAFETY: FFI call without preconditions.
    let n = unsafe { bindings::gcma_nr_reserved_areas() };
    (0..n).filter_map(|i| {
        // SAFETY: FFI call; any index is allowed (NULL beyond the end or
        // for a refused area).
        let ptr = unsafe { bindings::gcma_reserved_area(i) };
        // SAFETY: a non-NULL result points into `reserve.c`'s static table,
        // whose fields read from Rust are written only during early boot,
        // before the crate takes the areas over, and is not refused: the
        // type invariant holds.  `ReservedArea` is a transparent wrapper of
        // the C struct.
        (!ptr.is_null()).then(|| unsafe { &*ptr.cast::<ReservedArea>() })
    })
}

/// The allocation tag of pages lent to DMEM, current while the guard
/// lives: `/proc/allocinfo` counts lent pages under it, whoever's reclaim
/// or swap-out stores a copy in them.  A tag is a static object that a C
/// macro makes, so `area.c` holds it.
///
/// # Invariants
///
/// `tag` and `old` are what `gcma_lend_tag_enter()` returned and saved,
/// on the task that holds the guard; the guard is neither `Send` nor
/// `Sync` (raw pointers), so it is dropped on that task.  Guards nest: one
/// dropped before a guard made after it restores a tag that is not the
/// current one (a debugging kernel warns).
#[must_use = "the tag is current only while the guard lives"]
pub struct LendTag {
    tag: *mut bindings::alloc_tag,
    old: *mut bindings::alloc_tag,
}

impl LendTag {
    /// Makes the tag of lent pages current until the guard is dropped.
    pub fn enter() -> Self {
        let mut old = core::ptr::null_mut();
        // SAFETY: FFI call; `old` is valid for writes.
        let tag = unsafe { bindings::gcma_lend_tag_enter(&mut old) };
        // INVARIANT: what the call returned and saved, on this task.
        Self { tag, old }
    }
}

impl Drop for LendTag {
    fn drop(&mut self) {
        // SAFETY: restores what `enter` saved, on the same task (type
        // invariant).
        unsafe { bindings::gcma_lend_tag_exit(self.tag, self.old) };
    }
}

/// DMEM's verify mode (`CONFIG_GCMA_DMEM_VERIFY`): the device reads that
/// check a hit.
///
/// They run in the read paths that call DMEM's hooks: process context,
/// with the reader's folio locked.  Each reads into a [`PrivateFolio`]
/// allocated with `GFP_NOIO` (its caller holds a folio locked that
/// reclaim's I/O could wait for) and sleeps for the read.
#[cfg(CONFIG_GCMA_DMEM_VERIFY)]
pub mod verify {
    use crate::{
        alloc::flags::{__GFP_NOWARN, GFP_KERNEL},
        bindings,
        mm::{
            folio::{NoFsScope, NoIoScope, PrivateFolio, UnreadFolio},
            page_access::SharedPage,
            PAGE_SHIFT, PAGE_SIZE,
        },
    };
    use core::mem::MaybeUninit;

    /// Whether verify mode is on.
    pub fn is_on() -> bool {
        crate::c_static_key_false!(gcma_dmem_verify_on).is_enabled()
    }

    /// Turns verify mode on, for good: the hooks check every hit from
    /// then on.  Sleeps (it flips a static key), which `ctx` allows.
    pub fn enable(ctx: &crate::delay::MaySleep) {
        crate::c_static_key_false!(gcma_dmem_verify_on).enable(ctx);
    }

    /// What the device holds for a hit: a private folio that a read of
    /// verify mode filled.
    ///
    /// # Invariants
    ///
    /// The folio is uptodate: a read of the file or the swap slot the hit
    /// stands for completed into it, and it has no mapping and no private
    /// data left.
    pub struct DeviceCopy(PrivateFolio);

    impl DeviceCopy {
        /// The device's bytes.
        pub fn page(&self) -> SharedPage<'_> {
            self.0.page()
        }
    }

    /// A private folio in `GFP_NOIO` (see the module's documentation).
    fn alloc_noio() -> Option<PrivateFolio> {
        let _noio = NoIoScope::enter();
        PrivateFolio::alloc(GFP_KERNEL | __GFP_NOWARN)
    }

    /// Reads a page-cache hit back from its file: the folio DMEM just
    /// filled is read again, at the same index, by the file system into a
    /// private folio, as the miss would have read it.  `None` if the hit
    /// cannot be checked (a folio outside the page cache of its mapping, a
    /// file system that did not opt in to DMEM, an encrypted or verity
    /// file, a direct I/O in flight, an index at or past the end of the
    /// file, a read that failed, the size changed meanwhile, no memory).
    /// Sleeps for the read.
    ///
    /// Only the file systems that set `SB_I_GCMA_DMEM` (ext2, ext4) are
    /// read: their `->read_folio()` takes no file (NULL) and a folio that
    /// is not in the page cache, which others need not.
    pub fn read_file(folio: &mut UnreadFolio<'_>) -> Option<DeviceCopy> {
        let f = folio.folio();
        if f.is_swapcache() {
            return None;
        }
        let mapping = f.mapping().filter(|m| m.caches(f))?;
        let inode = mapping.host()?;
        if inode.super_block().iflags() & bindings::SB_I_GCMA_DMEM as crate::ffi::c_ulong == 0 {
            return None;
        }
        let size = inode.size();
        // While a direct-I/O write is in flight the disk may hold bytes
        // the file does not have yet (and, on ext2, a block allocated for
        // a hole holds whatever it held before until the write lands): a
        // read may see either, so there is nothing to compare with.  A
        // direct write that starts after this check first invalidates the
        // page cache, which waits for `folio`'s lock, held until the
        // comparison is done.
        if inode.is_encrypted()
            || inode.is_verity()
            || inode.direct_io_in_flight()
            || (f.index() as i64) << PAGE_SHIFT >= size
        {
            return None;
        }
        // SAFETY: the mapping is valid while `folio` is locked in its page
        // cache (`AddressSpace`'s invariant), and so are its operations,
        // which belong to the file system that holds the inode.
        let read = unsafe { (*(*mapping.as_ptr()).a_ops).read_folio }?;
        let index = f.index();
        let _nofs = NoFsScope::enter();
        let mut dev = alloc_noio()?;
        let d = dev.as_mut_ptr();
        // `d` gets the mapping and the index of `folio` without entering
        // the page cache: the file system reads it as the miss would have,
        // and DMEM's read hook leaves it to the device (it is not the folio
        // the page cache holds at that index).  Its fields are written
        // through raw places, as a walker of the memory map may read its
        // flags and count meanwhile.  `->read_folio()` takes it locked and
        // unlocks it when the read ends, error or not.
        //
        // SAFETY: `d` is our folio, in no cache (a `PrivateFolio`).  The
        // mapping stays valid while `folio` is locked, past the point where
        // `d` leaves it below.  The file system takes a NULL file and such
        // a folio (`SB_I_GCMA_DMEM`, checked above).
        let err = unsafe {
            bindings::__folio_set_locked(d);
            let page = &raw mut (*d).__bindgen_anon_1.__bindgen_anon_1;
            (&raw mut (*page).mapping).write(mapping.as_ptr());
            (&raw mut (*page).index).write(index as _);
            let err = read(core::ptr::null_mut(), d);
            if err == 0 {
                bindings::folio_wait_locked(d);
            }
            err
        };
        // SAFETY: `d` is valid and ours; its read has ended (it is
        // unlocked).
        let uptodate = unsafe { bindings::rsmm_folio_test_uptodate(d) };
        // A truncation or an extension meanwhile changes what the read
        // gives.
        let mut ok = err == 0 && uptodate && inode.size() == size;
        // SAFETY: `d` is ours and unlocked.  It leaves the mapping before
        // it is returned, since its owner may keep it past the reader's
        // lock on `folio`, which is what keeps the mapping; what the read
        // attached to it (buffer heads) goes first, through the file
        // system's own release, which needs the folio locked and still in
        // the mapping.
        let released = unsafe {
            let released = !bindings::rsmm_folio_has_buffers(d) || {
                bindings::folio_lock(d);
                let done = bindings::filemap_release_folio(d, 0);
                bindings::folio_unlock(d);
                done
            };
            let page = &raw mut (*d).__bindgen_anon_1.__bindgen_anon_1;
            (&raw mut (*page).mapping).write(core::ptr::null_mut());
            released
        };
        if !released {
            // The buffers keep their reference to the folio, which then
            // outlives `dev` (a leak, not a use after free); a clean folio
            // just read is not expected to refuse.
            crate::pr_warn!(
                "gcma: dmem verify: buffers of a read-back folio (ino {}, index {}) not released\n",
                inode.ino(),
                index
            );
            ok = false;
        }
        if !ok {
            return None;
        }
        // INVARIANT: the read completed into the folio and it was
        // uptodate; it has no mapping and nothing attached any more.
        Some(DeviceCopy(dev))
    }

    /// Reads a swap hit back from its slot on the swap device.  `None` if
    /// it cannot be checked (a folio outside the swap cache, a swap file
    /// whose I/O goes through a file system, a read that failed, no
    /// memory).  Sleeps for the read.
    pub fn read_swap(folio: &mut UnreadFolio<'_>) -> Option<DeviceCopy> {
        let f = folio.folio();
        if !f.is_swapcache() {
            return None;
        }
        // SAFETY: the folio is locked in the swap cache, so `folio->swap`
        // names its slot, whose device stays on while the slot is in use
        // (the swap cache holds it).
        let sis = unsafe {
            let page = &raw const (*f.as_ptr()).__bindgen_anon_1.__bindgen_anon_1;
            bindings::swp_swap_info((&raw const (*page).__bindgen_anon_2.swap).read())
        };
        if sis.is_null() {
            return None;
        }
        // SAFETY: `sis` is the swap device of the slot, valid while the
        // slot is in use (see above).  Other CPUs change some of its
        // fields: the two read here are read through raw places, `flags`
        // as one volatile word (its `SWP_FS_OPS` bit and `bdev` are set
        // at swapon and stay).
        let (flags, bdev) = unsafe {
            (
                (&raw const (*sis).flags).read_volatile(),
                (&raw const (*sis).bdev).read(),
            )
        };
        if flags & bindings::SWP_FS_OPS as crate::ffi::c_ulong != 0 || bdev.is_null() {
            return None;
        }
        let _noio = NoIoScope::enter();
        let mut dev = alloc_noio()?;
        let mut bvec = MaybeUninit::<bindings::bio_vec>::uninit();
        let mut bio = MaybeUninit::<bindings::bio>::uninit();
        let b = bio.as_mut_ptr();
        // SAFETY: `bio_init()` initialises the bio on our stack with one
        // vector slot, `bvec`, both living until `bio_uninit()`; the folio
        // is ours and stays so; `submit_bio_wait()` returns once the read
        // has ended; the slot's sector is `folio`'s, locked in the swap
        // cache, whose device write completed before it left the cache.
        let err = unsafe {
            bindings::bio_init(b, bdev, bvec.as_mut_ptr(), 1, bindings::req_op_REQ_OP_READ);
            (*b).bi_iter.bi_sector = bindings::swap_folio_sector(f.as_ptr());
            bindings::bio_add_folio_nofail(b, dev.as_mut_ptr(), PAGE_SIZE, 0);
            let err = bindings::submit_bio_wait(b);
            bindings::bio_uninit(b);
            err
        };
        if err != 0 {
            return None;
        }
        // INVARIANT: the read completed into the folio, which has neither
        // mapping nor private data.
        Some(DeviceCopy(dev))
    }
}
