// SPDX-License-Identifier: GPL-2.0

//! The two DMEM instances of the kernel (clean file pages and swap pages),
//! their on/off switches, the discard of lent pages and the functions the C glue
//! (`dmem_switch.c`) calls.
//!
//! Both instances are created at `gcma_rs_init()` time when at least one
//! area is in service, over all the areas, and live for the life of the
//! system.  A client that is off stores nothing and loads nothing; turning
//! it off drops its pages.

use crate::{
    dmem::{Config, Dmem, FileKey, Refusal, StoreOutcome, SwapKey, SWAP_CLUSTER_SHIFT},
    dmem_kernel::{AreaPages, AreaSpan, AreaSupply, Areas, KConfig},
    Area,
};
use core::{
    ptr::NonNull,
    sync::atomic::{AtomicBool, AtomicUsize, Ordering},
};
use kernel::{
    bindings, c_static_key_false,
    delay::{self, MaySleep},
    ffi::{c_int, c_uint, c_ulong},
    mm::{
        frames::ClaimedRun,
        page_access::{ExclusivePage, SharedPage},
    },
    new_mutex,
    prelude::*,
    sync::{once_ref::OnceRef, Mutex},
};

/// Buckets of an instance: about one per 8 pages, a power of two in
/// `64..=16384`.
fn nr_buckets(pages: usize) -> usize {
    (pages / 8).next_power_of_two().clamp(64, 16384)
}

/// Fence counters of a client: a key's is `FENCES[bucket_hash % NR_FENCES]`,
/// so that all pages of one file share one.
const NR_FENCES: usize = 64;

/// One client: its store and its switch.
pub(crate) struct Client<C: Config> {
    /// The store.
    pub(crate) dmem: Dmem<C>,
    /// Range invalidations in progress, per group of keys (see
    /// [`Client::fence_begin`]): while a key's counter is not zero, its
    /// stores are refused and its loads miss.
    fences: [AtomicUsize; NR_FENCES],
    /// Whether the client is on.
    enabled: AtomicBool,
    /// Stores refused because the client was off.
    refused_disabled: AtomicUsize,
    /// Large folios the hooks did not store.
    refused_large: AtomicUsize,
}

impl<K: crate::dmem::Key + Sync> Client<KConfig<K>> {
    /// Creates the client over `areas`, on or off.
    fn new(areas: Areas, exclusive_loads: bool, on: bool) -> Result<Self> {
        let n = nr_buckets(areas.nr_pages());
        let mut buckets = KVec::with_capacity(n, GFP_KERNEL)?;
        for _ in 0..n {
            buckets.push(Dmem::<KConfig<K>>::new_bucket()?, GFP_KERNEL)?;
        }
        let mut slots = KVVec::with_capacity(areas.nr_pages(), GFP_KERNEL)?;
        let mut links = KVVec::with_capacity(areas.nr_pages(), GFP_KERNEL)?;
        for _ in 0..areas.nr_pages() {
            slots.push(crate::dmem::Slot::new(), GFP_KERNEL)?;
            links.push(crate::dmem::Link::new(), GFP_KERNEL)?;
        }
        let dmem = Dmem::new(
            buckets,
            slots,
            links,
            AreaSupply(areas),
            AreaPages(areas),
            exclusive_loads,
        )?;
        Ok(Client {
            dmem,
            fences: [const { AtomicUsize::new(0) }; NR_FENCES],
            enabled: AtomicBool::new(on),
            refused_disabled: AtomicUsize::new(0),
            refused_large: AtomicUsize::new(0),
        })
    }

    /// The fence counter of `key`'s group.
    fn fence(&self, key: &K) -> &AtomicUsize {
        &self.fences[(key.bucket_hash() % NR_FENCES as u64) as usize]
    }

    /// Starts a range invalidation of `lo..=hi` (keys of one group): drops
    /// the range, and until [`Client::fence_end`] refuses stores and fails
    /// loads of the group.
    ///
    /// A page-cache walk that invalidates a range (after a direct-I/O
    /// write) removes the folios it finds, but reclaim may remove one
    /// first and store its bytes, which can be older than the file, at
    /// any moment until the walk reaches its index; and a folio created
    /// behind the walk must not load such a copy.  Dropping only after
    /// the walk leaves that window open; the fence closes it: nothing is
    /// stored or loaded in the group while the walk runs, and the end
    /// drops whatever a store that had passed its check bound meanwhile.
    pub(crate) fn fence_begin(&self, lo: &K, hi: &K) -> usize {
        // SeqCst: ordered before the drop's lock sections, which a store
        // or load that checks afterwards sees through the bucket lock.
        self.fence(lo).fetch_add(1, Ordering::SeqCst);
        self.dmem.invalidate_range(lo, hi)
    }

