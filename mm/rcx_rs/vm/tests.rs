// SPDX-License-Identifier: GPL-2.0

//! The `rcxvm` suite: the decision on the kernel's own flags, and the VMA
//! write hold against the readers it must exclude.

use super::decide::{decide, Decision, Neighbour, Reason, Request, Target};
use super::fast;
use core::sync::atomic::{AtomicUsize, Ordering};
use kernel::{
    bindings,
    delay::MaySleep,
    kunit::suite::spawn_workers,
    kunit_expect, kunit_expect_eq,
    mm::{
        virt::{VmFlags, VmaWriteHold},
        MmWithUser, PAGE_SIZE,
    },
    prelude::*,
    processor::cpu_relax,
    sync::Arc,
};

/// The flags of a private anonymous mapping that was made writable.
fn rw() -> VmFlags {
    VmFlags::READ
        .union(VmFlags::WRITE)
        .union(VmFlags::MAY_ACCESS)
        .union(VmFlags::ACCOUNT)
}

fn request(read: bool, write: bool) -> Request {
    Request {
        start: 0x10000,
        end: 0x20000,
        read,
        write,
        exec: false,
        grows: false,
        arch_bits: false,
        read_implies_exec: false,
        pkey: false,
        mdwe: false,
    }
}

fn target(flags: VmFlags) -> Target<VmFlags> {
    Target {
        start: 0x10000,
        end: 0x20000,
        flags,
        anonymous: true,
        has_anon_vma: true,
        removable: true,
    }
}

/// The decision with the kernel's flag values: toggles are fast, a toggle
/// that makes the VMA equal to a compatible neighbour merges, and each
/// excluded kind falls back under its own reason.
fn decide_on_kernel_flags() -> Result {
    let ro = rw().without(VmFlags::WRITE);
    let t = target(rw());
    let fast = decide(&request(true, false), Some(&t), None, None);
    kunit_expect_eq!(
        fast,
        Decision::Fast {
            flags: ro,
            stat_class_changed: true
        }
    );
    kunit_expect_eq!(
        decide(&request(true, true), Some(&t), None, None),
        Decision::Unchanged
    );
    let same = Neighbour {
        flags: ro.union(VmFlags::SOFTDIRTY),
        adjacent: true,
        compatible: true,
    };
    kunit_expect_eq!(
        decide(&request(true, false), Some(&t), Some(&same), None),
        Decision::Fallback(Reason::Merge)
    );
    let apart = Neighbour {
        adjacent: false,
        ..same
    };
    kunit_expect_eq!(
        decide(&request(true, false), Some(&t), Some(&apart), Some(&apart)),
        fast
    );
    for (extra, reason) in [
        (VmFlags::SHARED, Reason::Shared),
        (VmFlags::MAYSHARE, Reason::Shared),
        (VmFlags::HUGETLB, Reason::Hugetlb),
        (VmFlags::SPECIAL, Reason::Special),
        (VmFlags::LOCKED, Reason::Locked),
        (VmFlags::UFFD_ARMED, Reason::Uffd),
        (VmFlags::MERGEABLE, Reason::Ksm),
        (VmFlags::STACK, Reason::Grows),
    ] {
        let t = target(rw().union(extra));
        kunit_expect_eq!(
            decide(&request(true, false), Some(&t), None, None),
            Decision::Fallback(reason)
        );
    }
    // Never written to: read-only drops VM_ACCOUNT, which mainline does.
    let t = Target {
        has_anon_vma: false,
        ..target(rw())
    };
    kunit_expect_eq!(
        decide(&request(true, false), Some(&t), None, None),
        Decision::Fallback(Reason::Accounting)
    );
    Ok(())
}

/// Rounds of the hold test's writer.
const HOLD_ROUNDS: usize = 2000;
/// Address of the hold test's VMA.
const HOLD_VMA: usize = 0x4000_0000;

/// Tallies of the hold test.
#[derive(Default)]
struct HoldStats {
    /// The writer is inside its hold.
    inside: AtomicUsize,
    /// The writer has finished.
    done: AtomicUsize,
    /// A reader saw the writer inside, or the flags mid-change.
    violations: AtomicUsize,
    /// Read trylocks that succeeded and failed.
    tried: AtomicUsize,
    refused: AtomicUsize,
    /// Waiting read locks taken.
    waited: AtomicUsize,
    /// Holds refused because a reader had the VMA.
    busy: AtomicUsize,
}

