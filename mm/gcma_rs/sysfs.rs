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
    boot::GcmaArea,
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
    error::to_result,
    prelude::*,
    str::BStr,
    sysfs::{Dir, Emitter, File, FileDir, Files, Parent},
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
struct AreaFiles(&'static GcmaArea);

impl Files for AreaFiles {
    const FILES: &'static [File] = &[
        File::read_only(c_str!("total_pages")),
        File::read_only(c_str!("primary_used_pages")),
        File::read_only(c_str!("secondary_lent_pages")),
        File::read_only(c_str!("alloc_success")),
        File::read_only(c_str!("alloc_fail")),
        File::read_only(c_str!("discarded_pages")),
        File::read_only(c_str!("release_pending_pages")),
        File::read_only(c_str!("hwpoisoned_pages")),
        File::read_only(c_str!("bad_pages")),
        File::read_only(c_str!("thp")),
    ];

    fn show(&self, file: usize, out: &mut Emitter<'_>) -> Result {
        let st = self.0.state().map_or_else(Default::default, Area::stats);
        let value = match file {
            0 => st.total_pages,
            1 => st.primary_used_pages,
            2 => st.secondary_lent_pages,
            3 => st.alloc_success,
            4 => st.alloc_fail,
            5 => st.discarded_pages,
            6 => st.release_pending_pages,
            7 => st.hwpoisoned_pages,
            8 => st.bad_pages,
            9 => u64::from(self.0.is_thp()),
            _ => return Err(EINVAL),
        };
        writeln!(out, "{value}").map_err(|_| EINVAL)
    }
}

/// Makes `/sys/kernel/mm/gcma/<area>/` for an area just put in service; a
/// failure is logged, and the area serves without its files.
pub(crate) fn add_area(area: &'static GcmaArea) {
    let made = root().and_then(|root| FileDir::new(area.name(), root, AreaFiles(area)));
    match made {
        Ok(dir) => {
            dir.leak();
        }
        Err(e) => pr_warn!("{}: no sysfs directory ({:?})\n", area.name(), e),
    }
}

/// The files of `/sys/kernel/mm/gcma/dmem/<client>/`, for client `0`
/// (`enum gcma_dmem_client`).
struct DmemFiles(c_uint);

/// The client counters' files, in [`DmemFiles::FILES`] after `enabled`.
const DMEM_STATS: usize = 15;

impl DmemFiles {
    /// The client's name, that of its directory.
    fn name(client: c_uint) -> &'static CStr {
        match client {
            bindings::gcma_dmem_client_GCMA_DMEM_FILE => c_str!("file"),
            _ => c_str!("swap"),
        }
    }
}