    /// Ends a range invalidation begun by [`Client::fence_begin`]: drops
    /// the range once more and lifts the fence.
    ///
    /// Must end a fence that [`Client::fence_begin`] raised, on a key of the
    /// same group: the hooks pair them by the value the begin hook returns,
    /// never by testing the switches again.  A fence not raised is not
    /// lowered (a warning): the count of another walk's fence must not go.
    pub(crate) fn fence_end(&self, lo: &K, hi: &K) -> usize {
        let n = self.dmem.invalidate_range(lo, hi);
        let lowered = self
            .fence(lo)
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |c| c.checked_sub(1));
        static WARNED: AtomicBool = AtomicBool::new(false);
        if lowered.is_err() && !WARNED.swap(true, Ordering::Relaxed) {
            pr_warn!("dmem: a range fence ended that was not raised\n");
        }
        n
    }

    /// Stores a copy of `src` under `key`; `None` if the client is off.
    pub(crate) fn store(&self, key: &K, src: SharedPage<'_>) -> Option<StoreOutcome> {
        if !self.enabled.load(Ordering::SeqCst) {
            self.refused_disabled.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        if self.fence(key).load(Ordering::SeqCst) != 0 {
            // Drop any older entry: the folio's bytes may be newer.
            self.dmem.invalidate(key);
            return Some(self.dmem.refuse(Refusal::Superseded));
        }
        let out = self.dmem.store(key, src);
        // Switched off meanwhile: its clear() may have run before the store
        // bound its page, so drop the entry here.
        if !self.enabled.load(Ordering::SeqCst) {
            self.dmem.invalidate(key);
            return Some(StoreOutcome::Refused(Refusal::Superseded));
        }
        Some(out)
    }

    /// Copies the entry of `key` into `dst`; `false` on a miss or if the
    /// client is off.
    pub(crate) fn load(&self, key: &K, dst: ExclusivePage<'_>) -> bool {
        if !self.enabled.load(Ordering::SeqCst) || self.fence(key).load(Ordering::SeqCst) != 0 {
            self.dmem.missed();
            return false;
        }
        self.dmem.load(key, dst)
    }

    /// Drops the entry of `key`; returns whether there was one.
    pub(crate) fn invalidate(&self, key: &K) -> bool {
        self.dmem.invalidate(key)
    }

    /// Drops the entries of keys in `lo..=hi`; returns how many there were.
    pub(crate) fn invalidate_range(&self, lo: &K, hi: &K) -> usize {
        self.dmem.invalidate_range(lo, hi)
    }
}

/// What the C glue needs of a client, whatever its key type.
pub(crate) trait ClientOps: Sync {
    /// Whether the client is on.
    fn enabled(&self) -> bool;
    /// Switches the client on or off; off drops its pages.
    fn set_enabled(&self, on: bool);
    /// The counters.
    fn stats(&self) -> bindings::gcma_dmem_stats;
    /// Counts a large folio the hooks did not store.
    fn refused_large(&self);
}

impl<C: Config> ClientOps for Client<C>
where
    Dmem<C>: Sync,
{
    fn enabled(&self) -> bool {
        self.enabled.load(Ordering::SeqCst)
    }

    fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::SeqCst);
        if !on {
            self.dmem.clear();
        }
    }

    fn stats(&self) -> bindings::gcma_dmem_stats {
        let s = self.dmem.stats();
        let c = |n: usize| n as u64;
        bindings::gcma_dmem_stats {
            stored_pages: c(s.stored_pages),
            held_pages: c(s.held_pages),
            stores: c(s.stores),
            loads: c(s.hits),
            misses: c(s.misses),
            invalidations: c(s.invalidations),
            discards: c(s.discards),
            evictions: c(s.evictions),
            refused_nomem: c(s.refused_nomem),
            refused_nospace: c(s.refused_nospace),
            refused_discarded: c(s.refused_discarded),
            refused_superseded: c(s.refused_superseded),
            refused_disabled: c(self.refused_disabled.load(Ordering::Relaxed)),
            refused_large: c(self.refused_large.load(Ordering::Relaxed)),
            poisoned: c(s.poisoned),
        }
    }

    fn refused_large(&self) {
        self.refused_large.fetch_add(1, Ordering::Relaxed);
    }
}

