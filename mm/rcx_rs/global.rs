// SPDX-License-Identifier: GPL-2.0

//! The global locks of RCX's lock slots: a `spinlock_t` taken with its
//! rank as the lockdep subclass ([`GlobalLock`], released by
//! [`GlobalGuard`]), and the locks of an uncontended update taken and
//! released together ([`GlobalSet`]).

use core::ffi::c_uint;
use kernel::{bindings, prelude::*, types::Opaque};

use crate::{ffi, MAX_ITEMS};

/// A global spinlock of an item (a `spinlock_t`).
///
/// Not a `kernel::sync::SpinLock`: an update holds up to [`MAX_ITEMS`] of
/// these locks at once, all of one lockdep class, taken in address order,
/// so each acquisition needs its rank as the lockdep subclass
/// (`spin_lock_nested()`).  The kernel crate's `SpinLock` has no nested
/// acquisition, and a lock class key per lock cannot stand in for it: an
/// item's rank differs from one update to the next.  The C glue in
/// `lock.c` therefore takes the lock; [`GlobalGuard`] releases it.
///
/// # Invariants
///
/// `inner` was initialised by `rcx_lock_init()` in the initialiser of
/// [`GlobalLock::new`], at the address it has.  A `GlobalLock` is only
/// ever made in place by that initialiser and is `!Unpin` (through
/// [`Opaque`]): it never moves while it exists.
#[pin_data]
pub(crate) struct GlobalLock {
    #[pin]
    inner: Opaque<bindings::spinlock_t>,
}

// SAFETY: a `spinlock_t` exists to be taken and released by any CPU, and a
// `GlobalLock` offers nothing but that.  Sending the owner of one (a box,
// a vector) to another thread does not move the lock, which is pinned.
unsafe impl Send for GlobalLock {}
// SAFETY: see above; `lock` and the guard's release synchronise in C.
unsafe impl Sync for GlobalLock {}

impl GlobalLock {
    /// Returns an initialiser of a lock, to run in place at the lock's
    /// final address (`KBox::pin_init`, `pin_init!` of an owner, ...).
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `slot` is valid for writes and pinned: the lock is
            // initialised at its final address, before anyone can use it.
            inner <- Opaque::ffi_init(|slot| unsafe { ffi::rcx_lock_init(slot) }),
        })
    }

    /// Takes the lock until the returned guard is dropped; `rank` is its
    /// rank among the locks the caller holds together, the lockdep
    /// subclass (ranks of [`MAX_ITEMS`] and above share the last one).
    pub(crate) fn lock(&self, rank: usize) -> GlobalGuard<'_> {
        let subclass = rank.min(MAX_ITEMS - 1) as c_uint;
        // SAFETY: by the type invariants the lock is initialised.
        unsafe { ffi::rcx_lock(self.inner.get(), subclass) };
        // INVARIANT: the lock was just taken; the guard releases it.
        GlobalGuard(self)
    }
}

/// The global locks of an uncontended update, all taken by one call and
/// released together when dropped.
///
/// # Invariants
///
/// The first `n` entries of `locks` are distinct initialised
/// [`GlobalLock`]s that live for `'a`, all held for this guard; `n` is at
/// most [`MAX_ITEMS`].
pub(crate) struct GlobalSet<'a> {
    locks: [*mut bindings::spinlock_t; MAX_ITEMS],
    n: usize,
    _locks: core::marker::PhantomData<&'a GlobalLock>,
}

impl<'a> GlobalSet<'a> {
    /// Takes every lock of `locks` (distinct, at most [`MAX_ITEMS`]) if
    /// they are all free, without waiting; `None`, holding none of them,
    /// otherwise.
    pub(crate) fn try_lock(locks: &[&'a GlobalLock]) -> Option<Self> {
        let n = locks.len().min(MAX_ITEMS);
        // Element by element rather than by filling and copying a prefix
        // of variable length, which compiles to calls of `memset` and
        // `memcpy` on every update.
        let ptrs: [*mut bindings::spinlock_t; MAX_ITEMS] = core::array::from_fn(|i| {
            locks
                .get(i)
                .map_or(core::ptr::null_mut(), |l| l.inner.get())
        });
        // SAFETY: the first `n` entries are initialised locks (type
        // invariants of `GlobalLock`) that outlive the call.  Distinct:
        // a lock named twice would only fail its second trylock.
        if unsafe { ffi::rcx_trylock_all(ptrs.as_ptr(), n as c_uint) } {
            // INVARIANT: all `n` were just taken, and live for `'a`.
            Some(Self {
                locks: ptrs,
                n,
                _locks: core::marker::PhantomData,
            })
        } else {
            None
        }
    }
}

impl Drop for GlobalSet<'_> {
    fn drop(&mut self) {
        // SAFETY: by the type invariants the first `n` locks are held for
        // this guard, which releases them once.
        unsafe { ffi::rcx_unlock_all(self.locks.as_ptr(), self.n as c_uint) }
    }
}

/// A held [`GlobalLock`], released when dropped.
///
/// # Invariants
///
/// The lock is held, taken by [`GlobalLock::lock`] for this guard.
pub(crate) struct GlobalGuard<'a>(&'a GlobalLock);

impl Drop for GlobalGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: by the type invariant the lock is initialised and held
        // for this guard, which releases it once.
        unsafe { ffi::rcx_unlock(self.0.inner.get()) }
    }
}
