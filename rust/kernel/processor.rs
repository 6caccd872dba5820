// SPDX-License-Identifier: GPL-2.0

//! Processor-level helpers for spin-wait loops and CPU identification.

use crate::bindings;

/// Tells the CPU the caller is busy-waiting (`PAUSE` on x86), which saves
/// power and frees resources for the sibling hyperthread.
///
/// # Examples
///
/// ```
/// use core::sync::atomic::{AtomicBool, Ordering};
///
/// let ready = AtomicBool::new(true);
/// while !ready.load(Ordering::Acquire) {
///     kernel::processor::cpu_relax();
/// }
/// ```
#[inline]
pub fn cpu_relax() {
    // SAFETY: FFI call without preconditions.
    unsafe { bindings::cpu_relax() };
}

/// Returns the id of the CPU the caller runs on, as a hint: the task may
/// migrate right after the call unless preemption is disabled.
///
/// # Examples
///
/// ```
/// assert!(kernel::processor::current_cpu_hint() < kernel::processor::nr_cpu_ids());
/// ```
#[inline]
pub fn current_cpu_hint() -> u32 {
    // SAFETY: FFI call without preconditions.
    unsafe { bindings::raw_smp_processor_id() as u32 }
}

/// Returns the number of possible CPU ids (`nr_cpu_ids`).
pub fn nr_cpu_ids() -> u32 {
    // SAFETY: FFI call without preconditions.
    unsafe { bindings::rust_nr_cpu_ids() }
}
