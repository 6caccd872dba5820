// SPDX-License-Identifier: GPL-2.0

//! GCMA's boot parameters: their checks, messages and values.
//!
//! An early parameter is registered by a C macro (`early_param()`), so
//! each of GCMA's has a hook of a few lines in the C file of its feature,
//! which hands the text here and returns what it gets:
//!
//! | parameter | hook | read by |
//! |---|---|---|
//! | `gcma=<size>[@<base>][:thp]` | `reserve.c` | `gcma_reserve()` (C), from its requests |
//! | `gcma.dma_cma=` | `reserve.c` | `gcma_reserve()` (C), through [`gcma_boot_dma_cma`] |
//! | `gcma.dmem_file=`, `gcma.dmem_swap=` | `dmem_switch.c` | `dmem_client::init()` |
//! | `gcma.dmem_verify=` | `dmem_verify.c` | `dmem_verify::init()` |
//! | `gcma.thp_mode=` | `thp.c` | `thp::init()` |
//!
//! The hooks run during early boot, from the architecture's setup code,
//! before the crate's state exists (`gcma_rs_init()` comes at
//! `subsys_initcall` time): the code here only parses ([`crate::cmdline`]),
//! prints and stores into statics.  A refused value is named in a message
//! with its reason and changes nothing; the hook returns 0 either way, so
//! that the kernel does not add its own "Malformed early option" to ours.

use crate::cmdline::{self, AreaLimits};
use core::{
    mem::MaybeUninit,
    sync::atomic::{AtomicBool, Ordering},
};
use kernel::{
    bindings, c_str,
    ffi::{c_char, c_int, c_uint},
    prelude::*,
    str::CStr,
};

/// A boolean switch read once its value is final.
///
/// The hooks store with `Relaxed`: they run during early boot, before
/// other CPUs start, and the values are read later on the same CPU
/// (`gcma_reserve()`, from the architecture's setup code) or after SMP
/// bring-up, which orders them (the initcalls).
struct Switch {
    /// The parameter, for messages.
    name: &'static str,
    /// The value: the default until a valid parameter changes it.
    on: AtomicBool,
    /// What the parameter without a value (`gcma.dma_cma`) means; `None`:
    /// it is refused like any other value that is not a boolean.
    bare: Option<bool>,
    /// What a refusal says stays as it was ("client" for DMEM's clients).
    what: &'static str,
}

impl Switch {
    const fn new(name: &'static str, on: bool, bare: Option<bool>, what: &'static str) -> Self {
        Self {
            name,
            on: AtomicBool::new(on),
            bare,
            what,
        }
    }

