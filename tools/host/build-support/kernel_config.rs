// SPDX-License-Identifier: GPL-2.0

//! The kernel's constants for the build scripts of the host crates.
//!
//! Each crate's `build.rs` includes this file with `#[path]` and calls
//! [`emit`], which writes `$OUT_DIR/kernel_config.rs` for the crate to
//! `include!`: the page geometry (`PAGE_SHIFT`, `PAGE_SIZE`,
//! `MAX_PAGE_ORDER`, `PMD_ORDER`, `PAGEBLOCK_ORDER`) and whether each
//! Kconfig option the crate names is set.  They come from a configured
//! and built kernel tree: `$RSMM_KERNEL_BUILD` if set, else the KUnit
//! build of this repository (`build/kunit`) if it exists.  The geometry is
//! read from the kernel's bindgen output (`rust/bindings/
//! bindings_generated.rs`, what the kernel crate itself uses) and the
//! options from `.config`; `pageblock_order` is derived from the options
//! as `include/linux/pageblock-flags.h` does.  Whatever cannot be read
//! falls back to the x86-64 defaults with a cargo warning, so the host
//! tier still builds without a kernel tree and says that it did.

use std::{
    collections::BTreeMap,
    env, fs,
    path::{Path, PathBuf},
};

/// x86-64's defaults: 4 KiB pages, `MAX_PAGE_ORDER` 10, 2 MiB PMDs.
const DEFAULT_PAGE_SHIFT: u32 = 12;
const DEFAULT_MAX_PAGE_ORDER: u32 = 10;
const DEFAULT_PMD_SHIFT: u32 = 21;

/// Returns the build directory of the kernel tree to read, if any.
fn kernel_build() -> Option<PathBuf> {
    println!("cargo:rerun-if-env-changed=RSMM_KERNEL_BUILD");
    if let Some(dir) = env::var_os("RSMM_KERNEL_BUILD") {
        return Some(PathBuf::from(dir));
    }
    // tools/host/crates/<crate> -> the repository's build/kunit.
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR")?);
    let dir = manifest.join("../../../../build/kunit");
    let dir = dir.canonicalize().unwrap_or(dir);
    dir.join(".config").is_file().then_some(dir)
}

