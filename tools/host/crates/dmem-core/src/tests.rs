// SPDX-License-Identifier: GPL-2.0

//! Host tests of DMEM: a property test against a reference model (with
//! allocation-failure injection), the discard protocol over the real GCMA
//! page-state map, and a multi-threaded stress test.

use std::collections::{HashMap, VecDeque};
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use kernel::alloc::fault;
use proptest::prelude::*;

use crate::dmem::{FileKey, Key, Lock, Refusal, Stats, StoreOutcome, SwapKey, DISCARD_CHUNK};
use crate::host::{host_dmem, AreaSupply, StdPlatform, TableSupply};

/// Words per page in the property test.
const WORDS: usize = 4;

/// One operation of the property test; keys are indices into a small key
/// space, so operations collide often.
#[derive(Clone, Debug)]
enum Op {
    /// Store `fill`-derived contents under key `key`; with `fail`, the
    /// store's allocation fails.
    Store { key: u8, fill: u16, fail: bool },
    /// Load key `key`.
    Load { key: u8 },
    /// Invalidate key `key`.
    Invalidate { key: u8 },
    /// Invalidate the key range of group `group` (a file, a swap device).
    InvalidateGroup { group: u8 },
    /// A primary allocation claims the page of key `key`, if stored.
    Discard { key: u8 },
    /// A primary allocation claims the pages `first..first + len` (`first`
    /// modulo the page count, the range cut at the last page): one range
    /// discard drops those the store holds.
    DiscardRange { first: u8, len: u8 },
    /// A primary allocation claims a free page.
    ClaimFree,
    /// A primary allocation releases its page `nth` (modulo the count).
    Release { nth: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (any::<u8>(), any::<u16>(), prop::bool::weighted(0.15))
            .prop_map(|(key, fill, fail)| Op::Store { key, fill, fail }),
        4 => any::<u8>().prop_map(|key| Op::Load { key }),
        1 => any::<u8>().prop_map(|key| Op::Invalidate { key }),
        1 => any::<u8>().prop_map(|group| Op::InvalidateGroup { group }),
        1 => any::<u8>().prop_map(|key| Op::Discard { key }),
        1 => (any::<u8>(), 1..=24u8).prop_map(|(first, len)| Op::DiscardRange { first, len }),
        1 => Just(Op::ClaimFree),
        1 => any::<u8>().prop_map(|nth| Op::Release { nth }),
    ]
}

/// A key space for the property test.
trait Space: Key + Hash + Debug + Copy {
    /// Key number `i` (of a small space).
    fn nth(i: u8) -> Self;
    /// Inclusive key range of group `g`.
    fn group(g: u8) -> (Self, Self);
}

impl Space for FileKey {
    fn nth(i: u8) -> Self {
        // 2 superblocks x 4 inodes x 5 pages.
        let i = i % 40;
        FileKey {
            sb: u32::from(i / 20),
            ino: u64::from(i / 5 % 4),
            index: u64::from(i % 5) * 1_000_000_007,
        }
    }

    fn group(g: u8) -> (Self, Self) {
        let k = Self::nth(g.wrapping_mul(5));
        FileKey::file_range(k.sb, k.ino)
    }
}

impl Space for SwapKey {
    fn nth(i: u8) -> Self {
        // 2 devices x 20 offsets, over several clusters.
        let i = i % 40;
        SwapKey {
            swap_type: u32::from(i / 20),
            offset: u64::from(i % 20) * 37,
        }
    }

    fn group(g: u8) -> (Self, Self) {
        if g.is_multiple_of(3) {
            // A range inside one cluster of device 0.
            let lo = SwapKey {
                swap_type: 0,
                offset: 37,
            };
            (lo, SwapKey { offset: 63, ..lo })
        } else {
            SwapKey::device_range(u32::from(g % 2))
        }
    }
}

/// Contents stored for `key` with `fill`.
fn contents<K: Hash>(key: &K, fill: u16) -> Vec<usize> {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    let h = BuildHasherDefault::<DefaultHasher>::default().hash_one(key) as usize;
    (0..WORDS).map(|i| h ^ usize::from(fill) << 8 ^ i).collect()
}

/// The reference model: a map, an LRU queue in store order, the number of
/// pages claimed by primary allocations, and the expected counters.
struct Model<K> {
    data: HashMap<K, Vec<usize>>,
    lru: VecDeque<K>,
    claimed: usize,
    pages: usize,
    exclusive: bool,
    stats: Stats,
}

