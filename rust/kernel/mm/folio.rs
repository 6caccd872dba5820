// SPDX-License-Identifier: GPL-2.0

//! Locked folios of the page cache and the swap cache, and the address
//! spaces, inodes and superblocks behind them, as the hooks of those paths
//! read them.
//!
//! The hooks the page cache and swap call run with the folio locked
//! (`folio_lock()`), which keeps its mapping, index and swap slot, and the
//! flags that the lock guards, from changing under them.  A
//! [`LockedFolio`] is such a folio; an [`UnreadFolio`] one lent to a read
//! hook to fill and unlock; [`AddressSpace`], [`Inode`] and
//! [`SuperBlock`] are read-only views of what its mapping points to.
//!
//! A [`PrivateFolio`] is the other kind: a folio of no cache, owned by
//! whoever allocated it, that a device read may fill.  [`NoIoScope`] and
//! [`NoFsScope`] keep the allocations of a section from recursing into
//! I/O or file systems through reclaim (`memalloc_noio_save()`,
//! `memalloc_nofs_save()`).
//!
//! C headers: [`include/linux/pagemap.h`](srctree/include/linux/pagemap.h),
//! [`include/linux/page-flags.h`](srctree/include/linux/page-flags.h),
//! [`include/linux/fs.h`](srctree/include/linux/fs.h)

use crate::{
    alloc::Flags,
    bindings,
    ffi::{c_uint, c_ulong},
    mm::page_access::{ExclusivePage, SharedPage},
    types::Opaque,
};
use core::{marker::PhantomData, ptr::NonNull};

/// A folio that the thread holding this reference has locked.
///
/// # Invariants
///
/// A `&'a LockedFolio` points to a valid `struct folio` that the thread
/// which made the reference holds locked for all of `'a`.
#[repr(transparent)]
pub struct LockedFolio(Opaque<bindings::folio>);

impl LockedFolio {
    /// Borrows the folio `folio`.
    ///
    /// # Safety
    ///
    /// `folio` must point to a valid `struct folio` that the caller holds
    /// locked for all of `'a`.
    pub unsafe fn from_raw<'a>(folio: *mut bindings::folio) -> &'a Self {
        // SAFETY: `LockedFolio` is a transparent wrapper of `struct folio`;
        // the caller guarantees the invariant for `'a`.
        unsafe { &*folio.cast::<Self>() }
    }

    /// Returns the raw `struct folio` pointer.
    pub fn as_ptr(&self) -> *mut bindings::folio {
        self.0.get()
    }

    /// Returns the folio's first page: a folio begins with its first
    /// `struct page`.
    pub fn first_page(&self) -> NonNull<bindings::page> {
        // SAFETY: `struct folio` starts with the `struct page` of its first
        // page (`folio_page(folio, 0)`), and `self` is not null.
        unsafe { NonNull::new_unchecked(self.as_ptr().cast()) }
    }

    /// Returns the folio's index in its mapping (for a page-cache folio).
    pub fn index(&self) -> usize {
        // SAFETY: `self` is a valid folio (type invariant).
        unsafe { bindings::rsmm_folio_index(self.as_ptr()) as usize }
    }

    /// Returns the number of base pages in the folio.
    pub fn nr_pages(&self) -> usize {
        // SAFETY: as in `index`.
        unsafe { bindings::rsmm_folio_nr_pages(self.as_ptr()) as usize }
    }

    /// Whether the folio has more than one page.
    pub fn is_large(&self) -> bool {
        // SAFETY: as in `index`.
        unsafe { bindings::rsmm_folio_test_large(self.as_ptr()) }
    }

    /// Whether the folio is in the swap cache.
    pub fn is_swapcache(&self) -> bool {
        // SAFETY: as in `index`.
        unsafe { bindings::rsmm_folio_test_swapcache(self.as_ptr()) }
    }

    /// Whether the folio's contents are up to date.
    pub fn is_uptodate(&self) -> bool {
        // SAFETY: as in `index`.
        unsafe { bindings::rsmm_folio_test_uptodate(self.as_ptr()) }
    }

