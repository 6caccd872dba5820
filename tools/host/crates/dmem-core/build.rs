// SPDX-License-Identifier: GPL-2.0

//! Writes `$OUT_DIR/kernel_config.rs`, the constants of the kernel this
//! crate mirrors, from the configured kernel tree when there is one (see
//! `tools/host/build-support/kernel_config.rs`).

#[path = "../../build-support/kernel_config.rs"]
mod kernel_config;

fn main() {
    kernel_config::emit(&["GCMA", "GCMA_KUNIT_TEST", "GCMA_THP"]);
}
