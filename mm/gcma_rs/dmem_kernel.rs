// SPDX-License-Identifier: GPL-2.0

//! The kernel's implementations of the traits of [`crate::dmem`]: spinlocks,
//! red-black-tree buckets, GCMA areas as the page supply, and page copies
//! between borrowed pages ([`SharedPage`], [`ExclusivePage`]).
//!
//! DMEM numbers the pages of all areas in one index space: the pages of
//! area `i` follow those of areas `0..i`, in the order the areas were put
//! in service.  The supply lends from the first area that has a free page.

use crate::{
    dmem::{BucketLock, BucketMap, Config, Handle, Key, Lock, LockClass, PageAccess, PageSupply},
    dmem::{FillCopy, IdlePage, Link, Platform, ReadCopy, Slot},
    Area,
};
use core::{marker::PhantomData, pin::Pin, ptr::NonNull};
use kernel::{
    alloc::Flags,
    bindings, delay,
    mm::{
        frames::PageFate,
        gcma::LendTag,
        page_access::{ExclusivePage, SharedPage},
    },
    new_spinlock,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::SpinLock,
};

/// A DMEM lock: a spinlock in its own allocation, so the value that holds
/// it may move.
pub(crate) struct KLock<T>(Pin<KBox<SpinLock<T>>>);

impl<T> Lock<T> for KLock<T> {
    fn new(value: T, class: LockClass) -> Result<Self> {
        // One lockdep class per lock class: bucket locks nest outside the
        // page lock.
        let lock = match class {
            LockClass::Bucket => KBox::pin_init(new_spinlock!(value, "dmem_bucket"), GFP_KERNEL)?,
            LockClass::Pages => KBox::pin_init(new_spinlock!(value, "dmem_page"), GFP_KERNEL)?,
        };
        Ok(KLock(lock))
    }

    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let mut guard = self.0.lock();
        f(&mut *guard)
    }
}

/// Polls of a discard's wait that only offer the CPU (`cond_resched()`)
/// before the wait sleeps between polls.  A copy takes a few microseconds,
/// so a copier running on another CPU is done well within them.
const SPIN_ROUNDS: u32 = 64;

/// Spinlocks; a discard that waits for copies offers the CPU, then sleeps.
pub(crate) struct KernelPlatform;

impl Platform for KernelPlatform {
    type Lock<T: Send> = KLock<T>;
    type SleepCtx = delay::MaySleep;

    fn relax(ctx: &delay::MaySleep, round: u32) {
        // `cond_resched()` never yields to a task of lower priority: a
        // SCHED_FIFO allocator that preempted a copier on its own CPU
        // would poll for ever (with RT throttling off).  Sleeping takes
        // the waiter off the run queue, so the copier finishes.
        if round < SPIN_ROUNDS {
            delay::cond_resched(ctx);
        } else {
            delay::msleep(ctx, 1);
        }
    }
}

/// The map of one bucket: a red-black tree whose nodes are reserved before
/// the bucket lock is taken.
pub(crate) struct RbMap<K>(RBTree<K, Handle>);

impl<K: Ord + Clone + Send> BucketMap<K> for RbMap<K> {
    type Node = RBTreeNodeReservation<K, Handle>;

    fn new() -> Self {
        RbMap(RBTree::new())
    }

    fn reserve(flags: Flags) -> Result<Self::Node> {
        RBTreeNodeReservation::new(flags)
    }

    fn insert(&mut self, node: Self::Node, key: K, handle: Handle) -> Option<Handle> {
        self.0
            .insert(node.into_node(key, handle))
            .map(|old| old.to_key_value().1)
    }

    fn get(&self, key: &K) -> Option<Handle> {
        self.0.get(key).copied()
    }

    fn remove(&mut self, key: &K) -> Option<Handle> {
        self.0.remove(key)
    }

