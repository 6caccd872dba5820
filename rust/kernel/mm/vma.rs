// SPDX-License-Identifier: GPL-2.0

//! Address spaces and their virtual memory areas.
//!
//! The fields of a `struct vm_area_struct` are stable only while a lock
//! that protects them is held: the mmap lock of its address space (read or
//! write), or, in the page-fault path, the VMA's own read lock (per-VMA
//! locking).  A [`VmaRef`] is a borrowed VMA, and its lifetime is that of
//! such a lock:
//!
//! - safe code takes the mmap lock with [`Mm::mmap_read_lock`] and looks
//!   VMAs up through the guard, whose lifetime bounds every `&VmaRef` it
//!   gives out, so no reference can outlive the lock;
//! - C code that calls into Rust with a VMA whose lock it already holds
//!   (the fault path) hands it over with the unsafe [`VmaRef::from_raw`],
//!   whose contract is that lock.
//!
//! An [`Mm`] is an address space whose users count (`mm_users`) this crate
//! holds: its VMAs are not torn down while an `ARef<Mm>` exists.
//!
//! C headers: [`include/linux/mm_types.h`](srctree/include/linux/mm_types.h),
//! [`include/linux/mmap_lock.h`](srctree/include/linux/mmap_lock.h),
//! [`include/linux/huge_mm.h`](srctree/include/linux/huge_mm.h)

use crate::{
    bindings,
    types::{ARef, AlwaysRefCounted, Opaque},
};
use core::{marker::PhantomData, ops::Range, ptr::NonNull};

/// An address space (`struct mm_struct`) with a user reference.
///
/// # Invariants
///
/// Every `&Mm` (and every [`ARef<Mm>`]) points to a live `struct
/// mm_struct` whose `mm_users` is non-zero for as long as the reference
/// exists: its page tables and VMAs are not torn down.
#[repr(transparent)]
pub struct Mm {
    mm: Opaque<bindings::mm_struct>,
}

// SAFETY: an `mm_struct` may be used and released (`mmput`) from any
// thread; its state is protected by its own locks.
unsafe impl Send for Mm {}
// SAFETY: all methods that read shared state take the appropriate lock.
unsafe impl Sync for Mm {}

// SAFETY: `mmget()` and `mmput()` keep `mm_users` non-zero while any
// reference exists, which is the type invariant.
unsafe impl AlwaysRefCounted for Mm {
    fn inc_ref(&self) {
        // SAFETY: by the type invariant `mm_users` is non-zero already.
        unsafe { bindings::rsmm_mmget(self.as_raw()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: the caller gives up a user reference it owns.  `mmput()`
        // may sleep when it drops the last one: an `ARef<Mm>` is dropped in
        // process context, like the C code drops its references.
        unsafe { bindings::rsmm_mmput(obj.cast::<bindings::mm_struct>().as_ptr()) };
    }
}

impl Mm {
    /// Returns the address space of the current task with a new user
    /// reference, or `None` for a kernel thread (or a task exiting).
    ///
    /// # Examples
    ///
    /// KUnit cases run in kernel threads, which have no address space:
    ///
    /// ```
    /// use kernel::mm::vma::Mm;
    ///
    /// assert!(Mm::current().is_none());
    /// ```
    pub fn current() -> Option<ARef<Mm>> {
        // SAFETY: FFI call without preconditions; a non-NULL result carries
        // a user reference that we own.
        let mm = unsafe { bindings::rsmm_current_mm_get() };
        // SAFETY: a non-NULL `mm` is live with a user reference owned by us,
        // which the `ARef` takes over.
        NonNull::new(mm).map(|p| unsafe { ARef::from_raw(p.cast::<Mm>()) })
    }

    /// Returns the raw pointer to the `struct mm_struct`.
    pub fn as_raw(&self) -> *mut bindings::mm_struct {
        self.mm.get()
    }

    /// Takes the mmap lock of the address space for reading; it is released
    /// when the guard is dropped.  May sleep.
    pub fn mmap_read_lock(&self) -> MmapReadGuard<'_> {
        // SAFETY: the mm is live (type invariant).
        unsafe { bindings::rsmm_mmap_read_lock(self.as_raw()) };
        // INVARIANT: the lock was just taken, and the guard releases it.
        MmapReadGuard {
            mm: self,
            _not_send: PhantomData,
        }
    }

    /// A new address space holding one anonymous VMA over `range`, for
    /// tests: it is never run and never faulted in.
    ///
    /// `hugepage` marks the VMA as `madvise(MADV_HUGEPAGE)` would.  Fails
    /// with `EINVAL` for a range that is empty, not page aligned or above
    /// the user address limit, and with `ENOMEM` if memory runs out.
    #[cfg(CONFIG_KUNIT)]
    #[doc(hidden)]
    pub fn new_for_test(range: Range<usize>, hugepage: bool) -> crate::error::Result<ARef<Mm>> {
        let mut mm = core::ptr::null_mut();
        // SAFETY: FFI call; `mm` is valid for writes.
        let ret = unsafe { bindings::rsmm_test_mm_new(range.start, range.end, hugepage, &mut mm) };
        crate::error::to_result(ret)?;
        // SAFETY: on success `mm` is a live address space with one user
        // reference, owned by us, which the `ARef` takes over.
        Ok(unsafe { ARef::from_raw(NonNull::new_unchecked(mm).cast::<Mm>()) })
    }
}

/// The mmap lock of an address space, held for reading.
///
/// Not `Send`: a read-write semaphore is released by the task that took it.
///
/// # Invariants
///
/// The mmap lock of `mm` is held for reading while the guard exists.
pub struct MmapReadGuard<'a> {
    mm: &'a Mm,
    _not_send: PhantomData<*mut ()>,
}

