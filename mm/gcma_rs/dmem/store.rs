// SPDX-License-Identifier: GPL-2.0

//! The DMEM instance, [`Dmem`]: the index of hash buckets in front of the
//! page table, its event counters, and the operations of a client (store,
//! load, invalidations, discard, reaping of stale index entries) with the
//! lock order and the copies between them.
//!
//! The rest of the module holds what this file is built from: the
//! environment (`env.rs`), keys (`key.rs`) and the page table
//! (`pages.rs`).

use super::{
    env::{node_flags, FillCopy, ReadCopy},
    pages::{Pages, State, NIL},
    BucketLock, BucketMap, Config, Handle, Key, Link, Lock, LockClass, PageAccess, Platform,
    Refusal, Slot, Stats, StoreOutcome, DISCARD_CHUNK, REAP_PER_STORE,
};
use core::marker::PhantomData;
use core::sync::atomic::{AtomicUsize, Ordering};
use kernel::prelude::*;

/// Event counters; relaxed atomics, as they order nothing.
#[derive(Default)]
struct Counters {
    /// See [`Stats::stores`].
    stores: AtomicUsize,
    /// See [`Stats::hits`].
    hits: AtomicUsize,
    /// See [`Stats::misses`].
    misses: AtomicUsize,
    /// See [`Stats::invalidations`].
    invalidations: AtomicUsize,
    /// See [`Stats::discards`].
    discards: AtomicUsize,
    /// See [`Stats::evictions`].
    evictions: AtomicUsize,
    /// Refused stores, indexed by [`Counters::refusal_index`] (those
    /// refused with [`Refusal::Poisoned`] are counted in `poisoned`).
    refused: [AtomicUsize; 4],
    /// See [`Stats::poisoned`].
    poisoned: AtomicUsize,
}

impl Counters {
    /// Adds `n` to `c`.
    fn add(c: &AtomicUsize, n: usize) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// Reads `c`.
    fn get(c: &AtomicUsize) -> usize {
        c.load(Ordering::Relaxed)
    }

    /// Index of `r` in `refused`.
    fn refusal_index(r: Refusal) -> usize {
        match r {
            Refusal::NoMemory => 0,
            Refusal::NoSpace => 1,
            Refusal::Discarded => 2,
            Refusal::Superseded => 3,
            // Out of `refused`: counted in `poisoned`.
            Refusal::Poisoned => 4,
        }
    }
}

/// The page lock of an instance of configuration `C`.
type PagesLock<C> = <<C as Config>::Platform as Platform>::Lock<
    Pages<<C as Config>::Key, <C as Config>::Slots, <C as Config>::Links>,
>;

/// Source type of the copier of `C`, borrowed for `'a`.
type Src<'a, C> = <<C as Config>::Access as PageAccess>::Src<'a>;

/// Destination type of the copier of `C`, borrowed for `'a`.
type Dst<'a, C> = <<C as Config>::Access as PageAccess>::Dst<'a>;

/// A DMEM instance: the store of one client.
///
/// # Invariants
///
/// `buckets` is not empty; `supply` lends only pages below the number of
/// slots (a page it lends otherwise is refused and never given back);
/// there are as many links as slots.
pub(crate) struct Dmem<C: Config> {
    /// The hash table of the index.
    buckets: C::Buckets,
    /// The page table and LRU list.
    pages: PagesLock<C>,
    /// Page supply.
    supply: C::Supply,
    /// Page copier.
    access: C::Access,
    /// Whether a load drops the entry it hits (swap: the page is in memory
    /// again and its swap slot will be rewritten or freed).
    exclusive_loads: bool,
    /// The length of the stale list as of the last page-lock section that
    /// changed it, so that [`Dmem::reap`] need not take the lock to find
    /// the list empty.
    stale_hint: AtomicUsize,
    /// Event counters.
    counters: Counters,
}

impl<C: Config> Dmem<C> {
    /// Creates an empty bucket, for the bucket array given to
    /// [`Dmem::new`].
    pub(crate) fn new_bucket() -> Result<BucketLock<C>> {
        Lock::new(C::Map::new(), LockClass::Bucket)
    }

