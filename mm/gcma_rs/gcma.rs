// SPDX-License-Identifier: GPL-2.0

//! GCMA: the guaranteed contiguous memory allocator.
//!
//! A GCMA area is reserved at boot (`gcma=<size>[@<base>]`, see
//! `reserve.c`) and owned by GCMA for good: the buddy allocator never sees
//! its pages.  Its primary clients allocate physically contiguous ranges of
//! any page count; its secondary clients borrow single pages whose contents
//! can be dropped at any time (clean page cache, write-through swap), so a
//! primary allocation reclaims them by discarding, never by migrating.
//!
//! Modules:
//!
//! - [`area_map`]: the two bitmaps of an area (primary-owned, lent to
//!   secondary clients) and the summary tree that keeps searches fast.  It
//!   has no kernel dependencies and also builds on the host
//!   (`tools/host/crates/gcma-core`).
//! - The areas `reserve.c` set aside at boot are `kernel::mm::gcma`'s
//!   [`ReservedArea`]s, the crate's window onto GCMA's C half.
//! - `thp`: guaranteed THP, the policy that lets THP faults and collapses
//!   take PMD-sized folios from areas reserved for them (`thp.c` is its C
//!   side).
//! - [`frag`]: fragmentation metrics of the zones (unusable free space
//!   index, the kernel's fragmentation index, pageblock pollution) for
//!   `/sys/kernel/debug/gcma/fragmentation`.
//! - `debugfs`: the debugfs files, `fragmentation` and each area's
//!   `alloc_latency`.
//!
//! - [`entry`]: the functions C calls: the allocation and release entry
//!   points (which the CMA interface also reaches for areas registered with
//!   CMA) and the page allocator's free path.
//! - [`init`]: `gcma_rs_init()`, which takes the areas over at boot.
//! - [`boot_params`]: the handlers of the early parameters, which C
//!   registers, checking the values with the pure parsers of [`cmdline`]
//!   (also built on the host) and keeping them; and the check of a
//!   device-tree area's node, on the pure `of_node` (also built on the
//!   host), which `of.c` asks.
//! - [`retire`]: pages found bad (hardware-poisoned, in a bad state, or a
//!   copy out of them failed) taken out of use for good, and runs given
//!   up because they hold such pages.
//! - [`profile`]: phase timing of the allocation path, for the benchmark.
//! - [`sysfs`]: `/sys/kernel/mm/gcma/<area>/`, `dmem/<client>/` and
//!   `thp/`, on `kernel::sysfs`.
//!
//! This file holds the allocator state of each area in service, [`Area`]:
//! its map, and its pages as [`OwnedFrames`], whose typed states carry the
//! page allocator's allocation and free steps.  `area.c` is C only for what
//! Rust cannot do in 6.12: tracepoints, allocation tags and the static key
//! of the free path.

use core::sync::atomic::{AtomicUsize, Ordering};
use kernel::{
    bindings, c_str, delay,
    mm::{
        frames::{ClaimedRun, OwnedFrames, PageBits},
        gcma::ReservedArea,
    },
    prelude::*,
    sync::{once_ref::OnceRef, Arc, SpinLock},
    workqueue::{self, impl_has_work, Work, WorkItem},
};

// Items of these modules that only tests use are compiled only for them
// (`#[cfg(...)]` on each, saying which tests use it).
mod area_map;
mod boot_params;
mod cmdline;
#[cfg(CONFIG_DEBUG_FS)]
mod debugfs;
mod dmem;
mod dmem_client;
mod dmem_hooks;
mod dmem_kernel;
#[cfg(CONFIG_GCMA_DMEM_VERIFY)]
mod dmem_verify;
mod entry;
mod frag;
mod init;
#[cfg(CONFIG_GCMA_OF)]
mod of_node;
mod retire;
mod sysfs;
#[cfg(CONFIG_GCMA_THP)]
mod thp;

#[cfg(CONFIG_GCMA_KUNIT_TEST)]
mod cmdline_tests;
#[cfg(CONFIG_GCMA_KUNIT_TEST)]
mod dmem_tests;
#[cfg(CONFIG_GCMA_KUNIT_TEST)]
mod frag_tests;
#[cfg(all(CONFIG_GCMA_KUNIT_TEST, CONFIG_MEMORY_FAILURE))]
mod poison_tests;
#[cfg(CONFIG_GCMA_KUNIT_TEST)]
mod tests;
#[cfg(all(CONFIG_GCMA_KUNIT_TEST, CONFIG_GCMA_THP))]
mod thp_tests;

