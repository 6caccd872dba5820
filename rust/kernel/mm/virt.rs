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
///
/// # Examples
///
/// ```
/// use kernel::mm::virt::VmFlags;
///
/// let rw = VmFlags::READ.union(VmFlags::WRITE).union(VmFlags::MAY_ACCESS);
/// assert!(rw.access_allowed() && rw.is_data() && !rw.is_exec());
/// let rx = rw.with_access(VmFlags::READ.union(VmFlags::EXEC));
/// assert_eq!(rx.without(VmFlags::ACCESS), rw.without(VmFlags::ACCESS));
/// assert!(rx.is_exec() && !rx.is_data());
/// assert!(!VmFlags::WRITE.access_allowed());
/// assert!(rw.merge_equal(rw.union(VmFlags::SOFTDIRTY)));
/// assert!(!rw.merge_equal(rx));
/// assert!(rw.union(VmFlags::MAYSHARE).is_shared() && !rw.is_shared());
/// assert!(rw.union(VmFlags::STACK).is_growing_stack() && !rw.union(VmFlags::STACK).is_data());
/// assert!(rw.union(VmFlags::LOCKED).is_locked() && !rw.is_uffd_armed());
/// ```
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
    /// Executable (`VM_EXEC`).
    pub const EXEC: VmFlags = VmFlags(bindings::VM_EXEC as u64);
    /// The access bits `mprotect()` sets: read, write, exec
    /// (`VM_ACCESS_FLAGS`).
    pub const ACCESS: VmFlags = VmFlags(bindings::VM_ACCESS_FLAGS as u64);
    /// May be made readable, writable, executable (`VM_MAYREAD`,
    /// `VM_MAYWRITE`, `VM_MAYEXEC`): the access bits shifted by four.
    pub const MAY_ACCESS: VmFlags =
        VmFlags((bindings::VM_MAYREAD | bindings::VM_MAYWRITE | bindings::VM_MAYEXEC) as u64);
    /// May be executable (`VM_MAYEXEC`).
    pub const MAYEXEC: VmFlags = VmFlags(bindings::VM_MAYEXEC as u64);
    /// May be shared (`VM_MAYSHARE`).
    pub const MAYSHARE: VmFlags = VmFlags(bindings::VM_MAYSHARE as u64);
    /// Stack growing down, or up (`VM_GROWSDOWN | VM_GROWSUP`).
    pub const GROWS: VmFlags = VmFlags((bindings::VM_GROWSDOWN | bindings::VM_GROWSUP) as u64);
    /// The stack flag of the architecture (`VM_STACK`).
    pub const STACK: VmFlags = VmFlags(bindings::VM_STACK as u64);
    /// hugetlbfs pages (`VM_HUGETLB`).
    pub const HUGETLB: VmFlags = VmFlags(bindings::VM_HUGETLB as u64);
    /// Kinds whose pages are not ordinary ones, never merged
    /// (`VM_SPECIAL`: `VM_IO`, `VM_DONTEXPAND`, `VM_PFNMAP`, `VM_MIXEDMAP`).
    pub const SPECIAL: VmFlags = VmFlags(bindings::VM_SPECIAL as u64);
    /// `mlock()`ed, now or on fault (`VM_LOCKED_MASK`).
    pub const LOCKED_ANY: VmFlags = VmFlags(bindings::VM_LOCKED_MASK as u64);
    /// Armed for userfaultfd: missing, write-protect or minor faults.
    pub const UFFD_ARMED: VmFlags = VmFlags(
        (bindings::VM_UFFD_MISSING | bindings::VM_UFFD_WP) as u64
            | bindings::RSMM_VM_UFFD_MINOR as u64,
    );
    /// KSM may merge its pages (`VM_MERGEABLE`).
    pub const MERGEABLE: VmFlags = VmFlags(bindings::VM_MERGEABLE as u64);
    /// Committed memory is charged for it (`VM_ACCOUNT`).
    pub const ACCOUNT: VmFlags = VmFlags(bindings::VM_ACCOUNT as u64);
    /// Not charged to committed memory (`VM_NORESERVE`).
    pub const NORESERVE: VmFlags = VmFlags(bindings::VM_NORESERVE as u64);
    /// Soft-dirty tracking reset (`VM_SOFTDIRTY`); merges ignore it.
    pub const SOFTDIRTY: VmFlags = VmFlags(bindings::VM_SOFTDIRTY as u64);
    /// Shadow stack (`VM_SHADOW_STACK`; none without user shadow stacks).
    pub const SHADOW_STACK: VmFlags = VmFlags(bindings::RSMM_VM_SHADOW_STACK as u64);
    /// Contents may be dropped under pressure (`VM_DROPPABLE`).
    pub const DROPPABLE: VmFlags = VmFlags(bindings::RSMM_VM_DROPPABLE as u64);
    /// `mseal()`ed (`VM_SEALED`).
    #[cfg(CONFIG_64BIT)]
    pub const SEALED: VmFlags = VmFlags(1 << bindings::RSMM_VM_SEALED_BIT);
    /// `mseal()`ed (`VM_SEALED`; none on 32-bit).
    #[cfg(not(CONFIG_64BIT))]
    pub const SEALED: VmFlags = VmFlags(0);
    /// The bits every `mprotect()` recomputes besides the access bits: the
    /// protection key and the architecture's own (`VM_FLAGS_CLEAR`).
    pub const PROT_CLEAR: VmFlags = VmFlags(bindings::RSMM_VM_FLAGS_CLEAR as u64);

    /// Flags from their raw value.
    #[inline]
    pub const fn from_bits(bits: u64) -> Self {
        VmFlags(bits)
    }

    /// The raw flags.
    #[inline]
    pub const fn bits(self) -> u64 {
        self.0
    }

    /// Whether every flag of `other` is set.
    #[inline]
    pub const fn contains(self, other: VmFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether any flag of `other` is set.
    #[inline]
    pub const fn intersects(self, other: VmFlags) -> bool {
        self.0 & other.0 != 0
    }

    /// The flags of `self` and `other`.
    #[inline]
    pub const fn union(self, other: VmFlags) -> Self {
        VmFlags(self.0 | other.0)
    }

    /// `self` without the flags of `other`.
    #[inline]
    pub const fn without(self, other: VmFlags) -> Self {
        VmFlags(self.0 & !other.0)
    }

    /// The access bits only.
    #[inline]
    pub const fn access(self) -> Self {
        VmFlags(self.0 & Self::ACCESS.0)
    }

    /// `self` with its access bits replaced by those of `access`; no other
    /// bit changes.
    #[inline]
    pub const fn with_access(self, access: VmFlags) -> Self {
        VmFlags((self.0 & !Self::ACCESS.0) | (access.0 & Self::ACCESS.0))
    }

    /// Whether every access bit set is allowed by its `VM_MAY*` bit, as
    /// `mprotect()` requires.
    #[inline]
    pub const fn access_allowed(self) -> bool {
        // VM_MAYREAD/WRITE/EXEC are VM_READ/WRITE/EXEC shifted by four.
        self.0 & !(self.0 >> 4) & Self::ACCESS.0 == 0
    }

    /// Whether the area is or may become shared (`VM_SHARED` or
    /// `VM_MAYSHARE`): the private ones have neither.
    #[inline]
    pub const fn is_shared(self) -> bool {
        self.intersects(Self::SHARED.union(Self::MAYSHARE))
    }

    /// Whether the area is `mlock()`ed (`VM_LOCKED` or `VM_LOCKONFAULT`).
    #[inline]
    pub const fn is_locked(self) -> bool {
        self.intersects(Self::LOCKED_ANY)
    }

    /// Whether userfaultfd is armed on the area (any mode).
    #[inline]
    pub const fn is_uffd_armed(self) -> bool {
        self.intersects(Self::UFFD_ARMED)
    }

    /// Whether the area is a stack that grows (down or up).
    #[inline]
    pub const fn is_growing_stack(self) -> bool {
        self.intersects(Self::GROWS)
    }

    /// Whether the flags are those of a data mapping (`is_data_mapping()`):
    /// writable, private and not a stack.
    #[inline]
    pub const fn is_data(self) -> bool {
        self.0 & (Self::WRITE.0 | Self::SHARED.0 | Self::STACK.0) == Self::WRITE.0
    }

    /// Whether the flags are those of an executable mapping
    /// (`is_exec_mapping()`): executable, not writable, not a stack.
    #[inline]
    pub const fn is_exec(self) -> bool {
        self.0 & (Self::WRITE.0 | Self::EXEC.0 | Self::STACK.0) == Self::EXEC.0
    }

    /// Whether two areas with these flags could merge as far as their
    /// flags go: equal but for `VM_SOFTDIRTY` (`is_mergeable_vma()`).
    #[inline]
    pub const fn merge_equal(self, other: VmFlags) -> bool {
        (self.0 ^ other.0) & !Self::SOFTDIRTY.0 == 0
    }
}

