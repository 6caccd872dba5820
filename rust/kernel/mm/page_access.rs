// SPDX-License-Identifier: GPL-2.0

//! Borrowed pages whose memory the borrower may copy, with the access rule
//! in the type.
//!
//! A [`BorrowedPage`] says only that a `struct page` stays valid for a
//! while; its [`Page`] methods that touch the page's memory are `unsafe`,
//! as nothing tells who else reads or writes it meanwhile.  The two types
//! here carry that rule too, so their copies are safe:
//!
//! - a [`SharedPage`] is a page nobody writes while it exists: its holder
//!   reads it;
//! - an [`ExclusivePage`] is a page nobody else reads or writes while it
//!   exists: its holder reads and writes it.
//!
//! Both dereference to [`Page`] (for [`Page::as_ptr`] and the like), and
//! every copy maps the page with `kmap_local_page()` for its length, so
//! highmem pages work too.  An `&ExclusivePage` lends its page for reading
//! through [`ExclusivePage::as_shared`].
//!
//! C header: [`include/linux/highmem.h`](srctree/include/linux/highmem.h)

use crate::{
    bindings,
    error::code::EIO,
    mm::buddy::ContigPages,
    page::{BorrowedPage, Page},
    prelude::*,
};
use core::{ops::Deref, ptr::NonNull};

/// Size of a page in bytes.
const PAGE_SIZE: usize = crate::mm::PAGE_SIZE;

/// Whether `page` is marked hardware-poisoned (`PG_hwpoison`).
fn hwpoisoned(page: &Page) -> bool {
    // SAFETY: a `Page` points to a valid `struct page` (type invariant of
    // `Page` and `BorrowedPage`); its flags may be read at any time.
    unsafe { bindings::rsmm_page_hwpoisoned(page.as_ptr()) }
}

/// Returns the page frame number of `page`.
fn pfn(page: &Page) -> usize {
    // SAFETY: as in `hwpoisoned`.
    unsafe { bindings::page_to_pfn(page.as_ptr()) as usize }
}

/// A borrowed page that nobody writes while this value exists: its holder
/// may read the page's memory.
///
/// # Invariants
///
/// The page of `self.0` is valid for `'a`, its memory may be mapped with
/// `kmap_local_page()` and is accessible (allocated, not poisoned for
/// KASAN) for all of `'a`, and nobody writes that memory during `'a`.
pub struct SharedPage<'a>(BorrowedPage<'a>);

impl<'a> SharedPage<'a> {
    /// Borrows the page at `ptr` for reading.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a `struct page` that stays valid for `'a`, whose
    /// memory may be mapped with `kmap_local_page()` and is accessible for
    /// `'a`, and that nobody writes during `'a`.
    pub unsafe fn from_raw(ptr: NonNull<bindings::page>) -> Self {
        // INVARIANT: the caller's contract.
        // SAFETY: the caller guarantees that the page stays valid for `'a`.
        Self(unsafe { BorrowedPage::from_raw(ptr) })
    }

    /// Returns the page frame number.
    pub fn pfn(&self) -> usize {
        pfn(self)
    }

    /// Whether the page is marked hardware-poisoned (`PG_hwpoison`):
    /// `memory_failure()` found its memory bad, and nobody may read it.
    pub fn is_hwpoisoned(&self) -> bool {
        hwpoisoned(self)
    }

    /// Copies `buf.len()` bytes at `offset` in the page into `buf`.
    ///
    /// Fails with `EINVAL`, copying nothing, if the range is not inside the
    /// page.
    pub fn read_into(&self, offset: usize, buf: &mut [u8]) -> Result {
        // SAFETY: `buf` is valid for writing `buf.len()` bytes; nobody
        // writes the page while `self` exists (type invariant), so the read
        // races with no write.
        unsafe { self.0.read_raw(buf.as_mut_ptr(), offset, buf.len()) }
    }

