// SPDX-License-Identifier: GPL-2.0

//! Address spaces (`struct mm_struct`) and their mmap lock.
//!
//! C code holds an address space by one of two counts, and so does Rust:
//!
//! - [`Mm`] holds `mm_count` (`mmgrab()`/`mmdrop()`): the `struct
//!   mm_struct` stays allocated, but its VMAs and page tables may be torn
//!   down (the last user may have exited);
//! - [`MmWithUser`] holds `mm_users` (`mmget()`/`mmput()`): the address
//!   space itself stays, so its mmap lock may be taken and its VMAs looked
//!   up.  It dereferences to [`Mm`].
//!
//! These are re-exported as `kernel::mm::{Mm, MmWithUser, MmapReadGuard}`.
//!
//! C header: [`include/linux/sched/mm.h`](srctree/include/linux/sched/mm.h),
//! [`include/linux/mmap_lock.h`](srctree/include/linux/mmap_lock.h)

use crate::{
    bindings,
    mm::virt::VmaRef,
    types::{ARef, AlwaysRefCounted, Opaque},
};
use core::{marker::PhantomData, ops::Deref, ptr::NonNull};

#[cfg(CONFIG_PER_VMA_LOCK)]
use crate::{
    error::{code::*, Result},
    mm::virt::VmaWriteHold,
};

/// An address space (`struct mm_struct`), held by `mm_count`.
///
/// # Invariants
///
/// Every `&Mm` (and every [`ARef<Mm>`]) points to a `struct mm_struct`
/// whose `mm_count` is non-zero for as long as the reference exists.
#[repr(transparent)]
pub struct Mm {
    mm: Opaque<bindings::mm_struct>,
}

// SAFETY: an `mm_struct` may be grabbed and dropped (`mmdrop`) from any
// thread; its state is protected by its own locks.
unsafe impl Send for Mm {}
// SAFETY: the methods of `&Mm` only read what any thread may read.
unsafe impl Sync for Mm {}

