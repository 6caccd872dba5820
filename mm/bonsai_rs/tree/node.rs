// SPDX-License-Identifier: GPL-2.0

//! Tree nodes, the node reserve and the retired-node list.
//!
//! This module holds all the `unsafe` code of the tree.  Its rules:
//!
//! * A node is allocated by [`NodeReserve`] (as a `KBox<MaybeUninit<_>>`
//!   turned into a raw pointer), linked into a tree, and freed only by
//!   [`RetiredList::free`] (after an RCU grace period) or by the tree's
//!   destructor (when nobody can look at the tree any more).
//! * A [`NodeRef<'a, V>`] is a pointer to a node that stays allocated for
//!   `'a`.  Every `NodeRef` comes from a tree link loaded by
//!   [`load_link`], whose caller promises that either an RCU read-side
//!   critical section or the writer lock covers `'a`, or from the reserve
//!   (a node no one else can free yet); the children of such a node are
//!   allocated for as long as it is, so [`NodeRef::child`] is safe.
//! * A node's range and value never change once it is linked (a store
//!   that trims or rewrites a range links a new node in its place).  Its
//!   child links change only by release stores, and only in ways that keep
//!   every key a lookup can be looking for below that link (the rules are
//!   in the parent module).  Its `meta` cell is touched by the writer only.
//! * A value is copied from a node to its replacement by
//!   [`NodeReserve::replace`], which retires the old node as a *husk*.
//!   Values of a tree are `Copy` (see [`Tree`](super::Tree)): lookups that
//!   still hold the old node read an equal value, and, the type having no
//!   interior mutability of its own, nothing can change either copy.

use core::cell::UnsafeCell;
use core::marker::PhantomData;
use core::mem::{ManuallyDrop, MaybeUninit};
use core::ptr::{self, NonNull};

use kernel::alloc::Flags;
use kernel::prelude::*;
use kernel::processor::CacheAligned;

use crate::platform::{self, AtomicPtr, Ordering};

/// Which child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dir {
    Left,
    Right,
}

impl Dir {
    /// The other side.
    pub(crate) fn opp(self) -> Self {
        match self {
            Dir::Left => Dir::Right,
            Dir::Right => Dir::Left,
        }
    }
}

/// Writer-only node state: the subtree size while the node is in a tree,
/// the next-pointer of a [`RetiredList`] once it is retired.
union Meta<V> {
    size: usize,
    next: *mut Node<V>,
}

/// A tree node: one range `[start, end)` and its value, which lookups
/// read, and the writer's `meta`, on a cache line of its own.
///
/// An update stores a new size into every node on its path, the root
/// included.  Sharing a line with the fields lookups read, those stores
/// would take the top levels of the tree, which every lookup reads, out
/// of the cache of every CPU running lookups, after every update.  Apart,
/// they stay in the writer's cache, and an update dirties only the lines
/// of the few nodes whose child pointers it changes; the price is a node
/// of two lines (128 bytes, with a value of up to 24 bytes) instead of
/// one.
#[repr(C)]
pub(crate) struct Node<V> {
    left: AtomicPtr<Node<V>>,
    right: AtomicPtr<Node<V>>,
    start: usize,
    end: usize,
    value: ManuallyDrop<V>,
    meta: CacheAligned<UnsafeCell<Meta<V>>>,
}

// The fields lookups read come first (`repr(C)`), so the line-aligned
// `meta` starts past them, on a line they do not touch.
const _: () = assert!(core::mem::offset_of!(Node<usize>, meta) >= 64);

/// A reference to a node that stays allocated for `'a` (see the module
/// documentation for how this is guaranteed).
///
/// # Invariants
///
/// `ptr` points to an initialised [`Node`] that is not freed during `'a`.
pub(crate) struct NodeRef<'a, V> {
    ptr: NonNull<Node<V>>,
    _life: PhantomData<&'a Node<V>>,
}

impl<V> Clone for NodeRef<'_, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<V> Copy for NodeRef<'_, V> {}

/// An optional child: `None` is the empty tree.
pub(crate) type Link<'a, V> = Option<NodeRef<'a, V>>;

/// Proof that the caller is the tree's only writer.
///
/// Only [`WriteKey::new`], an `unsafe fn`, makes one; writer-only node
/// state is accessed through it.
pub(crate) struct WriteKey {
    _not_send: PhantomData<*mut ()>,
}

