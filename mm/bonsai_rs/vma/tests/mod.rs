// SPDX-License-Identifier: GPL-2.0

//! The `bonsai_vma` suite: the index of a test address space against its
//! maple tree, after every one of thousands of random `mmap()`,
//! `munmap()`, `mprotect()`, `mremap()` and `madvise()` calls (which
//! split, merge, move, grow and shrink VMAs), with a short node reserve,
//! and with fault-path lookups racing the changes; and the fault path's
//! re-validation of stale candidates from the index, planted on demand.
//!
//! The calls go through the system calls' own entry points, made by the
//! test's kernel thread after adopting the address space (`vma_test.c`),
//! which only x86-64 offers; elsewhere the cases return at once.

use super::{compare_with_maple, slot};
use crate::tests::fault;
use core::{
    ptr,
    sync::atomic::{AtomicBool, AtomicUsize, Ordering},
};
use kernel::{
    bindings,
    delay::{self, MaySleep},
    ffi::c_long,
    kunit::suite::{spawn_workers, TestRng as Rng},
    kunit_expect, kunit_expect_eq,
    mm::{MmWithUser, PAGE_SIZE},
    prelude::*,
    sync::Arc,
    types::ARef,
};

mod stale;
use stale::stale_candidates_revalidated;

// The user ABI's values (include/uapi/asm-generic/mman*.h), stable.
const PROT_READ: usize = 0x1;
const PROT_WRITE: usize = 0x2;
const MAP_PRIVATE: usize = 0x02;
const MAP_FIXED: usize = 0x10;
const MAP_ANONYMOUS: usize = 0x20;
const MREMAP_MAYMOVE: usize = 1;
const MREMAP_FIXED: usize = 2;
const MADV_DONTFORK: usize = 10;
const MADV_DOFORK: usize = 11;

/// The window the cases change: 512 pages from 1 GiB.
const BASE: usize = 0x4000_0000;
const PAGES: usize = 512;

/// The test thread's adoption of an address space, undone on drop.
struct UseMm<'a>(&'a MmWithUser);

impl<'a> UseMm<'a> {
    fn new(mm: &'a MmWithUser) -> Self {
        // SAFETY: a KUnit case runs in a kernel thread without an address
        // space; `mm` is live with a user reference for `'a`.
        unsafe { bindings::bonsai_vma_test_use_mm(mm.as_raw()) };
        Self(mm)
    }

    /// One system call on the adopted address space.
    fn call(&self, call: bindings::bonsai_vma_test_call, args: [usize; 5]) -> c_long {
        let [a, b, c, d, e] = args;
        // SAFETY: the thread has adopted the address space; the calls
        // read no user memory through their arguments.
        unsafe { bindings::bonsai_vma_test_call(call, a as _, b as _, c as _, d as _, e as _) }
    }

    fn mmap(&self, page: usize, pages: usize, prot: usize) -> c_long {
        self.call(
            bindings::bonsai_vma_test_call_BONSAI_VMA_TEST_MMAP,
            [
                BASE + page * PAGE_SIZE,
                pages * PAGE_SIZE,
                prot,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
                usize::MAX, // fd -1
            ],
        )
    }
}

impl Drop for UseMm<'_> {
    fn drop(&mut self) {
        // SAFETY: adopted in `new`.
        unsafe { bindings::bonsai_vma_test_unuse_mm(self.0.as_raw()) };
    }
}

/// Whether this architecture lets the suite make system calls.
fn calls_supported(u: &UseMm<'_>) -> bool {
    let r = u.call(
        bindings::bonsai_vma_test_call_BONSAI_VMA_TEST_MUNMAP,
        [BASE, PAGE_SIZE, 0, 0, 0],
    );
    r != -(bindings::EOPNOTSUPP as c_long)
}

fn counter(ev: bindings::bonsai_vma_event) -> i64 {
    // SAFETY: FFI call without preconditions.
    unsafe { bindings::bonsai_vma_read(ev) as i64 }
}

/// A new test address space with an index (lookups must be enabled).
fn new_mm() -> Result<ARef<MmWithUser>> {
    // SAFETY: FFI call without preconditions.
    if !unsafe { bindings::bonsai_vma_enabled() } {
        pr_err!("bonsai_vma lookups are off: no index to test\n");
        return Err(EINVAL);
    }
    // One VMA in the last page of the window, which the cases leave be.
    let last = BASE + (PAGES - 1) * PAGE_SIZE;
    MmWithUser::new_for_test(last..last + PAGE_SIZE, false)
}

