// SPDX-License-Identifier: GPL-2.0

//! Writer benchmark: the writer of the kernel's isolated-VM benchmark
//! (`mm/bonsai_rs/bench/rate.rs`) on the host, split into the
//! parts an update costs, so that each part's share can be measured (by
//! time, or by instruction counts under callgrind).
//!
//! The tree holds [`NR_RANGES`] page-sized ranges in the even slots,
//! inserted in random order; every operation pair inserts a range into a
//! random odd slot and removes it again, as the kernel's writer does.
//!
//! Variants ([`Variant`]), each adding one part to the one before:
//!
//! * `tree`: [`Writer::insert`] and [`Writer::remove`] alone.  Nodes are
//!   put in the reserve, and retired ones freed, outside the timed
//!   stretches.
//! * `bound`: plus the two [`Tree::reserve_bound`] calls that
//!   `RangeTree::update` makes per update.
//! * `alloc`: plus the reserve top-up, one heap allocation per node used.
//! * `free`: plus freeing the retired nodes, in batches of
//!   [`RETIRE_BATCH`] (the kernel frees them from an RCU callback).
//! * `kernel`: the protocol of `RangeTree::update` in
//!   `mm/bonsai_rs/bonsai.rs`, step by step (top-up outside the lock from
//!   the last section's hints, writer mutex, pending list handed off in
//!   batches), with a `std` mutex and batches freed at once.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use kernel::prelude::*;

use crate::rng::Rng;
use crate::tree::{NodeReserve, RetiredList, Tree, Writer};

/// Ranges that stay in the tree, as in the kernel benchmark.
pub const NR_RANGES: usize = 1000;
/// Nodes retired before a batch is freed, as `bonsai::RETIRE_BATCH`.
pub const RETIRE_BATCH: usize = 64;

const PAGE: usize = 4096;
const BASE: usize = 0x1_0000_0000;
const STRIDE: usize = 16 * PAGE;
const LEN: usize = 4 * PAGE;
/// Operation pairs between two pauses of the variants short of `kernel`,
/// where the reserve is refilled (unless the variant allocates) and the
/// retired nodes are freed (unless the variant frees them).
const CHUNK: usize = 512;

fn slot_start(slot: usize) -> usize {
    BASE + slot * STRIDE
}

/// What a run includes; see the module documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// The tree algorithm only.
    Tree,
    /// Plus the reserve bound, computed twice per update.
    Bound,
    /// Plus one heap allocation per node taken from the reserve.
    Alloc,
    /// Plus freeing retired nodes in batches.
    Free,
    /// The kernel wrapper's protocol.
    Kernel,
}

impl Variant {
    /// Every variant, in table order.
    pub const ALL: [Variant; 5] = [
        Variant::Tree,
        Variant::Bound,
        Variant::Alloc,
        Variant::Free,
        Variant::Kernel,
    ];

    /// The variant's name in the table.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Tree => "tree",
            Variant::Bound => "bound",
            Variant::Alloc => "alloc",
            Variant::Free => "free",
            Variant::Kernel => "kernel",
        }
    }

    /// The variant called `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.name() == name)
    }
}

/// A tree filled with the permanent ranges, and the writer's state.
struct Bench {
    /// Permanent ranges.
    ranges: usize,
    tree: Tree<usize>,
    reserve: NodeReserve<usize>,
    retired: RetiredList<usize>,
    rng: Rng,
}

impl Bench {
    fn new(seed: u64, ranges: usize) -> Self {
        let mut b = Self {
            ranges,
            tree: Tree::new(),
            reserve: NodeReserve::new(),
            retired: RetiredList::new(),
            rng: Rng::new(seed),
        };
        let mut order: Vec<usize> = (0..ranges).collect();
        b.rng.shuffle(&mut order);
        for k in order {
            let slot = 2 * k;
            b.reserve
                .fill(b.tree.reserve_bound(), GFP_KERNEL)
                .expect("host allocation");
            b.writer()
                .insert(slot_start(slot), slot_start(slot) + LEN, slot + 1)
                .expect("permanent ranges do not overlap");
        }
        b.free_retired();
        b
    }

