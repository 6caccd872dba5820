// SPDX-License-Identifier: GPL-2.0

//! The page table of a DMEM instance, under its page lock: per page a
//! [`Link`] (state, in-flight copies, list links) and a [`Slot`] (the
//! binding), the LRU and stale lists threaded through the links, and the
//! page state machine (binding, unbinding, eviction, discard marking).
//!
//! Separate from the store (`store.rs`), which takes the locks and moves
//! bytes: everything here runs under the page lock and touches no page
//! memory.

use super::{env::IdlePage, Handle, Key, PageSupply, Refusal, EVICT_SCAN};
use core::marker::PhantomData;
use core::ops::DerefMut;

/// End-of-list marker of the LRU links; never a valid page index, as slot
/// storage holds fewer than `usize::MAX` elements.
pub(super) const NIL: usize = usize::MAX;

/// State of a page of the page table; see the module documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// Not held by the store.
    Free,
    /// Bound to a key; a store is copying data in.
    Filling,
    /// Bound to a key; holds its data.
    Ready,
    /// Unbound while copies were in flight; given back after the last one.
    Dead,
    /// Claimed by a primary allocation; freed by the discarder once no copy
    /// is in flight, never given back.
    Discarded,
}

/// The page-table entry of one page, first part: its state, copies and
/// list links, which every page-table operation goes through.
///
/// The entry is split in two arrays, this [`Link`] and the [`Slot`] with
/// the key, so that the operations that need no key, a discard above all,
/// go through a few bytes per page rather than the whole entry.
///
/// # Invariants
///
/// * The pages on the LRU list are exactly those in [`State::Filling`] and
///   [`State::Ready`]; their slot's `key` is `Some`.
/// * The pages on the stale list are in [`State::Free`] or
///   [`State::Discarded`]; their slot's `key` is `Some`, the key of the
///   binding they had when they were discarded (sequence number `seq`),
///   whose index entry may still be in the index.
/// * Every other page's slot has `key` `None`.
/// * `copiers` is 0 in [`State::Free`], at least 1 in [`State::Filling`]
///   (the store filling it) and in [`State::Dead`].
pub(crate) struct Link {
    /// State of the page.
    pub(super) state: State,
    /// Copies in flight into or out of the page.
    pub(super) copiers: u32,
    /// Next more recently stored page on the LRU list, or previous page on
    /// the stale list, or [`NIL`].
    pub(super) prev: usize,
    /// Next less recently stored page on the LRU list, or next page on the
    /// stale list, or [`NIL`].
    pub(super) next: usize,
}

impl Link {
    /// The link of a page the store does not hold.
    pub(crate) const fn new() -> Self {
        Link {
            state: State::Free,
            copiers: 0,
            prev: NIL,
            next: NIL,
        }
    }
}

impl Default for Link {
    fn default() -> Self {
        Self::new()
    }
}

/// The page-table entry of one page, second part: its binding.  See
/// [`Link`] for the invariants.
pub(crate) struct Slot<K> {
    /// Sequence number of the page's current or last binding.
    pub(super) seq: u64,
    /// Key the page is bound to.
    pub(super) key: Option<K>,
}

impl<K> Slot<K> {
    /// A slot of a page the store does not hold.
    pub(crate) const fn new() -> Self {
        Slot { seq: 0, key: None }
    }
}

impl<K> Default for Slot<K> {
    fn default() -> Self {
        Self::new()
    }
}

/// An index entry [`Pages::bind`] made stale, for the caller to remove:
/// its key and handle, and whether it was evicted (`true`) or is the stale
/// entry of a discarded page bound again (`false`).
type Displaced<K> = (K, Handle, bool);

/// Outcome of [`Pages::unbind`].
enum Unbound {
    /// The handle was stale: nothing done.
    Stale,
    /// The page was idle and is now [`State::Free`]: the caller gives it
    /// back or reuses it.
    Idle(usize),
    /// Copies are in flight: the page is [`State::Dead`] and the last copy
    /// gives it back.
    Busy,
}

