// expect: E0277
//! A token is not `Send`: it cannot move to another task (nor sit in a
//! value that `drop_after_gp` drops in softirq context).
use kernel::delay::MaySleep;

fn needs_send<T: Send>(_: T) {}

pub fn misuse(ctx: MaySleep) {
    needs_send(ctx);
}
