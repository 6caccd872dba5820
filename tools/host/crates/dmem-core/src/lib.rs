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

// Not every consumer of the shared modules uses all of their API.
#[allow(dead_code)]
#[path = "../../../../../mm/gcma_rs/area_map/mod.rs"]
mod area_map;

#[allow(dead_code)]
#[path = "../../../../../mm/gcma_rs/dmem/mod.rs"]
mod dmem;

#[allow(dead_code)]
mod host;

#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(all(test, loom))]
mod loom_model;