// The benchmark of GCMA against CMA (its C side is `bench.c`).
#[cfg(CONFIG_GCMA_BENCH)]
mod bench;

// Phase timing of the allocation path, for the benchmark's profile pass.
pub(crate) mod profile;

/// Prefix of this crate's log lines (used by `pr_*!`).
const __LOG_PREFIX: &[u8] = b"gcma\0";

/// The page-state map of an area, on kernel-allocated buffers.
type Map = area_map::AreaMap<KVec<usize>>;

/// Unaligned fits an allocation tries under the area lock before it drops
/// the lock and lets other tasks run: each try is a tree search, so this
/// bounds the time the lock is held (with preemption off) to a few
/// microseconds however fragmented the area is.
const TRIES_PER_LOCK: usize = 32;

/// Times an allocation that found no room starts its search again from
/// the first page, when pages it had passed were freed while it did not
/// hold the lock.
const RESTARTS: usize = 2;

/// Buckets of the allocation latency histogram: `[2^i, 2^(i+1))` ns.
pub(crate) const LAT_BUCKETS: usize = 32;

/// The allocator state of one area in service.
///
/// Created once per area by [`gcma_rs_init`] and never freed: one
/// reference of its [`Arc`] is leaked, and its address is published in
/// [`IN_SERVICE`].
#[pin_data]
pub(crate) struct Area {
    /// The C descriptor of the area.
    c: &'static ReservedArea,
    /// Page frame number of page 0 of the map.
    base_pfn: usize,
    /// The area's pages; their state follows the map's: free, lent,
    /// claimed by an allocation, or allocated.
    frames: OwnedFrames,
    /// The map; every call on it is made under this lock, and nothing
    /// that may sleep or take another lock runs under it.
    #[pin]
    map: SpinLock<Map>,
    /// Pages the page allocator's free paths gave back (their last
    /// reference went, the free steps done), still allocated in the map.
    returned: PageBits,
    /// First pages of releases made outside process context, still to be
    /// done; the page count is in the first page's private field.
    deferred: PageBits,
    /// Lent pages a copy out of which failed (a machine check the copy
    /// survived; `memory_failure()` only runs later, from a work item):
    /// retired when their borrower gives them back.
    failed_copies: PageBits,
    /// Does the releases in `deferred`, in process context.
    #[pin]
    release_work: Work<Area>,
    /// Allocations (successful or not) per latency bucket, log2 of ns.
    lat: [AtomicUsize; LAT_BUCKETS],
    /// Allocations that succeeded.
    alloc_success: AtomicUsize,
    /// Allocations that found no room.
    alloc_fail: AtomicUsize,
    /// Lent pages discarded for allocations.
    discarded: AtomicUsize,
    /// Pages of `map.retired()` retired because the free steps found them
    /// in a bad state (the others are hardware-poisoned); changed and read
    /// under the map's lock.
    bad: AtomicUsize,
    /// Releases (calls of `gcma_release()` that released pages).
    released: AtomicUsize,
}

impl_has_work! {
    impl HasWork<Self> for Area { self.release_work }
}

impl WorkItem for Area {
    type Pointer = Arc<Area>;

    fn run(this: Arc<Area>) {
        this.release_deferred();
    }
}

/// The areas in service, for the entry points and the page allocator's
/// free path: the first [`NR_IN_SERVICE`] entries are set, each once.
static IN_SERVICE: [OnceRef<Area>; bindings::GCMA_MAX_AREAS as usize] =
    [const { OnceRef::new() }; bindings::GCMA_MAX_AREAS as usize];
static NR_IN_SERVICE: AtomicUsize = AtomicUsize::new(0);

/// Returns the areas in service, in the order they went in service.  Any
/// context.
pub(crate) fn areas_in_service() -> impl Iterator<Item = &'static Area> {
    let n = NR_IN_SERVICE.load(Ordering::Acquire);
    // The entries below `n` were set before it was raised.
    IN_SERVICE[..n].iter().filter_map(OnceRef::get)
}

/// Returns the area in service whose C descriptor is `area`, a pointer a
/// C caller passed: only its address is compared.
pub(crate) fn area_of_descriptor(area: *const bindings::gcma_area) -> Option<&'static Area> {
    areas_in_service().find(|a| a.c.is(area))
}

/// Returns the area in service that holds page frame `pfn`.
pub(crate) fn area_of_pfn(pfn: usize) -> Option<&'static Area> {
    areas_in_service().find(|a| a.frames.index_of_pfn(pfn).is_some())
}

