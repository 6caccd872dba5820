// expect: E0502
//! While an RCU guard made by `rcu::read_lock` lives, the token it borrows
//! cannot be used to sleep.
use kernel::{
    delay::{self, MaySleep},
    sync::rcu,
};

pub fn misuse(ctx: &mut MaySleep) {
    let guard = rcu::read_lock(ctx);
    delay::msleep(ctx, 1);
    drop(guard);
}