    fn writer(&mut self) -> Writer<'_, usize> {
        // SAFETY: `&mut self` makes this the only writer of `self.tree`.
        unsafe { self.tree.writer(&mut self.reserve, &mut self.retired) }
    }

    fn free_retired(&mut self) {
        let list = core::mem::take(&mut self.retired);
        // SAFETY: the benchmark has no reader: nobody can hold a node.
        unsafe { list.free() };
    }

    fn next_slot(&mut self) -> usize {
        2 * self.rng.below(self.ranges as u64) as usize + 1
    }

    /// `pairs` operation pairs with the parts `v` includes; returns the
    /// nanoseconds spent in them (pauses between chunks left out).
    fn run_parts(&mut self, pairs: usize, v: Variant) -> u128 {
        let bound = v != Variant::Tree;
        let alloc = matches!(v, Variant::Alloc | Variant::Free);
        let free = v == Variant::Free;
        let mut ns = 0;
        let mut done = 0;
        while done < pairs {
            let n = CHUNK.min(pairs - done);
            if !alloc {
                // An insert takes a leaf and two nodes per rotation (rarely
                // more than one); a remove one per level it copies.
                let want = self.tree.reserve_bound() + 8 * n;
                self.reserve
                    .fill(want, GFP_KERNEL)
                    .expect("host allocation");
            }
            let t0 = Instant::now();
            for _ in 0..n {
                let slot = self.next_slot();
                let start = slot_start(slot);
                self.update(bound, alloc, free, |w| {
                    w.insert(start, start + LEN, slot + 1)
                        .expect("insert into a free slot")
                });
                self.update(bound, alloc, free, |w| {
                    w.remove(start).expect("remove what was inserted")
                });
            }
            ns += t0.elapsed().as_nanos();
            self.free_retired();
            done += n;
        }
        ns
    }

    /// One update, with the parts asked for.
    #[inline]
    fn update(
        &mut self,
        bound: bool,
        alloc: bool,
        free: bool,
        f: impl FnOnce(&mut Writer<'_, usize>),
    ) {
        if bound {
            // `RangeTree::update` computes the bound before and under the
            // lock.
            let want = black_box(self.tree.reserve_bound());
            let _ = black_box(self.tree.reserve_bound());
            if alloc {
                self.reserve
                    .fill(want, GFP_KERNEL)
                    .expect("host allocation");
            }
        }
        f(&mut self.writer());
        if free && self.retired.len() >= RETIRE_BATCH {
            self.free_retired();
        }
    }
}

/// Mirror of `RangeTree` in `mm/bonsai_rs/bonsai.rs`: what its writer
/// mutex protects, and the hints published for the next top-up.
struct KernelLike {
    bench: Bench,
    state: Mutex<KernelState>,
    reserve_hint: AtomicUsize,
    spare_hint: AtomicBool,
    pending_hint: AtomicUsize,
    /// Keep retired batches (in `kept`) instead of freeing them.
    keep_retired: bool,
    kept: Mutex<RetiredList<usize>>,
}

struct KernelState {
    reserve: NodeReserve<usize>,
    pending: RetiredList<usize>,
    /// Stands in for the spare `RetireBatch` box: one allocation per batch.
    spare: Option<Box<RetiredList<usize>>>,
}

impl KernelLike {
    fn new(seed: u64, ranges: usize) -> Self {
        let mut bench = Bench::new(seed, ranges);
        let reserve = core::mem::take(&mut bench.reserve);
        Self {
            bench,
            state: Mutex::new(KernelState {
                reserve,
                pending: RetiredList::new(),
                spare: None,
            }),
            reserve_hint: AtomicUsize::new(0),
            spare_hint: AtomicBool::new(false),
            pending_hint: AtomicUsize::new(0),
            keep_retired: false,
            kept: Mutex::new(RetiredList::new()),
        }
    }

    fn publish_hints(&self, st: &KernelState) {
        self.reserve_hint.store(st.reserve.len(), Ordering::Relaxed);
        self.spare_hint.store(st.spare.is_some(), Ordering::Relaxed);
        self.pending_hint.store(st.pending.len(), Ordering::Relaxed);
    }

    fn update(&self, f: impl FnOnce(&mut Writer<'_, usize>)) {
        let tree = &self.bench.tree;
        let mut local = NodeReserve::new();
        let mut spare = None;
        loop {
            let want = tree.reserve_bound();
            let have = self.reserve_hint.load(Ordering::Relaxed);
            local
                .fill(want.saturating_sub(have), GFP_KERNEL)
                .expect("host allocation");
            if spare.is_none() && !self.spare_hint.load(Ordering::Relaxed) {
                spare = Some(Box::new(RetiredList::new()));
            }
            let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let st = &mut *guard;
            st.reserve.append(&mut local);
            if st.spare.is_none() {
                st.spare = spare.take();
            }
            if st.reserve.len() < tree.reserve_bound() || st.spare.is_none() {
                self.publish_hints(st);
                continue;
            }
            {
                // SAFETY: the mutex stands for the writer lock; it is held
                // until the writer, scoped to this block, is dropped.
                let mut w = unsafe { tree.writer(&mut st.reserve, &mut st.pending) };
                f(&mut w);
            }
            let batch = if st.pending.len() >= RETIRE_BATCH {
                st.spare.take().map(|mut b| {
                    b.append(&mut st.pending);
                    b
                })
            } else {
                None
            };
            self.publish_hints(st);
            drop(guard);
            if let Some(mut b) = batch {
                if self.keep_retired {
                    let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
                    kept.append(&mut b);
                } else {
                    let list = core::mem::take(&mut *b);
                    // SAFETY: without `keep_retired` the benchmark has no
                    // reader.
                    unsafe { list.free() };
                }
            }
            return;
        }
    }

    fn run(&mut self, pairs: usize) -> u128 {
        let t0 = Instant::now();
        for _ in 0..pairs {
            let slot = self.bench.next_slot();
            let start = slot_start(slot);
            self.update(|w| {
                w.insert(start, start + LEN, slot + 1)
                    .expect("insert into a free slot")
            });
            self.update(|w| w.remove(start).expect("remove"));
        }
        t0.elapsed().as_nanos()
    }
}

impl Drop for KernelLike {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        let mut list = core::mem::take(&mut st.pending);
        list.append(self.kept.get_mut().unwrap_or_else(|e| e.into_inner()));
        // SAFETY: `&mut self`: the reader of `reader_phases` has ended.
        unsafe { list.free() };
    }
}

