// SPDX-License-Identifier: GPL-2.0

//! KUnit suites of pages found bad on an area's allocation path: pages
//! hardware-poisoned while an allocation discards its lent pages, copies
//! out of DMEM that failed, and lent pages the page allocator's free steps
//! find in a bad state.  Each case undoes the poison, the bad state and
//! the retirement it caused, so later cases find the area whole.
//!
//! Its two suites share the fixtures that poison, retire and restore
//! pages, so they stay in one file, a little over the 700 lines the
//! project aims for.

use crate::{
    dmem::FileKey,
    dmem_client,
    dmem_tests::{fill, instances},
    Area,
};
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use kernel::{
    bindings, delay,
    kunit::suite::{spawn_workers, TestRng as Rng},
    kunit_expect, kunit_expect_eq,
    mm::{buddy::ContigPages, frames::PageFate, gcma::LendTag},
    prelude::*,
    str::CStr,
    sync::Arc,
};

/// The allocator state of the first area (the KUnit kernel boots with
/// `gcma=16M`).
fn area() -> Result<&'static Area> {
    let area = crate::areas_in_service().next();
    kunit_expect!(area.is_some(), "no GCMA area: boot with gcma=16M");
    area.ok_or(ENODEV)
}

/// The counters of `area`.
fn stats(area: &Area) -> bindings::gcma_stats {
    area.stats()
}

/// Marks page `i` of `area` hardware-poisoned as `memory_failure()`
/// marks a page it cannot take: the flag, and the system's count of
/// poisoned pages (which makes GCMA look at page flags at all).
fn poison(area: &Area, i: usize) {
    let page = area.frames.page_ptr(i);
    // SAFETY: a page of the area, in the memory map; the test clears the
    // flag and the count again (`unpoison`).
    unsafe {
        bindings::SetPageHWPoison(page);
        bindings::num_poisoned_pages_inc((area.base_pfn + i) as _);
    }
}

/// Undoes [`poison`].
fn unpoison(area: &Area, i: usize) {
    let page = area.frames.page_ptr(i);
    // SAFETY: as in `poison`, whose marks this drops.
    unsafe {
        bindings::ClearPageHWPoison(page);
        bindings::num_poisoned_pages_sub((area.base_pfn + i) as _, 1);
    }
}

/// Sets (`on`) or clears `PG_active` on page `i` of `area`: a flag no
/// free or lent page may have, so the free steps find the page in a bad
/// state (and report it).
fn set_bad(area: &Area, i: usize, on: bool) {
    let page = area.frames.page_ptr(i);
    // SAFETY: the page is in the memory map; its flags word is changed
    // with atomic operations only, as C's page flag helpers do.
    let flags = unsafe { AtomicUsize::from_ptr(core::ptr::addr_of_mut!((*page).flags)) };
    let bit = 1usize << bindings::pageflags_PG_active;
    if on {
        flags.fetch_or(bit, Ordering::Relaxed);
    } else {
        flags.fetch_and(!bit, Ordering::Relaxed);
    }
}

/// Stores pages `0..n` of inode 9 of the test-only superblock `sb` in the
/// file instance: each is lent an area page.  Returns the key of page 0.
fn store_some(sb: u32, n: usize) -> Result<FileKey> {
    let mut src = ContigPages::alloc(None, 0, GFP_KERNEL)?;
    let key = FileKey {
        sb,
        ino: 9,
        index: 0,
    };
    for i in 0..n {
        fill(src.page_mut(0).ok_or(EINVAL)?, 9, i as u64)?;
        let page = FileKey {
            index: i as u64,
            ..key
        };
        let stored = dmem_client::store_file(&page, src.page(0).ok_or(EINVAL)?);
        kunit_expect!(stored, "store {} refused", i);
    }
    Ok(key)
}

/// The pages of `area` lent now.
fn lent_pages(area: &Area) -> Result<KVec<usize>> {
    let map = area.map.lock();
    let mut v = KVec::new();
    for i in (0..map.nr_pages()).filter(|&i| map.is_lent(i)) {
        v.push(i, GFP_ATOMIC)?;
    }
    Ok(v)
}