impl<K: Space> Model<K> {
    fn remove(&mut self, key: &K) -> bool {
        self.lru.retain(|k| k != key);
        self.data.remove(key).is_some()
    }

    fn free(&self) -> usize {
        self.pages - self.claimed - self.data.len()
    }

    /// The expected outcome of a store.
    fn store(&mut self, key: K, data: Vec<usize>, fail: bool) -> StoreOutcome {
        if fail {
            self.remove(&key);
            self.stats.refused_nomem += 1;
            return StoreOutcome::Refused(Refusal::NoMemory);
        }
        if !self.remove(&key) && self.free() == 0 {
            // Evict the least recently stored entry.
            match self.lru.pop_front() {
                Some(victim) => {
                    self.data.remove(&victim);
                    self.stats.evictions += 1;
                }
                None => {
                    self.stats.refused_nospace += 1;
                    return StoreOutcome::Refused(Refusal::NoSpace);
                }
            }
        }
        self.data.insert(key, data);
        self.lru.push_back(key);
        self.stats.stores += 1;
        StoreOutcome::Stored
    }

    fn sync_gauges(&mut self) {
        self.stats.stored_pages = self.data.len();
        self.stats.held_pages = self.data.len();
    }
}

/// Runs `ops` on an instance of `pages` pages and `buckets` buckets and on
/// the model, checking every outcome, loaded byte and counter.
fn run<K: Space>(ops: &[Op], pages: usize, buckets: usize, exclusive: bool) {
    let base = fault::live();
    let dmem = host_dmem::<K, StdPlatform, _>(
        buckets,
        pages,
        WORDS,
        TableSupply::<StdPlatform>::new(pages),
        exclusive,
    );
    let mut m = Model::<K> {
        data: HashMap::new(),
        lru: VecDeque::new(),
        claimed: 0,
        pages,
        exclusive,
        stats: Stats::default(),
    };
    let mut buf = [0usize; WORDS];
    for (i, op) in ops.iter().enumerate() {
        match *op {
            Op::Store { key, fill, fail } => {
                let key = K::nth(key);
                let data = contents(&key, fill);
                if fail {
                    fault::fail_after(0);
                }
                let got = dmem.store(&key, &data);
                fault::clear();
                assert_eq!(got, m.store(key, data, fail), "op {i}: {op:?}");
            }
            Op::Load { key } => {
                let key = K::nth(key);
                buf.fill(0);
                let hit = dmem.load(&key, &mut buf);
                match m.data.get(&key).cloned() {
                    Some(want) => {
                        assert!(hit, "op {i}: {op:?} missed");
                        assert_eq!(buf[..], want[..], "op {i}: {op:?}");
                        m.stats.hits += 1;
                        if m.exclusive {
                            m.remove(&key);
                        }
                    }
                    None => {
                        assert!(!hit, "op {i}: {op:?} hit");
                        m.stats.misses += 1;
                    }
                }
            }
            Op::Invalidate { key } => {
                let key = K::nth(key);
                let had = m.remove(&key);
                assert_eq!(dmem.invalidate(&key), had, "op {i}: {op:?}");
                m.stats.invalidations += usize::from(had);
            }
            Op::InvalidateGroup { group } => {
                let (lo, hi) = K::group(group);
                let keys: Vec<K> = m
                    .data
                    .keys()
                    .filter(|k| (lo..=hi).contains(k))
                    .copied()
                    .collect();
                keys.iter().for_each(|k| {
                    m.remove(k);
                });
                assert_eq!(dmem.invalidate_range(&lo, &hi), keys.len(), "op {i}");
                m.stats.invalidations += keys.len();
            }
            Op::Discard { key } => {
                let key = K::nth(key);
                let h = dmem.handle_of(&key);
                assert_eq!(h.is_some(), m.data.contains_key(&key), "op {i}: {op:?}");
                if let Some(h) = h {
                    assert_eq!(dmem.supply().claim(h.page), Some(true), "op {i}");
                    assert!(dmem.discard(h.page), "op {i}: {op:?}");
                    dmem.supply().finish_discard(h.page);
                    m.remove(&key);
                    m.claimed += 1;
                    m.stats.discards += 1;
                    // The new owner writes; nothing of the store may change it.
                    dmem.access().write(h.page, &[usize::MAX; WORDS]);
                }
            }
            Op::DiscardRange { first, len } => {
                let first = usize::from(first) % pages;
                let end = (first + usize::from(len)).min(pages);
                let held: Vec<(K, usize)> = m
                    .data
                    .keys()
                    .filter_map(|k| Some((*k, dmem.handle_of(k)?.page)))
                    .collect();
                assert_eq!(held.len(), m.data.len(), "op {i}: entries not ready");
                let (mut lent, mut claimed) = (Vec::new(), Vec::new());
                for p in first..end {
                    if let Some(was_lent) = dmem.supply().claim(p) {
                        claimed.push(p);
                        if was_lent {
                            lent.push(p);
                        }
                    }
                }
                let mut freed = Vec::new();
                let n = dmem.discard_range(&(), first, end - first, |base, mut mask| {
                    while mask != 0 {
                        freed.push(base + mask.trailing_zeros() as usize);
                        mask &= mask - 1;
                    }
                });
                freed.sort_unstable();
                assert_eq!(freed, lent, "op {i}: {op:?}: pages reported free");
                assert_eq!(n, lent.len(), "op {i}: {op:?}");
                let gone: Vec<K> = held
                    .iter()
                    .filter(|(_, p)| lent.contains(p))
                    .map(|(k, _)| *k)
                    .collect();
                assert_eq!(gone.len(), lent.len(), "op {i}: {op:?}: held pages");
                for k in &gone {
                    m.remove(k);
                }
                m.stats.discards += gone.len();
                for &p in &lent {
                    dmem.supply().finish_discard(p);
                }
                for &p in &claimed {
                    dmem.access().write(p, &[usize::MAX; WORDS]);
                }
                m.claimed += claimed.len();
            }
            Op::ClaimFree => {
                let got = dmem.supply().claim_free();
                assert_eq!(got.is_some(), m.free() > 0, "op {i}: {op:?}");
                if let Some(p) = got {
                    assert!(!dmem.discard(p), "op {i}: free page {p} held");
                    m.claimed += 1;
                    dmem.access().write(p, &[usize::MAX; WORDS]);
                }
            }
            Op::Release { nth } => {
                let claimed = dmem.supply().claimed();
                if !claimed.is_empty() {
                    let p = claimed[usize::from(nth) % claimed.len()];
                    for w in dmem.access().read(p) {
                        assert_eq!(w, usize::MAX, "op {i}: claimed page {p} written");
                    }
                    dmem.supply().release(p);
                    m.claimed -= 1;
                }
            }
        }
        m.sync_gauges();
        assert_eq!(dmem.stats(), m.stats, "op {i}: {op:?}");
        assert_eq!(dmem.check_quiescent(), Ok(m.data.len()), "op {i}: {op:?}");
        assert_eq!(dmem.supply().lent(), m.data.len(), "op {i}: lent pages");
        // One index node per entry, and at most one per slot on the stale
        // list (entries of discarded pages not removed yet); nothing else.
        let nodes = fault::live() - base;
        let stale = dmem.stale_entries() as i64;
        let live = m.data.len() as i64;
        assert!(
            nodes >= live && nodes <= live + stale,
            "op {i}: {nodes} nodes"
        );
    }
    // Reaping removes every stale entry.
    dmem.reap(usize::MAX);
    assert_eq!(dmem.stale_entries(), 0);
    assert_eq!(
        fault::live() - base,
        m.data.len() as i64,
        "nodes after reaping"
    );
    assert_eq!(dmem.check_quiescent(), Ok(m.data.len()));
    // Every entry still loads its contents.
    for (key, want) in &m.data {
        assert!(dmem.load(key, &mut buf), "final load of {key:?}");
        assert_eq!(buf[..], want[..]);
    }
    drop(dmem);
    assert_eq!(fault::live(), base, "index nodes leaked");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, ..ProptestConfig::default() })]

    #[test]
    fn file_keys_match_model(
        ops in prop::collection::vec(op(), 1..160),
        pages in 1usize..9,
        buckets in 1usize..5,
    ) {
        run::<FileKey>(&ops, pages, buckets, false);
    }

    #[test]
    fn swap_keys_exclusive_match_model(
        ops in prop::collection::vec(op(), 1..160),
        pages in 1usize..9,
        buckets in 1usize..5,
    ) {
        run::<SwapKey>(&ops, pages, buckets, true);
    }
}

