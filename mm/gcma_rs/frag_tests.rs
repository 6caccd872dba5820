// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `gcma_frag`: the fragmentation metrics on zones of known
//! layout (synthetic counts worked out by hand), the line format of the
//! debugfs file, and consistency on the real zones.

use crate::frag::{fragmentation_index, unusable_index, Pollution, ZoneMetrics, HEADER, THP_ORDER};
use kernel::{
    c_str, kunit_expect, kunit_expect_eq,
    mm::{
        buddy::ContigPages,
        zone::{self, FreeArea, MigrateType, PageblockCensus, NR_PAGE_ORDERS},
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
    let block = ContigPages::alloc(None, THP_ORDER, GFP_KERNEL)?;
    let pfn = block.pfn();
    let mut spanning = 0;
    for z in zone::all_zones().filter(|z| z.is_populated()) {
        check_invariants(&ZoneMetrics::measure(z));
        if !z.pfns().contains(&pfn) {
            continue;
        }
        spanning += 1;
        for pb in z.pageblocks().filter(|pb| pb.pfns().contains(&pfn)) {
            let c = pb.census();
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
        check_invariants(&ZoneMetrics::measure(z));
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
        line_format,
        real_zones_consistent,
    ],
}