    fn pop_range(&mut self, lo: &K, hi: &K) -> Option<(K, Handle)> {
        let cursor = self.0.cursor_lower_bound(lo)?;
        if cursor.current().0 > hi {
            return None;
        }
        Some(cursor.remove_current().1.to_key_value())
    }

    fn pop_first(&mut self) -> Option<(K, Handle)> {
        let cursor = self.0.cursor_front()?;
        Some(cursor.remove_current().1.to_key_value())
    }

    fn for_each(&self, mut f: impl FnMut(&K, Handle)) {
        for (k, h) in self.0.iter() {
            f(k, *h);
        }
    }
}

/// One area in DMEM's page index space.
pub(crate) struct AreaSpan {
    /// The area.
    pub(crate) area: &'static Area,
    /// DMEM index of the area's page 0.
    pub(crate) offset: usize,
    /// Pages in the area.
    pub(crate) nr_pages: usize,
}

/// The areas of the index space, in index order.
#[derive(Clone, Copy)]
pub(crate) struct Areas(pub(crate) &'static [AreaSpan]);

impl Areas {
    /// Pages in the index space.
    pub(crate) fn nr_pages(&self) -> usize {
        self.0.last().map_or(0, |s| s.offset + s.nr_pages)
    }

    /// The span of DMEM index `page` and the page's index in its area.
    fn span_of(&self, page: usize) -> Option<(&'static AreaSpan, usize)> {
        let s = self
            .0
            .iter()
            .find(|s| page >= s.offset && page - s.offset < s.nr_pages)?;
        Some((s, page - s.offset))
    }

    /// The page frame number of DMEM index `page`.
    pub(crate) fn pfn_of(&self, page: usize) -> Option<usize> {
        self.span_of(page).map(|(s, p)| s.area.base_pfn + p)
    }

    /// The DMEM index of page frame `pfn` of `area`.
    pub(crate) fn index_of(&self, area: &Area, pfn: usize) -> Option<usize> {
        let s = self.0.iter().find(|s| core::ptr::eq(s.area, area))?;
        let p = pfn.checked_sub(s.area.base_pfn)?;
        (p < s.nr_pages).then_some(s.offset + p)
    }
}

/// The page supply: pages lent by the areas' maps.
pub(crate) struct AreaSupply(pub(crate) Areas);

impl PageSupply for AreaSupply {
    fn lend(&self) -> Option<usize> {
        for s in self.0 .0 {
            let p = loop {
                let mut map = s.area.map.lock();
                let Ok(p) = map.lend_secondary() else {
                    break None;
                };
                if !s.area.is_hwpoisoned(p) {
                    break Some(p);
                }
                // Bad memory, found free: out of use for good.  The map
                // has one page fewer to lend each time, so this ends.
                if map.return_secondary(p).is_ok()
                    && s.area.retire_in(&mut map, p, PageFate::Poisoned)
                {
                    s.area.note_retired(p, PageFate::Poisoned);
                }
            };
            let Some(p) = p else { continue };
            // The page is free in the map's eyes, so it may be poisoned and
            // unmapped: it gets the allocation steps before it is copied
            // to, counted under the lending's allocation tag.
            let _tag = LendTag::enter();
            // SAFETY: `p` is a free page of the area the map just lent:
            // nobody else uses it.
            let lent = unsafe { s.area.frames.lend(p) };
            // The store holds it by index from here on.
            return Some(s.offset + lent.keep());
        }
        None
    }

    fn give_back(&self, page: IdlePage) {
        let Some((s, p)) = self.0.span_of(page.page()) else {
            return;
        };
        let pfn = s.area.base_pfn + p;
        // The free steps run before the map frees the page: once it is
        // free, an allocation may take it and run the allocation steps.
        // SAFETY: an `IdlePage` is made only by the store's page table for
        // a page lent by `lend` that it no longer touches, and consumed
        // here: this call has the one right to end the lending.
        let freed = unsafe { s.area.frames.lent(p) }.give_back().is_ok();
        // Bad memory (`memory_failure()` marked it, or a copy out of it
        // failed) or a page the free steps found in a bad state (they
        // reported it, having undone the lending): out of use for good
        // instead of back to the map.
        let fate = if s.area.is_hwpoisoned(p) || s.area.take_failed_copy(p) {
            PageFate::Poisoned
        } else if !freed {
            PageFate::Bad
        } else {
            PageFate::Freed
        };
        let mut map = s.area.map.lock();
        if map.return_secondary(p).is_err() {
            pr_err!("dmem: page at pfn {:#x} was not lent\n", pfn);
        } else if s.area.retire_in(&mut map, p, fate) {
            drop(map);
            s.area.note_retired(p, fate);
        }
    }
}

/// Copies between the store's pages and the clients' pages.
pub(crate) struct AreaPages(pub(crate) Areas);

impl AreaPages {
    /// The `struct page` of DMEM index `page`.
    fn page_ptr(&self, page: usize) -> Option<NonNull<bindings::page>> {
        let pfn = self.0.pfn_of(page)?;
        // SAFETY: `pfn` is a page of an area, which is in the memory map.
        NonNull::new(unsafe { bindings::pfn_to_page(pfn as _) })
    }
}

impl PageAccess for AreaPages {
    type Src<'a> = SharedPage<'a>;
    type Dst<'a> = ExclusivePage<'a>;

    fn copy_in(&self, to: &FillCopy, src: SharedPage<'_>) -> bool {
        let Some(p) = self.page_ptr(to.page()) else {
            return false;
        };
        // SAFETY: a `FillCopy` is made only by the store, for the length of
        // this call, for a page lent by `AreaSupply::lend` (allocation
        // steps done, so mapped and unpoisoned for KASAN) and bound to a
        // new entry in `Filling` with this store as its only copier:
        // nobody else reads it, gives it back or hands it to an allocation
        // until the copy ends.
        let mut dst = unsafe { ExclusivePage::from_raw(p) };
        // Writing bad memory is no machine check, but what was written
        // could never be read back.
        if dst.is_hwpoisoned() {
            return false;
        }
        // The client's page may be bad memory too: `memory_failure()` can
        // mark it after reclaim's check (it then waits for the folio lock
        // the store runs under), or find it only when this copy reads it.
        // A plain copy would take the machine check in the kernel; this
        // one refuses the store, and the area page, good, goes back free
        // (only a page marked poisoned is kept out of use).
        dst.copy_from_good_page(&src).is_ok()
    }

    fn copy_out(&self, from: &ReadCopy, mut dst: ExclusivePage<'_>) -> bool {
        let Some(p) = self.page_ptr(from.page()) else {
            return false;
        };
        // SAFETY: a `ReadCopy` is made only by the store, for the length
        // of this call, for a page whose entry is `Ready` with this load
        // counted as a copier: nobody writes it, gives it back or hands it
        // to an allocation until the copy ends.
        let src = unsafe { SharedPage::from_raw(p) };
        // A page poisoned since it was filled is not read; one whose
        // memory fails during the copy raises a machine check that
        // `copy_mc_highpage()` survives where the architecture can.  Only
        // a read can raise one, so the area page is the bad one; the
        // machine check handler only queues `memory_failure()`, so the
        // page is recorded as bad here, for the supply (or an allocation
        // that discards it) to retire.
        if dst.copy_from_good_page(&src).is_ok() {
            return true;
        }
        if let Some((s, i)) = self.0.span_of(from.page()) {
            s.area.note_failed_copy(i);
        }
        false
    }
}

/// The configuration of a kernel DMEM instance with keys `K`.
pub(crate) struct KConfig<K>(PhantomData<K>);

impl<K: Key + Sync> Config for KConfig<K> {
    type Platform = KernelPlatform;
    type Key = K;
    type Map = RbMap<K>;
    type Buckets = KVec<BucketLock<Self>>;
    type Slots = KVVec<Slot<K>>;
    type Links = KVVec<Link>;
    type Supply = AreaSupply;
    type Access = AreaPages;
}
