// expect: E0499
//! One token, one read-side section: a walk that needs the token cannot
//! start while a guard holds it (two mutable borrows).
use kernel::{delay::MaySleep, sync::rcu};
use rcx::list::RcxList;

pub fn misuse(list: &RcxList<u64>, ctx: &mut MaySleep) {
    let guard = rcu::read_lock(ctx);
    list.for_each_key(ctx, |_| {});
    drop(guard);
}
