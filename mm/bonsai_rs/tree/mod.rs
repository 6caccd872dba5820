// SPDX-License-Identifier: GPL-2.0

//! The Bonsai tree: an RCU-compatible weight-balanced binary tree of
//! non-overlapping address ranges (Clements, Kaashoek, Zeldovich,
//! "Scalable Address Spaces Using RCU Balanced Trees", ASPLOS 2012).
//!
//! # Ranges
//!
//! Every entry covers a half-open range `[start, end)` of `usize`
//! addresses, `start < end`, and carries a value `V`.  Ranges never
//! overlap.  Since `end` is exclusive, `[x, usize::MAX)` is the highest
//! range possible and the address `usize::MAX` itself is never covered;
//! `[0, 1)` is the lowest.
//!
//! # Concurrency
//!
//! Lookups ([`Tree::find`], [`Tree::find_from`], [`Tree::iter`]) take no
//! lock and do no atomic read-modify-write: they follow child pointers
//! with acquire loads inside an RCU read-side critical section, shown by a
//! [`ReadSide`] guard.  Updates are serialised by one writer lock that the
//! caller holds while it uses a [`Writer`].
//!
//! An update never changes a node's range or value.  It builds new nodes
//! off to the side and links them in with release stores, each of which
//! keeps this invariant: *for every node `n` a lookup may be visiting,
//! every key that is present (before and after the update) and that the
//! lookup could be searching for below `n` can still be found below `n`*.
//! Concretely, only three kinds of store are made:
//!
//! * **Commit** (the paper's in-place update): a node on the update path
//!   whose children stay in balance keeps its place, and its child pointer
//!   on the path is replaced with the rebuilt subtree, which holds the same
//!   keys plus the inserted one (or minus the removed one).
//! * **Rotation**, built so that the stores only ever *add* keys below a
//!   node, which lookups already there tolerate: a single rotation of `a`
//!   with heavy child `b` creates `a'` (a's range and value, its light
//!   subtree and b's inner subtree) and stores `a'` as b's inner child
//!   (a superset of the old one); `b` becomes the subtree root.  A double
//!   rotation with `c` = b's inner child creates `a'` and `b'` and stores
//!   them as c's two children (supersets of the old ones); `c` becomes the
//!   root.  The replaced `a` (and `b`) are retired.  This allocates one
//!   node per single and two per double rotation, where the paper's
//!   purely functional rotations allocate two and three.
//! * **Delete with two children** replaces the node by its successor `s`:
//!   the path from the deleted node down to `s` is copied (the copies are
//!   new, unpublished nodes) and published with one store above it, so a
//!   lookup either sees `s` at its old place or at its new one, never
//!   neither (paper, section 3.3).
//! * **Rewrite**, for range stores ([`Writer::store`], [`Writer::clear`]):
//!   a node is replaced at its place by a new node with the same children
//!   and another range, published with one store above it.  The new
//!   range is either part of the old one (a trim: the keys it drops are
//!   being removed) or, once every other range it overlaps is gone, a
//!   range that only ranges being removed overlapped: either way the
//!   tree stays ordered and every key present before and after is found
//!   in the old node or in the new one.
//!
//! Rebuilt subtrees reach lookups through one release store each; sizes
//! are written in place because lookups never read them.  They live on a
//! cache line of their own in every node, and the tree's counters on one
//! apart from the root pointer, so that the size stores along every
//! update's path do not take the nodes lookups read (the top levels
//! above all) out of the readers' caches: an update dirties only the
//! lines of the nodes whose child pointers it changes.
//!
//! # Memory
//!
//! Updates never allocate.  Before taking the writer lock, the caller
//! fills a [`NodeReserve`] to [`Tree::reserve_bound`] nodes (a bound from
//! the tree's maximal height).  Under the lock, an update first computes
//! an upper bound of what it needs (exactly what [`Writer::insert_need`] /
//! [`Writer::remove_need`] return) and fails with `EAGAIN`, changing
//! nothing, if the reserve holds fewer; the caller may refill and retry.
//! Range stores bound their need the same way, from the ranges they
//! overlap ([`Writer::store_need`], [`Writer::clear_need`]).
//! Allocation failures therefore surface as `ENOMEM` from
//! [`NodeReserve::fill`], with the tree untouched.  Nodes left in the
//! reserve stay for the next update or are freed when it is dropped.
//!
//! A node takes two cache lines (128 bytes with a value of up to 24
//! bytes): one for what lookups read, one for the writer's size.
//!
//! Replaced and removed nodes go to a [`RetiredList`], which the caller
//! frees after an RCU grace period (for example after `synchronize_rcu()`,
//! or from an RCU callback).
//!
//! # What the crate root provides
//!
//! * `pub mod tree;` (public, so that `-Wunreachable_pub` holds);
//! * a `platform` module exporting `AtomicPtr` and `Ordering`: in the
//!   kernel `core::sync::atomic`'s, on the host possibly `loom`'s; and
//!   three hooks of the node allocator, for tests: `inject_alloc_failure()`
//!   (consulted before every node allocation of [`NodeReserve::fill`];
//!   `true` makes it fail with `ENOMEM`), `node_allocated()` and
//!   `node_freed()` (called once per node allocated and freed, so a test
//!   can count live nodes).  Outside tests they are empty inline
//!   functions returning `false`;
//! * `unsafe impl ReadSide for` its RCU read guard;
//! * the writer lock, taken around [`Tree::writer`], and the reclamation
//!   of [`RetiredList`]s after a grace period.