/// Runs `pairs` operation pairs of `variant` on a fresh tree; returns the
/// nanoseconds per operation (an insert or a remove).
pub fn run(variant: Variant, pairs: usize, seed: u64) -> f64 {
    let ns = match variant {
        Variant::Tree | Variant::Bound | Variant::Alloc | Variant::Free => {
            Bench::new(seed, NR_RANGES).run_parts(pairs, variant)
        }
        Variant::Kernel => KernelLike::new(seed, NR_RANGES).run(pairs),
    };
    ns as f64 / (2 * pairs.max(1)) as f64
}

/// Lookups per second of one reader next to a writer that alternates
/// between idling (spinning) and working all the time (the `kernel`
/// variant's updates), in `phases` phases of `ms` milliseconds each,
/// starting idle, on a tree of `ranges` permanent ranges.  Returns each
/// phase's rate.
///
/// Short alternating phases in one run, rather than separate runs, so
/// that slow drift in what the machine gives the threads (other jobs,
/// frequency) hits both alike.
pub fn reader_phases(phases: usize, ms: u64, ranges: usize, seed: u64) -> Vec<f64> {
    use std::sync::atomic::AtomicU64;
    use std::time::Duration;

    let mut k = KernelLike::new(seed, ranges);
    // Nodes retired during the run are freed after it, once the reader
    // is gone, so that no reclamation scheme of the host's interferes.
    k.keep_retired = true;
    let stop = AtomicBool::new(false);
    let phase = AtomicU64::new(0);
    let counts: Vec<AtomicU64> = (0..phases).map(|_| AtomicU64::new(0)).collect();
    let mut lengths = Vec::with_capacity(phases);
    std::thread::scope(|s| {
        let k = &k;
        let (stop, phase, counts) = (&stop, &phase, &counts);
        s.spawn(move || {
            let g = crate::host_rcu::NoReclaim;
            let mut rng = Rng::new(seed ^ 0x5245_4144);
            let mut wrong = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let p = phase.load(Ordering::Relaxed) as usize;
                for _ in 0..64 {
                    let r = rng.next_u64();
                    let slot = 2 * (((r & 0xffff_ffff) * ranges as u64) >> 32) as usize;
                    let addr = slot_start(slot) + (r >> 32) as usize % LEN;
                    let v = k.bench.tree.find(&g, addr).map_or(0, |e| *e.value);
                    wrong += u64::from(v != slot + 1);
                }
                if let Some(c) = counts.get(p) {
                    c.fetch_add(64, Ordering::Relaxed);
                }
            }
            assert_eq!(wrong, 0, "a lookup missed a permanent range");
        });
        s.spawn(move || {
            let mut rng = Rng::new(seed ^ 0x5752_4954);
            while !stop.load(Ordering::Relaxed) {
                if phase.load(Ordering::Relaxed) % 2 == 0 {
                    core::hint::spin_loop();
                    continue;
                }
                let slot = 2 * rng.below(ranges as u64) as usize + 1;
                let start = slot_start(slot);
                k.update(|w| {
                    w.insert(start, start + LEN, slot + 1)
                        .expect("insert into a free slot")
                });
                k.update(|w| w.remove(start).expect("remove"));
            }
        });
        for p in 0..phases {
            let t0 = Instant::now();
            phase.store(p as u64, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(ms));
            lengths.push(t0.elapsed().as_secs_f64());
        }
        phase.store(phases as u64, Ordering::Relaxed);
        stop.store(true, Ordering::Relaxed);
    });
    counts
        .iter()
        .zip(lengths)
        .map(|(c, secs)| c.load(Ordering::Relaxed) as f64 / secs)
        .collect()
}

/// The reader's lookup rate next to the working writer over its rate next
/// to the idle one, from [`reader_phases`]: every busy phase against the
/// mean of the idle phases around it; returns the median ratio and the
/// median idle rate.
pub fn lookup_ratio(pairs: usize, ms: u64, ranges: usize) -> (f64, f64) {
    let rates = reader_phases(2 * pairs + 1, ms, ranges, 1);
    let mut ratios: Vec<f64> = (1..rates.len() - 1)
        .step_by(2)
        .map(|b| rates[b] / ((rates[b - 1] + rates[b + 1]) / 2.0))
        .collect();
    let mut idle: Vec<f64> = rates.iter().step_by(2).copied().collect();
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    (median(&mut ratios), median(&mut idle))
}