/// A virtual memory area, borrowed while a lock protecting it is held.
///
/// # Invariants
///
/// For the lifetime of any `&VmaRef`, it points to a live `struct
/// vm_area_struct` and the mmap lock of its address space, or its own
/// per-VMA read lock, is held: the fields read here do not change, except
/// the access bits of the flags and the page protection, which a
/// `VmaWriteHold` may change beside a holder of the mmap read lock (they
/// are read once).
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
    #[inline]
    pub unsafe fn from_raw<'a>(ptr: *const bindings::vm_area_struct) -> &'a VmaRef {
        // SAFETY: `VmaRef` is a transparent wrapper of the C struct, and the
        // caller guarantees the invariant for `'a`.
        unsafe { &*ptr.cast::<VmaRef>() }
    }

    /// The C struct, for the kernel crate's other wrappers of VMA calls.
    #[inline]
    pub(crate) fn as_raw(&self) -> *mut bindings::vm_area_struct {
        self.vma.get()
    }

    /// First address of the area.
    #[inline]
    pub fn start(&self) -> usize {
        // SAFETY: the VMA is live and locked (type invariant), so the field
        // is not written while we read it.
        unsafe { (*self.as_raw()).__bindgen_anon_1.__bindgen_anon_1.vm_start }
    }

    /// First address past the area.
    #[inline]
    pub fn end(&self) -> usize {
        // SAFETY: as in `start`.
        unsafe { (*self.as_raw()).__bindgen_anon_1.__bindgen_anon_1.vm_end }
    }

    /// The addresses of the area.
    #[inline]
    pub fn range(&self) -> Range<usize> {
        self.start()..self.end()
    }

    /// The flags of the area.
    ///
    /// Under the VMA's own read lock (or the mmap write lock) no flag
    /// changes while it is held.  Under the mmap read lock alone, the
    /// access bits of an area that RCXVM's fast path may change (a
    /// private anonymous one, see `Documentation/mm/rcx.rst`) may differ
    /// from one call to the next; every other bit is stable.
    #[inline]
    pub fn flags(&self) -> VmFlags {
        // SAFETY: the VMA is live (type invariant).  `vm_flags` is the
        // read-only member of the union C writes through `__vm_flags`; it
        // is read once, as `READ_ONCE()` would, since a VMA write hold
        // (`VmaWriteHold`) may write it beside a reader that holds the
        // mmap lock for reading only.
        VmFlags(unsafe {
            core::ptr::read_volatile(core::ptr::addr_of!(
                (*self.as_raw()).__bindgen_anon_2.vm_flags
            ))
        } as u64)
    }

    /// Whether the area has an `anon_vma` (it was written to, or inherited
    /// one).  A fault may give it one at any time under the mmap read lock
    /// or the VMA read lock, never take it away: read once.
    #[inline]
    pub fn has_anon_vma(&self) -> bool {
        // SAFETY: the VMA is live (type invariant); read once, as
        // `READ_ONCE()` would.
        !unsafe { core::ptr::read_volatile(core::ptr::addr_of!((*self.as_raw()).anon_vma)) }
            .is_null()
    }

    /// The page protection of the area (`vm_page_prot`), as raw bits.
    #[inline]
    pub fn page_prot(&self) -> u64 {
        // SAFETY: the VMA is live (type invariant).  Read once, as
        // `READ_ONCE()` would: a `VmaWriteHold` may write it beside a
        // reader that holds the mmap lock for reading only.
        unsafe { core::ptr::read_volatile(core::ptr::addr_of!((*self.as_raw()).vm_page_prot)) }
            .pgprot as u64
    }

    /// Runs `f` under the VMA's own read lock, if it can be had without
    /// waiting (`vma_start_read()`, as `lock_vma_under_rcu()` tries it), or
    /// returns `None`.  For tests of [`VmaWriteHold`].
    #[cfg(all(CONFIG_KUNIT, CONFIG_PER_VMA_LOCK))]
    #[doc(hidden)]
    pub fn try_with_read_lock<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        // SAFETY: the VMA is live (type invariant).
        if !unsafe { bindings::rsmm_vma_start_read(self.as_raw()) } {
            return None;
        }
        let r = f();
        // SAFETY: the read lock was taken above.
        unsafe { bindings::rsmm_vma_end_read(self.as_raw()) };
        Some(r)
    }

    /// Runs `f` under the VMA's own read lock, waiting for it as
    /// `uffd_lock_vma()` does under the mmap lock.  For tests of
    /// [`VmaWriteHold`]: `self` must come from an mmap lock guard.
    #[cfg(all(CONFIG_KUNIT, CONFIG_PER_VMA_LOCK))]
    #[doc(hidden)]
    pub fn with_read_lock_waiting<R>(&self, f: impl FnOnce() -> R) -> R {
        // SAFETY: the VMA is live (type invariant); waiting for its lock
        // under the mmap lock is the order mainline uses.
        unsafe { bindings::rsmm_vma_read_lock_wait(self.as_raw()) };
        let r = f();
        // SAFETY: the read lock was taken above.
        unsafe { bindings::rsmm_vma_end_read(self.as_raw()) };
        r
    }

    /// Whether the area is anonymous memory (no file, no special mapping).
    #[inline]
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
    #[inline]
    pub fn thp_allowed(&self) -> bool {
        // SAFETY: the VMA is live and locked (type invariant).
        unsafe { bindings::rsmm_vma_thp_allowed(self.as_raw()) }
    }

    /// Whether the PMD-aligned block that holds `addr` lies inside the
    /// area and is aligned like its file offset, so that one huge page can
    /// map it.
    #[inline]
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
    #[inline]
    pub fn from_ref(vma: &VmaRef) -> Self {
        Self(NonNull::from(vma).cast())
    }

    /// Wraps `ptr`, or `None` for a null pointer.
    #[inline]
    pub fn new(ptr: *mut bindings::vm_area_struct) -> Option<Self> {
        NonNull::new(ptr).map(Self)
    }

    /// The raw pointer.
    #[inline]
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
    #[inline]
    pub unsafe fn as_ref<'a>(self) -> &'a VmaRef {
        // SAFETY: the caller guarantees `VmaRef::from_raw`'s contract.
        unsafe { VmaRef::from_raw(self.as_ptr()) }
    }
}