/// The page table and LRU list, under the page lock.
///
/// # Invariants
///
/// * `links` and `slots` have the same length.
/// * The LRU list, from `head` (most recently stored) to `tail` through
///   `next`, holds exactly the pages in [`State::Filling`] or
///   [`State::Ready`], and there are `bound` of them; `prev` links mirror
///   `next` links.
/// * The stale list, from `stale_head` through `next`, holds exactly the
///   pages not on the LRU list whose slot's `key` is `Some`, and there are
///   `stale` of them; `prev` links mirror `next` links.
/// * `held` is the number of pages not in [`State::Free`].
/// * `next_seq` is above every slot's `seq`.
pub(super) struct Pages<K, S, L> {
    /// One slot per page the supply may lend.
    pub(super) slots: S,
    /// One link per page the supply may lend.
    pub(super) links: L,
    /// Most recently stored bound page, or [`NIL`].
    pub(super) head: usize,
    /// Least recently stored bound page, or [`NIL`].
    pub(super) tail: usize,
    /// Slots in [`State::Filling`] or [`State::Ready`].
    pub(super) bound: usize,
    /// First slot of the stale list, or [`NIL`].
    pub(super) stale_head: usize,
    /// Slots on the stale list.
    pub(super) stale: usize,
    /// Slots not in [`State::Free`].
    pub(super) held: usize,
    /// Sequence number of the next binding.
    pub(super) next_seq: u64,
    /// The slots' key type.
    pub(super) _key: PhantomData<K>,
}

impl<K: Key, S: DerefMut<Target = [Slot<K>]>, L: DerefMut<Target = [Link]>> Pages<K, S, L> {
    /// Puts bound page `p` at the head of the LRU list.
    fn push_head(&mut self, p: usize) {
        let old = self.head;
        if let Some(s) = self.links.get_mut(p) {
            s.prev = NIL;
            s.next = old;
        }
        match self.links.get_mut(old) {
            Some(s) => s.prev = p,
            None => self.tail = p,
        }
        self.head = p;
    }

    /// Takes page `p` off the LRU list.
    fn unlink(&mut self, p: usize) {
        let Some(s) = self.links.get_mut(p) else {
            return;
        };
        let (prev, next) = (s.prev, s.next);
        s.prev = NIL;
        s.next = NIL;
        self.close_lru_gap(prev, next);
    }

    /// Links `before` and `after` ([`NIL`] for the list's ends) to each
    /// other on the LRU list, over the pages that were between them.
    fn close_lru_gap(&mut self, before: usize, after: usize) {
        match self.links.get_mut(before) {
            Some(s) => s.next = after,
            None => self.head = after,
        }
        match self.links.get_mut(after) {
            Some(s) => s.prev = before,
            None => self.tail = before,
        }
    }

    /// Marks the held pages among `lo..hi` discarded, for
    /// [`Dmem::discard_range`]: the idle ones become free, the busy ones
    /// [`State::Discarded`], and the bound ones leave the LRU list for the
    /// stale list.  Returns the bits, relative to `base`, of the pages freed
    /// (`done`) and of the busy ones.
    ///
    /// Pages lent one after the other sit next to each other on the LRU
    /// list too, in one direction or the other, so the bound pages of a
    /// range mostly form a few stretches of it.  Each stretch moves to the
    /// stale list whole, keeping its own links: per page, only its state
    /// changes and one link of its neighbour is read.
    ///
    /// Out of line: the loop every discarded page goes through stays small
    /// and in one place, whatever its caller inlines around it.
    ///
    /// [`Dmem::discard_range`]: super::Dmem::discard_range
    #[inline(never)]
    pub(super) fn mark_discarded(&mut self, base: usize, lo: usize, hi: usize) -> (u64, u64) {
        let (mut done, mut busy) = (0u64, 0u64);
        // The stretch of the LRU list marked so far, from its most recently
        // stored page to its least recently stored one.
        let mut run: Option<(usize, usize)> = None;
        let mut moved = 0;
        for page in lo..hi {
            let Some(s) = self.links.get_mut(page) else {
                break;
            };
            let bit = 1u64 << (page - base);
            let bound = match s.state {
                State::Free | State::Discarded => continue,
                State::Dead => false,
                State::Filling | State::Ready => true,
            };
            if s.copiers == 0 {
                s.state = State::Free;
                done |= bit;
            } else {
                s.state = State::Discarded;
                busy |= bit;
            }
            if !bound {
                continue;
            }
            // The key stays in the slot: its index entry is stale from now
            // on.
            moved += 1;
            run = Some(match run {
                None => (page, page),
                Some((first, last)) if self.next_of(last) == page => (first, page),
                Some((first, last)) if self.prev_of(first) == page => (page, last),
                Some((first, last)) => {
                    self.move_to_stale(first, last);
                    (page, page)
                }
            });
        }
        if let Some((first, last)) = run {
            self.move_to_stale(first, last);
        }
        self.bound -= moved;
        self.stale += moved;
        self.held -= done.count_ones() as usize;
        (done, busy)
    }

