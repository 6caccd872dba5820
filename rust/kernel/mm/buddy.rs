// SPDX-License-Identifier: GPL-2.0

//! Physically contiguous allocations from the buddy allocator.

use super::{numa::NodeId, MAX_PAGE_ORDER, PAGE_SHIFT, PAGE_SIZE};
use crate::{
    alloc::Flags,
    bindings,
    error::code::{EINVAL, ENOMEM},
    error::Result,
};
use core::ptr::NonNull;

/// An owned block of `2^order` physically contiguous pages from the buddy
/// allocator, freed with `__free_pages` when dropped.
///
/// # Invariants
///
/// `page` points to the first `struct page` of a block of order `order`
/// allocated by `alloc_pages_node` and owned by this value.
pub struct ContigPages {
    page: NonNull<bindings::page>,
    order: u32,
}

// SAFETY: the block is owned memory; nothing ties it to the allocating task.
unsafe impl Send for ContigPages {}
// SAFETY: shared references only read the metadata and copy data out.
unsafe impl Sync for ContigPages {}

impl ContigPages {
    /// Allocates `2^order` contiguous pages, preferably on `node` (the
    /// caller's node when `None`).
    ///
    /// Returns `EINVAL` for an order above [`MAX_PAGE_ORDER`] and `ENOMEM`
    /// when no block is free.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::mm::{buddy::ContigPages, PAGE_SIZE};
    ///
    /// let mut block = ContigPages::alloc(None, 2, GFP_KERNEL | __GFP_ZERO)?;
    /// assert_eq!(block.nr_pages(), 4);
    /// assert_eq!(block.pfn() % 4, 0); // Buddy blocks are naturally aligned.
    /// assert_eq!(block.phys_addr(), (block.pfn() as u64) << kernel::mm::PAGE_SHIFT);
    ///
    /// block.write(PAGE_SIZE * 3 + 10, b"rsmm")?;
    /// let mut buf = [0u8; 6];
    /// block.read(PAGE_SIZE * 3 + 8, &mut buf)?;
    /// assert_eq!(&buf, b"\0\0rsmm");
    /// assert!(block.write(PAGE_SIZE * 4 - 1, b"xy").is_err());
    /// assert!(ContigPages::alloc(None, kernel::mm::MAX_PAGE_ORDER + 1, GFP_KERNEL).is_err());
    /// # Ok::<(), Error>(())
    /// ```
    pub fn alloc(node: Option<NodeId>, order: u32, flags: Flags) -> Result<Self> {
        if order > MAX_PAGE_ORDER {
            return Err(EINVAL);
        }
        let nid = node.map_or(bindings::NUMA_NO_NODE, |n| n.as_u32() as i32);
        // SAFETY: the order is valid and `nid` is a possible node or
        // `NUMA_NO_NODE`; the call has no other precondition.
        let page = unsafe { bindings::alloc_pages_node(nid, flags.as_raw(), order) };
        let page = NonNull::new(page).ok_or(ENOMEM)?;
        // INVARIANT: the block was just allocated with this order and is ours.
        Ok(Self { page, order })
    }

    /// Returns the order of the block.
    pub fn order(&self) -> u32 {
        self.order
    }

    /// Returns the number of pages in the block.
    pub fn nr_pages(&self) -> usize {
        1 << self.order
    }

    /// Returns the size of the block in bytes.
    pub fn size(&self) -> usize {
        PAGE_SIZE << self.order
    }

    /// Returns the page frame number of the first page.
    pub fn pfn(&self) -> usize {
        // SAFETY: `self.page` is a valid page by the type invariant.
        unsafe { bindings::page_to_pfn(self.page.as_ptr()) as usize }
    }

    /// Returns the physical address of the first byte.
    pub fn phys_addr(&self) -> u64 {
        (self.pfn() as u64) << PAGE_SHIFT
    }

    /// Returns the NUMA node the block lies on.
    pub fn node(&self) -> NodeId {
        // SAFETY: `self.page` is a valid page by the type invariant.
        let nid = unsafe { bindings::page_to_nid(self.page.as_ptr()) };
        // The node of a page's memory is a possible node.
        NodeId::from_kernel(nid as u32)
    }

    /// Returns the first `struct page`, for passing to C code that borrows
    /// the block without taking ownership.
    pub fn as_page_ptr(&self) -> *mut bindings::page {
        self.page.as_ptr()
    }

    /// Gives up ownership: returns the first page and the order, which the
    /// caller must eventually pass to `__free_pages` or [`Self::from_raw`].
    pub fn into_raw(self) -> (NonNull<bindings::page>, u32) {
        let raw = (self.page, self.order);
        core::mem::forget(self);
        raw
    }

    /// Takes ownership of a block again.
    ///
    /// # Safety
    ///
    /// `page` and `order` must describe a buddy block the caller owns, such
    /// as one returned by [`Self::into_raw`].
    pub unsafe fn from_raw(page: NonNull<bindings::page>, order: u32) -> Self {
        // INVARIANT: guaranteed by the caller.
        Self { page, order }
    }