/// A VMA held for writing by a task that holds the mmap lock of its address
/// space for reading only: RCXVM's exclusive hold of the one VMA its fast
/// path changes (see `Documentation/mm/rcx.rst`, "RCXVM").
///
/// Made by [`MmapReadGuard::write_hold`], which borrows the guard mutably:
/// the VMA belongs to the guard's address space, the hold cannot outlive
/// the mmap lock, and a task holds at most one VMA this way, so no order
/// between the locks of two VMAs is ever needed.
///
/// The hold is the VMA's own lock (`vm_lock->lock`) taken for writing and
/// kept until the hold is dropped.  `vma_start_write()` cannot be used: it
/// requires the mmap lock held for writing, and its hold ends only when
/// that lock is released (through `mm_lock_seq`), which a reader of the
/// mmap lock does not do.
///
/// The lock is only tried, never waited for: if a reader holds it (a page
/// fault) or another task holds the VMA, there is no hold, and the caller
/// takes mainline's path.  So no writer ever queues on a VMA lock while
/// holding the mmap lock for reading, which the kernel's readers that take
/// two VMA locks under it (`uffd_move_lock()`) rely on.  While the hold
/// lasts:
///
/// - `lock_vma_under_rcu()` fails on the VMA (its read trylock fails), so
///   page faults on it fall back to the mmap lock;
/// - a task that takes the VMA's read lock while holding the mmap lock
///   (`uffd_lock_vma()`, and RCXVM's fault fallback) waits for the hold;
/// - a writer of the mmap lock cannot be inside the address space, since
///   the hold's owner holds the mmap lock for reading.
///
/// `vm_lock_seq` is left as it is, so `__is_vma_write_locked()` never
/// takes the hold for a lock of a later mmap write session.
///
/// [`MmapReadGuard::write_hold`]: crate::mm::MmapReadGuard::write_hold
///
/// # Invariants
///
/// `vma` belongs to `mm`, whose mmap lock is held for reading for all of
/// `'a`, and the VMA's lock is held for writing by this hold until it is
/// dropped.
#[cfg(CONFIG_PER_VMA_LOCK)]
pub struct VmaWriteHold<'a> {
    vma: &'a VmaRef,
    mm: *mut bindings::mm_struct,
    _guard: PhantomData<&'a mut ()>,
}