    /// The `next` link of page `p`, or [`NIL`].
    fn next_of(&self, p: usize) -> usize {
        self.links.get(p).map_or(NIL, |s| s.next)
    }

    /// The `prev` link of page `p`, or [`NIL`].
    fn prev_of(&self, p: usize) -> usize {
        self.links.get(p).map_or(NIL, |s| s.prev)
    }

    /// Moves the stretch of the LRU list from `first` to `last` (following
    /// `next`) to the head of the stale list; the caller counts its pages.
    fn move_to_stale(&mut self, first: usize, last: usize) {
        self.close_lru_gap(self.prev_of(first), self.next_of(last));
        let old = self.stale_head;
        if let Some(s) = self.links.get_mut(first) {
            s.prev = NIL;
        }
        if let Some(s) = self.links.get_mut(last) {
            s.next = old;
        }
        if let Some(s) = self.links.get_mut(old) {
            s.prev = last;
        }
        self.stale_head = first;
    }

    /// Takes page `p` off the stale list, if it is on it, and returns the
    /// stale index entry it stood for.
    fn take_stale(&mut self, p: usize) -> Option<(K, Handle)> {
        let l = self.links.get(p)?;
        if matches!(l.state, State::Filling | State::Ready) {
            return None;
        }
        let (prev, next) = (l.prev, l.next);
        let s = self.slots.get_mut(p)?;
        let key = s.key.take()?;
        let h = Handle {
            page: p,
            seq: s.seq,
        };
        if let Some(l) = self.links.get_mut(p) {
            l.prev = NIL;
            l.next = NIL;
        }
        match self.links.get_mut(prev) {
            Some(s) => s.next = next,
            None => self.stale_head = next,
        }
        if let Some(s) = self.links.get_mut(next) {
            s.prev = prev;
        }
        self.stale -= 1;
        Some((key, h))
    }

    /// Takes the first page off the stale list and returns the stale index
    /// entry it stood for.
    pub(super) fn pop_stale(&mut self) -> Option<(K, Handle)> {
        self.take_stale(self.stale_head)
    }

    /// Whether `h` names the current binding of its page, in `state`.
    pub(super) fn is(&self, h: Handle, state: State) -> bool {
        self.links.get(h.page).is_some_and(|l| l.state == state)
            && self.slots.get(h.page).is_some_and(|s| s.seq == h.seq)
    }

    /// Unbinds the binding `h` if it is current: the page leaves the LRU
    /// list and becomes [`State::Free`] if idle, [`State::Dead`] if not.
    fn unbind(&mut self, h: Handle) -> Unbound {
        if !self.is(h, State::Ready) && !self.is(h, State::Filling) {
            return Unbound::Stale;
        }
        self.unlink(h.page);
        self.bound -= 1;
        if let Some(s) = self.slots.get_mut(h.page) {
            s.key = None;
        }
        let Some(s) = self.links.get_mut(h.page) else {
            return Unbound::Stale;
        };
        if s.copiers == 0 {
            s.state = State::Free;
            self.held -= 1;
            Unbound::Idle(h.page)
        } else {
            s.state = State::Dead;
            Unbound::Busy
        }
    }

