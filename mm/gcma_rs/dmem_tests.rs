// SPDX-License-Identifier: GPL-2.0

//! KUnit suites of DMEM on the areas in service: a reference model with
//! discards by real contiguous allocations, concurrent loads, stores and
//! allocations, and the counters.

use crate::{
    dmem::{FileKey, StoreOutcome, SwapKey},
    dmem_client::{self, dmems, switch, ClientOps, Dmems},
};
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use kernel::{
    bindings, delay,
    kunit::suite::{spawn_workers, TestRng as Rng},
    kunit_expect, kunit_expect_eq,
    mm::{
        buddy::ContigPages,
        page_access::{ExclusivePage, SharedPage},
        PAGE_SIZE,
    },
    prelude::*,
    sync::Arc,
};

/// Words of a page written per `write_from` call.
const CHUNK: usize = 64;

/// The instances, or `ENODEV`.
pub(super) fn instances() -> Result<&'static Dmems> {
    dmems().ok_or_else(|| {
        kunit_expect!(false, "no DMEM instance: boot with gcma=16M");
        ENODEV
    })
}

/// The first area, its base pfn and its size in pages.
fn first_area() -> Result<(*mut bindings::gcma_area, usize, usize)> {
    let area = kernel::mm::gcma::reserved_areas().next().ok_or(ENODEV)?;
    Ok((area.as_ptr(), area.base_pfn(), area.nr_pages()))
}

/// Word `i` of the page contents of version `gen` of key `k`; words 0 and 1
/// hold `k` and `gen`, no word is 0.
fn word(k: u64, gen: u64, i: usize) -> u64 {
    match i {
        0 => k | 1 << 63,
        1 => gen | 1 << 63,
        _ => ((k << 40) ^ (gen << 12) ^ i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
    }
}

/// Writes version `gen` of key `k` into `p`.
pub(super) fn fill(mut p: ExclusivePage<'_>, k: u64, gen: u64) -> Result {
    let mut buf = [0u64; CHUNK];
    for c in 0..PAGE_SIZE / 8 / CHUNK {
        for (j, w) in buf.iter_mut().enumerate() {
            *w = word(k, gen, c * CHUNK + j);
        }
        // SAFETY: any `u64` array is valid as bytes.
        let bytes = unsafe { core::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), CHUNK * 8) };
        p.write_from(c * CHUNK * 8, bytes)?;
    }
    Ok(())
}

/// Reads the key and version in `p` and checks every word against them;
/// `None` if a word does not match.
fn decode(p: &SharedPage<'_>) -> Option<(u64, u64)> {
    let mut buf = [0u8; CHUNK * 8];
    let mut kg = (0, 0);
    for c in 0..PAGE_SIZE / 8 / CHUNK {
        p.read_into(c * CHUNK * 8, &mut buf).ok()?;
        for (j, b) in buf.chunks_exact(8).enumerate() {
            let w = u64::from_ne_bytes(b.try_into().ok()?);
            let i = c * CHUNK + j;
            match i {
                0 => kg.0 = w & !(1 << 63),
                1 => kg.1 = w & !(1 << 63),
                _ => {}
            }
            if w != word(kg.0, kg.1, i) {
                return None;
            }
        }
    }
    Some(kg)
}

/// Whether `p` holds version `gen` of key `k`, every byte of it.
fn holds(p: SharedPage<'_>, k: u64, gen: u64) -> bool {
    decode(&p) == Some((k, gen))
}

/// A file key per test key: eight pages per file.
fn fkey(k: u64) -> FileKey {
    FileKey {
        sb: 7,
        ino: k / 8,
        index: k % 8,
    }
}