/// Reads `NAME=value` lines of a `.config`.
fn read_config(path: &Path) -> Option<BTreeMap<String, String>> {
    println!("cargo:rerun-if-changed={}", path.display());
    let text = fs::read_to_string(path).ok()?;
    Some(
        text.lines()
            .filter_map(|l| l.split_once('='))
            .filter(|(k, _)| k.starts_with("CONFIG_"))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

/// Reads `pub const NAME: u32 = value;` items of the bindgen output.
fn read_consts(path: &Path, names: &[&str]) -> BTreeMap<String, u32> {
    println!("cargo:rerun-if-changed={}", path.display());
    let mut found = BTreeMap::new();
    let Ok(text) = fs::read_to_string(path) else {
        return found;
    };
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("pub const ") else {
            continue;
        };
        let Some((name, rest)) = rest.split_once(": u32 = ") else {
            continue;
        };
        if names.contains(&name) {
            if let Ok(v) = rest.trim_end_matches(';').parse() {
                found.insert(name.to_string(), v);
            }
        }
    }
    found
}

/// Writes `$OUT_DIR/kernel_config.rs` with the kernel's page geometry and
/// the state of each of `options` (names without `CONFIG_`), and declares
/// `cfg(CONFIG_<option>)` as a cfg the crate's code may test.
pub(crate) fn emit(options: &[&str]) {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=../../build-support/kernel_config.rs");
    for o in options {
        println!("cargo:rustc-check-cfg=cfg(CONFIG_{o})");
    }
    let tree = kernel_build();
    let config = tree
        .as_deref()
        .and_then(|d| read_config(&d.join(".config")));
    let consts = tree
        .as_deref()
        .map(|d| {
            read_consts(
                &d.join("rust/bindings/bindings_generated.rs"),
                &["PAGE_SHIFT", "MAX_PAGE_ORDER", "PMD_SHIFT"],
            )
        })
        .unwrap_or_default();
    let from = tree
        .as_deref()
        .map_or("no kernel tree".to_string(), |d| d.display().to_string());
    if tree.is_none() {
        println!(
            "cargo:warning=no configured kernel tree (set RSMM_KERNEL_BUILD or build build/kunit): \
             using x86-64 defaults for the kernel's constants"
        );
    } else if config.is_none() {
        println!("cargo:warning={from}: no .config: using the defaults of Kconfig options (unset)");
    }
    let get = |name: &str, default: u32| match consts.get(name) {
        Some(v) => *v,
        None => {
            if tree.is_some() {
                println!(
                    "cargo:warning={from}: {name} not in rust/bindings/bindings_generated.rs \
                     (kernel not built?): using {default}"
                );
            }
            default
        }
    };
    let page_shift = get("PAGE_SHIFT", DEFAULT_PAGE_SHIFT);
    let max_order = get("MAX_PAGE_ORDER", DEFAULT_MAX_PAGE_ORDER);
    let pmd_order = get("PMD_SHIFT", DEFAULT_PMD_SHIFT) - page_shift;
    let have_config = config.is_some();
    let config = config.unwrap_or_default();
    let set = |o: &str| config.get(o).is_some_and(|v| v == "y" || v == "m");
    // include/linux/pageblock-flags.h: the huge page order where the
    // kernel has huge pages, at most MAX_PAGE_ORDER.  (x86-64's and
    // arm64's hugetlb order is the PMD's.)
    let pageblock_order = if set("CONFIG_HUGETLB_PAGE_SIZE_VARIABLE") {
        println!(
            "cargo:warning={from}: pageblock_order is set at boot \
             (CONFIG_HUGETLB_PAGE_SIZE_VARIABLE): using the PMD order"
        );
        pmd_order.min(max_order)
    } else if set("CONFIG_HUGETLB_PAGE") || set("CONFIG_TRANSPARENT_HUGEPAGE") {
        pmd_order.min(max_order)
    } else if have_config {
        max_order
    } else {
        // x86-64's configurations have huge pages.
        pmd_order.min(max_order)
    };

    let mut out = format!(
        "// Generated by build.rs from {from}.\n\
         /// `PAGE_SHIFT` of the kernel.\n\
         pub const PAGE_SHIFT: u32 = {page_shift};\n\
         /// `PAGE_SIZE` of the kernel.\n\
         pub const PAGE_SIZE: usize = 1 << PAGE_SHIFT;\n\
         /// `MAX_PAGE_ORDER` of the kernel: the largest order the buddy allocator hands out.\n\
         pub const MAX_PAGE_ORDER: u32 = {max_order};\n\
         /// Order of a PMD-sized page (`PMD_SHIFT - PAGE_SHIFT`).\n\
         pub const PMD_ORDER: u32 = {pmd_order};\n\
         /// `pageblock_order` of the kernel.\n\
         pub const PAGEBLOCK_ORDER: u32 = {pageblock_order};\n\
         /// Whether the kernel's constants came from a kernel tree (`false`: defaults).\n\
         pub const FROM_KERNEL_TREE: bool = {};\n",
        !consts.is_empty()
    );
    for o in options {
        out += &format!(
            "/// Whether the kernel tree sets `CONFIG_{o}`.\n\
             pub const CONFIG_{o}: bool = {};\n",
            set(&format!("CONFIG_{o}"))
        );
    }
    let dst = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    fs::write(dst.join("kernel_config.rs"), out).expect("OUT_DIR is writable");
}

/// Writes `$OUT_DIR/<file>` with one `pub const NAME: u64` per entry of
/// `consts`, read from the kernel's bindgen output (any integer type:
/// `u32` for plain macros, `vm_flags_t` for the `RUST_CONST_HELPER_`
/// constants) or, failing that, the entry's default, with a cargo warning.
/// For crates that mirror flag values of the kernel (VMA flags).
#[allow(dead_code)]
pub(crate) fn emit_u64_consts(file: &str, consts: &[(&str, u64)]) {
    let tree = kernel_build();
    let from = tree
        .as_deref()
        .map_or("no kernel tree".to_string(), |d| d.display().to_string());
    let mut found = BTreeMap::new();
    if let Some(dir) = tree.as_deref() {
        let path = dir.join("rust/bindings/bindings_generated.rs");
        println!("cargo:rerun-if-changed={}", path.display());
        let text = fs::read_to_string(&path).unwrap_or_default();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("pub const ") else {
                continue;
            };
            let Some((name, rest)) = rest.split_once(": ") else {
                continue;
            };
            let Some((_, value)) = rest.split_once(" = ") else {
                continue;
            };
            if consts.iter().any(|(n, _)| *n == name) {
                if let Ok(v) = value.trim_end_matches(';').parse::<u64>() {
                    found.insert(name.to_string(), v);
                }
            }
        }
    }
    let mut out = format!("// Generated by build.rs from {from}.\n");
    for (name, default) in consts {
        let v = match found.get(*name) {
            Some(v) => *v,
            None => {
                println!(
                    "cargo:warning={from}: {name} not in rust/bindings/bindings_generated.rs: \
                     using x86-64's {default:#x}"
                );
                *default
            }
        };
        out += &format!("/// `{name}` of the kernel.\npub const {name}: u64 = {v:#x};\n");
    }
    let dst = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    fs::write(dst.join(file), out).expect("OUT_DIR is writable");
}
