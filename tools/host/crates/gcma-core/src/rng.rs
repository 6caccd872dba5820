// SPDX-License-Identifier: GPL-2.0

//! The host crates' shared generator, under the name this crate's tests
//! and benchmark use.

pub use host_rng::Rng;