/// The kernel's DMEM instances.
pub(crate) struct Dmems {
    /// The areas of the index space.
    pub(crate) areas: Areas,
    /// Clean file pages (exclusive loads).
    pub(crate) file: Client<KConfig<FileKey>>,
    /// Swap pages (exclusive loads).
    pub(crate) swap: Client<KConfig<SwapKey>>,
    /// Serialises [`switch`]: a client's state and its hooks' key change
    /// together.
    switch_lock: Pin<KBox<Mutex<()>>>,
}

impl Dmems {
    /// The client of C index `client` (`enum gcma_dmem_client`).
    pub(crate) fn client(&self, client: c_uint) -> Option<&dyn ClientOps> {
        match client {
            bindings::gcma_dmem_client_GCMA_DMEM_FILE => Some(&self.file),
            bindings::gcma_dmem_client_GCMA_DMEM_SWAP => Some(&self.swap),
            _ => None,
        }
    }
}

/// The instances, published once by [`init`].
static DMEMS: OnceRef<Dmems> = OnceRef::new();

/// The instances, if [`init`] created them.
pub(crate) fn dmems() -> Option<&'static Dmems> {
    DMEMS.get()
}

/// Whether client `client` is on at boot.
fn boot_enabled(client: c_uint) -> bool {
    crate::boot_params::dmem_enabled(client)
}