/// A lent page that an allocation took as it is, and that was poisoned
/// before the allocation completed (the discard may sleep while copies
/// drain, and `memory_failure()` can only mark a page without a reference
/// that is not a buddy page), is not handed to the caller: the run is
/// given up, its handed pages lose their reference and get the free steps,
/// the poisoned page is retired (counted once), and the whole area can no
/// longer be had while smaller ranges still can.
fn poisoned_during_discard() -> Result {
    // SAFETY: a KUnit case runs in its own kthread, in process context,
    // with no lock held and outside any RCU read-side section.
    let ctx = unsafe { delay::MaySleep::new() };
    let d = instances()?;
    let area = area()?;
    let nr = area.frames.nr_pages();
    let sb = 0xf_fffc;
    let gfp = bindings::GFP_KERNEL | bindings::__GFP_NOWARN;
    store_some(sb, 8)?;
    let s0 = stats(area);
    kunit_expect!(s0.secondary_lent_pages >= 8);

    // The whole area: every lent page is in the range.
    let (mut run, lent) = area.claim(&ctx, nr, 0, gfp).inspect_err(|_| {
        kunit_expect!(false, "the whole area is not free");
    })?;
    kunit_expect!(lent >= 8);
    area.discard(&ctx, &mut run);
    kunit_expect!(run.handed() > 0, "no lent page was taken as it is");
    let end = run.start() + run.count();
    let victim = (run.start()..end).find(|&i| area.frames.is_referenced_head(i));
    kunit_expect!(victim.is_some());
    let victim = victim.unwrap_or(end - 1);
    // Poisoned after the discard took it, before the run completes.
    poison(area, victim);
    let got = {
        let _tag = LendTag::enter();
        area.complete(run)
    };
    if let Some(p) = got {
        let bad = (0..nr).filter(|&i| area.is_hwpoisoned(i)).count();
        kunit_expect_eq!(bad, 0);
        // SAFETY: `p` is the allocation just made, of `nr` pages.
        unsafe { bindings::gcma_release(area.c.as_ptr(), p, nr as _) };
    }
    kunit_expect!(got.is_none(), "a range with a poisoned page was allocated");
    let s1 = stats(area);
    kunit_expect_eq!(s1.hwpoisoned_pages, s0.hwpoisoned_pages + 1);
    kunit_expect_eq!(s1.bad_pages, s0.bad_pages);
    kunit_expect_eq!(s1.primary_used_pages, s0.primary_used_pages);
    kunit_expect_eq!(s1.secondary_lent_pages, 0);

    // The poisoned page is never allocated again; the others are.
    {
        let _tag = LendTag::enter();
        kunit_expect_eq!(area.alloc(&ctx, nr, 0, gfp).err(), Some(ENOMEM));
        match area.alloc(&ctx, 64, 0, gfp) {
            Ok((p, _)) => {
                // SAFETY: the allocation just made, of 64 pages.
                unsafe { bindings::gcma_release(area.c.as_ptr(), p, 64) };
            }
            Err(e) => kunit_expect!(false, "64 pages: {:?}", e),
        }
    }
    kunit_expect_eq!(stats(area).hwpoisoned_pages, s1.hwpoisoned_pages);

    unpoison(area, victim);
    kunit_expect!(area.unretire(victim, PageFate::Poisoned));
    let s2 = stats(area);
    kunit_expect_eq!(s2.hwpoisoned_pages, s0.hwpoisoned_pages);
    kunit_expect_eq!(s2.primary_used_pages, s0.primary_used_pages);
    dmem_client::invalidate_sb(sb);
    kunit_expect_eq!(d.file.dmem.check_quiescent(), Ok(0));
    Ok(())
}