    /// Whether the folio holds data not yet written back.
    pub fn is_dirty(&self) -> bool {
        // SAFETY: as in `index`.
        unsafe { bindings::rsmm_folio_test_dirty(self.as_ptr()) }
    }

    /// Whether the folio is being written back.
    pub fn is_writeback(&self) -> bool {
        // SAFETY: as in `index`.
        unsafe { bindings::rsmm_folio_test_writeback(self.as_ptr()) }
    }

    /// Whether the folio may be pinned for DMA (`folio_maybe_dma_pinned()`):
    /// a device may be writing it.
    pub fn maybe_dma_pinned(&self) -> bool {
        // SAFETY: as in `index`.
        unsafe { bindings::rsmm_folio_maybe_dma_pinned(self.as_ptr()) }
    }

    /// Whether the folio has buffer heads attached.
    pub fn has_buffers(&self) -> bool {
        // SAFETY: as in `index`.
        unsafe { bindings::rsmm_folio_has_buffers(self.as_ptr()) }
    }

    /// Returns the swap type and offset of the folio's slot (for a
    /// swap-cache folio).
    pub fn swap_slot(&self) -> (u32, c_ulong) {
        // SAFETY: as in `index`.
        unsafe {
            (
                bindings::rsmm_folio_swap_type(self.as_ptr()),
                bindings::rsmm_folio_swap_offset(self.as_ptr()),
            )
        }
    }

    /// Returns the folio's address space (`folio_mapping()`): none for an
    /// anonymous folio or one that was truncated.
    pub fn mapping(&self) -> Option<&AddressSpace> {
        // SAFETY: as in `index`.
        let mapping = unsafe { bindings::rsmm_folio_mapping(self.as_ptr()) };
        if mapping.is_null() {
            return None;
        }
        // SAFETY: the mapping of a locked folio stays while it is locked,
        // and so do its host and the host's superblock.
        Some(unsafe { AddressSpace::from_raw(mapping) })
    }
}

/// A locked folio of the page cache or the swap cache, not yet up to
/// date, that the read path lends to a hook, which may fill it in place
/// of the file system or the swap device.
///
/// Dropping it hands the folio back to the lender as it was, to read as
/// usual.  [`UnreadFolio::end_read`] (page cache: marks it up to date and
/// unlocks it) and [`UnreadFolio::mark_uptodate`] (swap-in, whose caller
/// unlocks) consume the handle: every reference obtained through it has
/// ended by then, so nothing writes the folio through it once readers
/// may see it.
///
/// # Invariants
///
/// `self.0` is a folio locked by the thread that holds this value, of the
/// page cache or the swap cache (or made for a read of a page-cache
/// range), not up to date, whose memory nobody else reads or writes for
/// all of `'a` (or until the handle is consumed).
pub struct UnreadFolio<'a>(&'a LockedFolio);

impl<'a> UnreadFolio<'a> {
    /// Takes the folio `folio` for a read hook.
    ///
    /// # Safety
    ///
    /// `folio` must point to a valid `struct folio` that the caller holds
    /// locked, that is not up to date, and whose memory nobody else reads
    /// or writes for all of `'a`, except that if [`UnreadFolio::end_read`]
    /// is called the lock and the folio pass to the page cache then.
    pub unsafe fn from_raw(folio: *mut bindings::folio) -> Self {
        // INVARIANT: the caller's contract.
        // SAFETY: the caller holds the folio locked for `'a`.
        Self(unsafe { LockedFolio::from_raw(folio) })
    }

    /// The folio, for the checks a hook makes before it fills it.
    pub fn folio(&self) -> &LockedFolio {
        self.0
    }