/// Creates the instances over `areas` and their sysfs files.  Called once,
/// by `gcma_rs_init()`, which `ctx` lets sleep.
pub(crate) fn init(areas: &[&'static Area], ctx: &MaySleep) -> Result {
    if areas.is_empty() || DMEMS.get().is_some() {
        return Err(EINVAL);
    }
    let mut spans = KVec::with_capacity(areas.len(), GFP_KERNEL)?;
    let mut offset = 0;
    for &area in areas {
        let nr_pages = area.map.lock().nr_pages();
        spans.push(
            AreaSpan {
                area,
                offset,
                nr_pages,
            },
            GFP_KERNEL,
        )?;
        offset += nr_pages;
    }
    // The buffer is kept for good, as the instances that index the areas
    // through it; they hold its address, so kmemleak sees it referenced
    // (a leaked box around the vector would not be).
    let (ptr, len, _) = spans.into_raw_parts();
    // SAFETY: `ptr` and `len` describe the initialised elements of the
    // vector just taken apart, whose buffer is never freed.
    let spans: &'static [AreaSpan] = unsafe { core::slice::from_raw_parts(ptr, len) };
    let areas = Areas(spans);
    // Both clients start off; the switch below turns on those that are on
    // at boot, hooks first.
    let dmems = KBox::new(
        Dmems {
            areas,
            // Exclusive loads for both: a loaded page lives in the page
            // cache or the swap cache, so its copy would only take room.
            file: Client::new(areas, true, false)?,
            swap: Client::new(areas, true, false)?,
            switch_lock: KBox::pin_init(new_mutex!((), "gcma_dmem_switch"), GFP_KERNEL)?,
        },
        GFP_KERNEL,
    )?;
    // From here on, allocations call `discard` for lent pages.
    if DMEMS.set(KBox::leak(dmems)).is_err() {
        // `init` runs once (`gcma_rs_init()`'s contract), so this is not
        // reached; the instances stay unused.
        return Err(EBUSY);
    }
    // Direct-I/O walks fence their range from now on, whatever the
    // switches: one that began with the file client off could otherwise
    // see it come on, and reclaim store a folio the walk has not reached
    // yet (older than the write), which nothing would drop.
    // The key is never turned off.  DMEM starts in an initcall, before
    // user space, so no walk is in flight that began without a fence.
    c_static_key_false!(gcma_dmem_fences_on).enable(ctx);
    for client in [
        bindings::gcma_dmem_client_GCMA_DMEM_FILE,
        bindings::gcma_dmem_client_GCMA_DMEM_SWAP,
    ] {
        if boot_enabled(client) {
            switch(client, true, ctx)?;
        }
    }
    // The instances the files read exist.
    crate::sysfs::add_dmem();
    pr_info!(
        "dmem: {} pages in {} area(s); file {}, swap {}\n",
        areas.nr_pages(),
        spans.len(),
        if boot_enabled(0) { "on" } else { "off" },
        if boot_enabled(1) { "on" } else { "off" }
    );
    Ok(())
}

/// Switches client `client` (`enum gcma_dmem_client`) on or off, with its
/// hooks, as writing its sysfs `enabled` file does: `ENODEV` without
/// instances, `EINVAL` for an unknown client.
///
/// On, the hooks' static key goes on first, then the client takes stores.
/// Off, the client refuses stores and drops its pages, then the key goes
/// off: the invalidation hooks run for as long as the client holds a
/// page.  Sleeps (flipping a key does), which `ctx` allows.
pub(crate) fn switch(client: c_uint, on: bool, ctx: &MaySleep) -> Result {
    let d = dmems().ok_or(ENODEV)?;
    let c = d.client(client).ok_or(EINVAL)?;
    let key = if client == bindings::gcma_dmem_client_GCMA_DMEM_FILE {
        c_static_key_false!(gcma_dmem_file_on)
    } else {
        c_static_key_false!(gcma_dmem_swap_on)
    };
    let _guard = d.switch_lock.lock();
    if on {
        key.enable(ctx);
    }
    c.set_enabled(on);
    if !on {
        key.disable(ctx);
    }
    Ok(())
}

/// Discards the lent pages of `run`, the range a contiguous allocation
/// just claimed in `area`.  Each instance drops the data of the pages it
/// holds, chunk by chunk ([`Dmem::discard_range`]), and waits for their
/// copies to finish; then the run takes each page
/// ([`ClaimedRun::take_lent`]): as it is, when the allocation allows it,
/// or through the page allocator's free steps.  May sleep while copies
/// drain, which `ctx`, the caller's token, allows.
///
/// Called by the allocator ([`crate::Area`]) without any GCMA lock held.
/// Before DMEM starts nothing is lent, and this does nothing.
pub(crate) fn discard<'a>(ctx: &delay::MaySleep, area: &'a Area, run: &mut ClaimedRun<'a>) {
    use crate::profile::{end, start, Phase};

    let Some(d) = dmems() else { return };
    let pfn = area.base_pfn + run.start();
    let (Some(first), Some(_)) = (
        d.areas.index_of(area, pfn),
        run.count()
            .checked_sub(1)
            .and_then(|n| d.areas.index_of(area, pfn.checked_add(n)?)),
    ) else {
        return;
    };
    let count = run.count();
    let mut t = start();
    let mut take = |base: usize, mask: u64| {
        t = end(Phase::DmemDiscard, t);
        // The area page of bit 0, which may lie below the range (`base` is
        // aligned to the chunk size); `base + i >= first` for every bit `i`
        // set, so the pages themselves are in it.
        let page0 = run.start().wrapping_sub(first).wrapping_add(base);
        // SAFETY: the instance held the pages, lent by the supply; it
        // dropped them for this discard and no copy is in flight any more,
        // so the run, which claimed them, has the one right to end their
        // lending.
        let outside = unsafe { run.take_lent_mask(page0, mask) };
        if outside != 0 {
            pr_err!(
                "dmem: discarded pages {:#x} from {} are not in the claimed run\n",
                outside,
                page0
            );
        }
        t = end(Phase::PageState, t);
    };
    d.file.dmem.discard_range(ctx, first, count, &mut take);
    d.swap.dmem.discard_range(ctx, first, count, &mut take);
    end(Phase::DmemDiscard, t);
}

/// The counters of client `client`: `ENODEV` if there are no instances,
/// `EINVAL` for an unknown client.
pub(crate) fn client_stats(client: c_uint) -> Result<bindings::gcma_dmem_stats> {
    let d = dmems().ok_or(ENODEV)?;
    Ok(d.client(client).ok_or(EINVAL)?.stats())
}

/// Whether client `client` is on (1) or off (0); `-ENODEV` without
/// instances, `-EINVAL` for an unknown client.
#[no_mangle]
pub(crate) extern "C" fn gcma_dmem_rs_enabled(client: c_uint) -> c_int {
    match dmems().map(|d| d.client(client)) {
        None => ENODEV.to_errno(),
        Some(None) => EINVAL.to_errno(),
        Some(Some(c)) => c_int::from(c.enabled()),
    }
}

/// Counts a large folio that the hooks of client `client` did not store.
pub(crate) fn refused_large(client: c_uint) {
    if let Some(c) = dmems().and_then(|d| d.client(client)) {
        c.refused_large();
    }
}

