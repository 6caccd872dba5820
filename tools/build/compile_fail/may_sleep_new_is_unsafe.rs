// expect: E0133
//! A token is only made with `unsafe`, where the caller vouches for its
//! context.
use kernel::delay::{self, MaySleep};

pub fn misuse() {
    let ctx = MaySleep::new();
    delay::msleep(&ctx, 1);
}
