// SPDX-License-Identifier: GPL-2.0

//! Sleeping for a while and yielding the CPU, and the context token that
//! allows it.
//!
//! Sleeping is only allowed in process context outside any atomic section:
//! a task that sleeps inside an RCU read-side critical section of a
//! non-preemptible-RCU kernel ends the grace period while it still uses
//! what the section protects.  The functions here that may sleep therefore
//! take a [`MaySleep`], a zero-sized token that proves the caller's
//! context.  The RCU read guards of [`crate::sync::rcu`] borrow the token
//! mutably for as long as they live, so that no sleeping call can be made
//! with it inside the read-side section, not even from a closure run under
//! the guard (the closure cannot capture the borrowed token).
//!
//! A token is made with the unsafe [`MaySleep::new`] at a boundary known
//! to be process context (a KUnit case, a work item, a C entry point that
//! calls `might_sleep()`) and passed down from there.  It is neither
//! [`Send`] nor [`Sync`], so it can be neither moved to nor shared with
//! another task, and no value that may be dropped from an RCU callback (a
//! `Send` value) can hold one.
//!
//! The token does not cover the kernel crate's own sleeping calls
//! (`Mutex::lock`, `GFP_KERNEL` allocations, ...), nor the spinlock
//! guards, which do not borrow it: that gap is the kernel crate's, and is
//! left to tools such as klint.  This is why dropping from an RCU callback
//! needs its own bound, [`crate::sync::rcu::AtomicDrop`].
//!
//! C headers: [`include/linux/delay.h`](srctree/include/linux/delay.h) and
//! [`include/linux/sched.h`](srctree/include/linux/sched.h)

use crate::bindings;
use core::marker::PhantomData;

/// Proof that its holder runs in process context, outside any atomic
/// section, and may therefore sleep.
///
/// Sleeping functions take it by shared reference; an RCU read guard
/// ([`crate::sync::rcu::read_lock`]) borrows it mutably for its whole
/// life, so the borrow checker rejects a sleeping call inside the
/// read-side section.  Neither [`Send`] nor [`Sync`], neither `Clone` nor
/// `Copy`.
///
/// Inside a read-side section the token is borrowed, so this is rejected
/// (`tools/build/check.sh compile-fail` keeps such snippets failing; kernel
/// doctests cannot be `compile_fail`):
///
/// ```text
/// let guard = rcu::read_lock(&mut ctx);
/// delay::msleep(&ctx, 1); // error[E0502]: `ctx` is also borrowed as mutable
/// drop(guard);
/// ```
pub struct MaySleep {
    _not_send: PhantomData<*mut ()>,
}

impl MaySleep {
    /// Returns a token for the current task.
    ///
    /// # Safety
    ///
    /// The caller runs in process context and no atomic section (a
    /// spinlock, an RCU read-side section, preemption or interrupts
    /// disabled) is active.  The token is not used inside an atomic section
    /// entered later, except through the guards that borrow it (the RCU
    /// guards of [`crate::sync::rcu`] do): a caller that takes a spinlock,
    /// or makes an RCU guard with [`crate::sync::rcu::Guard::new_unchecked`],
    /// keeps the token out of that section itself.
    #[inline]
    pub unsafe fn new() -> Self {
        Self {
            _not_send: PhantomData,
        }
    }
}

/// Sleeps for at least `ms` milliseconds (rounded up to whole jiffies).
///
/// # Examples
///
/// ```
/// use kernel::delay::{self, MaySleep};
///
/// // SAFETY: a doctest runs in its KUnit case's process context, with no
/// // atomic section active.
/// let ctx = unsafe { MaySleep::new() };
/// delay::msleep(&ctx, 1);
/// ```
pub fn msleep(_ctx: &MaySleep, ms: u32) {
    // SAFETY: FFI call; `_ctx` proves the caller may sleep.
    unsafe { bindings::msleep(ms as _) };
}

/// Lets another task run if the scheduler wants this CPU back.
///
/// Long loops in process context call it regularly: without forced
/// preemption they would otherwise keep the CPU from other tasks and
/// delay RCU grace periods.
///
/// # Examples
///
/// ```
/// use kernel::delay::{self, MaySleep};
///
/// // SAFETY: a doctest runs in its KUnit case's process context, with no
/// // atomic section active.
/// let ctx = unsafe { MaySleep::new() };
/// for _ in 0..1000 {
///     delay::cond_resched(&ctx);
/// }
/// ```
pub fn cond_resched(_ctx: &MaySleep) {
    // SAFETY: FFI call; `_ctx` proves the caller may sleep.
    unsafe { bindings::cond_resched() };
}
