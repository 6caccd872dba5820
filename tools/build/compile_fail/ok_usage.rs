// expect: ok
//! Control: the same APIs used correctly compile, so the failures of the
//! other snippets are the errors they name, not a broken harness.
use bonsai::RangeTree;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::{
    delay::{self, MaySleep},
    prelude::*,
    sync::rcu::{self, AtomicDrop, RcuHead},
};
use rcx::{hash::RcxHash, list::RcxList, Mode};

struct Node {
    rcu: RcuHead,
    hits: AtomicU64,
}
kernel::impl_has_rcu_head!(Node, rcu);
// SAFETY: no drop glue beyond atomics.
unsafe impl AtomicDrop for Node {}

pub fn good(tree: &RangeTree<u64>, ctx: &mut MaySleep) -> Result {
    // Work under the section, sleep after it.
    let v = tree.with_range(ctx, 0, |e| *e.value);
    delay::msleep(ctx, 1);
    tree.for_each(ctx, |_| {});
    let _ = tree.with_range_from(ctx, 0, |e| e.start);
    tree.flush(ctx);

    let list = RcxList::<Option<KBox<u64>>>::new(Mode::Fallback)?;
    list.insert(1, Some(KBox::new(1, GFP_KERNEL)?))?;
    let _ = list.with_value(ctx, 1, |v| v.as_deref().copied());
    list.for_each_key(ctx, |_| {});
    list.with_first(ctx, |item| item.key());
    let table = RcxHash::<u64>::new(Mode::Fallback, 4)?;
    let _ = table.with_value(ctx, 1, |v| *v);

    {
        let guard = rcu::read_lock(ctx);
        // Lookups that take no token are fine inside a section.
        let _ = list.contains(1) || table.contains(1) || v.is_some();
        drop(guard);
    }
    rcu::synchronize_rcu(ctx);
    delay::cond_resched(ctx);

    let node = KBox::new(
        Node {
            rcu: RcuHead::new(),
            hits: AtomicU64::new(0),
        },
        GFP_KERNEL,
    )?;
    node.hits.fetch_add(1, Ordering::Relaxed);
    rcu::drop_after_gp(node);
    rcu::barrier(ctx);
    Ok(())
}

/// A test's workers are joined before the token is lent to an RCU guard.
pub fn good_workers(ctx: &mut MaySleep) {
    let workers = kernel::kunit::suite::spawn_workers(ctx, 1, |_| || {});
    drop(workers);
    let guard = rcu::read_lock(ctx);
    drop(guard);
}

/// A `Sync` value is published once and read back.
pub fn good_once_ref() -> Option<u64> {
    static SLOT: kernel::sync::once_ref::OnceRef<AtomicU64> =
        kernel::sync::once_ref::OnceRef::new();
    static VALUE: AtomicU64 = AtomicU64::new(7);
    let _ = SLOT.set(&VALUE);
    SLOT.get().map(|v| v.load(Ordering::Relaxed))
}