    /// Creates an instance over `buckets` (from [`Dmem::new_bucket`]),
    /// `slots` and `links` (one of each per page `supply` may lend; they
    /// are reset to [`State::Free`]).  With `exclusive_loads`, a load that
    /// hits drops the entry.
    ///
    /// Fails with `EINVAL` if `buckets` is empty or a bucket is not, or if
    /// `slots` and `links` differ in length, and with the lock
    /// constructor's error.
    pub(crate) fn new(
        buckets: C::Buckets,
        mut slots: C::Slots,
        mut links: C::Links,
        supply: C::Supply,
        access: C::Access,
        exclusive_loads: bool,
    ) -> Result<Self> {
        if buckets.is_empty() || slots.len() != links.len() {
            return Err(EINVAL);
        }
        let mut nonempty = false;
        for b in buckets.iter() {
            b.with(|m| m.for_each(|_, _| nonempty = true));
        }
        if nonempty {
            return Err(EINVAL);
        }
        for s in slots.iter_mut() {
            *s = Slot::new();
        }
        for l in links.iter_mut() {
            *l = Link::new();
        }
        let pages = Pages {
            slots,
            links,
            head: NIL,
            tail: NIL,
            bound: 0,
            stale_head: NIL,
            stale: 0,
            held: 0,
            next_seq: 1,
            _key: PhantomData,
        };
        Ok(Dmem {
            buckets,
            pages: Lock::new(pages, LockClass::Pages)?,
            supply,
            access,
            exclusive_loads,
            stale_hint: AtomicUsize::new(0),
            counters: Counters::default(),
        })
    }

    /// The page supply.
    // Used only by the host tests.
    #[cfg(test)]
    pub(crate) fn supply(&self) -> &C::Supply {
        &self.supply
    }

    /// The page copier.
    // Used only by the host tests.
    #[cfg(test)]
    pub(crate) fn access(&self) -> &C::Access {
        &self.access
    }

    /// Whether a load that hits drops its entry.
    // Used only by the KUnit suite.
    #[cfg(CONFIG_GCMA_KUNIT_TEST)]
    pub(crate) fn exclusive_loads(&self) -> bool {
        self.exclusive_loads
    }

    /// The bucket of `key`.
    fn bucket(&self, key: &C::Key) -> &BucketLock<C> {
        // `buckets` is not empty (type invariant), so the index is in range
        // and the length is not zero.
        let n = self.buckets.len() as u64;
        &self.buckets[(key.bucket_hash() % n) as usize]
    }

    /// Removes the index entry `key -> h` if still there.
    fn forget(&self, key: &C::Key, h: Handle) {
        self.bucket(key).with(|m| m.remove_if(key, h));
    }

    /// Counts and returns a refusal: the store's own, or one its caller
    /// decided before calling it (a client whose range fence stands), so
    /// that the counters tell every refused store.
    pub(crate) fn refuse(&self, r: Refusal) -> StoreOutcome {
        if r == Refusal::Poisoned {
            Counters::add(&self.counters.poisoned, 1);
        } else if let Some(c) = self.counters.refused.get(Counters::refusal_index(r)) {
            Counters::add(c, 1);
        }
        StoreOutcome::Refused(r)
    }

    /// Removes the entry of `key`, if any; returns whether there was one.
    fn drop_key(&self, key: &C::Key) -> bool {
        match self.bucket(key).with(|m| m.remove(key)) {
            Some(h) => self.pages.with(|t| t.unbind_release(h, &self.supply)),
            None => false,
        }
    }

    /// Stores a copy of `src` under `key`, replacing the key's entry.
    ///
    /// Never sleeps.  When the page cannot be stored, the key's old entry is
    /// dropped all the same (it is stale) and the reason is returned.
    pub(crate) fn store(&self, key: &C::Key, src: Src<'_, C>) -> StoreOutcome {
        let Ok(node) = C::Map::reserve(node_flags()) else {
            self.drop_key(key);
            return self.refuse(Refusal::NoMemory);
        };
        let bound = self.bucket(key).with(|m| {
            let old = m.remove(key);
            let bound = self.pages.with(|t| {
                let bound = t.bind(key, old, &self.supply);
                self.stale_hint.store(t.stale, Ordering::Relaxed);
                bound
            });
            if let Ok((h, _)) = bound {
                // `key` was just removed, under this lock: nothing displaced.
                m.insert(node, key.clone(), h);
            }
            bound
        });
        let (h, victim) = match bound {
            Ok(b) => b,
            Err(r) => return self.refuse(r),
        };
        if let Some((vkey, vh, evicted)) = victim {
            if evicted {
                Counters::add(&self.counters.evictions, 1);
            }
            self.forget(&vkey, vh);
        }

        let copied = self.access.copy_in(&FillCopy::new(h.page), src);

        let outcome = self.pages.with(|t| {
            let was = t.end_copy(h, &self.supply);
            if was == State::Filling && copied {
                if let Some(s) = t.links.get_mut(h.page) {
                    s.state = State::Ready;
                }
            }
            was
        });
        self.reap(REAP_PER_STORE);
        match outcome {
            State::Filling if copied => {
                Counters::add(&self.counters.stores, 1);
                StoreOutcome::Stored
            }
            State::Filling => {
                // Bad memory: unbound and given back (still `Filling`, so
                // no load started on it); the supply keeps it out of use.
                self.forget(key, h);
                self.pages.with(|t| t.unbind_release(h, &self.supply));
                self.refuse(Refusal::Poisoned)
            }
            State::Discarded => {
                self.forget(key, h);
                self.refuse(Refusal::Discarded)
            }
            _ => {
                self.forget(key, h);
                self.refuse(Refusal::Superseded)
            }
        }
    }