/// Compares the index with the maple tree; logs `what` on a difference.
fn check(mm: &MmWithUser, what: &dyn core::fmt::Debug) -> Result<usize> {
    let guard = mm.mmap_read_lock();
    compare_with_maple(&guard).inspect_err(|_| pr_err!("after {:?}\n", what))
}

/// One random change of the first `pages - 1` pages of the window.
fn random_call(u: &UseMm<'_>, rng: &mut Rng, pages: usize) -> (&'static str, [usize; 5], c_long) {
    let page = rng.below(pages - 1);
    let len = 1 + rng.below((pages - 1 - page).min(16));
    let addr = BASE + page * PAGE_SIZE;
    let prot = if rng.below(2) == 0 {
        PROT_READ
    } else {
        PROT_READ | PROT_WRITE
    };
    let (name, call, args) = match rng.below(10) {
        0..=2 => (
            "mmap",
            bindings::bonsai_vma_test_call_BONSAI_VMA_TEST_MMAP,
            [
                addr,
                len * PAGE_SIZE,
                prot,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
                usize::MAX,
            ],
        ),
        3..=4 => (
            "munmap",
            bindings::bonsai_vma_test_call_BONSAI_VMA_TEST_MUNMAP,
            [addr, len * PAGE_SIZE, 0, 0, 0],
        ),
        5..=6 => (
            "mprotect",
            bindings::bonsai_vma_test_call_BONSAI_VMA_TEST_MPROTECT,
            [addr, len * PAGE_SIZE, prot, 0, 0],
        ),
        7..=8 => {
            // Shrink, grow in place, or move to another place of the
            // window (which replaces what was there).
            let new_len = 1 + rng.below(16);
            let to = rng.below(pages - 1 - new_len.min(pages - 2));
            let fixed = rng.below(2) == 0;
            let flags = if fixed {
                MREMAP_MAYMOVE | MREMAP_FIXED
            } else {
                MREMAP_MAYMOVE
            };
            // Without MREMAP_FIXED a grow that does not fit may move the
            // VMA anywhere; the window's tail page stops most of those,
            // and the comparison covers the whole address space anyway.
            (
                "mremap",
                bindings::bonsai_vma_test_call_BONSAI_VMA_TEST_MREMAP,
                [
                    addr,
                    len * PAGE_SIZE,
                    new_len * PAGE_SIZE,
                    flags,
                    BASE + to * PAGE_SIZE,
                ],
            )
        }
        _ => (
            "madvise",
            bindings::bonsai_vma_test_call_BONSAI_VMA_TEST_MADVISE,
            [
                addr,
                len * PAGE_SIZE,
                if rng.below(2) == 0 {
                    MADV_DONTFORK
                } else {
                    MADV_DOFORK
                },
                0,
                0,
            ],
        ),
    };
    (name, args, u.call(call, args))
}

/// After every one of 3,000 random calls the index holds exactly the
/// maple tree's VMAs, at the same ranges; the index is never dropped.
fn index_follows_random_changes() -> Result {
    // SAFETY: a KUnit case runs in process context, outside atomic sections.
    let ctx = unsafe { MaySleep::new() };
    let mm = new_mm()?;
    let u = UseMm::new(&mm);
    if !calls_supported(&u) {
        return Ok(());
    }
    let dropped = counter(bindings::bonsai_vma_event_BONSAI_VMA_INDEX_DROPPED);
    let stores = counter(bindings::bonsai_vma_event_BONSAI_VMA_STORES);
    let mut rng = Rng::new(0x000b_05a1_0001);
    let mut ok_calls = [0usize; 5];
    let mut most = 0;
    for i in 0..3000 {
        let (name, args, r) = random_call(&u, &mut rng, PAGES);
        if r >= 0 {
            let k = ["mmap", "munmap", "mprotect", "mremap", "madvise"]
                .iter()
                .position(|n| *n == name)
                .unwrap_or(0);
            ok_calls[k] += 1;
        }
        let n = check(&mm, &(i, name, args, r))?;
        most = most.max(n);
        if i % 64 == 0 {
            delay::cond_resched(&ctx);
        }
    }
    pr_info!(
        "random changes: mmap {}, munmap {}, mprotect {}, mremap {}, madvise {} succeeded; up to {} VMAs; {} stores mirrored\n",
        ok_calls[0],
        ok_calls[1],
        ok_calls[2],
        ok_calls[3],
        ok_calls[4],
        most,
        counter(bindings::bonsai_vma_event_BONSAI_VMA_STORES) - stores
    );
    kunit_expect!(
        ok_calls.iter().all(|&n| n > 50),
        "a kind of call rarely succeeded"
    );
    kunit_expect!(most > 20, "the window never held many VMAs");
    kunit_expect_eq!(
        counter(bindings::bonsai_vma_event_BONSAI_VMA_INDEX_DROPPED),
        dropped
    );
    kunit_expect!(!slot(&mm).load(Ordering::Relaxed).is_null(), "index gone");
    Ok(())
}