    fn get(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    fn parse(&self, arg: Option<&CStr>) -> c_int {
        let on = match arg {
            None => self.bare,
            Some(text) => cmdline::parse_bool(text.as_bytes()),
        };
        match on {
            Some(on) => self.on.store(on, Ordering::Relaxed),
            None => pr_err!(
                "{}={}: not a boolean (1/0, y/n, yes/no, on/off); {}stays {}\n",
                self.name,
                arg.unwrap_or(c_str!("")),
                self.what,
                if self.get() { "on" } else { "off" }
            ),
        }
        0
    }
}

static DMA_CMA: Switch = Switch::new("gcma.dma_cma", false, Some(true), "");
static DMEM_FILE: Switch = Switch::new("gcma.dmem_file", true, None, "client ");
static DMEM_SWAP: Switch = Switch::new("gcma.dmem_swap", true, None, "client ");
#[cfg(CONFIG_GCMA_DMEM_VERIFY)]
static DMEM_VERIFY: Switch = Switch::new("gcma.dmem_verify", true, None, "");

/// The mode `gcma.thp_mode=` asked for, as its index in
/// [`crate::thp::Mode::all`]; `fallback` without the parameter.
#[cfg(CONFIG_GCMA_THP)]
static THP_MODE: core::sync::atomic::AtomicU8 = core::sync::atomic::AtomicU8::new(1);
#[cfg(CONFIG_GCMA_THP)]
const _: () = assert!(matches!(
    crate::thp::Mode::all()[1],
    crate::thp::Mode::Fallback
));

/// Whether DMEM client `client` (`enum gcma_dmem_client`) is on at boot;
/// `false` for a value that is no client.
pub(crate) fn dmem_enabled(client: c_uint) -> bool {
    match client {
        bindings::gcma_dmem_client_GCMA_DMEM_FILE => DMEM_FILE.get(),
        bindings::gcma_dmem_client_GCMA_DMEM_SWAP => DMEM_SWAP.get(),
        _ => false,
    }
}

/// Whether DMEM's verify mode is on at boot.
#[cfg(CONFIG_GCMA_DMEM_VERIFY)]
pub(crate) fn verify_enabled() -> bool {
    DMEM_VERIFY.get()
}

/// The mode of guaranteed THP at boot.
#[cfg(CONFIG_GCMA_THP)]
pub(crate) fn thp_mode() -> crate::thp::Mode {
    let all = crate::thp::Mode::all();
    all[usize::from(THP_MODE.load(Ordering::Relaxed)).min(all.len() - 1)]
}

#[cfg(CONFIG_GCMA_THP)]
fn parse_thp_mode(arg: Option<&CStr>) -> c_int {
    let all = crate::thp::Mode::all();
    let found = arg.and_then(|text| {
        all.iter()
            .position(|m| m.name().as_bytes() == text.as_bytes())
    });
    match found {
        // The index is below 3.
        Some(i) => THP_MODE.store(i as u8, Ordering::Relaxed),
        None => pr_err!(
            "gcma.thp_mode={}: expected never, fallback or always; stays {}\n",
            arg.unwrap_or(c_str!("")),
            thp_mode().name()
        ),
    }
    0
}

/// Parses the value of a `gcma=` parameter into `*req`
/// (`include/linux/gcma.h`); `reserve.c`'s early parameter hook calls it.
///
/// Returns 0 with `*req` filled in, or `-EINVAL` after a message that
/// names the value and the reason, with `*req` untouched.
///
/// # Safety
///
/// `arg` is NULL or points to a NUL-terminated string valid for the
/// duration of the call.  `req` is taken as a reference: the caller
/// passes the address of a `struct gcma_request` of its own (never NULL,
/// aligned, and touched by nobody else during the call), which may be
/// uninitialised.
#[no_mangle]
pub(crate) unsafe extern "C" fn gcma_parse_area(
    arg: *const c_char,
    req: &mut MaybeUninit<bindings::gcma_request>,
) -> c_int {
    let limits = AreaLimits {
        page_size: kernel::mm::PAGE_SIZE as u64,
        pmd_size: (kernel::mm::pages_in_order(kernel::mm::PMD_ORDER) * kernel::mm::PAGE_SIZE)
            as u64,
        thp_built: cfg!(CONFIG_GCMA_THP),
    };
    // SAFETY: a non-NULL `arg` is a NUL-terminated string valid for the
    // call (the caller's contract).
    let arg = (!arg.is_null()).then(|| unsafe { CStr::from_char_ptr(arg) });
    match cmdline::parse_area(arg.map_or(&[], |a| a.as_bytes()), &limits) {
        Ok(area) => {
            let request = bindings::gcma_request {
                size: area.size,
                base: area.base.unwrap_or(0),
                fixed: area.base.is_some(),
                thp: area.thp,
            };
            req.write(request);
            0
        }
        Err(cmdline::AreaError::Empty) => {
            pr_err!("invalid gcma= parameter: empty value\n");
            EINVAL.to_errno()
        }
        Err(e) => {
            pr_err!("invalid gcma={}: {}\n", arg.unwrap_or(c_str!("")), e);
            EINVAL.to_errno()
        }
    }
}

/// Parses the value of the boot switch `param` (`enum gcma_boot_switch`,
/// `include/linux/gcma.h`); the early parameter hooks call it.  A refused
/// value is reported and leaves the switch as it was.
///
/// Returns 0, whether the value was taken or refused (see the module's
/// documentation).
///
/// # Safety
///
/// `arg` is NULL (the parameter without `=`) or points to a
/// NUL-terminated string valid for the duration of the call.
#[no_mangle]
pub(crate) unsafe extern "C" fn gcma_boot_param(param: c_uint, arg: *const c_char) -> c_int {
    // SAFETY: a non-NULL `arg` is a NUL-terminated string valid for the
    // call (the caller's contract).
    let arg = (!arg.is_null()).then(|| unsafe { CStr::from_char_ptr(arg) });
    match param {
        bindings::gcma_boot_switch_GCMA_PARAM_DMA_CMA => DMA_CMA.parse(arg),
        bindings::gcma_boot_switch_GCMA_PARAM_DMEM_FILE => DMEM_FILE.parse(arg),
        bindings::gcma_boot_switch_GCMA_PARAM_DMEM_SWAP => DMEM_SWAP.parse(arg),
        #[cfg(CONFIG_GCMA_DMEM_VERIFY)]
        bindings::gcma_boot_switch_GCMA_PARAM_DMEM_VERIFY => DMEM_VERIFY.parse(arg),
        #[cfg(CONFIG_GCMA_THP)]
        bindings::gcma_boot_switch_GCMA_PARAM_THP_MODE => parse_thp_mode(arg),
        _ => EINVAL.to_errno(),
    }
}

/// Whether `gcma.dma_cma=` asked for the first `gcma=` area to be the
/// default DMA CMA area; `gcma_reserve()` asks.
#[no_mangle]
pub(crate) extern "C" fn gcma_boot_dma_cma() -> bool {
    DMA_CMA.get()
}