impl<'a> MmapReadGuard<'a> {
    /// Returns the VMA that contains `addr`, if any.
    ///
    /// The reference lives as long as the guard borrow: the lock protects
    /// the VMA while it is used.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::mm::vma::Mm;
    ///
    /// let mm = Mm::new_for_test(0x40000000..0x40400000, true)?;
    /// let guard = mm.mmap_read_lock();
    /// let vma = guard.vma_lookup(0x40123456).ok_or(ENOENT)?;
    /// assert_eq!(vma.range(), 0x40000000..0x40400000);
    /// assert!(vma.is_anonymous());
    /// assert!(vma.flags().contains(kernel::mm::vma::VmFlags::HUGEPAGE));
    /// assert!(vma.pmd_fits(0x40200000));
    /// assert!(!vma.pmd_fits(0x40400000));
    /// assert!(guard.vma_lookup(0x40400000).is_none());
    /// assert!(guard.vma_lookup(0x3fffffff).is_none());
    /// # Ok::<(), Error>(())
    /// ```
    pub fn vma_lookup(&self, addr: usize) -> Option<&VmaRef> {
        // SAFETY: the mm is live and its mmap lock held (type invariant).
        let vma = unsafe { bindings::rsmm_vma_lookup(self.mm.as_raw(), addr) };
        if vma.is_null() {
            return None;
        }
        // SAFETY: `vma` belongs to this mm, whose mmap lock is held for as
        // long as `self` is borrowed.
        Some(unsafe { VmaRef::from_raw(vma) })
    }
}

impl Drop for MmapReadGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: the lock is held (type invariant) and released once.
        unsafe { bindings::rsmm_mmap_read_unlock(self.mm.as_raw()) };
    }
}

/// Flags of a VMA (`vm_flags_t`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct VmFlags(u64);

