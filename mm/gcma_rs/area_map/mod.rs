// SPDX-License-Identifier: GPL-2.0

//! Page-state map of a GCMA reserved area.
//!
//! The area holds `nr_pages` pages, numbered from 0.  Every page carries two
//! bits, as in the GCMA design:
//!
//! * the *primary* bit: the page belongs to a contiguous allocation of a
//!   primary client;
//! * the *secondary* bit: the page is lent to a secondary client, which
//!   keeps only discardable data in it.
//!
//! A primary allocation looks at the primary bits only: it may claim pages
//! that are lent to secondary clients, whose data must then be discarded.
//! A secondary client only ever borrows a page whose two bits are clear.
//!
//! # Searching
//!
//! A plain first-fit scan of the primary bitmap costs time linear in the
//! size of the area.  This map keeps two summaries next to the bitmaps, in
//! one caller-provided buffer:
//!
//! * An implicit segment tree over the words of the primary bitmap (one
//!   leaf per word of `usize::BITS` pages).  Every inner node stores, for
//!   the pages below it, the longest run of pages free of primary owners and
//!   the lengths of such runs at its start and at its end.  Leaves are not
//!   stored: they are computed from their bitmap word when needed.  The
//!   lowest-addressed run of `count` free pages is found in `O(log n)` node
//!   visits; when the alignment does not fit at the start found, the search
//!   goes on from the next aligned page, so the result is exactly the
//!   lowest aligned fit (first fit).  Claiming or releasing `count` pages
//!   recomputes `O(count / BITS + log n)` nodes, and stops going up as soon
//!   as a node comes out unchanged.
//! * A hierarchical bitset of the words that hold a page free in both
//!   bitmaps: level 0 has one bit per bitmap word, each higher level one bit
//!   per word of the level below, up to a single word.  Lending and
//!   returning a secondary page cost `O(log n / log BITS)`.
//!
//! Small requests, of at most [`HINTS`] pages, take a shortcut that makes
//! them cheaper than a plain scan:
//!
//! * A hint per size tells below which page no window of that many free
//!   pages starts; the search begins there, and scans a few bitmap words
//!   before it turns to the tree.  Each word is searched whole, a few
//!   shifts and ands giving every start of a window in it.
//! * Ranges of at most `BITS` pages, which span one or two words, are
//!   claimed and freed with the same straight-line code for both cases.
//!
//! Larger requests follow the wholly free words after their first one, up
//! to [`FREE_WORDS`], before they turn to the tree: in a lightly used area
//! their window lies there.
//!
//! Claiming or releasing pages within [`STALE_SPAN`] neighbouring words
//! only marks those leaves stale; the tree above them is recomputed once
//! for all of them when a search needs it, or when a change falls too far
//! away.  A small request that fits near its hint thus costs no tree
//! update, changes that share ancestors pay for them once, and a range
//! freed and claimed again, over and over, pays for none.
//!
//! A request larger than the longest free run fails at the root of the
//! tree.
//!
//! Secondary pages are lent from the highest free address down, while
//! primary allocations take the lowest fit: this keeps lent pages away from
//! where contiguous allocations land, so fewer of them need discarding.
//!
//! # Concurrency contract
//!
//! The map itself is plain data: the caller serialises every call, e.g.
//! with a spinlock.  Discarding secondary data may sleep or take other
//! locks, so it happens outside that lock, in three steps:
//!
//! 1. Under the lock, [`AreaMap::alloc_primary`] sets the primary bits of
//!    the range found and reports how many of its pages are still lent
//!    ([`AllocOutcome::lent`]).  From then on [`AreaMap::lend_secondary`]
//!    never hands out any page of the range, because its primary bits are
//!    set.
//! 2. Without the lock, the caller asks the secondary side to drop the data
//!    of each lent page of the range.  It may find them one at a time with
//!    [`AreaMap::next_lent`], taking the lock only around that call, or
//!    collect them under the lock with [`AreaMap::lent_in`].  A secondary
//!    client that gives a page back meanwhile calls
//!    [`AreaMap::return_secondary`] as usual; that is allowed for a page
//!    awaiting discard too.
//! 3. Under the lock again, [`AreaMap::finish_discard`] clears the secondary
//!    bits that remain in the range.  Once the secondary side has dropped a
//!    page, it must not return it any more (doing so after step 3 fails with
//!    `EINVAL`).
//!
//! Only after step 3 may the range be handed to the primary client or
//! released: [`AreaMap::release_primary`] refuses with `EBUSY` a range that
//! still holds lent pages.
//!
//! # Releasing
//!
//! A primary owner gives pages back in two steps, because the pages may
//! still be referenced by someone else (a pfn walker's speculative
//! reference, a pinned user mapping) when the owner lets go of them:
//! [`AreaMap::begin_release`] marks them *releasing*, refusing a range
//! already releasing or not allocated (a double free), and
//! [`AreaMap::release_primary`] frees them once their last reference is
//! gone, possibly much later and piecewise.  A releasing page stays
//! primary-owned, so no allocation can take it meanwhile.
//!
//! # Alignment
//!
//! Alignment is that of page frame numbers, not of page indices in the
//! area: the map knows the frame number of its page 0
//! ([`AreaMap::with_base`]), so an area at an odd base still returns
//! naturally aligned ranges.
//!
//! # Bounded searches
//!
//! An aligned search may try many unaligned fits in a fragmented area.
//! [`AreaMap::alloc_primary_from`] stops after a given number of tries and
//! says where to go on, so that the caller can drop its lock in between.
//!
//! # Files
//!
//! This file holds the map's type, its layout in the caller's buffers and
//! its counters; each concept of the map has a file of its own:
//!
//! * `bitmaps.rs`: word masks and reads of the three bitmaps;
//! * `runs.rs`: the free-run segment tree and its lazy upkeep;
//! * `search.rs`: the first-fit search over words and the tree;
//! * `avail.rs`: the availability bitset;
//! * `primary.rs`: allocation, release and retirement of primary pages;
//! * `secondary.rs`: lending, returning and discarding secondary pages;
//! * `check.rs`: the consistency check for debugging and tests.
//!
//! [`FREE_WORDS`]: search::FREE_WORDS
//! [`STALE_SPAN`]: runs::STALE_SPAN