/// Allocates through `gcma_alloc()` a range of the first area that covers
/// area page `target`, and returns it (first page, area index, count).
/// Tries the range from the lowest free page; failing that, holds pages one
/// by one (released before returning) until it gets `target`.
fn claim(target: usize) -> Result<(*mut bindings::page, usize, usize)> {
    let (area, base, _) = first_area()?;
    let alloc = |count: usize| {
        // SAFETY: `area` is a reserved area; no_warn, as a try may fail.
        let p = unsafe { bindings::gcma_alloc(area, count as _, 0, true) };
        // SAFETY: `p` is in the memory map when not null.
        (!p.is_null()).then(|| (p, unsafe { bindings::page_to_pfn(p) } as usize - base))
    };
    let release = |p: *mut bindings::page, count: usize| {
        // SAFETY: `p` was allocated above with `count` pages.
        unsafe { bindings::gcma_release(area, p, count as _) }
    };
    let (p, s) = alloc(1).ok_or(ENOMEM)?;
    release(p, 1);
    if s <= target {
        if let Some((p, start)) = alloc(target - s + 1) {
            if start <= target && target < start + (target - s + 1) {
                return Ok((p, start, target - s + 1));
            }
            release(p, target - s + 1);
        }
    }
    let mut held = KVec::new();
    let mut out = Err(ENOMEM);
    while let Some((p, i)) = alloc(1) {
        if i == target {
            out = Ok((p, i, 1));
            break;
        }
        held.push(p, GFP_KERNEL)?;
        if i > target {
            break;
        }
    }
    for p in held {
        release(p, 1);
    }
    out
}

/// Releases a range from [`claim`].
fn unclaim(p: *mut bindings::page, count: usize) -> Result {
    let (area, _, _) = first_area()?;
    // SAFETY: the range was allocated by `claim`.
    kunit_expect!(unsafe { bindings::gcma_release(area, p, count as _) });
    Ok(())
}

/// Random stores, loads, invalidations and discards by contiguous
/// allocations on the file instance agree with a model of the entries,
/// byte for byte.
fn dmem_matches_model() -> Result {
    const KEYS: usize = 48;
    let d = &instances()?.file;
    let mut src = ContigPages::alloc(None, 0, GFP_KERNEL)?;
    let mut dst = ContigPages::alloc(None, 0, GFP_KERNEL)?;
    let mut model: KVec<Option<u64>> = KVec::from_elem(None, KEYS, GFP_KERNEL)?;
    let mut rng = Rng::new(0xd3e3_0001);
    let mut gen = 0;
    let mut discards = 0;
    for step in 0..800 {
        let k = rng.below(KEYS);
        let key = fkey(k as u64);
        match rng.below(20) {
            0..=7 => {
                gen += 1;
                fill(src.page_mut(0).ok_or(EINVAL)?, k as u64, gen)?;
                let out = d.store(&key, src.page(0).ok_or(EINVAL)?);
                kunit_expect_eq!(out, Some(StoreOutcome::Stored));
                model[k] = (out == Some(StoreOutcome::Stored)).then_some(gen);
            }
            8..=14 => {
                dst.page_mut(0).ok_or(EINVAL)?.zero();
                let hit = d.load(&key, dst.page_mut(0).ok_or(EINVAL)?);
                kunit_expect!(
                    hit == model[k].is_some(),
                    "step {} key {}: hit {}",
                    step,
                    k,
                    hit
                );
                if let (true, Some(g)) = (hit, model[k]) {
                    kunit_expect!(
                        holds(dst.page(0).ok_or(EINVAL)?, k as u64, g),
                        "step {}",
                        step
                    );
                    if d.dmem.exclusive_loads() {
                        model[k] = None;
                    }
                }
            }
            15..=16 => {
                kunit_expect_eq!(d.invalidate(&key), model[k].is_some());
                model[k] = None;
            }
            _ => {
                let Some(h) = d.dmem.handle_of(&key) else {
                    continue;
                };
                // Where every entry is, before the allocation.
                let mut at = KVec::with_capacity(KEYS, GFP_KERNEL)?;
                for j in 0..KEYS {
                    at.push(
                        d.dmem.handle_of(&fkey(j as u64)).map(|h| h.page),
                        GFP_KERNEL,
                    )?;
                }
                let (p, start, count) = claim(h.page)?;
                for j in 0..KEYS {
                    if at[j].is_some_and(|pg| pg >= start && pg < start + count) {
                        kunit_expect!(d.dmem.handle_of(&fkey(j as u64)).is_none());
                        model[j] = None;
                        discards += 1;
                    }
                }
                unclaim(p, count)?;
            }
        }
    }
    kunit_expect!(discards > 0);
    d.dmem.clear();
    kunit_expect_eq!(d.dmem.check_quiescent(), Ok(0));
    kunit_expect_eq!(d.dmem.stats().held_pages, 0);
    Ok(())
}

