// SPDX-License-Identifier: GPL-2.0

//! Read-copy update (RCU).
//!
//! Readers enter a read-side critical section with [`read_lock`] and may
//! dereference RCU-protected pointers while the returned [`Guard`] lives.
//! Updaters publish new versions with release stores and reclaim old ones
//! only after a grace period: either by waiting with [`synchronize_rcu`], or
//! by handing a [`KBox`] to [`drop_after_gp`], which drops it from an RCU
//! callback once every reader that could still see it has finished.
//!
//! C header: [`include/linux/rcupdate.h`](srctree/include/linux/rcupdate.h)

use crate::{alloc::KBox, bindings, types::Opaque};
use core::marker::PhantomData;

/// An RCU read-side critical section; it ends when the guard is dropped.
///
/// The guard is neither [`Send`] nor [`Sync`]: the critical section belongs
/// to the task (and, with non-preemptible RCU, the CPU) that entered it.
///
/// # Examples
///
/// ```
/// use kernel::sync::rcu;
///
/// let guard = rcu::read_lock();
/// // Loads of RCU-protected pointers are valid here.
/// drop(guard);
/// ```
pub struct Guard {
    _not_send: PhantomData<*mut ()>,
}

impl Guard {
    /// Enters a read-side critical section.
    #[inline]
    pub fn new() -> Self {
        // SAFETY: FFI call without preconditions; the matching unlock is in
        // `Drop`, on the same task since `Guard` is `!Send`.
        unsafe { bindings::rcu_read_lock() };
        Self {
            _not_send: PhantomData,
        }
    }
}

impl Default for Guard {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Guard {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: `self` was created by `Guard::new`, which entered the read-side
        // critical section this call ends.
        unsafe { bindings::rcu_read_unlock() };
    }
}

/// Enters an RCU read-side critical section that ends when the guard drops.
#[inline]
pub fn read_lock() -> Guard {
    Guard::new()
}

/// Waits for a full grace period: every read-side critical section that was
/// running when the call began has ended when it returns.
///
/// Sleeps; must not be called from atomic context or inside a read-side
/// critical section (lockdep with `PROVE_RCU` reports both).
///
/// # Examples
///
/// ```
/// kernel::sync::rcu::synchronize_rcu();
/// ```
pub fn synchronize_rcu() {
    // SAFETY: FFI call; the sleeping requirement is documented above and
    // checked by `might_sleep()` inside.
    unsafe { bindings::synchronize_rcu() };
}

/// Waits until every callback queued with [`drop_after_gp`] (and any other
/// `call_rcu` callback queued before the call) has run.
///
/// Sleeps; needed before tearing down anything those callbacks use.
pub fn barrier() {
    // SAFETY: FFI call; sleeps, as documented above.
    unsafe { bindings::rcu_barrier() };
}

/// A `struct rcu_head` to embed in a type that is freed after a grace period.
///
/// See [`HasRcuHead`] and [`drop_after_gp`].
#[repr(transparent)]
pub struct RcuHead(Opaque<bindings::callback_head>);

impl RcuHead {
    /// Creates a head; RCU initialises it when the object is queued.
    pub const fn new() -> Self {
        Self(Opaque::uninit())
    }
}

impl Default for RcuHead {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: the head is only touched by RCU while its owner is queued, and by
// nobody otherwise, so moving it between threads is fine.
unsafe impl Send for RcuHead {}
// SAFETY: `&RcuHead` exposes no operation at all.
unsafe impl Sync for RcuHead {}

/// Types that embed an [`RcuHead`] and can be dropped after a grace period.
///
/// Implement it with [`impl_has_rcu_head!`](crate::impl_has_rcu_head).
///
/// # Safety
///
/// `RCU_HEAD_OFFSET` must be the byte offset of a field of type [`RcuHead`]
/// inside `Self`, and that field must be used for nothing else.
pub unsafe trait HasRcuHead {
    /// Offset of the embedded [`RcuHead`] in `Self`.
    const RCU_HEAD_OFFSET: usize;
}

/// Implements [`HasRcuHead`] for a struct with an [`RcuHead`] field.
///
/// # Examples
///
/// ```
/// use kernel::sync::rcu::{self, RcuHead};
///
/// struct Node {
///     key: u64,
///     rcu: RcuHead,
/// }
/// kernel::impl_has_rcu_head!(Node, rcu);
///
/// let node = KBox::new(Node { key: 7, rcu: RcuHead::new() }, GFP_KERNEL)?;
/// assert_eq!(node.key, 7);
/// // Readers that found `node` before it was unpublished may still use it:
/// // it is dropped only after a grace period.
/// rcu::drop_after_gp(node);
/// rcu::barrier();
/// # Ok::<(), Error>(())
/// ```
#[macro_export]
macro_rules! impl_has_rcu_head {
    ($type:ty, $field:ident) => {
        // SAFETY: `offset_of!` gives the offset of the named field, whose type
        // the `let` below checks to be `RcuHead`.
        unsafe impl $crate::sync::rcu::HasRcuHead for $type {
            const RCU_HEAD_OFFSET: usize = {
                fn _field_is_an_rcu_head(x: &$type) -> &$crate::sync::rcu::RcuHead {
                    &x.$field
                }
                ::core::mem::offset_of!($type, $field)
            };
        }
    };
}

/// Drops `obj` after an RCU grace period, from an RCU callback.
///
/// Readers that loaded a pointer to `obj` before the caller unpublished it
/// may keep using it until their critical sections end.  The destructor runs
/// in softirq context, so `T`'s `Drop` must not sleep.  Use [`barrier`] to
/// wait for pending drops (for example before a module unloads).
pub fn drop_after_gp<T: HasRcuHead + Send + 'static>(obj: KBox<T>) {
    let ptr = KBox::into_raw(obj);
    // SAFETY: by the `HasRcuHead` contract the head lies `RCU_HEAD_OFFSET`
    // bytes into the allocation `ptr` points to.
    let head = unsafe { ptr.cast::<u8>().add(T::RCU_HEAD_OFFSET) }.cast::<RcuHead>();
    // SAFETY: `head` points to a live `RcuHead` that nobody else uses; the
    // object stays allocated until `rcu_drop_callback::<T>` frees it.
    unsafe { bindings::call_rcu(Opaque::raw_get(head.cast()), Some(rcu_drop_callback::<T>)) };
}