/// The VMA write hold against its readers: one task holds the VMA and
/// changes its access bits back and forth; others read it at the same
/// time, with the trylock of `lock_vma_under_rcu()` and with the waiting
/// read lock of `uffd_lock_vma()` (and of RCXVM's fault fallback), both
/// under the mmap read lock the writer also holds.  No reader may see the
/// writer inside its hold, nor the flags the writer sets only inside it;
/// a hold refused because a reader has the VMA (`EBUSY`) is retried.
fn write_hold_excludes_readers() -> Result {
    // SAFETY: a KUnit case runs in process context, with no atomic
    // section active.
    let ctx = unsafe { MaySleep::new() };
    let mm = MmWithUser::new_for_test(HOLD_VMA..HOLD_VMA + 16 * PAGE_SIZE, false)?;
    let stats = Arc::new(HoldStats::default(), GFP_KERNEL)?;
    let workers = spawn_workers(&ctx, 3, |i| {
        let (mm, st) = (mm.clone(), stats.clone());
        move || match i {
            0 => hold_writer(&mm, &st),
            1 => hold_reader(&mm, &st, false),
            _ => hold_reader(&mm, &st, true),
        }
    });
    kunit_expect_eq!(workers.started(), 3);
    workers.join();
    kunit_expect_eq!(stats.violations.load(Ordering::Relaxed), 0);
    kunit_expect!(stats.tried.load(Ordering::Relaxed) > 0);
    kunit_expect!(stats.waited.load(Ordering::Relaxed) > 0);
    pr_info!(
        "rcxvm: hold test: {} holds ({} busy), read trylock {} ok / {} refused, {} waiting read locks\n",
        HOLD_ROUNDS,
        stats.busy.load(Ordering::Relaxed),
        stats.tried.load(Ordering::Relaxed),
        stats.refused.load(Ordering::Relaxed),
        stats.waited.load(Ordering::Relaxed)
    );
    let guard = mm.mmap_read_lock();
    let vma = guard.vma_lookup(HOLD_VMA).ok_or(ENOENT)?;
    kunit_expect_eq!(vma.flags().access(), VmFlags::READ.union(VmFlags::WRITE));
    Ok(())
}

fn hold_writer(mm: &MmWithUser, st: &HoldStats) {
    let mut rounds = 0;
    while rounds < HOLD_ROUNDS {
        let mut guard = mm.mmap_read_lock();
        match guard.write_hold(HOLD_VMA) {
            Ok(hold) => {
                hold_round(hold, st);
                rounds += 1;
            }
            // A reader has the VMA: the fast path would take mainline's
            // path.  Try again.
            Err(e) if e == EBUSY => {
                st.busy.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                st.violations.fetch_add(1, Ordering::Relaxed);
                break;
            }
        }
        drop(guard);
        kernel::delay::cond_resched(
            // SAFETY: a worker runs in process context, outside any atomic
            // section (the guard is dropped).
            &unsafe { MaySleep::new() },
        );
    }
    st.done.store(1, Ordering::Release);
}

/// One hold of the writer: inside, the VMA is read-only for a while.
fn hold_round(mut hold: VmaWriteHold<'_>, st: &HoldStats) {
    st.inside.store(1, Ordering::SeqCst);
    // SAFETY: the test's address space is never run: it has no page
    // tables to bring to the new protection, and one VMA, so no neighbour
    // to check.  The original bits are back before the hold ends.
    unsafe { hold.set_access(VmFlags::READ) };
    if hold.vma().flags().access() != VmFlags::READ {
        st.violations.fetch_add(1, Ordering::Relaxed);
    }
    for _ in 0..50 {
        cpu_relax();
    }
    // SAFETY: as above.
    unsafe { hold.set_access(VmFlags::READ.union(VmFlags::WRITE)) };
    st.inside.store(0, Ordering::SeqCst);
}

