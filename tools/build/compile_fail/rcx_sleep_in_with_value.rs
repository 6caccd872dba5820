// expect: E0502
//! A closure run by `RcxList::with_value` inside its read-side section
//! cannot sleep through the token `with_value` borrows.
use kernel::delay::{self, MaySleep};
use rcx::list::RcxList;

pub fn misuse(list: &RcxList<u64>, ctx: &mut MaySleep) {
    list.with_value(ctx, 1, |_| delay::cond_resched(ctx));
}
