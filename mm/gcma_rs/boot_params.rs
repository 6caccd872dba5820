// SPDX-License-Identifier: GPL-2.0

//! GCMA's boot parameters: their checks, messages and values.
//!
//! An early parameter is registered by a C macro (`early_param()`), so
//! each of GCMA's has one line in the C file of its feature, which names
//! its handler here:
//!
//! - `gcma=<size>[@<base>][:thp]`: [`gcma_param_area`] (`reserve.c`);
//!   `gcma_reserve()` (C) takes the requests with [`gcma_boot_request`].
//! - `gcma.dma_cma=`: [`gcma_param_dma_cma`] (`reserve.c`); read by
//!   `gcma_reserve()` with [`gcma_boot_dma_cma`].
//! - `gcma.dmem_file=`, `gcma.dmem_swap=`: [`gcma_param_dmem_file`],
//!   [`gcma_param_dmem_swap`] (`dmem_switch.c`); read by
//!   `dmem_client::init()`.
//! - `gcma.dmem_verify=`: `gcma_param_dmem_verify` (`dmem_switch.c`);
//!   read by `dmem_verify::init()`.
//! - `gcma.thp_mode=`: `gcma_param_thp_mode` (`thp.c`); read by
//!   `thp::init()`.
//!
//! `of.c` asks `gcma_of_check_node` about each device-tree node of a GCMA
//! area, which [`crate::of_node`] checks.
//!
//! The handlers run during early boot, from the architecture's setup
//! code, before the crate's state exists (`gcma_rs_init()` comes at
//! `subsys_initcall` time): the code here only parses ([`crate::cmdline`]),
//! prints and stores into statics.  A refused value is named in a message
//! with its reason and changes nothing; the handler returns 0 either way,
//! so that the kernel does not add its own "Malformed early option" to
//! ours.

use crate::cmdline::{self, AreaLimits};
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use kernel::{
    bindings, c_str,
    ffi::{c_char, c_int, c_uint},
    prelude::*,
    str::CStr,
};

/// A boolean switch read once its value is final.
///
/// The handlers store with `Relaxed`: they run during early boot, before
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

/// The `gcma=` requests, in command-line order, that `gcma_reserve()` (C)
/// takes ([`gcma_boot_request`]).
///
/// Written by the handler of `gcma=` alone, during early boot on the boot
/// CPU, and read later on the same CPU: the fields are atomics so that the
/// table is a plain static, not because anything races.  A slot below
/// `len` is complete.
pub(crate) struct Requests {
    slots: [RequestSlot; MAX_AREAS],
    len: AtomicUsize,
    /// Whether `gcma_reserve()` asked for the requests, for the check of
    /// an architecture whose setup code never does ([`Requests::unserved`]).
    taken: AtomicBool,
}

const MAX_AREAS: usize = bindings::GCMA_MAX_AREAS as usize;

struct RequestSlot {
    size: AtomicU64,
    base: AtomicU64,
    /// `FIXED` and `THP`.
    flags: AtomicU8,
}

const FIXED: u8 = 1;
const THP: u8 = 2;

impl Requests {
    pub(crate) const fn new() -> Self {
        Self {
            slots: [const {
                RequestSlot {
                    size: AtomicU64::new(0),
                    base: AtomicU64::new(0),
                    flags: AtomicU8::new(0),
                }
            }; MAX_AREAS],
            len: AtomicUsize::new(0),
            taken: AtomicBool::new(false),
        }
    }

    /// Checks the value of a `gcma=` parameter and appends the area it
    /// asks for; a refusal is a message that names the value and the
    /// reason, and adds nothing.
    pub(crate) fn parse(&self, arg: Option<&CStr>) -> c_int {
        let limits = AreaLimits {
            page_size: kernel::mm::PAGE_SIZE as u64,
            pmd_size: (kernel::mm::pages_in_order(kernel::mm::PMD_ORDER) * kernel::mm::PAGE_SIZE)
                as u64,
            thp_built: cfg!(CONFIG_GCMA_THP),
        };
        let text = arg.unwrap_or(c_str!(""));
        let area = match cmdline::parse_area(arg.map_or(&[], |a| a.as_bytes()), &limits) {
            Ok(area) => area,
            Err(cmdline::AreaError::Empty) => {
                pr_err!("invalid gcma= parameter: empty value\n");
                return 0;
            }
            Err(e) => {
                pr_err!("invalid gcma={}: {}\n", text, e);
                return 0;
            }
        };
        let n = self.len.load(Ordering::Relaxed);
        let Some(slot) = self.slots.get(n) else {
            pr_err!("invalid gcma={}: at most {} areas\n", text, MAX_AREAS);
            return 0;
        };
        slot.size.store(area.size, Ordering::Relaxed);
        slot.base.store(area.base.unwrap_or(0), Ordering::Relaxed);
        let flags = if area.base.is_some() { FIXED } else { 0 } | if area.thp { THP } else { 0 };
        slot.flags.store(flags, Ordering::Relaxed);
        self.len.store(n + 1, Ordering::Release);
        0
    }

    /// Request `idx`, or one of size 0 past the last.
    pub(crate) fn get(&self, idx: usize) -> bindings::gcma_request {
        let slot = self
            .slots
            .get(..self.len.load(Ordering::Acquire))
            .and_then(|s| s.get(idx));
        let Some(slot) = slot else {
            return bindings::gcma_request {
                size: 0,
                base: 0,
                fixed: false,
                thp: false,
            };
        };
        let flags = slot.flags.load(Ordering::Relaxed);
        bindings::gcma_request {
            size: slot.size.load(Ordering::Relaxed),
            base: slot.base.load(Ordering::Relaxed),
            fixed: flags & FIXED != 0,
            thp: flags & THP != 0,
        }
    }

