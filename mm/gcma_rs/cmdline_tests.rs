// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `gcma_cmdline`: the boot parameters' parsers against the
//! kernel's own `memparse()`, and the entry points the C hooks call.

use crate::cmdline::memparse;
use core::mem::MaybeUninit;
use kernel::kunit::suite::TestRng as Rng;
use kernel::{
    bindings, c_str, kunit_expect, kunit_expect_eq,
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

/// The hook's entry point fills the request in, or leaves it alone and
/// returns `-EINVAL`.
fn parse_area_entry() -> Result {
    let mut req = MaybeUninit::new(bindings::gcma_request {
        size: 1,
        base: 2,
        fixed: false,
        thp: true,
    });
    let fields = |req: &MaybeUninit<bindings::gcma_request>| {
        // SAFETY: initialised above, and `gcma_parse_area()` only ever
        // writes a whole request.
        let r = unsafe { req.assume_init_ref() };
        (r.size, r.base, r.fixed, r.thp)
    };
    // SAFETY: a NUL-terminated string.
    let ret = unsafe {
        crate::boot_params::gcma_parse_area(c_str!("4M@0x40000000").as_char_ptr(), &mut req)
    };
    kunit_expect_eq!(ret, 0);
    kunit_expect_eq!(fields(&req), (4 << 20, 0x4000_0000, true, false));
    // SAFETY: as above.
    let ret =
        unsafe { crate::boot_params::gcma_parse_area(c_str!("4M@0x1001").as_char_ptr(), &mut req) };
    kunit_expect_eq!(ret, EINVAL.to_errno());
    kunit_expect_eq!(fields(&req), (4 << 20, 0x4000_0000, true, false));
    // SAFETY: NULL is allowed.
    let ret = unsafe { crate::boot_params::gcma_parse_area(core::ptr::null(), &mut req) };
    kunit_expect_eq!(ret, EINVAL.to_errno());
    kunit_expect_eq!(fields(&req), (4 << 20, 0x4000_0000, true, false));
    Ok(())
}

/// Sets switch `param` from `arg` (NULL: the parameter without `=`).
fn set(param: u32, arg: Option<&CStr>) -> i32 {
    let arg = arg.map_or(core::ptr::null(), CStr::as_char_ptr);
    // SAFETY: NULL or a NUL-terminated string.
    unsafe { crate::boot_params::gcma_boot_param(param, arg) }
}

/// The switches' hook entry: words taken, others refused with the
/// switch unchanged, a bare parameter as each switch defines it, and 0
/// returned for all.  The values are read at boot only, so changing
/// them here changes nothing else; each is restored.
fn boot_param_entry() -> Result {
    use crate::boot_params::{dmem_enabled, gcma_boot_dma_cma};
    const DMA_CMA: u32 = bindings::gcma_boot_switch_GCMA_PARAM_DMA_CMA;
    const FILE: u32 = bindings::gcma_boot_switch_GCMA_PARAM_DMEM_FILE;
    const FILE_CLIENT: u32 = bindings::gcma_dmem_client_GCMA_DMEM_FILE;

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

    #[cfg(CONFIG_GCMA_THP)]
    {
        use crate::{boot_params::thp_mode, thp::Mode};
        const THP: u32 = bindings::gcma_boot_switch_GCMA_PARAM_THP_MODE;
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
    // An unknown switch.
    kunit_expect_eq!(set(99, Some(c_str!("1"))), EINVAL.to_errno());
    Ok(())
}

kernel::kunit_suite! {
    name: "gcma_cmdline",
    cases: [memparse_matches_c, parse_area_entry, boot_param_entry],
}