/// A copy out of a held page that failed (a machine check the copy
/// survived, `memory_failure()` only queued) retires the page when DMEM
/// gives it back, and when an allocation discards it, though no flag
/// says it is bad: counted in `hwpoisoned_pages`.  A machine check cannot
/// be raised in the test, so the copy's record of it is made directly.
fn failed_copy_retired() -> Result {
    // SAFETY: a KUnit case runs in its own kthread, in process context,
    // with no lock held and outside any RCU read-side section.
    let ctx = unsafe { delay::MaySleep::new() };
    let d = instances()?;
    let area = area()?;
    let nr = area.frames.nr_pages();
    let sb = 0xf_fffb;
    let gfp = bindings::GFP_KERNEL | bindings::__GFP_NOWARN;
    let s0 = stats(area);

    // Discarded by an allocation of the whole area: given up, retired.
    store_some(sb, 2)?;
    let first = lent_pages(area)?;
    kunit_expect_eq!(first.len(), 2);
    for &i in first.iter() {
        area.note_failed_copy(i);
    }
    let (mut run, n) = area.claim(&ctx, nr, 0, gfp)?;
    kunit_expect_eq!(n, first.len());
    area.discard(&ctx, &mut run);
    let got = {
        let _tag = LendTag::enter();
        area.complete(run)
    };
    if let Some(p) = got {
        // SAFETY: the allocation just made, of `nr` pages.
        unsafe { bindings::gcma_release(area.c.as_ptr(), p, nr as _) };
    }
    kunit_expect!(got.is_none(), "pages whose copy failed were allocated");
    let s1 = stats(area);
    kunit_expect_eq!(
        s1.hwpoisoned_pages,
        s0.hwpoisoned_pages + first.len() as u64
    );
    kunit_expect_eq!(s1.primary_used_pages, s0.primary_used_pages);

    // Given back by DMEM: the entry goes, the page is retired.
    let key = store_some(sb, 1)?;
    let second = lent_pages(area)?;
    kunit_expect_eq!(second.len(), 1);
    for &i in second.iter() {
        area.note_failed_copy(i);
    }
    let dropped = dmem_client::invalidate_file(&key, 0);
    kunit_expect_eq!(dropped, 1);
    let s2 = stats(area);
    kunit_expect_eq!(
        s2.hwpoisoned_pages,
        s1.hwpoisoned_pages + second.len() as u64
    );
    kunit_expect_eq!(s2.secondary_lent_pages, 0);

    for &i in Iterator::chain(first.iter(), second.iter()) {
        kunit_expect!(area.unretire(i, PageFate::Poisoned));
    }
    kunit_expect_eq!(stats(area).hwpoisoned_pages, s0.hwpoisoned_pages);
    dmem_client::invalidate_sb(sb);
    kunit_expect_eq!(d.file.dmem.check_quiescent(), Ok(0));
    Ok(())
}

/// A page retired as found in a bad state is counted in `bad_pages`, not
/// in `hwpoisoned_pages`, and never allocated again.  (A page in a real
/// bad state makes the free steps report `Bad page state`, a splat the
/// KUnit tier fails on; the state is not made here.)
fn bad_page_counted() -> Result {
    // SAFETY: a KUnit case runs in its own kthread, in process context,
    // with no lock held and outside any RCU read-side section.
    let ctx = unsafe { delay::MaySleep::new() };
    let area = area()?;
    let nr = area.frames.nr_pages();
    let gfp = bindings::GFP_KERNEL | bindings::__GFP_NOWARN;
    let s0 = stats(area);
    let victim = nr / 2;
    kunit_expect!(!area.map.lock().is_primary(victim));
    area.retire(victim, PageFate::Bad);
    let s1 = stats(area);
    kunit_expect_eq!(s1.bad_pages, s0.bad_pages + 1);
    kunit_expect_eq!(s1.hwpoisoned_pages, s0.hwpoisoned_pages);
    kunit_expect_eq!(s1.primary_used_pages, s0.primary_used_pages);
    {
        let _tag = LendTag::enter();
        kunit_expect_eq!(area.alloc(&ctx, nr, 0, gfp).err(), Some(ENOMEM));
    }
    kunit_expect!(area.unretire(victim, PageFate::Bad));
    let s2 = stats(area);
    kunit_expect_eq!(s2.bad_pages, s0.bad_pages);
    kunit_expect_eq!(s2.primary_used_pages, s0.primary_used_pages);
    Ok(())
}

/// State shared by the workers of [`poison_races_allocations`].
struct Race {
    area: &'static Area,
    /// A bit per page of the area, set once the page was marked poisoned
    /// (release, after the flag).
    marked: KVec<AtomicU64>,
    /// Allocations that held a page marked before they started.
    failures: AtomicUsize,
    /// Allocations made.
    allocs: AtomicUsize,
    /// Discards of the file instance before the race.
    discards: usize,
    /// Set when the allocators are done: the storer stops.
    stop: AtomicBool,
    /// Workers done.
    done: AtomicUsize,
}