/// State shared by the workers of [`dmem_concurrent`].
struct Shared {
    /// Versions handed out so far.
    gen: AtomicU64,
    /// Failed checks.
    failures: AtomicUsize,
    /// Loads that hit.
    hits: AtomicUsize,
    /// Contiguous allocations made.
    claims: AtomicUsize,
    /// Workers done.
    done: AtomicUsize,
}

/// Keys the workers share.
const SHARED_KEYS: usize = 24;

/// A worker storing and loading the shared keys; every hit must hold a
/// whole version of its key that was stored.
fn copier(s: &Shared, seed: u64) -> Result {
    let d = &instances()?.file;
    let mut src = ContigPages::alloc(None, 0, GFP_KERNEL)?;
    let mut dst = ContigPages::alloc(None, 0, GFP_KERNEL)?;
    let mut rng = Rng::new(seed);
    for _ in 0..1500 {
        let k = rng.below(SHARED_KEYS) as u64;
        if rng.below(3) == 0 {
            let gen = s.gen.fetch_add(1, Ordering::Relaxed) + 1;
            fill(src.page_mut(0).ok_or(EINVAL)?, k, gen)?;
            let _ = d.store(&fkey(k), src.page(0).ok_or(EINVAL)?);
        } else {
            dst.page_mut(0).ok_or(EINVAL)?.zero();
            if d.load(&fkey(k), dst.page_mut(0).ok_or(EINVAL)?) {
                s.hits.fetch_add(1, Ordering::Relaxed);
                let ok = match decode(&dst.page(0).ok_or(EINVAL)?) {
                    Some((got, gen)) => {
                        got == k && gen >= 1 && gen <= s.gen.load(Ordering::Relaxed)
                    }
                    None => false,
                };
                if !ok {
                    s.failures.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        if rng.below(16) == 0 {
            // SAFETY: a worker of `dmem_concurrent`: process context, no
            // atomic section active.
            delay::cond_resched(&unsafe { delay::MaySleep::new() });
        }
    }
    Ok(())
}

/// A worker taking most of the first area by contiguous allocations, which
/// discard the lent pages; the pages it gets, asked zeroed, must read as
/// zeros, i.e. no copy into them outlived the discard.
fn allocator(s: &Shared, seed: u64) -> Result {
    let (area, base, nr) = first_area()?;
    let mut rng = Rng::new(seed);
    // The lowest free page: the area may hold DMA buffers below it.
    // SAFETY: a reserved area.
    let p = unsafe { bindings::gcma_alloc(area, 1, 0, true) };
    if p.is_null() {
        return Err(ENOMEM);
    }
    // SAFETY: `p` is in the memory map.
    let low = unsafe { bindings::page_to_pfn(p) } as usize - base;
    // SAFETY: the page allocated just above.
    unsafe { bindings::gcma_release(area, p, 1) };
    for _ in 0..40 {
        let count = nr - low - 1 - rng.below(64);
        // Zeroed whatever the boot's init_on_alloc: a store that wrote
        // into a page after its discard would show after the zeroing.
        let gfp = bindings::GFP_KERNEL | bindings::__GFP_ZERO | bindings::__GFP_NOWARN;
        // SAFETY: a reserved area; no warning, as the area may be short.
        let p = unsafe { bindings::gcma_alloc_gfp(area, count as _, 0, gfp) };
        if p.is_null() {
            // SAFETY: a worker of `dmem_concurrent`: process context, no
            // atomic section active.
            delay::msleep(&unsafe { delay::MaySleep::new() }, 1);
            continue;
        }
        // The top of the range, where DMEM's pages are.
        for i in count.saturating_sub(64)..count {
            // SAFETY: page `i` of the range just allocated to this worker.
            let page = unsafe { SharedPage::from_raw(core::ptr::NonNull::new_unchecked(p.add(i))) };
            let mut w = [0u8; 8];
            page.read_into(0, &mut w)?;
            let mut last = [0u8; 8];
            page.read_into(PAGE_SIZE - 8, &mut last)?;
            if w != [0; 8] || last != [0; 8] {
                s.failures.fetch_add(1, Ordering::Relaxed);
            }
        }
        s.claims.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as above.
        delay::msleep(&unsafe { delay::MaySleep::new() }, 1);
        // SAFETY: the range allocated above.
        if !unsafe { bindings::gcma_release(area, p, count as _) } {
            s.failures.fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(())
}

/// Loads, stores and contiguous allocations on the same pages from several
/// workers at once: every load that hits returns a whole stored version of
/// its key, every allocation gets zeroed pages.
fn dmem_concurrent() -> Result {
    const COPIERS: usize = 3;
    let d = &instances()?.file;
    let s = Arc::new(
        Shared {
            gen: AtomicU64::new(0),
            failures: AtomicUsize::new(0),
            hits: AtomicUsize::new(0),
            claims: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
        },
        GFP_KERNEL,
    )?;
    // SAFETY: a KUnit case runs in process context, with no atomic section
    // active.
    let ctx = unsafe { delay::MaySleep::new() };
    let workers = spawn_workers(&ctx, COPIERS + 1, |i| {
        let s = s.clone();
        move || {
            let r = if i == COPIERS {
                allocator(&s, 0xa110c)
            } else {
                copier(&s, 0xc0b1_0000 + i as u64)
            };
            if r.is_err() {
                s.failures.fetch_add(1, Ordering::Relaxed);
            }
            s.done.fetch_add(1, Ordering::AcqRel);
        }
    });
    let started = workers.started();
    kunit_expect_eq!(started, COPIERS + 1);
    while s.done.load(Ordering::Acquire) < started {
        delay::msleep(&ctx, 5);
    }
    kunit_expect_eq!(s.failures.load(Ordering::Relaxed), 0);
    kunit_expect!(s.hits.load(Ordering::Relaxed) > 0);
    kunit_expect!(s.claims.load(Ordering::Relaxed) > 0);
    kunit_expect!(d.dmem.stats().discards > 0);
    d.dmem.clear();
    kunit_expect_eq!(d.dmem.check_quiescent(), Ok(0));
    Ok(())
}

/// The counters of the swap client, read as sysfs reads them.
fn swap_stats() -> Result<bindings::gcma_dmem_stats> {
    crate::dmem_client::client_stats(bindings::gcma_dmem_client_GCMA_DMEM_SWAP)
}

/// Every counter moves as the operations imply; the switch refuses stores
/// while off and drops the pages.
fn dmem_counters() -> Result {
    let d = instances()?;
    let sw = &d.swap;
    let skey = |o: u64| SwapKey {
        swap_type: 3,
        offset: o,
    };
    let mut src = ContigPages::alloc(None, 0, GFP_KERNEL)?;
    let mut dst = ContigPages::alloc(None, 0, GFP_KERNEL)?;
    fill(src.page_mut(0).ok_or(EINVAL)?, 5, 5)?;
    let s0 = swap_stats()?;
    for o in 0..3 {
        kunit_expect_eq!(
            sw.store(&skey(o), src.page(0).ok_or(EINVAL)?),
            Some(StoreOutcome::Stored)
        );
    }
    let s1 = swap_stats()?;
    kunit_expect_eq!(s1.stores - s0.stores, 3);
    kunit_expect_eq!(s1.stored_pages, s0.stored_pages + 3);
    // Swap loads are exclusive: the second load of a key misses.
    kunit_expect!(sw.load(&skey(0), dst.page_mut(0).ok_or(EINVAL)?));
    kunit_expect!(holds(dst.page(0).ok_or(EINVAL)?, 5, 5));
    kunit_expect!(!sw.load(&skey(0), dst.page_mut(0).ok_or(EINVAL)?));
    kunit_expect!(!sw.load(&skey(77), dst.page_mut(0).ok_or(EINVAL)?));
    kunit_expect!(sw.invalidate(&skey(1)));
    let h = sw.dmem.handle_of(&skey(2)).ok_or(EINVAL)?;
    let (p, _, count) = claim(h.page)?;
    unclaim(p, count)?;
    let s2 = swap_stats()?;
    kunit_expect_eq!(s2.loads - s1.loads, 1);
    kunit_expect_eq!(s2.misses - s1.misses, 2);
    kunit_expect_eq!(s2.invalidations - s1.invalidations, 1);
    kunit_expect_eq!(s2.discards - s1.discards, 1);
    kunit_expect_eq!(s2.stored_pages, s0.stored_pages);

    // Off: stores refused, entries dropped; on again.
    kunit_expect_eq!(
        sw.store(&skey(9), src.page(0).ok_or(EINVAL)?),
        Some(StoreOutcome::Stored)
    );
    // SAFETY: a KUnit case runs in process context, with no atomic section
    // active.
    let ctx = unsafe { delay::MaySleep::new() };
    let hooks = kernel::c_static_key_false!(gcma_dmem_swap_on);
    kunit_expect!(hooks.is_enabled());
    switch(bindings::gcma_dmem_client_GCMA_DMEM_SWAP, false, &ctx)?;
    kunit_expect!(!hooks.is_enabled());
    kunit_expect_eq!(swap_stats()?.stored_pages, 0);
    kunit_expect_eq!(sw.store(&skey(9), src.page(0).ok_or(EINVAL)?), None);
    kunit_expect!(!sw.load(&skey(9), dst.page_mut(0).ok_or(EINVAL)?));
    kunit_expect_eq!(swap_stats()?.refused_disabled - s2.refused_disabled, 1);
    switch(bindings::gcma_dmem_client_GCMA_DMEM_SWAP, true, &ctx)?;
    kunit_expect!(hooks.is_enabled());
    kunit_expect_eq!(
        crate::dmem_client::gcma_dmem_rs_enabled(bindings::gcma_dmem_client_GCMA_DMEM_SWAP),
        1
    );

    // Fill every page of every area, then evict.
    let total = d.areas.nr_pages();
    let mut o = 100;
    while swap_stats()?.evictions == s2.evictions && o < total as u64 + 200 {
        let _ = sw.store(&skey(o), src.page(0).ok_or(EINVAL)?);
        o += 1;
    }
    let s3 = swap_stats()?;
    kunit_expect!(
        s3.evictions > s2.evictions,
        "no eviction after {} stores",
        o - 100
    );
    kunit_expect_eq!(s3.stored_pages as usize, total);
    kunit_expect_eq!(s3.refused_nospace, s0.refused_nospace);
    sw.dmem.clear();
    kunit_expect_eq!(sw.dmem.check_quiescent(), Ok(0));
    Ok(())
}

/// The entry points the swap and page-cache hooks call: keys built from
/// their parts, loads of the right bytes, range invalidations that drop
/// exactly their range (file ranges, swap ranges across clusters, whole
/// superblocks and swap devices), and the large-folio counter.
fn dmem_hook_entry_points() -> Result {
    let d = instances()?;
    let mut src = ContigPages::alloc(None, 0, GFP_KERNEL)?;
    let mut dst = ContigPages::alloc(None, 0, GFP_KERNEL)?;
    let fk = |sb: u32, ino: u64, index: u64| FileKey { sb, ino, index };
    // Test-only superblock ids: no mounted file system has device 0xfffff.
    let (sb, other_sb) = (0xf_ffff_u32, 0xf_fffe_u32);
    let s0 = d.file.stats();

    // Pages 0..8 of inode 5 and page 0 of inode 6, each page its own bytes.
    for (ino, index) in Iterator::chain((0..8).map(|i| (5, i)), [(6, 0)]) {
        fill(src.page_mut(0).ok_or(EINVAL)?, ino, index)?;
        let stored = dmem_client::store_file(&fk(sb, ino, index), src.page(0).ok_or(EINVAL)?);
        kunit_expect!(stored, "file store of {}:{} refused", ino, index);
    }
    // `other_sb` gets one page of inode 5 too.
    kunit_expect!(dmem_client::store_file(
        &fk(other_sb, 5, 3),
        src.page(0).ok_or(EINVAL)?
    ));
    kunit_expect!(dmem_client::load_file(
        &fk(sb, 5, 3),
        dst.page_mut(0).ok_or(EINVAL)?
    ));
    kunit_expect!(holds(dst.page(0).ok_or(EINVAL)?, 5, 3));
    // File loads drop the entry too (the page is in the page cache now):
    // a second load misses.
    kunit_expect!(!dmem_client::load_file(
        &fk(sb, 5, 3),
        dst.page_mut(0).ok_or(EINVAL)?
    ));

    // Pages 2 and 4 of inode 5 go (3 was loaded); 1, 5 and the other
    // file stay.
    kunit_expect_eq!(dmem_client::invalidate_file(&fk(sb, 5, 2), 4), 2);
    for (index, present) in [(1, true), (2, false), (4, false), (5, true)] {
        let hit = dmem_client::load_file(&fk(sb, 5, index), dst.page_mut(0).ok_or(EINVAL)?);
        kunit_expect!(hit == present, "page {} after invalidating 2..=4", index);
    }
    // To the end of the file, from page 5: 6 and 7 (5 was loaded).
    kunit_expect_eq!(dmem_client::invalidate_file(&fk(sb, 5, 5), u64::MAX), 2);
    // Unmount: inode 5 page 0, inode 6 page 0; not the other sb.
    kunit_expect_eq!(dmem_client::invalidate_sb(sb), 2);
    kunit_expect!(dmem_client::load_file(
        &fk(other_sb, 5, 3),
        dst.page_mut(0).ok_or(EINVAL)?
    ));
    kunit_expect_eq!(dmem_client::invalidate_sb(other_sb), 0);
    let s1 = d.file.stats();
    kunit_expect_eq!(s1.invalidations - s0.invalidations, 6);
    kunit_expect_eq!(s1.stored_pages, s0.stored_pages);

    // Swap: type 5, slots 60..70 straddle a cluster boundary (64), stored
    // and loaded through the C entry points that `cma_test.c` calls too.
    let sp = src.page_mut(0).ok_or(EINVAL)?.as_ptr();
    let dp = dst.page_mut(0).ok_or(EINVAL)?.as_ptr();
    let t = 5;
    for o in 60..70 {
        fill(src.page_mut(0).ok_or(EINVAL)?, 100, o)?;
        // SAFETY: `src` is ours, not written during the call.
        kunit_expect!(unsafe { dmem_client::gcma_dmem_rs_store_swap(t, o as _, sp) });
    }
    // SAFETY: `dst` is ours alone.
    kunit_expect!(unsafe { dmem_client::gcma_dmem_rs_load_swap(t, 61, dp) });
    kunit_expect!(holds(dst.page(0).ok_or(EINVAL)?, 100, 61));
    // Swap loads drop the entry.
    // SAFETY: as above.
    kunit_expect!(!unsafe { dmem_client::gcma_dmem_rs_load_swap(t, 61, dp) });
    // 62..=66 across the boundary: 5 entries.
    kunit_expect_eq!(dmem_client::invalidate_swap(t, 62, 5), 5);
    for (o, present) in [
        (60, true),
        (62, false),
        (64, false),
        (66, false),
        (67, true),
    ] {
        // SAFETY: as above.
        let hit = unsafe { dmem_client::gcma_dmem_rs_load_swap(t, o, dp) };
        kunit_expect!(hit == present, "slot {} after invalidating 62..=66", o);
    }
    // 60 and 67 were loaded (and dropped) above: 63..70 minus them is 68, 69.
    kunit_expect_eq!(dmem_client::invalidate_swap_type(t), 2);

    let large = d.swap.stats().refused_large;
    dmem_client::refused_large(bindings::gcma_dmem_client_GCMA_DMEM_SWAP);
    kunit_expect_eq!(d.swap.stats().refused_large, large + 1);
    kunit_expect_eq!(d.file.dmem.check_quiescent(), Ok(0));
    kunit_expect_eq!(d.swap.dmem.check_quiescent(), Ok(0));
    Ok(())
}

/// A store whose client page is bad memory (`memory_failure()` marked it
/// after reclaim looked, or the copy found it bad) is refused and counted
/// in `poisoned`; the area page it would have filled goes back free, not
/// out of use: the area holds as many pages as before.
#[cfg(CONFIG_MEMORY_FAILURE)]
fn dmem_store_from_poisoned_page() -> Result {
    let d = instances()?;
    let mut src = ContigPages::alloc(None, 0, GFP_KERNEL)?;
    fill(src.page_mut(0).ok_or(EINVAL)?, 7, 0)?;
    let sp = src.page_mut(0).ok_or(EINVAL)?.as_ptr();
    // A test-only superblock id, as in `dmem_hook_entry_points`.
    let key = FileKey {
        sb: 0xf_fffd,
        ino: 7,
        index: 0,
    };
    let (area, _, _) = first_area()?;
    let retired = || crate::entry::__gcma_stats(area).hwpoisoned_pages;
    let r0 = retired();
    let s0 = d.file.stats();
    // SAFETY: `sp` is our page, not mapped to user space; the flag is
    // cleared before the page is freed (the free path keeps poisoned
    // pages out of use).
    unsafe { bindings::SetPageHWPoison(sp) };
    let stored = dmem_client::store_file(&key, src.page(0).ok_or(EINVAL)?);
    // SAFETY: as above.
    unsafe { bindings::ClearPageHWPoison(sp) };
    kunit_expect!(!stored, "a store copied from a poisoned page");
    let s1 = d.file.stats();
    kunit_expect_eq!(s1.poisoned - s0.poisoned, 1);
    kunit_expect_eq!(s1.stored_pages, s0.stored_pages);
    kunit_expect_eq!(s1.held_pages, s0.held_pages);
    kunit_expect_eq!(d.file.dmem.check_quiescent(), Ok(0));
    // The area page was not the bad one: nothing was retired.
    kunit_expect_eq!(retired(), r0);
    Ok(())
}

#[cfg(not(CONFIG_MEMORY_FAILURE))]
fn dmem_store_from_poisoned_page() -> Result {
    Ok(())
}

/// A store allocates its index node in reclaim, with `PF_MEMALLOC` set
/// (kswapd, direct reclaim), where the page allocator opens the memory
/// reserves to allocations.  By the allocator's own rule
/// (`gfp_pfmemalloc_allowed()`), the node's flags must refuse them there,
/// and the same flags without `__GFP_NOMEMALLOC` would take them.
fn dmem_node_flags_refuse_reserves() -> Result {
    let flags = crate::dmem::node_flags();
    // SAFETY: sets PF_MEMALLOC on the current task, which the test
    // thread owns; restored below, before anything else runs here.
    let saved = unsafe { bindings::memalloc_noreclaim_save() };
    // SAFETY: a pure function of its argument and the current task's
    // flags and context.
    let with_flags = unsafe { bindings::gfp_pfmemalloc_allowed(flags.as_raw()) };
    // SAFETY: as above.
    let without = unsafe { bindings::gfp_pfmemalloc_allowed((flags & !__GFP_NOMEMALLOC).as_raw()) };
    // SAFETY: `saved` came from the save above, on this task.
    unsafe { bindings::memalloc_noreclaim_restore(saved) };
    kunit_expect!(!with_flags);
    kunit_expect!(without);
    Ok(())
}

kernel::kunit_suite! {
    name: "gcma_dmem",
    cases: [
        dmem_matches_model,
        #[slow] dmem_concurrent,
        dmem_counters,
        dmem_hook_entry_points,
        dmem_store_from_poisoned_page,
        dmem_node_flags_refuse_reserves
    ],
}