// SAFETY: `mmgrab()` and `mmdrop()` keep `mm_count` non-zero while any
// reference exists, which is the type invariant.
unsafe impl AlwaysRefCounted for Mm {
    fn inc_ref(&self) {
        // SAFETY: by the type invariant `mm_count` is non-zero already.
        unsafe { bindings::rsmm_mmgrab(self.as_raw()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: the caller gives up an `mm_count` reference it owns.
        unsafe { bindings::rsmm_mmdrop(obj.cast::<bindings::mm_struct>().as_ptr()) };
    }
}

impl Mm {
    /// Returns the raw pointer to the `struct mm_struct`.
    #[inline]
    pub fn as_raw(&self) -> *mut bindings::mm_struct {
        self.mm.get()
    }

    /// Takes a user reference, unless the address space has no user left
    /// (its last user exited and it is being or has been torn down).
    pub fn mmget_not_zero(&self) -> Option<ARef<MmWithUser>> {
        // SAFETY: the `struct mm_struct` is allocated (type invariant).
        if unsafe { bindings::rsmm_mmget_not_zero(self.as_raw()) } {
            // SAFETY: we own the user reference just taken, which the
            // `ARef` takes over; `MmWithUser` is a transparent `Mm`.
            Some(unsafe { ARef::from_raw(NonNull::from(self).cast::<MmWithUser>()) })
        } else {
            None
        }
    }
}

/// An address space (`struct mm_struct`), held by `mm_users`.
///
/// # Invariants
///
/// Every `&MmWithUser` (and every [`ARef<MmWithUser>`]) points to a live
/// `struct mm_struct` whose `mm_users` is non-zero for as long as the
/// reference exists: its page tables and VMAs are not torn down.
#[repr(transparent)]
pub struct MmWithUser {
    mm: Mm,
}

// SAFETY: an `mm_struct` may be used and released (`mmput`) from any
// thread; its state is protected by its own locks.
unsafe impl Send for MmWithUser {}
// SAFETY: all methods that read shared state take the appropriate lock.
unsafe impl Sync for MmWithUser {}

// SAFETY: `mmget()` and `mmput()` keep `mm_users` non-zero while any
// reference exists, which is the type invariant.
unsafe impl AlwaysRefCounted for MmWithUser {
    fn inc_ref(&self) {
        // SAFETY: by the type invariant `mm_users` is non-zero already.
        unsafe { bindings::rsmm_mmget(self.as_raw()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: the caller gives up a user reference it owns.  `mmput()`
        // may sleep when it drops the last one: an `ARef<MmWithUser>` is
        // dropped in process context, like the C code drops its references.
        unsafe { bindings::rsmm_mmput(obj.cast::<bindings::mm_struct>().as_ptr()) };
    }
}

impl Deref for MmWithUser {
    type Target = Mm;

    #[inline]
    fn deref(&self) -> &Mm {
        &self.mm
    }
}

impl MmWithUser {
    /// Returns the address space of the current task with a new user
    /// reference, or `None` for a kernel thread (or a task exiting).
    ///
    /// # Examples
    ///
    /// KUnit cases run in kernel threads, which have no address space:
    ///
    /// ```
    /// use kernel::mm::MmWithUser;
    ///
    /// assert!(MmWithUser::current().is_none());
    /// ```
    pub fn current() -> Option<ARef<MmWithUser>> {
        // SAFETY: FFI call without preconditions; a non-NULL result carries
        // a user reference that we own.
        let mm = unsafe { bindings::rsmm_current_mm_get() };
        // SAFETY: a non-NULL `mm` is live with a user reference owned by us,
        // which the `ARef` takes over.
        NonNull::new(mm).map(|p| unsafe { ARef::from_raw(p.cast::<MmWithUser>()) })
    }

    /// Returns the address space at `ptr`, borrowed for `'a` without a
    /// reference of its own: for C callers that hold a user reference for
    /// the whole call (`current->mm` in a system call).
    ///
    /// # Safety
    ///
    /// `ptr` points to a live `struct mm_struct` whose `mm_users` stays
    /// non-zero for all of `'a`.
    #[inline]
    pub unsafe fn from_raw<'a>(ptr: *mut bindings::mm_struct) -> &'a MmWithUser {
        // SAFETY: `MmWithUser` is a transparent wrapper of the C struct,
        // and the caller guarantees the type invariant for `'a`.
        unsafe { &*ptr.cast::<MmWithUser>() }
    }

    /// Takes the mmap lock of the address space for reading, unless a fatal
    /// signal arrives while waiting for it (`EINTR`); it is released when
    /// the guard is dropped.  May sleep.
    #[inline]
    pub fn mmap_read_lock_killable(&self) -> Result<MmapReadGuard<'_>> {
        // SAFETY: the mm is live (type invariant).
        if unsafe { bindings::rsmm_mmap_read_lock_killable(self.as_raw()) } != 0 {
            return Err(EINTR);
        }
        // INVARIANT: the lock was just taken, and the guard releases it.
        Ok(MmapReadGuard {
            mm: self,
            _not_send: PhantomData,
        })
    }

    /// Takes the mmap lock of the address space for reading; it is released
    /// when the guard is dropped.  May sleep.
    #[inline]
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
    /// tests: it is never run and never faulted in, and is torn down by the
    /// drop of its last reference.
    ///
    /// `hugepage` marks the VMA as `madvise(MADV_HUGEPAGE)` would.  Fails
    /// with `EINVAL` for a range that is empty, not page aligned or above
    /// the user address limit, and with `ENOMEM` if memory runs out.
    #[cfg(CONFIG_KUNIT)]
    #[doc(hidden)]
    pub fn new_for_test(
        range: core::ops::Range<usize>,
        hugepage: bool,
    ) -> crate::error::Result<ARef<MmWithUser>> {
        use crate::error::{code::*, to_result};
        use crate::mm::PAGE_SIZE;

        // SAFETY: FFI call without preconditions.
        let limit = unsafe { bindings::rsmm_task_size_max() };
        if range.start >= range.end
            || range.start % PAGE_SIZE != 0
            || range.end % PAGE_SIZE != 0
            || range.end > limit
        {
            return Err(EINVAL);
        }
        let mut flags =
            (bindings::VM_READ | bindings::VM_WRITE | bindings::VM_MAYREAD | bindings::VM_MAYWRITE)
                as usize;
        if hugepage {
            flags |= bindings::VM_HUGEPAGE as usize;
        }
        // SAFETY: FFI call without preconditions; a non-NULL result is a new
        // address space with one user reference, which we own.
        let mm = NonNull::new(unsafe { bindings::mm_alloc() }).ok_or(ENOMEM)?;
        // SAFETY: as above: the `ARef` takes the user reference over, and
        // its drop (`mmput`) tears the address space down on any error.
        let mm: ARef<MmWithUser> = unsafe { ARef::from_raw(mm.cast::<MmWithUser>()) };
        // SAFETY: `mm` is live; the new VMA is ours until inserted.
        let vma = unsafe { bindings::vm_area_alloc(mm.as_raw()) };
        if vma.is_null() {
            return Err(ENOMEM);
        }
        // SAFETY: `vma` is new and not yet visible to anyone else, so it may
        // be written without locks.  Its range and flags are set the way
        // exec sets up its first stack VMA; a NULL `vm_ops` makes it
        // anonymous (`vma_set_anonymous()`).
        unsafe {
            (*vma).__bindgen_anon_1.__bindgen_anon_1.vm_start = range.start;
            (*vma).__bindgen_anon_1.__bindgen_anon_1.vm_end = range.end;
            bindings::rsmm_vm_flags_init(vma, flags);
            (*vma).vm_page_prot = bindings::vm_get_page_prot(flags);
            (*vma).vm_ops = core::ptr::null();
        }
        // SAFETY: `mm` is live; `insert_vm_struct()` wants its mmap lock
        // held for writing, taken and released here around it.  On success
        // the VMA belongs to `mm`, which frees it when torn down.
        let ret = unsafe {
            bindings::rsmm_mmap_write_lock(mm.as_raw());
            let ret = bindings::insert_vm_struct(mm.as_raw(), vma);
            bindings::rsmm_mmap_write_unlock(mm.as_raw());
            ret
        };
        if ret != 0 {
            // SAFETY: the VMA was not inserted: it is still ours alone.
            unsafe { bindings::vm_area_free(vma) };
        }
        to_result(ret)?;
        Ok(mm)
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
    mm: &'a MmWithUser,
    _not_send: PhantomData<*mut ()>,
}

impl<'a> MmapReadGuard<'a> {
    /// The address space whose lock is held.
    #[inline]
    pub fn mm(&self) -> &'a MmWithUser {
        self.mm
    }

    /// The lowest VMA that ends above `addr` (`find_vma()`), borrowed for
    /// as long as the guard is.
    #[inline]
    pub fn find_vma(&self, addr: usize) -> Option<&VmaRef> {
        // SAFETY: the mm's mmap lock is held for as long as `self` is
        // borrowed (type invariant).
        unsafe { find_vma_locked(self.mm, addr) }
    }

    /// Returns the VMA that contains `addr`, if any.
    ///
    /// The reference lives as long as the guard borrow: the lock protects
    /// the VMA while it is used.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::mm::{virt::VmFlags, MmWithUser};
    ///
    /// let mm = MmWithUser::new_for_test(0x40000000..0x40400000, true)?;
    /// let guard = mm.mmap_read_lock();
    /// let vma = guard.vma_lookup(0x40123456).ok_or(ENOENT)?;
    /// assert_eq!(vma.range(), 0x40000000..0x40400000);
    /// assert!(vma.is_anonymous());
    /// assert!(vma.flags().contains(VmFlags::HUGEPAGE));
    /// assert!(vma.pmd_fits(0x40200000));
    /// assert!(!vma.pmd_fits(0x40400000));
    /// assert!(guard.vma_lookup(0x40400000).is_none());
    /// assert!(guard.vma_lookup(0x3fffffff).is_none());
    /// # Ok::<(), Error>(())
    /// ```
    #[inline]
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

impl<'a> MmapReadGuard<'a> {
    /// Holds the VMA that contains `addr` for writing ([`VmaWriteHold`]),
    /// if its lock is free: fails with `ENOENT` if no VMA contains `addr`,
    /// and with `EBUSY` if a task holds the VMA's lock (a page fault in
    /// it, another hold), which the caller does not wait for.
    ///
    /// The guard is borrowed mutably for as long as the hold lives, so a
    /// task holds one VMA at a time.
    ///
    /// # Examples
    ///
    /// While the hold lasts, the per-VMA read lock of the page-fault path
    /// cannot be had:
    ///
    /// ```
    /// use kernel::mm::{virt::VmFlags, MmWithUser};
    ///
    /// let mm = MmWithUser::new_for_test(0x40000000..0x40400000, false)?;
    /// let mut guard = mm.mmap_read_lock();
    /// let vma = guard.vma_lookup(0x40000000).ok_or(ENOENT)?;
    /// assert_eq!(vma.try_with_read_lock(|| ()), Some(()));
    /// {
    ///     let hold = guard.write_hold(0x40001000)?;
    ///     assert_eq!(hold.vma().range(), 0x40000000..0x40400000);
    ///     assert_eq!(hold.vma().try_with_read_lock(|| ()), None);
    ///     assert!(hold.prev().is_none() && hold.next().is_none());
    ///     assert!(hold.vma().flags().contains(VmFlags::WRITE));
    /// }
    /// let vma = guard.vma_lookup(0x40000000).ok_or(ENOENT)?;
    /// assert_eq!(vma.try_with_read_lock(|| ()), Some(()));
    /// assert_eq!(guard.write_hold(0x40400000).err(), Some(ENOENT));
    /// # Ok::<(), Error>(())
    /// ```
    #[cfg(CONFIG_PER_VMA_LOCK)]
    pub fn write_hold(&mut self, addr: usize) -> Result<VmaWriteHold<'_>> {
        let mm = self.mm.as_raw();
        // SAFETY: the mm is live and its mmap lock held (type invariant).
        let vma = unsafe { bindings::rsmm_vma_lookup(mm, addr) };
        if vma.is_null() {
            return Err(ENOENT);
        }
        // SAFETY: `vma` belongs to this mm, whose mmap lock is held for as
        // long as `self` is borrowed.
        let vma = unsafe { VmaRef::from_raw(vma) };
        // SAFETY: `vma` belongs to `mm`, whose mmap lock is held for reading
        // while `self` is borrowed; the mutable borrow keeps this task from
        // making a second hold (and `VmaRef`s hold no VMA lock).
        unsafe { VmaWriteHold::try_new(vma, mm) }.ok_or(EBUSY)
    }
}

impl Drop for MmapReadGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the lock is held (type invariant) and released once.
        unsafe { bindings::rsmm_mmap_read_unlock(self.mm.as_raw()) };
    }
}

/// Proof that the mmap lock of an address space is held for writing, for
/// Rust code that C calls with the lock held (the hooks where the VMA set
/// of an address space changes).
///
/// Not `Send`: the lock belongs to the task that took it.  A writer of a
/// structure protected by the mmap lock borrows the token mutably, so that
/// one token makes one writer at a time.
///
/// # Invariants
///
/// The mmap lock of `mm` is held for writing for all of `'a`.
pub struct MmapWriteLocked<'a> {
    mm: &'a Mm,
    _not_send: PhantomData<*mut ()>,
}

