// SPDX-License-Identifier: GPL-2.0

//! Fragmentation metrics of the zones, for guaranteed huge pages.
//!
//! A THP fault needs a free block of order 9 (a pageblock and a PMD on
//! x86-64).  Whether the buddy allocator has one, and whether compaction
//! could make one, is what these numbers tell, per populated zone:
//!
//! - the *unusable free space index* `U(j) = (F - sum_{i >= j} 2^i k_i) / F`
//!   for every order `j`, where `F` is the number of free pages and `k_i`
//!   the number of free blocks of order `i`: the share of free memory in
//!   blocks too small for an order-`j` allocation (Gorman and Whitcroft,
//!   "The What, The Why and The Where To of Anti-Fragmentation", 2006;
//!   the kernel's `debugfs/extfrag/unusable_index`).  `F = 0` gives 1,
//!   as in the kernel;
//! - the kernel's *external fragmentation index* at order 9
//!   (`debugfs/extfrag/extfrag_index`, `fragmentation_index()`):
//!   `1 - (1 + F / 2^j) / B` with `B` the number of free blocks, `-1`
//!   when a block of order `j` is free (the allocation would succeed)
//!   and 0 when nothing is free; towards 1 an allocation fails for
//!   fragmentation, towards 0 for lack of memory.  This is the FMFI of
//!   Illuminator (Panwar, PhD thesis, IISc 2022, section 2.2.4.2,
//!   equation 2.1);
//! - *pageblock pollution*, after Illuminator (section 2.3.2.1,
//!   "Fragmentation via pollution", and the unmovable index of section
//!   2.4.1): a movable pageblock holding even one unmovable page cannot
//!   become a huge page until that page is freed, however much is
//!   migrated out of it.  Counted are the movable pageblocks, those of
//!   them holding at least one unmovable page (polluted, the thesis's
//!   hybrid pageblocks of the movable pool), their ratio, and the
//!   unmovable pages found in movable pageblocks.  Reserved pages
//!   (`PageReserved()`: boot and firmware reservations, the memory map)
//!   are counted apart and do not pollute: no workload put them there.
//!
//! Indices are in thousandths.  The numbers come from racy snapshots of
//! the zones ([`kernel::mm::zone`]): they describe a moving system and
//! need not add up exactly across a zone.  The pages of a GCMA area are
//! never in the buddy allocator and have no reference when free, so they
//! count as free pages outside the buddy lists, not as free memory `F`.
//!
//! The census of a pageblock, which sorts its pages into free, movable,
//! unmovable and reserved ones ([`PageblockCensus`]), is this module's
//! too: it is the policy of the pollution measure.  `kernel::mm::zone`
//! only provides the mechanism it walks: the zones, their pageblocks and
//! migrate types, and a racy read of one page ([`Zone::page_snapshot`]).
//!
//! The arithmetic is in pure functions of the counts ([`unusable_index`],
//! [`fragmentation_index`], [`Pollution::of`], [`ZoneMetrics::from_counts`],
//! and [`census_with`] for the census) so that the tests check it on known
//! layouts; [`ZoneMetrics::measure`] feeds them a real zone.  [`show`]
//! writes the result to `/sys/kernel/debug/gcma/fragmentation`
//! (`crate::debugfs`), one line per populated zone.

use core::{fmt, ops::Range};
use kernel::{
    bindings,
    delay::{self, MaySleep},
    mm::{
        zone::{
            self, FreeArea, MigrateType, OnlineMems, PageSnapshot, Pageblock, Zone, NR_PAGE_ORDERS,
        },
        MAX_PAGE_ORDER,
    },
    prelude::*,
};
#[cfg(CONFIG_DEBUG_FS)]
use kernel::{seq_file::SeqFile, seq_print};

/// The order the metrics single out: a PMD-sized huge page, and a
/// pageblock with 4 KiB pages (order 9).
pub(crate) const THP_ORDER: u32 = kernel::mm::PMD_ORDER;

