// expect: E0502
//! The guard of a test's workers borrows the test's token and sleeps when
//! dropped (it joins them): it cannot be dropped inside an RCU read-side
//! section entered with that token.
use kernel::{delay::MaySleep, kunit::suite::spawn_workers, sync::rcu};

pub fn misuse(ctx: &mut MaySleep) {
    let workers = spawn_workers(ctx, 1, |_| || {});
    let guard = rcu::read_lock(ctx);
    drop(workers);
    drop(guard);
}