fn hold_reader(mm: &MmWithUser, st: &HoldStats, wait: bool) {
    let rw = VmFlags::READ.union(VmFlags::WRITE);
    while st.done.load(Ordering::Acquire) == 0 {
        let guard = mm.mmap_read_lock();
        let Some(vma) = guard.vma_lookup(HOLD_VMA) else {
            st.violations.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let check = || {
            if st.inside.load(Ordering::SeqCst) != 0 || vma.flags().access() != rw {
                st.violations.fetch_add(1, Ordering::Relaxed);
            }
        };
        if wait {
            vma.with_read_lock_waiting(check);
            st.waited.fetch_add(1, Ordering::Relaxed);
        } else if vma.try_with_read_lock(check).is_some() {
            st.tried.fetch_add(1, Ordering::Relaxed);
        } else {
            st.refused.fetch_add(1, Ordering::Relaxed);
        }
        drop(guard);
        kernel::delay::cond_resched(
            // SAFETY: a worker runs in process context, outside any atomic
            // section (the guard above is dropped).
            &unsafe { MaySleep::new() },
        );
    }
}

/// The fallback reasons are counters: one index and one name each.
fn reason_counters() -> Result {
    for (i, r) in Reason::ALL.iter().enumerate() {
        kunit_expect_eq!(*r as usize, i);
        let name = r.name();
        kunit_expect!(!name.is_empty());
        kunit_expect_eq!(Reason::ALL.iter().filter(|o| o.name() == name).count(), 1);
    }
    Ok(())
}

/// The C counters (`rcxvm.c`) carry the reasons' names at the reasons'
/// indexes.
fn reason_counters_match_c() -> Result {
    for r in Reason::ALL {
        // SAFETY: FFI call without preconditions.
        let name = unsafe { bindings::rcxvm_event_name(r as usize as u32) };
        kunit_expect!(!name.is_null());
        if name.is_null() {
            continue;
        }
        // SAFETY: a non-NULL name is a static NUL-terminated string.
        let name = unsafe { CStr::from_char_ptr(name) };
        kunit_expect_eq!(name.as_bytes(), r.name().as_bytes());
    }
    Ok(())
}

/// Reads counter `ev`.
fn read(ev: fast::Event) -> u64 {
    // SAFETY: FFI call without preconditions.
    unsafe { bindings::rcxvm_read(ev) as u64 }
}

/// `mprotect()` through the fast path on a test address space.
fn mprotect(mm: &MmWithUser, start: usize, end: usize, prot: u32) -> i32 {
    // SAFETY: `mm` holds a user reference for the call, and this task
    // holds no mmap or VMA lock.
    unsafe { fast::rcxvm_mprotect_fast(mm.as_raw(), start, end, prot as usize, false, -1) }
}

/// The wired fast path on a test address space (one private anonymous
/// VMA made read-write, as `MmWithUser::new_for_test()` makes it): a call
/// over the whole VMA changes its flags and page protection under the
/// mmap read lock and counts a hit; a repeated one changes nothing; the
/// calls it must leave to mainline come back as `FALLBACK`, each counted
/// under its reason, and leave the VMA as it was.  (A busy VMA needs a
/// second task: the `rcxvm_race` scenario counts those.)
fn fast_path_on_test_mm() -> Result {
    const START: usize = 0x4000_0000;
    const END: usize = 0x4040_0000;
    // PROT_READ and PROT_WRITE (include/uapi/asm-generic/mman-common.h).
    let (r, w) = (0x1, 0x2);
    let mm = MmWithUser::new_for_test(START..END, false)?;
    let flags = |mm: &MmWithUser| -> Result<(VmFlags, u64)> {
        let guard = mm.mmap_read_lock();
        let vma = guard.vma_lookup(START).ok_or(ENOENT)?;
        Ok((vma.flags(), vma.page_prot()))
    };
    let (rw_flags, rw_prot) = flags(&mm)?;
    kunit_expect!(rw_flags.contains(VmFlags::WRITE));

    let ev = |r: Reason| r as usize as fast::Event;
    let fast0 = read(bindings::rcxvm_event_RCXVM_EV_FAST);
    let avoided0 = read(bindings::rcxvm_event_RCXVM_EV_WRITE_LOCKS_AVOIDED);
    kunit_expect_eq!(mprotect(&mm, START, END, r), 0);
    let (ro_flags, ro_prot) = flags(&mm)?;
    kunit_expect_eq!(ro_flags, rw_flags.without(VmFlags::WRITE));
    // A private mapping's protection is copy-on-write whether writable or
    // not (x86: `PAGE_COPY` is `PAGE_READONLY`); PROT_NONE changes it.
    kunit_expect_eq!(ro_prot, rw_prot);
    kunit_expect_eq!(read(bindings::rcxvm_event_RCXVM_EV_FAST), fast0 + 1);

    // Unchanged: answered under the read lock too.
    let same0 = read(bindings::rcxvm_event_RCXVM_EV_UNCHANGED);
    kunit_expect_eq!(mprotect(&mm, START, END, r), 0);
    kunit_expect_eq!(read(bindings::rcxvm_event_RCXVM_EV_UNCHANGED), same0 + 1);
    kunit_expect_eq!(
        read(bindings::rcxvm_event_RCXVM_EV_WRITE_LOCKS_AVOIDED),
        avoided0 + 2
    );

    // Mainline's: a split, several VMAs (a hole), no VMA, and making the
    // never-charged VMA writable (VM_ACCOUNT would change).
    for (start, end, prot, reason) in [
        (START, END - PAGE_SIZE, r, Reason::Partial),
        (START, END + PAGE_SIZE, r, Reason::Several),
        (END, END + PAGE_SIZE, r, Reason::NoVma),
        (START, END, r | w, Reason::Accounting),
    ] {
        let before = read(ev(reason));
        kunit_expect_eq!(mprotect(&mm, start, end, prot), fast::FALLBACK);
        kunit_expect_eq!(read(ev(reason)), before + 1);
        kunit_expect_eq!(flags(&mm)?.0, ro_flags);
    }

    kunit_expect_eq!(mprotect(&mm, START, END, 0), 0);
    let (none_flags, none_prot) = flags(&mm)?;
    kunit_expect_eq!(none_flags, ro_flags.without(VmFlags::READ));
    kunit_expect!(none_prot != ro_prot);
    kunit_expect_eq!(read(bindings::rcxvm_event_RCXVM_EV_FAST), fast0 + 2);
    Ok(())
}

kernel::kunit_suite! {
    name: "rcxvm",
    cases: [
        decide_on_kernel_flags,
        reason_counters,
        reason_counters_match_c,
        fast_path_on_test_mm,
        write_hold_excludes_readers,
    ],
}