impl VmFlags {
    /// Readable (`VM_READ`).
    pub const READ: VmFlags = VmFlags(bindings::VM_READ as u64);
    /// Writable (`VM_WRITE`).
    pub const WRITE: VmFlags = VmFlags(bindings::VM_WRITE as u64);
    /// Shared mapping (`VM_SHARED`).
    pub const SHARED: VmFlags = VmFlags(bindings::VM_SHARED as u64);
    /// Pages locked in memory (`VM_LOCKED`).
    pub const LOCKED: VmFlags = VmFlags(bindings::VM_LOCKED as u64);
    /// `madvise(MADV_HUGEPAGE)` (`VM_HUGEPAGE`).
    pub const HUGEPAGE: VmFlags = VmFlags(bindings::VM_HUGEPAGE as u64);
    /// `madvise(MADV_NOHUGEPAGE)` (`VM_NOHUGEPAGE`).
    pub const NOHUGEPAGE: VmFlags = VmFlags(bindings::VM_NOHUGEPAGE as u64);

    /// The raw flags.
    pub fn bits(self) -> u64 {
        self.0
    }

    /// Whether every flag of `other` is set.
    pub fn contains(self, other: VmFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

/// A virtual memory area, borrowed while a lock protecting it is held.
///
/// # Invariants
///
/// For the lifetime of any `&VmaRef`, it points to a live `struct
/// vm_area_struct` and the mmap lock of its address space, or its own
/// per-VMA read lock, is held: the fields read here do not change.
#[repr(transparent)]
pub struct VmaRef {
    vma: Opaque<bindings::vm_area_struct>,
    _not_send: PhantomData<*mut ()>,
}

impl VmaRef {
    /// Borrows the VMA at `ptr` for `'a`.
    ///
    /// # Safety
    ///
    /// `ptr` points to a live VMA, and for all of `'a` the caller holds the
    /// mmap lock of its address space (read or write) or the VMA's own
    /// read lock, as the page-fault path does.
    pub unsafe fn from_raw<'a>(ptr: *const bindings::vm_area_struct) -> &'a VmaRef {
        // SAFETY: `VmaRef` is a transparent wrapper of the C struct, and the
        // caller guarantees the invariant for `'a`.
        unsafe { &*ptr.cast::<VmaRef>() }
    }

    fn as_raw(&self) -> *mut bindings::vm_area_struct {
        self.vma.get()
    }

    /// First address of the area.
    pub fn start(&self) -> usize {
        // SAFETY: the VMA is live and locked (type invariant).
        unsafe { bindings::rsmm_vma_start(self.as_raw()) }
    }

    /// First address past the area.
    pub fn end(&self) -> usize {
        // SAFETY: the VMA is live and locked (type invariant).
        unsafe { bindings::rsmm_vma_end(self.as_raw()) }
    }

    /// The addresses of the area.
    pub fn range(&self) -> Range<usize> {
        self.start()..self.end()
    }

    /// The flags of the area.
    pub fn flags(&self) -> VmFlags {
        // SAFETY: the VMA is live and locked (type invariant).
        VmFlags(unsafe { bindings::rsmm_vma_flags(self.as_raw()) } as u64)
    }

    /// Whether the area is anonymous memory (no file, no special mapping).
    pub fn is_anonymous(&self) -> bool {
        // SAFETY: the VMA is live and locked (type invariant).
        unsafe { bindings::rsmm_vma_is_anonymous(self.as_raw()) }
    }

    /// Whether a page fault may map a transparent huge page of PMD size
    /// in the area, by the system's THP settings
    /// (`/sys/kernel/mm/transparent_hugepage`), its `madvise`/`prctl`
    /// settings and its kind, as the fault path judges it (khugepaged adds
    /// conditions of its own).  Always false without
    /// `CONFIG_TRANSPARENT_HUGEPAGE`.
    pub fn thp_allowed(&self) -> bool {
        // SAFETY: the VMA is live and locked (type invariant).
        unsafe { bindings::rsmm_vma_thp_allowed(self.as_raw()) }
    }

    /// Whether the PMD-aligned block that holds `addr` lies inside the
    /// area and is aligned like its file offset, so that one huge page can
    /// map it.
    pub fn pmd_fits(&self, addr: usize) -> bool {
        // SAFETY: the VMA is live and locked (type invariant).
        unsafe { bindings::rsmm_vma_pmd_fits(self.as_raw(), addr) }
    }
}
