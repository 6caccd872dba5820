// SPDX-License-Identifier: GPL-2.0

//! GCMA's sysfs files, on [`kernel::sysfs`]:
//!
//! - `/sys/kernel/mm/gcma/<area>/`: the counters of an area in service
//!   (`struct gcma_stats`, but `released`) and `thp`, 1 for an area
//!   reserved with `:thp`;
//! - `/sys/kernel/mm/gcma/dmem/<client>/`: `enabled`, which switches the
//!   DMEM client at run time (off drops its pages), the client's counters
//!   (`struct gcma_dmem_stats`) and, with verify mode built, `verified`,
//!   `verify_mismatches` and `verify_skipped`;
//! - `/sys/kernel/mm/gcma/thp/`: guaranteed THP's `mode` (`never`,
//!   `fallback` or `always`, the current one in brackets) and `stat`.
//!
//! `/sys/kernel/mm/gcma` is made with the first area put in service and
//! kept for good, as every directory here is: areas and DMEM's instances
//! live as long as the kernel.  Everything here runs in initcalls, one at
//! a time, or in the files' callbacks (process context).

use crate::{
    dmem_client::{self, dmems},
    Area,
};
use core::{
    ffi::c_uint,
    fmt::Write,
    ptr::null_mut,
    sync::atomic::{AtomicPtr, Ordering},
};
use kernel::{
    bindings, c_str,
    delay::MaySleep,
    new_file_dir,
    prelude::*,
    str::BStr,
    sysfs::{Attribute, Dir, Emitter, Files, Parent},
};

/// `/sys/kernel/mm/gcma`, once made: a kobject leaked with its reference.
static ROOT: AtomicPtr<bindings::kobject> = AtomicPtr::new(null_mut());

/// Returns `/sys/kernel/mm/gcma`, making it the first time.  Called by the
/// crate's initcalls only, which run one at a time.
fn root() -> Result<Parent<'static>> {
    if let Some(root) = root_parent() {
        return Ok(root);
    }
    let dir = Dir::new(c_str!("gcma"), Parent::mm()?)?;
    ROOT.store(dir.as_ptr(), Ordering::Release);
    Ok(dir.leak())
}

/// The root as a parent, if it was made.
fn root_parent() -> Option<Parent<'static>> {
    let kobj = ROOT.load(Ordering::Acquire);
    // SAFETY: a non-NULL `ROOT` is a kobject in sysfs whose reference was
    // leaked (`root()`), so it stays there for good.
    (!kobj.is_null()).then(|| unsafe { Parent::from_raw(kobj) })
}

/// The files of `/sys/kernel/mm/gcma/<area>/`.
struct AreaFiles(&'static Area);

impl AreaFiles {
    /// The area's counters.
    fn stats(&self) -> bindings::gcma_stats {
        self.0.stats()
    }
}

/// A file of a number, and a newline.
fn show_u64(out: &mut Emitter<'_>, value: u64) -> Result {
    writeln!(out, "{value}")?;
    Ok(())
}

/// A read-only file of `$owner` named `$name` whose number is `$value`, an
/// expression of `$this: &$owner`.
macro_rules! number_file {
    ($owner:ty, $name:literal, |$this:ident| $value:expr) => {
        Attribute::read_only(c_str!($name), |$this: &$owner, out| show_u64(out, $value))
    };
}

/// A read-only file of an area's counter `$field`.
macro_rules! area_stat {
    ($field:ident) => {
        Attribute::read_only(c_str!(stringify!($field)), |a: &AreaFiles, out| {
            show_u64(out, a.stats().$field)
        })
    };
}

impl Files for AreaFiles {
    const FILES: &'static [Attribute<Self>] = &[
        area_stat!(total_pages),
        area_stat!(primary_used_pages),
        area_stat!(secondary_lent_pages),
        area_stat!(alloc_success),
        area_stat!(alloc_fail),
        area_stat!(discarded_pages),
        area_stat!(release_pending_pages),
        area_stat!(hwpoisoned_pages),
        area_stat!(bad_pages),
        number_file!(AreaFiles, "thp", |a| u64::from(a.0.is_thp())),
    ];
}

/// Makes `/sys/kernel/mm/gcma/<area>/` for an area just put in service; a
/// failure is logged, and the area serves without its files.
pub(crate) fn add_area(area: &'static Area) {
    match root().and_then(|root| new_file_dir!(area.name(), root, AreaFiles(area))) {
        Ok(dir) => {
            dir.leak();
        }
        Err(e) => pr_warn!("{}: no sysfs directory ({:?})\n", area.name(), e),
    }
}

