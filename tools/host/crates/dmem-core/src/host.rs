// SPDX-License-Identifier: GPL-2.0

//! Host implementations of the traits of [`crate::dmem`].

use core::marker::PhantomData;
use std::collections::{BTreeMap, BTreeSet};

use kernel::alloc::Flags;
use kernel::prelude::*;

use crate::area_map::{bitmap_words, summary_words, AreaMap};
use crate::dmem::{
    BucketLock, BucketMap, Config, Dmem, FillCopy, Handle, IdlePage, Key, Link, Lock, LockClass,
    PageAccess, PageSupply, Platform, ReadCopy, Slot,
};

#[cfg(loom)]
use loom::sync::atomic::{AtomicUsize, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicUsize, Ordering};

/// Locks are `std` mutexes; waiting yields the thread.
pub(crate) struct StdPlatform;

impl<T> Lock<T> for std::sync::Mutex<T> {
    fn new(value: T, _class: LockClass) -> Result<Self> {
        Ok(std::sync::Mutex::new(value))
    }

    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Platform for StdPlatform {
    type Lock<T: Send> = std::sync::Mutex<T>;
    // Any thread of a host test may block.
    type SleepCtx = ();

    fn relax(_ctx: &(), _round: u32) {
        std::thread::yield_now();
    }
}

/// Locks are `loom` mutexes; waiting yields to loom's scheduler.
#[cfg(loom)]
pub(crate) struct LoomPlatform;

#[cfg(loom)]
impl<T> Lock<T> for loom::sync::Mutex<T> {
    fn new(value: T, _class: LockClass) -> Result<Self> {
        Ok(loom::sync::Mutex::new(value))
    }

    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

#[cfg(loom)]
impl Platform for LoomPlatform {
    type Lock<T: Send> = loom::sync::Mutex<T>;
    type SleepCtx = ();

    fn relax(_ctx: &(), _round: u32) {
        loom::thread::yield_now();
    }
}

/// A bucket on a `BTreeMap`.  Each entry's handle lives in a `KBox`, the
/// node [`BucketMap::reserve`] allocates, so the shim's fault injection
/// and allocation accounting see one allocation per entry.
pub(crate) struct HostMap<K>(BTreeMap<K, KBox<Handle>>);

impl<K: Ord + Clone + Send> BucketMap<K> for HostMap<K> {
    type Node = KBox<Handle>;

    fn new() -> Self {
        HostMap(BTreeMap::new())
    }

    fn reserve(flags: Flags) -> Result<KBox<Handle>> {
        Ok(KBox::new(Handle { page: 0, seq: 0 }, flags)?)
    }

    fn insert(&mut self, mut node: KBox<Handle>, key: K, handle: Handle) -> Option<Handle> {
        *node = handle;
        self.0.insert(key, node).map(|old| *old)
    }

    fn get(&self, key: &K) -> Option<Handle> {
        self.0.get(key).map(|h| **h)
    }

    fn remove(&mut self, key: &K) -> Option<Handle> {
        self.0.remove(key).map(|h| *h)
    }

    fn pop_range(&mut self, lo: &K, hi: &K) -> Option<(K, Handle)> {
        if lo > hi {
            return None;
        }
        let key = self.0.range(lo..=hi).next()?.0.clone();
        let h = self.0.remove(&key)?;
        Some((key, *h))
    }

    fn pop_first(&mut self) -> Option<(K, Handle)> {
        self.0.pop_first().map(|(k, h)| (k, *h))
    }

    fn for_each(&self, mut f: impl FnMut(&K, Handle)) {
        for (k, h) in &self.0 {
            f(k, **h);
        }
    }
}

/// Ownership of one page of a [`TableSupply`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct PageUse {
    /// Lent to the store (the secondary bit).
    lent: bool,
    /// Claimed by a simulated primary allocation (the primary bit).
    claimed: bool,
}

/// State of a [`TableSupply`].
struct Table {
    /// Ownership of each page.
    pages: Vec<PageUse>,
    /// Pages neither lent nor claimed.
    free: BTreeSet<usize>,
}

/// A page supply over a plain table, with simulated primary allocations
/// that claim single pages.  It panics when the store breaks the supply
/// contract (gives back a page it does not hold).
pub(crate) struct TableSupply<P: Platform>(P::Lock<Table>);

impl<P: Platform> TableSupply<P> {
    /// A supply of `n` free pages.
    pub(crate) fn new(n: usize) -> Self {
        let table = Table {
            pages: vec![PageUse::default(); n],
            free: (0..n).collect(),
        };
        match Lock::new(table, LockClass::Bucket) {
            Ok(l) => TableSupply(l),
            Err(_) => unreachable!("host locks do not fail"),
        }
    }