impl<'a> MmapWriteLocked<'a> {
    /// Vouches that the mmap lock of `mm` is held for writing.  With
    /// lockdep (or `CONFIG_DEBUG_VM`) the claim is checked.
    ///
    /// # Safety
    ///
    /// For all of `'a`, the caller holds the mmap lock of `mm` for writing
    /// (or has `mm` to itself, before it is published or after its last
    /// user is gone), and makes no other token for `mm` while this one
    /// lives.
    pub unsafe fn assume(mm: &'a Mm) -> Self {
        #[cfg(any(CONFIG_LOCKDEP, CONFIG_DEBUG_VM))]
        // SAFETY: `mm` is live (`Mm`'s invariant); the assertion only reads.
        unsafe {
            bindings::rsmm_mmap_assert_write_locked(mm.as_raw())
        };
        // INVARIANT: the caller guarantees the lock for `'a`.
        Self {
            mm,
            _not_send: PhantomData,
        }
    }

    /// Vouches that no other task can reach `mm`, which stands in for its
    /// mmap write lock: before the address space is published, or once
    /// its last reference is gone (where the lock may not be taken: the
    /// last `mmdrop()` may run in atomic context).
    ///
    /// # Safety
    ///
    /// For all of `'a`, no other task can reach `mm` (nor, so, take its
    /// mmap lock), and the caller makes no other token for it.
    pub unsafe fn assume_exclusive(mm: &'a Mm) -> Self {
        // INVARIANT: with nobody else able to take the lock, the caller
        // has what holding it for writing gives.
        Self {
            mm,
            _not_send: PhantomData,
        }
    }

