// SPDX-License-Identifier: GPL-2.0

//! Tests of the shared `cmdline` module: the parsers of GCMA's boot
//! parameters.  The KUnit suite `gcma_cmdline` also compares `memparse`
//! with the kernel's C function (which is how the model below learnt
//! that a bare suffix counts).

use crate::cmdline::{memparse, parse_area, parse_bool, AreaError, AreaLimits, AreaRequest};
use proptest::prelude::*;

const X86: AreaLimits = AreaLimits {
    page_size: 4096,
    pmd_size: 2 << 20,
    thp_built: true,
};

/// A transliteration of the C `memparse()` (lib/cmdline.c) and the radix
/// rules of `simple_strtoull()` (lib/kstrtox.c), step by step, to test
/// the idiomatic Rust version against.
fn memparse_model(s: &[u8]) -> (u64, usize) {
    let c = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut p = 0;
    let base: u64 = if c(0) == b'0' {
        if c(1).to_ascii_lowercase() == b'x' && c(2).is_ascii_hexdigit() {
            16
        } else {
            8
        }
    } else {
        10
    };
    if base == 16 {
        p = 2;
    }
    let mut ret: u64 = 0;
    let mut parsed = 0;
    loop {
        let ch = c(p);
        let val = match ch {
            b'0'..=b'9' => (ch - b'0') as u64,
            b'a'..=b'f' | b'A'..=b'F' => (ch.to_ascii_lowercase() - b'a' + 10) as u64,
            _ => break,
        };
        if val >= base {
            break;
        }
        ret = ret.wrapping_mul(base).wrapping_add(val);
        p += 1;
        parsed += 1;
    }
    // simple_strtoull() leaves the end at the start when nothing parsed
    // (only in decimal: hex needs a digit after "0x", octal starts with
    // one); memparse() then looks for a suffix there.
    assert!(parsed > 0 || p == 0);
    let mut end = p;
    let mut shift = 0;
    for (i, suffix) in [b'k', b'm', b'g', b't', b'p', b'e'].iter().enumerate() {
        if c(end).to_ascii_lowercase() == *suffix {
            shift = 10 * (i as u32 + 1);
        }
    }
    if shift > 0 {
        end += 1;
        for _ in 0..shift / 10 {
            ret <<= 10;
        }
    }
    (ret, end)
}

#[test]
fn memparse_cases() {
    let cases: &[(&str, u64, usize)] = &[
        ("0", 0, 1),
        ("16M", 16 << 20, 3),
        ("16m", 16 << 20, 3),
        ("1028K", 1028 << 10, 5),
        ("0x10", 16, 4),
        ("0X10", 16, 4),
        ("0x1e", 30, 4),
        ("0x20001000", 0x2000_1000, 10),
        // "0x" needs a hex digit after it to mean hex: "0" then "x".
        ("0x", 0, 1),
        ("0xg", 0, 1),
        ("0xk", 0, 1),
        ("010", 8, 3),
        ("08", 0, 1),
        ("0k", 0, 2),
        ("1e", 1 << 60, 2),
        ("1E", 1 << 60, 2),
        ("3G@", 3 << 30, 2),
        ("12345xyz", 12345, 5),
        // Wraps around silently, as the C function does.
        ("18446744073709551616", 0, 20),
        ("16E", 0, 3),
        ("", 0, 0),
        // A suffix without digits is taken, as in C.
        ("k", 0, 1),
        ("Mx", 0, 1),
        ("-1", 0, 0),
        (" 1", 0, 0),
        ("@16M", 0, 0),
    ];
    for &(text, value, taken) in cases {
        assert_eq!(
            memparse(text.as_bytes()),
            (value, taken),
            "memparse({text:?})"
        );
        assert_eq!(
            memparse_model(text.as_bytes()),
            (value, taken),
            "model({text:?})"
        );
    }
}

