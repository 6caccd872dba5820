// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `gcma_cmdline`: the boot parameters' parsers against the
//! kernel's own `memparse()`, the table of `gcma=` requests, and the
//! handlers `early_param()` registers.

use crate::{boot_params::Requests, cmdline::memparse};
use kernel::kunit::suite::TestRng as Rng;
use kernel::{
    bindings, c_str,
    ffi::{c_char, c_int},
    kunit_expect, kunit_expect_eq,
    prelude::*,
    str::{BStr, CStr},
};

/// Calls the C `memparse()` on `text`, which holds no NUL.
fn c_memparse(text: &[u8]) -> Result<(u64, usize)> {
    let mut buf = KVec::with_capacity(text.len() + 1, GFP_KERNEL)?;
    buf.extend_from_slice(text, GFP_KERNEL)?;
    buf.push(0, GFP_KERNEL)?;
    let start = buf.as_mut_ptr().cast::<kernel::ffi::c_char>();
    let mut end = start;
    // SAFETY: `buf` is NUL-terminated; `end` is valid for writes, and
    // `memparse()` sets it to a point of the string.
    let value = unsafe { bindings::memparse(start, &mut end) };
    // SAFETY: `end` points into `buf`, at or after `start`.
    let taken = unsafe { end.offset_from(start) } as usize;
    Ok((value, taken))
}

/// `cmdline::memparse()` takes what the C function takes, to the byte:
/// edge cases, then random text of the characters values are made of.
fn memparse_matches_c() -> Result {
    const EDGES: &[&[u8]] = &[
        b"",
        // A bare suffix: C takes it (0, one byte).
        b"k",
        b"Mx",
        b"0",
        b"16M",
        b"0x10",
        b"0X1e",
        b"0x",
        b"0xg",
        b"0xk",
        b"010",
        b"08",
        b"0k",
        b"1e",
        b"16E",
        b"12345xyz",
        b"18446744073709551616",
        b"-1",
        b" 1",
        b"@16M",
        b"1028K@0x20001000",
        b"8M:thp",
    ];
    let check = |text: &[u8]| -> Result {
        let (rust, c) = (memparse(text), c_memparse(text)?);
        kunit_expect!(
            rust == c,
            "memparse({:?}): {:?} in Rust, {:?} in C",
            BStr::from_bytes(text),
            rust,
            c
        );
        Ok(())
    };
    for text in EDGES {
        check(text)?;
    }
    const CHARS: &[u8] = b"0123456789abcdefxXkKmMgGtTpPeE@:-";
    let mut rng = Rng::new(0x6d65_6d70);
    for _ in 0..4000 {
        let mut text = KVec::new();
        for _ in 0..rng.below(20) {
            text.push(CHARS[rng.below(CHARS.len())], GFP_KERNEL)?;
        }
        check(&text)?;
    }
    Ok(())
}

/// A request's fields, to compare.
fn fields(r: bindings::gcma_request) -> (u64, u64, bool, bool) {
    (r.size, r.base, r.fixed, r.thp)
}

/// The table of `gcma=` requests keeps the areas asked for in order, adds
/// nothing for a refused value or past `GCMA_MAX_AREAS`, and knows
/// whether `gcma_reserve()` took them.
fn area_requests() -> Result {
    const NONE: (u64, u64, bool, bool) = (0, 0, false, false);
    let max = bindings::GCMA_MAX_AREAS as usize;
    let reqs = Requests::new();
    kunit_expect_eq!(reqs.unserved(), None);
    kunit_expect_eq!(fields(reqs.get(0)), NONE);
    kunit_expect_eq!(reqs.parse(Some(c_str!("4M@0x40000000"))), 0);
    // Refused: an unaligned base, no value, a bare suffix.
    kunit_expect_eq!(reqs.parse(Some(c_str!("4M@0x1001"))), 0);
    kunit_expect_eq!(reqs.parse(None), 0);
    kunit_expect_eq!(reqs.parse(Some(c_str!("k"))), 0);
    kunit_expect_eq!(fields(reqs.get(0)), (4 << 20, 0x4000_0000, true, false));
    kunit_expect_eq!(fields(reqs.get(1)), NONE);
    kunit_expect_eq!(reqs.unserved(), Some(1));
    #[cfg(CONFIG_GCMA_THP)]
    {
        kunit_expect_eq!(reqs.parse(Some(c_str!("8M:thp"))), 0);
        kunit_expect_eq!(fields(reqs.get(1)), (8 << 20, 0, false, true));
    }
    let filled = reqs.unserved().unwrap_or(0);
    for _ in filled..max {
        kunit_expect_eq!(reqs.parse(Some(c_str!("1M"))), 0);
    }
    // One too many: refused, the last slot kept.
    kunit_expect_eq!(reqs.parse(Some(c_str!("2M"))), 0);
    kunit_expect_eq!(reqs.unserved(), Some(max));
    kunit_expect_eq!(fields(reqs.get(max - 1)), (1 << 20, 0, false, false));
    kunit_expect_eq!(fields(reqs.get(max)), NONE);
    kunit_expect_eq!(fields(reqs.take(0)), (4 << 20, 0x4000_0000, true, false));
    kunit_expect_eq!(reqs.unserved(), None);
    Ok(())
}

/// An early parameter handler.
type Handler = unsafe extern "C" fn(*mut c_char) -> c_int;

/// Calls `handler` with `arg` (NULL: the parameter without `=`), as the
/// kernel does at boot.
fn set(handler: Handler, arg: Option<&CStr>) -> i32 {
    let arg = arg.map_or(core::ptr::null_mut(), |a| a.as_char_ptr().cast_mut());
    // SAFETY: NULL or a NUL-terminated string, which the handler only
    // reads.
    unsafe { handler(arg) }
}