impl WriteKey {
    /// Creates the key.
    ///
    /// # Safety
    ///
    /// The caller holds the writer lock of the tree whose nodes the key is
    /// used on, for as long as the key lives.
    pub(crate) unsafe fn new() -> Self {
        Self {
            _not_send: PhantomData,
        }
    }
}

fn raw<V>(link: Link<'_, V>) -> *mut Node<V> {
    link.map_or(ptr::null_mut(), |n| n.ptr.as_ptr())
}

/// Loads a tree link (the root pointer or a child pointer) with acquire
/// ordering, so that the node it points to is seen fully initialised.
///
/// # Safety
///
/// `link` belongs to a tree, and for all of `'a` the caller is inside an
/// RCU read-side critical section (which delays [`RetiredList::free`] of
/// every node retired from now on) or holds the tree's writer lock
/// (under which nothing reachable is retired without being kept in a
/// list the caller frees later).
pub(crate) unsafe fn load_link<'a, V>(link: &AtomicPtr<Node<V>>) -> Link<'a, V> {
    // INVARIANT: per the contract, a node reachable from the tree is not
    // freed during `'a`; a non-null link always points to an initialised
    // node, published by a release store that this acquire load pairs with.
    NonNull::new(link.load(Ordering::Acquire)).map(|ptr| NodeRef {
        ptr,
        _life: PhantomData,
    })
}

/// Stores a tree link with release ordering, publishing the subtree.
pub(crate) fn store_link<V>(link: &AtomicPtr<Node<V>>, to: Link<'_, V>, _key: &WriteKey) {
    link.store(raw(to), Ordering::Release);
}

/// A null tree link.
pub(crate) fn null_link<V>() -> AtomicPtr<Node<V>> {
    AtomicPtr::new(ptr::null_mut())
}

impl<'a, V> NodeRef<'a, V> {
    fn node(self) -> &'a Node<V> {
        // SAFETY: by the type invariant the node is valid for `'a`; only
        // shared references to a linked node are ever made.
        unsafe { self.ptr.as_ref() }
    }

    /// First address of the range.
    pub(crate) fn start(self) -> usize {
        self.node().start
    }

    /// One past the last address of the range.
    pub(crate) fn end(self) -> usize {
        self.node().end
    }

    /// The value.
    pub(crate) fn value(self) -> &'a V {
        &self.node().value
    }

    fn link(self, dir: Dir) -> &'a AtomicPtr<Node<V>> {
        match dir {
            Dir::Left => &self.node().left,
            Dir::Right => &self.node().right,
        }
    }

    /// The child on side `dir`, loaded with acquire ordering.
    pub(crate) fn child(self, dir: Dir) -> Link<'a, V> {
        // SAFETY: by the type invariant `self` stays allocated for `'a`,
        // which the caller of `load_link` (or the reserve) guaranteed for
        // the whole tree reachable from it.
        unsafe { load_link(self.link(dir)) }
    }

    /// The size of the subtree, as recorded by the writer.
    pub(crate) fn size(self, _key: &WriteKey) -> usize {
        // SAFETY: the key proves the caller is the only writer, and readers
        // never touch `meta`, so there is no concurrent access.  A node in
        // a tree (or fresh from the reserve) holds its size in `meta`.
        unsafe { (*self.node().meta.0.get()).size }
    }

    /// Records the size of the subtree.
    pub(crate) fn set_size(self, size: usize, _key: &WriteKey) {
        // SAFETY: as in `size`: the writer is the only one to access `meta`.
        unsafe { (*self.node().meta.0.get()).size = size };
    }

    /// Replaces the child on side `dir` with a release store, publishing
    /// `to` to lookups that reach this node.
    pub(crate) fn set_child(self, dir: Dir, to: Link<'_, V>, key: &WriteKey) {
        store_link(self.link(dir), to, key);
    }
}

/// The size of an optional subtree.
pub(crate) fn size_of<V>(link: Link<'_, V>, key: &WriteKey) -> usize {
    link.map_or(0, |n| n.size(key))
}

type Slot<V> = MaybeUninit<Node<V>>;

/// Nodes allocated ahead of an update, so that the update itself never
/// allocates (it may run under a spinlock) and never fails half-way.
///
/// Fill it with [`NodeReserve::fill`] before taking the writer lock; keep
/// it across updates so that, in the steady state, it allocates only what
/// the updates consumed.  Dropping it frees the nodes left in it.
pub struct NodeReserve<V> {
    /// Singly linked list of free slots; each slot's first word holds the
    /// next slot's pointer.
    head: *mut Slot<V>,
    len: usize,
    _owns: PhantomData<KBox<Slot<V>>>,
}