fn area(size: u64, base: Option<u64>, thp: bool) -> Result<AreaRequest, AreaError> {
    Ok(AreaRequest { size, base, thp })
}

#[test]
fn parse_area_cases() {
    let page = Err(AreaError::Size { page_size: 4096 });
    let pmd = Err(AreaError::ThpAlign { pmd_size: 2 << 20 });
    let cases: &[(&str, Result<AreaRequest, AreaError>)] = &[
        ("16M", area(16 << 20, None, false)),
        (
            "1028K@0x20001000",
            area(1028 << 10, Some(0x2000_1000), false),
        ),
        ("8M:thp", area(8 << 20, None, true)),
        ("4M@0x40000000:thp", area(4 << 20, Some(0x4000_0000), true)),
        ("4M@0", area(4 << 20, Some(0), false)),
        ("", Err(AreaError::Empty)),
        ("0", page),
        ("4097", page),
        ("12345xyz", Err(AreaError::Syntax)),
        ("1M@0x1001", Err(AreaError::Base)),
        ("3M:thp", pmd),
        ("4M@0x1000:thp", pmd),
        ("4M:thpx", Err(AreaError::Syntax)),
        ("4M:THP", Err(AreaError::Syntax)),
        ("4M:", Err(AreaError::Syntax)),
        ("4M thp", Err(AreaError::Syntax)),
        ("16M@", Err(AreaError::MissingBase)),
        ("16M@:thp", Err(AreaError::MissingBase)),
        ("@16M", Err(AreaError::Syntax)),
        (":thp", Err(AreaError::Syntax)),
        // memparse() takes these for 0; an area's numbers need a digit.
        ("k", Err(AreaError::Syntax)),
        ("16M@k", Err(AreaError::MissingBase)),
        ("16M@0x", Err(AreaError::Syntax)),
        ("4M@1M@2M", Err(AreaError::Syntax)),
        // The last page of the address space: base + size is 2^64.
        ("1M@0xfffffffffff00000", Err(AreaError::Wraps)),
        (
            "1M@0xffffffffffe00000",
            area(1 << 20, Some(0xffff_ffff_ffe0_0000), false),
        ),
        // A size that wraps to 0 is a size of 0.
        ("16E", page),
    ];
    for (text, want) in cases {
        assert_eq!(parse_area(text.as_bytes(), &X86), *want, "gcma={text}");
    }
    let no_thp = AreaLimits {
        thp_built: false,
        ..X86
    };
    assert_eq!(parse_area(b"8M:thp", &no_thp), Err(AreaError::ThpNotBuilt));
    assert_eq!(parse_area(b"8M", &no_thp), area(8 << 20, None, false));
    // arm64 with 64 KiB pages: 512 MiB PMDs.
    let arm64_64k = AreaLimits {
        page_size: 64 << 10,
        pmd_size: 512 << 20,
        thp_built: true,
    };
    assert_eq!(
        parse_area(b"32K", &arm64_64k),
        Err(AreaError::Size { page_size: 65536 })
    );
    assert_eq!(
        parse_area(b"16M:thp", &arm64_64k),
        Err(AreaError::ThpAlign {
            pmd_size: 512 << 20
        })
    );
}

/// The reasons are what the boot messages say, which the scenario
/// `gcma_badparam` and the documentation quote.
#[test]
fn area_error_messages() {
    let cases: &[(AreaError, &str)] = &[
        (AreaError::Empty, "empty value"),
        (AreaError::Syntax, "expected <size>[@<base>][:thp]"),
        (AreaError::MissingBase, "'@' needs a base address"),
        (AreaError::ThpNotBuilt, "THP areas need CONFIG_GCMA_THP"),
        (
            AreaError::Size { page_size: 4096 },
            "size must be a non-zero multiple of 4096",
        ),
        (AreaError::Base, "base must be page aligned"),
        (AreaError::Wraps, "area wraps around the address space"),
        (
            AreaError::ThpAlign { pmd_size: 2 << 20 },
            "a THP area's size and base must be multiples of 2 MiB",
        ),
    ];
    for (e, text) in cases {
        assert_eq!(e.to_string(), *text);
    }
}

