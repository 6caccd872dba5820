// SPDX-License-Identifier: GPL-2.0

//! Host build of the Bonsai tree, `mm/bonsai_rs/tree/`, compiled unchanged
//! against the kernel-crate shim.
//!
//! This crate root plays the part of the kernel crate root
//! (`mm/bonsai_rs/bonsai.rs`): it provides the `platform` seam (`std`
//! atomics, or `loom`'s under `--cfg loom`) and, in [`host_rcu`], a small
//! RCU stand-in implementing [`tree::ReadSide`].
//!
//! Run the loom model with
//! `RUSTFLAGS="--cfg loom" cargo test --release -p bonsai-core --test loom`.
//!
//! # Values are copied
//!
//! Rotations copy a node, value included, while lookups may still hold a
//! reference to the old copy; a value must therefore be `Copy`, so that
//! it has no interior mutability of its own.  A tree of atomics, whose
//! `fetch_add` through a lookup's reference could race a rotation and land
//! on the retired copy, does not compile:
//!
//! ```compile_fail,E0277
//! use bonsai_core::host_tree::HostTree;
//! use std::sync::atomic::{AtomicU64, Ordering};
//!
//! let t = HostTree::<AtomicU64>::default();
//! t.insert(0, 1, AtomicU64::new(0)).unwrap();
//! let g = t.read();
//! if let Some(e) = t.tree().find(&g, 0) {
//!     e.value.fetch_add(1, Ordering::Relaxed);
//! }
//! ```
//!
//! A tree of plain values, or of pointers to shared atomics, is fine:
//!
//! ```
//! use bonsai_core::host_tree::HostTree;
//! use std::sync::atomic::{AtomicU64, Ordering};
//!
//! static HITS: AtomicU64 = AtomicU64::new(0);
//! let t = HostTree::<&'static AtomicU64>::default();
//! t.insert(0, 1, &HITS).unwrap();
//! let g = t.read();
//! if let Some(e) = t.tree().find(&g, 0) {
//!     e.value.fetch_add(1, Ordering::Relaxed);
//! }
//! assert_eq!(HITS.load(Ordering::Relaxed), 1);
//! ```

// The kernel's lints for Rust code apply through `[lints] workspace = true`
// (tools/host/Cargo.toml).
#![allow(
    clippy::collapsible_if,
    clippy::collapsible_match,
    clippy::needless_lifetimes,
    clippy::uninlined_format_args,
    clippy::unwrap_or_default
)]

/// The atomics the shared modules use.
pub(crate) mod platform {
    #[cfg(loom)]
    pub(crate) use loom::sync::atomic::{AtomicPtr, Ordering};

    #[cfg(not(loom))]
    pub(crate) use core::sync::atomic::{AtomicPtr, Ordering};

    /// Whether the next node allocation should fail (never, on the host).
    #[inline]
    pub(crate) fn inject_alloc_failure() -> bool {
        false
    }

    /// A node was allocated.
    #[inline]
    pub(crate) fn node_allocated() {}

    /// A node was freed.
    #[inline]
    pub(crate) fn node_freed() {}
}

#[path = "../../../../../mm/bonsai_rs/tree/mod.rs"]
pub mod tree;

pub mod bench;
pub mod churn;
pub mod host_rcu;
pub mod host_tree;
pub mod rng;

#[cfg(all(test, not(loom)))]
mod tests;

/// The constants and options of the kernel this crate mirrors, from the
/// configured kernel tree when there is one (see `build.rs`).
pub mod kernel_config {
    include!(concat!(env!("OUT_DIR"), "/kernel_config.rs"));
}
