// SPDX-License-Identifier: GPL-2.0

//! Host build of the GCMA page-state map, `mm/gcma_rs/area_map/`,
//! compiled unchanged against the kernel-crate shim.
//!
//! The shared module declares its items `pub(crate)`, as the kernel crate
//! that includes it privately requires, so they cannot be re-exported
//! from here: the tests live inside this crate (`src/tests.rs`), and the
//! benchmark is the public [`bench`] module, which the `gcma-bench` binary
//! runs.

// The tests use the whole map; the benchmark binary, the only user of a
// non-test build, only allocates and releases.  Items only tests use are
// gated in the map itself (`cfg(test)`).
#[cfg_attr(not(test), allow(dead_code))]
#[path = "../../../../../mm/gcma_rs/area_map/mod.rs"]
mod area_map;

// The parsers of GCMA's boot parameters (`mm/gcma_rs/cmdline.rs`), which
// only the tests use here.
#[cfg(test)]
#[path = "../../../../../mm/gcma_rs/cmdline.rs"]
mod cmdline;

// The checks of a device-tree area's node (`mm/gcma_rs/of_node.rs`), which
// only the tests use here.
#[cfg(test)]
#[path = "../../../../../mm/gcma_rs/of_node.rs"]
mod of_node;

pub mod baseline;
pub mod bench;
pub mod rng;

#[cfg(test)]
mod cmdline_tests;
#[cfg(test)]
mod of_node_tests;
#[cfg(test)]
mod tests;

/// The constants and options of the kernel this crate mirrors, from the
/// configured kernel tree when there is one (see `build.rs`).
pub mod kernel_config {
    include!(concat!(env!("OUT_DIR"), "/kernel_config.rs"));
}
