// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `gcma_frag`: the fragmentation metrics on zones of known
//! layout (synthetic counts worked out by hand), the pageblock census on
//! synthetic page layouts, the line format of the debugfs file, and
//! consistency on the real zones.

use crate::frag::{
    census_with, for_each_census, fragmentation_index, unusable_index, PageblockCensus, Pollution,
    ZoneMetrics, HEADER, THP_ORDER,
};
use kernel::{
    c_str,
    delay::MaySleep,
    kunit_expect, kunit_expect_eq,
    mm::{
        buddy::ContigPages,
        zone::{self, FreeArea, MigrateType, PageSnapshot, NR_PAGE_ORDERS},
    },
    prelude::*,
    str::CString,
};

/// A free area with `blocks[i] = (order, count)`.
fn free_area(blocks: &[(usize, usize)]) -> FreeArea {
    let mut f = FreeArea::default();
    for &(order, n) in blocks {
        f.nr_free[order] += n;
    }
    f
}

/// All free memory in order-0 blocks: nothing is usable above order 0.
fn all_order0() -> Result {
    let f = free_area(&[(0, 1000)]);
    kunit_expect_eq!(unusable_index(&f, 0), 0);
    for j in 1..NR_PAGE_ORDERS as u32 {
        kunit_expect_eq!(unusable_index(&f, j), 1000);
    }
    // 1000 - (1000 + 1000 * 1000 / 512) / 1000 = 1000 - 2953 / 1000.
    kunit_expect_eq!(fragmentation_index(&f, THP_ORDER), 998);
    Ok(())
}

/// One free order-10 block: everything is usable up to order 10, and an
/// order-9 allocation succeeds.
fn one_order10_block() -> Result {
    let f = free_area(&[(10, 1)]);
    for j in 0..NR_PAGE_ORDERS as u32 {
        kunit_expect_eq!(unusable_index(&f, j), 0);
    }
    kunit_expect_eq!(fragmentation_index(&f, THP_ORDER), -1000);
    Ok(())
}

/// Mixed layouts, computed by hand.
fn mixed_by_hand() -> Result {
    // F = 100 + 10 * 8 + 2 * 512 + 1024 = 2228.
    let f = free_area(&[(0, 100), (3, 10), (9, 2), (10, 1)]);
    kunit_expect_eq!(f.free_pages(), 2228);
    let want = [0, 44, 44, 44, 80, 80, 80, 80, 80, 80, 540];
    for (j, &u) in want.iter().enumerate().take(NR_PAGE_ORDERS) {
        kunit_expect_eq!(unusable_index(&f, j as u32), u);
    }
    kunit_expect_eq!(fragmentation_index(&f, THP_ORDER), -1000);

    // No order-9 block: F = 512 + 2 * 256 = 1024 in B = 514 blocks.
    // 1000 - (1000 + 1024 * 1000 / 512) / 514 = 1000 - 3000 / 514 = 995.
    let f = free_area(&[(0, 512), (8, 2)]);
    kunit_expect_eq!(unusable_index(&f, THP_ORDER), 1000);
    kunit_expect_eq!(unusable_index(&f, 8), 500);
    kunit_expect_eq!(fragmentation_index(&f, THP_ORDER), 995);
    // Few large blocks: short of memory rather than fragmented.
    // F = 256 in B = 1: 1000 - (1000 + 500) / 1 = -500, as the kernel has it.
    let f = free_area(&[(8, 1)]);
    kunit_expect_eq!(fragmentation_index(&f, THP_ORDER), -500);
    // Beyond the buddy allocator's orders.
    kunit_expect_eq!(fragmentation_index(&f, NR_PAGE_ORDERS as u32), 0);

    // Nothing free: all free memory (none) is unusable.
    let f = FreeArea::default();
    for j in 0..NR_PAGE_ORDERS as u32 {
        kunit_expect_eq!(unusable_index(&f, j), 1000);
    }
    kunit_expect_eq!(fragmentation_index(&f, THP_ORDER), 0);
    Ok(())
}

fn census(free: usize, movable: usize, unmovable: usize, reserved: usize) -> PageblockCensus {
    PageblockCensus {
        free_buddy: free,
        movable,
        unmovable,
        reserved,
        ..Default::default()
    }
}

