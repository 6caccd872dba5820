// SPDX-License-Identifier: GPL-2.0

//! RCXVM's fast path: `mprotect()` of one whole private anonymous VMA under
//! the mmap read lock (`Documentation/mm/rcx.rst`, "RCXVM").
//!
//! `do_mprotect_pkey()` calls [`rcxvm_mprotect_fast`] (through
//! `rcxvm_mprotect()` of `include/linux/rcxvm.h`, behind the fast-path
//! key) after its argument checks and before it takes the mmap write lock.
//! The call:
//!
//! 1. takes the mmap lock for reading and makes the decision on the VMA
//!    alone (range, kind, checks): most calls the fast path cannot take
//!    leave here without touching the VMA's lock;
//! 2. holds the VMA for writing ([`kernel::mm::virt::VmaWriteHold`], a
//!    trylock: a busy VMA goes to mainline's path) and decides again with
//!    its neighbours;
//! 3. runs the checks the decision does not make (`arch_validate_flags()`,
//!    the LSM hook, `RLIMIT_DATA`: `rcxvm_check()` in `rcxvm.c`);
//! 4. commits in one RCX update over the lock slots of {prev, VMA, next},
//!    deciding a third time on the neighbours' flags as they are inside
//!    the update, and stores the flags and the page protection there;
//! 5. brings the page tables to the new protection and accounts the
//!    change (`rcxvm_apply()`: `change_protection()` with an mmu_gather,
//!    `vm_stat_account()`), and releases the hold and the mmap lock.
//!
//! Any "no" returns [`FALLBACK`], and the caller goes on with mainline's
//! path unchanged; each is counted by reason.

use super::decide::{decide, Decision, Neighbour, Reason, Request, Target};
use crate::{Attempt, Mode, Rcx};
use core::{
    ffi::c_int,
    ptr,
    sync::atomic::{AtomicPtr, Ordering},
};
use kernel::{
    bindings,
    mm::{
        virt::{VmFlags, VmaPtr, VmaRef},
        MmWithUser,
    },
    prelude::*,
};

/// `RCXVM_FALLBACK` of `include/linux/rcxvm.h`: take mainline's path.
pub(crate) const FALLBACK: c_int = 1;

/// A counter of `rcxvm.c` (`enum rcxvm_event`).
pub(crate) type Event = bindings::rcxvm_event;

// The reasons are the first counters, in the order of `Reason::ALL`
// (the KUnit suite compares their names).
const _: () = assert!(Reason::ALL.len() == bindings::rcxvm_event_RCXVM_NR_REASONS as usize);

/// The update side of every fast-path commit, made once at boot by
/// [`rcxvm_rust_init`] and never freed.  One for all address spaces: a
/// VMA's lock slot is chosen by its address, and VMAs of different
/// address spaces that share a slot only wait for each other briefly.
static RCX: AtomicPtr<Rcx> = AtomicPtr::new(ptr::null_mut());

/// Makes the update side of the fast path; called once by `rcxvm_init()`
/// before the fast path can be turned on.
#[no_mangle]
pub(crate) extern "C" fn rcxvm_rust_init() -> c_int {
    if !RCX.load(Ordering::Acquire).is_null() {
        return 0;
    }
    let rcx = match Rcx::new(Mode::Auto).and_then(|r| Ok(KBox::new(r, GFP_KERNEL)?)) {
        Ok(r) => r,
        Err(e) => return e.to_errno(),
    };
    RCX.store(KBox::into_raw(rcx), Ordering::Release);
    0
}

/// Counts `ev`.
pub(crate) fn count(ev: Event) {
    // SAFETY: FFI call without preconditions (an index out of range is
    // refused by the callee).
    unsafe { bindings::rcxvm_count(ev) };
}

/// Counts `reason` and returns [`FALLBACK`].
fn fallback(reason: Reason) -> c_int {
    count(reason as usize as Event);
    FALLBACK
}

