// SPDX-License-Identifier: GPL-2.0

//! A slot that is set once to a `&'static` reference and read without a
//! lock.
//!
//! Subsystems that set their state up once at boot and keep it for good
//! publish it for readers in any context (the page allocator's free path,
//! an interrupt) that cannot take a lock; the state is leaked, so readers
//! may keep the reference.  [`OnceRef`] holds that publication: a pointer
//! set once with release ordering and read with acquire ordering.

use core::{
    marker::PhantomData,
    ptr::null_mut,
    sync::atomic::{AtomicPtr, Ordering},
};

/// A slot holding nothing until it is set, once, to a `&'static T`.
///
/// # Invariants
///
/// `ptr` is NULL or was made from a `&'static T`; once non-NULL, it never
/// changes.
///
/// # Examples
///
/// ```
/// use kernel::sync::once_ref::OnceRef;
///
/// static ANSWER: OnceRef<u32> = OnceRef::new();
/// static VALUE: u32 = 42;
///
/// assert!(ANSWER.get().is_none());
/// assert!(ANSWER.set(&VALUE).is_ok());
/// assert_eq!(ANSWER.get(), Some(&42));
/// // A second value is refused and handed back.
/// static OTHER: u32 = 7;
/// assert_eq!(ANSWER.set(&OTHER), Err(&7));
/// assert_eq!(ANSWER.get(), Some(&42));
/// ```
pub struct OnceRef<T: 'static> {
    ptr: AtomicPtr<T>,
    _ref: PhantomData<&'static T>,
}

impl<T: 'static> OnceRef<T> {
    /// Makes an empty slot.
    pub const fn new() -> Self {
        // INVARIANT: NULL.
        Self {
            ptr: AtomicPtr::new(null_mut()),
            _ref: PhantomData,
        }
    }
}

impl<T: Sync + 'static> OnceRef<T> {
    /// Sets the slot to `r`, unless it is set: then `r` is handed back.
    /// What `r` points to is visible to whoever [`OnceRef::get`]s it.
    pub fn set(&self, r: &'static T) -> Result<(), &'static T> {
        // INVARIANT: made from a `&'static T`, and only over NULL.
        self.ptr
            .compare_exchange(
                null_mut(),
                (r as *const T).cast_mut(),
                Ordering::Release,
                Ordering::Relaxed,
            )
            .map(|_| ())
            .map_err(|_| r)
    }

    /// Returns the reference the slot was set to, if it was.
    pub fn get(&self) -> Option<&'static T> {
        let p = self.ptr.load(Ordering::Acquire);
        // SAFETY: a non-NULL `ptr` was made from a `&'static T` (type
        // invariant); the acquire pairs with the release of `set`, so the
        // referent is seen as it was when published.
        (!p.is_null()).then(|| unsafe { &*p })
    }
}

impl<T: 'static> Default for OnceRef<T> {
    fn default() -> Self {
        Self::new()
    }
}
