// SPDX-License-Identifier: GPL-2.0

//! Processor-level helpers for spin-wait loops, CPU identification, the
//! CPU-local clock and the execution context.

use crate::{bindings, init, init::PinInit};

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

/// Returns the time in nanoseconds by the CPU-local clock (`local_clock()`):
/// cheap on every machine, where `ktime_get_ns()` may read a slow
/// clocksource such as the HPET, and monotonic on one CPU.  Two readings on
/// different CPUs may be slightly out of order.
///
/// # Examples
///
/// ```
/// let t0 = kernel::processor::local_clock_ns();
/// let t1 = kernel::processor::local_clock_ns();
/// let _elapsed = t1.saturating_sub(t0);
/// ```
#[inline]
pub fn local_clock_ns() -> u64 {
    // SAFETY: FFI call without preconditions.
    unsafe { bindings::rsmm_local_clock() }
}

/// Whether the CPU runs in task context (`in_task()`): not in hard or soft
/// interrupt context, nor in an NMI.
///
/// # Examples
///
/// ```
/// // Doctests run from a KUnit test's kthread.
/// assert!(kernel::processor::in_task());
/// ```
#[inline]
pub fn in_task() -> bool {
    // SAFETY: FFI call without preconditions.
    unsafe { bindings::rsmm_in_task() }
}

/// Reports, under `CONFIG_DEBUG_ATOMIC_SLEEP`, a call from a context that
/// must not sleep (`might_sleep()`): for functions that may sleep on some
/// of their paths only, so that every caller in atomic context is caught.
#[inline]
pub fn might_sleep() {
    // SAFETY: FFI call without preconditions.
    unsafe { bindings::rsmm_might_sleep() }
}

/// Reports a kernel warning, as C's `WARN_ON(1)`: a `WARNING:` line, a
/// backtrace that shows the caller, and the `TAINT_WARN` taint.  The caller
/// logs what went wrong first.
pub fn warn() {
    // SAFETY: FFI call without preconditions.
    unsafe { bindings::rsmm_warn() }
}

/// Size of the cache lines [`CacheAligned`] pads to: 64 bytes, the line of
/// x86-64 and of most arm64 cores (`L1_CACHE_BYTES`).
pub const CACHE_LINE: usize = 64;

crate::static_assert!(CACHE_LINE == bindings::L1_CACHE_BYTES as usize);

/// A value on cache lines of its own.
///
/// The value starts a cache line, and the padding up to the next multiple
/// of [`CACHE_LINE`] keeps whatever follows off its last line, so that
/// stores to it do not take lines other CPUs read out of their caches
/// (false sharing).
///
/// # Examples
///
/// ```
/// use core::sync::atomic::AtomicUsize;
/// use kernel::processor::{CacheAligned, CACHE_LINE};
///
/// let words = [CacheAligned(AtomicUsize::new(0)), CacheAligned(AtomicUsize::new(0))];
/// assert_eq!(core::mem::size_of_val(&words[0]), CACHE_LINE);
/// assert_eq!(&words[0] as *const _ as usize % CACHE_LINE, 0);
/// ```
#[repr(C, align(64))]
pub struct CacheAligned<T>(pub T);

crate::static_assert!(core::mem::align_of::<CacheAligned<u8>>() == CACHE_LINE);

impl<T> CacheAligned<T> {
    /// Returns an initialiser of a `CacheAligned<T>` whose value `init`
    /// initialises in place, for values that must not move once
    /// initialised (a lock, say).
    ///
    /// The value is pinned wherever the `CacheAligned<T>` is: the wrapper
    /// is `Unpin` only if `T` is, and it has no destructor that could move
    /// the value out.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::{new_mutex, processor::{CacheAligned, CACHE_LINE}, sync::Mutex};
    ///
    /// let m = KBox::pin_init(CacheAligned::pin_init(new_mutex!(7u32)), GFP_KERNEL)?;
    /// assert_eq!(*m.0.lock(), 7);
    /// assert_eq!(&m.0 as *const Mutex<u32> as usize % CACHE_LINE, 0);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn pin_init<E>(init: impl PinInit<T, E>) -> impl PinInit<Self, E> {
        let init = move |slot: *mut Self| {
            // SAFETY: `slot` is valid for writes and will stay pinned
            // (the contract of the closure below), and so is its only
            // field: `addr_of_mut!` takes the field's address without
            // reading the uninitialised value.  On failure `init` leaves
            // the field uninitialised, which needs no cleanup.
            unsafe { init.__pinned_init(core::ptr::addr_of_mut!((*slot).0)) }
        };
        // SAFETY: on success the closure initialised the only field of
        // `Self`, whose other bytes are padding, so the whole value is
        // initialised; on failure it left nothing to clean up.  The field
        // is pinned along with `Self` (see above), as `init` requires.
        unsafe { init::pin_init_from_closure(init) }
    }
}
