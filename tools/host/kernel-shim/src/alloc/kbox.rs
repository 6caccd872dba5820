// SPDX-License-Identifier: GPL-2.0

//! Host version of `kernel::alloc::kbox`: an owning pointer to a heap
//! allocation, generic over the allocator as in the kernel, with fallible
//! constructors.  The memory comes from the host heap; allocations and
//! frees are reported to [`super::fault`].

use super::{fault, AllocError, Flags};
use core::fmt;
use core::marker::PhantomData;
use core::mem::{ManuallyDrop, MaybeUninit};
use core::ops::{Deref, DerefMut};
use core::pin::Pin;
use core::ptr::NonNull;

/// Marker for the kernel's allocator back ends.
pub trait Allocator {}

/// The `kmalloc` allocator.
pub struct Kmalloc;
/// The `vmalloc` allocator.
pub struct Vmalloc;
/// The `kvmalloc` allocator.
pub struct KVmalloc;

impl Allocator for Kmalloc {}
impl Allocator for Vmalloc {}
impl Allocator for KVmalloc {}

/// The kernel's `Box`: a pointer to a `T` allocated with `A`.
///
/// # Invariants
///
/// `self.0` points to a valid `T` in a block obtained from the host heap
/// (as `std::boxed::Box` does) that this `Box` owns.
pub struct Box<T: ?Sized, A: Allocator>(NonNull<T>, PhantomData<A>);

/// A [`Box`] allocated with `kmalloc`.
pub type KBox<T> = Box<T, Kmalloc>;
/// A [`Box`] allocated with `vmalloc`.
pub type VBox<T> = Box<T, Vmalloc>;
/// A [`Box`] allocated with `kvmalloc`.
pub type KVBox<T> = Box<T, KVmalloc>;

// SAFETY: `Box` owns its `T`, so it is `Send` when `T` is.
unsafe impl<T: ?Sized + Send, A: Allocator> Send for Box<T, A> {}
// SAFETY: `Box` owns its `T`, so it is `Sync` when `T` is.
unsafe impl<T: ?Sized + Sync, A: Allocator> Sync for Box<T, A> {}

impl<T: ?Sized, A: Allocator> Box<T, A> {
    /// Creates a new `Box<T, A>` from a raw pointer.
    ///
    /// # Safety
    ///
    /// `raw` must come from [`Box::into_raw`] of a `Box<T, A>` (or a box of
    /// a type with the same layout, such as `MaybeUninit<T>` for `T`), and
    /// ownership passes back to the returned box.
    #[inline]
    pub const unsafe fn from_raw(raw: *mut T) -> Self {
        // SAFETY: `raw` came from `into_raw`, so it is not null.
        Self(unsafe { NonNull::new_unchecked(raw) }, PhantomData)
    }

    /// Consumes the box and returns a raw pointer; the allocation stays
    /// alive until [`Box::from_raw`] takes it back.
    #[inline]
    pub fn into_raw(b: Self) -> *mut T {
        ManuallyDrop::new(b).0.as_ptr()
    }

    /// Consumes and leaks the box, returning a mutable reference.
    #[inline]
    pub fn leak<'a>(b: Self) -> &'a mut T {
        // SAFETY: `into_raw` returns a valid, aligned and exclusively owned
        // pointer that will never be freed.
        unsafe { &mut *Box::into_raw(b) }
    }
}

impl<T, A: Allocator> Box<MaybeUninit<T>, A> {
    /// Converts to `Box<T, A>`.
    ///
    /// # Safety
    ///
    /// The value inside must be initialised.
    pub unsafe fn assume_init(self) -> Box<T, A> {
        let raw = Self::into_raw(self);
        // SAFETY: same allocation and layout; the caller guarantees the
        // contents are initialised.
        unsafe { Box::from_raw(raw.cast()) }
    }

    /// Writes the value and converts to `Box<T, A>`.
    pub fn write(mut self, value: T) -> Box<T, A> {
        (*self).write(value);
        // SAFETY: the value was just initialised.
        unsafe { self.assume_init() }
    }
}

impl<T, A: Allocator> Box<T, A> {
    /// Allocates a box and moves `x` into it.
    pub fn new(x: T, flags: Flags) -> Result<Self, AllocError> {
        let b = Self::new_uninit(flags)?;
        Ok(Box::write(b, x))
    }

    /// Allocates a box with uninitialised contents.
    pub fn new_uninit(flags: Flags) -> Result<Box<MaybeUninit<T>, A>, AllocError> {
        if !fault::on_alloc(flags) {
            return Err(AllocError);
        }
        let raw = std::boxed::Box::into_raw(std::boxed::Box::<T>::new_uninit());
        // SAFETY: `std::boxed::Box::into_raw` never returns null.
        Ok(Box(unsafe { NonNull::new_unchecked(raw) }, PhantomData))
    }

    /// Allocates a box, moves `x` into it and pins it.
    pub fn pin(x: T, flags: Flags) -> Result<Pin<Box<T, A>>, AllocError>
    where
        A: 'static,
    {
        Ok(Self::new(x, flags)?.into())
    }

    /// Moves the value out of the box and frees the allocation.
    pub fn into_inner(b: Self) -> T {
        let raw = Self::into_raw(b);
        fault::on_free();
        // SAFETY: `raw` is an owned allocation of the host heap.
        *unsafe { std::boxed::Box::from_raw(raw) }
    }
}

impl<T: ?Sized, A: Allocator> From<Box<T, A>> for Pin<Box<T, A>> {
    fn from(b: Box<T, A>) -> Self {
        // SAFETY: the value lives in the heap and never moves until it is
        // dropped, since `Pin` hides the box.
        unsafe { Pin::new_unchecked(b) }
    }
}

impl<T: ?Sized, A: Allocator> Deref for Box<T, A> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: by the type invariant `self.0` points to a valid `T`.
        unsafe { self.0.as_ref() }
    }
}

impl<T: ?Sized, A: Allocator> DerefMut for Box<T, A> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: by the type invariant `self.0` points to a valid `T` owned
        // by `self`.
        unsafe { self.0.as_mut() }
    }
}

impl<T: ?Sized + fmt::Debug, A: Allocator> fmt::Debug for Box<T, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized, A: Allocator> Drop for Box<T, A> {
    fn drop(&mut self) {
        fault::on_free();
        // SAFETY: by the type invariant the block came from the host heap
        // as a `std::boxed::Box<T>` and is owned by `self`.
        drop(unsafe { std::boxed::Box::from_raw(self.0.as_ptr()) });
    }
}
