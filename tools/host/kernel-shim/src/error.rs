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

    codes! {
        EPERM = 1,
        ENOENT = 2,
        EINTR = 4,
        EIO = 5,
        EAGAIN = 11,
        ENOMEM = 12,
        EFAULT = 14,
        EBUSY = 16,
        EEXIST = 17,
        ENODEV = 19,
        EINVAL = 22,
        ENOSPC = 28,
        ERANGE = 34,
        EOVERFLOW = 75,
    }
}