// SAFETY: the reserve owns its slots, which hold no value.
unsafe impl<V> Send for NodeReserve<V> {}
// SAFETY: `&NodeReserve` only allows reading `len`.
unsafe impl<V> Sync for NodeReserve<V> {}

impl<V> Default for NodeReserve<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V> NodeReserve<V> {
    /// Creates an empty reserve.
    pub const fn new() -> Self {
        Self {
            head: ptr::null_mut(),
            len: 0,
            _owns: PhantomData,
        }
    }

    /// Nodes held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no node is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn push_slot(&mut self, slot: NonNull<Slot<V>>) {
        // SAFETY: `slot` is an owned, unused slot, large and aligned enough
        // for a pointer (a node starts with two pointers).
        unsafe { slot.cast::<*mut Slot<V>>().as_ptr().write(self.head) };
        self.head = slot.as_ptr();
        self.len += 1;
    }

    fn pop_slot(&mut self) -> Option<NonNull<Slot<V>>> {
        let slot = NonNull::new(self.head)?;
        // SAFETY: `slot` is a free slot of this list; `push_slot` wrote the
        // next pointer in its first word.
        self.head = unsafe { slot.cast::<*mut Slot<V>>().as_ptr().read() };
        self.len -= 1;
        Some(slot)
    }

    /// Allocates nodes until at least `target` are held.
    ///
    /// On failure returns `ENOMEM`; the nodes allocated so far stay in the
    /// reserve (and are freed with it).
    pub fn fill(&mut self, target: usize, flags: Flags) -> Result {
        while self.len < target {
            if platform::inject_alloc_failure() {
                return Err(ENOMEM);
            }
            let slot = KBox::<Node<V>>::new_uninit(flags).map_err(|_| ENOMEM)?;
            platform::node_allocated();
            let slot = KBox::into_raw(slot);
            // `into_raw` never returns null; skip the node if it did.
            if let Some(slot) = NonNull::new(slot) {
                self.push_slot(slot);
            }
        }
        Ok(())
    }

    /// Frees nodes until at most `keep` are held.
    pub fn trim(&mut self, keep: usize) {
        while self.len > keep {
            if let Some(slot) = self.pop_slot() {
                // SAFETY: the slot came from `KBox::into_raw` in `fill` and is
                // owned by the reserve; its contents are uninitialised, so
                // dropping the `MaybeUninit` box only frees memory.
                drop(unsafe { KBox::from_raw(slot.as_ptr()) });
                platform::node_freed();
            }
        }
    }

    /// Moves every node of `other` into `self`.
    ///
    /// Lets a caller fill a reserve of its own without holding the writer
    /// lock and hand the nodes to the reserve kept under the lock.
    pub fn append(&mut self, other: &mut Self) {
        while let Some(slot) = other.pop_slot() {
            self.push_slot(slot);
        }
    }

    fn make<'a>(
        &mut self,
        start: usize,
        end: usize,
        value: V,
        left: Link<'a, V>,
        right: Link<'a, V>,
        size: usize,
    ) -> core::result::Result<NodeRef<'a, V>, V> {
        let Some(slot) = self.pop_slot() else {
            return Err(value);
        };
        let node = Node {
            left: AtomicPtr::new(raw(left)),
            right: AtomicPtr::new(raw(right)),
            start,
            end,
            value: ManuallyDrop::new(value),
            meta: CacheAligned(UnsafeCell::new(Meta { size })),
        };
        // SAFETY: `slot` is an owned, unused slot: nobody else can see it.
        unsafe { slot.as_ptr().write(MaybeUninit::new(node)) };
        // INVARIANT: the node is initialised and owned by no tree yet; it is
        // freed only through a `RetiredList` or the tree's destructor, whose
        // contracts cover `'a`.
        Ok(NodeRef {
            ptr: slot.cast::<Node<V>>(),
            _life: PhantomData,
        })
    }

    /// Takes a node for a new range; gives the value back if the reserve
    /// is empty.
    pub(crate) fn alloc<'a>(
        &mut self,
        start: usize,
        end: usize,
        value: V,
        size: usize,
        _key: &WriteKey,
    ) -> core::result::Result<NodeRef<'a, V>, V> {
        self.make(start, end, value, None, None, size)
    }

    /// Takes a node for a new range with the given children and subtree
    /// size (a tree built bottom-up); gives the value back if the reserve
    /// is empty.
    pub(crate) fn alloc_with<'a>(
        &mut self,
        (start, end): (usize, usize),
        value: V,
        (left, right): (Link<'a, V>, Link<'a, V>),
        size: usize,
        _key: &WriteKey,
    ) -> core::result::Result<NodeRef<'a, V>, V> {
        self.make(start, end, value, left, right, size)
    }

    /// Takes a node that replaces `old`: same range, a copy of `old`'s
    /// value, the given children and size.  `old` goes to `retired` as a
    /// husk.
    ///
    /// Returns `None`, changing nothing, if the reserve is empty.
    pub(crate) fn replace<'a>(
        &mut self,
        old: NodeRef<'a, V>,
        left: Link<'a, V>,
        right: Link<'a, V>,
        size: usize,
        retired: &mut RetiredList<V>,
        key: &WriteKey,
    ) -> Option<NodeRef<'a, V>>
    where
        V: Copy,
    {
        // A plain copy: lookups that hold `old` keep reading its value,
        // equal to the new one and, `V` being `Copy`, never changed in place.
        let value = *old.value();
        let new = self
            .make(old.start(), old.end(), value, left, right, size)
            .ok()?;
        retired.push(old, Fate::Husk, key);
        Some(new)
    }

    /// Takes a node that takes `old`'s place with range `[start, end)`
    /// and `value`, keeping `old`'s children and size.  `old` goes to
    /// `retired`, as a husk if `value` is a copy of its value (`same`),
    /// else as the owner of its value.
    ///
    /// The caller publishes the new node where `old` was linked; that is
    /// safe for lookups only if the new range keeps the tree's order there
    /// (see the rewrite store in the parent module).  Gives the value back,
    /// changing nothing, if the reserve is empty.
    pub(crate) fn rewrite<'a>(
        &mut self,
        old: NodeRef<'a, V>,
        (start, end): (usize, usize),
        value: V,
        same: bool,
        retired: &mut RetiredList<V>,
        key: &WriteKey,
    ) -> core::result::Result<NodeRef<'a, V>, V> {
        let left = old.child(Dir::Left);
        let right = old.child(Dir::Right);
        let new = self.make(start, end, value, left, right, old.size(key))?;
        let fate = if same { Fate::Husk } else { Fate::Owner };
        retired.push(old, fate, key);
        Ok(new)
    }
}

