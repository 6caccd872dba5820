// SPDX-License-Identifier: GPL-2.0

//! KUnit suite of guaranteed THP: the decision, the VMA facts it reads,
//! and folios from the THP area the KUnit tier reserves (`gcma=8M:thp`,
//! see tools/kunit/run.sh).

use crate::thp::{self, decide, FaultVma, Mode, Plan, Request};
use kernel::{bindings, kunit_expect, mm::MmWithUser, prelude::*};

const ELIGIBLE: FaultVma = FaultVma {
    anonymous: true,
    thp_allowed: true,
    pmd_fits: true,
};

/// Every mode, with and without an area, for eligible and ineligible
/// faults and for collapses.
fn thp_decide_table() -> Result {
    let ineligible = [
        FaultVma {
            anonymous: false,
            ..ELIGIBLE
        },
        FaultVma {
            thp_allowed: false,
            ..ELIGIBLE
        },
        FaultVma {
            pmd_fits: false,
            ..ELIGIBLE
        },
    ];
    let with_area = |mode| match mode {
        Mode::Never => Plan::Buddy,
        Mode::Fallback => Plan::BuddyThenGcma,
        Mode::Always => Plan::GcmaThenBuddy,
    };
    for mode in [Mode::Never, Mode::Fallback, Mode::Always] {
        for req in [Request::Fault(ELIGIBLE), Request::Collapse] {
            let got = decide(mode, true, req);
            kunit_expect!(got == with_area(mode), "{:?} {:?}: {:?}", mode, req, got);
            let got = decide(mode, false, req);
            kunit_expect!(
                got == Plan::Buddy,
                "{:?} {:?} without area: {:?}",
                mode,
                req,
                got
            );
        }
        for vma in ineligible {
            let got = decide(mode, true, Request::Fault(vma));
            kunit_expect!(got == Plan::Buddy, "{:?} {:?}: {:?}", mode, vma, got);
        }
    }
    Ok(())
}

/// The facts read from real VMAs (a test address space, never run).
fn thp_fault_vma_facts() -> Result {
    const BASE: usize = 0x4000_0000;
    const PMD: usize = 2 << 20;

    // Two whole PMD blocks, MADV_HUGEPAGE.
    let mm = MmWithUser::new_for_test(BASE..BASE + 2 * PMD, true)?;
    {
        let guard = mm.mmap_read_lock();
        let vma = guard.vma_lookup(BASE + 5).ok_or(ENOENT)?;
        for haddr in [BASE, BASE + PMD] {
            let facts = FaultVma::of(vma, haddr);
            kunit_expect!(facts == ELIGIBLE, "{:#x}: {:?}", haddr, facts);
        }
        // The block past the end is not inside the VMA.
        let facts = FaultVma::of(vma, BASE + 2 * PMD);
        kunit_expect!(!facts.pmd_fits, "{:?}", facts);
    }
    drop(mm);

    // One and a half blocks: the second does not fit, whatever the mode.
    let mm = MmWithUser::new_for_test(BASE..BASE + PMD + PMD / 2, true)?;
    let guard = mm.mmap_read_lock();
    let vma = guard.vma_lookup(BASE + PMD).ok_or(ENOENT)?;
    kunit_expect!(FaultVma::of(vma, BASE).pmd_fits, "first block fits");
    let facts = FaultVma::of(vma, BASE + PMD);
    kunit_expect!(facts.anonymous && !facts.pmd_fits, "{:?}", facts);
    let plan = decide(Mode::Always, true, Request::Fault(facts));
    kunit_expect!(plan == Plan::Buddy, "{:?}", plan);
    Ok(())
}

/// Which check a THP folio fails: 0 if it is what a THP fault or
/// collapse expects (a large rmappable folio of PMD order, naturally
/// aligned, with one reference), else the number of the first check that
/// failed.
///
/// # Safety
///
/// `folio` must be a folio the caller holds a reference of.
unsafe fn thp_folio_check(folio: *mut bindings::folio) -> u32 {
    let head = folio.cast::<bindings::page>();
    // SAFETY: the folio is alive (the caller's reference); its head page's
    // order, flags, count and pfn may be read.
    let (order, rmappable, refs, pfn) = unsafe {
        (
            bindings::rsmm_compound_order(head),
            bindings::rsmm_folio_test_large_rmappable(folio),
            bindings::rsmm_page_ref_count(head),
            bindings::page_to_pfn(head) as usize,
        )
    };
    if order != kernel::mm::PMD_ORDER {
        1
    } else if !rmappable {
        2
    } else if refs != 1 {
        3
    } else if pfn % kernel::mm::pages_in_order(kernel::mm::PMD_ORDER) != 0 {
        4
    } else {
        0
    }
}