/// With node allocation failing, the stores soon find the reserve short:
/// the index is dropped (counted), no call fails for it, and the address
/// space goes on with the maple tree alone.
fn short_reserve_drops_index() -> Result {
    let mm = new_mm()?;
    let u = UseMm::new(&mm);
    if !calls_supported(&u) {
        return Ok(());
    }
    let dropped = counter(bindings::bonsai_vma_event_BONSAI_VMA_INDEX_DROPPED);
    fault::fail_after(0);
    // Separate VMAs (a gap between neighbours), each an insert.
    let mut failed = 0;
    for k in 0..(PAGES / 2 - 1) {
        if mm_has_no_index(&mm) {
            break;
        }
        if u.mmap(2 * k, 1, PROT_READ) < 0 {
            failed += 1;
        }
    }
    fault::stop();
    kunit_expect_eq!(failed, 0);
    kunit_expect!(
        mm_has_no_index(&mm),
        "the index survived a reserve that never refilled"
    );
    kunit_expect_eq!(
        counter(bindings::bonsai_vma_event_BONSAI_VMA_INDEX_DROPPED),
        dropped + 1
    );
    // Without index, changes go on and the comparison has nothing to see.
    kunit_expect!(u.mmap(1, 1, PROT_READ | PROT_WRITE) >= 0);
    let guard = mm.mmap_read_lock();
    kunit_expect_eq!(compare_with_maple(&guard), Err(ENOENT));
    Ok(())
}

fn mm_has_no_index(mm: &MmWithUser) -> bool {
    slot(mm).load(Ordering::Relaxed).is_null()
}

/// State of the lookup race.
struct Race {
    mm: ARef<MmWithUser>,
    stop: AtomicBool,
    lookups: AtomicUsize,
    wrong: AtomicUsize,
    unlocked: AtomicUsize,
    /// Lookups of the pages that change, and how many of them locked a
    /// VMA (the others found none, or sent the fault to the mmap lock).
    changing: AtomicUsize,
    changing_locked: AtomicUsize,
}

/// Pages of the race's window that stay mapped, one in every 8, each a
/// read-only VMA of its own between two pages never mapped.
fn stable_page(k: usize) -> usize {
    8 * k
}