/// The request of an `mprotect()` call as the decision sees it.
fn request(
    mm: &MmWithUser,
    start: usize,
    end: usize,
    prot: usize,
    grows: bool,
    pkey: c_int,
) -> Request {
    // SAFETY: the mm is live (type invariant of `MmWithUser`).
    let bits = unsafe { bindings::rcxvm_request(mm.as_raw(), prot as _, pkey) };
    let has = |b: u32| bits & b != 0;
    Request {
        start,
        end,
        read: has(bindings::RCXVM_REQ_READ),
        write: has(bindings::RCXVM_REQ_WRITE),
        exec: has(bindings::RCXVM_REQ_EXEC),
        grows,
        arch_bits: has(bindings::RCXVM_REQ_ARCH),
        read_implies_exec: has(bindings::RCXVM_REQ_RIE),
        pkey: has(bindings::RCXVM_REQ_PKEY),
        mdwe: has(bindings::RCXVM_REQ_MDWE),
    }
}

fn target(vma: &VmaRef) -> Target<VmFlags> {
    let anonymous = vma.is_anonymous();
    Target {
        start: vma.start(),
        end: vma.end(),
        flags: vma.flags(),
        anonymous,
        has_anon_vma: vma.has_anon_vma(),
        // `can_merge_remove_vma()`: no `vm_ops->close`; an anonymous VMA
        // has no `vm_ops` (the others never reach the merge test).
        removable: anonymous,
    }
}

/// `other`, the VMA below (`below`) or above `vma`, as a merge would see
/// it; its flags are read now.
fn neighbour(vma: &VmaRef, other: &VmaRef, below: bool) -> Neighbour<VmFlags> {
    let adjacent = if below {
        other.end() == vma.start()
    } else {
        vma.end() == other.start()
    };
    // SAFETY: both are live VMAs of one address space, whose mmap lock the
    // caller holds (`VmaRef`'s invariant).
    let compatible = unsafe {
        bindings::rcxvm_neighbour_compatible(
            VmaPtr::from_ref(vma).as_ptr(),
            VmaPtr::from_ref(other).as_ptr(),
        )
    };
    Neighbour {
        flags: other.flags(),
        adjacent,
        compatible,
    }
}

/// Decides on `vma` with the neighbours' flags as they are now.
///
/// # Safety
///
/// `prev` and `next` are VMAs of `vma`'s address space, whose mmap lock
/// the caller holds for reading.
unsafe fn decide_now(
    req: &Request,
    vma: &VmaRef,
    prev: Option<VmaPtr>,
    next: Option<VmaPtr>,
) -> Decision<VmFlags> {
    // SAFETY: per the function's contract.
    let prev = prev.map(|p| neighbour(vma, unsafe { p.as_ref() }, true));
    // SAFETY: as above.
    let next = next.map(|n| neighbour(vma, unsafe { n.as_ref() }, false));
    decide(req, Some(&target(vma)), prev.as_ref(), next.as_ref())
}

