// SPDX-License-Identifier: GPL-2.0

//! The hooks of the swap and page-cache paths.
//!
//! DMEM keeps copies of pages the kernel has already written elsewhere in
//! pages GCMA lends it.  These functions are what the swap and page-cache
//! paths call: each turns a folio into a key and a page and calls the
//! client.  Every hook is reached through an inline static branch of
//! `include/linux/gcma.h`, one key per client, on while the client is, so
//! the paths pay nothing while it is off.
//!
//! Swap (write-through): `swap_writepage()` stores an order-0 folio after
//! zswap declined it, and the device is written all the same; a folio
//! zswap takes drops the slot's copy, so zswap's data is never shadowed by
//! an older one.  `swap_read_folio()` loads after zswap and before the
//! device (the entry is dropped by the load), slots are invalidated where
//! `swap_range_free()` frees them, and a whole device at swapoff.
//!
//! Clean page cache: file systems whose read path asks DMEM first (ext2
//! through mpage, ext4) set `SB_I_GCMA_DMEM`.  Every removal of a folio of
//! theirs from the page cache goes through a hook: reclaim
//! (`__remove_mapping()`) stores an order-0, clean, uptodate folio and
//! drops the entry of anything else it removes; truncation, hole punching
//! and inode eviction (`truncate_inode_pages_range()`), direct-I/O writes
//! (`invalidate_inode_pages2_range()` before the write, and
//! `kiocb_invalidate_post_direct_write()` after it, cached pages or not),
//! moved extents (`EXT4_IOC_MOVE_EXT`) and unmount drop the entries of the
//! range, and any other removal of a single folio
//! (`filemap_remove_folio()`: memory-failure removal, for one) drops the
//! folio's.  A store runs under the folio lock before the folio leaves the
//! mapping, so a truncation or invalidation that finds the folio gone, or
//! the mapping empty, runs its DMEM invalidation after the store: no entry
//! outlives a change of the file.  The full argument is in
//! `Documentation/mm/gcma.rst`.
//!
//! File keys are the superblock's device number (an id unique among
//! mounted superblocks; unmount drops every entry of it), the inode number
//! and the page index.  Entries never outlive the in-memory inode (its
//! eviction truncates the whole file), so nothing that may change during
//! the inode's life, such as `i_generation`, is part of the key.  Swap
//! keys are the swap type and offset.

use crate::{
    dmem::{FileKey, StoreOutcome, SwapKey},
    dmem_client::{dmems, invalidate_sb, invalidate_swap, invalidate_swap_type, refused_large},
};
use kernel::{
    bindings,
    ffi::{c_uint, c_ulong},
    mm::{
        folio::{AddressSpace, LockedFolio, SuperBlock, UnreadFolio},
        page_access::SharedPage,
    },
};

/// The file part of a file key: superblock device and inode number.
#[derive(Clone, Copy)]
struct FileId {
    sb: u32,
    ino: u64,
}

impl FileId {
    /// The id of the file whose pages `mapping` caches, for a store or a
    /// load, or `None` if DMEM keeps none of them.
    fn of(mapping: Option<&AddressSpace>) -> Option<Self> {
        let inode = mapping?.host()?;
        // Swap I/O rewrites an active swap file's blocks behind its page
        // cache: none of its pages is stored or loaded (swapoff drops what
        // was kept before swapon).
        if !inode.is_regular() || inode.is_swapfile() {
            return None;
        }
        Self::of_any(mapping)
    }

    /// The id of the file whose pages `mapping` caches, for a drop or a
    /// fence: `None` only if its file system keeps nothing in DMEM.
    ///
    /// Not filtered as [`FileId::of`] is: whether the file is a swap file
    /// changes while it has entries (swapoff drops what was kept before
    /// swapon, and clears `S_SWAPFILE` only after that), and a drop that
    /// skipped it would leave them to be loaded afterwards.
    fn of_any(mapping: Option<&AddressSpace>) -> Option<Self> {
        let inode = mapping?.host()?;
        let sb = inode.super_block();
        if sb.iflags() & bindings::SB_I_GCMA_DMEM as c_ulong == 0 {
            return None;
        }
        Some(Self {
            sb: sb.dev(),
            ino: inode.ino(),
        })
    }