/// Returns the unusable free space index at `order`, in thousandths: the
/// share of the free pages that sit in blocks smaller than `order`; 1000
/// when nothing is free.
pub(crate) fn unusable_index(free: &FreeArea, order: u32) -> u32 {
    let total = free.free_pages() as u64;
    if total == 0 {
        return 1000;
    }
    let suitable: u64 = (order as usize..NR_PAGE_ORDERS)
        .map(|i| (free.nr_free[i] as u64) << i)
        .sum();
    ((total - suitable) * 1000 / total) as u32
}

/// Returns the kernel's fragmentation index at `order` in thousandths, as
/// `fragmentation_index()` computes it (integer steps included): -1000 if
/// a free block of `order` or larger exists, 0 if nothing is free or the
/// order is beyond the buddy allocator's.
pub(crate) fn fragmentation_index(free: &FreeArea, order: u32) -> i32 {
    if order as usize >= NR_PAGE_ORDERS {
        return 0;
    }
    let blocks: u64 = free.nr_free.iter().map(|&n| n as u64).sum();
    if blocks == 0 {
        return 0;
    }
    if free.nr_free[order as usize..].iter().any(|&n| n != 0) {
        return -1000;
    }
    let requested = 1u64 << order;
    let pages = free.free_pages() as u64;
    1000 - ((1000 + pages * 1000 / requested) / blocks) as i32
}

/// Pageblock pollution over a set of pageblocks (Illuminator, section
/// 2.3.2.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Pollution {
    /// Pageblocks of migrate type movable.
    pub(crate) movable_blocks: usize,
    /// Movable pageblocks with at least one unmovable page.
    pub(crate) polluted_blocks: usize,
    /// Unmovable pages in movable pageblocks.
    pub(crate) unmovable_in_movable: usize,
    /// Reserved pages in movable pageblocks (not pollution).
    pub(crate) reserved_in_movable: usize,
}

impl Pollution {
    /// Returns the pollution of `blocks`: the migrate type (`None`:
    /// unknown) and census of each pageblock.
    // The tests' entry point; the kernel side adds pageblocks one by one.
    #[cfg(CONFIG_GCMA_KUNIT_TEST)]
    pub(crate) fn of<'a>(
        blocks: impl IntoIterator<Item = (Option<MigrateType>, &'a PageblockCensus)>,
    ) -> Self {
        let mut p = Self::default();
        for (mt, c) in blocks {
            p.add(mt, c);
        }
        p
    }

    /// Accounts for a pageblock of type `mt` (`None`: unknown) whose
    /// census is `c`.  Only movable pageblocks count.
    pub(crate) fn add(&mut self, mt: Option<MigrateType>, c: &PageblockCensus) {
        if mt != Some(MigrateType::Movable) {
            return;
        }
        self.movable_blocks += 1;
        if c.unmovable > 0 {
            self.polluted_blocks += 1;
        }
        self.unmovable_in_movable += c.unmovable;
        self.reserved_in_movable += c.reserved;
    }

    /// Returns the polluted share of the movable pageblocks in
    /// thousandths (0 without movable pageblocks).
    pub(crate) fn polluted_permille(&self) -> usize {
        (self.polluted_blocks * 1000)
            .checked_div(self.movable_blocks)
            .unwrap_or(0)
    }
}

/// The census of a pageblock's pages: each page frame is counted once, so
/// the counts sum to the pageblock's size in its zone
/// ([`Pageblock::pfns`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PageblockCensus {
    /// Pages in free buddy blocks.
    pub(crate) free_buddy: usize,
    /// Free pages outside the buddy lists (no reference).
    pub(crate) free_other: usize,
    /// Allocated pages that can be migrated (see
    /// [`PageSnapshot::movable`]).
    pub(crate) movable: usize,
    /// Reserved pages (`PageReserved()`).
    pub(crate) reserved: usize,
    /// Other allocated pages: slab, page tables, kernel allocations, pages
    /// in transit.
    pub(crate) unmovable: usize,
    /// Page frames without an online `struct page`, or whose page belongs
    /// to another zone.
    pub(crate) holes: usize,
}

impl PageblockCensus {
    /// Returns the number of page frames counted.
    // Used only by the KUnit suite.
    #[cfg(CONFIG_GCMA_KUNIT_TEST)]
    pub(crate) fn total(&self) -> usize {
        self.free_buddy
            + self.free_other
            + self.movable
            + self.reserved
            + self.unmovable
            + self.holes
    }