/// Superblock id of the race's DMEM entries.
const RACE_SB: u32 = 0xf_fff9;
/// Pages the poisoner marks.
const POISONS: usize = 12;
/// Allocations per allocator.
const RACE_ROUNDS: usize = 60;
/// Allocators.
const RACE_ALLOCATORS: usize = 2;

impl Race {
    /// A snapshot of the marked pages, a word at a time.
    fn snapshot(&self) -> Result<KVec<u64>> {
        let mut v = KVec::with_capacity(self.marked.len(), GFP_KERNEL)?;
        for w in self.marked.iter() {
            v.push(w.load(Ordering::Acquire), GFP_KERNEL)?;
        }
        Ok(v)
    }
}

/// A worker keeping pages lent: stores pages of `RACE_SB` until told to
/// stop, so that the allocations discard some.
fn race_storer(r: &Race, seed: u64) -> Result {
    let mut src = ContigPages::alloc(None, 0, GFP_KERNEL)?;
    let key = |index| FileKey {
        sb: RACE_SB,
        ino: 1,
        index,
    };
    let mut rng = Rng::new(seed);
    // SAFETY: a worker of the case: process context, no atomic section.
    let ctx = unsafe { delay::MaySleep::new() };
    while !r.stop.load(Ordering::Acquire) {
        let i = rng.below(512);
        fill(src.page_mut(0).ok_or(EINVAL)?, 1, i as u64)?;
        let _ = dmem_client::store_file(&key(i as u64), src.page(0).ok_or(EINVAL)?);
        if rng.below(8) == 0 {
            delay::cond_resched(&ctx);
        }
    }
    Ok(())
}

/// A worker allocating ranges through `gcma_alloc_gfp()`: with `wide`,
/// all of the area above `low` but the 64 to 128 pages at its bottom that
/// the other allocator may hold (so over the lent pages at the top, which
/// it discards), else a few pages.  No range may hold a page marked
/// poisoned before the allocation started.
fn race_allocator(r: &Race, seed: u64, low: usize, wide: bool) -> Result {
    let area = r.area;
    let nr = area.frames.nr_pages();
    let mut rng = Rng::new(seed);
    // SAFETY: a worker of the case: process context, no atomic section.
    let ctx = unsafe { delay::MaySleep::new() };
    let gfp = bindings::GFP_KERNEL | bindings::__GFP_NOWARN;
    for _ in 0..RACE_ROUNDS {
        let count = if wide {
            nr - low - 64 - POISONS - rng.below(64)
        } else {
            1 + rng.below(64)
        };
        let before = r.snapshot()?;
        // SAFETY: a reserved area; no warning, as the area may be short.
        let p = unsafe { bindings::gcma_alloc_gfp(area.c.as_ptr(), count as _, 0, gfp) };
        if p.is_null() {
            delay::msleep(&ctx, 1);
            continue;
        }
        // SAFETY: `p` is in the memory map.
        let first = unsafe { bindings::page_to_pfn(p) } as usize - area.base_pfn;
        let held = (first..first + count)
            .filter(|&i| before.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0))
            .count();
        if held > 0 {
            r.failures.fetch_add(1, Ordering::Relaxed);
        }
        r.allocs.fetch_add(1, Ordering::Relaxed);
        delay::cond_resched(&ctx);
        // SAFETY: the range allocated above.
        unsafe { bindings::gcma_release(area.c.as_ptr(), p, count as _) };
    }
    Ok(())
}

/// Marks [`POISONS`] pages of the area above `low` poisoned, each free or
/// lent when chosen, while the allocators and the storer run.
fn race_poisoner(r: &Race, seed: u64, low: usize) -> Result {
    let area = r.area;
    let nr = area.frames.nr_pages();
    let mut rng = Rng::new(seed);
    // SAFETY: a worker of the case: process context, no atomic section.
    let ctx = unsafe { delay::MaySleep::new() };
    // Only once a wide allocation discarded lent pages (at most 2 s): a
    // page retired in the middle of the area keeps them from fitting.
    let d = instances()?;
    for _ in 0..2000 {
        if d.file.dmem.stats().discards > r.discards {
            break;
        }
        delay::msleep(&ctx, 1);
    }
    let mut n = 0;
    while n < POISONS {
        delay::msleep(&ctx, 2);
        let i = low + rng.below(nr - low);
        if r.marked[i / 64].load(Ordering::Relaxed) & (1 << (i % 64)) != 0 {
            continue;
        }
        // Free or lent now: an allocation may be claiming it meanwhile,
        // the race the case is about.
        if area.map.lock().is_primary(i) {
            continue;
        }
        poison(area, i);
        r.marked[i / 64].fetch_or(1 << (i % 64), Ordering::Release);
        n += 1;
    }
    Ok(())
}