    /// Copies the entry of `key` into `dst` and returns `true`, or returns
    /// `false` (a miss) if there is none, it is still being filled, or it
    /// was discarded for a primary allocation while being copied.  With
    /// exclusive loads, a hit drops the entry.  Never sleeps.
    pub(crate) fn load(&self, key: &C::Key, dst: Dst<'_, C>) -> bool {
        let h = self.bucket(key).with(|m| m.get(key));
        let started = h.filter(|&h| {
            self.pages.with(|t| {
                if !t.is(h, State::Ready) {
                    return false;
                }
                t.links.get_mut(h.page).map(|s| s.copiers += 1).is_some()
            })
        });
        let Some(h) = started else {
            Counters::add(&self.counters.misses, 1);
            return false;
        };

        let copied = self.access.copy_out(&ReadCopy::new(h.page), dst);

        let (hit, dropped) = self.pages.with(|t| match t.end_copy(h, &self.supply) {
            // Bad memory: the entry goes, and its page back to the supply,
            // which keeps it out of use.
            State::Ready | State::Dead if !copied => (false, t.unbind_release(h, &self.supply)),
            State::Ready => {
                let dropped = self.exclusive_loads && t.unbind_release(h, &self.supply);
                (true, dropped)
            }
            // Unbound by a concurrent invalidation or replacement after the
            // copy started: the bytes are the entry's, the load came first.
            State::Dead => (true, false),
            // Claimed by a primary allocation: the entry is gone.
            _ => (false, false),
        });
        if dropped {
            self.forget(key, h);
        }
        if !copied {
            Counters::add(&self.counters.poisoned, 1);
        }
        let c = if hit {
            &self.counters.hits
        } else {
            &self.counters.misses
        };
        Counters::add(c, 1);
        hit
    }

    /// Counts a load its caller failed without calling [`Dmem::load`] (a
    /// client switched off or fenced), so that hits and misses add up to
    /// the loads asked for.
    pub(crate) fn missed(&self) {
        Counters::add(&self.counters.misses, 1);
    }

    /// Drops the entry of `key`; returns whether there was one.
    pub(crate) fn invalidate(&self, key: &C::Key) -> bool {
        let dropped = self.drop_key(key);
        if dropped {
            Counters::add(&self.counters.invalidations, 1);
        }
        dropped
    }

    /// Drops every entry whose key is in `lo..=hi`, and returns how many.
    /// Visits one bucket if [`Key::same_group`] says so, all otherwise.
    pub(crate) fn invalidate_range(&self, lo: &C::Key, hi: &C::Key) -> usize {
        if lo > hi {
            return 0;
        }
        let mut dropped = 0;
        let mut drain = |b: &BucketLock<C>| {
            while let Some((_, h)) = b.with(|m| m.pop_range(lo, hi)) {
                if self.pages.with(|t| t.unbind_release(h, &self.supply)) {
                    dropped += 1;
                }
            }
        };
        if C::Key::same_group(lo, hi) {
            drain(self.bucket(lo));
        } else {
            self.buckets.iter().for_each(drain);
        }
        Counters::add(&self.counters.invalidations, dropped);
        self.reap(REAP_PER_STORE);
        dropped
    }

    /// Drops every entry (not counted as invalidations), e.g. before the
    /// instance goes away.  Pages still being copied are given back by the
    /// last copy.
    pub(crate) fn clear(&self) {
        for b in self.buckets.iter() {
            while let Some((_, h)) = b.with(|m| m.pop_first()) {
                self.pages.with(|t| t.unbind_release(h, &self.supply));
            }
        }
        // The index is empty: this only takes the keys out of the slots.
        self.reap(usize::MAX);
    }

