// SPDX-License-Identifier: GPL-2.0

//! RCXVM's decision: may an `mprotect()` call take the fast path?
//!
//! The fast path changes the access bits of one whole private anonymous
//! VMA under the mmap lock held for reading and the VMA's own lock held for
//! writing, and must leave the address space exactly as mainline's
//! `mprotect()` (under the mmap write lock) would: no split, no merge, the
//! same flags.  [`decide`] takes what the caller read under those locks
//! (the VMA, its neighbours, the request) and returns either the new flags
//! or the reason the call must go to mainline's path instead.  It is pure:
//! it reads only its arguments, so the RCX update that commits the change
//! runs it again on the neighbours it holds.
//!
//! This module builds unchanged in the kernel (`mm/rcx_rs/vm/mod.rs`) and
//! on the host (`tools/host/crates/rcxvm-core`), where it is checked
//! against a model of mainline's merge decision (`vma_modify_flags()` ->
//! `vma_merge_existing_range()` in `mm/vma.c`).  The flags are a type of
//! the caller's: `kernel::mm::virt::VmFlags` in the kernel.
//!
//! See `Documentation/mm/rcx.rst`, "RCXVM".

use core::fmt::Debug;

/// The flag operations the decision needs, as `kernel::mm::virt::VmFlags`
/// provides them.
pub(crate) trait Flags: Copy + PartialEq + Debug {
    /// `VM_WRITE`.
    const WRITE: Self;
    /// `VM_EXEC`.
    const EXEC: Self;
    /// `VM_MAYEXEC`.
    const MAYEXEC: Self;
    /// `VM_SHARED | VM_MAYSHARE`.
    const SHARED_ANY: Self;
    /// `VM_HUGETLB`.
    const HUGETLB: Self;
    /// `VM_SPECIAL`.
    const SPECIAL: Self;
    /// `VM_LOCKED | VM_LOCKONFAULT`.
    const LOCKED_ANY: Self;
    /// `VM_UFFD_MISSING | VM_UFFD_WP | VM_UFFD_MINOR`.
    const UFFD_ARMED: Self;
    /// `VM_MERGEABLE`.
    const MERGEABLE: Self;
    /// `VM_GROWSDOWN | VM_GROWSUP`.
    const GROWS: Self;
    /// `VM_FLAGS_CLEAR`: the protection key and the architecture's bits.
    const PROT_CLEAR: Self;
    /// `VM_SHADOW_STACK`.
    const SHADOW_STACK: Self;
    /// `VM_DROPPABLE`.
    const DROPPABLE: Self;
    /// `VM_SEALED`.
    const SEALED: Self;
    /// `VM_ACCOUNT`.
    const ACCOUNT: Self;
    /// `VM_NORESERVE`.
    const NORESERVE: Self;

    /// Whether any flag of `other` is set.
    fn intersects(self, other: Self) -> bool;
    /// `self` with the access bits of `prot` (read, write, exec) in place
    /// of its own.
    fn with_prot(self, read: bool, write: bool, exec: bool) -> Self;
    /// Every access bit set is allowed by its `VM_MAY*` bit.
    fn access_allowed(self) -> bool;
    /// Equal but for `VM_SOFTDIRTY`, as merges compare flags.
    fn merge_equal(self, other: Self) -> bool;
    /// `is_data_mapping()`.
    fn is_data(self) -> bool;
    /// `is_exec_mapping()`.
    fn is_exec(self) -> bool;
}

/// What the caller asks for: `mprotect(start, end - start, prot)`, or
/// `pkey_mprotect()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Request {
    /// First address, page aligned.
    pub(crate) start: usize,
    /// First address past the range, page aligned (the length rounded up).
    pub(crate) end: usize,
    /// `PROT_READ`.
    pub(crate) read: bool,
    /// `PROT_WRITE`.
    pub(crate) write: bool,
    /// `PROT_EXEC`.
    pub(crate) exec: bool,
    /// `PROT_GROWSDOWN` or `PROT_GROWSUP`.
    pub(crate) grows: bool,
    /// Any other bit of `prot` (the architecture's: `PROT_BTI`, `PROT_MTE`,
    /// `PROT_SAO`, `PROT_ADI`).
    pub(crate) arch_bits: bool,
    /// The task's personality has `READ_IMPLIES_EXEC`.
    pub(crate) read_implies_exec: bool,
    /// A protection key is asked for (`pkey_mprotect()` with a key other
    /// than -1), or the architecture would give the VMA a key of its own
    /// (`arch_override_mprotect_pkey()`: an execute-only key).
    pub(crate) pkey: bool,
    /// The address space denies write+exec (`MMF_HAS_MDWE`).
    pub(crate) mdwe: bool,
}