mod avail;
mod bitmaps;
// The consistency check serves the KUnit suite and the host tests only.
#[cfg(any(test, CONFIG_GCMA_KUNIT_TEST))]
mod check;
mod primary;
mod runs;
mod search;
mod secondary;

use avail::{avail_layout, MAX_LEVELS};
use bitmaps::low_bits;
use core::ops::DerefMut;
use kernel::prelude::*;
use runs::RUN_FIELDS;

/// Pages per bitmap word.
const BITS: usize = usize::BITS as usize;

/// Request sizes, from 1 page, that keep a search hint (see
/// [`AreaMap::low`]).
const HINTS: usize = 8;

/// Number of `usize` words each of the bitmaps needs for `nr_pages`.
pub(crate) const fn bitmap_words(nr_pages: usize) -> usize {
    nr_pages.div_ceil(BITS)
}

/// Number of `usize` words the summary buffer needs for `nr_pages`, or
/// `None` if that number or the page span of the tree does not fit in a
/// `usize`.
pub(crate) const fn summary_words(nr_pages: usize) -> Option<usize> {
    let words = bitmap_words(nr_pages);
    let leaves = match words.checked_next_power_of_two() {
        Some(leaves) => leaves,
        None => return None,
    };
    // The root spans `leaves * BITS` pages: all lengths and positions the
    // tree handles are bounded by that, so it must be representable.
    if leaves.checked_mul(BITS).is_none() {
        return None;
    }
    let (runs, avail) = match (leaves.checked_mul(RUN_FIELDS), avail_layout(words)) {
        (Some(runs), Some((_, avail))) => (runs, avail),
        _ => return None,
    };
    runs.checked_add(avail)
}

/// A primary allocation made by [`AreaMap::alloc_primary`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AllocOutcome {
    /// First page of the range, relative to the area.
    pub(crate) start: usize,
    /// Number of pages in the range.
    pub(crate) count: usize,
    /// Pages of the range that are lent to secondary clients and must be
    /// discarded before the range is used (see the module documentation).
    pub(crate) lent: usize,
}