    /// The folio's first page, to fill: nobody else reads or writes it
    /// while the handle is borrowed.
    pub fn first_page(&mut self) -> ExclusivePage<'_> {
        // SAFETY: the page is the folio's, valid and lowmem or mappable
        // with `kmap_local_page()` as any page-cache page, and nobody else
        // accesses its memory while the folio is locked and not up to date
        // (type invariant) for the borrow of `self`.
        unsafe { ExclusivePage::from_raw(self.0.first_page()) }
    }

    /// Marks the folio up to date and gives it back locked, for a lender
    /// that unlocks it itself (swap-in).  Consumes the handle.
    ///
    /// # Safety
    ///
    /// The folio must hold the data of its file range or swap slot:
    /// readers take it as such from here on.
    pub unsafe fn mark_uptodate(self) {
        // SAFETY: the folio is valid and locked (type invariant); the
        // caller vouches for its contents; the handle ends here.
        unsafe { bindings::rsmm_folio_mark_uptodate(self.0.as_ptr()) }
    }

    /// Ends the read (`folio_end_read()`): marks the folio up to date if
    /// `success`, and unlocks it.  Consumes the handle.
    ///
    /// # Safety
    ///
    /// If `success`, the folio must hold the data of its file range:
    /// readers take it as such from here on.
    pub unsafe fn end_read(self, success: bool) {
        // SAFETY: the folio is valid and locked by this thread (type
        // invariant); the caller vouches for its contents; the handle, and
        // every reference through it, ends here.
        unsafe { bindings::rsmm_folio_end_read(self.0.as_ptr(), success) }
    }
}

/// An address space (`struct address_space`): the page cache of an inode,
/// or a swap cache.
///
/// # Invariants
///
/// A `&'a AddressSpace` points to a valid `struct address_space` whose
/// host, if any, stays valid for all of `'a`.
#[repr(transparent)]
pub struct AddressSpace(Opaque<bindings::address_space>);

impl AddressSpace {
    /// Borrows the address space `mapping`.
    ///
    /// # Safety
    ///
    /// `mapping` must point to a valid `struct address_space` that stays
    /// valid, with its host inode and that inode's superblock, for all of
    /// `'a`.
    pub unsafe fn from_raw<'a>(mapping: *mut bindings::address_space) -> &'a Self {
        // SAFETY: a transparent wrapper; the caller's contract.
        unsafe { &*mapping.cast::<Self>() }
    }

    /// Returns the raw address space.
    pub fn as_ptr(&self) -> *mut bindings::address_space {
        self.0.get()
    }

    /// Returns the inode whose pages the address space caches, if any (a
    /// swap cache has none).
    pub fn host(&self) -> Option<&Inode> {
        // SAFETY: the address space is valid (type invariant).
        let host = unsafe { (*self.0.get()).host };
        // SAFETY: the host stays valid while `self` is borrowed (type
        // invariant).
        (!host.is_null()).then(|| unsafe { &*host.cast::<Inode>() })
    }

    /// Whether `folio` is the folio the page cache holds at its index, as
    /// opposed to one made outside the cache for the same range.
    pub fn caches(&self, folio: &LockedFolio) -> bool {
        // SAFETY: the address space and the folio are valid (type
        // invariants); `xa_load()` takes the RCU read lock itself.
        let found =
            unsafe { bindings::xa_load(&raw mut (*self.0.get()).i_pages, folio.index() as _) };
        core::ptr::eq(found.cast(), folio.as_ptr())
    }
}

/// An inode (`struct inode`), read only.
///
/// # Invariants
///
/// An `&'a Inode` points to a valid `struct inode` whose superblock stays
/// valid for all of `'a`.
#[repr(transparent)]
pub struct Inode(Opaque<bindings::inode>);

impl Inode {
    /// Returns the inode number.
    pub fn ino(&self) -> u64 {
        // SAFETY: the inode is valid (type invariant).
        unsafe { (*self.0.get()).i_ino as u64 }
    }

    /// Whether the inode is a regular file.
    pub fn is_regular(&self) -> bool {
        // SAFETY: the inode is valid (type invariant).
        let mode = unsafe { (*self.0.get()).i_mode } as u32;
        mode & bindings::S_IFMT == bindings::S_IFREG
    }

