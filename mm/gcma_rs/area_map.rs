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

use core::ops::DerefMut;
use kernel::prelude::*;

/// Pages per bitmap word.
const BITS: usize = usize::BITS as usize;

/// Words of the summary holding the [`Runs`] of one inner tree node.
const RUN_FIELDS: usize = 3;

/// Request sizes, from 1 page, that keep a search hint (see
/// [`AreaMap::low`]).
const HINTS: usize = 8;

/// Most leaves whose ancestors in the tree may be out of date (see
/// [`AreaMap::stale_lo`]): 2048 pages on 64-bit.  Bringing them up to date
/// costs about as much as it would have cost change by change, so this
/// only bounds the work of the search that does it.
const STALE_SPAN: usize = 32;

/// Bitmap words a search scans one by one, past the word it starts in,
/// before it turns to the tree.
const LINEAR_WORDS: usize = 2;

/// Wholly free bitmap words a search for more than [`HINTS`] pages follows
/// past its first word before it turns to the tree: they hold windows of up
/// to 4096 pages (on 64-bit), and reading them costs less than a walk through
/// the tree, which touches a node on every level.  Bounded, as an aligned
/// search may make many tries.
const FREE_WORDS: usize = 64;

/// Most levels the availability bitset can have: enough for any area that
/// fits in the address space (each level divides the words by `BITS`).
const MAX_LEVELS: usize = 12;

/// Number of `usize` words each of the bitmaps needs for `nr_pages`.
pub(crate) const fn bitmap_words(nr_pages: usize) -> usize {
    nr_pages.div_ceil(BITS)
}

/// Layout of the availability bitset of `nr_words` bitmap words: the number
/// of levels and the words they take, or `None` if more than `MAX_LEVELS`.
const fn avail_layout(nr_words: usize) -> Option<(usize, usize)> {
    let (mut levels, mut total, mut len) = (0, 0, nr_words);
    loop {
        len = len.div_ceil(BITS);
        // `len <= nr_words`, so the total stays below `2 * nr_words`.
        total += len;
        levels += 1;
        if levels > MAX_LEVELS {
            return None;
        }
        if len <= 1 {
            return Some((levels, total));
        }
    }
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

/// Returns a word with the low `n` bits set.
const fn low_bits(n: usize) -> usize {
    if n >= BITS {
        usize::MAX
    } else {
        (1usize << n) - 1
    }
}

/// Returns a word with bits `lo..hi` set, for `lo < hi <= BITS`.
const fn range_mask(lo: usize, hi: usize) -> usize {
    // Both shifts are below `BITS`: no branch, unlike `low_bits`.
    (usize::MAX << lo) & (usize::MAX >> (BITS - hi))
}

/// Length of the longest run of set bits in `f`.
fn longest_run(f: usize) -> usize {
    let mut x = f;
    let mut best = 0;
    while x != 0 {
        // `x != 0`, so fewer than `BITS` trailing zeros.
        x >>= x.trailing_zeros();
        // `BITS` if `f` is all ones: then `x` becomes 0.
        let run = x.trailing_ones();
        best = best.max(run as usize);
        x = x.checked_shr(run).unwrap_or(0);
    }
    best
}

/// Free runs of a range of pages with respect to the primary bitmap.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct Runs {
    /// Longest run of pages free of primary owners.
    max: usize,
    /// Free pages at the start of the range.
    pre: usize,
    /// Free pages at the end of the range.
    suf: usize,
}

impl Runs {
    /// Runs of one word whose free pages are the set bits of `f`.
    fn of_word(f: usize) -> Runs {
        Runs {
            max: longest_run(f),
            pre: f.trailing_ones() as usize,
            suf: f.leading_ones() as usize,
        }
    }

    /// Whether `self` and `other` are equal, with a single branch for the
    /// caller: the outcome decides where a refresh stops, which no
    /// predictor guesses well.
    fn same(&self, other: &Runs) -> bool {
        (self.max ^ other.max) | (self.pre ^ other.pre) | (self.suf ^ other.suf) == 0
    }

    /// Runs of two adjacent ranges given with their lengths, and the
    /// length of the whole.
    fn concat((l, l_len): (Runs, usize), (r, r_len): (Runs, usize)) -> (Runs, usize) {
        let runs = Runs {
            max: l.max.max(r.max).max(l.suf + r.pre),
            pre: if l.pre == l_len { l_len + r.pre } else { l.pre },
            suf: if r.suf == r_len { r_len + l.suf } else { r.suf },
        };
        (runs, l_len + r_len)
    }

    /// Runs of two adjacent ranges of `half` pages each.
    fn join(l: Runs, r: Runs, half: usize) -> Runs {
        Runs {
            max: l.max.max(r.max).max(l.suf + r.pre),
            pre: if l.pre == half { half + r.pre } else { l.pre },
            suf: if r.suf == half { half + l.suf } else { r.suf },
        }
    }
}

/// Outcome of a search step.
enum Scan {
    /// A free window starts at this page.
    Found(usize),
    /// No window found; this many free pages end the range searched.
    Carry(usize),
}

/// Looks for a window of `k` free pages in one word of free-page mask `f`
/// whose first page is `pos`, given `carry` free pages just before `pos`.
fn scan_word(f: usize, pos: usize, carry: usize, k: usize) -> Scan {
    let pre = f.trailing_ones() as usize;
    if carry + pre >= k {
        return Scan::Found(pos - carry);
    }
    if pre == BITS {
        return Scan::Carry(carry + BITS);
    }
    if k <= BITS {
        // The first run is the prefix, shorter than `k`: any later run long
        // enough is the answer.
        let mut x = f;
        let mut off = 0usize;
        while x != 0 {
            let tz = x.trailing_zeros();
            x >>= tz;
            off += tz as usize;
            let run = x.trailing_ones();
            if run as usize >= k {
                return Scan::Found(pos + off);
            }
            x = x.checked_shr(run).unwrap_or(0);
            off += run as usize;
        }
    }
    Scan::Carry(f.leading_ones() as usize)
}