/// Pollution of a hand-made list of pageblocks.
fn pollution_by_hand() -> Result {
    use MigrateType::*;
    let blocks = [
        (Some(Movable), census(0, 512, 0, 0)),   // clean
        (Some(Movable), census(0, 500, 12, 0)),  // polluted, 12
        (Some(Movable), census(511, 0, 1, 0)),   // polluted, 1
        (Some(Movable), census(0, 0, 0, 512)),   // reserved only: clean
        (Some(Movable), census(500, 0, 0, 12)),  // reserved: clean
        (Some(Unmovable), census(0, 0, 512, 0)), // not movable
        (Some(Reclaimable), census(0, 0, 512, 0)),
        (Some(Cma), census(0, 0, 3, 0)),
        (None, census(0, 0, 9, 0)),
        (Some(Other(77)), census(0, 0, 9, 0)),
    ];
    let p = Pollution::of(blocks.iter().map(|(mt, c)| (*mt, c)));
    kunit_expect_eq!(
        p,
        Pollution {
            movable_blocks: 5,
            polluted_blocks: 2,
            unmovable_in_movable: 13,
            reserved_in_movable: 524,
        }
    );
    kunit_expect_eq!(p.polluted_permille(), 400);
    kunit_expect_eq!(Pollution::default().polluted_permille(), 0);
    let all = Pollution::of(blocks[1..3].iter().map(|(mt, c)| (*mt, c)));
    kunit_expect_eq!(all.polluted_permille(), 1000);
    Ok(())
}

fn free(order: u32) -> Option<PageSnapshot> {
    Some(PageSnapshot {
        buddy_order: Some(order),
        unreferenced: true,
        ..Default::default()
    })
}

fn used(folio_order: u32, movable: bool) -> Option<PageSnapshot> {
    Some(PageSnapshot {
        folio_order,
        movable,
        ..Default::default()
    })
}

/// A pageblock of 8 pages: a free order-2 block, a hole, a reserved page
/// and an order-1 movable folio.
fn census_by_hand() -> Result {
    let c = census_with(0..8, 10, |pfn| match pfn {
        0 => Some(PageSnapshot {
            buddy_order: Some(2),
            ..Default::default()
        }),
        4 => None,
        5 => Some(PageSnapshot {
            reserved: true,
            ..Default::default()
        }),
        _ => Some(PageSnapshot {
            folio_order: 1,
            movable: true,
            ..Default::default()
        }),
    });
    let want = PageblockCensus {
        free_buddy: 4,
        holes: 1,
        reserved: 1,
        movable: 2,
        ..Default::default()
    };
    kunit_expect_eq!(c, want);
    Ok(())
}

/// Buddy blocks are skipped whole, tails of buddy blocks are never
/// read as pages, and folios are counted whole by their head.
fn census_skips_blocks() -> Result {
    let mut reads = 0;
    // 16 pages: free order-3 block at 0, unmovable order-2 folio at 8,
    // pcp page at 12, movable pages at 13..16.
    let c = census_with(0..16, 10, |pfn| {
        reads += 1;
        match pfn {
            0 => free(3),
            1..=7 => Some(PageSnapshot {
                unreferenced: true,
                ..Default::default()
            }),
            8..=11 => used(2, false),
            12 => Some(PageSnapshot {
                unreferenced: true,
                ..Default::default()
            }),
            _ => used(0, true),
        }
    });
    kunit_expect_eq!(
        c,
        PageblockCensus {
            free_buddy: 8,
            unmovable: 4,
            free_other: 1,
            movable: 3,
            ..Default::default()
        }
    );
    kunit_expect_eq!(c.total(), 16);
    // Pages 0, 8, 12, 13, 14 and 15; pfn 0 is aligned to every order,
    // so no head of an enclosing block is looked up.
    kunit_expect_eq!(reads, 6);
    Ok(())
}

/// A free block that begins before the range covers its start (the
/// second pageblock of a free order-10 block), and one that begins
/// before but ends inside.
fn census_enclosing_block() -> Result {
    let c = census_with(512..1024, 10, |pfn| match pfn {
        0 => free(10),
        _ => Some(PageSnapshot {
            unreferenced: true,
            ..Default::default()
        }),
    });
    kunit_expect_eq!(c.free_buddy, 512);
    kunit_expect_eq!(c.total(), 512);
    // Free order-2 block at 4 covers 6 and 7 of the range 6..10.
    let c = census_with(6..10, 10, |pfn| match pfn {
        4 => free(2),
        8 => free(1),
        _ => used(0, false),
    });
    kunit_expect_eq!(c.free_buddy, 4);
    kunit_expect_eq!(c.total(), 4);
    Ok(())
}

/// Values a racy read may produce do not overrun the range: a buddy
/// order above the maximum, a misaligned buddy head, a huge folio
/// order, a folio that sticks out of the range.
fn census_racy_values_bounded() -> Result {
    let c = census_with(0..8, 10, |pfn| match pfn {
        0 => free(40),
        1 => free(2),
        2 => used(255, true),
        _ => None,
    });
    kunit_expect_eq!(c.total(), 8);
    kunit_expect_eq!(c.movable, 6);
    let c = census_with(4..6, 10, |pfn| match pfn {
        4 => used(3, false),
        _ => None,
    });
    kunit_expect_eq!(c.unmovable, 2);
    kunit_expect_eq!(c.total(), 2);
    Ok(())
}