mod balance;
mod build;
mod check;
mod node;
mod stack;
mod store;
mod update;

use core::marker::PhantomData;
use core::sync::atomic::{AtomicUsize, Ordering as CounterOrdering};

use kernel::prelude::*;

use crate::platform::{AtomicPtr, Ordering};

pub use balance::BalanceParams;
pub use check::{CheckError, CheckReport};
pub use node::{NodeReserve, RetiredList};

use kernel::processor::CacheAligned;
use node::{load_link, Link, Node, NodeRef, WriteKey};

/// Longest path (in nodes, root to leaf) an update can handle.
///
/// With the default parameters a tree must hold more than 10^8 ranges
/// before its height can exceed this; an update that would go deeper fails
/// with `ERANGE`.  Lookups have no depth limit.
pub const MAX_DEPTH: usize = 64;

/// A proof of being inside an RCU read-side critical section.
///
/// # Safety
///
/// While a value of the implementing type is alive, no [`RetiredList`]
/// filled by a writer section that ended after the value was created is
/// freed: [`RetiredList::free`] is only called after a grace period that
/// waits for every such value to be dropped.  In the kernel the RCU read
/// guard (`rcu_read_lock()` until drop) with `synchronize_rcu()` or
/// `call_rcu()` before freeing satisfies this.
pub unsafe trait ReadSide {}

/// A range found in the tree, with its value.
pub struct Entry<'a, V> {
    /// First address.
    pub start: usize,
    /// One past the last address.
    pub end: usize,
    /// The value.
    pub value: &'a V,
}

impl<V> Clone for Entry<'_, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<V> Copy for Entry<'_, V> {}

impl<V: core::fmt::Debug> core::fmt::Debug for Entry<'_, V> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "[{:#x}, {:#x}) => {:?}",
            self.start, self.end, self.value
        )
    }
}

impl<'a, V> Entry<'a, V> {
    fn of(n: NodeRef<'a, V>) -> Self {
        Self {
            start: n.start(),
            end: n.end(),
            value: n.value(),
        }
    }
}

/// A failed insert: the error and the value, handed back.
pub struct InsertError<V> {
    /// `EINVAL` (empty range), `EEXIST` (overlap), `EAGAIN` (the reserve
    /// holds fewer nodes than the update may need) or `ERANGE` (the
    /// tree is deeper than [`MAX_DEPTH`]).
    pub error: Error,
    /// The value that was not inserted.
    pub value: V,
}

impl<V> From<InsertError<V>> for Error {
    fn from(e: InsertError<V>) -> Error {
        e.error
    }
}

impl<V> core::fmt::Debug for InsertError<V> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "InsertError({:?})", self.error)
    }
}

