// SPDX-License-Identifier: GPL-2.0

//! The RCX hash table: a fixed number of buckets, each an RCX sorted list,
//! sharing one update side ([`Rcx`]) and so one set of counters.

use kernel::{
    delay::MaySleep,
    prelude::*,
    sync::rcu::{self, AtomicDrop},
};

use crate::{
    list::{ListCore, KEY_LIMIT},
    Mode, Rcx, Stats,
};

/// Returns the bucket of `key` among `n` (Fibonacci hashing).
pub fn bucket_of(key: u64, n: usize) -> usize {
    ((key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) % n as u64) as usize
}

/// An RCX-protected hash table of `u64` keys below [`KEY_LIMIT`], each
/// with a value (see [`crate::list::RcxList`]).
pub struct RcxHash<V: Send + Sync + AtomicDrop + Default + 'static = ()> {
    rcx: Rcx,
    buckets: KVec<ListCore<V>>,
}

impl<V: Send + Sync + AtomicDrop + Default + 'static> RcxHash<V> {
    /// Returns an empty table of `buckets` buckets (at least one).
    pub fn new(mode: Mode, buckets: usize) -> Result<Self> {
        Self::with_rcx(Rcx::new(mode)?, buckets)
    }

    /// Returns an empty table whose updates go through `rcx` (tests pass
    /// one with few lock slots).
    pub(crate) fn with_rcx(rcx: Rcx, buckets: usize) -> Result<Self> {
        if buckets == 0 {
            return Err(EINVAL);
        }
        let mut v = KVec::with_capacity(buckets, GFP_KERNEL)?;
        for _ in 0..buckets {
            v.push(ListCore::new()?, GFP_KERNEL)?;
        }
        Ok(Self { rcx, buckets: v })
    }

    fn bucket(&self, key: u64) -> &ListCore<V> {
        &self.buckets[bucket_of(key, self.buckets.len())]
    }

    /// Returns the number of buckets.
    pub fn buckets(&self) -> usize {
        self.buckets.len()
    }

    /// Returns whether `key` is in the table (a plain RCU reader).
    pub fn contains(&self, key: u64) -> bool {
        // The tail's key is in no bucket: the read-side section is left to
        // the walk (see the benchmark section of Documentation/mm/rcx.rst).
        if key == KEY_LIMIT {
            return false;
        }
        let bucket = self.bucket(key);
        // SAFETY: no code of the caller runs under the guard, and the
        // lookup does not sleep.
        let guard = unsafe { rcu::Guard::new_unchecked() };
        bucket.get(key, &guard).is_some()
    }

    /// Calls `f` with `key`'s value if the key is in the table, inside an
    /// RCU read-side section, which borrows `ctx`: `f` cannot sleep through
    /// the token.
    pub fn with_value<R>(
        &self,
        ctx: &mut MaySleep,
        key: u64,
        f: impl FnOnce(&V) -> R,
    ) -> Option<R> {
        let bucket = self.bucket(key);
        let guard = rcu::read_lock(ctx);
        bucket.get(key, &guard).map(f)
    }

    /// Inserts `key`: `Ok(true)` if inserted, `Ok(false)` if present.
    pub fn insert(&self, key: u64, value: V) -> Result<bool> {
        if key == KEY_LIMIT {
            return Err(EINVAL);
        }
        self.bucket(key).insert(&self.rcx, key, value)
    }

    /// Removes `key`; returns whether it was present.
    pub fn remove(&self, key: u64) -> bool {
        self.bucket(key).remove(&self.rcx, key)
    }

    /// Checks every bucket (sorted, no duplicate, no removed item linked,
    /// every key in its own bucket) and returns the number of keys.
    pub fn check(&self) -> Result<usize> {
        let mut total = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            total += b.check()?;
            let mut misplaced = false;
            // SAFETY: no code of the caller runs under the guard, and the
            // walk does not sleep.
            let guard = unsafe { rcu::Guard::new_unchecked() };
            b.for_each_item(&guard, |item| {
                misplaced |= bucket_of(item.key(), self.buckets.len()) != i
            });
            drop(guard);
            if misplaced {
                return Err(EINVAL);
            }
        }
        Ok(total)
    }

    /// Returns the update counters.
    pub fn stats(&self) -> Stats {
        self.rcx.stats()
    }

    /// Returns the name of the phase-1 path in use.
    pub fn path_name(&self) -> &'static str {
        self.rcx.path_name()
    }
}