/// The files of `/sys/kernel/mm/gcma/dmem/<client>/`, for client `.0`
/// (`enum gcma_dmem_client`).
struct DmemFiles(c_uint);

impl DmemFiles {
    /// The client's name, that of its directory.
    fn name(client: c_uint) -> &'static CStr {
        match client {
            bindings::gcma_dmem_client_GCMA_DMEM_FILE => c_str!("file"),
            _ => c_str!("swap"),
        }
    }

    /// The client's counters; `ENODEV` before DMEM's instances exist.
    fn stats(&self) -> Result<bindings::gcma_dmem_stats> {
        dmem_client::client_stats(self.0)
    }

    /// `enabled`: 1 while the client is on.
    fn show_enabled(&self, out: &mut Emitter<'_>) -> Result {
        let client = dmems().and_then(|d| d.client(self.0)).ok_or(ENODEV)?;
        show_u64(out, u64::from(client.enabled()))
    }

    /// `enabled`: a boolean in the words `gcma.dmem_<client>=` takes
    /// (`cmdline::parse_bool()`, which allows one newline after it) switches
    /// the client, off dropping its pages.
    fn store_enabled(&self, input: &[u8], ctx: &MaySleep) -> Result {
        let Some(on) = crate::cmdline::parse_bool(input) else {
            warn_not_boolean(self.0, input);
            return Err(EINVAL);
        };
        dmem_client::switch(self.0, on, ctx)
    }

    /// Verify mode's counters of the client: verified, mismatches, skipped.
    #[cfg(CONFIG_GCMA_DMEM_VERIFY)]
    fn verify_counts(&self) -> [u64; 3] {
        crate::dmem_verify::counts(self.0)
    }

    /// `verify_inject`: the self-test's hits still to be made stale.
    #[cfg(CONFIG_GCMA_DMEM_VERIFY)]
    fn show_inject(&self, out: &mut Emitter<'_>) -> Result {
        show_u64(out, crate::dmem_verify::injections_pending(self.0) as u64)
    }

    /// `verify_inject`: a count, and one newline: the client's next hits
    /// that verify mode's self-test makes stale (`EINVAL` while verify
    /// mode is off).
    #[cfg(CONFIG_GCMA_DMEM_VERIFY)]
    fn store_inject(&self, input: &[u8], _ctx: &MaySleep) -> Result {
        let text = input.strip_suffix(b"\n").unwrap_or(input);
        let n = core::str::from_utf8(text)
            .ok()
            .and_then(|t| t.parse::<usize>().ok())
            .ok_or(EINVAL)?;
        crate::dmem_verify::inject(self.0, n)
    }
}

/// A read-only file of a DMEM client's counter `$field`.
macro_rules! dmem_stat {
    ($field:ident) => {
        Attribute::read_only(c_str!(stringify!($field)), |d: &DmemFiles, out| {
            show_u64(out, d.stats()?.$field)
        })
    };
}

impl Files for DmemFiles {
    const FILES: &'static [Attribute<Self>] = &[
        Attribute::read_write(
            c_str!("enabled"),
            DmemFiles::show_enabled,
            DmemFiles::store_enabled,
        ),
        dmem_stat!(stored_pages),
        dmem_stat!(held_pages),
        dmem_stat!(stores),
        dmem_stat!(loads),
        dmem_stat!(misses),
        dmem_stat!(invalidations),
        dmem_stat!(discards),
        dmem_stat!(evictions),
        dmem_stat!(refused_nomem),
        dmem_stat!(refused_nospace),
        dmem_stat!(refused_discarded),
        dmem_stat!(refused_superseded),
        dmem_stat!(refused_disabled),
        dmem_stat!(refused_large),
        dmem_stat!(poisoned),
        #[cfg(CONFIG_GCMA_DMEM_VERIFY)]
        number_file!(DmemFiles, "verified", |d| d.verify_counts()[0]),
        #[cfg(CONFIG_GCMA_DMEM_VERIFY)]
        number_file!(DmemFiles, "verify_mismatches", |d| d.verify_counts()[1]),
        #[cfg(CONFIG_GCMA_DMEM_VERIFY)]
        number_file!(DmemFiles, "verify_skipped", |d| d.verify_counts()[2]),
        #[cfg(CONFIG_GCMA_DMEM_VERIFY)]
        Attribute::read_write(
            c_str!("verify_inject"),
            DmemFiles::show_inject,
            DmemFiles::store_inject,
        ),
    ];
}

