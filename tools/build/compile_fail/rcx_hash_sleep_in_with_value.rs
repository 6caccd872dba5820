// expect: E0502
//! Same for `RcxHash::with_value`.
use kernel::delay::{self, MaySleep};
use rcx::hash::RcxHash;

pub fn misuse(table: &RcxHash<u64>, ctx: &mut MaySleep) {
    table.with_value(ctx, 1, |_| delay::msleep(ctx, 1));
}
