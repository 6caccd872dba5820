// SPDX-License-Identifier: GPL-2.0

//! GCMA's debugfs files, on [`kernel::debugfs`]:
//!
//! - `/sys/kernel/debug/gcma/fragmentation`: the fragmentation metrics of
//!   every populated zone ([`crate::frag`]), there whether or not an area
//!   is in service;
//! - `/sys/kernel/debug/gcma/<area>/alloc_latency`: the histogram of the
//!   area's allocation latencies, in power-of-two buckets of nanoseconds.
//!
//! Made once, by `gcma_rs_init()`, and kept for good, as the areas are.

use crate::{areas_in_service, frag, Area, LAT_BUCKETS};
use core::{
    ptr::null_mut,
    sync::atomic::{AtomicPtr, Ordering},
};
use kernel::{
    c_str,
    debugfs::{Dir, Show},
    delay::MaySleep,
    prelude::*,
    seq_file::SeqFile,
    seq_print,
};

/// The contents of `fragmentation`.
struct Fragmentation;

/// The one instance, which the file shows.
static FRAGMENTATION: Fragmentation = Fragmentation;

impl Show for Fragmentation {
    fn show(&self, m: &SeqFile, ctx: &MaySleep) -> Result {
        frag::show(m, ctx);
        Ok(())
    }
}

/// `alloc_latency`: a header line, then a line per non-empty bucket, its
/// lower bound in nanoseconds and its count.
impl Show for Area {
    fn show(&self, m: &SeqFile, _ctx: &MaySleep) -> Result {
        seq_print!(m, "# allocations taking [2^i, 2^(i+1)) ns\n");
        for (i, n) in self.lat.iter().enumerate().take(LAT_BUCKETS) {
            let n = n.load(Ordering::Relaxed);
            if n != 0 {
                seq_print!(m, "{:12} {}\n", 1u64 << i, n);
            }
        }
        Ok(())
    }
}

/// The directories, kept for good: their handles stay reachable from here,
/// so kmemleak does not take them for leaks.
static DIRS: AtomicPtr<KVec<Dir>> = AtomicPtr::new(null_mut());

/// Makes `/sys/kernel/debug/gcma/` with `fragmentation` and a directory
/// per area in service, all kept for good.  Called once, by
/// `gcma_rs_init()`.  A failure to allocate a handle is logged, and GCMA
/// goes on without the files.
pub(crate) fn init() {
    if !DIRS.load(Ordering::Acquire).is_null() {
        return;
    }
    let made = (|| -> Result<KVec<Dir>> {
        let root = Dir::new(c_str!("gcma"))?;
        root.read_only_file(c_str!("fragmentation"), &FRAGMENTATION);
        let mut dirs = KVec::new();
        for area in areas_in_service() {
            let dir = root.subdir(area.name())?;
            dir.read_only_file(c_str!("alloc_latency"), area);
            dirs.push(dir, GFP_KERNEL)?;
        }
        dirs.push(root, GFP_KERNEL)?;
        Ok(dirs)
    })()
    .and_then(|dirs| Ok(KBox::new(dirs, GFP_KERNEL)?));
    match made {
        Ok(dirs) => DIRS.store(KBox::into_raw(dirs), Ordering::Release),
        Err(e) => pr_warn!("no debugfs files ({:?})\n", e),
    }
}