/// The page-state map of one reserved area.
///
/// `S` is the caller-provided storage, e.g. `KVec<usize>` in the kernel or
/// `Vec<usize>` on the host; see [`bitmap_words`] and [`summary_words`] for
/// the lengths required.
pub(crate) struct AreaMap<S> {
    /// Pages in the area.
    nr_pages: usize,
    /// Words in each bitmap.
    nr_words: usize,
    /// Leaves of the tree: `nr_words` rounded up to a power of two.
    leaves: usize,
    /// Bits of the last bitmap word that stand for pages of the area.
    // Read only by the consistency check.
    #[cfg(any(test, CONFIG_GCMA_KUNIT_TEST))]
    tail_mask: usize,
    /// Levels of the availability bitset.
    levels: usize,
    /// Offset in `summary` of each level of the availability bitset.
    level_off: [usize; MAX_LEVELS],
    /// Primary bitmap, one bit per page.  The bits past the end of the
    /// area, in the last word, are set for good: a word's free pages are
    /// then the clear bits of its primary word, with no special case for
    /// the last word in the hot paths.
    primary: S,
    /// Secondary bitmap, one bit per page.
    secondary: S,
    /// Releasing bitmap, one bit per page: primary pages whose owner has
    /// released them while their last reference is still held elsewhere.
    releasing: S,
    /// Page frame number of page 0, modulo any alignment: alignment is
    /// counted on `base + page`.
    base: usize,
    /// The tree, then the availability bitset.
    ///
    /// Tree nodes are numbered from the root, 1, the children of node `i`
    /// being `2 * i` and `2 * i + 1`; nodes `leaves..2 * leaves` are the
    /// leaves, not stored.  The [`Runs`](runs::Runs) of inner node `i` are at
    /// `RUN_FIELDS * i` (words `0..RUN_FIELDS` are unused).  The levels of
    /// the availability bitset follow, from level 0, at `level_off`.
    summary: S,
    /// Pages with the primary bit set.
    primary_used: usize,
    /// Pages with the secondary bit set.
    secondary_lent: usize,
    /// Pages with both bits set (claimed by a primary, awaiting discard).
    pending: usize,
    /// Pages with neither bit set.
    free: usize,
    /// Pages with the releasing bit set.
    releasing_pages: usize,
    /// Pages taken out of use for good ([`AreaMap::retire`]), among the
    /// releasing ones.
    retired: usize,
    /// Calls of [`AreaMap::release_primary`] that freed pages, wrapping: a
    /// caller that resumes a search can tell whether pages it passed may
    /// have become free.
    generation: usize,
    /// Search hints: no run of `j + 1` pages free of primary owners starts
    /// below page `low[j]`, hence no longer run either.
    ///
    /// A search for `count` pages starts at `low[min(count, HINTS) - 1]`,
    /// and one that started there leaves the page it found in
    /// `low[count - 1]`: claiming pages only removes runs.  Freeing pages
    /// from `start` may create runs of `j + 1` pages from `start - j` on, so
    /// a release lowers the hints to that.
    low: [usize; HINTS],
    /// Leaves `stale_lo..=stale_hi` changed since the tree was last brought
    /// up to date (none if `stale_lo > stale_hi`): the stored runs of their
    /// ancestors may be out of date, those of every other node are not.
    ///
    /// Allocations and releases within [`STALE_SPAN`] leaves only mark
    /// their leaves so; the ancestors are recomputed together ([`AreaMap::flush`]) when a search
    /// needs the tree or the range would grow past [`STALE_SPAN`] leaves.
    /// A search that finds its window in the words it scans first, as small
    /// ones mostly do from their hint, needs no tree.
    ///
    /// [`STALE_SPAN`]: runs::STALE_SPAN
    stale_lo: usize,
    /// Last leaf of the stale range; see [`AreaMap::stale_lo`].
    stale_hi: usize,
}

/// Result of one bounded step of [`AreaMap::alloc_primary_from`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AllocStep {
    /// The range was allocated.
    Done(AllocOutcome),
    /// The tries ran out: no aligned fit starts below this page; call
    /// again from it.
    Resume(usize),
}

/// Iterator over the lent pages of a range; see [`AreaMap::lent_in`].
// Used only by the host tests.
#[cfg(test)]
pub(crate) struct LentIter<'a, S> {
    /// The map.
    map: &'a AreaMap<S>,
    /// Next page to look at.
    next: usize,
    /// End of the range (exclusive).
    end: usize,
}

#[cfg(test)]
impl<S: DerefMut<Target = [usize]>> Iterator for LentIter<'_, S> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let page = self.map.next_lent(self.next, self.end)?;
        self.next = page + 1;
        Some(page)
    }
}