    /// Whether the inode is an active swap file (`IS_SWAPFILE()`): swap
    /// writes its blocks behind its page cache.
    pub fn is_swapfile(&self) -> bool {
        // SAFETY: the inode is valid (type invariant).  swapon and swapoff
        // change `i_flags` under the inode lock, which readers here do not
        // hold: one volatile word read, as C's `READ_ONCE()`.
        let flags = unsafe { core::ptr::addr_of!((*self.0.get()).i_flags).read_volatile() };
        flags & bindings::S_SWAPFILE != 0
    }

    /// Whether the file's data is encrypted (`IS_ENCRYPTED()`): its page
    /// cache holds the plain text, its blocks do not.
    pub fn is_encrypted(&self) -> bool {
        // SAFETY: as in `is_swapfile`.
        let flags = unsafe { core::ptr::addr_of!((*self.0.get()).i_flags).read_volatile() };
        flags & bindings::S_ENCRYPTED != 0
    }

    /// Whether the file is protected by fs-verity (`IS_VERITY()`): its
    /// reads check the data against a Merkle tree.
    pub fn is_verity(&self) -> bool {
        // SAFETY: as in `is_swapfile`.
        let flags = unsafe { core::ptr::addr_of!((*self.0.get()).i_flags).read_volatile() };
        flags & bindings::S_VERITY != 0
    }

    /// Whether a direct I/O is in flight on the file (`i_dio_count`): a
    /// snapshot, which a direct I/O that starts afterwards changes.
    pub fn direct_io_in_flight(&self) -> bool {
        // SAFETY: the inode is valid (type invariant); `i_dio_count` is an
        // `atomic_t`, read as `atomic_read()` does, one volatile word.
        let n = unsafe { core::ptr::addr_of!((*self.0.get()).i_dio_count.counter).read_volatile() };
        n != 0
    }

    /// Returns the file's size in bytes (`i_size_read()`).
    pub fn size(&self) -> i64 {
        // SAFETY: the inode is valid (type invariant); the helper reads
        // `i_size` as C's readers do.
        unsafe { bindings::i_size_read(self.0.get()) }
    }

    /// Returns the inode's superblock.
    pub fn super_block(&self) -> &SuperBlock {
        // SAFETY: the inode is valid (type invariant), and its superblock
        // outlives it.
        unsafe { SuperBlock::from_raw((*self.0.get()).i_sb) }
    }
}

/// A superblock (`struct super_block`), read only.
///
/// # Invariants
///
/// An `&'a SuperBlock` points to a valid `struct super_block` for all of
/// `'a`.
#[repr(transparent)]
pub struct SuperBlock(Opaque<bindings::super_block>);

impl SuperBlock {
    /// Borrows the superblock `sb`.
    ///
    /// # Safety
    ///
    /// `sb` must point to a valid `struct super_block` that stays valid for
    /// all of `'a`.
    pub unsafe fn from_raw<'a>(sb: *mut bindings::super_block) -> &'a Self {
        // SAFETY: a transparent wrapper; the caller's contract.
        unsafe { &*sb.cast::<Self>() }
    }

    /// Returns the device number of the superblock (`s_dev`), unique among
    /// mounted superblocks.
    pub fn dev(&self) -> u32 {
        // SAFETY: the superblock is valid (type invariant).
        unsafe { (*self.0.get()).s_dev }
    }

    /// Returns the superblock's internal flags (`s_iflags`, `SB_I_*`).
    pub fn iflags(&self) -> c_ulong {
        // SAFETY: the superblock is valid (type invariant).
        unsafe { (*self.0.get()).s_iflags }
    }
}

/// An order-0 folio of no cache, owned by this value.
///
/// It is in no page cache, swap cache or LRU list and mapped by no page
/// table, so nobody but its owner reaches it: a device read may fill it
/// (its owner passing [`PrivateFolio::as_mut_ptr`] to the C code that reads),
/// and [`PrivateFolio::page`] reads what it holds.  Dropping the value
/// frees the folio (`folio_put()`, which never sleeps).
///
/// # Invariants
///
/// `self.0` points to a valid order-0 folio, in no cache and mapped
/// nowhere, whose only reference is this value's (a device read may
/// attach private data, with its own reference, which its owner releases
/// before it lets the folio go); nothing reads or writes its memory except
/// through this value, and a write started through
/// [`PrivateFolio::as_mut_ptr`] has ended before the next
/// [`PrivateFolio::page`].
pub struct PrivateFolio(NonNull<bindings::folio>);