/// Pages poisoned at random (free or lent ones, as `memory_failure()` can
/// only mark them) while allocations of most of the area discard lent
/// pages, small ones come and go below them, and a storer keeps lending:
/// no allocation holds a page marked before it started; afterwards every
/// marked page the area took back is retired, and once the case undoes
/// them the area is whole, nothing abandoned.
fn poison_races_allocations() -> Result {
    let d = instances()?;
    let area = area()?;
    let nr = area.frames.nr_pages();
    let s0 = stats(area);
    let abandoned = kernel::mm::frames::abandoned_runs();
    let discards = d.file.dmem.stats().discards;
    // The lowest free page: the area may hold DMA buffers below it.
    let low = {
        let mut map = area.map.lock();
        let out = map.alloc_primary(1, 0)?;
        let _ = map.release_primary(out.start, 1);
        out.start
    };
    let mut marked = KVec::with_capacity(nr.div_ceil(64), GFP_KERNEL)?;
    for _ in 0..nr.div_ceil(64) {
        marked.push(AtomicU64::new(0), GFP_KERNEL)?;
    }
    let r = Arc::new(
        Race {
            area,
            marked,
            failures: AtomicUsize::new(0),
            allocs: AtomicUsize::new(0),
            discards,
            stop: AtomicBool::new(false),
            done: AtomicUsize::new(0),
        },
        GFP_KERNEL,
    )?;
    // SAFETY: a KUnit case runs in process context, with no atomic section
    // active.
    let ctx = unsafe { delay::MaySleep::new() };
    let workers = spawn_workers(&ctx, RACE_ALLOCATORS + 2, |i| {
        let r = r.clone();
        move || {
            let res = match i {
                0 => race_storer(&r, 0x5704e),
                1 => race_poisoner(&r, 0xb0150, low),
                _ => race_allocator(&r, 0xa110c + i as u64, low, i == 2),
            };
            if res.is_err() {
                r.failures.fetch_add(1, Ordering::Relaxed);
            }
            r.done.fetch_add(1, Ordering::AcqRel);
        }
    });
    let started = workers.started();
    kunit_expect_eq!(started, RACE_ALLOCATORS + 2);
    // The storer runs until the others are done.
    while r.done.load(Ordering::Acquire) + 1 < started {
        delay::msleep(&ctx, 5);
    }
    r.stop.store(true, Ordering::Release);
    workers.join();
    kunit_expect_eq!(r.failures.load(Ordering::Relaxed), 0);
    kunit_expect!(r.allocs.load(Ordering::Relaxed) > 0);
    kunit_expect!(d.file.dmem.stats().discards > discards);

    // Back from DMEM: every page lent in the race returns, a marked one
    // retired on the way.
    dmem_client::invalidate_sb(RACE_SB);
    let s1 = stats(area);
    kunit_expect_eq!(s1.secondary_lent_pages, s0.secondary_lent_pages);
    kunit_expect!(s1.hwpoisoned_pages - s0.hwpoisoned_pages <= POISONS as u64);
    pr_info!(
        "poison race: {} allocations, {} of {} marked pages retired\n",
        r.allocs.load(Ordering::Relaxed),
        s1.hwpoisoned_pages - s0.hwpoisoned_pages,
        POISONS
    );
    let mut undone = 0;
    for i in 0..nr {
        if r.marked[i / 64].load(Ordering::Relaxed) & (1 << (i % 64)) == 0 {
            continue;
        }
        unpoison(area, i);
        undone += usize::from(area.unretire(i, PageFate::Poisoned));
    }
    kunit_expect_eq!(undone as u64, s1.hwpoisoned_pages - s0.hwpoisoned_pages);
    let s2 = stats(area);
    kunit_expect_eq!(s2.hwpoisoned_pages, s0.hwpoisoned_pages);
    kunit_expect_eq!(s2.primary_used_pages, s0.primary_used_pages);
    kunit_expect_eq!(kernel::mm::frames::abandoned_runs(), abandoned);
    kunit_expect_eq!(d.file.dmem.check_quiescent(), Ok(0));
    Ok(())
}

