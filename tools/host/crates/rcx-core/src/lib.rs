// SPDX-License-Identifier: GPL-2.0

//! Host model of the RCX update protocol of `mm/rcx_rs/rcx.rs`.
//!
//! Each [`Item`] has one lock word per node and a global lock: it stands
//! for one of the kernel's lock slots, which an update may name more than
//! once (two of its items in one slot).  An update
//! ([`update`]) names its items; phase 1 wins the updater's node word on
//! every one of them, either by the ordered atomic fallback (address
//! order, spinning) or by an emulated transaction (all words or none,
//! aborting when one is taken, then retrying); phase 2 takes the global
//! locks in address order, runs the critical section and releases
//! everything.  This is the kernel crate's `Rcx::attempt` with the
//! kernel's spinlock and preemption control replaced by atomics.
//!
//! Under `--cfg loom` the atomics are loom's, and `tests/loom.rs` checks
//! mutual exclusion on each item and the absence of deadlock:
//! `RUSTFLAGS="--cfg loom" cargo test --release -p rcx-core --test loom`.

#![deny(unsafe_code)]
#![warn(missing_docs, rust_2018_idioms, unreachable_pub, clippy::all)]

/// The atomics and spin hint: `std`'s, or `loom`'s under `--cfg loom`.
mod platform {
    #[cfg(loom)]
    pub(crate) use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    #[cfg(not(loom))]
    pub(crate) use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// Called in every spin loop; loom must be told to switch threads.
    pub(crate) fn spin() {
        #[cfg(loom)]
        loom::thread::yield_now();
        #[cfg(not(loom))]
        std::hint::spin_loop();
    }
}

use platform::{spin, AtomicBool, AtomicUsize, Ordering};

/// Nodes of the model.
pub const NODES: usize = 2;

/// An RCX item: one lock word per node and the global lock.  `inside`
/// counts updaters in their critical section on the item, for the checks.
#[derive(Debug)]
pub struct Item {
    words: [AtomicUsize; NODES],
    global: AtomicBool,
    inside: AtomicUsize,
}

impl Default for Item {
    fn default() -> Self {
        Self::new()
    }
}

impl Item {
    /// Returns an item with every lock free.
    pub fn new() -> Self {
        Self {
            words: std::array::from_fn(|_| AtomicUsize::new(0)),
            global: AtomicBool::new(false),
            inside: AtomicUsize::new(0),
        }
    }

    fn try_word(&self, node: usize, token: usize) -> bool {
        self.words[node]
            .compare_exchange(0, token, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    fn unlock_word(&self, node: usize) {
        self.words[node].store(0, Ordering::Release);
    }

    fn word_taken(&self, node: usize) -> bool {
        self.words[node].load(Ordering::Relaxed) != 0
    }

    fn lock_global(&self) {
        while self
            .global
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spin();
        }
    }

    fn try_global(&self) -> bool {
        self.global
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    fn unlock_global(&self) {
        self.global.store(false, Ordering::Release);
    }

    /// Returns whether every lock of the item is free.
    pub fn is_free(&self) -> bool {
        !self.global.load(Ordering::Relaxed) && (0..NODES).all(|n| !self.word_taken(n))
    }
}

/// How phase 1 wins the node words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase1 {
    /// Ordered atomic acquisition, spinning on each word.
    Fallback,
    /// All-or-nothing, as a transaction: abort (release what was taken)
    /// if a word is taken, and retry the whole attempt.
    Emulated,
}

/// Phase-1 aborts of an update.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Aborts {
    /// A word was seen taken before the writes (explicit abort).
    pub explicit: usize,
    /// A word was taken between the check and the write (conflict).
    pub conflict: usize,
}

fn phase1(items: &[&Item], node: usize, token: usize, how: Phase1, ab: &mut Aborts) -> bool {
    match how {
        Phase1::Fallback => {
            for it in items {
                while !it.try_word(node, token) {
                    spin();
                }
            }
            true
        }
        Phase1::Emulated => {
            if items.iter().any(|it| it.word_taken(node)) {
                ab.explicit += 1;
                return false;
            }
            for (i, it) in items.iter().enumerate() {
                if !it.try_word(node, token) {
                    for g in &items[..i] {
                        g.unlock_word(node);
                    }
                    ab.conflict += 1;
                    return false;
                }
            }
            true
        }
    }
}