#[test]
fn parse_bool_words() {
    for (word, on) in [
        ("1", true),
        ("0", false),
        ("y", true),
        ("n", false),
        ("Y", true),
        ("N", false),
        ("yes", true),
        ("no", false),
        ("on", true),
        ("off", false),
    ] {
        assert_eq!(parse_bool(word.as_bytes()), Some(on), "{word:?}");
        assert_eq!(
            parse_bool(format!("{word}\n").as_bytes()),
            Some(on),
            "{word:?}\\n"
        );
        assert_eq!(
            parse_bool(format!("{word}\n\n").as_bytes()),
            None,
            "{word:?}\\n\\n"
        );
        assert_eq!(
            parse_bool(format!(" {word}").as_bytes()),
            None,
            "' '{word:?}"
        );
    }
    for bad in [
        "", "\n", "yes-", "0x1", "ON", "Yes", "true", "2", "o", "onn", "1\r\n",
    ] {
        assert_eq!(parse_bool(bad.as_bytes()), None, "{bad:?}");
    }
}

/// Text made of what `gcma=` values are made of, and some noise.
fn param_text() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop::sample::select(b"0123456789abcdefxXkKmMgGtTpPeE@:h -\n\xff".to_vec()),
        0..24,
    )
}

proptest! {
    #[test]
    fn memparse_matches_model(text in param_text()) {
        prop_assert_eq!(memparse(&text), memparse_model(&text));
    }

    /// Sizes written with any suffix, in any notation, read back (but
    /// "E" after hex digits, which is a digit).
    #[test]
    fn memparse_reads_what_is_written(v in 0u64..(1 << 20), suffix in 0usize..7, notation in 0usize..3) {
        let letters = ["", "K", "M", "G", "T", "P", "E"];
        let number = match notation {
            0 => format!("{v}"),
            1 => format!("{v:#x}"),
            _ => format!("0{v:o}"),
        };
        let text = format!("{number}{}", letters[suffix]);
        let want = if notation == 1 && suffix == 6 {
            // After hex digits, "E" is one more digit, as in C.
            v * 16 + 0xe
        } else {
            v << (10 * suffix)
        };
        prop_assert_eq!(memparse(text.as_bytes()), (want, text.len()), "{}", text);
    }

    /// Whatever is accepted obeys every rule of the parameter.
    #[test]
    fn accepted_areas_obey_the_rules(text in param_text(), thp_built in any::<bool>()) {
        let limits = AreaLimits { thp_built, ..X86 };
        if let Ok(req) = parse_area(&text, &limits) {
            prop_assert!(req.size > 0 && req.size % 4096 == 0);
            let base = req.base.unwrap_or(0);
            prop_assert_eq!(base % 4096, 0);
            prop_assert!(base.checked_add(req.size).is_some());
            if req.thp {
                prop_assert!(thp_built);
                prop_assert!(req.size % (2 << 20) == 0 && base % (2 << 20) == 0);
            }
        }
    }

    /// Every valid request, written out, is read back as itself.
    #[test]
    fn requests_round_trip(pages in 1u64..(1 << 30), base in prop::option::of(0u64..(1 << 40)), thp in any::<bool>()) {
        let (size, base) = if thp {
            (pages.next_multiple_of(512) << 12, base.map(|b| b & !((2 << 20) - 1)))
        } else {
            (pages << 12, base.map(|b| b << 12))
        };
        let text = format!(
            "{size}{}{}",
            base.map_or(String::new(), |b| format!("@{b:#x}")),
            if thp { ":thp" } else { "" }
        );
        prop_assert_eq!(parse_area(text.as_bytes(), &X86), Ok(AreaRequest { size, base, thp }), "{}", text);
    }
}