    /// Runs `f` on the page's bytes, mapped for the call (pages mapped in
    /// `f` are unmapped before this one, as `kunmap_local()` wants).
    pub fn with_bytes<T>(&self, f: impl FnOnce(&[u8; PAGE_SIZE]) -> T) -> T {
        // SAFETY: the page is valid and mappable (type invariant).
        let p = unsafe { bindings::kmap_local_page(self.as_ptr()) };
        // SAFETY: the mapping covers the page's `PAGE_SIZE` bytes, which are
        // accessible and written by nobody while `self` exists (type
        // invariant), so they may be shared for the call.
        let r = f(unsafe { &*p.cast::<[u8; PAGE_SIZE]>() });
        // SAFETY: undoes the mapping made above; any made in `f` were
        // undone before `f` returned.
        unsafe { bindings::kunmap_local(p) };
        r
    }
}

impl Clone for SharedPage<'_> {
    /// Borrows the page for reading once more, for as long.
    fn clone(&self) -> Self {
        // INVARIANT: a page nobody writes during `'a` may be read through
        // any number of values.
        // SAFETY: `Page::as_ptr()` returns the non-null pointer the page was
        // borrowed with, valid, mappable, accessible and not written for
        // `'a` (type invariant).
        unsafe { Self::from_raw(NonNull::new_unchecked(self.as_ptr())) }
    }
}

impl Deref for SharedPage<'_> {
    type Target = Page;

    fn deref(&self) -> &Page {
        &self.0
    }
}

/// A borrowed page that nobody else reads or writes while this value
/// exists: its holder may read and write the page's memory.
///
/// # Invariants
///
/// The page of `self.0` is valid for `'a`, its memory may be mapped with
/// `kmap_local_page()` and is accessible (allocated, not poisoned for
/// KASAN) for all of `'a`, and nobody but the holder of this value reads
/// or writes that memory during `'a`.
pub struct ExclusivePage<'a>(BorrowedPage<'a>);

impl<'a> ExclusivePage<'a> {
    /// Borrows the page at `ptr` for reading and writing.
    ///
    /// # Safety
    ///
    /// As for [`SharedPage::from_raw`], and in addition nobody else may
    /// read or write the page's memory during `'a`.
    pub unsafe fn from_raw(ptr: NonNull<bindings::page>) -> Self {
        // INVARIANT: the caller's contract.
        // SAFETY: the caller guarantees that the page stays valid for `'a`.
        Self(unsafe { BorrowedPage::from_raw(ptr) })
    }

    /// Lends the page for reading while `self` is borrowed.
    pub fn as_shared(&self) -> SharedPage<'_> {
        // INVARIANT: while `self` is borrowed shared, nobody writes the
        // page: only `self` may (type invariant), and writing takes
        // `&mut self`.
        // SAFETY: `Page::as_ptr()` returns the non-null pointer the page was
        // borrowed with; the page is valid, mappable and accessible for
        // `'a` (type invariant), which the borrow of `self` does not
        // outlive.
        SharedPage(unsafe { BorrowedPage::from_raw(NonNull::new_unchecked(self.as_ptr())) })
    }

    /// Returns the page frame number.
    pub fn pfn(&self) -> usize {
        pfn(self)
    }

    /// Whether the page is marked hardware-poisoned (`PG_hwpoison`).
    pub fn is_hwpoisoned(&self) -> bool {
        hwpoisoned(self)
    }

    /// Copies `buf.len()` bytes at `offset` in the page into `buf`.
    ///
    /// Fails with `EINVAL`, copying nothing, if the range is not inside the
    /// page.
    pub fn read_into(&self, offset: usize, buf: &mut [u8]) -> Result {
        self.as_shared().read_into(offset, buf)
    }

    /// Copies `buf` into the page at `offset`.
    ///
    /// Fails with `EINVAL`, copying nothing, if the range is not inside the
    /// page.
    pub fn write_from(&mut self, offset: usize, buf: &[u8]) -> Result {
        // SAFETY: `buf` is valid for reading `buf.len()` bytes; only `self`
        // accesses the page (type invariant), so the write races with
        // nothing.
        unsafe { self.0.write_raw(buf.as_ptr(), offset, buf.len()) }
    }

    /// Fills the whole page with zeroes.
    pub fn zero(&mut self) {
        // SAFETY: only `self` accesses the page (type invariant).  The
        // range is the whole page, which the bounds check never refuses.
        let _ = unsafe { self.0.fill_zero_raw(0, PAGE_SIZE) };
    }

    /// Copies the whole of `src` into this page.
    pub fn copy_from_page(&mut self, src: &SharedPage<'_>) {
        // SAFETY: FFI calls on two valid, mappable pages (type invariants);
        // the second mapping is undone first, as `kunmap_local()` wants.
        // Nobody writes `src` and nobody else accesses `self` meanwhile
        // (type invariants): they are distinct pages, as a `SharedPage` of
        // this page cannot exist while `self` is borrowed mutably.
        unsafe {
            let from = bindings::kmap_local_page(src.as_ptr()).cast::<u8>();
            let to = bindings::kmap_local_page(self.as_ptr()).cast::<u8>();
            core::ptr::copy_nonoverlapping(from, to, PAGE_SIZE);
            bindings::kunmap_local(to.cast());
            bindings::kunmap_local(from.cast());
        }
    }

    /// Copies the whole of `src` into this page unless `src` is bad memory.
    ///
    /// Fails with `EIO` if `src` is marked hardware-poisoned, or if reading
    /// it raised a machine check that the architecture recovers from
    /// (`copy_mc_highpage()`, which then queues `memory_failure()` for
    /// `src`); this page's contents are then undefined.  Where machine
    /// checks are not recoverable this is [`ExclusivePage::copy_from_page`]
    /// after the flag check.
    pub fn copy_from_good_page(&mut self, src: &SharedPage<'_>) -> Result {
        if src.is_hwpoisoned() {
            return Err(EIO);
        }
        // SAFETY: both pages are valid and mappable, `src` is not written
        // and `self` not accessed by anyone else meanwhile (type
        // invariants); they are distinct pages, as in `copy_from_page`.
        match unsafe { bindings::copy_mc_highpage(self.as_ptr(), src.as_ptr()) } {
            0 => Ok(()),
            _ => Err(EIO),
        }
    }
}