/// Fault-path lookups (`lock_vma_under_rcu()`, through the index) of the
/// stable pages always find their own VMA, locked, while the test thread
/// maps, unmaps, protects and moves the pages between them; lookups of
/// those changing pages lock only the VMA the maple tree holds there.
fn lookups_race_changes() -> Result {
    // SAFETY: a KUnit case runs in process context, outside atomic sections.
    let ctx = unsafe { MaySleep::new() };
    let mm = new_mm()?;
    let u = UseMm::new(&mm);
    if !calls_supported(&u) {
        return Ok(());
    }
    let stable = PAGES / 8 - 1;
    for k in 0..stable {
        kunit_expect!(u.mmap(stable_page(k), 1, PROT_READ) >= 0);
    }
    let race = Arc::new(
        Race {
            mm: mm.clone(),
            stop: AtomicBool::new(false),
            lookups: AtomicUsize::new(0),
            wrong: AtomicUsize::new(0),
            unlocked: AtomicUsize::new(0),
            changing: AtomicUsize::new(0),
            changing_locked: AtomicUsize::new(0),
        },
        GFP_KERNEL,
    )?;
    let hits = counter(bindings::bonsai_vma_event_BONSAI_VMA_HITS);
    let retries = counter(bindings::bonsai_vma_event_BONSAI_VMA_RETRIES);
    let workers = spawn_workers(&ctx, 2, |i| {
        let r = race.clone();
        move || race_reader(&r, stable, 0x5ace_0000 + i as u64)
    });
    let mut rng = Rng::new(0x5ace_1000);
    for i in 0..4000 {
        // Pages 8k+2 .. 8k+6 of one gap, changed; 8k+1 and 8k+7 never.
        let k = rng.below(stable);
        let page = stable_page(k) + 2 + rng.below(5);
        let len = 1 + rng.below(stable_page(k) + 7 - page);
        let prot = if rng.below(2) == 0 {
            PROT_READ
        } else {
            PROT_READ | PROT_WRITE
        };
        let addr = BASE + page * PAGE_SIZE;
        match rng.below(4) {
            0 => {
                u.mmap(page, len, prot);
            }
            1 => {
                u.call(
                    bindings::bonsai_vma_test_call_BONSAI_VMA_TEST_MUNMAP,
                    [addr, len * PAGE_SIZE, 0, 0, 0],
                );
            }
            2 => {
                u.call(
                    bindings::bonsai_vma_test_call_BONSAI_VMA_TEST_MPROTECT,
                    [addr, len * PAGE_SIZE, prot, 0, 0],
                );
            }
            _ => {
                // Move one page to another page of the same gap (fails
                // harmlessly when the two overlap).
                let to = stable_page(k) + 2 + rng.below(5);
                u.call(
                    bindings::bonsai_vma_test_call_BONSAI_VMA_TEST_MREMAP,
                    [
                        addr,
                        PAGE_SIZE,
                        PAGE_SIZE,
                        MREMAP_MAYMOVE | MREMAP_FIXED,
                        BASE + to * PAGE_SIZE,
                    ],
                );
            }
        }
        if i % 64 == 0 {
            delay::cond_resched(&ctx);
        }
    }
    race.stop.store(true, Ordering::Release);
    drop(workers);
    let lookups = race.lookups.load(Ordering::Relaxed);
    let changing = race.changing.load(Ordering::Relaxed);
    pr_info!(
        "lookup race: {} lookups of stable pages, {} found nothing locked; {} of changing pages, {} locked a VMA; {} wrong; {} index hits, {} retries\n",
        lookups,
        race.unlocked.load(Ordering::Relaxed),
        changing,
        race.changing_locked.load(Ordering::Relaxed),
        race.wrong.load(Ordering::Relaxed),
        counter(bindings::bonsai_vma_event_BONSAI_VMA_HITS) - hits,
        counter(bindings::bonsai_vma_event_BONSAI_VMA_RETRIES) - retries
    );
    kunit_expect!(lookups > 1000, "few lookups ran");
    kunit_expect!(changing > 1000, "few lookups of changing pages ran");
    kunit_expect!(
        race.changing_locked.load(Ordering::Relaxed) > 0,
        "no lookup of a changing page found its VMA"
    );
    kunit_expect_eq!(race.wrong.load(Ordering::Relaxed), 0);
    kunit_expect_eq!(race.unlocked.load(Ordering::Relaxed), 0);
    kunit_expect!(counter(bindings::bonsai_vma_event_BONSAI_VMA_HITS) - hits >= lookups as i64);
    check(&mm, &"race")?;
    Ok(())
}