/// Counters of a tree's updates since it was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Nodes taken from reserves (new leaves, copies, rotated nodes).
    pub allocated: usize,
    /// Nodes handed to retired lists.
    pub retired: usize,
    /// Single rotations.
    pub single_rotations: usize,
    /// Double rotations.
    pub double_rotations: usize,
    /// Child-pointer stores into nodes already in the tree (commits of
    /// rebuilt subtrees, the stores of rotations and those of nodes
    /// rewritten by range stores).
    pub commits: usize,
    /// Stores of the root pointer.
    pub root_stores: usize,
    /// Rebalancing steps skipped because the reserve ran dry.  Always 0
    /// unless the tree's size fields are corrupt.
    pub skipped: usize,
}

#[derive(Default)]
struct Counters {
    allocated: AtomicUsize,
    retired: AtomicUsize,
    single_rotations: AtomicUsize,
    double_rotations: AtomicUsize,
    commits: AtomicUsize,
    root_stores: AtomicUsize,
    skipped: AtomicUsize,
}

/// Adds to a counter only the writer updates (so no read-modify-write).
fn bump(c: &AtomicUsize, n: usize) {
    c.store(
        c.load(CounterOrdering::Relaxed).wrapping_add(n),
        CounterOrdering::Relaxed,
    );
}

/// A Bonsai tree of ranges with values of type `V`.
///
/// Rotations copy nodes, values included, while a lookup may still hold a
/// reference to the old copy.  `V` is therefore `Copy`: plain data or a
/// shared pointer (`&'static T`, a raw pointer).  A `Copy` type has no
/// interior mutability of its own (no `UnsafeCell` outside a pointer) and
/// no destructor, so both copies always read the same and nothing written
/// through one copy can be lost with it.  State that lookups update in
/// place belongs behind a pointer that every copy shares.
pub struct Tree<V: Copy> {
    /// Read by every lookup, so on a cache line that no update stores to
    /// unless it changes the root.
    root: CacheAligned<AtomicPtr<Node<V>>>,
    params: BalanceParams,
    /// Stored to by every update.
    hot: CacheAligned<Hot>,
    _owns: PhantomData<Node<V>>,
}

/// What every update of a [`Tree`] stores to.
struct Hot {
    len: AtomicUsize,
    /// [`Tree::reserve_bound`] for the current length.
    bound: AtomicUsize,
    /// `bound` holds while `2 * len + 16` lies in `bound_lo..bound_hi`;
    /// the writer computes it again when an update takes the length out.
    bound_lo: AtomicUsize,
    bound_hi: AtomicUsize,
    counters: Counters,
}

impl Hot {
    fn new(params: BalanceParams) -> Self {
        let hot = Self {
            len: AtomicUsize::new(0),
            bound: AtomicUsize::new(0),
            bound_lo: AtomicUsize::new(0),
            bound_hi: AtomicUsize::new(0),
            counters: Counters::default(),
        };
        hot.set_len(0, params);
        hot
    }

    /// Records the length (only the writer, or the constructor, calls
    /// this: no read-modify-write needed), and the reserve bound for it
    /// when the last one does not hold any more.
    fn set_len(&self, len: usize, params: BalanceParams) {
        self.len.store(len, CounterOrdering::Relaxed);
        let n = Self::bound_arg(len);
        let get = |a: &AtomicUsize| a.load(CounterOrdering::Relaxed);
        if get(&self.bound_lo) <= n && n < get(&self.bound_hi) {
            return;
        }
        // Heights change at `m(h)`, a few dozen times between 1 and 10^8
        // ranges: almost every update returns above.
        let h = params.max_height(n, MAX_DEPTH);
        let lo = params.min_nodes_of_height(h);
        let hi = if h < MAX_DEPTH {
            params.min_nodes_of_height(h + 1)
        } else {
            usize::MAX
        };
        let set = |a: &AtomicUsize, v| a.store(v, CounterOrdering::Relaxed);
        set(&self.bound, 2 * h + 1);
        set(&self.bound_lo, lo);
        set(&self.bound_hi, hi);
    }

    /// What [`Tree::reserve_bound`] bounds the height of: a tree of twice
    /// `len` nodes, plus 16.
    fn bound_arg(len: usize) -> usize {
        len.saturating_mul(2).saturating_add(16)
    }
}