/// Sorts `items` by address and drops the repeats: the distinct items, in
/// the order their locks are taken.
fn distinct<'a, 'b>(items: &'a mut [&'b Item]) -> &'a [&'b Item] {
    items.sort_unstable_by_key(|it| *it as *const Item as usize);
    let mut n = 0;
    for i in 0..items.len() {
        if n == 0 || !std::ptr::eq(items[i], items[n - 1]) {
            items[n] = items[i];
            n += 1;
        }
    }
    &items[..n]
}

/// Runs one update on `items` for the updater `token` (non-zero) on
/// `node`: phase 1 as `how` says, then the global locks in address order,
/// then `critical`, retrying phase 1 until it wins.  An item named twice
/// is locked once, as the kernel's lock slots are when two items of an
/// update hash to one slot.  Panics if another updater is in its critical
/// section on one of the items.
pub fn update(
    items: &mut [&Item],
    node: usize,
    token: usize,
    how: Phase1,
    critical: impl FnOnce(),
) -> Aborts {
    let items = distinct(items);
    contended(items, node, token, how, critical)
}

/// Runs one update as the kernel's `Rcx::attempt` does by default: takes
/// the global locks at once if they are all free (a failed try releases
/// what it took), and only otherwise goes through [`update`]'s phase 1.
/// Returns the phase-1 aborts and whether the update skipped phase 1.
pub fn update_try_globals_first(
    items: &mut [&Item],
    node: usize,
    token: usize,
    how: Phase1,
    critical: impl FnOnce(),
) -> (Aborts, bool) {
    let items = distinct(items);
    for (i, it) in items.iter().enumerate() {
        if !it.try_global() {
            for g in items[..i].iter().rev() {
                g.unlock_global();
            }
            return (contended(items, node, token, how, critical), false);
        }
    }
    exclusive(items, critical);
    for it in items.iter().rev() {
        it.unlock_global();
    }
    (Aborts::default(), true)
}

/// Phase 1 on the distinct `items`, their global locks, `critical`, and
/// every release.
fn contended(
    items: &[&Item],
    node: usize,
    token: usize,
    how: Phase1,
    critical: impl FnOnce(),
) -> Aborts {
    let mut ab = Aborts::default();
    while !phase1(items, node, token, how, &mut ab) {
        spin();
    }
    for it in items.iter() {
        it.lock_global();
    }
    exclusive(items, critical);
    for it in items.iter().rev() {
        it.unlock_global();
    }
    for it in items.iter() {
        it.unlock_word(node);
    }
    ab
}

/// Runs `critical`, with the global locks of `items` held, checking that
/// no other updater is inside on any of them.
fn exclusive(items: &[&Item], critical: impl FnOnce()) {
    for it in items.iter() {
        assert_eq!(
            it.inside.fetch_add(1, Ordering::Relaxed),
            0,
            "two updaters on one item"
        );
    }
    critical();
    for it in items.iter() {
        it.inside.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Threads on two nodes hammer overlapping item sets, some naming an
    /// item twice, in both phase-1 modes, some trying the global locks
    /// first: updates of one item never overlap, and all locks end free.
    #[test]
    fn threads_never_overlap() {
        let items: Arc<Vec<Item>> = Arc::new((0..4).map(|_| Item::new()).collect());
        let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let hs: Vec<_> = (0..6)
            .map(|t| {
                let items = items.clone();
                let count = count.clone();
                std::thread::spawn(move || {
                    for i in 0..5000usize {
                        let a = (t + i) % 4;
                        let b = (t + 2 * i + 1) % 4;
                        // `b` may equal `a`: the item is named twice.
                        let mut set: Vec<&Item> = vec![&items[a], &items[b]];
                        let how = if t % 2 == 0 {
                            Phase1::Fallback
                        } else {
                            Phase1::Emulated
                        };
                        let bump = || {
                            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        };
                        // Every third thread tries the global locks first.
                        if t % 3 == 0 {
                            update_try_globals_first(&mut set, t % NODES, t + 1, how, bump);
                        } else {
                            update(&mut set, t % NODES, t + 1, how, bump);
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(count.load(std::sync::atomic::Ordering::Relaxed), 30000);
        assert!(items.iter().all(Item::is_free));
    }
}

/// The constants and options of the kernel this crate mirrors, from the
/// configured kernel tree when there is one (see `build.rs`).
pub mod kernel_config {
    include!(concat!(env!("OUT_DIR"), "/kernel_config.rs"));
}