kernel::kunit_suite! {
    name: "gcma_poison",
    cases: [
        poisoned_during_discard,
        failed_copy_retired,
        bad_page_counted,
        poison_races_allocations
    ],
}

/// The suite of the cases that make pages bad, which run only when asked
/// for (see [`bad_page::bad_pages_asked`]).
mod bad_page {
    use super::*;

    /// Whether the kernel command line asks for the cases that make pages bad
    /// (`gcma_test.bad_pages`): the free steps report each such page with
    /// `Bad page state` and a stack trace, which the KUnit tier counts as a
    /// failure.  The scenario `gcma_bad_page` asks for them and expects the
    /// reports.
    fn bad_pages_asked() -> bool {
        // SAFETY: `saved_command_line` is set before the initcalls run, is
        // never changed afterwards, and is NULL or a NUL-terminated string.
        let line = unsafe { bindings::saved_command_line };
        if line.is_null() {
            return false;
        }
        // SAFETY: as above.
        let line = unsafe { CStr::from_char_ptr(line) };
        let want = b"gcma_test.bad_pages";
        line.as_bytes().windows(want.len()).any(|w| w == want)
    }

    /// Allocates the whole of `area`, which holds `lent` lent pages, one
    /// of which the free steps find in a bad state, and checks that the run
    /// is given up: that page counted bad, nothing allocated.
    fn whole_area_refused(area: &Area, lent: usize) -> Result {
        // SAFETY: called by a KUnit case only, which runs in its own
        // kthread, in process context, with no lock held and outside any
        // RCU read-side section.
        let ctx = unsafe { delay::MaySleep::new() };
        let nr = area.frames.nr_pages();
        let gfp = bindings::GFP_KERNEL | bindings::__GFP_NOWARN;
        let (mut run, n) = area.claim(&ctx, nr, 0, gfp)?;
        kunit_expect_eq!(n, lent);
        area.discard(&ctx, &mut run);
        kunit_expect_eq!(run.bad(), 1);
        let got = {
            let _tag = LendTag::enter();
            area.complete(run)
        };
        if let Some(p) = got {
            // SAFETY: the allocation just made, of `nr` pages.
            unsafe { bindings::gcma_release(area.c.as_ptr(), p, nr as _) };
        }
        kunit_expect!(got.is_none(), "a range with a bad page was allocated");
        Ok(())
    }

    /// Checks that `after` counts one bad page more than `before`, and no
    /// poisoned, allocated or lent page more.
    fn expect_one_more_bad(before: &bindings::gcma_stats, after: &bindings::gcma_stats) {
        kunit_expect_eq!(after.bad_pages, before.bad_pages + 1);
        kunit_expect_eq!(after.hwpoisoned_pages, before.hwpoisoned_pages);
        kunit_expect_eq!(after.primary_used_pages, before.primary_used_pages);
        kunit_expect_eq!(after.secondary_lent_pages, 0);
    }

    /// Lent pages the page allocator's free steps find in a bad state are
    /// retired and counted in `bad_pages`: one an allocation discards (the
    /// range is given up and no page of it handed out), and one DMEM gives
    /// back (not kept lent).  Runs only when the command line asks for it
    /// (see [`bad_pages_asked`]), and passes otherwise.
    fn bad_lent_pages() -> Result {
        if !bad_pages_asked() {
            return Ok(());
        }
        let d = instances()?;
        let area = area()?;
        let sb = 0xf_fffa;
        let s0 = stats(area);

        // Discarded by an allocation of the whole area.
        store_some(sb, 2)?;
        let first = lent_pages(area)?;
        kunit_expect_eq!(first.len(), 2);
        let Some(&victim) = first.first() else {
            return Err(EINVAL);
        };
        set_bad(area, victim, true);
        whole_area_refused(area, first.len())?;
        let s1 = stats(area);
        expect_one_more_bad(&s0, &s1);

        // Given back by DMEM: retired, not kept lent.
        let key = store_some(sb, 1)?;
        let second = lent_pages(area)?;
        kunit_expect_eq!(second.len(), 1);
        let Some(&given) = second.first() else {
            return Err(EINVAL);
        };
        set_bad(area, given, true);
        let dropped = dmem_client::invalidate_file(&key, 0);
        kunit_expect_eq!(dropped, 1);
        let s2 = stats(area);
        kunit_expect_eq!(s2.bad_pages, s1.bad_pages + 1);
        kunit_expect_eq!(s2.secondary_lent_pages, 0);
        kunit_expect_eq!(s2.primary_used_pages, s0.primary_used_pages);

        for i in [victim, given] {
            set_bad(area, i, false);
            kunit_expect!(area.unretire(i, PageFate::Bad), "page {} not retired", i);
        }
        let s3 = stats(area);
        kunit_expect_eq!(s3.bad_pages, s0.bad_pages);
        kunit_expect_eq!(s3.primary_used_pages, s0.primary_used_pages);
        dmem_client::invalidate_sb(sb);
        kunit_expect_eq!(d.file.dmem.check_quiescent(), Ok(0));
        Ok(())
    }

