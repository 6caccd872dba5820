// SPDX-License-Identifier: GPL-2.0

//! Host version of `kernel::error`: negative errno values wrapped in a type.

use core::fmt;

/// An error number, as in the kernel: a wrapped negative `errno` value.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Error(i32);

/// Result type used by shared modules, as in the kernel.
pub type Result<T = (), E = Error> = core::result::Result<T, E>;

impl Error {
    /// Returns the negative errno value, as the kernel's `to_errno`.
    pub fn to_errno(self) -> i32 {
        self.0
    }

    /// Returns the symbolic name, when known.
    pub fn name(&self) -> Option<&'static str> {
        code::NAMES
            .iter()
            .find(|(v, _)| *v == self.0)
            .map(|(_, n)| *n)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "Error({})", self.0),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for Error {}

/// Error codes, with the kernel's values.
pub mod code {
    use super::Error;

    macro_rules! codes {
        ($($name:ident = $val:expr,)*) => {
            $(
                #[doc = concat!("`", stringify!($name), "` (", stringify!($val), ").")]
                pub const $name: Error = Error(-$val);
            )*
            pub(super) const NAMES: &[(i32, &str)] = &[$((-$val, stringify!($name)),)*];
        };
    }

    // Exactly the standard codes the kernel crate declares (rust/kernel/error.rs),
    // so that a shared module using any other one fails here as it would there.
    codes! {
        EPERM = 1,
        ENOENT = 2,
        ESRCH = 3,
        EINTR = 4,
        EIO = 5,
        ENXIO = 6,
        E2BIG = 7,
        ENOEXEC = 8,
        EBADF = 9,
        ECHILD = 10,
        EAGAIN = 11,
        ENOMEM = 12,
        EACCES = 13,
        EFAULT = 14,
        ENOTBLK = 15,
        EBUSY = 16,
        EEXIST = 17,
        EXDEV = 18,
        ENODEV = 19,
        ENOTDIR = 20,
        EISDIR = 21,
        EINVAL = 22,
        ENFILE = 23,
        EMFILE = 24,
        ENOTTY = 25,
        ETXTBSY = 26,
        EFBIG = 27,
        ENOSPC = 28,
        ESPIPE = 29,
        EROFS = 30,
        EMLINK = 31,
        EPIPE = 32,
        EDOM = 33,
        ERANGE = 34,
    }
}