impl Deref for ExclusivePage<'_> {
    type Target = Page;

    fn deref(&self) -> &Page {
        &self.0
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
    /// The `struct page` of page `i` of the block, or `None` if there is no
    /// such page.
    fn page_ptr(&self, i: usize) -> Option<NonNull<bindings::page>> {
        if i >= self.nr_pages() {
            return None;
        }
        // SAFETY: page `i` of the block is in the memory map, inside the
        // block's run of `struct page`s.
        NonNull::new(unsafe { self.as_page_ptr().add(i) })
    }

    /// Borrows page `i` of the block for reading, or `None` if there is no
    /// such page.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::mm::buddy::ContigPages;
    ///
    /// let mut a = ContigPages::alloc(None, 0, GFP_KERNEL | __GFP_ZERO)?;
    /// let mut b = ContigPages::alloc(None, 0, GFP_KERNEL)?;
    /// a.page_mut(0).ok_or(EINVAL)?.write_from(100, b"dmem")?;
    /// b.page_mut(0).ok_or(EINVAL)?.copy_from_page(&a.page(0).ok_or(EINVAL)?);
    /// let mut buf = [0u8; 6];
    /// b.page(0).ok_or(EINVAL)?.read_into(99, &mut buf)?;
    /// assert_eq!(&buf, b"\0dmem\0");
    /// assert!(a.page(1).is_none());
    /// assert_eq!(b.page(0).ok_or(EINVAL)?.read_into(4095, &mut buf), Err(EINVAL));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn page(&self, i: usize) -> Option<SharedPage<'_>> {
        let p = self.page_ptr(i)?;
        // SAFETY: page `i` of the block is allocated and owned by `self`,
        // so it stays valid and accessible while `self` is borrowed, and
        // nobody writes it, since writing needs `&mut self`.
        Some(unsafe { SharedPage::from_raw(p) })
    }

    /// Borrows page `i` of the block for writing, or `None` if there is no
    /// such page.
    pub fn page_mut(&mut self, i: usize) -> Option<ExclusivePage<'_>> {
        let p = self.page_ptr(i)?;
        // SAFETY: as in `page`; `&mut self` excludes every other access.
        Some(unsafe { ExclusivePage::from_raw(p) })
    }
}