/// RCXVM's `mprotect(start, end - start, prot)` (`pkey_mprotect()` with
/// `pkey`; `grows` for `PROT_GROWSDOWN`/`PROT_GROWSUP`, removed from
/// `prot`), called by `do_mprotect_pkey()` after its argument checks.
/// Returns 0 or the error mainline's path would return, or [`FALLBACK`]:
/// the caller then runs mainline's path, which finds everything as it was.
///
/// # Safety
///
/// `mm` is the caller's address space (`current->mm` in a system call),
/// live for the whole call; the caller holds no mmap or VMA lock.
#[no_mangle]
pub(crate) unsafe extern "C" fn rcxvm_mprotect_fast(
    mm: *mut bindings::mm_struct,
    start: usize,
    end: usize,
    prot: usize,
    grows: bool,
    pkey: c_int,
) -> c_int {
    // SAFETY: set once at boot and never freed.
    let Some(rcx) = (unsafe { RCX.load(Ordering::Acquire).as_ref() }) else {
        return FALLBACK;
    };
    // SAFETY: the caller's address space holds a user reference for the
    // whole call (the function's contract).
    let mm = unsafe { MmWithUser::from_raw(mm) };
    let req = request(mm, start, end, prot, grows, pkey);
    let mut guard = match mm.mmap_read_lock_killable() {
        Ok(g) => g,
        Err(e) => return e.to_errno(),
    };

    // A first decision on the VMA alone: the calls the fast path cannot
    // take leave without touching the VMA's lock.
    let first = guard.vma_lookup(start).map(target);
    if let Decision::Fallback(r) = decide(&req, first.as_ref(), None, None) {
        return fallback(r);
    }

    // The hold: from here on nobody else changes the VMA, and no fault in
    // it reads its flags.
    let Ok(mut hold) = guard.write_hold(start) else {
        return fallback(Reason::Busy);
    };
    let vma = VmaPtr::from_ref(hold.vma());
    let prev = hold.prev().map(VmaPtr::from_ref);
    let next = hold.next().map(VmaPtr::from_ref);
    let old = hold.vma().flags();
    // SAFETY: `prev` and `next` are VMAs of the held VMA's address space,
    // whose mmap lock `guard` holds.
    let flags = match unsafe { decide_now(&req, hold.vma(), prev, next) } {
        Decision::Fallback(r) => return fallback(r),
        Decision::Unchanged => old,
        Decision::Fast { flags, .. } => flags,
    };

    // The checks the decision does not make, in mainline's order.
    // SAFETY: the VMA is held; the call may sleep, which the hold allows.
    match unsafe {
        bindings::rcxvm_check(vma.as_ptr(), prot as _, old.bits() as _, flags.bits() as _)
    } {
        0 => {}
        FALLBACK => return fallback(Reason::Accounting),
        err => {
            count(bindings::rcxvm_event_RCXVM_EV_ERRORS);
            count(bindings::rcxvm_event_RCXVM_EV_WRITE_LOCKS_AVOIDED);
            return err;
        }
    }
    if flags == old {
        count(bindings::rcxvm_event_RCXVM_EV_UNCHANGED);
        count(bindings::rcxvm_event_RCXVM_EV_WRITE_LOCKS_AVOIDED);
        return 0;
    }

    // The commit.  The neighbours' access bits may be changing under
    // their own holds: inside the update that holds their slots they
    // cannot, so the decision made there is the one that counts.
    let slots = [
        rcx.slot_of(prev.unwrap_or(vma).as_ptr()),
        rcx.slot_of(vma.as_ptr()),
        rcx.slot_of(next.unwrap_or(vma).as_ptr()),
    ];
    let mut outcome = Decision::Fallback(Reason::Merge);
    loop {
        let attempt = rcx.attempt(slots, || {
            // SAFETY: as for the decision above.
            outcome = unsafe { decide_now(&req, hold.vma(), prev, next) };
            if matches!(outcome, Decision::Fast { flags: f, .. } if f == flags) {
                // SAFETY: the fast-path protocol: the VMA is of a kind the
                // fast path takes and held, the flags passed every check,
                // this is the RCX update over its neighbours' slots, and
                // the page tables follow (`rcxvm_apply()`) before the hold
                // is dropped.
                unsafe { hold.set_access(flags) };
            }
            true
        });
        match attempt {
            Attempt::Done => break,
            Attempt::Retry => count(bindings::rcxvm_event_RCXVM_EV_RCX_RETRIES),
        }
    }
    if let Decision::Fallback(r) = outcome {
        count(bindings::rcxvm_event_RCXVM_EV_MERGE_AT_COMMIT);
        return fallback(r);
    }

    // SAFETY: the VMA is held and its new flags are stored; the call
    // sleeps only where the hold and the mmap read lock allow.
    unsafe { bindings::rcxvm_apply(vma.as_ptr(), old.bits() as _, flags.bits() as _) };
    drop(hold);
    drop(guard);
    count(bindings::rcxvm_event_RCXVM_EV_FAST);
    count(bindings::rcxvm_event_RCXVM_EV_WRITE_LOCKS_AVOIDED);
    0
}