/// Returns an area in service with a page frame in `start..end`.
pub(crate) fn area_in_pfn_range(start: usize, end: usize) -> Option<&'static Area> {
    areas_in_service().find(|a| {
        let base = a.frames.base_pfn();
        base < end && start < base + a.frames.nr_pages()
    })
}

impl Area {
    /// Allocates `count` pages whose first page frame number is aligned to
    /// `1 << align` pages, with `gfp` as the page allocator takes it, and
    /// returns the first page and its index in the area: the pages are the
    /// caller's.
    ///
    /// The search holds the lock for at most [`TRIES_PER_LOCK`] tries at a
    /// time.  When it resumes, pages below where it stopped may have been
    /// freed meanwhile: a search that then finds no room starts over from
    /// the first page (at most [`RESTARTS`] times), so that an allocation
    /// fails only if, during one whole pass, no aligned range was free.
    ///
    /// Pages lent to secondary clients inside the range are discarded
    /// outside the lock, as the `area_map` protocol requires; the run takes
    /// them as they are when `gfp` allows.
    ///
    /// A range found to hold hardware-poisoned pages, or lent pages in a
    /// bad state, once every lent page was taken (a page may be poisoned
    /// while the discard sleeps), is not returned: those pages are taken
    /// out of use for good, the others freed ([`Area::give_up`]), and the
    /// search starts again.  Each such round retires at least one page, so
    /// the retries end.
    ///
    /// May sleep, which `ctx`, the caller's token, allows: the search
    /// offers the CPU between blocks, and the discard waits for copies.
    pub(crate) fn alloc(
        &self,
        ctx: &delay::MaySleep,
        count: usize,
        align: u32,
        gfp: bindings::gfp_t,
    ) -> Result<(*mut bindings::page, usize)> {
        loop {
            let (mut run, lent) = self.claim(ctx, count, align, gfp)?;
            if lent > 0 {
                self.discard(ctx, &mut run);
            }
            let start = run.start();
            if let Some(page) = self.complete(run) {
                self.alloc_success.fetch_add(1, Ordering::Relaxed);
                return Ok((page, start));
            }
        }
    }

    /// The first step of [`Area::alloc`]: claims a range and returns its
    /// run, with the number of its pages that are lent (to be discarded,
    /// [`Area::discard`], before the run is completed).
    pub(crate) fn claim(
        &self,
        ctx: &delay::MaySleep,
        count: usize,
        align: u32,
        gfp: bindings::gfp_t,
    ) -> Result<(ClaimedRun<'_>, usize)> {
        let out = self.search(ctx, count, align)?;
        // SAFETY: the map claimed `out` for this allocation alone: its
        // pages are free or lent, and the lent ones reach the run through
        // `discard` (the caller's part, documented above).
        let run = unsafe { self.frames.claim(out.start, out.count, gfp) };
        Ok((run, out.lent))
    }

    /// The last step of [`Area::alloc`]: finishes `run`, all of whose lent
    /// pages were taken, into an allocation and returns its first page; or,
    /// if it holds hardware-poisoned or bad pages, gives it up and returns
    /// `None`.
    ///
    /// A lent page a copy out of which failed (see
    /// [`Area::note_failed_copy`]) counts as poisoned.
    pub(crate) fn complete(&self, run: ClaimedRun<'_>) -> Option<*mut bindings::page> {
        let end = run.start() + run.count();
        // Once a copy failed, every allocation looks at its pages' bits
        // (`maybe_any()` stays set): a cost paid only on a machine that
        // survived a machine check.
        let failed = self.failed_copies.maybe_any()
            && (run.start()..end).any(|i| self.failed_copies.is_set(i));
        let run = if failed {
            run
        } else {
            match run.finish() {
                Ok(page) => return Some(page),
                Err(run) => run,
            }
        };
        self.give_up(run);
        None
    }