    /// Drops the data in area page `page`, which a primary allocation has
    /// claimed, and returns once no copy into or out of the page is in
    /// flight: the caller may then overwrite it.  The page is not given
    /// back to the supply.  Returns whether the store held the page.
    ///
    /// As [`Dmem::discard_range`] for one page.
    // Used only by the host tests; GCMA discards with `discard_range()`.
    #[cfg(test)]
    pub(crate) fn discard(&self, page: usize) -> bool
    where
        <C::Platform as Platform>::SleepCtx: Default,
    {
        self.discard_range(&Default::default(), page, 1, |_, _| {}) != 0
    }

    /// Drops the data in the pages `first..first + count`, which a primary
    /// allocation has claimed, and returns how many of them the store held.
    ///
    /// Works in chunks of [`DISCARD_CHUNK`] pages, aligned to the chunk
    /// size: one page-lock section marks the held pages of a chunk
    /// discarded, the bound ones leave the LRU list for the stale list (their
    /// index entries are removed later, see the module documentation), and
    /// the idle ones are free at once; the busy ones are then waited for.
    /// Once no copy into or out of any page of the chunk is in flight,
    /// `freed(base, mask)` is called with no lock held, for the pages
    /// `base + i` of the bits `i` set in `mask`: the pages of the chunk the
    /// store held, which the caller may overwrite from then on.  The pages
    /// are not given back to the supply.
    ///
    /// Each page must be claimed by one primary allocation at a time: a page
    /// already being discarded by a concurrent call is left to that call.
    /// May sleep (through [`Platform::relax`], with `ctx`) while copies
    /// drain; must be called with no lock of this instance held.
    pub(crate) fn discard_range(
        &self,
        ctx: &<C::Platform as Platform>::SleepCtx,
        first: usize,
        count: usize,
        mut freed: impl FnMut(usize, u64),
    ) -> usize {
        let end = first.saturating_add(count);
        let mut discarded = 0;
        let mut base = first - first % DISCARD_CHUNK;
        while base < end {
            let lo = first.max(base);
            let hi = end.min(base + DISCARD_CHUNK);
            // Bits of the pages held (`done`: free now; `busy`: copies in
            // flight), relative to `base`; `None` if the store holds no
            // page at all (the other instance holds the range).
            let marked = self.pages.with(|t| {
                if t.held == 0 {
                    return None;
                }
                let out = t.mark_discarded(base, lo, hi);
                self.stale_hint.store(t.stale, Ordering::Relaxed);
                Some(out)
            });
            let Some((mut done, mut busy)) = marked else {
                break;
            };
            let held = (done | busy).count_ones() as usize;
            let mut round = 0;
            while busy != 0 {
                C::Platform::relax(ctx, round);
                round = round.saturating_add(1);
                self.pages.with(|t| {
                    let mut left = busy;
                    while left != 0 {
                        let i = left.trailing_zeros() as usize;
                        left &= left - 1;
                        let Some(s) = t.links.get_mut(base + i) else {
                            continue;
                        };
                        if s.copiers == 0 {
                            s.state = State::Free;
                            t.held -= 1;
                            busy &= !(1u64 << i);
                            done |= 1u64 << i;
                        }
                    }
                });
            }
            if done != 0 {
                freed(base, done);
            }
            discarded += held;
            base += DISCARD_CHUNK;
        }
        Counters::add(&self.counters.discards, discarded);
        discarded
    }

    /// Removes up to `max` stale index entries (of pages discarded while
    /// bound), oldest discards last; returns how many it removed.  Never
    /// sleeps; takes the page lock and then one bucket lock per entry.
    pub(crate) fn reap(&self, max: usize) -> usize {
        let mut n = 0;
        while n < max && self.stale_hint.load(Ordering::Relaxed) != 0 {
            let Some((key, h)) = self.pages.with(|t| {
                let e = t.pop_stale();
                self.stale_hint.store(t.stale, Ordering::Relaxed);
                e
            }) else {
                break;
            };
            self.forget(&key, h);
            n += 1;
        }
        n
    }

    /// Returns the handle of the entry of `key`, if it is ready (a
    /// snapshot, for tests and debugging).
    // Used only by the KUnit suite and the host tests.
    #[cfg(any(test, CONFIG_GCMA_KUNIT_TEST))]
    pub(crate) fn handle_of(&self, key: &C::Key) -> Option<Handle> {
        let h = self.bucket(key).with(|m| m.get(key))?;
        self.pages.with(|t| t.is(h, State::Ready)).then_some(h)
    }