    /// Claims page `page` for a primary allocation; returns whether it was
    /// lent (the store must then discard it), or `None` if already claimed.
    pub(crate) fn claim(&self, page: usize) -> Option<bool> {
        self.0.with(|t| {
            let u = t.pages.get_mut(page)?;
            if u.claimed {
                return None;
            }
            u.claimed = true;
            t.free.remove(&page);
            Some(u.lent)
        })
    }

    /// Claims the lowest page neither lent nor claimed, if any.
    pub(crate) fn claim_free(&self) -> Option<usize> {
        self.0.with(|t| {
            let page = t.free.pop_first()?;
            if let Some(u) = t.pages.get_mut(page) {
                u.claimed = true;
            }
            Some(page)
        })
    }

    /// Ends the discard of claimed page `page`: it is no longer lent.
    pub(crate) fn finish_discard(&self, page: usize) {
        self.0.with(|t| {
            if let Some(u) = t.pages.get_mut(page) {
                assert!(u.claimed, "finish_discard of unclaimed page {page}");
                u.lent = false;
            }
        });
    }

    /// Releases claimed page `page`.
    pub(crate) fn release(&self, page: usize) {
        self.0.with(|t| {
            if let Some(u) = t.pages.get_mut(page) {
                assert!(u.claimed && !u.lent, "bad release of page {page}");
                u.claimed = false;
                t.free.insert(page);
            }
        });
    }

    /// Pages lent to the store, including claimed ones awaiting discard.
    pub(crate) fn lent(&self) -> usize {
        self.0.with(|t| t.pages.iter().filter(|u| u.lent).count())
    }

    /// Claimed pages.
    pub(crate) fn claimed(&self) -> Vec<usize> {
        self.0
            .with(|t| (0..t.pages.len()).filter(|&p| t.pages[p].claimed).collect())
    }
}

impl<P: Platform> PageSupply for TableSupply<P> {
    fn lend(&self) -> Option<usize> {
        self.0.with(|t| {
            // The highest free page, as GCMA lends them.
            let page = t.free.pop_last()?;
            if let Some(u) = t.pages.get_mut(page) {
                u.lent = true;
            }
            Some(page)
        })
    }

    fn give_back(&self, page: IdlePage) {
        let page = page.page();
        self.0.with(|t| {
            let u = t.pages.get_mut(page).expect("page out of range");
            assert!(u.lent, "page {page} given back but not lent");
            u.lent = false;
            if !u.claimed {
                t.free.insert(page);
            }
        });
    }
}

/// A page supply over the GCMA page-state map, as in the kernel.
pub(crate) struct AreaSupply<P: Platform>(pub(crate) P::Lock<AreaMap<Vec<usize>>>);

impl<P: Platform> AreaSupply<P> {
    /// A supply over a new area of `n` pages.
    pub(crate) fn new(n: usize) -> Self {
        let words = bitmap_words(n);
        let summary = summary_words(n).expect("area too large");
        let map = AreaMap::new(
            n,
            vec![0; words],
            vec![0; words],
            vec![0; words],
            vec![0; summary],
        )
        .expect("bad area");
        match Lock::new(map, LockClass::Bucket) {
            Ok(l) => AreaSupply(l),
            Err(_) => unreachable!("host locks do not fail"),
        }
    }
}

impl<P: Platform> PageSupply for AreaSupply<P> {
    fn lend(&self) -> Option<usize> {
        self.0.with(|m| m.lend_secondary().ok())
    }