    /// Request `idx`, as [`Requests::get`], for `gcma_reserve()`: the
    /// requests count as taken from then on.
    pub(crate) fn take(&self, idx: usize) -> bindings::gcma_request {
        self.taken.store(true, Ordering::Relaxed);
        self.get(idx)
    }

    /// How many requests there are, if nobody took them: the areas were
    /// asked for on an architecture whose setup code does not call
    /// `gcma_reserve()`.
    pub(crate) fn unserved(&self) -> Option<usize> {
        let n = self.len.load(Ordering::Acquire);
        (n != 0 && !self.taken.load(Ordering::Relaxed)).then_some(n)
    }
}

pub(crate) static REQUESTS: Requests = Requests::new();

/// Returns `gcma=` request `idx` (command-line order), or one of size 0
/// past the last; `gcma_reserve()` takes them in order.
#[no_mangle]
pub(crate) extern "C" fn gcma_boot_request(idx: c_uint) -> bindings::gcma_request {
    REQUESTS.take(idx as usize)
}

/// Defines the handler of each early parameter: `early_param()` (C)
/// registers it, and the kernel calls it with NULL (the parameter without
/// `=`) or the value, a NUL-terminated string valid for the call
/// (`do_early_param()`).  Each returns what its parser returns: 0 (see
/// the module's documentation).
macro_rules! early_params {
    ($($(#[$attr:meta])* $handler:ident => $parse:expr;)*) => {$(
        $(#[$attr])*
        ///
        /// # Safety
        ///
        /// `arg` is NULL or points to a NUL-terminated string valid for
        /// the duration of the call.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $handler(arg: *mut c_char) -> c_int {
            // SAFETY: a non-NULL `arg` is a NUL-terminated string valid
            // for the call (the caller's contract).
            let arg = (!arg.is_null()).then(|| unsafe { CStr::from_char_ptr(arg) });
            $parse(arg)
        }
    )*};
}

early_params! {
    /// `gcma=<size>[@<base>][:thp]`, which may be given several times.
    gcma_param_area => |arg| REQUESTS.parse(arg);
    /// `gcma.dma_cma=`.
    gcma_param_dma_cma => |arg| DMA_CMA.parse(arg);
    /// `gcma.dmem_file=`.
    gcma_param_dmem_file => |arg| DMEM_FILE.parse(arg);
    /// `gcma.dmem_swap=`.
    gcma_param_dmem_swap => |arg| DMEM_SWAP.parse(arg);
    /// `gcma.dmem_verify=`.
    #[cfg(CONFIG_GCMA_DMEM_VERIFY)]
    gcma_param_dmem_verify => |arg| DMEM_VERIFY.parse(arg);
    /// `gcma.thp_mode=`.
    #[cfg(CONFIG_GCMA_THP)]
    gcma_param_thp_mode => parse_thp_mode;
}

/// Whether `gcma.dma_cma=` asked for the first `gcma=` area to be the
/// default DMA CMA area; `gcma_reserve()` asks.
#[no_mangle]
pub(crate) extern "C" fn gcma_boot_dma_cma() -> bool {
    DMA_CMA.get()
}

/// Checks the device-tree node `node` that `of.c` read (`struct
/// gcma_of_node`, `include/linux/gcma.h`) with [`crate::of_node`], and
/// returns the length of the area's name (the node's name before its unit
/// address); 0 after a message naming the node and the reason if the node
/// makes no area.  Called while the kernel takes the `/reserved-memory`
/// nodes (on arm64 after the early parameters' handlers), before the page
/// allocator and the crate's state exist: like the handlers, it only
/// checks and prints.
///
/// # Safety
///
/// `node.name` is non-NULL and points to a NUL-terminated string that
/// nobody writes for the duration of the call.
#[cfg(CONFIG_GCMA_OF)]
#[no_mangle]
pub(crate) unsafe extern "C" fn gcma_of_check_node(node: bindings::gcma_of_node) -> usize {
    use crate::of_node::{check_of_node, OfLimits, OfNode};
    // SAFETY: non-NULL, NUL-terminated and not written during the call
    // (the caller's contract: `of.c` passes the node's name in the
    // flattened tree); `name` does not outlive the call.
    let name = unsafe { CStr::from_char_ptr(node.name) };
    let limits = OfLimits {
        cma_align: (kernel::mm::PAGE_SIZE as u64) << kernel::mm::zone::pageblock_order(),
        pmd_size: (kernel::mm::pages_in_order(kernel::mm::PMD_ORDER) * kernel::mm::PAGE_SIZE)
            as u64,
        thp_built: cfg!(CONFIG_GCMA_THP),
        name_max: bindings::GCMA_AREA_NAME_LEN as usize - 1,
    };
    let facts = OfNode {
        name: name.as_bytes(),
        base: node.base,
        size: node.size,
        reusable: node.reusable,
        no_map: node.no_map,
        thp: node.thp,
        dma_default: node.dma_default,
    };
    match check_of_node(&facts, &limits) {
        Ok(len) => len,
        Err(e) => {
            pr_err!("{}: {}; not reserved\n", name, e);
            0
        }
    }
}
