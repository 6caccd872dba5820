// SPDX-License-Identifier: GPL-2.0

//! Batches of retired nodes, handed to RCU with one callback each.

use core::mem;
use kernel::{
    alloc::Flags,
    prelude::*,
    sync::rcu::{AtomicDrop, HasRcuHead, RcuHead},
};

use crate::{platform, tree};

/// Retired nodes on their way through one RCU callback.
///
/// # Invariants
///
/// `list` is non-empty only between the moment a writer moves its pending
/// nodes in (after the writer sections that retired them ended) and the
/// RCU callback that drops the batch: a non-empty batch is only ever
/// dropped after a grace period.
pub(crate) struct RetireBatch<V> {
    head: RcuHead,
    pub(crate) list: tree::RetiredList<V>,
}

// SAFETY: `head` is a field of type `RcuHead` used only by `drop_after_gp`.
unsafe impl<V> HasRcuHead for RetireBatch<V> {
    const RCU_HEAD_OFFSET: usize = mem::offset_of!(Self, head);
}

// SAFETY: dropping a batch frees its nodes with `kfree()` and drops the
// values of the nodes that still own one, which are `Copy` (no drop
// glue); the node hooks of the KUnit build only count, with atomics.
unsafe impl<V: Copy> AtomicDrop for RetireBatch<V> {}

impl<V> RetireBatch<V> {
    /// Allocates an empty batch, for the next hand-off.
    pub(crate) fn new_box(flags: Flags) -> Result<KBox<Self>> {
        if platform::inject_alloc_failure() {
            return Err(ENOMEM);
        }
        let b = KBox::new(
            Self {
                head: RcuHead::new(),
                list: tree::RetiredList::new(),
            },
            flags,
        )?;
        Ok(b)
    }
}

impl<V> Drop for RetireBatch<V> {
    fn drop(&mut self) {
        let list = mem::take(&mut self.list);
        // SAFETY: by the type invariant a non-empty batch is dropped only
        // by its RCU callback, after a grace period that began after the
        // writer sections that retired its nodes had ended.
        unsafe { list.free() };
    }
}
