// SPDX-License-Identifier: GPL-2.0

//! The `rcx_node_lock` suite: the per-node lock words on their own.

use crate::node_lock::{NodeLocks, CACHE_LINE};
use kernel::{
    kunit_expect, kunit_expect_eq,
    mm::numa::{self, NodeId},
    prelude::*,
};

/// Every node has a word, and every word owns a whole cache line.
fn node_lock_layout() -> Result {
    let locks = NodeLocks::new(GFP_KERNEL)?;
    kunit_expect_eq!(locks.len(), numa::nr_node_ids());
    let mut prev: Option<usize> = None;
    for node in NodeId::all() {
        let addr = locks.word_addr(node);
        kunit_expect_eq!(addr % CACHE_LINE, 0);
        if let Some(p) = prev {
            kunit_expect!(
                addr - p >= CACHE_LINE,
                "words {:#x} and {:#x} share a line",
                p,
                addr
            );
        }
        prev = Some(addr);
    }
    Ok(())
}

/// A word is won by one token at a time, and words of different nodes are
/// independent.
fn node_lock_exclusion() -> Result {
    let locks = NodeLocks::new(GFP_KERNEL)?;
    let here = numa::current_node();
    kunit_expect_eq!(locks.try_lock(here, 0), Err(EINVAL));
    kunit_expect_eq!(locks.try_lock(here, 1), Ok(()));
    kunit_expect_eq!(locks.holder(here), Some(1));
    kunit_expect_eq!(locks.try_lock(here, 2), Err(EBUSY));
    kunit_expect_eq!(locks.unlock(here, 2), Err(EPERM));
    kunit_expect_eq!(locks.holder(here), Some(1));
    for node in NodeId::all().filter(|n| *n != here) {
        kunit_expect_eq!(locks.holder(node), None);
        kunit_expect_eq!(locks.try_lock(node, 2), Ok(()));
        kunit_expect_eq!(locks.unlock(node, 2), Ok(()));
    }
    kunit_expect_eq!(locks.unlock(here, 1), Ok(()));
    kunit_expect_eq!(locks.holder(here), None);
    kunit_expect_eq!(locks.try_lock(here, 2), Ok(()));
    Ok(())
}

kernel::kunit_suite! {
    name: "rcx_node_lock",
    cases: [node_lock_layout, node_lock_exclusion],
}
