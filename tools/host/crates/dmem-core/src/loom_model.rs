// SPDX-License-Identifier: GPL-2.0

//! Loom model of the races between a primary allocation discarding a page
//! and a store or load copying into or out of it, and between an
//! invalidation handing a page back and a load copying out of it.
//!
//! Each model has one area page, two words long, so every interleaving of
//! the copies (one loom step per word) with the other thread's lock
//! sections is explored.  The checks:
//!
//! * when [`crate::dmem::Dmem::discard`] returns (or a page given back is
//!   lent to its next owner), no copy into or out of the page is in flight;
//! * a load never returns the new owner's bytes, and returns the stored
//!   bytes whole when it hits;
//! * the new owner's bytes are never overwritten by a late store.
//!
//! Range discards ([`crate::dmem::Dmem::discard_range`], which GCMA uses)
//! leave the index entries of the pages they discard stale; the models
//! `range_discard_vs_load`, `discard_vs_store_same_key` and
//! `stale_entry_vs_rebind` check that such an entry never hits, whoever
//! removes it (a store binding the page again, a reap, a store of the same
//! key), and that the range discard reports a page free only once no copy
//! into or out of it is in flight.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" cargo test --release -p dmem-core --lib`
//! (`LOOM_MAX_PREEMPTIONS` bounds the preemptions; unbounded by default).
//!
//! Checked by mutation when this model was written: letting
//! `Dmem::discard` return without waiting for the copies in flight fails
//! `discard_vs_load_*` ("discard returned during a copy") and
//! `discard_vs_store` ("store wrote after the discard"); with that check
//! disabled and loads also ignoring a discard seen after their copy, the
//! load models fail with a torn page ("load hit with wrong bytes"); giving
//! a busy page back at once on invalidation, instead of marking it dead for
//! the last copy to give back, fails `invalidate_vs_load`.

use loom::sync::Arc;
use loom::thread;

use crate::dmem::{Dmem, StoreOutcome, SwapKey};
use crate::host::{host_dmem, HostConfig, LoomPlatform, TableSupply};

/// Contents stored by the store.
const OLD: [usize; 2] = [1, 2];
/// Contents written by the page's next owner.
const NEW: [usize; 2] = [7, 8];
/// The only key.
const KEY: SwapKey = SwapKey {
    swap_type: 0,
    offset: 5,
};

/// An instance of one page.
type One = Dmem<HostConfig<SwapKey, LoomPlatform, TableSupply<LoomPlatform>>>;

fn one_page(exclusive: bool) -> Arc<One> {
    Arc::new(host_dmem(1, 1, 2, TableSupply::new(1), exclusive))
}

/// A primary allocation claims page 0: discards it if lent, checks that no
/// copy is in flight, and writes its own bytes.
fn primary_claims(d: &One) {
    let lent = d.supply().claim(0).expect("page 0 claimed twice");
    let held = d.discard(0);
    assert!(lent || !held, "store held a page it was not lent");
    assert_eq!(d.access().in_flight(0), 0, "discard returned during a copy");
    if lent {
        d.supply().finish_discard(0);
    }
    d.access().write(0, &NEW);
}

/// A load checked against the stored and the new owner's bytes.
fn checked_load(d: &One) -> bool {
    let mut buf = [0; 2];
    let hit = d.load(&KEY, &mut buf);
    assert_ne!(buf, NEW, "load copied the new owner's bytes");
    if hit {
        assert_eq!(buf, OLD, "load hit with wrong bytes");
    }
    hit
}

/// Discard of a page while a load copies out of it.
fn discard_vs_load(exclusive: bool) {
    loom::model(move || {
        let d = one_page(exclusive);
        assert_eq!(d.store(&KEY, &OLD), StoreOutcome::Stored);
        let d2 = d.clone();
        let loader = thread::spawn(move || checked_load(&d2));
        primary_claims(&d);
        let hit = loader.join().expect("loader");
        let s = d.stats();
        assert_eq!((s.hits, s.misses), (usize::from(hit), usize::from(!hit)));
        // The entry is gone either way, and its page with it.
        assert!(!checked_load(&d));
        assert_eq!(d.access().read(0), NEW, "new owner's bytes overwritten");
        assert_eq!(d.supply().lent(), 0);
        d.check_quiescent().expect("consistent");
    });
}

#[test]
fn discard_vs_load_keep() {
    discard_vs_load(false);
}

#[test]
fn discard_vs_exclusive_load() {
    discard_vs_load(true);
}

/// Discard of a page while a store fills it.
#[test]
fn discard_vs_store() {
    loom::model(|| {
        let d = one_page(false);
        let d2 = d.clone();
        let storer = thread::spawn(move || d2.store(&KEY, &OLD));
        primary_claims(&d);
        let stored = storer.join().expect("storer");
        // The only page was claimed: whatever the store did, no entry may
        // survive, and the new owner's bytes must be intact.
        assert_eq!(d.access().read(0), NEW, "store wrote after the discard");
        assert!(!checked_load(&d));
        let s = d.stats();
        match stored {
            StoreOutcome::Stored => assert_eq!((s.stores, s.discards), (1, 1)),
            StoreOutcome::Refused(_) => assert_eq!(s.stores, 0),
        }
        assert_eq!(d.supply().lent(), 0);
        d.check_quiescent().expect("consistent");
    });
}