#[test]
fn eviction_order_and_replacement() {
    let d =
        host_dmem::<SwapKey, StdPlatform, _>(4, 3, 1, TableSupply::<StdPlatform>::new(3), false);
    let k = |offset| SwapKey {
        swap_type: 0,
        offset,
    };
    for o in 0..3 {
        assert_eq!(d.store(&k(o), &[o as usize]), StoreOutcome::Stored);
    }
    // Replacing keeps the page and renews the entry.
    assert_eq!(d.store(&k(0), &[10]), StoreOutcome::Stored);
    assert_eq!(d.stats().evictions, 0);
    // The least recently stored is now 1, then 2.
    assert_eq!(d.store(&k(3), &[3]), StoreOutcome::Stored);
    assert_eq!(d.store(&k(4), &[4]), StoreOutcome::Stored);
    let mut b = [0];
    assert!(!d.load(&k(1), &mut b) && !d.load(&k(2), &mut b));
    assert!(d.load(&k(0), &mut b) && b[0] == 10);
    assert_eq!(d.stats().evictions, 2);
    assert_eq!(d.check_quiescent(), Ok(3));
}

#[test]
fn failed_store_drops_stale_entry() {
    let d =
        host_dmem::<FileKey, StdPlatform, _>(2, 2, 1, TableSupply::<StdPlatform>::new(2), false);
    let k = FileKey::file_range(1, 2).0;
    assert_eq!(d.store(&k, &[1]), StoreOutcome::Stored);
    fault::fail_after(0);
    let got = d.store(&k, &[2]);
    fault::clear();
    assert_eq!(got, StoreOutcome::Refused(Refusal::NoMemory));
    // The old contents are stale: they must not be returned.
    assert!(!d.load(&k, &mut [0]));
    assert_eq!(d.supply().lent(), 0);
}