impl<V> Drop for NodeReserve<V> {
    fn drop(&mut self) {
        self.trim(0);
    }
}

/// What freeing a retired node does with its value.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    /// The value was moved to a replacement node: only free the memory.
    Husk,
    /// The node still owns its value: drop it, then free the memory.
    Owner,
}

/// Nodes unlinked from a tree, to be freed after an RCU grace period.
///
/// Writers add every node they replace or remove.  Lookups that started
/// before the update may still be reading these nodes, so the list must
/// be freed (with [`RetiredList::free`]) only after a grace period, for
/// example with `synchronize_rcu()` or from an RCU callback.  Dropping a
/// non-empty list leaks its nodes.
///
/// The list is intrusive (it links the nodes through their writer-only
/// state), so retiring never allocates.
pub struct RetiredList<V> {
    husks: *mut Node<V>,
    owners: *mut Node<V>,
    len: usize,
}

// SAFETY: the list owns its nodes; freeing an owner drops a `V`, which may
// happen on another thread when `V: Send`.
unsafe impl<V: Send> Send for RetiredList<V> {}
// SAFETY: `&RetiredList` only allows reading `len`.
unsafe impl<V> Sync for RetiredList<V> {}

impl<V> Default for RetiredList<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V> RetiredList<V> {
    /// Creates an empty list.
    pub const fn new() -> Self {
        Self {
            husks: ptr::null_mut(),
            owners: ptr::null_mut(),
            len: 0,
        }
    }

    /// Nodes held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no node is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds a node that is (or, by the end of the current update, will
    /// be) unreachable from its tree.
    pub(crate) fn push(&mut self, node: NodeRef<'_, V>, fate: Fate, _key: &WriteKey) {
        let head = match fate {
            Fate::Husk => &mut self.husks,
            Fate::Owner => &mut self.owners,
        };
        // SAFETY: the key proves the caller is the only writer and readers
        // never touch `meta`; from now on `meta` holds the list link and the
        // writer no longer reads the node's size.
        unsafe { (*node.node().meta.0.get()).next = *head };
        *head = node.ptr.as_ptr();
        self.len += 1;
    }

