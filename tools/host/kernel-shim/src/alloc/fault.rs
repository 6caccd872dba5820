// SPDX-License-Identifier: GPL-2.0

//! Host-only allocation accounting and fault injection (no kernel
//! counterpart; only host tests use it, never shared modules).
//!
//! Everything is per thread: the counters see the allocations and frees
//! made by the calling thread, and an injected failure hits the calling
//! thread's allocations only, so tests running in parallel do not disturb
//! each other.

use super::{flags::__GFP_NOMEMALLOC, Flags};
use std::cell::Cell;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
    static FREES: Cell<u64> = const { Cell::new(0) };
    static FAIL_AFTER: Cell<Option<u64>> = const { Cell::new(None) };
    static ONLY_RESERVES: Cell<bool> = const { Cell::new(false) };
    static FROM_RESERVES: Cell<u64> = const { Cell::new(0) };
}

/// Models a thread in reclaim (`PF_MEMALLOC`) on a machine whose only free
/// memory is the reserves, while `on`: an allocation without
/// `__GFP_NOMEMALLOC` succeeds from the reserves (counted by
/// [`from_reserves`]), as the kernel's page allocator lets it; one with
/// the flag fails.
pub fn only_reserves_left(on: bool) {
    ONLY_RESERVES.with(|r| r.set(on));
}

/// Allocations this thread took from the reserves of
/// [`only_reserves_left`].
pub fn from_reserves() -> u64 {
    FROM_RESERVES.with(Cell::get)
}

/// Makes the allocation after the next `n` successful ones fail (so `0`
/// fails the very next one).  Only that one fails; later ones succeed.
pub fn fail_after(n: u64) {
    FAIL_AFTER.with(|f| f.set(Some(n)));
}

/// Cancels a pending [`fail_after`].
pub fn clear() {
    FAIL_AFTER.with(|f| f.set(None));
}

/// Allocations made by this thread so far (failed ones not counted).
pub fn allocations() -> u64 {
    ALLOCS.with(Cell::get)
}

/// Frees made by this thread so far.
pub fn frees() -> u64 {
    FREES.with(Cell::get)
}

/// Allocations made minus frees made by this thread: the number of live
/// blocks it is responsible for, when all of them stay on one thread.
pub fn live() -> i64 {
    allocations() as i64 - frees() as i64
}

/// Called before every allocation: returns `false` when it must fail.
pub(crate) fn on_alloc(flags: Flags) -> bool {
    if ONLY_RESERVES.with(Cell::get) {
        if flags.contains(__GFP_NOMEMALLOC) {
            return false;
        }
        FROM_RESERVES.with(|r| r.set(r.get() + 1));
    }
    let fail = FAIL_AFTER.with(|f| match f.get() {
        Some(0) => {
            f.set(None);
            true
        }
        Some(n) => {
            f.set(Some(n - 1));
            false
        }
        None => false,
    });
    if !fail {
        ALLOCS.with(|a| a.set(a.get() + 1));
    }
    !fail
}

/// Called after every free.
pub(crate) fn on_free() {
    FREES.with(|a| a.set(a.get() + 1));
}
