// SPDX-License-Identifier: GPL-2.0

//! Seq files: the output of a read that a `show()` callback fills.
//!
//! C header: [`include/linux/seq_file.h`](srctree/include/linux/seq_file.h)

use crate::{bindings, c_str, types::Opaque};
use core::fmt;

/// A seq file, borrowed for the time of one `show()` callback.
///
/// # Invariants
///
/// Wraps a `struct seq_file` whose `show()` callback is running on the
/// current task, which has the file to itself (`seq_read()` holds its
/// lock) for the lifetime of the reference.
#[repr(transparent)]
pub struct SeqFile {
    inner: Opaque<bindings::seq_file>,
}

impl SeqFile {
    /// Borrows the seq file `ptr` points to.
    ///
    /// # Safety
    ///
    /// `ptr` points to the `struct seq_file` of a `show()` callback that is
    /// running on the current task, for the whole lifetime `'a`.
    pub unsafe fn from_raw<'a>(ptr: *mut bindings::seq_file) -> &'a SeqFile {
        // SAFETY: `SeqFile` is a transparent wrapper of the C struct, which
        // is valid for `'a` (the caller's contract).
        unsafe { &*ptr.cast::<SeqFile>() }
    }

    /// Writes `args` to the file, as `seq_printf()` does.  Text past the
    /// end of the buffer marks the file overflowed, and `seq_read()` calls
    /// the `show()` callback again with a larger buffer.
    pub fn call_printf(&self, args: fmt::Arguments<'_>) {
        // SAFETY: the seq file is the current callback's (type invariant);
        // `%pA` takes a pointer to `fmt::Arguments`, which lives until the
        // call returns.
        unsafe {
            bindings::seq_printf(
                self.inner.get(),
                c_str!("%pA").as_char_ptr(),
                core::ptr::from_ref(&args).cast::<crate::ffi::c_void>(),
            );
        }
    }
}

/// Writes to a [`SeqFile`] with the syntax of [`core::format_args!`].
///
/// # Examples
///
/// ```
/// # use kernel::seq_print;
/// # use kernel::seq_file::SeqFile;
/// fn show(m: &SeqFile, hits: u64) {
///     seq_print!(m, "hits {}\n", hits);
/// }
/// ```
#[macro_export]
macro_rules! seq_print {
    ($m:expr, $($arg:tt)+) => {
        $m.call_printf(::core::format_args!($($arg)+))
    };
}