/// Masks of the pages `off..off + count` of a word and of the pages past
/// its end in the next word, for `off < BITS` and `1 <= count <= BITS`.
fn short_masks(off: usize, count: usize) -> (usize, usize) {
    let ones = usize::MAX >> (BITS - count);
    // Two shifts, each below `BITS`, shift `ones` right by `BITS - off`,
    // which is `BITS` for `off == 0`.
    (ones << off, (ones >> 1) >> (BITS - 1 - off))
}

/// Shifts of the three steps of [`window_starts`] for windows of `1..=HINTS`
/// pages (index `k - 1`).
///
/// Once each set bit of a mask stands for `len` free pages from it, `g & (g
/// >> s)` with `s <= len` has each stand for `len + s`.  Three steps, of at
/// most 1, 2 and 4, reach any length up to 8; a step of 0 changes nothing.
/// A table rather than arithmetic on `k`: one load per step.
const WINDOW_SHIFTS: [[u32; 3]; HINTS] = {
    assert!(HINTS <= 8);
    let mut table = [[0; 3]; HINTS];
    let mut k = 1;
    while k <= HINTS {
        let mut len = 1;
        let mut step = 0;
        while step < 3 {
            let s = if k - len < len { k - len } else { len };
            table[k - 1][step] = s as u32;
            len += s;
            step += 1;
        }
        k += 1;
    }
    table
};