    /// The address space whose lock is held.
    #[inline]
    pub fn mm(&self) -> &'a Mm {
        self.mm
    }

    /// The lowest VMA that ends above `addr` (`find_vma()`).
    ///
    /// The reference lives as long as the borrow of the token: the lock
    /// keeps the VMA in place until then.
    #[inline]
    pub fn find_vma(&self, addr: usize) -> Option<&VmaRef> {
        // SAFETY: the mm's mmap lock is held for as long as `self` is
        // borrowed (type invariant).
        unsafe { find_vma_locked(self.mm, addr) }
    }

    /// The number of VMAs of the address space (`mm->map_count`), which
    /// the lock keeps as it is.
    #[inline]
    pub fn map_count(&self) -> usize {
        // SAFETY: the mm is live (`Mm`'s invariant) and `map_count` is
        // written only under its mmap write lock, which `self` holds.
        let n = unsafe { (*self.mm.as_raw()).__bindgen_anon_1.map_count };
        usize::try_from(n).unwrap_or(0)
    }
}

/// The lowest VMA of `mm` that ends above `addr` (`find_vma()`).
///
/// # Safety
///
/// The mmap lock of `mm` is held, for reading or writing, for all of `'a`.
unsafe fn find_vma_locked<'a>(mm: &'a Mm, addr: usize) -> Option<&'a VmaRef> {
    // SAFETY: the mm is live (`Mm`'s invariant) and its mmap lock held.
    let vma = unsafe { bindings::find_vma(mm.as_raw(), addr) };
    if vma.is_null() {
        return None;
    }
    // SAFETY: `vma` belongs to `mm`, whose mmap lock the caller holds for
    // `'a`.
    Some(unsafe { VmaRef::from_raw(vma) })
}
