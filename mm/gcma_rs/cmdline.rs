// SPDX-License-Identifier: GPL-2.0

//! The values of GCMA's boot parameters, parsed.
//!
//! `gcma=<size>[@<base>][:thp]` asks for an area; the switches take the
//! words of [`parse_bool`].  The handlers of the early parameters
//! (`boot_params.rs`) call in here, print the reason of a refusal and
//! keep the values.
//!
//! This module is pure: no kernel call, no allocation, no `unsafe`.  The
//! host tier compiles it unchanged (`tools/host/crates/gcma-core`) and
//! tests every rule; a KUnit case compares [`memparse`] with the C one.

use core::fmt;

/// What one `gcma=` value asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AreaRequest {
    /// Size in bytes: a non-zero multiple of the page size.
    pub(crate) size: u64,
    /// Physical base address, if the value gave one: page aligned, and the
    /// area does not wrap around the address space.
    pub(crate) base: Option<u64>,
    /// `:thp`: the area serves transparent huge pages only; its size and
    /// base are multiples of the PMD size.
    pub(crate) thp: bool,
}

/// The properties of the running kernel that the checks of a `gcma=`
/// value depend on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AreaLimits {
    /// `PAGE_SIZE`, a power of two.
    pub(crate) page_size: u64,
    /// `PMD_SIZE`, a power of two.
    pub(crate) pmd_size: u64,
    /// Whether the kernel is built with `CONFIG_GCMA_THP`.
    pub(crate) thp_built: bool,
}

/// Why a `gcma=` value is refused.  Its `Display` is the reason the boot
/// message gives after "invalid gcma=<value>: ".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AreaError {
    /// No value at all.
    Empty,
    /// Not of the form `<size>[@<base>][:thp]`.
    Syntax,
    /// An `@` without an address after it.
    MissingBase,
    /// `:thp` in a kernel without `CONFIG_GCMA_THP`.
    ThpNotBuilt,
    /// A size of 0, or not a multiple of `page_size`.
    Size {
        /// The page size, for the message.
        page_size: u64,
    },
    /// A base that is not page aligned.
    Base,
    /// `base + size` beyond the end of the address space.
    Wraps,
    /// A THP area whose size or base is not a multiple of `pmd_size`.
    ThpAlign {
        /// The PMD size, for the message.
        pmd_size: u64,
    },
}

impl fmt::Display for AreaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            AreaError::Empty => f.write_str("empty value"),
            AreaError::Syntax => f.write_str("expected <size>[@<base>][:thp]"),
            AreaError::MissingBase => f.write_str("'@' needs a base address"),
            AreaError::ThpNotBuilt => f.write_str("THP areas need CONFIG_GCMA_THP"),
            AreaError::Size { page_size } => {
                write!(f, "size must be a non-zero multiple of {page_size}")
            }
            AreaError::Base => f.write_str("base must be page aligned"),
            AreaError::Wraps => f.write_str("area wraps around the address space"),
            AreaError::ThpAlign { pmd_size } => write!(
                f,
                "a THP area's size and base must be multiples of {} MiB",
                pmd_size >> 20
            ),
        }
    }
}

/// Parses a number the way the kernel's `memparse()` does, so that
/// `gcma=` takes what `cma=` and `mem=` take: C notation (`0x` followed by
/// a hex digit for hex, a leading `0` for octal, else decimal), then an
/// optional binary suffix `K`, `M`, `G`, `T`, `P` or `E` in either case.
///
/// Returns the value and the number of bytes it took from `s`, to the
/// byte what the C function returns, quirks included: it wraps around
/// silently on overflow, and takes a suffix without digits ("k" is 0,
/// one byte).  Callers that need a number check for a digit first
/// ([`parse_area`] does).
pub(crate) fn memparse(s: &[u8]) -> (u64, usize) {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let (radix, mut i) = match (at(0), at(1).to_ascii_lowercase()) {
        (b'0', b'x') if at(2).is_ascii_hexdigit() => (16, 2),
        (b'0', _) => (8, 0),
        _ => (10, 0),
    };
    let mut value: u64 = 0;
    while let Some(digit) = (at(i) as char).to_digit(radix) {
        value = value.wrapping_mul(radix.into()).wrapping_add(digit.into());
        i += 1;
    }
    // With no digit (so `start` is 0: hex needs one after "0x"), C's end
    // pointer stays at the start, where the suffix is looked for.
    let shift = match at(i).to_ascii_lowercase() {
        b'k' => 10,
        b'm' => 20,
        b'g' => 30,
        b't' => 40,
        b'p' => 50,
        b'e' => 60,
        _ => return (value, i),
    };
    (value << shift, i + 1)
}

/// Parses and checks one `gcma=` value (without a trailing NUL).
pub(crate) fn parse_area(arg: &[u8], limits: &AreaLimits) -> Result<AreaRequest, AreaError> {
    if arg.is_empty() {
        return Err(AreaError::Empty);
    }
    // A number starts with a digit: `memparse()` would take a bare suffix
    // ("16M@k") for 0.
    let starts_with_digit = |s: &[u8]| s.first().is_some_and(u8::is_ascii_digit);
    if !starts_with_digit(arg) {
        return Err(AreaError::Syntax);
    }
    let (size, taken) = memparse(arg);
    let mut rest = &arg[taken..];
    let mut base = None;
    if let Some(after) = rest.strip_prefix(b"@") {
        if !starts_with_digit(after) {
            return Err(AreaError::MissingBase);
        }
        let (b, taken) = memparse(after);
        base = Some(b);
        rest = &after[taken..];
    }
    let thp = match rest {
        b"" => false,
        b":thp" if limits.thp_built => true,
        b":thp" => return Err(AreaError::ThpNotBuilt),
        _ => return Err(AreaError::Syntax),
    };
    let aligned = |v: u64, to: u64| v & (to - 1) == 0;
    if size == 0 || !aligned(size, limits.page_size) {
        return Err(AreaError::Size {
            page_size: limits.page_size,
        });
    }
    let b = base.unwrap_or(0);
    if !aligned(b, limits.page_size) {
        return Err(AreaError::Base);
    }
    if base.is_some() && b.checked_add(size).is_none() {
        return Err(AreaError::Wraps);
    }
    if thp && !(aligned(size, limits.pmd_size) && aligned(b, limits.pmd_size)) {
        return Err(AreaError::ThpAlign {
            pmd_size: limits.pmd_size,
        });
    }
    Ok(AreaRequest { size, base, thp })
}

/// The words a GCMA switch takes, off and on alternating.  Stricter than
/// the kernel's `kstrtobool()`, which looks at the first characters only
/// and would take "0x1" for off and "yes-" for on.
const BOOL_WORDS: [&[u8]; 10] = [
    b"0", b"1", b"n", b"y", b"N", b"Y", b"no", b"yes", b"off", b"on",
];

/// Parses the whole value of a GCMA switch, boot parameter or sysfs write:
/// one of `1`/`0`, `y`/`n`, `Y`/`N`, `yes`/`no`, `on`/`off`, optionally
/// followed by one newline (what `echo` writes).  `None` for anything
/// else.
pub(crate) fn parse_bool(text: &[u8]) -> Option<bool> {
    let word = text.strip_suffix(b"\n").unwrap_or(text);
    BOOL_WORDS
        .iter()
        .position(|w| *w == word)
        .map(|i| i % 2 == 1)
}