/// Reconstructs the box that [`drop_after_gp`] leaked and drops it.
///
/// # Safety
///
/// `head` must be the head of an object of type `T` queued by
/// [`drop_after_gp`], called once per queueing, as RCU does.
unsafe extern "C" fn rcu_drop_callback<T: HasRcuHead>(head: *mut bindings::callback_head) {
    // SAFETY: per the function's contract `head` lies `RCU_HEAD_OFFSET` bytes
    // into a `T` allocated by `KBox`.
    let ptr = unsafe { head.cast::<u8>().sub(T::RCU_HEAD_OFFSET) }.cast::<T>();
    // SAFETY: `ptr` came from `KBox::into_raw` in `drop_after_gp` and is
    // reclaimed exactly once, here.
    drop(unsafe { KBox::from_raw(ptr) });
}

#[cfg(all(CONFIG_KUNIT, CONFIG_RUST_KERNEL_DOCTESTS))]
mod tests {
    //! KUnit suite `rust_kernel_rcu`, built alongside the kernel crate's doctests.

    use super::*;
    use crate::{kunit_expect_eq, prelude::*};
    use core::sync::atomic::{AtomicUsize, Ordering};

    static DROPPED: AtomicUsize = AtomicUsize::new(0);

    struct Tracked {
        rcu: RcuHead,
        weight: usize,
    }
    crate::impl_has_rcu_head!(Tracked, rcu);

    impl Drop for Tracked {
        fn drop(&mut self) {
            DROPPED.fetch_add(self.weight, Ordering::Relaxed);
        }
    }

    /// An object handed to `drop_after_gp` is not dropped while a reader
    /// that could see it is inside its critical section, and is dropped,
    /// exactly once, after the grace period.
    fn drop_waits_for_readers() -> Result {
        DROPPED.store(0, Ordering::Relaxed);
        let guard = read_lock();
        for weight in [1, 10, 100] {
            drop_after_gp(KBox::new(
                Tracked {
                    rcu: RcuHead::new(),
                    weight,
                },
                GFP_ATOMIC,
            )?);
        }
        // A callback cannot run before this reader's section ends; spin a
        // little to give a buggy implementation the chance to show itself.
        for _ in 0..100_000 {
            crate::processor::cpu_relax();
        }
        kunit_expect_eq!(DROPPED.load(Ordering::Relaxed), 0);
        drop(guard);
        barrier();
        kunit_expect_eq!(DROPPED.load(Ordering::Relaxed), 111);
        Ok(())
    }

    /// Read-side sections nest: ending the inner one leaves the reader inside
    /// the outer one, so an object retired meanwhile is not dropped until
    /// the outer section ends too, and then it is.
    fn guards_nest() -> Result {
        DROPPED.store(0, Ordering::Relaxed);
        let outer = read_lock();
        let inner = Guard::new();
        drop_after_gp(KBox::new(
            Tracked {
                rcu: RcuHead::new(),
                weight: 7,
            },
            GFP_ATOMIC,
        )?);
        drop(inner);
        for _ in 0..100_000 {
            crate::processor::cpu_relax();
        }
        kunit_expect_eq!(DROPPED.load(Ordering::Relaxed), 0);
        drop(outer);
        barrier();
        kunit_expect_eq!(DROPPED.load(Ordering::Relaxed), 7);
        Ok(())
    }

    crate::kunit_suite! {
        name: "rust_kernel_rcu",
        cases: [drop_waits_for_readers, guards_nest],
    }
}