    /// Adds `other`'s counts to this census.
    // Used only by the KUnit suite.
    #[cfg(CONFIG_GCMA_KUNIT_TEST)]
    pub(crate) fn add(&mut self, other: &Self) {
        self.free_buddy += other.free_buddy;
        self.free_other += other.free_other;
        self.movable += other.movable;
        self.reserved += other.reserved;
        self.unmovable += other.unmovable;
        self.holes += other.holes;
    }
}

/// Takes the census of the page frames `pfns` as `read` shows them: the
/// walk [`census`] does on the real pages, for any page reader (tests give
/// it a synthetic layout).
///
/// `read(pfn)` is `None` for a hole.  A free buddy block of up to
/// `max_order` is counted whole from its head, and so is a free block that
/// starts before `pfns` and covers its start; an allocated folio is
/// classified by its head and counted whole; a free page outside the buddy
/// lists and a reserved page count one page each.  Orders found in a racy
/// read are checked (a buddy order above `max_order` or a misaligned head
/// counts one page), and nothing is counted outside `pfns`.
///
/// `frag_tests.rs` walks it over synthetic layouts (`census_by_hand` and
/// the cases after it).
pub(crate) fn census_with(
    pfns: Range<usize>,
    max_order: u32,
    mut read: impl FnMut(usize) -> Option<PageSnapshot>,
) -> PageblockCensus {
    let mut c = PageblockCensus::default();
    let mut pfn = pfns.start;
    // A free block that starts before the range and covers its start: its
    // head is the only page of it that says so.
    for order in 1..=max_order.min(usize::BITS - 2) {
        let head = pfn & !((1usize << order) - 1);
        if head == pfn {
            continue;
        }
        if let Some(b) = read(head).and_then(|p| p.buddy_order) {
            if b >= order && b <= max_order && head + (1usize << b) > pfn {
                let n = (head + (1usize << b)).min(pfns.end) - pfn;
                c.free_buddy += n;
                pfn += n;
                break;
            }
        }
    }
    while pfn < pfns.end {
        let left = pfns.end - pfn;
        let Some(p) = read(pfn) else {
            c.holes += 1;
            pfn += 1;
            continue;
        };
        let n = match p.buddy_order {
            Some(b) if b <= max_order && pfn % (1usize << b) == 0 => {
                let n = (1usize << b).min(left);
                c.free_buddy += n;
                n
            }
            _ if p.reserved => {
                c.reserved += 1;
                1
            }
            _ if p.unreferenced => {
                c.free_other += 1;
                1
            }
            _ => {
                // Folios are naturally aligned: the folio ends at the next
                // multiple of its size.
                let size = 1usize << p.folio_order.min(usize::BITS - 2);
                let n = ((pfn & !(size - 1)) + size - pfn).min(left);
                if p.movable {
                    c.movable += n;
                } else {
                    c.unmovable += n;
                }
                n
            }
        };
        pfn += n;
    }
    c
}

/// Takes the census of `pb`'s pages (a racy snapshot), holding off memory
/// hot-remove while it reads.  May sleep (`ctx`).
pub(crate) fn census(pb: &Pageblock, ctx: &MaySleep) -> PageblockCensus {
    let online = OnlineMems::get(ctx);
    census_with(pb.pfns(), MAX_PAGE_ORDER, |pfn| {
        pb.zone().page_snapshot(pfn, &online)
    })
}

/// Takes the census of every pageblock of `zone` and hands each to `f`
/// with its pageblock, letting other tasks run between pageblocks
/// (`cond_resched()`).  May sleep (`ctx`).
pub(crate) fn for_each_census(
    zone: &'static Zone,
    ctx: &MaySleep,
    mut f: impl FnMut(&Pageblock, &PageblockCensus),
) {
    for pb in zone.pageblocks() {
        let c = census(&pb, ctx);
        f(&pb, &c);
        delay::cond_resched(ctx);
    }
}