    /// The key of page `index` of the file.
    fn key(self, index: usize) -> FileKey {
        FileKey {
            sb: self.sb,
            ino: self.ino,
            index: index as u64,
        }
    }
}

/// Whether DMEM's verify mode is on: every hit is then checked against the
/// device (`dmem_verify.rs`).
#[cfg(CONFIG_GCMA_DMEM_VERIFY)]
fn verifying() -> bool {
    kernel::mm::gcma::verify::is_on()
}

/// Without verify mode, never.
#[cfg(not(CONFIG_GCMA_DMEM_VERIFY))]
fn verifying() -> bool {
    false
}

/// Drops the entries of pages `first..=last` of file `id`.
fn invalidate_file(id: FileId, first: usize, last: usize) {
    if let Some(d) = dmems() {
        d.file.invalidate_range(&id.key(first), &id.key(last));
    }
}

/// A locked file folio is leaving the page cache; `reclaimed` if reclaim
/// removes it (it is stored if it can be) rather than an invalidation that
/// keeps no copy.
///
/// Called by `__remove_mapping()` and `filemap_remove_folio()` before they
/// take the mapping's locks.  Whatever is not stored has its entries
/// dropped, so that a later miss in the page cache never finds data older
/// than the folio's.  A folio that may be pinned for DMA is not stored: a
/// device may be writing it while it is copied, and the copy could be
/// torn.
///
/// # Safety
///
/// `folio` must be a locked folio, still in its mapping.
#[no_mangle]
pub(crate) unsafe extern "C" fn __gcma_dmem_evict_folio(
    folio: *mut bindings::folio,
    reclaimed: bool,
) {
    // SAFETY: the caller's contract.
    let folio = unsafe { LockedFolio::from_raw(folio) };
    if folio.is_swapcache() {
        return;
    }
    let Some(id) = FileId::of(folio.mapping()) else {
        return;
    };
    let index = folio.index();
    if reclaimed
        && !folio.is_large()
        && folio.is_uptodate()
        && !folio.is_dirty()
        && !folio.is_writeback()
        && !folio.maybe_dma_pinned()
    {
        if let Some(d) = dmems() {
            // SAFETY: a locked, clean, uptodate page-cache folio that
            // reclaim unmapped and is removing, not under writeback nor
            // pinned: nobody writes it during the store.
            let src = unsafe { SharedPage::from_raw(folio.first_page()) };
            let _ = d.file.store(&id.key(index), src);
        }
        return;
    }
    if reclaimed && folio.is_large() {
        refused_large(bindings::gcma_dmem_client_GCMA_DMEM_FILE);
    }
    invalidate_file(id, index, index + folio.nr_pages() - 1);
}