/// A refusal or a miss that the store's caller decides (the kernel's
/// client, while a range fence stands) is counted as the store's own are.
#[test]
fn caller_refusals_and_misses_count() {
    let d =
        host_dmem::<FileKey, StdPlatform, _>(2, 2, 1, TableSupply::<StdPlatform>::new(2), false);
    let before = d.stats();
    assert_eq!(
        d.refuse(Refusal::Superseded),
        StoreOutcome::Refused(Refusal::Superseded)
    );
    d.missed();
    let after = d.stats();
    assert_eq!(after.refused_superseded, before.refused_superseded + 1);
    assert_eq!(after.misses, before.misses + 1);
    assert_eq!(after.stores, before.stores);
    assert_eq!(after.hits, before.hits);
}

/// A store runs in reclaim, where the kernel would let an allocation take
/// the memory reserves: its index node must not, so with only the
/// reserves left the store is refused and nothing was taken from them.
#[test]
fn store_never_takes_reserves() {
    let d =
        host_dmem::<FileKey, StdPlatform, _>(2, 2, 1, TableSupply::<StdPlatform>::new(2), false);
    let k = FileKey::file_range(1, 2).0;
    assert_eq!(d.store(&k, &[1]), StoreOutcome::Stored);
    let taken = fault::from_reserves();
    fault::only_reserves_left(true);
    let got = d.store(&k, &[2]);
    fault::only_reserves_left(false);
    assert_eq!(fault::from_reserves(), taken);
    assert_eq!(got, StoreOutcome::Refused(Refusal::NoMemory));
    assert!(!d.load(&k, &mut [0]));
    assert_eq!(d.supply().lent(), 0);
}

/// A held page found bad memory (hardware poison): its entry misses and
/// goes, its page goes back to the supply, and a store into a bad page is
/// refused without leaving an entry behind.
#[test]
fn poisoned_pages_miss_and_go_back() {
    let d =
        host_dmem::<SwapKey, StdPlatform, _>(2, 4, 1, TableSupply::<StdPlatform>::new(4), false);
    let k = |offset| SwapKey {
        swap_type: 0,
        offset,
    };
    for o in 0..3 {
        assert_eq!(d.store(&k(o), &[o as usize + 7]), StoreOutcome::Stored);
    }
    let page_of_1 = (0..4).find(|&p| d.access().read(p) == [8]).expect("page");
    d.access().poison(page_of_1);
    let mut b = [0];
    assert!(!d.load(&k(1), &mut b), "a poisoned entry must miss");
    assert_eq!(b, [0], "nothing copied out of a poisoned page");
    assert!(!d.load(&k(1), &mut b), "the entry is gone");
    assert_eq!(d.supply().lent(), 2);
    assert!(d.load(&k(0), &mut b) && b == [7]);
    // This supply lends the bad page again (GCMA's keeps it out of use):
    // the store is refused and the page goes back.
    assert_eq!(
        d.store(&k(10), &[1]),
        StoreOutcome::Refused(Refusal::Poisoned)
    );
    assert!(!d.load(&k(10), &mut b));
    assert_eq!(d.supply().lent(), 2);
    assert_eq!(d.stats().poisoned, 2);
    assert_eq!(d.check_quiescent(), Ok(2));
}