/// Logs that `input`, written to `enabled` of `client`, is not a boolean:
/// its first line, at most 16 bytes, non-printing bytes escaped.  Rate
/// limited with the kernel's shared `printk_ratelimit()` state.
fn warn_not_boolean(client: c_uint, input: &[u8]) {
    // SAFETY: FFI call; the name is a NUL-terminated constant.
    if unsafe { bindings::__printk_ratelimit(c_str!("gcma_dmem_enabled").as_char_ptr()) } == 0 {
        return;
    }
    let line = input.split(|&b| b == b'\n').next().unwrap_or_default();
    pr_warn!(
        "dmem/{}/enabled: \"{}\" is not a boolean (1/0, y/n, yes/no, on/off); unchanged\n",
        DmemFiles::name(client).to_str().unwrap_or("?"),
        BStr::from_bytes(&line[..line.len().min(16)])
    );
}

/// Makes `/sys/kernel/mm/gcma/dmem/` and a directory per client, once
/// DMEM's instances exist; a failure is logged, and DMEM serves without
/// its files.
pub(crate) fn add_dmem() {
    let made = (|| -> Result {
        let dmem = Dir::new(c_str!("dmem"), root_parent().ok_or(ENOENT)?)?.leak();
        for client in [
            bindings::gcma_dmem_client_GCMA_DMEM_FILE,
            bindings::gcma_dmem_client_GCMA_DMEM_SWAP,
        ] {
            new_file_dir!(DmemFiles::name(client), dmem, DmemFiles(client))?.leak();
        }
        Ok(())
    })();
    if let Err(e) = made {
        pr_warn!("dmem: no sysfs directory ({:?})\n", e);
    }
}

/// The files of `/sys/kernel/mm/gcma/thp/`.
#[cfg(CONFIG_GCMA_THP)]
struct ThpFiles;

#[cfg(CONFIG_GCMA_THP)]
impl ThpFiles {
    /// `mode`: the modes, the current one in brackets.
    fn show_mode(&self, out: &mut Emitter<'_>) -> Result {
        let now = crate::thp::mode();
        for (i, m) in crate::thp::Mode::all().into_iter().enumerate() {
            let sep = if i == 0 { "" } else { " " };
            if m == now {
                write!(out, "{sep}[{}]", m.name())?;
            } else {
                write!(out, "{sep}{}", m.name())?;
            }
        }
        writeln!(out)?;
        Ok(())
    }

    /// `mode`: a mode's name, and one newline.
    fn store_mode(&self, input: &[u8], ctx: &MaySleep) -> Result {
        let word = input.strip_suffix(b"\n").unwrap_or(input);
        let mode = crate::thp::Mode::all()
            .into_iter()
            .find(|m| m.name().as_bytes() == word)
            .ok_or(EINVAL)?;
        crate::thp::set_mode(mode, ctx)
    }

    /// `stat`: one "name value" line per counter, as /proc/vmstat has.
    fn show_stat(&self, out: &mut Emitter<'_>) -> Result {
        let st = crate::thp::stats();
        writeln!(out, "gcma_thp_fault_alloc {}", st.fault_alloc)?;
        writeln!(out, "gcma_thp_fault_fail {}", st.fault_fail)?;
        writeln!(out, "gcma_thp_collapse_alloc {}", st.collapse_alloc)?;
        writeln!(out, "gcma_thp_collapse_fail {}", st.collapse_fail)?;
        Ok(())
    }
}

#[cfg(CONFIG_GCMA_THP)]
impl Files for ThpFiles {
    const FILES: &'static [Attribute<Self>] = &[
        Attribute::read_write(c_str!("mode"), ThpFiles::show_mode, ThpFiles::store_mode),
        Attribute::read_only(c_str!("stat"), ThpFiles::show_stat),
    ];
}

/// Makes `/sys/kernel/mm/gcma/thp/` in the directory the areas in service
/// made; without it (no area in service) the files are missing, which is
/// logged, and the mode stays what the boot set.
#[cfg(CONFIG_GCMA_THP)]
pub(crate) fn add_thp() {
    let made = root_parent()
        .ok_or(ENOENT)
        .and_then(|root| new_file_dir!(c_str!("thp"), root, ThpFiles));
    match made {
        Ok(dir) => {
            dir.leak();
        }
        Err(e) => pr_warn!("thp: no sysfs directory ({:?})\n", e),
    }
}