    /// Adds `delta` to the reference count of page `i` of `area` with one
    /// atomic operation, as a stray holder's `get_page()`/`put_page()`
    /// would, without the free path: the test's own reference, on a page
    /// no one frees meanwhile.
    fn stray_ref(area: &Area, i: usize, delta: i32) -> i32 {
        let page = area.frames.page_ptr(i);
        // SAFETY: the page is in the memory map; its count is changed with
        // atomic operations only, as C's page_ref helpers do.
        let count =
            unsafe { AtomicI32::from_ptr(core::ptr::addr_of_mut!((*page)._refcount.counter)) };
        count.fetch_add(delta, Ordering::Relaxed) + delta
    }

    /// A value no page's private field holds by chance.
    const SENTINEL: usize = 0x5e47_11e1;

    /// A lent page someone else still holds a reference to (as a stray
    /// `get_page()` of a filesystem would), which an allocation discards,
    /// is found bad by the free steps, kept out of the allocation and
    /// retired as bad; its reference and its private field, which may be
    /// the holder's, are left as they were through the run's give-up.
    /// Runs only when the command line asks for it (see
    /// [`bad_pages_asked`]), and passes otherwise.
    fn bad_page_private_kept() -> Result {
        if !bad_pages_asked() {
            return Ok(());
        }
        let d = instances()?;
        let area = area()?;
        let sb = 0xf_fff8;
        let s0 = stats(area);

        // Two lent pages: one taken as it is (handed off), one the stray
        // holder references and keeps its value in.
        store_some(sb, 2)?;
        let lent = lent_pages(area)?;
        kunit_expect_eq!(lent.len(), 2);
        let Some(&victim) = lent.first() else {
            return Err(EINVAL);
        };
        let page = area.frames.page_ptr(victim);
        kunit_expect_eq!(stray_ref(area, victim, 1), 1);
        // SAFETY: a page of the area; the test stands for the holder of
        // its stray reference, whose field this is.
        unsafe { bindings::rsmm_set_page_private(page, SENTINEL as _) };

        whole_area_refused(area, lent.len())?;

        // SAFETY: as above; read only.
        let private = unsafe { bindings::rsmm_page_private(page) } as usize;
        kunit_expect!(
            private == SENTINEL,
            "the holder's private field changed: {:#x}",
            private
        );
        // The holder's reference is still there: only ours is taken off.
        kunit_expect_eq!(stray_ref(area, victim, -1), 0);
        expect_one_more_bad(&s0, &stats(area));

        // SAFETY: as above; the holder is gone.
        unsafe { bindings::rsmm_set_page_private(page, 0) };
        kunit_expect!(
            area.unretire(victim, PageFate::Bad),
            "page {} not retired",
            victim
        );
        let s2 = stats(area);
        kunit_expect_eq!(s2.bad_pages, s0.bad_pages);
        kunit_expect_eq!(s2.primary_used_pages, s0.primary_used_pages);
        dmem_client::invalidate_sb(sb);
        kunit_expect_eq!(d.file.dmem.check_quiescent(), Ok(0));
        Ok(())
    }

    kernel::kunit_suite! {
        name: "gcma_bad_page",
        cases: [bad_lent_pages, bad_page_private_kept],
    }
}