/// Stores a copy of the clean page-cache page `src` under `key`; returns
/// whether it was stored.  Never sleeps.
// The page-cache hooks store through the instance; the KUnit suites call
// this.
#[cfg(CONFIG_GCMA_KUNIT_TEST)]
pub(crate) fn store_file(key: &FileKey, src: SharedPage<'_>) -> bool {
    let Some(d) = dmems() else { return false };
    matches!(d.file.store(key, src), Some(StoreOutcome::Stored))
}

/// Copies the entry of `key` into `dst` and drops it; returns whether
/// there was one.  Never sleeps.
// As `store_file`.
#[cfg(CONFIG_GCMA_KUNIT_TEST)]
pub(crate) fn load_file(key: &FileKey, dst: ExclusivePage<'_>) -> bool {
    let Some(d) = dmems() else { return false };
    d.file.load(key, dst)
}

/// Drops the entries of pages `first.index..=last` of the file of
/// `first`; returns how many there were.  Never sleeps.
// As `store_file`.
#[cfg(CONFIG_GCMA_KUNIT_TEST)]
pub(crate) fn invalidate_file(first: &FileKey, last: u64) -> usize {
    let Some(d) = dmems() else { return 0 };
    let hi = FileKey {
        index: last,
        ..*first
    };
    d.file.invalidate_range(first, &hi)
}

/// Drops every entry of superblock `sb`; returns how many there were.
pub(crate) fn invalidate_sb(sb: u32) -> usize {
    let Some(d) = dmems() else { return 0 };
    let (lo, _) = FileKey::file_range(sb, 0);
    let (_, hi) = FileKey::file_range(sb, u64::MAX);
    d.file.invalidate_range(&lo, &hi)
}

/// Stores a copy of the page `page`, being written to swap slot
/// `(swap_type, offset)`; returns whether it was stored.  Never sleeps.
///
/// # Safety
///
/// `page` must be a locked swap-cache page, valid for the call, whose
/// memory nobody writes during it.
#[no_mangle]
pub(crate) unsafe extern "C" fn gcma_dmem_rs_store_swap(
    swap_type: c_uint,
    offset: c_ulong,
    page: *mut bindings::page,
) -> bool {
    let Some(d) = dmems() else { return false };
    let key = SwapKey {
        swap_type,
        offset: offset as u64,
    };
    // SAFETY: guaranteed by the caller: non-null, valid, mappable, not
    // written.
    let src = unsafe { SharedPage::from_raw(NonNull::new_unchecked(page)) };
    matches!(d.swap.store(&key, src), Some(StoreOutcome::Stored))
}

/// Copies the entry of swap slot `(swap_type, offset)` into `page` and
/// drops it; returns whether there was one.  Never sleeps.
///
/// # Safety
///
/// `page` must be a locked page being swapped in, not uptodate, valid for
/// the call, that nobody else accesses during it.
#[no_mangle]
pub(crate) unsafe extern "C" fn gcma_dmem_rs_load_swap(
    swap_type: c_uint,
    offset: c_ulong,
    page: *mut bindings::page,
) -> bool {
    let Some(d) = dmems() else { return false };
    let key = SwapKey {
        swap_type,
        offset: offset as u64,
    };
    // SAFETY: guaranteed by the caller: non-null, valid, mappable, ours
    // alone.
    let dst = unsafe { ExclusivePage::from_raw(NonNull::new_unchecked(page)) };
    d.swap.load(&key, dst)
}

/// Drops the entries of the `nr` swap slots from `(swap_type, offset)`;
/// returns how many there were.  Visits one bucket per cluster of slots.
pub(crate) fn invalidate_swap(swap_type: c_uint, offset: u64, nr: u64) -> usize {
    let Some(d) = dmems() else { return 0 };
    let (mut first, end) = (offset, offset.saturating_add(nr));
    let mut dropped = 0;
    while first < end {
        // The last slot of `first`'s cluster, or of the range.
        let cluster_last = first | ((1u64 << SWAP_CLUSTER_SHIFT) - 1);
        let last = cluster_last.min(end - 1);
        let key = |offset| SwapKey { swap_type, offset };
        dropped += if first == last {
            usize::from(d.swap.invalidate(&key(first)))
        } else {
            d.swap.invalidate_range(&key(first), &key(last))
        };
        first = last + 1;
    }
    dropped
}

/// Drops every entry of swap type `swap_type`; returns how many there were.
pub(crate) fn invalidate_swap_type(swap_type: c_uint) -> usize {
    let Some(d) = dmems() else { return 0 };
    let (lo, hi) = SwapKey::device_range(swap_type);
    d.swap.invalidate_range(&lo, &hi)
}