/// Whether `folio` lies in a THP area.
///
/// # Safety
///
/// As for [`thp_folio_check`].
unsafe fn in_thp_area(folio: *mut bindings::folio) -> bool {
    // SAFETY: the folio is alive (the caller's reference).
    let pfn = unsafe { bindings::page_to_pfn(folio.cast()) } as usize;
    crate::area_of_pfn(pfn).is_some_and(|a| a.is_thp())
}

fn thp_stats() -> thp::Stats {
    thp::stats()
}

/// Used pages of the THP areas, after the blocks freed meanwhile are
/// taken back.
fn thp_used_pages() -> u64 {
    thp::areas()
        .map(|a| crate::entry::__gcma_stats(a.c.as_ptr()).primary_used_pages)
        .sum()
}

/// In mode `always`, collapses take folios from the THP areas until they
/// are full, then fall back to the buddy allocator; every page comes back
/// when the folios are put (one with interrupts off).
fn thp_alloc_until_full() -> Result {
    let areas = thp::areas().count();
    kunit_expect!(
        areas > 0,
        "no THP area: boot the KUnit tier with gcma=8M:thp"
    );
    if areas == 0 {
        return Err(ENODEV);
    }
    let capacity: u64 = thp::areas()
        .map(|a| a.page_counts().0 as u64 >> kernel::mm::PMD_ORDER)
        .sum();
    // SAFETY: a KUnit case runs in its own kthread, in process context,
    // with no lock held.
    let ctx = unsafe { kernel::delay::MaySleep::new() };
    let saved = thp::mode();
    thp::set_mode(Mode::Always, &ctx)?;
    let (used0, st0) = (thp_used_pages(), thp_stats());

    let mut folios = KVec::new();
    let mut from_buddy = None;
    for _ in 0..capacity + 1 {
        // SAFETY: FFI call of the test helper; may sleep, as here.
        let folio = unsafe { bindings::gcma_thp_test_collapse_alloc() };
        if folio.is_null() {
            break;
        }
        // SAFETY: `folio` is a live folio we hold the only reference of.
        let (check, in_area) = unsafe { (thp_folio_check(folio), in_thp_area(folio)) };
        kunit_expect!(check == 0, "folio check {} failed", check);
        if !in_area {
            from_buddy = Some(folio);
            break;
        }
        folios.push(folio, GFP_KERNEL)?;
    }
    let st = thp_stats();
    kunit_expect!(
        folios.len() as u64 == capacity,
        "{} GCMA folios from areas of {} blocks",
        folios.len(),
        capacity
    );
    kunit_expect!(
        st.collapse_alloc - st0.collapse_alloc == capacity,
        "collapse_alloc grew by {}",
        st.collapse_alloc - st0.collapse_alloc
    );
    kunit_expect!(
        st.collapse_fail - st0.collapse_fail == 1,
        "collapse_fail grew by {} (the full area is one failure)",
        st.collapse_fail - st0.collapse_fail
    );
    kunit_expect!(
        thp_used_pages() == used0 + (capacity << kernel::mm::PMD_ORDER),
        "used pages {} (before {})",
        thp_used_pages(),
        used0
    );
    // The full area is not an error: the buddy allocator served (the test
    // machine is not fragmented).
    kunit_expect!(
        from_buddy.is_some(),
        "no buddy fallback once the area was full"
    );
    for (i, folio) in Iterator::chain(folios.into_iter(), from_buddy).enumerate() {
        // SAFETY: our reference, dropped once.
        unsafe { bindings::gcma_thp_test_put(folio, i == 0) };
    }
    kunit_expect!(
        thp_used_pages() == used0,
        "used pages {} after the puts (before {})",
        thp_used_pages(),
        used0
    );
    thp::set_mode(saved, &ctx)?;
    Ok(())
}

kernel::kunit_suite! {
    name: "gcma_thp",
    cases: [thp_decide_table, thp_fault_vma_facts, thp_alloc_until_full],
}