// SAFETY: the folio is reached only through this value (type invariant),
// and `folio_put()` may be called from any thread.
unsafe impl Send for PrivateFolio {}

impl PrivateFolio {
    /// Allocates a folio of one page (`folio_alloc(flags, 0)`); `None`
    /// if there is no memory.
    pub fn alloc(flags: Flags) -> Option<Self> {
        // SAFETY: `folio_alloc()` may be called with any flags; the caller
        // chooses whether they let it sleep, as for every allocation.
        let folio = unsafe { bindings::folio_alloc(flags.as_raw(), 0) };
        // INVARIANT: a new order-0 folio, in no cache, whose one reference
        // is the allocator's return value.
        NonNull::new(folio).map(Self)
    }

    /// Returns the raw folio, for a C function that fills it.  The folio
    /// stays this value's: the callee must not keep a reference past the
    /// value's life or put the folio in a cache, and the caller waits for
    /// a write it starts through the pointer to end before it borrows
    /// [`PrivateFolio::page`] (the exclusive borrow only keeps a page
    /// borrowed before out of the way).  Dereferencing the pointer is
    /// `unsafe` in any case.
    pub fn as_mut_ptr(&mut self) -> *mut bindings::folio {
        self.0.as_ptr()
    }

    /// The folio's page, for reading.
    pub fn page(&self) -> SharedPage<'_> {
        // SAFETY: a folio starts with its first page, which is valid and,
        // as every page of the page allocator, lowmem or mappable with
        // `kmap_local_page()`; nobody writes it while `self` is borrowed
        // (type invariant).
        unsafe { SharedPage::from_raw(self.0.cast()) }
    }
}

impl Drop for PrivateFolio {
    fn drop(&mut self) {
        // SAFETY: the folio's one reference is ours (type invariant), and
        // this is its last use.
        unsafe { bindings::rsmm_folio_put(self.0.as_ptr()) };
    }
}

/// A section of the current task in which allocations do not start I/O
/// to reclaim memory (`memalloc_noio_save()`): every allocation behaves
/// as `GFP_NOIO`.  Ends when dropped, on the task that made it, which it
/// cannot leave (it is not `Send`).
///
/// Sections nest, and must end in the reverse order of their start, as
/// locals going out of scope do: each restores the flags it found.  One
/// dropped early, before a section started after it, would end that one
/// too (a wider allocation context, never memory unsafety).
pub struct NoIoScope {
    saved: c_uint,
    _not_send: PhantomData<*mut ()>,
}

impl NoIoScope {
    /// Enters the section.
    pub fn enter() -> Self {
        Self {
            // SAFETY: `memalloc_noio_save()` only changes the current
            // task's flags; the drop below restores them on that task.
            saved: unsafe { bindings::memalloc_noio_save() },
            _not_send: PhantomData,
        }
    }
}

impl Drop for NoIoScope {
    fn drop(&mut self) {
        // SAFETY: restores what `enter` saved, on the same task (the value
        // is not `Send`).
        unsafe { bindings::memalloc_noio_restore(self.saved) };
    }
}

/// As [`NoIoScope`] for file systems (`memalloc_nofs_save()`): every
/// allocation of the section behaves as `GFP_NOFS`.
pub struct NoFsScope {
    saved: c_uint,
    _not_send: PhantomData<*mut ()>,
}

impl NoFsScope {
    /// Enters the section.
    pub fn enter() -> Self {
        Self {
            // SAFETY: as in `NoIoScope::enter`.
            saved: unsafe { bindings::memalloc_nofs_save() },
            _not_send: PhantomData,
        }
    }
}

impl Drop for NoFsScope {
    fn drop(&mut self) {
        // SAFETY: as in `NoIoScope`'s drop.
        unsafe { bindings::memalloc_nofs_restore(self.saved) };
    }
}