#[cfg(CONFIG_PER_VMA_LOCK)]
impl<'a> VmaWriteHold<'a> {
    /// Tries to take the VMA's lock for writing, without waiting.
    ///
    /// # Safety
    ///
    /// `vma` belongs to the address space `mm`, whose mmap lock the caller
    /// holds for reading for all of `'a`, and the caller holds no other
    /// VMA's lock.
    #[inline]
    pub(crate) unsafe fn try_new(vma: &'a VmaRef, mm: *mut bindings::mm_struct) -> Option<Self> {
        // SAFETY: the VMA is live (the mmap lock is held); a trylock cannot
        // take part in a deadlock.
        if !unsafe { bindings::rsmm_vma_hold_write_trylock(vma.as_raw()) } {
            return None;
        }
        // INVARIANT: the VMA lock was just taken; the caller guarantees the
        // rest.
        Some(Self {
            vma,
            mm,
            _guard: PhantomData,
        })
    }

    /// The VMA held.
    #[inline]
    pub fn vma(&self) -> &VmaRef {
        self.vma
    }

    /// The VMA just below the held one (`find_vma_prev()`), if any.
    ///
    /// It is not held: only the mmap read lock keeps it in place, and its
    /// access bits may change under another task's hold.
    pub fn prev(&self) -> Option<&VmaRef> {
        let mut prev = core::ptr::null_mut();
        // SAFETY: the mm is live and its mmap lock held (type invariant).
        unsafe { bindings::find_vma_prev(self.mm, self.vma.start(), &mut prev) };
        // SAFETY: a VMA of the mm, which stays while the mmap lock is held,
        // for at least as long as `self` is borrowed.
        (!prev.is_null()).then(|| unsafe { VmaRef::from_raw(prev) })
    }