/// Invalidation while a load copies out: the page must not go back to the
/// supply (and on to a new owner) before the copy is done.
#[test]
fn invalidate_vs_load() {
    loom::model(|| {
        let d = one_page(false);
        assert_eq!(d.store(&KEY, &OLD), StoreOutcome::Stored);
        let d2 = d.clone();
        let loader = thread::spawn(move || checked_load(&d2));
        assert!(d.invalidate(&KEY));
        // A primary allocation takes the page if it is free already.
        if let Some(p) = d.supply().claim_free() {
            assert_eq!(d.access().in_flight(p), 0, "page given back during a copy");
            assert!(!d.discard(p));
            d.access().write(p, &NEW);
        }
        loader.join().expect("loader");
        assert!(!checked_load(&d));
        assert_eq!(d.supply().lent(), 0);
        d.check_quiescent().expect("consistent");
    });
}

/// Keys of the two-page models.
const KEY2: SwapKey = SwapKey {
    swap_type: 0,
    offset: 9,
};

/// Contents of a second store.
const OLD2: [usize; 2] = [3, 4];

fn two_pages(exclusive: bool) -> Arc<One> {
    Arc::new(host_dmem(1, 2, 2, TableSupply::new(2), exclusive))
}

/// A primary allocation claims pages 0 and 1 and discards them with one
/// range discard while a load copies out of one of them: the load's page
/// is reported free only after the copy, and neither entry hits later.
#[test]
fn range_discard_vs_load() {
    loom::model(|| {
        let d = two_pages(false);
        assert_eq!(d.store(&KEY, &OLD), StoreOutcome::Stored);
        assert_eq!(d.store(&KEY2, &OLD2), StoreOutcome::Stored);
        let d2 = d.clone();
        let loader = thread::spawn(move || checked_load(&d2));
        let lent = [0, 1].map(|p| d.supply().claim(p).expect("claimed twice"));
        assert_eq!(lent, [true, true]);
        let mut reported = 0u64;
        let held = d.discard_range(&(), 0, 2, |base, mask| {
            assert_eq!(base, 0);
            for p in 0..2 {
                if mask & (1 << p) != 0 {
                    assert_eq!(d.access().in_flight(p), 0, "page reported during a copy");
                }
            }
            reported |= mask;
        });
        assert_eq!((held, reported), (2, 0b11));
        for p in 0..2 {
            assert_eq!(d.access().in_flight(p), 0, "discard returned during a copy");
            d.supply().finish_discard(p);
            d.access().write(p, &NEW);
        }
        loader.join().expect("loader");
        assert!(!checked_load(&d));
        let mut buf = [0; 2];
        assert!(!d.load(&KEY2, &mut buf));
        assert_eq!(d.stale_entries(), 2);
        d.check_quiescent().expect("consistent");
        d.reap(usize::MAX);
        assert_eq!(d.check_quiescent(), Ok(0));
    });
}

/// A store replacing a key while the key's page is discarded: the stale
/// entry the discard leaves must never shadow the new one, nor be loaded.
#[test]
fn discard_vs_store_same_key() {
    loom::model(|| {
        let d = two_pages(false);
        assert_eq!(d.store(&KEY, &OLD), StoreOutcome::Stored);
        let page = d.handle_of(&KEY).expect("stored").page;
        let d2 = d.clone();
        let storer = thread::spawn(move || d2.store(&KEY, &OLD2));
        assert_eq!(d.supply().claim(page), Some(true));
        d.discard(page);
        assert_eq!(
            d.access().in_flight(page),
            0,
            "discard returned during a copy"
        );
        d.supply().finish_discard(page);
        d.access().write(page, &NEW);
        let stored = storer.join().expect("storer");
        let mut buf = [0; 2];
        let hit = d.load(&KEY, &mut buf);
        assert_ne!(buf, NEW, "load copied the new owner's bytes");
        if hit {
            assert_eq!(buf, OLD2, "load hit with old or torn bytes");
        }
        assert_eq!(d.access().read(page), NEW, "new owner's bytes overwritten");
        let live = d.check_quiescent().expect("consistent");
        assert_eq!(live, usize::from(hit));
        assert!(hit || stored != StoreOutcome::Stored || d.stats().discards == 1);
        d.reap(usize::MAX);
        d.check_quiescent().expect("consistent after reaping");
    });
}

/// The primary owner gives a discarded page back, and a store of another
/// key binds it again (removing the stale entry) while a reap and a load
/// of the discarded key run: the discarded key never hits, and the new
/// entry survives its page's stale entry being removed.
#[test]
fn stale_entry_vs_rebind() {
    loom::model(|| {
        let d = one_page(false);
        assert_eq!(d.store(&KEY, &OLD), StoreOutcome::Stored);
        assert_eq!(d.supply().claim(0), Some(true));
        assert!(d.discard(0));
        d.supply().finish_discard(0);
        d.supply().release(0);
        let d2 = d.clone();
        let storer = thread::spawn(move || d2.store(&KEY2, &OLD2));
        d.reap(1);
        let mut buf = [0; 2];
        assert!(!d.load(&KEY, &mut buf), "stale entry hit");
        assert_eq!(storer.join().expect("storer"), StoreOutcome::Stored);
        assert!(d.load(&KEY2, &mut buf));
        assert_eq!(buf, OLD2);
        assert_eq!(d.stale_entries(), 0);
        assert_eq!(d.check_quiescent(), Ok(1));
    });
}