impl<S: DerefMut<Target = [usize]>> AreaMap<S> {
    /// Creates the map of an area of `nr_pages` pages, all free, whose
    /// page 0 has frame number 0 (see [`AreaMap::with_base`]).
    ///
    /// The buffers must have exactly [`bitmap_words`] words (`primary`,
    /// `secondary`, `releasing`) and [`summary_words`] words (`summary`);
    /// they are cleared.  Fails with `EINVAL` on `nr_pages == 0` or a wrong
    /// length.
    pub(crate) fn new(
        nr_pages: usize,
        primary: S,
        secondary: S,
        releasing: S,
        summary: S,
    ) -> Result<Self> {
        if nr_pages == 0 {
            return Err(EINVAL);
        }
        let nr_words = bitmap_words(nr_pages);
        let summary_len = summary_words(nr_pages).ok_or(EINVAL)?;
        if primary.len() != nr_words
            || secondary.len() != nr_words
            || releasing.len() != nr_words
            || summary.len() != summary_len
        {
            return Err(EINVAL);
        }
        // `summary_words` succeeded, so neither of these fails or overflows.
        let leaves = nr_words.checked_next_power_of_two().ok_or(EINVAL)?;
        let (levels, _) = avail_layout(nr_words).ok_or(EINVAL)?;
        let mut level_off = [0; MAX_LEVELS];
        let (mut off, mut len) = (leaves * RUN_FIELDS, nr_words);
        for slot in level_off.iter_mut().take(levels) {
            *slot = off;
            len = len.div_ceil(BITS);
            off += len;
        }
        // `nr_words >= 1` and `nr_words * BITS >= nr_pages`.
        let tail_mask = low_bits(nr_pages - (nr_words - 1) * BITS);
        let mut map = AreaMap {
            nr_pages,
            nr_words,
            leaves,
            #[cfg(any(test, CONFIG_GCMA_KUNIT_TEST))]
            tail_mask,
            levels,
            level_off,
            primary,
            secondary,
            releasing,
            base: 0,
            summary,
            primary_used: 0,
            secondary_lent: 0,
            pending: 0,
            free: nr_pages,
            releasing_pages: 0,
            retired: 0,
            generation: 0,
            low: [0; HINTS],
            stale_lo: usize::MAX,
            stale_hi: 0,
        };
        map.primary.fill(0);
        if let Some(p) = map.primary.last_mut() {
            *p = !tail_mask;
        }
        map.secondary.fill(0);
        map.releasing.fill(0);
        map.summary.fill(0);
        // All-zero summaries describe an area whose pages are all used:
        // mark every word changed.
        for w in 0..nr_words {
            map.update_avail(w);
        }
        map.refresh_runs(0, nr_words - 1);
        Ok(map)
    }

    /// Sets the page frame number of page 0: alignments are then those of
    /// frame numbers.
    pub(crate) fn with_base(mut self, base_pfn: usize) -> Self {
        self.base = base_pfn;
        self
    }

    /// Pages in the area.
    pub(crate) fn nr_pages(&self) -> usize {
        self.nr_pages
    }

    /// Pages owned by primary allocations.
    pub(crate) fn primary_used(&self) -> usize {
        self.primary_used
    }

    /// Pages lent to secondary clients, including those in a primary range
    /// awaiting discard.
    pub(crate) fn secondary_lent(&self) -> usize {
        self.secondary_lent
    }

    /// Pages claimed by a primary allocation but still lent, i.e. awaiting
    /// [`AreaMap::finish_discard`] or [`AreaMap::return_secondary`].
    // Used only by the host tests.
    #[cfg(test)]
    pub(crate) fn pending_discard(&self) -> usize {
        self.pending
    }

    /// Pages neither primary-owned nor lent.
    pub(crate) fn free(&self) -> usize {
        self.free
    }

    /// Primary pages released by their owner but not freed yet (see
    /// [`AreaMap::begin_release`]).
    pub(crate) fn releasing(&self) -> usize {
        self.releasing_pages
    }

    /// Pages taken out of use for good (see [`AreaMap::retire`]).
    pub(crate) fn retired(&self) -> usize {
        self.retired
    }

    /// Changes each time [`AreaMap::release_primary`] frees pages.
    pub(crate) fn generation(&self) -> usize {
        self.generation
    }

    /// Longest run of pages not owned by primary allocations (lent pages
    /// count as free): no unaligned primary allocation larger than this can
    /// succeed.
    // Used only by the host tests.
    #[cfg(test)]
    pub(crate) fn largest_primary_run(&self) -> usize {
        self.root_runs().max
    }

    /// Whether `page` is owned by a primary allocation (false if out of
    /// range).
    pub(crate) fn is_primary(&self, page: usize) -> bool {
        page < self.nr_pages && Self::bit(&self.primary, page)
    }

    /// Whether `page` is lent to a secondary client (false if out of range).
    pub(crate) fn is_lent(&self, page: usize) -> bool {
        Self::bit(&self.secondary, page)
    }
}