    /// The VMA just above the held one, if any.  As for [`Self::prev`], it
    /// is not held.
    pub fn next(&self) -> Option<&VmaRef> {
        // SAFETY: the mm is live and its mmap lock held (type invariant).
        let next = unsafe { bindings::find_vma(self.mm, self.vma.end()) };
        // SAFETY: as in `prev`.
        (!next.is_null()).then(|| unsafe { VmaRef::from_raw(next) })
    }

    /// Replaces the access bits of the VMA's flags by those of `access`
    /// and recomputes its page protection (`vma_set_page_prot()`); no
    /// other flag changes.
    ///
    /// # Safety
    ///
    /// The caller runs RCXVM's fast-path protocol: the VMA is of a kind the
    /// fast path takes (private anonymous and the rest of the eligibility
    /// rules), the new flags passed every check `mprotect()` makes, the
    /// change is committed in the RCX update that checked the neighbours,
    /// and the page tables of the VMA are brought to the new protection
    /// (`change_protection()`) before the hold is dropped.
    pub unsafe fn set_access(&mut self, access: VmFlags) {
        let vma = self.vma.as_raw();
        let new = self.vma.flags().with_access(access);
        // SAFETY: the VMA is live and held for writing (type invariant):
        // no other writer of its flags or protection exists, readers under
        // the VMA lock are excluded, and readers under the mmap read lock
        // alone read the flags once (`VmaRef::flags`).  The caller
        // guarantees the protocol.
        unsafe {
            bindings::rsmm_vm_flags_write_once(vma, new.bits() as _);
            bindings::vma_set_page_prot(vma);
        }
    }
}

#[cfg(CONFIG_PER_VMA_LOCK)]
impl Drop for VmaWriteHold<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the VMA lock is held for writing by this hold (type
        // invariant) and released once.
        unsafe { bindings::rsmm_vma_release_write(self.vma.as_raw()) };
    }
}
