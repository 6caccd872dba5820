// SPDX-License-Identifier: GPL-2.0

//! Sleeping for a while and yielding the CPU.
//!
//! C headers: [`include/linux/delay.h`](srctree/include/linux/delay.h) and
//! [`include/linux/sched.h`](srctree/include/linux/sched.h)

use crate::bindings;

/// Sleeps for at least `ms` milliseconds (rounded up to whole jiffies).
///
/// Must be called from process context, outside any atomic section.
///
/// # Examples
///
/// ```
/// kernel::delay::msleep(1);
/// ```
pub fn msleep(ms: u32) {
    // SAFETY: FFI call; it may sleep, as documented above, which
    // `might_sleep()` inside checks.
    unsafe { bindings::msleep(ms as _) };
}

/// Lets another task run if the scheduler wants this CPU back.
///
/// Long loops in process context call it regularly: without forced
/// preemption they would otherwise keep the CPU from other tasks and
/// delay RCU grace periods.  Must not be called in atomic context.
///
/// # Examples
///
/// ```
/// for _ in 0..1000 {
///     kernel::delay::cond_resched();
/// }
/// ```
pub fn cond_resched() {
    // SAFETY: FFI call; it may sleep, as documented above.
    unsafe { bindings::cond_resched() };
}
