// SPDX-License-Identifier: GPL-2.0

//! Static keys: branches that C code patches at run time.
//!
//! A subsystem whose hooks in existing C files cost nothing while it is
//! off defines a static key in C (`DEFINE_STATIC_KEY_FALSE()`, declared in
//! a header that bindgen reads) and tests it in inline wrappers with
//! `static_branch_unlikely()`.  [`c_static_key_false!`] borrows such a key
//! from Rust as a [`StaticKeyFalse`], whose [`enable`] and [`disable`]
//! flip it, so that the code deciding when the hooks run can be Rust.
//!
//! [`enable`]: StaticKeyFalse::enable
//! [`disable`]: StaticKeyFalse::disable
//!
//! C header: [`include/linux/jump_label.h`](srctree/include/linux/jump_label.h)

use crate::{bindings, delay::MaySleep, types::Opaque};

/// A static key defined in C, off unless enabled (`struct
/// static_key_false`).
///
/// # Invariants
///
/// Wraps a `struct static_key_false` that C defined as a static object,
/// which lives as long as the kernel; its state is changed only through
/// the jump label functions, which take their own locks.
#[repr(transparent)]
pub struct StaticKeyFalse(Opaque<bindings::static_key_false>);

// SAFETY: the jump label functions may be called from any task; they
// serialise among themselves (type invariant).
unsafe impl Sync for StaticKeyFalse {}
// SAFETY: as above; a key is only ever borrowed.
unsafe impl Send for StaticKeyFalse {}

impl StaticKeyFalse {
    /// Borrows the key at `ptr`.  [`c_static_key_false!`] is the safe way
    /// to borrow a key of the bindings.
    ///
    /// # Safety
    ///
    /// `ptr` points to a `struct static_key_false` that C defined as a
    /// static object.
    pub unsafe fn from_raw(ptr: *mut bindings::static_key_false) -> &'static Self {
        // SAFETY: the key lives for good (the caller's contract), and
        // `StaticKeyFalse` is a transparent wrapper of the C struct.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// Turns the key on, patching every branch that tests it; does
    /// nothing if it is on.  Sleeps (it takes the CPU hotplug lock and the
    /// jump label mutex), which `ctx` allows.
    pub fn enable(&self, _ctx: &MaySleep) {
        // SAFETY: a valid key (type invariant), in process context.
        unsafe { bindings::rsmm_static_key_false_enable(self.0.get()) };
    }

    /// Turns the key off; does nothing if it is off.  Sleeps, as
    /// [`StaticKeyFalse::enable`] does.
    pub fn disable(&self, _ctx: &MaySleep) {
        // SAFETY: as in `enable`.
        unsafe { bindings::rsmm_static_key_false_disable(self.0.get()) };
    }

    /// Whether the key is on (a plain read, not a patched branch).
    pub fn is_enabled(&self) -> bool {
        // SAFETY: a valid key (type invariant); the read is atomic.
        unsafe { bindings::rsmm_static_key_false_enabled(self.0.get()) }
    }
}

/// Borrows the C static key `$key`, a `struct static_key_false` of the
/// bindings, as a `&'static` [`StaticKeyFalse`].
///
/// # Examples
///
/// ```ignore
/// let key = kernel::c_static_key_false!(gcma_dmem_file_on);
/// key.enable(&ctx);
/// ```
#[macro_export]
macro_rules! c_static_key_false {
    ($key:ident) => {{
        // SAFETY: a `static_key_false` static of the bindings is defined
        // by C as a static object (the type check of `from_raw()` refuses
        // anything else).
        unsafe {
            $crate::jump_label::StaticKeyFalse::from_raw(::core::ptr::addr_of_mut!(
                $crate::bindings::$key
            ))
        }
    }};
}
