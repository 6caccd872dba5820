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
//! A reader must not sleep inside its section: with non-preemptible RCU a
//! sleep is a quiescent state, the grace period may end, and what the
//! reader still uses is freed.  [`read_lock`] therefore borrows the
//! caller's [`MaySleep`] token mutably for the guard's whole life, and the
//! sleeping functions ([`crate::delay::msleep`], [`synchronize_rcu`],
//! [`barrier`], ...) need that token: a sleep inside the section, written
//! directly or in a closure run under the guard, does not compile.
//! [`Guard::new_unchecked`] enters a section without a token, for code
//! that has none (atomic context) or runs no caller code under the guard.
//!
//! Objects handed to [`drop_after_gp`] are dropped in softirq context, so
//! their type must be [`AtomicDrop`]: `Send` alone does not say that a
//! `Drop` never sleeps.  (A [`MaySleep`] is neither `Send` nor `Sync`, so a
//! `Send` value cannot hold one, but the kernel crate's own sleeping calls,
//! such as `Mutex::lock` or a `GFP_KERNEL` allocation, take no token: that
//! gap is upstream's, left to tools such as klint, and the reason for the
//! explicit bound.)  The same gap remains inside a read-side section: the
//! token keeps out the sleeps that need it, not those that do not.
//!
//! C header: [`include/linux/rcupdate.h`](srctree/include/linux/rcupdate.h)

use crate::{alloc::KBox, bindings, delay::MaySleep, types::Opaque};
use core::marker::PhantomData;

/// An RCU read-side critical section; it ends when the guard is dropped.
///
/// The guard is neither [`Send`] nor [`Sync`]: the critical section belongs
/// to the task (and, with non-preemptible RCU, the CPU) that entered it.
/// A guard made by [`read_lock`] holds the mutable borrow `'a` of the
/// task's [`MaySleep`] token, so nothing can sleep through that token
/// until the guard is dropped.
///
/// # Examples
///
/// ```
/// use kernel::{delay::MaySleep, sync::rcu};
///
/// // SAFETY: a doctest runs in its KUnit case's process context, with no
/// // atomic section active.
/// let mut ctx = unsafe { MaySleep::new() };
/// let guard = rcu::read_lock(&mut ctx);
/// // Loads of RCU-protected pointers are valid here; `ctx` is borrowed,
/// // so `kernel::delay::msleep(&ctx, 1)` would not compile.
/// drop(guard);
/// rcu::synchronize_rcu(&ctx);
/// ```
pub struct Guard<'a> {
    _ctx: PhantomData<&'a mut MaySleep>,
    _not_send: PhantomData<*mut ()>,
}

impl<'a> Guard<'a> {
    /// Enters a read-side critical section without borrowing a token.
    ///
    /// For code that owns no [`MaySleep`] (it runs in atomic context), or
    /// that runs no code of its callers under the guard.
    ///
    /// # Safety
    ///
    /// No [`MaySleep`] of the current task is used while the guard lives
    /// (and nothing else sleeps).
    #[inline]
    pub unsafe fn new_unchecked() -> Self {
        // SAFETY: FFI call without preconditions; the matching unlock is in
        // `Drop`, on the same task since `Guard` is `!Send`.
        unsafe { bindings::rcu_read_lock() };
        Self {
            _ctx: PhantomData,
            _not_send: PhantomData,
        }
    }
}

impl Drop for Guard<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: `self` was created by `Guard::new_unchecked`, which entered
        // the read-side critical section this call ends.
        unsafe { bindings::rcu_read_unlock() };
    }
}

/// Enters an RCU read-side critical section that ends when the guard drops.
///
/// The guard borrows `ctx` mutably until then: no sleeping call can use
/// the token inside the section.
#[inline]
pub fn read_lock(ctx: &mut MaySleep) -> Guard<'_> {
    let _ = ctx;
    // SAFETY: the guard holds the only borrow of the task's token for its
    // whole life (a second token would come from an unsafe
    // `MaySleep::new`, whose contract keeps it out of this section).
    unsafe { Guard::new_unchecked() }
}

/// Waits for a full grace period: every read-side critical section that was
/// running when the call began has ended when it returns.
///
/// Sleeps: `_ctx` proves that the caller may, and that it is not inside a
/// read-side section entered with that token.
///
/// # Examples
///
/// ```
/// // SAFETY: a doctest runs in its KUnit case's process context, with no
/// // atomic section active.
/// let ctx = unsafe { kernel::delay::MaySleep::new() };
/// kernel::sync::rcu::synchronize_rcu(&ctx);
/// ```
pub fn synchronize_rcu(_ctx: &MaySleep) {
    // SAFETY: FFI call; `_ctx` proves the caller may sleep.
    unsafe { bindings::synchronize_rcu() };
}

/// Waits until every callback queued with [`drop_after_gp`] (and any other
/// `call_rcu` callback queued before the call) has run.
///
/// Sleeps (`_ctx`); needed before tearing down anything those callbacks
/// use.
pub fn barrier(_ctx: &MaySleep) {
    // SAFETY: FFI call; `_ctx` proves the caller may sleep.
    unsafe { bindings::rcu_barrier() };
}