/// The real zones of every online node: names, nodes, spans, and the
/// census of every pageblock adds up to the zone's span.
fn real_zones_add_up() -> Result {
    // SAFETY: a KUnit case runs in process context, with no atomic
    // section active.
    let ctx = unsafe { MaySleep::new() };
    let mut populated = 0;
    for z in zone::all_zones() {
        kunit_expect!(z.node().is_online(), "{:?} on an offline node", z);
        kunit_expect!(!z.name().as_bytes().is_empty());
        if !z.is_populated() {
            continue;
        }
        populated += 1;
        let mut sum = PageblockCensus::default();
        for_each_census(z, &ctx, |_, c| sum.add(c));
        kunit_expect_eq!(sum.total(), z.spanned_pages());
        // Holes of the span are at least the pages that are not present.
        kunit_expect!(
            sum.holes + sum.reserved >= z.spanned_pages() - z.present_pages(),
            "{:?}: {:?}, present {}",
            z,
            sum,
            z.present_pages()
        );
    }
    kunit_expect!(populated > 0);
    Ok(())
}

/// The line of a zone has exactly the keys, in the order, that the
/// scenarios and the demo parse.
fn line_format() -> Result {
    let f = free_area(&[(0, 100), (3, 10), (9, 2), (10, 1)]);
    let p = Pollution {
        movable_blocks: 5,
        polluted_blocks: 2,
        unmovable_in_movable: 13,
        reserved_in_movable: 524,
    };
    let m = ZoneMetrics::from_counts(1, c_str!("DMA32"), &f, p);
    let line = CString::try_from_fmt(kernel::fmt!("{}", m))?;
    let want = c_str!(
        "node=1 zone=DMA32 free_pages=2228 unusable_9=80 extfrag_9=-1000 movable_blocks=5 \
         polluted_blocks=2 polluted_permille=400 unmovable_in_movable=13 \
         reserved_in_movable=524 unusable=0,44,44,44,80,80,80,80,80,80,540"
    );
    kunit_expect!(line.as_bytes() == want.as_bytes(), "line {}", &*line);
    kunit_expect!(HEADER.starts_with('#') && HEADER.ends_with('\n'));
    Ok(())
}

/// Checks what must hold for the metrics of any zone, however racy.
fn check_invariants(m: &ZoneMetrics) {
    let mut prev = 0;
    for (j, &u) in m.unusable.iter().enumerate() {
        kunit_expect!(u <= 1000, "{}: unusable[{}] = {}", m, j, u);
        // One snapshot: usable memory can only shrink as the order grows.
        kunit_expect!(u >= prev, "{}: unusable not monotonic at {}", m, j);
        prev = u;
    }
    kunit_expect_eq!(m.unusable_thp(), m.unusable[THP_ORDER as usize]);
    kunit_expect!((-1000..=1000).contains(&m.extfrag), "{}", m);
    if m.free_pages == 0 {
        kunit_expect_eq!(m.unusable_thp(), 1000);
    }
    let p = &m.pollution;
    kunit_expect!(p.polluted_blocks <= p.movable_blocks, "{}", m);
    kunit_expect!(p.polluted_permille() <= 1000, "{}", m);
    kunit_expect!(p.unmovable_in_movable >= p.polluted_blocks, "{}", m);
}

/// On the real zones, with an order-9 block taken from the buddy
/// allocator and given back: the metrics of every populated zone keep
/// their invariants, and the pageblock of the block is not seen free.
fn real_zones_consistent() -> Result {
    // SAFETY: a KUnit case runs in process context, with no atomic section
    // active.
    let ctx = unsafe { MaySleep::new() };
    let block = ContigPages::alloc(None, THP_ORDER, GFP_KERNEL)?;
    let pfn = block.pfn();
    let mut spanning = 0;
    for z in zone::all_zones().filter(|z| z.is_populated()) {
        check_invariants(&ZoneMetrics::measure(z, &ctx));
        if !z.pfns().contains(&pfn) {
            continue;
        }
        spanning += 1;
        for pb in z.pageblocks().filter(|pb| pb.pfns().contains(&pfn)) {
            let c = crate::frag::census(&pb, &ctx);
            kunit_expect_eq!(c.total(), pb.pfns().len());
            // We hold the head page: it is neither in the buddy lists nor
            // without a reference (or it is a hole, in another zone).
            kunit_expect!(
                c.free_buddy + c.free_other < pb.pfns().len(),
                "{:?} of our block {:#x} seen free: {:?}",
                pb,
                pfn,
                c
            );
        }
    }
    kunit_expect!(spanning > 0, "no zone spans pfn {:#x}", pfn);
    drop(block);
    let mut zones = 0;
    for z in zone::all_zones().filter(|z| z.is_populated()) {
        check_invariants(&ZoneMetrics::measure(z, &ctx));
        zones += 1;
    }
    kunit_expect!(zones > 0);
    Ok(())
}

kernel::kunit_suite! {
    name: "gcma_frag",
    cases: [
        all_order0,
        one_order10_block,
        mixed_by_hand,
        pollution_by_hand,
        census_by_hand,
        census_skips_blocks,
        census_enclosing_block,
        census_racy_values_bounded,
        line_format,
        real_zones_add_up,
        real_zones_consistent,
    ],
}
