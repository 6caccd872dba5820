// expect: E0599
//! There is no safe way to enter a read-side section without a token:
//! `Guard::new` is gone (only the unsafe `Guard::new_unchecked` is left).
use kernel::sync::rcu;

pub fn misuse() {
    let guard = rcu::Guard::new();
    drop(guard);
}
