// SPDX-License-Identifier: GPL-2.0

//! Freeing a large VMA index in process context.
//!
//! An index taken out of its address space is dropped by an RCU callback
//! (`rcu::drop_after_gp`), in softirq context, and a tree frees its nodes
//! one by one when dropped.  For the index of a process with thousands of
//! VMAs that is thousands of `kfree()`s in one callback, where RCU
//! otherwise bounds the work of each callback batch.  So the exit path
//! (which ends every index but the few dropped for a short reserve) gives
//! a large index a [`Reaper`]: when the callback drops the index after the
//! grace period, the tree moves into the reaper, which the unbound
//! workqueue then drops in process context.  The grace period still
//! separates the lookups from the frees; the work only moves them out of
//! softirq.

use core::{
    mem,
    sync::atomic::{AtomicUsize, Ordering},
};
use kernel::{
    alloc::Flags,
    prelude::*,
    workqueue::{self, impl_has_work, new_work, Work, WorkItem},
};

use crate::tree;
use kernel::mm::virt::VmaPtr;

/// Trees of more nodes than this are freed by a [`Reaper`] (a few
/// microseconds of `kfree()` below it).
pub(super) const REAP_MIN_NODES: usize = 512;

/// Trees freed by a reaper so far (for the KUnit suite).
pub(super) static REAPED: AtomicUsize = AtomicUsize::new(0);

/// A tree on its way to be freed by the unbound workqueue.
#[pin_data]
pub(super) struct Reaper {
    #[pin]
    work: Work<Reaper>,
    /// Empty until [`Reaper::reap`] moves the tree to be freed in.
    tree: tree::Tree<VmaPtr>,
}

impl_has_work! {
    impl HasWork<Self> for Reaper { self.work }
}

impl WorkItem for Reaper {
    type Pointer = Pin<KBox<Reaper>>;

    /// Runs in process context: dropping the reaper frees the tree.
    fn run(this: Pin<KBox<Reaper>>) {
        drop(this);
        REAPED.fetch_add(1, Ordering::Relaxed);
    }
}

impl Reaper {
    /// A reaper with an empty tree, allocated with `flags` (it may be
    /// asked for where sleeping is not allowed).
    pub(super) fn new(flags: Flags) -> Result<Pin<KBox<Self>>> {
        KBox::pin_init(
            pin_init!(Self {
                work <- new_work!("bonsai_vma::reap"),
                tree: tree::Tree::new(),
            }),
            flags,
        )
    }

    /// Moves `tree` in, leaving an empty tree in its place, and queues the
    /// reaper to free it.  May run in any context: queueing work neither
    /// sleeps nor allocates.
    pub(super) fn reap(mut self: Pin<KBox<Self>>, tree: &mut tree::Tree<VmaPtr>) {
        // SAFETY: only `tree`, a field that is not structurally pinned,
        // is written; `work` stays where it is.
        mem::swap(&mut unsafe { self.as_mut().get_unchecked_mut() }.tree, tree);
        // A boxed work item is owned by its one pointer, so it cannot be
        // queued already: queueing it always succeeds.
        workqueue::system_unbound().enqueue(self);
    }
}