/// Starts of the windows of `k` free pages that lie within a word of
/// free-page mask `f`, for `1 <= k <= HINTS`: bit `i` of the result is set
/// if bits `i..i + k` of `f` all are.  No branch depends on `k`.
fn window_starts(f: usize, k: usize) -> usize {
    let [s1, s2, s3] = WINDOW_SHIFTS
        .get(k.wrapping_sub(1))
        .copied()
        .unwrap_or([0; 3]);
    let g = f & (f >> s1);
    let g = g & (g >> s2);
    g & (g >> s3)
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
    /// leaves, not stored.  The [`Runs`] of inner node `i` are at
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
pub(crate) struct LentIter<'a, S> {
    /// The map.
    map: &'a AreaMap<S>,
    /// Next page to look at.
    next: usize,
    /// End of the range (exclusive).
    end: usize,
}

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

    /// Allocates `count` contiguous pages whose first page has a frame
    /// number that is a multiple of `1 << align_order`, at the lowest such
    /// address where none of the pages is primary-owned, and marks them
    /// primary-owned.
    ///
    /// Pages lent to secondary clients may be taken; [`AllocOutcome::lent`]
    /// tells how many, and they must be discarded as described in the
    /// module documentation.
    ///
    /// Errors, with the map unchanged: `EINVAL` if `count == 0` or
    /// `align_order >= usize::BITS`; `ENOMEM` if `count > nr_pages` or no
    /// such range is free.
    pub(crate) fn alloc_primary(&mut self, count: usize, align_order: u32) -> Result<AllocOutcome> {
        let mut from = 0;
        loop {
            match self.alloc_primary_from(count, align_order, from, usize::MAX)? {
                AllocStep::Done(out) => return Ok(out),
                AllocStep::Resume(next) => from = next,
            }
        }
    }

    /// As [`AreaMap::alloc_primary`], looking only at ranges that start at
    /// `from` or above, and giving up after `tries` unaligned fits: then it
    /// returns [`AllocStep::Resume`] with the page to go on from, having
    /// changed nothing.  Each try costs `O(log n)`.
    #[inline(always)]
    pub(crate) fn alloc_primary_from(
        &mut self,
        count: usize,
        align_order: u32,
        from: usize,
        tries: usize,
    ) -> Result<AllocStep> {
        // The common request, a few unaligned pages searched from their
        // hint, takes no tries and no alignment arithmetic.
        let hint = count.wrapping_sub(1);
        if align_order == 0 && hint < HINTS {
            if let Some(&low) = self.low.get(hint) {
                if from <= low {
                    let found = self.find_small(low, count);
                    // The lowest run of `count` free pages in the area.
                    if let Some(low) = self.low.get_mut(hint) {
                        *low = found.unwrap_or(self.nr_pages);
                    }
                    let start = found.ok_or(ENOMEM)?;
                    return Ok(AllocStep::Done(self.claim(start, count)));
                }
            }
        }
        self.alloc_primary_search(count, align_order, from, tries)
    }

    /// The rest of [`Self::alloc_primary_from`]: aligned or larger
    /// requests, and searches that resume above the hint.
    #[inline(never)]
    fn alloc_primary_search(
        &mut self,
        count: usize,
        align_order: u32,
        mut from: usize,
        tries: usize,
    ) -> Result<AllocStep> {
        if count == 0 {
            return Err(EINVAL);
        }
        let align = 1usize.checked_shl(align_order).ok_or(EINVAL)?;
        if count > self.nr_pages {
            return Err(ENOMEM);
        }
        // Offset of page 0 from the previous aligned frame.
        let phase = self.base & (align - 1);
        let mut left = tries;
        // No run of `count` free pages starts below the hint: start there.
        let hint = count.min(HINTS) - 1;
        let mut hinted = false;
        if let Some(&low) = self.low.get(hint) {
            if from <= low {
                from = low;
                hinted = count <= HINTS;
            }
        }
        let start = loop {
            let found = self.find(from, count);
            if hinted {
                // The lowest run of `count` free pages in the area.
                if let Some(low) = self.low.get_mut(hint) {
                    *low = found.unwrap_or(self.nr_pages);
                }
                hinted = false;
            }
            let s = found.ok_or(ENOMEM)?;
            // `phase + s` cannot overflow: both are below the area's span.
            let aligned = (phase + s).checked_next_multiple_of(align).ok_or(ENOMEM)? - phase;
            if aligned == s {
                break s;
            }
            // No aligned start below `aligned` can fit: look again from there.
            from = aligned;
            left = left.saturating_sub(1);
            if left == 0 {
                return Ok(AllocStep::Resume(from));
            }
        };
        Ok(AllocStep::Done(self.claim(start, count)))
    }

    /// Marks the free pages `start..start + count` primary-owned, with the
    /// summaries and counters.
    #[inline(always)]
    fn claim(&mut self, start: usize, count: usize) -> AllocOutcome {
        let end = start + count;
        let (first, last) = (start / BITS, (end - 1) / BITS);
        let lent = if count <= BITS {
            self.claim_short(start, count)
        } else {
            let lent = self.claim_words(start, end);
            self.update_avail_words(first, last);
            lent
        };
        self.mark_stale(first, last);
        self.primary_used += count;
        self.pending += lent;
        // The pages not lent were free.
        self.free -= count - lent;
        AllocOutcome { start, count, lent }
    }

    /// Sets the primary bits of pages `start..start + count`, with
    /// `1 <= count <= BITS`, keeps the availability bitset up to date and
    /// returns how many of the pages are lent.
    ///
    /// Such a range spans at most two words, handled alike whether it
    /// spans one or two: a branch on that would be mispredicted about as
    /// often as not for small ranges at random places.
    #[inline(always)]
    fn claim_short(&mut self, start: usize, count: usize) -> usize {
        let (w0, w1) = (start / BITS, (start + count - 1) / BITS);
        let (m0, m1) = short_masks(start % BITS, count);
        // The words as a slice of one or two: one bounds check each.
        let Some(s) = self.secondary.get(w0..=w1) else {
            return 0;
        };
        let (Some(&s0), Some(&s1)) = (s.first(), s.last()) else {
            return 0;
        };
        let Some(p) = self.primary.get_mut(w0..=w1) else {
            return 0;
        };
        // With one word, `m1 == 0`: the second update is a no-op.
        let (mut p0, mut p1) = (0, 0);
        if let Some(w) = p.first_mut() {
            *w |= m0;
            p0 = *w;
        }
        if let Some(w) = p.last_mut() {
            *w |= m1;
            p1 = *w;
        }
        // Claiming only takes free pages away: the availability bitset
        // changes only if a word has none left.  Mostly it has some.
        if p0 | s0 == usize::MAX || p1 | s1 == usize::MAX {
            self.update_avail_pair(w0, w1);
        }
        let (l0, l1) = (s0 & m0, s1 & m1);
        // Mostly none: skip the population count.
        if l0 | l1 != 0 {
            (l0.count_ones() + l1.count_ones()) as usize
        } else {
            0
        }
    }

    /// [`Self::update_avail`] of words `w0` and `w1`, out of line: claims
    /// seldom fill a word.
    #[inline(never)]
    fn update_avail_pair(&mut self, w0: usize, w1: usize) {
        self.update_avail(w0);
        self.update_avail(w1);
    }

    /// Sets the primary bits of pages `start..end`, which span several
    /// words, and returns how many of them are lent.
    #[inline(never)]
    fn claim_words(&mut self, start: usize, end: usize) -> usize {
        let mut lent = 0;
        for (w, m) in WordMasks::new(start, end) {
            lent += self.claim_word(w, m);
        }
        lent
    }

    /// Sets the primary bits `m` of bitmap word `w` and returns how many of
    /// them are lent.
    fn claim_word(&mut self, w: usize, m: usize) -> usize {
        match (self.primary.get_mut(w), self.secondary.get(w)) {
            (Some(p), Some(&s)) => {
                *p |= m;
                // Mostly none: skip the population count.
                if s & m != 0 {
                    (s & m).count_ones() as usize
                } else {
                    0
                }
            }
            _ => 0,
        }
    }

    /// Marks the primary-owned pages `start..start + count` releasing:
    /// their owner has let go of them, and [`AreaMap::release_primary`]
    /// frees them once nobody else holds them.
    ///
    /// Errors, with the map unchanged: `EINVAL` if `count == 0`, the range
    /// is out of the area or any of its pages is not primary-owned;
    /// `EEXIST` if any of its pages is releasing already.  Both mean a
    /// double or wrong release by the caller.
    pub(crate) fn begin_release(&mut self, start: usize, count: usize) -> Result {
        let end = self.check_primary_range(start, count)?;
        for (w, m) in WordMasks::new(start, end) {
            if self.releasing.get(w).is_some_and(|r| r & m != 0) {
                return Err(EEXIST);
            }
        }
        for (w, m) in WordMasks::new(start, end) {
            if let Some(r) = self.releasing.get_mut(w) {
                *r |= m;
            }
        }
        self.releasing_pages += count;
        Ok(())
    }

    /// Frees the primary-owned pages `start..start + count`, releasing or
    /// not (their releasing bits are cleared).
    ///
    /// A range may be freed piecewise.  Errors, with the map unchanged:
    /// `EINVAL` if `count == 0`, the range is out of the area or any of its
    /// pages is not primary-owned; `EBUSY` if any of its pages is still lent
    /// (see [`AreaMap::finish_discard`]).
    pub(crate) fn release_primary(&mut self, start: usize, count: usize) -> Result {
        let end = self.check_range(start, count)?;
        let was_releasing = if count <= BITS {
            self.free_short(start, count)?
        } else {
            self.free_words(start, end)?
        };
        self.mark_stale(start / BITS, (end - 1) / BITS);
        // Runs of `j + 1` free pages may start from `start - j` on now.
        for (j, low) in self.low.iter_mut().enumerate() {
            *low = (*low).min(start.saturating_sub(j));
        }
        self.primary_used -= count;
        self.releasing_pages -= was_releasing;
        self.free += count;
        self.generation = self.generation.wrapping_add(1);
        Ok(())
    }

    /// The bitmap part of [`Self::release_primary`] for `1 <= count <=
    /// BITS`, in at most two words handled alike (see
    /// [`Self::claim_short`]): checks the range, clears its primary and
    /// releasing bits, brings the availability bitset up to date and
    /// returns how many of its pages were releasing.
    #[inline]
    fn free_short(&mut self, start: usize, count: usize) -> Result<usize> {
        let (w0, w1) = (start / BITS, (start + count - 1) / BITS);
        let (m0, m1) = short_masks(start % BITS, count);
        // The words as slices of one or two, as in `claim_short()`.
        let (Some(p), Some(s)) = (self.primary.get(w0..=w1), self.secondary.get(w0..=w1)) else {
            return Err(EINVAL);
        };
        let (Some(&p0), Some(&p1), Some(&s0), Some(&s1)) =
            (p.first(), p.last(), s.first(), s.last())
        else {
            return Err(EINVAL);
        };
        // Not primary-owned takes precedence over lent.
        if p0 & m0 != m0 || p1 & m1 != m1 {
            return Err(EINVAL);
        }
        if (s0 & m0) | (s1 & m1) != 0 {
            return Err(EBUSY);
        }
        // With one word, `m1 == 0`: the second updates are no-ops.
        if let Some(p) = self.primary.get_mut(w0..=w1) {
            if let Some(w) = p.first_mut() {
                *w &= !m0;
            }
            if let Some(w) = p.last_mut() {
                *w &= !m1;
            }
        }
        // The pages freed are lent to nobody: both words have a page free
        // in both bitmaps now.
        self.set_avail(w0);
        self.set_avail(w1);
        let (mut was, mut was1) = (0, 0);
        if let Some(r) = self.releasing.get_mut(w0..=w1) {
            if let Some(w) = r.first_mut() {
                was = *w & m0;
                *w &= !m0;
            }
            if let Some(w) = r.last_mut() {
                was1 = *w & m1;
                *w &= !m1;
            }
        }
        Ok(if was == m0 && was1 == m1 {
            // The usual release, after `begin_release()` of the range.
            count
        } else if was | was1 == 0 {
            0
        } else {
            (was.count_ones() + was1.count_ones()) as usize
        })
    }

    /// The bitmap part of [`Self::release_primary`] for a range over
    /// several words: as [`Self::free_short`], a word at a time.
    #[inline(never)]
    fn free_words(&mut self, start: usize, end: usize) -> Result<usize> {
        // One pass for both checks; not primary-owned takes precedence.
        let mut busy = false;
        for (w, m) in WordMasks::new(start, end) {
            match (self.primary.get(w), self.secondary.get(w)) {
                (Some(&p), Some(&s)) if p & m == m => busy |= s & m != 0,
                _ => return Err(EINVAL),
            }
        }
        if busy {
            return Err(EBUSY);
        }
        let mut was_releasing = 0;
        for (w, m) in WordMasks::new(start, end) {
            if let Some(p) = self.primary.get_mut(w) {
                *p &= !m;
            }
            if let Some(r) = self.releasing.get_mut(w) {
                // Mostly none: skip the population count.
                if *r & m != 0 {
                    was_releasing += (*r & m).count_ones() as usize;
                    *r &= !m;
                }
            }
            self.set_avail(w);
        }
        Ok(was_releasing)
    }

    /// Whether every page of `start..start + count` is owned by a primary
    /// allocation (false for an empty range or one out of the area).
    /// Costs `O(count / BITS)`.
    pub(crate) fn is_primary_range(&self, start: usize, count: usize) -> bool {
        self.check_primary_range(start, count).is_ok()
    }

    /// Returns the first lent page in `from..end` (clamped to the area), if
    /// any.
    pub(crate) fn next_lent(&self, from: usize, end: usize) -> Option<usize> {
        let end = end.min(self.nr_pages);
        if from >= end {
            return None;
        }
        let mut w = from / BITS;
        let mut bits = self.secondary.get(w)? & (usize::MAX << (from % BITS));
        loop {
            if bits != 0 {
                let page = w * BITS + bits.trailing_zeros() as usize;
                return if page < end { Some(page) } else { None };
            }
            w += 1;
            if w * BITS >= end {
                return None;
            }
            bits = *self.secondary.get(w)?;
        }
    }

    /// Iterates over the lent pages of `start..start + count`.
    ///
    /// Fails with `EINVAL` if the range is empty or out of the area.
    pub(crate) fn lent_in(&self, start: usize, count: usize) -> Result<LentIter<'_, S>> {
        let end = self.check_range(start, count)?;
        Ok(LentIter {
            map: self,
            next: start,
            end,
        })
    }

    /// Clears the secondary bits left in the primary-owned range
    /// `start..start + count`, once the secondary side has dropped their
    /// data.  Returns the number of pages cleared.
    ///
    /// Fails with `EINVAL`, changing nothing, if `count == 0`, the range is
    /// out of the area or any of its pages is not primary-owned.
    pub(crate) fn finish_discard(&mut self, start: usize, count: usize) -> Result<usize> {
        let end = self.check_primary_range(start, count)?;
        let mut cleared = 0;
        for (w, m) in WordMasks::new(start, end) {
            if let Some(s) = self.secondary.get_mut(w) {
                cleared += (*s & m).count_ones() as usize;
                *s &= !m;
            }
        }
        // The pages stay primary-owned: no summary changes.
        self.secondary_lent -= cleared;
        self.pending -= cleared;
        Ok(cleared)
    }

    /// Lends to a secondary client a page that is neither primary-owned nor
    /// lent, the highest-addressed one, and returns it.
    ///
    /// Fails with `ENOMEM` if there is none.
    pub(crate) fn lend_secondary(&mut self) -> Result<usize> {
        if self.free == 0 {
            return Err(ENOMEM);
        }
        // Down the availability bitset, taking the highest bit at each level.
        let mut w = 0;
        for level in (0..self.levels).rev() {
            let word = self.avail_word(level, w);
            if word == 0 {
                return Err(ENOMEM);
            }
            w = w * BITS + (BITS - 1 - word.leading_zeros() as usize);
        }
        let candidates = self.both_free(w);
        if candidates == 0 {
            return Err(ENOMEM);
        }
        let bit = BITS - 1 - candidates.leading_zeros() as usize;
        if let Some(s) = self.secondary.get_mut(w) {
            *s |= 1usize << bit;
        }
        self.update_avail(w);
        self.secondary_lent += 1;
        self.free -= 1;
        Ok(w * BITS + bit)
    }

    /// Takes back the lent page `page`.  Allowed for a page claimed by a
    /// primary allocation and awaiting discard, too.
    ///
    /// Fails with `EINVAL`, changing nothing, if `page` is out of the area
    /// or not lent.
    pub(crate) fn return_secondary(&mut self, page: usize) -> Result {
        if page >= self.nr_pages {
            return Err(EINVAL);
        }
        let w = page / BITS;
        let m = 1usize << (page % BITS);
        let (Some(&p), Some(s)) = (self.primary.get(w), self.secondary.get_mut(w)) else {
            return Err(EINVAL);
        };
        if *s & m == 0 {
            return Err(EINVAL);
        }
        *s &= !m;
        self.secondary_lent -= 1;
        if p & m != 0 {
            self.pending -= 1;
        } else {
            self.free += 1;
            self.update_avail(w);
        }
        Ok(())
    }

    /// Takes `page` out of use for good: its memory is bad (hardware
    /// poison).  The page ends primary-owned and releasing, so no search
    /// finds it, no secondary client borrows it and a release of it is
    /// refused as a double release; it is counted in [`AreaMap::retired`]
    /// and stays out of [`AreaMap::free`].
    ///
    /// `page` may be free (neither bit set), owned by the caller's primary
    /// allocation that never reached its owner (claimed, not releasing), or
    /// released but kept out of use because its memory was found bad when
    /// its last reference went (releasing).  Errors, with the map unchanged:
    /// `EINVAL` if `page` is out of the area, `EBUSY` if it is lent (the
    /// secondary client returns it first).
    pub(crate) fn retire(&mut self, page: usize) -> Result {
        if page >= self.nr_pages {
            return Err(EINVAL);
        }
        if self.is_lent(page) {
            return Err(EBUSY);
        }
        if !self.is_primary(page) {
            // Free: claimed as a one-page allocation (no page is lent).
            self.claim(page, 1);
        }
        if !Self::bit(&self.releasing, page) {
            self.begin_release(page, 1)?;
        }
        self.retired += 1;
        Ok(())
    }

    /// Checks the map's internal consistency: buffer lengths, no bit set
    /// past the end of the area, counters equal to the bitmaps' contents,
    /// every tree node equal to the join of its children and every bit of
    /// the availability bitset telling whether the word below has a bit
    /// set.
    ///
    /// Fails with `EINVAL` on the first inconsistency found.  Costs time
    /// linear in the size of the area: for debugging and tests.
    pub(crate) fn check_invariants(&self) -> Result {
        let ok = |cond: bool| if cond { Ok(()) } else { Err(EINVAL) };
        ok(self.primary.len() == self.nr_words)?;
        ok(self.secondary.len() == self.nr_words)?;
        ok(self.releasing.len() == self.nr_words)?;
        ok(Some(self.summary.len()) == summary_words(self.nr_pages))?;
        let last = self.nr_words - 1;
        // Past the end of the area, primary bits are set, the others not.
        let past_end = !self.tail_mask;
        ok(self
            .primary
            .get(last)
            .is_some_and(|p| p & past_end == past_end))?;
        ok(self.secondary.get(last).is_some_and(|s| s & past_end == 0))?;
        ok(self.releasing.get(last).is_some_and(|r| r & past_end == 0))?;

        let (mut prim, mut lent, mut both) = (0usize, 0usize, 0usize);
        for (p, s) in self.primary.iter().zip(self.secondary.iter()) {
            prim += p.count_ones() as usize;
            lent += s.count_ones() as usize;
            both += (p & s).count_ones() as usize;
        }
        let mut releasing = 0usize;
        for (p, r) in self.primary.iter().zip(self.releasing.iter()) {
            // Only primary pages can be releasing.
            ok(r & !p == 0)?;
            releasing += r.count_ones() as usize;
        }
        ok(releasing == self.releasing_pages)?;
        ok(self.retired <= self.releasing_pages)?;
        ok(prim - past_end.count_ones() as usize == self.primary_used)?;
        ok(lent == self.secondary_lent)?;
        ok(both == self.pending)?;
        let free = (self.nr_pages + self.pending)
            .checked_sub(self.primary_used + self.secondary_lent)
            .ok_or(EINVAL)?;
        ok(self.free == free)?;

        // The stale range is empty or a short range of leaves of the area.
        if self.stale_lo <= self.stale_hi {
            ok(self.stale_hi < self.nr_words)?;
            ok(self.stale_hi - self.stale_lo < STALE_SPAN)?;
        }

        // Each level, bottom up: nodes `lo..hi` have children of `half`
        // pages.  The ancestors of stale leaves may be out of date.
        let (mut lo, mut hi, mut half) = (self.leaves / 2, self.leaves, BITS);
        while lo >= 1 {
            for i in lo..hi {
                let runs = Runs::join(self.runs(2 * i), self.runs(2 * i + 1), half);
                ok(self.is_stale(i) || self.runs(i) == runs)?;
            }
            hi = lo;
            lo /= 2;
            half *= 2;
        }

        // No run of `j + 1` free pages starts below `low[j]`: `run` free
        // pages end just before page `p`.
        let mut run = 0usize;
        for p in 0..self.nr_pages {
            if Self::bit(&self.primary, p) {
                run = 0;
                continue;
            }
            run += 1;
            // Runs of `1..=run` pages start at `p + 1 - run..=p`, among them
            // a run of `j + 1` pages at `p - j`.
            for (j, &low) in self.low.iter().enumerate().take(run) {
                ok(p - j >= low)?;
            }
        }

        // Each level of the availability bitset, bottom up: bit `j` tells
        // whether word `j` below has a bit set, for `j < len`.
        let mut len = self.nr_words;
        for level in 0..self.levels {
            for j in 0..len.div_ceil(BITS) * BITS {
                let below = if j >= len {
                    false
                } else if level == 0 {
                    self.both_free(j) != 0
                } else {
                    self.avail_word(level - 1, j) != 0
                };
                let bit = self.avail_word(level, j / BITS) & (1usize << (j % BITS)) != 0;
                ok(bit == below)?;
            }
            len = len.div_ceil(BITS);
        }
        ok(len == 1)
    }

    /// Reads bit `page` of `map`.
    fn bit(map: &[usize], page: usize) -> bool {
        map.get(page / BITS)
            .is_some_and(|w| w & (1usize << (page % BITS)) != 0)
    }

    /// Validates `start..start + count` as a non-empty range of the area and
    /// returns its end.
    fn check_range(&self, start: usize, count: usize) -> Result<usize> {
        match start.checked_add(count) {
            Some(end) if count > 0 && end <= self.nr_pages => Ok(end),
            _ => Err(EINVAL),
        }
    }

    /// As [`Self::check_range`], and also requires every page of the range
    /// to be primary-owned.
    fn check_primary_range(&self, start: usize, count: usize) -> Result<usize> {
        let end = self.check_range(start, count)?;
        for (w, m) in WordMasks::new(start, end) {
            match self.primary.get(w) {
                Some(&p) if p & m == m => {}
                _ => return Err(EINVAL),
            }
        }
        Ok(end)
    }

    /// Mask of the pages of word `w` free of primary owners (0 for a padding
    /// leaf past the area).
    fn leaf_free(&self, w: usize) -> usize {
        // The bits past the area are set in the primary bitmap.
        self.primary.get(w).map_or(0, |p| !p)
    }

    /// Mask of the pages of word `w` free in both bitmaps.
    fn both_free(&self, w: usize) -> usize {
        match (self.primary.get(w), self.secondary.get(w)) {
            (Some(p), Some(s)) => !p & !s,
            _ => 0,
        }
    }

    /// Word `j` of level `level` of the availability bitset.
    fn avail_word(&self, level: usize, j: usize) -> usize {
        match self.level_off.get(level) {
            Some(&off) if level < self.levels => self.summary.get(off + j).copied().unwrap_or(0),
            _ => 0,
        }
    }

    /// Brings the availability bitset up to date after a change to bitmap
    /// word `w`.
    #[inline]
    fn update_avail(&mut self, w: usize) {
        let set = self.both_free(w) != 0;
        // Mostly the word keeps a page free in both bitmaps, or none.
        let bit = 1usize << (w % BITS);
        if let Some(&word) = self.summary.get(self.level_off[0] + w / BITS) {
            if (word & bit != 0) == set {
                return;
            }
        }
        self.update_avail_levels(w, set);
    }

    /// [`Self::update_avail`] after pages of bitmap word `w` became free in
    /// both bitmaps.
    #[inline]
    fn set_avail(&mut self, w: usize) {
        let bit = 1usize << (w % BITS);
        if let Some(&word) = self.summary.get(self.level_off[0] + w / BITS) {
            if word & bit != 0 {
                return;
            }
        }
        self.update_avail_levels(w, true);
    }

    /// The rest of [`Self::update_avail`]: sets bit `w` of level 0 to
    /// `set`, and the levels above as needed.
    #[inline(never)]
    fn update_avail_levels(&mut self, w: usize, set: bool) {
        let (mut j, mut set) = (w, set);
        for level in 0..self.levels {
            let Some(&off) = self.level_off.get(level) else {
                return;
            };
            let Some(word) = self.summary.get_mut(off + j / BITS) else {
                return;
            };
            let old = *word;
            let bit = 1usize << (j % BITS);
            let new = if set { old | bit } else { old & !bit };
            if new == old {
                // Mostly so at level 0: the word still has a page free in
                // both bitmaps, or still none.
                return;
            }
            *word = new;
            if (old == 0) == (new == 0) {
                // The level above does not change.
                return;
            }
            set = *word != 0;
            j /= BITS;
        }
    }

    /// Runs of tree node `i`: stored for an inner node (`i < leaves`),
    /// computed from bitmap word `i - leaves` for a leaf.
    fn runs(&self, i: usize) -> Runs {
        if i >= self.leaves {
            return Runs::of_word(self.leaf_free(i - self.leaves));
        }
        self.node(i)
    }

    /// Runs of inner node `i` (`i < leaves`), as stored.
    fn node(&self, i: usize) -> Runs {
        match self.summary.get(i * RUN_FIELDS..(i + 1) * RUN_FIELDS) {
            Some(&[max, pre, suf]) => Runs { max, pre, suf },
            _ => Runs::default(),
        }
    }

    /// Stores the runs of inner node `i`.
    fn set_runs(&mut self, i: usize, r: Runs) {
        if let Some(slot) = self.summary.get_mut(i * RUN_FIELDS..(i + 1) * RUN_FIELDS) {
            slot.copy_from_slice(&[r.max, r.pre, r.suf]);
        }
    }

    /// Brings the tree up to date after a change to the primary bits of
    /// bitmap words `first..=last`, or rather leaves it stale over them
    /// while that stays cheap to catch up on (see [`AreaMap::stale_lo`]).
    /// The availability bitset is its callers' business.
    #[inline(always)]
    fn mark_stale(&mut self, first: usize, last: usize) {
        // An empty stale range is `usize::MAX..=0`: the union is the new one.
        let (lo, hi) = (self.stale_lo.min(first), self.stale_hi.max(last));
        if hi - lo < STALE_SPAN {
            self.stale_lo = lo;
            self.stale_hi = hi;
            return;
        }
        self.refresh_far(first, last);
    }

    /// [`Self::update_avail`] for words `first..=last`, after a claim of
    /// more than a word (out of line: rare).
    #[inline(never)]
    fn update_avail_words(&mut self, first: usize, last: usize) {
        for w in first..=last {
            self.update_avail(w);
        }
    }

    /// The rest of [`Self::mark_stale`] when the changed words are too far
    /// from the stale range: brings that up to date and starts a new one, or
    /// updates the tree at once for a long range.
    #[inline(never)]
    fn refresh_far(&mut self, first: usize, last: usize) {
        self.flush();
        if last - first < STALE_SPAN {
            self.stale_lo = first;
            self.stale_hi = last;
        } else if first == last {
            self.refresh_leaf(first);
        } else {
            self.refresh_runs(first, last);
        }
    }

    /// Brings the tree up to date over the stale range, if any.
    fn flush(&mut self) {
        if self.stale_lo <= self.stale_hi {
            let (lo, hi) = (self.stale_lo, self.stale_hi);
            self.stale_lo = usize::MAX;
            self.stale_hi = 0;
            // Every change since the tree was last up to date is below the
            // lowest common ancestor of the range: where that stops
            // changing, so do the nodes above it.
            if lo == hi {
                self.refresh_leaf(lo);
            } else {
                self.refresh_runs(lo, hi);
            }
        }
    }

    /// Whether the stored runs of inner node `i` may be out of date: it is
    /// an ancestor of a stale leaf.
    fn is_stale(&self, i: usize) -> bool {
        if self.stale_lo > self.stale_hi || i == 0 {
            return false;
        }
        // Node `i` at height `h` spans leaves `(i << h) - leaves` onwards.
        let h = (self.leaves.trailing_zeros() - i.ilog2()) as usize;
        let first = (i << h) - self.leaves;
        let last = first + (1usize << h) - 1;
        first <= self.stale_hi && self.stale_lo <= last
    }

    /// Runs of the whole area, computed around the stale range without
    /// changing the tree: the runs of the maximal subtrees left of it, of
    /// its leaves, and of the maximal subtrees right of it, joined in order.
    fn root_runs(&self) -> Runs {
        if self.stale_lo > self.stale_hi {
            return self.runs(1);
        }
        let (lo, hi) = (self.stale_lo, self.stale_hi);
        // Left part: the left siblings on the path from leaf `lo` up, from
        // the top down.  Right part: the right siblings on the path from
        // leaf `hi` up, from the bottom up.
        let mut acc = (Runs::default(), 0usize);
        let depth = self.leaves.trailing_zeros() as usize;
        for h in (0..depth).rev() {
            let i = (lo + self.leaves) >> h;
            if i % 2 == 1 {
                acc = Runs::concat(acc, (self.runs(i - 1), BITS << h));
            }
        }
        for w in lo..=hi {
            acc = Runs::concat(acc, (self.runs(w + self.leaves), BITS));
        }
        for h in 0..depth {
            let i = (hi + self.leaves) >> h;
            if i & 1 == 0 {
                acc = Runs::concat(acc, (self.runs(i + 1), BITS << h));
            }
        }
        acc.0
    }

    /// As [`Self::refresh_runs`] for a single leaf `w`, the common case of
    /// small ranges: the leaf and its sibling are summarised once, and each
    /// ancestor is compared with its new runs before it is written.
    fn refresh_leaf(&mut self, w: usize) {
        let mut i = (w + self.leaves) / 2;
        if i == 0 {
            // A single leaf, which is the root: nothing stored.
            return;
        }
        let pair = w & !1;
        let mut runs = Runs::join(
            Runs::of_word(self.leaf_free(pair)),
            Runs::of_word(self.leaf_free(pair + 1)),
            BITS,
        );
        let mut half = 2 * BITS;
        loop {
            if runs.same(&self.node(i)) {
                // So would all above it be.
                return;
            }
            self.set_runs(i, runs);
            if i == 1 {
                return;
            }
            // Both children are stored now: no branch on which one `i` is.
            i /= 2;
            runs = Runs::join(self.node(2 * i), self.node(2 * i + 1), half);
            half *= 2;
        }
    }

    /// Recomputes the runs of the ancestors of leaves `first..=last`.
    ///
    /// Levels are recomputed whole while they hold more than one ancestor;
    /// from the lowest common ancestor up, only until a node comes out
    /// unchanged, as then so would all above it.
    fn refresh_runs(&mut self, first: usize, last: usize) {
        let (mut lo, mut hi, mut half) =
            ((first + self.leaves) / 2, (last + self.leaves) / 2, BITS);
        if lo == 0 {
            // A single leaf, which is the root: nothing stored.
            return;
        }
        while lo < hi {
            for i in lo..=hi {
                let runs = Runs::join(self.runs(2 * i), self.runs(2 * i + 1), half);
                self.set_runs(i, runs);
            }
            lo /= 2;
            hi /= 2;
            half *= 2;
        }
        let mut i = lo;
        loop {
            let runs = Runs::join(self.runs(2 * i), self.runs(2 * i + 1), half);
            if runs == self.runs(i) {
                return;
            }
            self.set_runs(i, runs);
            if i == 1 {
                return;
            }
            i /= 2;
            half *= 2;
        }
    }

    /// Looks for `k` free pages in the subtree of node `i`, which spans the
    /// `len` pages from `pos`, given `carry` free pages just before `pos`.
    fn scan_subtree(
        &self,
        mut i: usize,
        mut pos: usize,
        mut len: usize,
        mut carry: usize,
        k: usize,
    ) -> Scan {
        loop {
            if i >= self.leaves {
                return scan_word(self.leaf_free(i - self.leaves), pos, carry, k);
            }
            let n = self.node(i);
            if carry + n.pre >= k {
                return Scan::Found(pos - carry);
            }
            if n.max < k {
                return Scan::Carry(if n.pre == len { carry + len } else { n.suf });
            }
            // The window lies inside this node, and starts in the left child
            // if that holds it (alone or with the carry), else in the right.
            len /= 2;
            if 2 * i >= self.leaves {
                // Two leaves: scanning the left one costs less than
                // summarising it, and if the window does not start there,
                // it starts in the right one.
                let w = 2 * i - self.leaves;
                return match scan_word(self.leaf_free(w), pos, carry, k) {
                    Scan::Carry(c) => scan_word(self.leaf_free(w + 1), pos + len, c, k),
                    found => found,
                };
            }
            let l = self.node(2 * i);
            if carry + l.pre >= k || l.max >= k {
                i *= 2;
            } else {
                carry = if l.pre == len { carry + len } else { l.suf };
                i = 2 * i + 1;
                pos += len;
            }
        }
    }

    /// Returns the lowest page `s >= from` such that pages `s..s + k` are
    /// all free of primary owners; `k` must be at least 1.
    ///
    /// Scans the word of `from`, and for a window of at most [`HINTS`]
    /// pages the next [`LINEAR_WORDS`] words too (see
    /// [`Self::find_small`]), for a larger one the wholly free words that
    /// follow, before it brings the tree up to date and searches it.
    fn find(&mut self, from: usize, k: usize) -> Option<usize> {
        if k <= HINTS {
            return self.find_small(from, k);
        }
        if from >= self.nr_pages || k > self.nr_pages - from {
            return None;
        }
        let mut w = from / BITS;
        let f = self.leaf_free(w) & (usize::MAX << (from % BITS));
        let mut carry = match scan_word(f, w * BITS, 0, k) {
            Scan::Found(s) => return Some(s),
            Scan::Carry(carry) => carry,
        };
        // While the window grows by whole free words, follow the bitmap:
        // in a lightly used area a window of up to [`FREE_WORDS`] words is
        // found there, in one pass over its own words, without a walk
        // through the tree and without bringing it up to date.  The first
        // word that is not wholly free ends the window or hands the search
        // to the tree, and so does the last one followed.
        let last = self.nr_words.min(w + FREE_WORDS + 1);
        while carry > 0 && w + 1 < last {
            w += 1;
            match scan_word(self.leaf_free(w), w * BITS, carry, k) {
                Scan::Found(s) => return Some(s),
                Scan::Carry(c) if c == carry + BITS => carry = c,
                Scan::Carry(c) => return self.find_in_tree(w, c, k),
            }
        }
        self.find_in_tree(w, carry, k)
    }

    /// [`Self::find`] for `1 <= k <= HINTS`, which mostly finds its window
    /// in the first words it looks at: each word is searched whole with
    /// [`window_starts`], without a loop over its runs.
    #[inline(always)]
    fn find_small(&mut self, from: usize, k: usize) -> Option<usize> {
        // Past the area, `leaf_free()` is 0: no window, and the loop ends
        // at the last word.
        let mut w = from / BITS;
        let mut f = self.leaf_free(w) & (usize::MAX << (from % BITS));
        let mut g = window_starts(f, k);
        let mut words = 0;
        loop {
            if g != 0 {
                return Some(w * BITS + g.trailing_zeros() as usize);
            }
            // `f` is not all ones, or it would hold a window: only the run
            // at its end carries over.
            let carry = f.leading_ones() as usize;
            if words == LINEAR_WORDS {
                return self.find_in_tree(w, carry, k);
            }
            words += 1;
            w += 1;
            if w >= self.nr_words {
                return None;
            }
            f = self.leaf_free(w);
            // A window that starts in the word before comes first; it can
            // only start in the run of `carry` pages.
            if carry + f.trailing_ones() as usize >= k {
                return Some(w * BITS - carry);
            }
            g = window_starts(f, k);
        }
    }

    /// The rest of [`Self::find`], out of line to keep the common case
    /// short: brings the tree up to date and looks for the window right of
    /// leaf `w`, given `carry` free pages at the end of that leaf.
    #[inline(never)]
    fn find_in_tree(&mut self, w: usize, mut carry: usize, k: usize) -> Option<usize> {
        self.flush();
        // A request larger than any free run, as large ones in a fragmented
        // area often are, fails at the root rather than after a walk along
        // the whole area.
        if self.runs(1).max < k {
            return None;
        }
        // Visit the maximal subtrees right of leaf `w`, left to right: each
        // is the next node, raised while it is a left child.
        let (mut i, mut len, mut pos) = (w + self.leaves, BITS, w * BITS);
        loop {
            pos += len;
            i += 1;
            if pos >= self.nr_pages || i.is_power_of_two() {
                return None;
            }
            while i % 2 == 0 {
                i /= 2;
                len *= 2;
            }
            match self.scan_subtree(i, pos, len, carry, k) {
                Scan::Found(s) => return Some(s),
                Scan::Carry(c) => carry = c,
            }
        }
    }
}

/// Iterator over the bitmap words of a page range, with the mask of the
/// range's pages in each word.
struct WordMasks {
    /// Next page.
    page: usize,
    /// End of the range (exclusive).
    end: usize,
}

impl WordMasks {
    /// Words of pages `start..end`.
    fn new(start: usize, end: usize) -> Self {
        WordMasks { page: start, end }
    }
}

impl Iterator for WordMasks {
    type Item = (usize, usize);

    fn next(&mut self) -> Option<(usize, usize)> {
        if self.page >= self.end {
            return None;
        }
        let w = self.page / BITS;
        let lo = self.page % BITS;
        let hi = (self.end - w * BITS).min(BITS);
        self.page = w * BITS + hi;
        // `lo < hi`, as `page < end`.
        Some((w, range_mask(lo, hi)))
    }
}