/// A range discard, as GCMA runs it now: claim a range, hand the whole
/// range to the store, which reports every page it held exactly once, in
/// chunks, and leaves the index entries of the discarded pages stale until
/// they are reaped or the page is bound again.
#[test]
fn range_discard_over_area_map() {
    const PAGES: usize = 300;
    let d = host_dmem::<SwapKey, StdPlatform, _>(
        8,
        PAGES,
        2,
        AreaSupply::<StdPlatform>::new(PAGES),
        true,
    );
    let key = |i: u64| SwapKey {
        swap_type: 1,
        offset: i,
    };
    for i in 0..250 {
        assert_eq!(d.store(&key(i), &[i as usize, 9]), StoreOutcome::Stored);
    }
    let area = &d.supply().0;
    // The lowest 50 pages are free, pages 50..300 are lent.
    let out = area.with(|m| m.alloc_primary(200, 0)).expect("alloc");
    assert_eq!((out.start, out.count, out.lent), (0, 200, 150));
    let mut freed = vec![0usize; PAGES];
    let n = d.discard_range(&(), out.start, out.count, |base, mut mask| {
        assert_eq!(base % DISCARD_CHUNK, 0);
        while mask != 0 {
            freed[base + mask.trailing_zeros() as usize] += 1;
            mask &= mask - 1;
        }
    });
    assert_eq!(n, 150);
    for (p, &f) in freed.iter().enumerate() {
        assert_eq!(f, usize::from((50..200).contains(&p)), "page {p}");
    }
    assert_eq!(
        area.with(|m| m.finish_discard(out.start, out.count)),
        Ok(150)
    );
    let s = d.stats();
    assert_eq!((s.discards, s.stored_pages, s.held_pages), (150, 100, 100));
    // Their entries are stale: they miss, and the index still holds them
    // until reaped.
    assert_eq!(d.stale_entries(), 150);
    assert_eq!(d.check_quiescent(), Ok(100));
    let mut b = [0; 2];
    let hits = (0..250).filter(|&i| d.load(&key(i), &mut b)).count();
    assert_eq!(hits, 100);
    // The primary owner gives the pages back; the store lends them again,
    // removing the stale entries of the pages it binds.
    area.with(|m| m.release_primary(out.start, out.count))
        .expect("release");
    for i in 1000..1150 {
        assert_eq!(d.store(&key(i), &[1, 2]), StoreOutcome::Stored);
    }
    assert_eq!(d.check_quiescent(), Ok(150));
    d.reap(usize::MAX);
    assert_eq!(d.stale_entries(), 0);
    assert_eq!(d.check_quiescent(), Ok(150));
    area.with(|m| m.check_invariants()).expect("area map");
}

