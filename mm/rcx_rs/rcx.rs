// SPDX-License-Identifier: GPL-2.0

//! RCX: NUMA-aware update-side synchronisation for RCU.
//!
//! RCX (chapter 3 of the thesis this project follows) keeps RCU's readers
//! unchanged and reorganises the updaters.  Every RCX-protected item embeds
//! one lock word per NUMA node and one global lock, each on its own cache
//! line.  An updater first wins its own node's word on every item it will
//! touch, so updaters of one node settle their contention locally, and only
//! the winners go on to take the items' global locks, revalidate and update.
//!
//! This crate root holds the pieces shared by the RCX list and hash table:
//!
//! - [`node_lock`]: the per-node lock words, sized at run time from
//!   `nr_node_ids`.

#![cfg_attr(not(CONFIG_RCX_KUNIT_TEST), allow(dead_code))]

pub mod node_lock;

#[cfg(CONFIG_RCX_KUNIT_TEST)]
mod tests;

/// Prefix of this crate's log lines (used by `pr_*!`).
const __LOG_PREFIX: &[u8] = b"rcx\0";