/// Fills a folio from DMEM instead of the disk; returns `true` if DMEM
/// had the page: the folio is then uptodate and unlocked, and the caller
/// must not read it.
///
/// # Safety
///
/// `folio` must be a locked folio of the page cache, not uptodate, about
/// to be read, that nobody else accesses until it is uptodate.
#[no_mangle]
pub(crate) unsafe extern "C" fn __gcma_dmem_read_folio(folio: *mut bindings::folio) -> bool {
    // SAFETY: the caller's contract; on `false` the folio goes back to the
    // caller locked, as `UnreadFolio` leaves it when dropped.
    let mut unread = unsafe { UnreadFolio::from_raw(folio) };
    let folio = unread.folio();
    if folio.is_large() || folio.has_buffers() {
        return false;
    }
    let mapping = folio.mapping();
    let Some(id) = FileId::of(mapping) else {
        return false;
    };
    // A folio wholly beyond the end of the file must read as zeros, which
    // the file system's read gives it, and an entry there can only be
    // older than the truncation that cut the file.  ext2 and ext4
    // truncate under the `invalidate_lock`, which keeps reads from
    // creating folios between the truncation's walk and its drop; the
    // test costs one comparison and does not rely on every file system
    // doing so.
    let pos = folio.index() << bindings::PAGE_SHIFT;
    if mapping
        .and_then(AddressSpace::host)
        .is_some_and(|inode| i64::try_from(pos).map_or(true, |p| p >= inode.size()))
    {
        return false;
    }
    let verify = verifying();
    // Verify mode's own read of the device: not a page-cache folio.
    if verify && !mapping.is_some_and(|m| m.caches(folio)) {
        return false;
    }
    let Some(d) = dmems() else { return false };
    let key = id.key(folio.index());
    if !d.file.load(&key, unread.first_page()) {
        return false;
    }
    #[cfg(CONFIG_GCMA_DMEM_VERIFY)]
    if verifying() {
        crate::dmem_verify::file(&mut unread, id.sb, id.ino);
    }
    // SAFETY: the folio holds the page DMEM kept for its range.
    unsafe { unread.end_read(true) };
    true
}

/// Drops the entries of pages `first..=last` (`c_ulong::MAX` for the end
/// of the file) of the file `mapping` caches.
///
/// # Safety
///
/// `mapping` must be a valid address space whose host stays valid for the
/// call.
#[no_mangle]
pub(crate) unsafe extern "C" fn __gcma_dmem_invalidate_file(
    mapping: *mut bindings::address_space,
    first: c_ulong,
    last: c_ulong,
) {
    // SAFETY: the caller's contract.
    let mapping = unsafe { AddressSpace::from_raw(mapping) };
    if let Some(id) = FileId::of_any(Some(mapping)) {
        invalidate_file(id, first, last);
    }
}

/// Begins a fenced invalidation of pages `first..=last` of the file
/// `mapping` caches: drops the range, then refuses stores and fails loads
/// of the file until [`__gcma_dmem_fence_end`].  Returns whether it raised
/// the fence; the caller calls the end exactly when it did.
///
/// For walks that invalidate the page cache of a file whose bytes changed
/// behind it (direct-I/O writes): see `Documentation/mm/gcma.rst`.
///
/// # Safety
///
/// As for [`__gcma_dmem_invalidate_file`].
#[no_mangle]
pub(crate) unsafe extern "C" fn __gcma_dmem_fence_begin(
    mapping: *mut bindings::address_space,
    first: c_ulong,
    last: c_ulong,
) -> bool {
    // SAFETY: the caller's contract.
    let mapping = unsafe { AddressSpace::from_raw(mapping) };
    let (Some(id), Some(d)) = (FileId::of_any(Some(mapping)), dmems()) else {
        return false;
    };
    d.file.fence_begin(&id.key(first), &id.key(last));
    true
}

/// Ends the fenced invalidation that [`__gcma_dmem_fence_begin`] began
/// (and returned `true` for) with the same arguments: drops the range
/// again and lowers the fence.  Called whatever the client's switch is
/// now, as the fence must come down all the same.
///
/// # Safety
///
/// As for [`__gcma_dmem_invalidate_file`].
#[no_mangle]
pub(crate) unsafe extern "C" fn __gcma_dmem_fence_end(
    mapping: *mut bindings::address_space,
    first: c_ulong,
    last: c_ulong,
) {
    // SAFETY: the caller's contract.
    let mapping = unsafe { AddressSpace::from_raw(mapping) };
    // Both are what they were at the begin: the superblock's flag is set
    // before the file system is live, and the instances never go away.
    if let (Some(id), Some(d)) = (FileId::of_any(Some(mapping)), dmems()) {
        d.file.fence_end(&id.key(first), &id.key(last));
    }
}