    /// Calls `f` for each page-sized piece of `[offset, offset + len)`, with
    /// the page index, the offset in that page and the piece's length.
    fn for_each_piece(
        &self,
        offset: usize,
        len: usize,
        mut f: impl FnMut(usize, usize, usize, usize),
    ) -> Result {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if end > self.size() {
            return Err(EINVAL);
        }
        let mut pos = offset;
        while pos < end {
            let in_page = pos % PAGE_SIZE;
            let n = core::cmp::min(PAGE_SIZE - in_page, end - pos);
            f(pos / PAGE_SIZE, in_page, pos - offset, n);
            pos += n;
        }
        Ok(())
    }

    /// Copies `buf.len()` bytes starting at byte `offset` of the block into
    /// `buf`; `EINVAL` if the range is outside the block.
    pub fn read(&self, offset: usize, buf: &mut [u8]) -> Result {
        let base = self.page.as_ptr();
        self.for_each_piece(offset, buf.len(), |idx, in_page, done, n| {
            // SAFETY: `idx` is below `nr_pages()` (checked by
            // `for_each_piece`), so the page is part of the block.
            let page = unsafe { base.add(idx) };
            // SAFETY: `page` is a valid page; the mapping is undone below.
            let va = unsafe { bindings::kmap_local_page(page) }.cast::<u8>();
            // SAFETY: the source lies inside the mapped page and the
            // destination inside `buf`; they cannot overlap.
            unsafe {
                core::ptr::copy_nonoverlapping(va.add(in_page), buf.as_mut_ptr().add(done), n)
            };
            // SAFETY: `va` was returned by the `kmap_local_page` just above.
            unsafe { bindings::kunmap_local(va.cast()) };
        })
    }

    /// Copies `buf` into the block at byte `offset`; `EINVAL` if the range is
    /// outside the block.
    pub fn write(&mut self, offset: usize, buf: &[u8]) -> Result {
        let base = self.page.as_ptr();
        self.for_each_piece(offset, buf.len(), |idx, in_page, done, n| {
            // SAFETY: `idx` is below `nr_pages()`, so the page is ours.
            let page = unsafe { base.add(idx) };
            // SAFETY: `page` is a valid page; the mapping is undone below.
            let va = unsafe { bindings::kmap_local_page(page) }.cast::<u8>();
            // SAFETY: the destination lies inside the mapped page, which
            // `&mut self` gives us exclusive access to; the source is `buf`.
            unsafe { core::ptr::copy_nonoverlapping(buf.as_ptr().add(done), va.add(in_page), n) };
            // SAFETY: `va` was returned by the `kmap_local_page` just above.
            unsafe { bindings::kunmap_local(va.cast()) };
        })
    }
}

impl Drop for ContigPages {
    fn drop(&mut self) {
        // SAFETY: by the type invariant we own a block of this order.
        unsafe { bindings::__free_pages(self.page.as_ptr(), self.order) };
    }
}

#[cfg(all(CONFIG_KUNIT, CONFIG_RUST_KERNEL_DOCTESTS))]
mod tests {
    //! KUnit suite `rust_kernel_mm_buddy`, built alongside the kernel
    //! crate's doctests.

    use super::*;
    use crate::{kunit_expect, kunit_expect_eq, mm::numa, prelude::*};

    /// A block asked for on an online node with free memory comes from it,
    /// is naturally aligned, and keeps what is written to it.
    fn node_alignment_and_contents() -> Result {
        let mut nodes = 0;
        for node in NodeId::all().filter(|n| n.is_online()) {
            nodes += 1;
            for order in [0, 3, crate::mm::PMD_ORDER] {
                let mut block = ContigPages::alloc(Some(node), order, GFP_KERNEL | __GFP_ZERO)?;
                kunit_expect_eq!(block.node(), node);
                kunit_expect_eq!(block.pfn() % block.nr_pages(), 0);
                let last = block.size() - 8;
                block.write(last, &0x5aa5_f00d_u64.to_ne_bytes())?;
                let mut buf = [0u8; 8];
                block.read(last, &mut buf)?;
                kunit_expect_eq!(u64::from_ne_bytes(buf), 0x5aa5_f00d);
                block.read(0, &mut buf)?;
                kunit_expect_eq!(u64::from_ne_bytes(buf), 0);
            }
        }
        // Every online node was tried (the KUnit kernel boots with two).
        kunit_expect_eq!(nodes, numa::online_nodes());
        Ok(())
    }

    /// Out-of-range orders and accesses are refused, not performed.
    fn bad_requests() -> Result {
        kunit_expect!(ContigPages::alloc(None, MAX_PAGE_ORDER + 1, GFP_KERNEL).is_err());
        let mut block = ContigPages::alloc(None, 1, GFP_KERNEL)?;
        let mut buf = [0u8; 2];
        kunit_expect_eq!(block.read(2 * PAGE_SIZE - 1, &mut buf), Err(EINVAL));
        kunit_expect_eq!(block.write(usize::MAX, &buf), Err(EINVAL));
        kunit_expect_eq!(block.read(2 * PAGE_SIZE - 2, &mut buf), Ok(()));
        // Ownership round trip through the raw form.
        let (page, order) = block.into_raw();
        // SAFETY: `page` and `order` came from `into_raw` just above.
        let block = unsafe { ContigPages::from_raw(page, order) };
        kunit_expect_eq!(block.order(), 1);
        Ok(())
    }

    crate::kunit_suite! {
        name: "rust_kernel_mm_buddy",
        cases: [node_alignment_and_contents, bad_requests],
    }
}
