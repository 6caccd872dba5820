// expect: E0502
//! `RangeTree::for_each` holds one read-side section for the whole walk;
//! its closure cannot call `cond_resched` through the borrowed token.
use bonsai::RangeTree;
use kernel::delay::{self, MaySleep};

pub fn misuse(tree: &RangeTree<u64>, ctx: &mut MaySleep) {
    tree.for_each(ctx, |_| delay::cond_resched(ctx));
}