/// The switches' handlers: words taken, others refused with the switch
/// unchanged, a bare parameter as each switch defines it, and 0 returned
/// for all.  The values are read at boot only, so changing
/// them here changes nothing else; each is restored.
fn boot_param_entry() -> Result {
    use crate::boot_params::{dmem_enabled, gcma_boot_dma_cma};
    const DMA_CMA: Handler = crate::boot_params::gcma_param_dma_cma;
    const FILE: Handler = crate::boot_params::gcma_param_dmem_file;
    const FILE_CLIENT: u32 = bindings::gcma_dmem_client_GCMA_DMEM_FILE;
    const SWAP: Handler = crate::boot_params::gcma_param_dmem_swap;
    const SWAP_CLIENT: u32 = bindings::gcma_dmem_client_GCMA_DMEM_SWAP;
    // Verify mode's switch, off when it is not built.
    let verify_enabled = || {
        #[cfg(CONFIG_GCMA_DMEM_VERIFY)]
        return crate::boot_params::verify_enabled();
        #[cfg(not(CONFIG_GCMA_DMEM_VERIFY))]
        return false;
    };

    let dma_was = gcma_boot_dma_cma();
    kunit_expect_eq!(set(DMA_CMA, Some(c_str!("off"))), 0);
    kunit_expect!(!gcma_boot_dma_cma());
    // A bare "gcma.dma_cma" means on.
    kunit_expect_eq!(set(DMA_CMA, None), 0);
    kunit_expect!(gcma_boot_dma_cma());
    kunit_expect_eq!(set(DMA_CMA, Some(c_str!("0x0"))), 0);
    kunit_expect!(gcma_boot_dma_cma());
    set(
        DMA_CMA,
        Some(if dma_was { c_str!("1") } else { c_str!("0") }),
    );

    let file_was = dmem_enabled(FILE_CLIENT);
    kunit_expect_eq!(set(FILE, Some(c_str!("n"))), 0);
    kunit_expect!(!dmem_enabled(FILE_CLIENT));
    // A bare "gcma.dmem_file" is refused.
    kunit_expect_eq!(set(FILE, None), 0);
    kunit_expect!(!dmem_enabled(FILE_CLIENT));
    kunit_expect_eq!(set(FILE, Some(c_str!("yes-"))), 0);
    kunit_expect!(!dmem_enabled(FILE_CLIENT));
    kunit_expect_eq!(set(FILE, Some(c_str!("yes"))), 0);
    kunit_expect!(dmem_enabled(FILE_CLIENT));
    set(FILE, Some(if file_was { c_str!("1") } else { c_str!("0") }));
    kunit_expect_eq!(dmem_enabled(FILE_CLIENT), file_was);
    kunit_expect!(!dmem_enabled(99));

    // Each handler sets its own switch and no other.
    let word = |on: bool| if on { c_str!("1") } else { c_str!("0") };
    let all = || {
        (
            gcma_boot_dma_cma(),
            dmem_enabled(FILE_CLIENT),
            dmem_enabled(SWAP_CLIENT),
            verify_enabled(),
        )
    };
    let was = all();
    kunit_expect_eq!(set(SWAP, Some(word(!was.2))), 0);
    kunit_expect_eq!(all(), (was.0, was.1, !was.2, was.3));
    set(SWAP, Some(word(was.2)));
    kunit_expect_eq!(set(FILE, Some(word(!was.1))), 0);
    kunit_expect_eq!(all(), (was.0, !was.1, was.2, was.3));
    set(FILE, Some(word(was.1)));
    kunit_expect_eq!(set(DMA_CMA, Some(word(!was.0))), 0);
    kunit_expect_eq!(all(), (!was.0, was.1, was.2, was.3));
    set(DMA_CMA, Some(word(was.0)));
    #[cfg(CONFIG_GCMA_DMEM_VERIFY)]
    {
        const VERIFY: Handler = crate::boot_params::gcma_param_dmem_verify;
        kunit_expect_eq!(set(VERIFY, Some(word(!was.3))), 0);
        kunit_expect_eq!(all(), (was.0, was.1, was.2, !was.3));
        set(VERIFY, Some(word(was.3)));
    }
    kunit_expect_eq!(all(), was);

    #[cfg(CONFIG_GCMA_THP)]
    {
        use crate::{boot_params::thp_mode, thp::Mode};
        const THP: Handler = crate::boot_params::gcma_param_thp_mode;
        let was = thp_mode();
        kunit_expect_eq!(set(THP, Some(c_str!("always"))), 0);
        kunit_expect_eq!(thp_mode(), Mode::Always);
        for bad in [c_str!("sometimes"), c_str!("Always"), c_str!("never\n")] {
            kunit_expect_eq!(set(THP, Some(bad)), 0);
            kunit_expect_eq!(thp_mode(), Mode::Always);
        }
        kunit_expect_eq!(set(THP, None), 0);
        kunit_expect_eq!(thp_mode(), Mode::Always);
        let name = match was {
            Mode::Never => c_str!("never"),
            Mode::Fallback => c_str!("fallback"),
            Mode::Always => c_str!("always"),
        };
        set(THP, Some(name));
        kunit_expect_eq!(thp_mode(), was);
    }
    Ok(())
}

kernel::kunit_suite! {
    name: "gcma_cmdline",
    cases: [memparse_matches_c, area_requests, boot_param_entry],
}