    /// As [`Pages::unbind`], giving an idle page back; returns whether the
    /// binding was current.
    pub(super) fn unbind_release(&mut self, h: Handle, supply: &impl PageSupply) -> bool {
        match self.unbind(h) {
            Unbound::Stale => false,
            Unbound::Idle(p) => {
                supply.give_back(IdlePage::new(p));
                true
            }
            Unbound::Busy => true,
        }
    }

    /// Evicts the least recently stored idle [`State::Ready`] entry among
    /// the [`EVICT_SCAN`] oldest, and returns its page, now [`State::Free`],
    /// with its key and handle.
    fn evict(&mut self) -> Option<(usize, K, Handle)> {
        let mut p = self.tail;
        for _ in 0..EVICT_SCAN {
            let l = self.links.get(p)?;
            if l.state == State::Ready && l.copiers == 0 {
                let s = self.slots.get(p)?;
                let h = Handle {
                    page: p,
                    seq: s.seq,
                };
                let key = s.key.clone()?;
                return match self.unbind(h) {
                    Unbound::Idle(p) => Some((p, key, h)),
                    _ => None,
                };
            }
            p = l.prev;
        }
        None
    }

    /// Finds a page for a new entry of `key` and binds it, in
    /// [`State::Filling`] with the store counted as a copier.  `old` is the
    /// key's previous handle, just removed from the index: its page is
    /// unbound, and reused if idle.  Returns the new handle and the index
    /// entry the caller must remove, if any: the entry evicted (`true`), or
    /// the stale entry of a discarded page lent again (`false`).
    pub(super) fn bind(
        &mut self,
        key: &K,
        old: Option<Handle>,
        supply: &impl PageSupply,
    ) -> Result<(Handle, Option<Displaced<K>>), Refusal> {
        let spare = match old.map(|h| self.unbind(h)) {
            Some(Unbound::Idle(p)) => {
                // Held again right away.
                self.held += 1;
                Some(p)
            }
            _ => None,
        };
        let mut victim = None;
        let page = if let Some(p) = spare {
            p
        } else if let Some(p) = supply.lend() {
            if self.links.get(p).map(|s| s.state) != Some(State::Free) {
                // A page out of range or already held: the supply broke its
                // contract.  Leave it alone rather than corrupt the table.
                return Err(Refusal::NoSpace);
            }
            victim = self.take_stale(p).map(|(k, h)| (k, h, false));
            self.held += 1;
            p
        } else if let Some((p, k, h)) = self.evict() {
            victim = Some((k, h, true));
            self.held += 1;
            p
        } else {
            return Err(Refusal::NoSpace);
        };
        let seq = self.next_seq;
        self.next_seq += 1;
        if let Some(l) = self.links.get_mut(page) {
            l.state = State::Filling;
            l.copiers = 1;
        }
        if let Some(s) = self.slots.get_mut(page) {
            s.seq = seq;
            s.key = Some(key.clone());
        }
        self.push_head(page);
        self.bound += 1;
        Ok((Handle { page, seq }, victim))
    }

    /// Ends a copy into or out of the page of `h`, and returns the page's
    /// state before the end.  The last copy out of a [`State::Dead`] page
    /// gives the page back.
    pub(super) fn end_copy(&mut self, h: Handle, supply: &impl PageSupply) -> State {
        let Some(s) = self.links.get_mut(h.page) else {
            return State::Free;
        };
        let state = s.state;
        s.copiers = s.copiers.saturating_sub(1);
        if state == State::Dead && s.copiers == 0 {
            s.state = State::Free;
            self.held -= 1;
            supply.give_back(IdlePage::new(h.page));
        }
        state
    }
}
