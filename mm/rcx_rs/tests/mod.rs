// SPDX-License-Identifier: GPL-2.0

//! KUnit suites of the RCX crate, one file per topic:
//!
//! - `node_lock`: the `rcx_node_lock` suite, the per-node lock words;
//! - `protocol` and `model`: the cases of the `rcx_list` suite (declared
//!   here), the update protocol and the list and hash table against a
//!   model;
//! - `stress`: the `rcx_stress` suite, concurrent updaters, run
//!   separately with more CPUs.

use crate::{hash::RcxHash, list::RcxList, Stats};
use kernel::{delay::MaySleep, prelude::*};

mod model;
mod node_lock;
mod protocol;
mod stress;

/// The operations a model test needs from a structure.
trait Set {
    fn ins(&self, k: u64) -> Result<bool>;
    fn rem(&self, k: u64) -> bool;
    fn has(&self, k: u64) -> bool;
    fn val(&self, ctx: &mut MaySleep, k: u64) -> Option<u64>;
    fn check(&self) -> Result<usize>;
    fn stats(&self) -> Stats;
}

/// Both structures offer the same operations under the same names.
macro_rules! impl_set {
    ($($t:ident),*) => {$(
        impl Set for $t<u64> {
            fn ins(&self, k: u64) -> Result<bool> {
                self.insert(k, k.wrapping_mul(3))
            }
            fn rem(&self, k: u64) -> bool {
                self.remove(k)
            }
            fn has(&self, k: u64) -> bool {
                self.contains(k)
            }
            fn val(&self, ctx: &mut MaySleep, k: u64) -> Option<u64> {
                self.with_value(ctx, k, |v| *v)
            }
            fn check(&self) -> Result<usize> {
                $t::check(self)
            }
            fn stats(&self) -> Stats {
                $t::stats(self)
            }
        }
    )*};
}

impl_set!(RcxList, RcxHash);

/// The suite of the list and hash table (one suite per module).
mod list_suite {
    use super::{model::*, protocol::*};

    kernel::kunit_suite! {
        name: "rcx_list",
        cases: [
            item_layout,
            emulated_txn_outcomes,
            attempt_holds_named_items,
            uncontended_attempt_skips_phase1,
            global_guard_releases,
            list_model_fallback,
            list_model_emulated,
            list_model_auto,
            list_model_shared_slots,
            hash_model_fallback,
            hash_model_emulated,
            removal_frees_after_gp,
            removal_links_back,
            aborting_txn_falls_back,
        ],
    }
}