/// The VMA that holds `start`, read under its write hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Target<F> {
    /// First address.
    pub(crate) start: usize,
    /// First address past it.
    pub(crate) end: usize,
    /// Its flags.
    pub(crate) flags: F,
    /// `vma_is_anonymous()`: no file, no `vm_ops`.
    pub(crate) anonymous: bool,
    /// It has an `anon_vma` (it has been written to, or inherited one).
    pub(crate) has_anon_vma: bool,
    /// A merge may remove it: no `vm_ops->close` (`can_merge_remove_vma()`).
    pub(crate) removable: bool,
}

/// A neighbour of the VMA, as a merge would see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Neighbour<F> {
    /// Its flags, read inside the RCX update that holds it.
    pub(crate) flags: F,
    /// It touches the VMA (`prev->vm_end == vma->vm_start`, or
    /// `vma->vm_end == next->vm_start`).
    pub(crate) adjacent: bool,
    /// Everything but the flags allows a merge with the VMA: the same file
    /// (none), memory policy, userfaultfd context and anonymous name,
    /// compatible `anon_vma`s and contiguous page offsets
    /// (`can_vma_merge_after()` / `can_vma_merge_before()` without their
    /// flags test).
    pub(crate) compatible: bool,
}

/// Why a call goes to mainline's path.  Each has a counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub(crate) enum Reason {
    /// No VMA at `start`.
    NoVma,
    /// The range starts or ends inside the VMA: mainline splits it.
    Partial,
    /// The range goes past the VMA: several VMAs (or a hole).
    Several,
    /// The change would merge the VMA with a neighbour.
    Merge,
    /// Not anonymous memory (a file, or `vm_ops` of a driver).
    NotAnonymous,
    /// Shared, or may become shared.
    Shared,
    /// hugetlbfs.
    Hugetlb,
    /// `VM_IO`, `VM_PFNMAP`, `VM_MIXEDMAP`, `VM_DONTEXPAND`.
    Special,
    /// `mlock()`ed.
    Locked,
    /// userfaultfd is armed on it.
    Uffd,
    /// KSM may merge its pages.
    Ksm,
    /// A stack that grows, or `PROT_GROWSDOWN`/`PROT_GROWSUP` asked.
    Grows,
    /// Protection keys (asked for, or on the VMA) or architecture bits.
    Pkey,
    /// A shadow stack.
    ShadowStack,
    /// `VM_DROPPABLE`.
    Droppable,
    /// Sealed: mainline's path returns the error.
    Sealed,
    /// A check fails (`VM_MAY*`, write+exec denied): mainline's path
    /// returns the error.
    Denied,
    /// Committed-memory accounting would change (`VM_ACCOUNT`).
    Accounting,
    /// The VMA's lock is taken (a page fault in it, another call on it):
    /// the hold is never waited for.  Not a decision of [`decide`].
    Busy,
}

impl Reason {
    /// Every reason, in counter order.
    pub(crate) const ALL: [Reason; 19] = [
        Reason::NoVma,
        Reason::Partial,
        Reason::Several,
        Reason::Merge,
        Reason::NotAnonymous,
        Reason::Shared,
        Reason::Hugetlb,
        Reason::Special,
        Reason::Locked,
        Reason::Uffd,
        Reason::Ksm,
        Reason::Grows,
        Reason::Pkey,
        Reason::ShadowStack,
        Reason::Droppable,
        Reason::Sealed,
        Reason::Denied,
        Reason::Accounting,
        Reason::Busy,
    ];

    /// The counter's name.
    // Used only by the KUnit suites and the host tests.
    #[cfg(any(test, CONFIG_RCX_KUNIT_TEST))]
    pub(crate) fn name(self) -> &'static str {
        match self {
            Reason::NoVma => "no_vma",
            Reason::Partial => "partial",
            Reason::Several => "several_vmas",
            Reason::Merge => "merge",
            Reason::NotAnonymous => "not_anonymous",
            Reason::Shared => "shared",
            Reason::Hugetlb => "hugetlb",
            Reason::Special => "special",
            Reason::Locked => "locked",
            Reason::Uffd => "userfaultfd",
            Reason::Ksm => "ksm",
            Reason::Grows => "grows",
            Reason::Pkey => "pkey",
            Reason::ShadowStack => "shadow_stack",
            Reason::Droppable => "droppable",
            Reason::Sealed => "sealed",
            Reason::Denied => "denied",
            Reason::Accounting => "accounting",
            Reason::Busy => "vma_busy",
        }
    }
}