    /// Claims `count` free pages aligned to `1 << align` pages, as
    /// [`Area::alloc`] describes, and returns the range.
    fn search(
        &self,
        ctx: &delay::MaySleep,
        count: usize,
        align: u32,
    ) -> Result<area_map::AllocOutcome> {
        let t0 = profile::start();
        let (mut from, mut restarts) = (0, 0);
        let mut generation = self.map.lock().generation();
        let out = loop {
            let (res, now) = {
                let mut map = self.map.lock();
                let res = map.alloc_primary_from(count, align, from, TRIES_PER_LOCK);
                (res, map.generation())
            };
            match res {
                Ok(area_map::AllocStep::Done(out)) => break out,
                Ok(area_map::AllocStep::Resume(next)) => {
                    from = next;
                    // The map lock was released with its block above.
                    delay::cond_resched(ctx);
                }
                Err(e) if e == ENOMEM && from > 0 && now != generation && restarts < RESTARTS => {
                    (from, generation) = (0, now);
                    restarts += 1;
                }
                Err(e) => {
                    if e == ENOMEM {
                        self.alloc_fail.fetch_add(1, Ordering::Relaxed);
                    }
                    return Err(e);
                }
            }
        };
        profile::end(profile::Phase::Search, t0);
        Ok(out)
    }

    /// Whether page `page` of the area is hardware-poisoned.
    pub(crate) fn is_hwpoisoned(&self, page: usize) -> bool {
        self.frames.is_hwpoisoned(page)
    }

