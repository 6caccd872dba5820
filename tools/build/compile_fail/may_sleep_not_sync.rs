// expect: E0277
//! Nor `Sync`: another task cannot use it through a shared reference.
use kernel::delay::MaySleep;

fn needs_send<T: Send>(_: T) {}

pub fn misuse(ctx: &MaySleep) {
    needs_send(ctx);
}
