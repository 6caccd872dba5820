// expect: E0502
//! `synchronize_rcu` inside a read-side section (a self-deadlock) does not
//! compile either.
use kernel::{delay::MaySleep, sync::rcu};

pub fn misuse(ctx: &mut MaySleep) {
    let guard = rcu::read_lock(ctx);
    rcu::synchronize_rcu(ctx);
    drop(guard);
}