// SAFETY: the tree owns its nodes and values; sending it sends the values.
unsafe impl<V: Copy + Send> Send for Tree<V> {}
// SAFETY: through `&Tree`, lookups on any thread get `&V`, and writers on
// any thread insert and (via retired lists) drop values.
unsafe impl<V: Copy + Send + Sync> Sync for Tree<V> {}

impl<V: Copy> Default for Tree<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V: Copy> Tree<V> {
    /// Creates an empty tree with the default balance parameters.
    pub fn new() -> Self {
        Self::with_params(BalanceParams::default())
    }

    /// Creates an empty tree with the given balance parameters.
    pub fn with_params(params: BalanceParams) -> Self {
        Self {
            root: CacheAligned(node::null_link()),
            params,
            hot: CacheAligned(Hot::new(params)),
            _owns: PhantomData,
        }
    }

    /// The size of a node, the memory one range costs.
    pub const fn node_size() -> usize {
        core::mem::size_of::<Node<V>>()
    }

    /// The balance parameters.
    pub fn params(&self) -> BalanceParams {
        self.params
    }

    /// Number of ranges (exact under the writer lock, a snapshot without).
    pub fn len(&self) -> usize {
        self.hot.0.len.load(CounterOrdering::Relaxed)
    }

    /// Whether the tree holds no range.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The update counters.
    pub fn stats(&self) -> Stats {
        let c = &self.hot.0.counters;
        let get = |a: &AtomicUsize| a.load(CounterOrdering::Relaxed);
        Stats {
            allocated: get(&c.allocated),
            retired: get(&c.retired),
            single_rotations: get(&c.single_rotations),
            double_rotations: get(&c.double_rotations),
            commits: get(&c.commits),
            root_stores: get(&c.root_stores),
            skipped: get(&c.skipped),
        }
    }

    /// Nodes to put in a [`NodeReserve`] before taking the writer lock so
    /// that one insert or remove cannot fail with `EAGAIN`: `2 * h + 1`,
    /// `h` being the maximal height of a balanced tree of twice the
    /// current size plus 16 (slack for updates that may run between this
    /// call and taking the lock), capped at [`MAX_DEPTH`].
    ///
    /// Exact under the writer lock, a snapshot without (like
    /// [`Tree::len`]).  Kept up to date by the writer, so asking costs a
    /// load.
    pub fn reserve_bound(&self) -> usize {
        self.hot.0.bound.load(CounterOrdering::Relaxed)
    }

    /// The range containing `addr`.
    pub fn find<'a, G: ReadSide>(&'a self, _guard: &'a G, addr: usize) -> Option<Entry<'a, V>> {
        // SAFETY: `_guard` proves an RCU read-side section for `'a`.
        find_in(unsafe { load_link(&self.root.0) }, addr)
    }

    /// The lowest range that ends after `addr`: the one containing `addr`
    /// or else the first one above it (as `find_vma()`).
    pub fn find_from<'a, G: ReadSide>(
        &'a self,
        _guard: &'a G,
        addr: usize,
    ) -> Option<Entry<'a, V>> {
        // SAFETY: `_guard` proves an RCU read-side section for `'a`.
        find_from_in(unsafe { load_link(&self.root.0) }, addr)
    }

    /// Iterates over the ranges in address order.
    ///
    /// Every step is a fresh [`Tree::find_from`] from the end of the last
    /// range returned, so the iteration is robust to concurrent updates:
    /// ranges come out with strictly increasing ends, and every range
    /// present for the whole iteration comes out.  Against inserts and
    /// removes the starts increase too; a concurrent range store (which
    /// trims and rewrites ranges) may make a range come out that overlaps
    /// the one before, one from before the store and one from after it.
    /// A step costs `O(log n)`.
    pub fn iter<'a, G: ReadSide>(&'a self, _guard: &'a G) -> Iter<'a, V> {
        // INVARIANT: `_guard` proves an RCU read-side section for `'a`.
        Iter {
            root: &self.root.0,
            next: Some(0),
            _life: PhantomData,
        }
    }

    /// Starts an update.
    ///
    /// # Safety
    ///
    /// The caller holds this tree's writer lock until the returned
    /// [`Writer`] is dropped (so no other writer exists meanwhile).
    pub unsafe fn writer<'a>(
        &'a self,
        reserve: &'a mut NodeReserve<V>,
        retired: &'a mut RetiredList<V>,
    ) -> Writer<'a, V> {
        Writer {
            tree: self,
            reserve,
            retired,
            // SAFETY: the caller holds the writer lock while the writer, and
            // so the key, lives.
            key: unsafe { WriteKey::new() },
        }
    }
}