/// Types whose values can be dropped in atomic context: from an RCU
/// callback, in softirq context, as [`drop_after_gp`] does.
///
/// `Send` does not imply it: a `Send` type may have a `Drop` that takes a
/// mutex, waits or allocates with `GFP_KERNEL`.  (It cannot sleep through
/// a [`MaySleep`], which is not `Send`, but the kernel crate's sleeping
/// calls take no token.)
///
/// # Safety
///
/// Dropping a value of the type never sleeps, and needs no lock that is
/// taken elsewhere with softirqs enabled (it is safe in softirq context).
pub unsafe trait AtomicDrop {}

macro_rules! impl_atomic_drop {
    ($($t:ty),* $(,)?) => {$(
        // SAFETY: the type has no drop glue.
        unsafe impl AtomicDrop for $t {}
    )*};
}

impl_atomic_drop!(
    (),
    bool,
    char,
    u8,
    u16,
    u32,
    u64,
    u128,
    usize,
    i8,
    i16,
    i32,
    i64,
    i128,
    isize,
    core::sync::atomic::AtomicBool,
    core::sync::atomic::AtomicU8,
    core::sync::atomic::AtomicU16,
    core::sync::atomic::AtomicU32,
    core::sync::atomic::AtomicU64,
    core::sync::atomic::AtomicUsize,
    core::sync::atomic::AtomicI8,
    core::sync::atomic::AtomicI16,
    core::sync::atomic::AtomicI32,
    core::sync::atomic::AtomicI64,
    core::sync::atomic::AtomicIsize,
    RcuHead,
);

// SAFETY: raw pointers, references and phantom data have no drop glue.
unsafe impl<T: ?Sized> AtomicDrop for *const T {}
// SAFETY: as above.
unsafe impl<T: ?Sized> AtomicDrop for *mut T {}
// SAFETY: as above.
unsafe impl<T: ?Sized> AtomicDrop for &T {}
// SAFETY: as above.
unsafe impl<T: ?Sized> AtomicDrop for core::ptr::NonNull<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized> AtomicDrop for PhantomData<T> {}
// SAFETY: as above.
unsafe impl<T> AtomicDrop for core::sync::atomic::AtomicPtr<T> {}
// SAFETY: dropping an option drops at most its `T`.
unsafe impl<T: AtomicDrop> AtomicDrop for Option<T> {}
// SAFETY: dropping an array drops its `T`s.
unsafe impl<T: AtomicDrop, const N: usize> AtomicDrop for [T; N] {}
// SAFETY: dropping a tuple drops its fields.
unsafe impl<A: AtomicDrop, B: AtomicDrop> AtomicDrop for (A, B) {}
// SAFETY: dropping a box drops its `T`, then frees with `kfree()`, which
// never sleeps.
unsafe impl<T: AtomicDrop> AtomicDrop for KBox<T> {}
// SAFETY: dropping an `Arc` decrements a refcount; the last one drops the
// `T` and frees it with `kfree()`.
unsafe impl<T: AtomicDrop> AtomicDrop for crate::sync::Arc<T> {}

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
/// // SAFETY: a `Node` has no drop glue.
/// unsafe impl rcu::AtomicDrop for Node {}
///
/// // SAFETY: a doctest runs in its KUnit case's process context, with no
/// // atomic section active.
/// let ctx = unsafe { kernel::delay::MaySleep::new() };
/// let node = KBox::new(Node { key: 7, rcu: RcuHead::new() }, GFP_KERNEL)?;
/// assert_eq!(node.key, 7);
/// // Readers that found `node` before it was unpublished may still use it:
/// // it is dropped only after a grace period.
/// rcu::drop_after_gp(node);
/// rcu::barrier(&ctx);
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
/// in softirq context, hence the [`AtomicDrop`] bound.  Use [`barrier`] to
/// wait for pending drops (for example before a module unloads).
pub fn drop_after_gp<T: HasRcuHead + AtomicDrop + Send + 'static>(obj: KBox<T>) {
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
    // SAFETY: the `Drop` below only adds to an atomic counter.
    unsafe impl AtomicDrop for Tracked {}

    impl Drop for Tracked {
        fn drop(&mut self) {
            DROPPED.fetch_add(self.weight, Ordering::Relaxed);
        }
    }

    /// An object handed to `drop_after_gp` is not dropped while a reader
    /// that could see it is inside its critical section, and is dropped,
    /// exactly once, after the grace period.
    fn drop_waits_for_readers() -> Result {
        // SAFETY: a KUnit case runs in process context, with no atomic
        // section active.
        let mut ctx = unsafe { MaySleep::new() };
        DROPPED.store(0, Ordering::Relaxed);
        let guard = read_lock(&mut ctx);
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
        barrier(&ctx);
        kunit_expect_eq!(DROPPED.load(Ordering::Relaxed), 111);
        Ok(())
    }

    /// Read-side sections nest: ending the inner one leaves the reader inside
    /// the outer one, so an object retired meanwhile is not dropped until
    /// the outer section ends too, and then it is.
    fn guards_nest() -> Result {
        // SAFETY: a KUnit case runs in process context, with no atomic
        // section active.
        let mut ctx = unsafe { MaySleep::new() };
        DROPPED.store(0, Ordering::Relaxed);
        let outer = read_lock(&mut ctx);
        // SAFETY: `ctx` is borrowed by `outer`, which outlives `inner`.
        let inner = unsafe { Guard::new_unchecked() };
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
        barrier(&ctx);
        kunit_expect_eq!(DROPPED.load(Ordering::Relaxed), 7);
        Ok(())
    }

    crate::kunit_suite! {
        name: "rust_kernel_rcu",
        cases: [drop_waits_for_readers, guards_nest],
    }
}
