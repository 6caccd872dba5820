// SPDX-License-Identifier: GPL-2.0

//! Host build of DMEM, `mm/gcma_rs/dmem/`, compiled unchanged against the
//! kernel-crate shim, with host implementations of its traits
//! ([`host`]): `std` (or, under `--cfg loom`, `loom`) mutexes as locks,
//! `BTreeMap` buckets whose nodes are fallible `KBox` allocations (so the
//! shim's fault injection reaches them), page supplies over a plain table
//! or over the real GCMA page-state map (`mm/gcma_rs/area_map/`), and
//! page memory made of atomic words.
//!
//! The shared modules declare their items `pub(crate)`, so the tests live
//! inside this crate: `src/tests.rs` (property and stress tests), and
//! `src/loom_model.rs` under `--cfg loom`, run with
//! `RUSTFLAGS="--cfg loom" cargo test --release -p dmem-core --lib`.

// The kernel's lints for Rust code apply through `[lints] workspace = true`
// (tools/host/Cargo.toml).
// The store has no unsafe code, and must not grow any.
#![deny(unsafe_code)]

// The crate is a test harness: nothing outside its tests uses these.
//
// The page-state map serves only as a page supply here (its lending side;
// gcma-core tests the whole map), and the loom model drives only the
// store, load and discard paths: those builds do not use all of the
// shared modules.  The property and stress tests use all of DMEM, so their
// build reports dead code in it.
#[cfg(test)]
#[allow(dead_code)]
#[path = "../../../../../mm/gcma_rs/area_map/mod.rs"]
mod area_map;

#[cfg(test)]
#[cfg_attr(loom, allow(dead_code, unused_imports))]
#[path = "../../../../../mm/gcma_rs/dmem/mod.rs"]
mod dmem;

#[cfg(test)]
#[cfg_attr(loom, allow(dead_code))]
mod host;

#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(all(test, loom))]
mod loom_model;

/// The constants and options of the kernel this crate mirrors, from the
/// configured kernel tree when there is one (see `build.rs`).
pub mod kernel_config {
    include!(concat!(env!("OUT_DIR"), "/kernel_config.rs"));
}
