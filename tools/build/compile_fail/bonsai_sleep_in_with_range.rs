// expect: E0502
//! A closure run by `RangeTree::with_range` inside its RCU read-side
//! section cannot sleep: `with_range` borrows the caller's `MaySleep`
//! mutably, so the closure cannot capture it for `msleep`.
use bonsai::RangeTree;
use kernel::delay::{self, MaySleep};

pub fn misuse(tree: &RangeTree<u64>) {
    // SAFETY: (pretend) process context, no atomic section.
    let mut ctx = unsafe { MaySleep::new() };
    tree.with_range(&mut ctx, 0, |_| delay::msleep(&ctx, 1));
}