/// The metrics of one zone: one line of the debugfs file.
#[derive(Clone, Debug)]
pub(crate) struct ZoneMetrics {
    /// Node of the zone.
    pub(crate) node: u32,
    /// Name of the zone.
    pub(crate) name: &'static CStr,
    /// Free pages in the buddy lists.
    pub(crate) free_pages: usize,
    /// Unusable free space index of every order, thousandths.
    pub(crate) unusable: [u32; NR_PAGE_ORDERS],
    /// External fragmentation index at [`THP_ORDER`], thousandths.
    pub(crate) extfrag: i32,
    /// Pollution of the zone's movable pageblocks.
    pub(crate) pollution: Pollution,
}

impl ZoneMetrics {
    /// Computes the metrics of a zone from its free blocks and the
    /// pollution of its pageblocks.
    pub(crate) fn from_counts(
        node: u32,
        name: &'static CStr,
        free: &FreeArea,
        pollution: Pollution,
    ) -> Self {
        Self {
            node,
            name,
            free_pages: free.free_pages(),
            unusable: core::array::from_fn(|j| unusable_index(free, j as u32)),
            extfrag: fragmentation_index(free, THP_ORDER),
            pollution,
        }
    }

    /// Measures `zone`: a racy snapshot of its free blocks, then a census
    /// of each pageblock.  May sleep, which `ctx`, the caller's token,
    /// allows.
    ///
    /// Pageblocks that overlap a GCMA area are left out of the pollution
    /// measure: the area's pages never were the buddy allocator's, and
    /// those its primary clients hold off the LRU would read as unmovable
    /// pages in a movable block, which says nothing about fragmentation.
    pub(crate) fn measure(zone: &'static Zone, ctx: &MaySleep) -> Self {
        let free = zone.free_area();
        let mut pollution = Pollution::default();
        let mut areas = [(0usize, 0usize); bindings::GCMA_MAX_AREAS as usize];
        for (slot, a) in areas.iter_mut().zip(kernel::mm::gcma::reserved_areas()) {
            *slot = (a.base_pfn(), a.base_pfn() + a.nr_pages());
        }
        let block = zone::pageblock_nr_pages();
        let in_area = |start: usize| {
            areas
                .iter()
                .any(|&(lo, hi)| start < hi && start + block > lo)
        };
        for_each_census(zone, ctx, |pb, c| {
            if !in_area(pb.start_pfn()) {
                pollution.add(pb.migrate_type(), c)
            }
        });
        Self::from_counts(zone.node().as_u32(), zone.name(), &free, pollution)
    }

    /// The unusable free space index at [`THP_ORDER`].
    pub(crate) fn unusable_thp(&self) -> u32 {
        self.unusable
            .get(THP_ORDER as usize)
            .copied()
            .unwrap_or(1000)
    }
}

/// The first line of the debugfs file.
pub(crate) const HEADER: &str = "# node zone free_pages unusable_9 extfrag_9 movable_blocks \
polluted_blocks polluted_permille unmovable_in_movable reserved_in_movable unusable \
(indices in thousandths; unusable= lists orders 0..MAX_PAGE_ORDER)\n";

impl fmt::Display for ZoneMetrics {
    /// One line, `key=value` pairs separated by spaces, no newline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.pollution;
        write!(
            f,
            "node={} zone={} free_pages={} unusable_9={} extfrag_9={} movable_blocks={} \
             polluted_blocks={} polluted_permille={} unmovable_in_movable={} \
             reserved_in_movable={} unusable=",
            self.node,
            self.name,
            self.free_pages,
            self.unusable_thp(),
            self.extfrag,
            p.movable_blocks,
            p.polluted_blocks,
            p.polluted_permille(),
            p.unmovable_in_movable,
            p.reserved_in_movable,
        )?;
        for (j, u) in self.unusable.iter().enumerate() {
            write!(f, "{}{}", if j == 0 { "" } else { "," }, u)?;
        }
        Ok(())
    }
}

/// Shows the fragmentation metrics of every populated zone in `m`, a
/// header line and a line per zone: `/sys/kernel/debug/gcma/fragmentation`
/// (`crate::debugfs`).  May sleep, which `ctx`, the caller's token, allows.
#[cfg(CONFIG_DEBUG_FS)]
pub(crate) fn show(m: &SeqFile, ctx: &MaySleep) {
    seq_print!(m, "{}", HEADER);
    for z in zone::all_zones().filter(|z| z.is_populated()) {
        seq_print!(m, "{}\n", ZoneMetrics::measure(z, ctx));
    }
}