impl<V: Copy> Drop for Tree<V> {
    fn drop(&mut self) {
        // SAFETY: `&mut self` means no lookup or writer holds the tree; the
        // owner must not drop it before a grace period has passed since
        // lookups could last reach it.
        unsafe { node::free_tree(self.root.0.load(Ordering::Relaxed)) };
    }
}

fn find_in<V>(mut cur: Link<'_, V>, addr: usize) -> Option<Entry<'_, V>> {
    while let Some(n) = cur {
        if addr < n.start() {
            cur = n.child(node::Dir::Left);
        } else if addr >= n.end() {
            cur = n.child(node::Dir::Right);
        } else {
            return Some(Entry::of(n));
        }
    }
    None
}

fn find_from_in<V>(mut cur: Link<'_, V>, addr: usize) -> Option<Entry<'_, V>> {
    let mut best = None;
    while let Some(n) = cur {
        if addr < n.end() {
            best = Some(n);
            if addr >= n.start() {
                break;
            }
            cur = n.child(node::Dir::Left);
        } else {
            cur = n.child(node::Dir::Right);
        }
    }
    best.map(Entry::of)
}

/// Iterator over the ranges of a tree, in address order; see
/// [`Tree::iter`].
///
/// # Invariants
///
/// An RCU read-side section or the writer lock covers `'a`.
pub struct Iter<'a, V> {
    root: &'a AtomicPtr<Node<V>>,
    next: Option<usize>,
    _life: PhantomData<&'a V>,
}

impl<'a, V> Iterator for Iter<'a, V> {
    type Item = Entry<'a, V>;

    fn next(&mut self) -> Option<Entry<'a, V>> {
        let addr = self.next?;
        // SAFETY: by the type invariant the section covers `'a`.
        let e = find_from_in(unsafe { load_link(self.root) }, addr);
        // `end` of the range found is above `addr`: progress is strict, and
        // nothing ends above `usize::MAX`, which ends the iteration.
        self.next = e.map(|e| e.end);
        e
    }
}

/// The writer side of a tree, alive while the caller holds the writer
/// lock; see [`Tree::writer`].
pub struct Writer<'a, V: Copy> {
    tree: &'a Tree<V>,
    reserve: &'a mut NodeReserve<V>,
    retired: &'a mut RetiredList<V>,
    key: WriteKey,
}

impl<'a, V: Copy> Writer<'a, V> {
    /// The tree.
    pub fn tree(&self) -> &'a Tree<V> {
        self.tree
    }

    /// Nodes left in the reserve.
    pub fn reserve_len(&self) -> usize {
        self.reserve.len()
    }

    fn root<'n>(&self) -> Link<'n, V> {
        // SAFETY: the writer lock is held while `self` lives, and no node
        // reachable now is freed before the retired list borrowed by `self`
        // is freed, which needs `self` gone; callers keep the result within
        // their use of `self`.
        unsafe { load_link(&self.tree.root.0) }
    }

    /// The range containing `addr`.
    pub fn find(&self, addr: usize) -> Option<Entry<'_, V>> {
        find_in(self.root(), addr)
    }

    /// The lowest range that ends after `addr`; see [`Tree::find_from`].
    pub fn find_from(&self, addr: usize) -> Option<Entry<'_, V>> {
        find_from_in(self.root(), addr)
    }

    /// Iterates over the ranges in address order.
    pub fn iter(&self) -> Iter<'_, V> {
        // INVARIANT: the writer lock is held while `self` is borrowed.
        Iter {
            root: &self.tree.root.0,
            next: Some(0),
            _life: PhantomData,
        }
    }
}