    /// Returns the counters.
    pub(crate) fn stats(&self) -> Stats {
        let (stored_pages, held_pages) = self.pages.with(|t| (t.bound, t.held));
        let c = &self.counters;
        let refused = |r| {
            c.refused
                .get(Counters::refusal_index(r))
                .map_or(0, Counters::get)
        };
        Stats {
            stored_pages,
            held_pages,
            stores: Counters::get(&c.stores),
            hits: Counters::get(&c.hits),
            misses: Counters::get(&c.misses),
            invalidations: Counters::get(&c.invalidations),
            discards: Counters::get(&c.discards),
            evictions: Counters::get(&c.evictions),
            refused_nomem: refused(Refusal::NoMemory),
            refused_nospace: refused(Refusal::NoSpace),
            refused_discarded: refused(Refusal::Discarded),
            refused_superseded: refused(Refusal::Superseded),
            poisoned: Counters::get(&c.poisoned),
        }
    }

    /// Checks the consistency of a quiescent instance (no operation in
    /// flight): the page-table invariants, no page busy, dead or discarded,
    /// the index and the bound pages in one-to-one correspondence, every
    /// live index entry naming a ready page bound to its key in the key's
    /// bucket, and every other index entry a stale entry of a slot on the
    /// stale list.  Returns the number of live entries.
    ///
    /// Fails with `EINVAL` on the first inconsistency.  Costs time linear in
    /// the size of the instance: for debugging and tests.
    // Used only by the KUnit suite and the host tests.
    #[cfg(any(test, CONFIG_GCMA_KUNIT_TEST))]
    pub(crate) fn check_quiescent(&self) -> Result<usize> {
        let ok = |cond: bool| if cond { Ok(()) } else { Err(EINVAL) };
        let (mut entries, mut stale_entries) = (0usize, 0usize);
        for (i, b) in self.buckets.iter().enumerate() {
            b.with(|m| {
                let mut res = Ok(());
                m.for_each(|k, h| {
                    let (live, stale) = self.pages.with(|t| {
                        let s = t.slots.get(h.page);
                        let keyed = s.and_then(|s| s.key.as_ref()) == Some(k)
                            && s.is_some_and(|s| s.seq == h.seq);
                        let ready = t.is(h, State::Ready);
                        (keyed && ready, keyed && !ready && t.is(h, State::Free))
                    });
                    entries += usize::from(live);
                    stale_entries += usize::from(stale);
                    if !(live || stale) || !core::ptr::eq(self.bucket(k), &self.buckets[i]) {
                        res = Err(EINVAL);
                    }
                });
                res
            })?;
        }
        self.pages.with(|t| {
            let (mut held, mut bound, mut keyed_free) = (0usize, 0usize, 0usize);
            ok(t.links.len() == t.slots.len())?;
            for (s, l) in t.slots.iter().zip(t.links.iter()) {
                ok(l.copiers == 0)?;
                match l.state {
                    State::Free => keyed_free += usize::from(s.key.is_some()),
                    State::Ready => {
                        ok(s.key.is_some())?;
                        held += 1;
                        bound += 1;
                    }
                    _ => return Err(EINVAL),
                }
            }
            ok(held == t.held && bound == t.bound && bound == entries)?;
            ok(keyed_free == t.stale && stale_entries <= t.stale)?;
            // Walk the LRU list both ways.
            let (mut n, mut p, mut prev) = (0usize, t.head, NIL);
            while p != NIL {
                let (s, l) = (t.slots.get(p).ok_or(EINVAL)?, t.links.get(p).ok_or(EINVAL)?);
                ok(l.state == State::Ready && l.prev == prev && s.seq < t.next_seq)?;
                n += 1;
                ok(n <= bound)?;
                prev = p;
                p = l.next;
            }
            ok(n == bound && t.tail == prev)?;
            // And the stale list.
            let (mut n, mut p, mut prev) = (0usize, t.stale_head, NIL);
            while p != NIL {
                let (s, l) = (t.slots.get(p).ok_or(EINVAL)?, t.links.get(p).ok_or(EINVAL)?);
                ok(l.state == State::Free && s.key.is_some() && l.prev == prev)?;
                n += 1;
                ok(n <= t.stale)?;
                prev = p;
                p = l.next;
            }
            ok(n == t.stale)?;
            Ok(entries)
        })
    }

    /// Entries on the stale list (a snapshot, for tests and debugging).
    // Used only by the host tests.
    #[cfg(test)]
    pub(crate) fn stale_entries(&self) -> usize {
        self.pages.with(|t| t.stale)
    }
}

impl<C: Config> Drop for Dmem<C> {
    fn drop(&mut self) {
        self.clear();
    }
}