/// A reader of the lookup race: pages at random, until told to stop,
/// one in two a stable page, the other a page of the gaps that change.
fn race_reader(r: &Race, stable: usize, seed: u64) {
    let mut rng = Rng::new(seed);
    let mut n = 0usize;
    while !r.stop.load(Ordering::Acquire) {
        let k = rng.below(stable);
        if rng.below(2) == 0 {
            changing_lookup(r, BASE + (stable_page(k) + 2 + rng.below(5)) * PAGE_SIZE);
            continue;
        }
        let start = BASE + stable_page(k) * PAGE_SIZE;
        let addr = start + rng.below(PAGE_SIZE);
        // SAFETY: the address space is live (the race holds a user
        // reference); the call takes its own RCU read lock.
        let vma = unsafe { bindings::lock_vma_under_rcu(r.mm.as_raw(), addr as _) };
        n += 1;
        if vma.is_null() {
            r.unlocked.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        // SAFETY: the VMA is read-locked until `end_read` below.
        let (s, e, m) = unsafe {
            let v = &*vma;
            (
                v.__bindgen_anon_1.__bindgen_anon_1.vm_start,
                v.__bindgen_anon_1.__bindgen_anon_1.vm_end,
                v.vm_mm,
            )
        };
        if s != start || e != start + PAGE_SIZE || m != r.mm.as_raw() {
            r.wrong.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: read-locked by `lock_vma_under_rcu()` above.
        unsafe { bindings::bonsai_vma_test_end_read(vma) };
        if n % 256 == 0 {
            // SAFETY: a workqueue worker in process context.
            delay::cond_resched(&unsafe { MaySleep::new() });
        }
    }
    r.lookups.fetch_add(n, Ordering::Relaxed);
}

/// A lookup of a page that the test thread maps, unmaps, protects and
/// moves meanwhile: it may find no VMA, or send the fault to the mmap
/// lock, but a VMA it locks must cover the address, belong to the address
/// space and be the one the maple tree holds there (a writer must
/// write-lock a VMA before it changes or removes it, so the tree cannot
/// change at the address while the read lock is held).  Here, unlike on
/// the stable pages, the index's candidate may have been removed since it
/// was read: the path of the `retries` counter.
fn changing_lookup(r: &Race, page_start: usize) {
    let addr = page_start + 64;
    let mm = r.mm.as_raw();
    // SAFETY: the address space is live (the race holds a user
    // reference); the call takes its own RCU read lock.
    let vma = unsafe { bindings::lock_vma_under_rcu(mm, addr as _) };
    r.changing.fetch_add(1, Ordering::Relaxed);
    if vma.is_null() {
        return;
    }
    r.changing_locked.fetch_add(1, Ordering::Relaxed);
    // SAFETY: the VMA is read-locked until `end_read` below; the maple
    // tree of a live address space, which `mtree_load()` reads under its
    // own RCU read lock.
    let (s, e, m, in_tree) = unsafe {
        let v = &*vma;
        (
            v.__bindgen_anon_1.__bindgen_anon_1.vm_start as usize,
            v.__bindgen_anon_1.__bindgen_anon_1.vm_end as usize,
            v.vm_mm,
            bindings::mtree_load(ptr::addr_of_mut!((*mm).__bindgen_anon_1.mm_mt), addr as _),
        )
    };
    if !(s..e).contains(&addr) || m != mm || in_tree.cast() != vma {
        pr_err!(
            "changing page {:#x}: locked VMA [{:#x}, {:#x}) of mm {:p}, maple tree {:p}, VMA {:p}\n",
            addr,
            s,
            e,
            m,
            in_tree,
            vma
        );
        r.wrong.fetch_add(1, Ordering::Relaxed);
    }
    // SAFETY: read-locked by `lock_vma_under_rcu()` above.
    unsafe { bindings::bonsai_vma_test_end_read(vma) };
}

/// An index of more than `REAP_MIN_NODES` VMAs, taken out when its
/// address space goes, is freed after the grace period by a reaper on the
/// unbound workqueue, in process context (KASAN and, in the kmemleak
/// scenario, kmemleak check the frees).
fn large_index_reaped_at_exit() -> Result {
    // SAFETY: a KUnit case runs in process context, outside atomic sections.
    let ctx = unsafe { MaySleep::new() };
    let mm = new_mm()?;
    let n = super::reap::REAP_MIN_NODES + 100;
    {
        let u = UseMm::new(&mm);
        if !calls_supported(&u) {
            return Ok(());
        }
        // Above the window, a page between neighbours: nothing merges.
        for k in 0..n {
            if u.mmap(PAGES + 2 * k, 1, PROT_READ) < 0 {
                pr_err!("mmap {} of {} failed\n", k, n);
                return Err(ENOMEM);
            }
        }
    }
    let vmas = check(&mm, &"large index")?;
    kunit_expect!(vmas > n, "{} VMAs for {} maps", vmas, n);
    let gauge = counter(bindings::bonsai_vma_event_BONSAI_VMA_VMAS);
    let reaped = super::reap::REAPED.load(Ordering::Relaxed);
    // The last user goes: exit_mmap() takes the index out.
    drop(mm);
    // The RCU callback has dropped the index and queued its reaper.
    kernel::sync::rcu::barrier(&ctx);
    kunit_expect_eq!(
        counter(bindings::bonsai_vma_event_BONSAI_VMA_VMAS),
        gauge - vmas as i64
    );
    let mut waited = 0;
    while super::reap::REAPED.load(Ordering::Relaxed) == reaped && waited < 200 {
        delay::msleep(&ctx, 10);
        waited += 1;
    }
    kunit_expect!(
        super::reap::REAPED.load(Ordering::Relaxed) > reaped,
        "no reaper ran within 2 s"
    );
    Ok(())
}

kernel::kunit_suite! {
    name: "bonsai_vma",
    cases: [
        #[slow] index_follows_random_changes,
        short_reserve_drops_index,
        large_index_reaped_at_exit,
        stale_candidates_revalidated,
        #[slow] lookups_race_changes,
    ],
}