impl Files for DmemFiles {
    const FILES: &'static [File] = &[
        File::read_write(c_str!("enabled")),
        File::read_only(c_str!("stored_pages")),
        File::read_only(c_str!("held_pages")),
        File::read_only(c_str!("stores")),
        File::read_only(c_str!("loads")),
        File::read_only(c_str!("misses")),
        File::read_only(c_str!("invalidations")),
        File::read_only(c_str!("discards")),
        File::read_only(c_str!("evictions")),
        File::read_only(c_str!("refused_nomem")),
        File::read_only(c_str!("refused_nospace")),
        File::read_only(c_str!("refused_discarded")),
        File::read_only(c_str!("refused_superseded")),
        File::read_only(c_str!("refused_disabled")),
        File::read_only(c_str!("refused_large")),
        File::read_only(c_str!("poisoned")),
        #[cfg(CONFIG_GCMA_DMEM_VERIFY)]
        File::read_only(c_str!("verified")),
        #[cfg(CONFIG_GCMA_DMEM_VERIFY)]
        File::read_only(c_str!("verify_mismatches")),
        #[cfg(CONFIG_GCMA_DMEM_VERIFY)]
        File::read_only(c_str!("verify_skipped")),
    ];

    fn show(&self, file: usize, out: &mut Emitter<'_>) -> Result {
        let client = dmems().and_then(|d| d.client(self.0)).ok_or(ENODEV)?;
        let value = match file {
            0 => u64::from(client.enabled()),
            1..=DMEM_STATS => {
                let s = client.stats();
                [
                    s.stored_pages,
                    s.held_pages,
                    s.stores,
                    s.loads,
                    s.misses,
                    s.invalidations,
                    s.discards,
                    s.evictions,
                    s.refused_nomem,
                    s.refused_nospace,
                    s.refused_discarded,
                    s.refused_superseded,
                    s.refused_disabled,
                    s.refused_large,
                    s.poisoned,
                ][file - 1]
            }
            #[cfg(CONFIG_GCMA_DMEM_VERIFY)]
            f if f <= DMEM_STATS + 3 => {
                let (mut verified, mut mismatches, mut skipped) = (0, 0, 0);
                // SAFETY: FFI call; the three pointers are valid for writes.
                unsafe {
                    bindings::gcma_dmem_verify_counts(
                        self.0,
                        &mut verified,
                        &mut mismatches,
                        &mut skipped,
                    )
                };
                [verified, mismatches, skipped][f - DMEM_STATS - 1]
            }
            _ => return Err(EINVAL),
        };
        writeln!(out, "{value}").map_err(|_| EINVAL)
    }

    fn store(&self, _file: usize, input: &[u8]) -> Result {
        // Only `enabled` can be written.  The C parser takes the words that
        // `gcma.dmem_<client>=` takes, and one newline after them; it needs
        // the text NUL-terminated.
        let mut text = [0u8; 16];
        let word = input.strip_suffix(b"\n").unwrap_or(input);
        let mut on = false;
        let parsed = word.len() < text.len() && {
            text[..word.len()].copy_from_slice(word);
            // SAFETY: `text` is NUL-terminated (zeroed past `word`); `on` is
            // valid for writes.
            unsafe { bindings::gcma_parse_bool(text.as_ptr().cast(), &mut on) == 0 }
        };
        if !parsed {
            warn_not_boolean(self.0, input);
            return Err(EINVAL);
        }
        dmem_client::switch(self.0, on)
    }
}

/// Logs, rate-limited, that `input` written to `enabled` of `client` is not
/// a boolean: the first line of it, at most 16 bytes.
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
            FileDir::new(DmemFiles::name(client), dmem, DmemFiles(client))?.leak();
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
impl Files for ThpFiles {
    const FILES: &'static [File] = &[
        File::read_write(c_str!("mode")),
        File::read_only(c_str!("stat")),
    ];

    fn show(&self, file: usize, out: &mut Emitter<'_>) -> Result {
        use crate::thp::{self, Mode};
        match file {
            0 => {
                let now = thp::mode();
                for (i, m) in Mode::all().into_iter().enumerate() {
                    let sep = if i == 0 { "" } else { " " };
                    if m == now {
                        write!(out, "{sep}[{}]", m.name())
                    } else {
                        write!(out, "{sep}{}", m.name())
                    }
                    .map_err(|_| EINVAL)?;
                }
                writeln!(out).map_err(|_| EINVAL)
            }
            1 => {
                // One "name value" line per counter, as /proc/vmstat has.
                let st = thp::stats();
                write!(
                    out,
                    "gcma_thp_fault_alloc {}\ngcma_thp_fault_fail {}\n\
                     gcma_thp_collapse_alloc {}\ngcma_thp_collapse_fail {}\n",
                    st.fault_alloc, st.fault_fail, st.collapse_alloc, st.collapse_fail
                )
                .map_err(|_| EINVAL)
            }
            _ => Err(EINVAL),
        }
    }

    fn store(&self, _file: usize, input: &[u8]) -> Result {
        // Only `mode` can be written: a mode's name, and one newline.
        let word = input.strip_suffix(b"\n").unwrap_or(input);
        let mode = crate::thp::Mode::all()
            .into_iter()
            .find(|m| m.name().as_bytes() == word)
            .ok_or(EINVAL)?;
        // SAFETY: FFI call; the mode is one of `enum gcma_thp_mode`.
        to_result(unsafe { bindings::gcma_thp_set_mode(mode.raw()) })
    }
}

/// Makes `/sys/kernel/mm/gcma/thp/`; a failure is logged, and the mode
/// stays what the boot set.
#[cfg(CONFIG_GCMA_THP)]
pub(crate) fn add_thp() {
    let made = root().and_then(|root| FileDir::new(c_str!("thp"), root, ThpFiles));
    match made {
        Ok(dir) => {
            dir.leak();
        }
        Err(e) => pr_warn!("thp: no sysfs directory ({:?})\n", e),
    }
}
