// SPDX-License-Identifier: GPL-2.0

//! Virtual memory areas (`struct vm_area_struct`).
//!
//! The fields of a VMA are stable only while a lock that protects them is
//! held: the mmap lock of its address space (read or write), or, in the
//! page-fault path, the VMA's own read lock (per-VMA locking).  A
//! [`VmaRef`] is a borrowed VMA, and its lifetime is that of such a lock:
//!
//! - safe code takes the mmap lock with [`MmWithUser::mmap_read_lock`] and
//!   looks VMAs up through the guard, whose lifetime bounds every
//!   `&VmaRef` it gives out, so no reference can outlive the lock;
//! - C code that calls into Rust with a VMA whose lock it already holds
//!   (the fault path) hands it over with the unsafe [`VmaRef::from_raw`],
//!   whose contract is that lock.
//!
//! C header: [`include/linux/mm_types.h`](srctree/include/linux/mm_types.h),
//! [`include/linux/huge_mm.h`](srctree/include/linux/huge_mm.h)
//!
//! [`MmWithUser::mmap_read_lock`]: crate::mm::MmWithUser::mmap_read_lock

use crate::{bindings, types::Opaque};
use core::{marker::PhantomData, ops::Range, ptr::NonNull};

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
        // SAFETY: the VMA is live and locked (type invariant), so the field
        // is not written while we read it.
        unsafe { (*self.as_raw()).__bindgen_anon_1.__bindgen_anon_1.vm_start }
    }

    /// First address past the area.
    pub fn end(&self) -> usize {
        // SAFETY: as in `start`.
        unsafe { (*self.as_raw()).__bindgen_anon_1.__bindgen_anon_1.vm_end }
    }

    /// The addresses of the area.
    pub fn range(&self) -> Range<usize> {
        self.start()..self.end()
    }

    /// The flags of the area.
    pub fn flags(&self) -> VmFlags {
        // SAFETY: the VMA is live and locked (type invariant), so the flags
        // are not written while we read them (writers hold the mmap lock
        // for writing and the VMA's write lock).  `vm_flags` is the
        // read-only member of the union C writes through `__vm_flags`.
        VmFlags(unsafe { (*self.as_raw()).__bindgen_anon_2.vm_flags } as u64)
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

/// The address of a VMA, kept where no lock covers it: in an index that
/// lookups read under RCU, say.
///
/// A `VmaPtr` is `Copy`, `Send` and `Sync` because it is only an address:
/// safe code may store, compare and return it (to C, which re-validates
/// what it finds, as `lock_vma_under_rcu()` does), but not dereference it.
/// The VMA it names may be freed (after an RCU grace period, as VMAs are)
/// or changed at any time; [`VmaPtr::as_ref`] is unsafe, with the lock
/// that keeps the VMA live and stable as its contract.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(transparent)]
pub struct VmaPtr(NonNull<bindings::vm_area_struct>);

// SAFETY: a `VmaPtr` is an address and nothing else: no method reads or
// writes through it without the caller's unsafe promise.
unsafe impl Send for VmaPtr {}
// SAFETY: as for `Send`.
unsafe impl Sync for VmaPtr {}

impl VmaPtr {
    /// The address of `vma`.
    pub fn from_ref(vma: &VmaRef) -> Self {
        Self(NonNull::from(vma).cast())
    }

    /// Wraps `ptr`, or `None` for a null pointer.
    pub fn new(ptr: *mut bindings::vm_area_struct) -> Option<Self> {
        NonNull::new(ptr).map(Self)
    }

    /// The raw pointer.
    pub fn as_ptr(self) -> *mut bindings::vm_area_struct {
        self.0.as_ptr()
    }

    /// Borrows the VMA for `'a`.
    ///
    /// # Safety
    ///
    /// As [`VmaRef::from_raw`]: the VMA is live, and for all of `'a` the
    /// caller holds the mmap lock of its address space or the VMA's own
    /// read lock.
    pub unsafe fn as_ref<'a>(self) -> &'a VmaRef {
        // SAFETY: the caller guarantees `VmaRef::from_raw`'s contract.
        unsafe { VmaRef::from_raw(self.as_ptr()) }
    }
}