    /// Moves every node of `other` into `self`.
    pub fn append(&mut self, other: &mut Self) {
        // SAFETY: both lists own their nodes exclusively; the nodes move
        // from `other` to `self` unchanged.
        unsafe {
            Self::splice(&mut self.husks, &mut other.husks);
            Self::splice(&mut self.owners, &mut other.owners);
        }
        self.len += other.len;
        other.len = 0;
    }

    /// # Safety
    ///
    /// `to` and `from` are heads of two disjoint retired chains.
    unsafe fn splice(to: &mut *mut Node<V>, from: &mut *mut Node<V>) {
        if from.is_null() {
            return;
        }
        let mut last = *from;
        // SAFETY: every node of a chain is a retired, allocated node whose
        // `meta` holds the link to the next one.
        unsafe {
            while !(*(*last).meta.0.get()).next.is_null() {
                last = (*(*last).meta.0.get()).next;
            }
            (*(*last).meta.0.get()).next = *to;
        }
        *to = *from;
        *from = ptr::null_mut();
    }

    /// Frees every node: owners drop their values, husks do not.
    ///
    /// # Safety
    ///
    /// A full RCU grace period has elapsed since the end of every update
    /// (writer section) that put nodes in this list: no lookup can still
    /// hold any of them.
    pub unsafe fn free(mut self) {
        // SAFETY: per the contract nobody can reach these nodes any more.
        unsafe {
            free_chain(self.husks, Fate::Husk);
            free_chain(self.owners, Fate::Owner);
        }
        self.husks = ptr::null_mut();
        self.owners = ptr::null_mut();
        self.len = 0;
    }
}

/// Frees a chain of retired nodes.
///
/// # Safety
///
/// Every node of the chain is retired, allocated by a [`NodeReserve`] and
/// reachable by nobody; with `Fate::Owner` each still owns its value.
unsafe fn free_chain<V>(mut p: *mut Node<V>, fate: Fate) {
    while !p.is_null() {
        // SAFETY: per the contract `p` is an allocated retired node.
        let next = unsafe { (*(*p).meta.0.get()).next };
        // SAFETY: per the contract nobody else refers to `p`.
        unsafe { free_node(p, fate) };
        p = next;
    }
}

/// Frees one node.
///
/// # Safety
///
/// `p` was allocated by a [`NodeReserve`], is initialised and reachable by
/// nobody; with `Fate::Owner` it still owns its value.
unsafe fn free_node<V>(p: *mut Node<V>, fate: Fate) {
    if fate == Fate::Owner {
        // SAFETY: the node owns its value and nobody else refers to it.
        unsafe { ManuallyDrop::drop(&mut (*p).value) };
    }
    // SAFETY: `p` came from `KBox::<MaybeUninit<Node<V>>>::into_raw` (in
    // `NodeReserve::fill`); `MaybeUninit` has no drop glue, so this frees
    // the memory only.
    drop(unsafe { KBox::from_raw(p.cast::<Slot<V>>()) });
    platform::node_freed();
}

/// Frees every node of the tree at `root`, dropping their values, without
/// recursion: left children are rotated up until the root has none.
///
/// # Safety
///
/// The nodes of the tree are reachable by nobody else: no lookup, no
/// writer, no other tree.
pub(crate) unsafe fn free_tree<V>(root: *mut Node<V>) {
    let mut p = root;
    while !p.is_null() {
        // SAFETY: `p` is a node of the tree, owned by the caller alone.
        let node = unsafe { &*p };
        let left = node.left.load(Ordering::Relaxed);
        if left.is_null() {
            let right = node.right.load(Ordering::Relaxed);
            // SAFETY: `p` is owned by the caller and no longer referenced.
            unsafe { free_node(p, Fate::Owner) };
            p = right;
        } else {
            // Rotate right: `left` becomes the root of the rest.
            // SAFETY: `left` is a node of the tree, owned by the caller.
            let l = unsafe { &*left };
            node.left
                .store(l.right.load(Ordering::Relaxed), Ordering::Relaxed);
            l.right.store(p, Ordering::Relaxed);
            p = left;
        }
    }
}