    /// Has the secondary clients drop the lent pages of the freshly
    /// claimed `run` and hand them to it, then clears their bits.
    ///
    /// The whole range goes to DMEM in one call: its instances know which
    /// pages they hold, and handle them in chunks, so neither the map's
    /// lock nor DMEM is entered once per page.  Pages lent in the range
    /// when it was claimed stay lent until this clears them, and no page of
    /// the range can be lent anew meanwhile (it is primary-owned).
    fn discard<'a>(&'a self, ctx: &delay::MaySleep, run: &mut ClaimedRun<'a>) {
        let t = profile::start();
        // No GCMA lock is held here, as `discard` wants.
        dmem_client::discard(ctx, self, run);
        let t = profile::end(profile::Phase::Hook, t);
        // The range is primary-owned, so this cannot fail.
        let dropped = self
            .map
            .lock()
            .finish_discard(run.start(), run.count())
            .unwrap_or(0);
        profile::end(profile::Phase::Finish, t);
        self.discarded.fetch_add(dropped, Ordering::Relaxed);
    }

    /// Frees `start..start + count` in the map, whose pages have no
    /// reference left; logs the pages leaked if they are not allocated.
    fn free(&self, start: usize, count: usize) {
        if let Err(e) = self.map.lock().release_primary(start, count) {
            pr_err!(
                "{}: {} freed pages at pfn {:#x} are not allocated ({:?}); leaked\n",
                self.name(),
                count,
                self.base_pfn + start,
                e
            );
        }
    }

    /// Frees in the map the pages the page allocator's free paths gave
    /// back, a run at a time.  Process context, or any context that may
    /// take the map's lock.
    ///
    /// A call that finds another task's pass under way may return before
    /// that pass has freed what it took: the pages are freed, only not yet
    /// by the time this returns.
    pub(crate) fn drain_returned(&self) {
        if self.returned.maybe_any() {
            self.returned
                .take_runs(|start, count| self.free(start, count));
        }
    }

    /// Releases the allocated pages `start..start + count` (see
    /// `gcma_release()`), from process context.  Returns why a release
    /// was refused, if it was: the map refuses a range that is not
    /// allocated, or is being released already.
    ///
    /// # Safety
    ///
    /// The pages are an allocation (or plain pages of one) that the
    /// caller owns and stops using: the map cannot tell an allocation of
    /// the caller's from one of someone else's.
    unsafe fn release(
        &self,
        start: usize,
        count: usize,
    ) -> core::result::Result<(), &'static CStr> {
        // Pages freed behind GCMA's back are not released twice.
        self.drain_returned();
        self.frames.release_shape(start, count)?;
        if self.deferred.is_set(start) {
            return Err(c_str!(
                "released already from interrupt context (double free)"
            ));
        }
        match self.map.lock().begin_release(start, count) {
            Ok(()) => {}
            Err(e) if e == EEXIST => return Err(c_str!("released already (double free)")),
            Err(_) => return Err(c_str!("not allocated (double free?)")),
        }
        self.released.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the map accepted the release: the range is an allocation
        // (or plain pages of one), marked releasing, so no other release
        // of it can be in flight, and its owner let go of it (this
        // function's contract).
        let run = unsafe { self.frames.released(start, count) };
        let mut sweep = retire::Sweep::new(self, start);
        if run.put(|i, fate| sweep.page(i, fate)) {
            sweep.finish(start + count);
        }
        // A compound page went through `put_page()`: if that was its last
        // reference it waits in `returned`, freed here.
        self.drain_returned();
        Ok(())
    }

    /// Queues the release of `start..start + count` for process context:
    /// the caller is in interrupt context, where the map's lock cannot be
    /// taken.  The checks for a bad release are made then; here only
    /// what the queue itself needs.
    ///
    /// # Safety
    ///
    /// As for [`Area::release`], which the work item calls.
    unsafe fn defer_release(
        &self,
        start: usize,
        count: usize,
    ) -> core::result::Result<(), &'static CStr> {
        // The first page's private field carries the count; a tail page's
        // fields are its compound head's, and a page without a reference
        // may be one the free path returned.
        if count == 0 || !self.frames.is_referenced_head(start) {
            return Err(c_str!("not an allocation's first page (interrupt context)"));
        }
        if self.deferred.is_set(start) {
            return Err(c_str!("release already pending (double free)"));
        }
        // SAFETY: `start` is a referenced page that is not a tail page, in
        // a range the caller says it allocated and releases now: its
        // private field is the caller's (a wrong release is the caller's
        // bug, caught by the checks the work item makes).
        unsafe { self.frames.set_private(start, count) };
        self.deferred.set(start, 1);
        // SAFETY: `self` is an `Area` in service, made by `Arc::pin_init`
        // in `init_area()`, one reference of which is leaked: the `Arc`
        // taken here is a new reference to it.
        let arc = unsafe { kernel::sync::ArcBorrow::from_raw(self as *const Area) };
        // Already queued: that run takes this release too.
        let _ = workqueue::system().enqueue(Arc::from(arc));
        Ok(())
    }

    /// Does the releases made outside process context.
    fn release_deferred(&self) {
        self.deferred.take_each(|start| {
            // SAFETY: `start` is the first page of an allocation whose
            // release `defer_release()` queued, with its count.
            let count = unsafe { self.frames.take_private(start) };
            // SAFETY: `defer_release()`'s caller owned the allocation and
            // let go of it (its contract, which it passes on here).
            match unsafe { self.release(start, count) } {
                Ok(()) => self.trace_released(start, count),
                Err(why) => self.refuse_release(start, count, why),
            }
        });
    }

    /// Traces a release done.
    fn trace_released(&self, start: usize, count: usize) {
        self.c.release_done(self.base_pfn + start, count);
    }

    /// Logs (rate-limited) and traces a release refused as a caller's bug.
    fn refuse_release(&self, start: usize, count: usize, why: &'static CStr) {
        self.c.release_refused(self.base_pfn + start, count, why);
    }

    /// Pages of the area: in all, owned by primary clients, and lent to
    /// secondary clients (a snapshot).
    // Used only by the benchmark and the THP KUnit suite.
    #[cfg(any(CONFIG_GCMA_BENCH, all(CONFIG_GCMA_KUNIT_TEST, CONFIG_GCMA_THP)))]
    pub(crate) fn page_counts(&self) -> (usize, usize, usize) {
        let map = self.map.lock();
        (map.nr_pages(), map.primary_used(), map.secondary_lent())
    }

    /// Whether the area was reserved for THP (`gcma=<size>:thp`).
    pub(crate) fn is_thp(&self) -> bool {
        self.c.is_thp()
    }

    /// The area's name, `gcma<N>`.
    pub(crate) fn name(&self) -> &'static CStr {
        self.c.name()
    }

    /// The counters of the area (`struct gcma_stats`), with the pages the
    /// free paths gave back freed first.
    pub(crate) fn stats(&self) -> bindings::gcma_stats {
        self.drain_returned();
        let (total, used, lent, releasing, retired, bad) = {
            let map = self.map.lock();
            (
                map.nr_pages(),
                map.primary_used(),
                map.secondary_lent(),
                map.releasing(),
                map.retired(),
                self.bad.load(Ordering::Relaxed),
            )
        };
        let get = |c: &AtomicUsize| c.load(Ordering::Relaxed) as u64;
        bindings::gcma_stats {
            total_pages: total as u64,
            // Retired pages are primary-owned and releasing in the map, but
            // nobody's.
            primary_used_pages: used.saturating_sub(retired) as u64,
            secondary_lent_pages: lent as u64,
            alloc_success: get(&self.alloc_success),
            alloc_fail: get(&self.alloc_fail),
            discarded_pages: get(&self.discarded),
            released: get(&self.released),
            release_pending_pages: releasing.saturating_sub(retired) as u64,
            hwpoisoned_pages: retired.saturating_sub(bad) as u64,
            bad_pages: bad as u64,
        }
    }
}
