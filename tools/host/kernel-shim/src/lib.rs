// SPDX-License-Identifier: GPL-2.0

//! Host stand-in for the subset of the kernel's `kernel` crate that the
//! shared modules of `mm/*_rs` use.
//!
//! A module is "shared" when it builds both inside the kernel and here
//! without edits.  Keep this shim small and keep every item's signature
//! identical to the kernel's, so a module that builds here also builds in
//! the kernel.  Anything that needs real kernel services (locks, RCU, page
//! allocation) stays in the kernel-only modules.

// `deny`, not `forbid`: `alloc::kbox` needs `unsafe` (raw pointers of
// `KBox::into_raw`/`from_raw`) and opts back in alone.
#![deny(unsafe_code)]

pub mod alloc;
pub mod error;

/// Mirror of `kernel::processor`: the cache-line padding only.
pub mod processor {
    /// Size of the cache lines [`CacheAligned`] pads to.
    pub const CACHE_LINE: usize = 64;

    /// A value on cache lines of its own.
    #[repr(C, align(64))]
    pub struct CacheAligned<T>(pub T);

    const _: () = assert!(core::mem::align_of::<CacheAligned<u8>>() == CACHE_LINE);
}

/// Mirror of `kernel::prelude`, restricted to what shared modules use.
pub mod prelude {
    // Not `Box`: it would shadow `std`'s `Box` in host code that globs
    // this prelude.
    pub use crate::alloc::{flags::*, KBox};
    pub use crate::error::{code::*, Error, Result};
}
