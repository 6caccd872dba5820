// SPDX-License-Identifier: GPL-2.0

//! Borrowed references to pages whose memory the borrower may copy.
//!
//! A [`PageRef`] stands for one `struct page` that someone else owns (the
//! page cache, the swap cache, an allocator's area) and lends for a while.
//! `&PageRef` lets its holder read the page's bytes, `&mut PageRef` also
//! write them; every access maps the page with `kmap_local_page()` for the
//! length of one copy, so highmem pages work too.
//!
//! C header: [`include/linux/highmem.h`](srctree/include/linux/highmem.h)

use crate::{
    bindings,
    error::code::{EINVAL, EIO},
    mm::buddy::ContigPages,
    prelude::*,
    types::Opaque,
};

/// Size of a page in bytes.
const PAGE_SIZE: usize = crate::mm::PAGE_SIZE;

/// A borrowed `struct page`, used through `&PageRef` (reading its memory)
/// or `&mut PageRef` (reading and writing it).
///
/// # Invariants
///
/// A `&'a PageRef` points to a valid `struct page` whose memory may be
/// mapped with `kmap_local_page()` and read for all of `'a`, and nobody
/// writes that memory during `'a` except through a `&mut PageRef` of the
/// page, of which there is none while the `&PageRef` exists.  A
/// `&'a mut PageRef` points to a valid `struct page` whose memory nobody
/// else accesses for all of `'a`.
#[repr(transparent)]
pub struct PageRef(Opaque<bindings::page>);

impl PageRef {
    /// Borrows the page `page` for reading.
    ///
    /// # Safety
    ///
    /// `page` must point to a valid `struct page` that stays valid for `'a`;
    /// its memory must be mapped or mappable with `kmap_local_page()` and
    /// accessible (allocated, not poisoned for KASAN) for `'a`, and nobody
    /// may write it during `'a`.
    pub unsafe fn from_raw<'a>(page: *mut bindings::page) -> &'a PageRef {
        // SAFETY: `PageRef` is a transparent wrapper of `struct page`; the
        // caller guarantees the invariants for `'a`.
        unsafe { &*page.cast::<PageRef>() }
    }

    /// Borrows the page `page` for reading and writing.
    ///
    /// # Safety
    ///
    /// As for [`PageRef::from_raw`], and in addition nobody else may read
    /// or write the page's memory during `'a`.
    pub unsafe fn from_raw_mut<'a>(page: *mut bindings::page) -> &'a mut PageRef {
        // SAFETY: as in `from_raw`; the caller guarantees exclusive access.
        unsafe { &mut *page.cast::<PageRef>() }
    }

    /// Returns the raw `struct page` pointer.
    pub fn as_ptr(&self) -> *mut bindings::page {
        self.0.get()
    }

    /// Returns the page frame number.
    pub fn pfn(&self) -> usize {
        // SAFETY: `self` points to a valid `struct page` (type invariant).
        unsafe { bindings::page_to_pfn(self.as_ptr()) as usize }
    }

    /// Whether the page is marked hardware-poisoned (`PG_hwpoison`):
    /// `memory_failure()` found its memory bad, and nobody may read it.
    pub fn is_hwpoisoned(&self) -> bool {
        // SAFETY: `self` points to a valid `struct page` (type invariant).
        unsafe { bindings::rsmm_page_hwpoisoned(self.as_ptr()) }
    }

    /// Runs `f` on the page's memory, mapped for the duration of the call.
    fn with_mapped<R>(&self, f: impl FnOnce(*mut u8) -> R) -> R {
        // SAFETY: the page is valid and mappable (type invariant).
        let va = unsafe { bindings::kmap_local_page(self.as_ptr()) }.cast::<u8>();
        let r = f(va);
        // SAFETY: `va` is the mapping made above, the most recent one of
        // this thread (`f` unmapped whatever it mapped).
        unsafe { bindings::kunmap_local(va.cast()) };
        r
    }

    /// Checks that `offset..offset + len` lies in the page.
    fn check(offset: usize, len: usize) -> Result {
        match offset.checked_add(len) {
            Some(end) if end <= PAGE_SIZE => Ok(()),
            _ => Err(EINVAL),
        }
    }

    /// Copies `buf.len()` bytes at `offset` in the page into `buf`.
    ///
    /// Fails with `EINVAL`, copying nothing, if the range is not inside the
    /// page.
    pub fn read_into(&self, offset: usize, buf: &mut [u8]) -> Result {
        Self::check(offset, buf.len())?;
        self.with_mapped(|va| {
            // SAFETY: `va` maps the page, whose memory is readable and not
            // written meanwhile (type invariant); the range is inside it;
            // `buf` is a distinct Rust buffer.
            unsafe { core::ptr::copy_nonoverlapping(va.add(offset), buf.as_mut_ptr(), buf.len()) }
        });
        Ok(())
    }

