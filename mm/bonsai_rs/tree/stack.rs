// SPDX-License-Identifier: GPL-2.0

//! A stack of fixed capacity whose free slots stay uninitialised.
//!
//! Every update records its path (up to [`MAX_DEPTH`](super::MAX_DEPTH)
//! levels) on the stack of the writer.  An array of `Option`s would be
//! zeroed on every update: a kilobyte-sized `memset`, which in the kernel
//! is a `rep stos` that costs as much as a short update (and far more
//! under an emulator).  This stack writes only the slots it fills.
//!
//! The storage is a separate local of the caller ([`Slots`]) that the
//! stack borrows.  Were it a field next to the length, LLVM could fold
//! the struct's initial value (uninitialised slots and a zero length)
//! into one all-zero constant and write it with a `memset`, which it
//! does.

use core::mem::MaybeUninit;

/// Storage of a [`Stack`] of up to `N` values of type `T`.
pub(crate) type Slots<T, const N: usize> = MaybeUninit<[T; N]>;

/// Up to `N` values of type `T`, pushed and read back by index.
///
/// # Invariants
///
/// `len <= N`, and the first `len` elements of `*items` are initialised.
pub(crate) struct Stack<'s, T: Copy, const N: usize> {
    items: &'s mut Slots<T, N>,
    len: usize,
}

impl<'s, T: Copy, const N: usize> Stack<'s, T, N> {
    /// An empty stack in `items`, whose contents are ignored; nothing is
    /// written.
    pub(crate) fn new(items: &'s mut Slots<T, N>) -> Self {
        // INVARIANT: no element is in use.
        Self { items, len: 0 }
    }

    /// Values held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Pushes `value`; gives it back if the stack is full.
    pub(crate) fn push(&mut self, value: T) -> Result<(), T> {
        if self.len >= N {
            return Err(value);
        }
        // SAFETY: `len < N`, so the element lies inside `*items`, which is
        // borrowed mutably; `MaybeUninit<[T; N]>` has the layout of
        // `[T; N]`.
        unsafe {
            self.items
                .as_mut_ptr()
                .cast::<T>()
                .add(self.len)
                .write(value)
        };
        // INVARIANT: the element at the old `len` was just initialised.
        self.len += 1;
        Ok(())
    }

    /// The value at index `i` (0: the first pushed), if there is one.
    pub(crate) fn get(&self, i: usize) -> Option<T> {
        if i >= self.len {
            return None;
        }
        // SAFETY: `i < len <= N`: by the type invariant the element is
        // initialised, and `T: Copy` lets it be read out while it stays.
        Some(unsafe { self.items.as_ptr().cast::<T>().add(i).read() })
    }
}