/// The discard protocol over the real page-state map, as GCMA runs it:
/// claim a range, discard its lent pages one by one, finish the discard.
#[test]
fn primary_allocation_over_area_map() {
    const PAGES: usize = 200;
    let d = host_dmem::<FileKey, StdPlatform, _>(
        16,
        PAGES,
        2,
        AreaSupply::<StdPlatform>::new(PAGES),
        false,
    );
    let key = |i: u64| FileKey {
        sb: 0,
        ino: i / 50,
        index: i,
    };
    for i in 0..150 {
        assert_eq!(d.store(&key(i), &[i as usize, 7]), StoreOutcome::Stored);
    }
    let area = &d.supply().0;
    // Pages are lent from the top: the lowest 50 are free.
    let out = area.with(|m| m.alloc_primary(120, 0)).expect("alloc");
    assert_eq!((out.start, out.count, out.lent), (0, 120, 70));
    let mut from = out.start;
    while let Some(p) = area.with(|m| m.next_lent(from, out.start + out.count)) {
        assert!(d.discard(p));
        from = p + 1;
    }
    assert_eq!(
        area.with(|m| m.finish_discard(out.start, out.count)),
        Ok(70)
    );
    area.with(|m| m.check_invariants()).expect("area map");
    let s = d.stats();
    assert_eq!((s.discards, s.stored_pages), (70, 80));
    let mut hits = 0;
    for i in 0..150 {
        let mut b = [0; 2];
        if d.load(&key(i), &mut b) {
            assert_eq!(b, [i as usize, 7]);
            hits += 1;
        }
    }
    assert_eq!(hits, 80);
    // Storing more evicts: no free page is left outside the allocation.
    assert_eq!(d.store(&key(1000), &[1, 1]), StoreOutcome::Stored);
    assert_eq!(d.stats().evictions, 1);
    // Keys 80..150 sat on pages 50..120 (lent from the top: key i on page
    // 199 - i) and were discarded; key 0 was just evicted.  Invalidating
    // file 1 (keys 50..100) drops its 30 remaining pages back to the area.
    let (lo, hi) = FileKey::file_range(0, 1);
    assert_eq!(d.invalidate_range(&lo, &hi), 30);
    assert_eq!(area.with(|m| m.secondary_lent()), 50);
    assert_eq!(d.check_quiescent(), Ok(50));
    drop(d);
}

/// Threads storing, loading and invalidating race a thread that claims
/// pages as primary allocations do and overwrites them.  A load must never
/// return anything but the latest-or-concurrent contents of its key, and
/// never the primary owner's bytes.
#[test]
fn stress_against_primary_claims() {
    const PAGES: usize = 24;
    const OWNER: usize = usize::MAX;
    let d = Arc::new(host_dmem::<SwapKey, StdPlatform, _>(
        8,
        PAGES,
        8,
        TableSupply::<StdPlatform>::new(PAGES),
        false,
    ));
    let stop = Arc::new(AtomicBool::new(false));
    // Discards of lent pages so far: the workers go on until there have
    // been a few, however the threads were scheduled.
    let claims = Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::new();
    for t in 0..3u64 {
        let d = d.clone();
        let claims = claims.clone();
        threads.push(std::thread::spawn(move || {
            let mut x = t.wrapping_mul(0x9e37_79b9) | 1;
            let mut buf = [0usize; 8];
            for n in 0..2_000_000u64 {
                if n >= 20_000 && claims.load(Ordering::Relaxed) >= 100 {
                    break;
                }
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let key = SwapKey {
                    swap_type: 0,
                    offset: x % 40,
                };
                match x >> 60 {
                    0..=6 => {
                        let mut data = [key.offset as usize; 8];
                        data[1] = n as usize;
                        let _ = d.store(&key, &data);
                    }
                    7..=14 => {
                        if d.load(&key, &mut buf) {
                            assert!(buf[0] != OWNER, "loaded the primary owner's bytes");
                            assert_eq!(buf[0], key.offset as usize, "wrong key");
                            assert!(buf[2..].iter().all(|&w| w == buf[0]), "torn page");
                        }
                    }
                    _ => {
                        d.invalidate(&key);
                    }
                }
            }
        }));
    }
    {
        let d = d.clone();
        let stop = stop.clone();
        let claims = claims.clone();
        threads.push(std::thread::spawn(move || {
            let mut p = 0;
            while !stop.load(Ordering::Relaxed) {
                p = (p + 7) % PAGES;
                match d.supply().claim(p) {
                    Some(lent) => {
                        if lent {
                            d.discard(p);
                            d.supply().finish_discard(p);
                            claims.fetch_add(1, Ordering::Relaxed);
                        }
                        assert_eq!(d.access().in_flight(p), 0, "copy outlived discard");
                        d.access().write(p, &[OWNER; 8]);
                        std::thread::yield_now();
                        assert!(d.access().read(p).iter().all(|&w| w == OWNER));
                        d.supply().release(p);
                    }
                    None => std::thread::yield_now(),
                }
            }
        }));
    }
    let claimer = threads.pop();
    for t in threads {
        t.join().expect("worker");
    }
    stop.store(true, Ordering::Relaxed);
    if let Some(t) = claimer {
        t.join().expect("claimer");
    }
    let s = d.stats();
    assert!(s.stores > 0 && s.hits > 0 && s.discards > 0, "{s:?}");
    let entries = d.check_quiescent().expect("consistent");
    assert_eq!(d.supply().lent(), entries);
}