    /// Copies `buf` into the page at `offset`.
    ///
    /// Fails with `EINVAL`, copying nothing, if the range is not inside the
    /// page.
    pub fn write_from(&mut self, offset: usize, buf: &[u8]) -> Result {
        Self::check(offset, buf.len())?;
        self.with_mapped(|va| {
            // SAFETY: `va` maps the page, which only `self` accesses (type
            // invariant); the range is inside it.
            unsafe { core::ptr::copy_nonoverlapping(buf.as_ptr(), va.add(offset), buf.len()) }
        });
        Ok(())
    }

    /// Copies the whole of `src` into this page.
    pub fn copy_from_page(&mut self, src: &PageRef) {
        src.with_mapped(|from| {
            self.with_mapped(|to| {
                // SAFETY: both mappings cover a whole page; `src` is not
                // written and `self` not accessed by anyone else meanwhile
                // (type invariants); they are distinct pages, as `self` is
                // exclusive and `src` shared.
                unsafe { core::ptr::copy_nonoverlapping(from, to, PAGE_SIZE) }
            })
        });
    }

    /// Copies the whole of `src` into this page unless `src` is bad memory.
    ///
    /// Fails with `EIO` if `src` is marked hardware-poisoned, or if reading
    /// it raised a machine check that the architecture recovers from
    /// (`copy_mc_highpage()`, which then queues `memory_failure()` for
    /// `src`); this page's contents are then undefined.  Where machine
    /// checks are not recoverable this is [`PageRef::copy_from_page`]
    /// after the flag check.
    pub fn copy_from_good_page(&mut self, src: &PageRef) -> Result {
        if src.is_hwpoisoned() {
            return Err(EIO);
        }
        // SAFETY: both pages are valid and mappable, `src` is not written
        // and `self` not accessed by anyone else meanwhile (type
        // invariants); they are distinct pages.
        match unsafe { bindings::copy_mc_highpage(self.as_ptr(), src.as_ptr()) } {
            0 => Ok(()),
            _ => Err(EIO),
        }
    }

    /// Fills the whole page with zeroes.
    pub fn zero(&mut self) {
        self.with_mapped(|va| {
            // SAFETY: `va` maps the page, which only `self` accesses.
            unsafe { core::ptr::write_bytes(va, 0, PAGE_SIZE) }
        });
    }
}

/// Whether any page of the system is hardware-poisoned now (counted by
/// `memory_failure()`, which `unpoison_memory()` undoes): while none is, a
/// caller need not look at page flags for `PG_hwpoison`.
pub fn any_hwpoisoned() -> bool {
    // SAFETY: FFI call reading an atomic counter.
    unsafe { bindings::rsmm_num_poisoned_pages() != 0 }
}

impl ContigPages {
    /// Borrows page `i` of the block, or `None` if there is no such page.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::mm::buddy::ContigPages;
    ///
    /// let mut a = ContigPages::alloc(None, 0, GFP_KERNEL | __GFP_ZERO)?;
    /// let mut b = ContigPages::alloc(None, 0, GFP_KERNEL)?;
    /// a.page_mut(0).ok_or(EINVAL)?.write_from(100, b"dmem")?;
    /// b.page_mut(0).ok_or(EINVAL)?.copy_from_page(a.page(0).ok_or(EINVAL)?);
    /// let mut buf = [0u8; 6];
    /// b.page(0).ok_or(EINVAL)?.read_into(99, &mut buf)?;
    /// assert_eq!(&buf, b"\0dmem\0");
    /// assert!(a.page(1).is_none());
    /// assert_eq!(b.page(0).ok_or(EINVAL)?.read_into(4095, &mut buf), Err(EINVAL));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn page(&self, i: usize) -> Option<&PageRef> {
        if i >= self.nr_pages() {
            return None;
        }
        // SAFETY: page `i` of the block is in the memory map, allocated and
        // owned by `self`, so it stays valid and accessible while `self` is
        // borrowed, and nobody writes it, since writing needs `&mut self`.
        Some(unsafe { PageRef::from_raw(self.as_page_ptr().add(i)) })
    }

    /// Borrows page `i` of the block for writing, or `None` if there is no
    /// such page.
    pub fn page_mut(&mut self, i: usize) -> Option<&mut PageRef> {
        if i >= self.nr_pages() {
            return None;
        }
        // SAFETY: as in `page`; `&mut self` excludes every other access.
        Some(unsafe { PageRef::from_raw_mut(self.as_page_ptr().add(i)) })
    }
}