/// The decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision<F> {
    /// The flags stay as they are: done (after the security hook).
    Unchanged,
    /// Set these flags; `stat_class_changed` says whether the address
    /// space's data/exec counters (`vm_stat_account()`) move, which needs
    /// their lock and, for a change into data, the `RLIMIT_DATA` check.
    Fast {
        /// The new flags.
        flags: F,
        /// `is_data()` or `is_exec()` differs between old and new flags.
        stat_class_changed: bool,
    },
    /// Go to mainline's path.
    Fallback(Reason),
}

/// The flags `mprotect()` gives the VMA, computed as `do_mprotect_pkey()`
/// does for a VMA without a protection key.
pub(crate) fn new_flags<F: Flags>(old: F, req: &Request) -> F {
    let exec = req.exec || (req.read_implies_exec && req.read && old.intersects(F::MAYEXEC));
    old.with_prot(req.read, req.write, exec)
}

/// Decides whether `req` may take the fast path on `vma`, given its
/// neighbours (`None`: no VMA on that side).
pub(crate) fn decide<F: Flags>(
    req: &Request,
    vma: Option<&Target<F>>,
    prev: Option<&Neighbour<F>>,
    next: Option<&Neighbour<F>>,
) -> Decision<F> {
    use Decision::Fallback;

    // The range: exactly one whole VMA.
    let Some(vma) = vma else {
        return Fallback(Reason::NoVma);
    };
    if req.start < vma.start || req.start >= vma.end {
        return Fallback(Reason::NoVma);
    }
    if req.end > vma.end {
        return Fallback(Reason::Several);
    }
    if req.start != vma.start || req.end != vma.end {
        return Fallback(Reason::Partial);
    }

    // The kinds the fast path leaves alone.
    let old = vma.flags;
    if req.grows || old.intersects(F::GROWS) {
        return Fallback(Reason::Grows);
    }
    if req.pkey || req.arch_bits || old.intersects(F::PROT_CLEAR) {
        return Fallback(Reason::Pkey);
    }
    let kinds = [
        (!vma.anonymous, Reason::NotAnonymous),
        (old.intersects(F::SHARED_ANY), Reason::Shared),
        (old.intersects(F::HUGETLB), Reason::Hugetlb),
        (old.intersects(F::SPECIAL), Reason::Special),
        (old.intersects(F::LOCKED_ANY), Reason::Locked),
        (old.intersects(F::UFFD_ARMED), Reason::Uffd),
        (old.intersects(F::MERGEABLE), Reason::Ksm),
        (old.intersects(F::SHADOW_STACK), Reason::ShadowStack),
        (old.intersects(F::DROPPABLE), Reason::Droppable),
        (old.intersects(F::SEALED), Reason::Sealed),
    ];
    if let Some((_, reason)) = kinds.iter().find(|(hit, _)| *hit) {
        return Fallback(*reason);
    }

    // mprotect()'s checks, in its order; a failure is mainline's to report.
    let new = new_flags(old, req);
    if !new.access_allowed() || denies_write_exec(old, new, req.mdwe) {
        return Fallback(Reason::Denied);
    }
    if new == old {
        return Decision::Unchanged;
    }

    // Committed memory: mprotect_fixup() charges a private mapping that
    // becomes writable for the first time, and uncharges an anonymous one
    // that was never written to when it stops being writable.
    let write = new.intersects(F::WRITE);
    let charged_or_exempt = [
        F::ACCOUNT,
        F::WRITE,
        F::HUGETLB,
        F::SHARED_ANY,
        F::NORESERVE,
    ];
    if write && !charged_or_exempt.iter().any(|&f| old.intersects(f)) {
        return Fallback(Reason::Accounting);
    }
    if !write && old.intersects(F::ACCOUNT) && !vma.has_anon_vma {
        return Fallback(Reason::Accounting);
    }

    // A merge: mainline removes the VMA into a neighbour whose flags equal
    // the new ones (vma_merge_existing_range() with the whole VMA).
    let joins = |n: Option<&Neighbour<F>>| {
        n.is_some_and(|n| n.adjacent && n.compatible && n.flags.merge_equal(new))
    };
    if !new.intersects(F::SPECIAL) && vma.removable && (joins(prev) || joins(next)) {
        return Fallback(Reason::Merge);
    }

    Decision::Fast {
        flags: new,
        stat_class_changed: old.is_data() != new.is_data() || old.is_exec() != new.is_exec(),
    }
}

/// `map_deny_write_exec()`: with MDWE, a mapping may not be writable and
/// executable, nor become executable.
fn denies_write_exec<F: Flags>(old: F, new: F, mdwe: bool) -> bool {
    mdwe && new.intersects(F::EXEC) && (new.intersects(F::WRITE) || !old.intersects(F::EXEC))
}