    fn give_back(&self, page: IdlePage) {
        let page = page.page();
        self.0
            .with(|m| m.return_secondary(page))
            .expect("page given back but not lent");
    }
}

/// Page memory: each page a few atomic words (relaxed: only the store's
/// locks order the copies), with a count per page of copies in flight, so
/// tests can check that none is when a discard returns.
pub(crate) struct HostPages {
    /// The words of each page.
    words: Vec<Vec<AtomicUsize>>,
    /// Copies in flight, per page.
    in_flight: Vec<AtomicUsize>,
    /// Pages whose memory is bad (hardware poison, simulated): copies into
    /// or out of them fail.
    bad: Vec<core::sync::atomic::AtomicBool>,
}

impl HostPages {
    /// `n` pages of `w` words, zeroed.
    pub(crate) fn new(n: usize, w: usize) -> Self {
        HostPages {
            words: (0..n)
                .map(|_| (0..w).map(|_| AtomicUsize::new(0)).collect())
                .collect(),
            in_flight: (0..n).map(|_| AtomicUsize::new(0)).collect(),
            bad: (0..n)
                .map(|_| core::sync::atomic::AtomicBool::new(false))
                .collect(),
        }
    }

    /// Marks `page` bad memory, as `memory_failure()` does.
    pub(crate) fn poison(&self, page: usize) {
        self.bad[page].store(true, Ordering::SeqCst);
    }

    /// Whether `page` is bad memory.
    pub(crate) fn is_bad(&self, page: usize) -> bool {
        self.bad[page].load(Ordering::SeqCst)
    }

    /// Copies in flight into or out of `page`.
    pub(crate) fn in_flight(&self, page: usize) -> usize {
        self.in_flight[page].load(Ordering::SeqCst)
    }

    /// Writes `data` into `page`, as the page's new owner does.
    pub(crate) fn write(&self, page: usize, data: &[usize]) {
        for (w, &d) in self.words[page].iter().zip(data) {
            w.store(d, Ordering::Relaxed);
        }
    }

    /// Reads `page`.
    pub(crate) fn read(&self, page: usize) -> Vec<usize> {
        self.words[page]
            .iter()
            .map(|w| w.load(Ordering::Relaxed))
            .collect()
    }
}

impl PageAccess for HostPages {
    type Src<'a> = &'a [usize];
    type Dst<'a> = &'a mut [usize];

    fn copy_in(&self, to: &FillCopy, src: &[usize]) -> bool {
        let page = to.page();
        if self.is_bad(page) {
            return false;
        }
        self.in_flight[page].fetch_add(1, Ordering::SeqCst);
        self.write(page, src);
        self.in_flight[page].fetch_sub(1, Ordering::SeqCst);
        true
    }

    fn copy_out(&self, from: &ReadCopy, dst: &mut [usize]) -> bool {
        let page = from.page();
        if self.is_bad(page) {
            return false;
        }
        self.in_flight[page].fetch_add(1, Ordering::SeqCst);
        for (d, w) in dst.iter_mut().zip(&self.words[page]) {
            *d = w.load(Ordering::Relaxed);
        }
        self.in_flight[page].fetch_sub(1, Ordering::SeqCst);
        true
    }
}

/// Host configuration: keys `K`, platform `P`, supply `S`.
pub(crate) struct HostConfig<K, P, S>(PhantomData<(K, P, S)>);

impl<K: Key, P: Platform, S: PageSupply> Config for HostConfig<K, P, S> {
    type Platform = P;
    type Key = K;
    type Map = HostMap<K>;
    type Buckets = Vec<BucketLock<Self>>;
    type Slots = Vec<Slot<K>>;
    type Links = Vec<Link>;
    type Supply = S;
    type Access = HostPages;
}

/// A host instance of `buckets` buckets over `pages` pages of `words` words
/// from `supply`.
pub(crate) fn host_dmem<K: Key, P: Platform, S: PageSupply>(
    buckets: usize,
    pages: usize,
    words: usize,
    supply: S,
    exclusive_loads: bool,
) -> Dmem<HostConfig<K, P, S>> {
    let b = (0..buckets)
        .map(|_| Dmem::<HostConfig<K, P, S>>::new_bucket().expect("bucket"))
        .collect();
    let slots = (0..pages).map(|_| Slot::new()).collect();
    let links = (0..pages).map(|_| Link::new()).collect();
    Dmem::new(
        b,
        slots,
        links,
        supply,
        HostPages::new(pages, words),
        exclusive_loads,
    )
    .expect("dmem")
}