/// Drops every entry of the superblock `sb`, being shut down.
///
/// # Safety
///
/// `sb` must be a valid superblock for the call.
#[no_mangle]
pub(crate) unsafe extern "C" fn __gcma_dmem_umount(sb: *mut bindings::super_block) {
    // SAFETY: the caller's contract.
    let sb = unsafe { SuperBlock::from_raw(sb) };
    if sb.iflags() & bindings::SB_I_GCMA_DMEM as c_ulong != 0 {
        invalidate_sb(sb.dev());
    }
}

/// Keeps a copy of a folio being written to swap; a large folio is not
/// stored: its slots' entries are dropped.
///
/// # Safety
///
/// `folio` must be a locked swap-cache folio, about to be written to its
/// device, whose memory nobody writes meanwhile.
#[no_mangle]
pub(crate) unsafe extern "C" fn __gcma_dmem_swap_store(folio: *mut bindings::folio) {
    // SAFETY: the caller's contract.
    let folio = unsafe { LockedFolio::from_raw(folio) };
    let (swap_type, offset) = folio.swap_slot();
    if folio.is_large() {
        refused_large(bindings::gcma_dmem_client_GCMA_DMEM_SWAP);
        invalidate_swap(swap_type, offset as u64, folio.nr_pages() as u64);
        return;
    }
    let Some(d) = dmems() else { return };
    // SAFETY: nobody writes the folio during the store (the caller's
    // contract).
    let src = unsafe { SharedPage::from_raw(folio.first_page()) };
    let key = SwapKey {
        swap_type,
        offset: offset as u64,
    };
    let _: Option<StoreOutcome> = d.swap.store(&key, src);
}

/// Fills a folio being swapped in from DMEM; returns `true` if DMEM had
/// the page (the entry is dropped): the folio is uptodate and the caller
/// must not read the device.  The caller unlocks.
///
/// # Safety
///
/// `folio` must be a locked folio, not uptodate, whose slot is
/// `folio->swap`, that nobody else accesses until it is uptodate.
#[no_mangle]
pub(crate) unsafe extern "C" fn __gcma_dmem_swap_load(folio: *mut bindings::folio) -> bool {
    // SAFETY: the caller's contract; on `false` the folio goes back to the
    // caller as it was, as `UnreadFolio` leaves it when dropped.
    let mut unread = unsafe { UnreadFolio::from_raw(folio) };
    let folio = unread.folio();
    if folio.is_large() {
        return false;
    }
    let Some(d) = dmems() else { return false };
    let (swap_type, offset) = folio.swap_slot();
    let key = SwapKey {
        swap_type,
        offset: offset as u64,
    };
    if !d.swap.load(&key, unread.first_page()) {
        return false;
    }
    #[cfg(CONFIG_GCMA_DMEM_VERIFY)]
    if verifying() {
        crate::dmem_verify::swap(&mut unread);
    }
    // SAFETY: the folio holds the page DMEM kept for its slot.
    unsafe { unread.mark_uptodate() };
    true
}

/// Drops the entries of the slots of a swap-cache folio whose data now
/// lives elsewhere (zswap).
///
/// # Safety
///
/// `folio` must be a locked swap-cache folio.
#[no_mangle]
pub(crate) unsafe extern "C" fn __gcma_dmem_swap_drop_folio(folio: *mut bindings::folio) {
    // SAFETY: the caller's contract.
    let folio = unsafe { LockedFolio::from_raw(folio) };
    let (swap_type, offset) = folio.swap_slot();
    invalidate_swap(swap_type, offset as u64, folio.nr_pages() as u64);
}

/// Swap slots `offset..offset + nr` of type `swap_type` are being freed.
/// May be called under the swap device's lock; does not sleep.
#[no_mangle]
pub(crate) extern "C" fn __gcma_dmem_swap_free(swap_type: c_uint, offset: c_ulong, nr: c_uint) {
    invalidate_swap(swap_type, offset as u64, u64::from(nr));
}

/// Drops every entry of the swap device of type `swap_type`, being
/// switched off.
#[no_mangle]
pub(crate) extern "C" fn __gcma_dmem_swapoff(swap_type: c_uint) {
    invalidate_swap_type(swap_type);
}
