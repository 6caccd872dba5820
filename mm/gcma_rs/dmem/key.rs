// SPDX-License-Identifier: GPL-2.0

//! Keys of the store: the [`Key`] trait that chooses a key's bucket, the
//! keys of the two kernel clients ([`FileKey`], [`SwapKey`]), and the
//! [`Handle`] the index maps a key to.
//!
//! Its own file because the hashing and grouping of keys is a policy of
//! the clients, independent of how the store keeps pages.

use super::SWAP_CLUSTER_SHIFT;

/// A key of the store.
///
/// The order of keys must put every group of keys that share a bucket (see
/// [`Key::same_group`]) in one contiguous run.
pub(crate) trait Key: Ord + Clone + Send {
    /// Hash choosing the key's bucket.  Equal for keys of the same group.
    fn bucket_hash(&self) -> u64;

    /// Whether every key `k` with `lo <= k <= hi` has the bucket hash of
    /// `lo`, so a range invalidation need only visit that bucket.  `false`
    /// is always correct, and makes the invalidation visit every bucket.
    fn same_group(lo: &Self, hi: &Self) -> bool;
}

/// Mixes `v` into the hash `h`.
const fn mix(h: u64, v: u64) -> u64 {
    (h ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(31)
}

/// Key of a clean file page: the file, then the page index in the file.
///
/// The file is named by its superblock and inode number alone.  An entry
/// never outlives the in-memory inode it was stored from (evicting the
/// inode truncates its whole range, which drops its entries), and an inode
/// number is unique among the live inodes of a superblock, so the pair
/// names one file for as long as the entry exists.  Mutable inode fields
/// (the generation, which `EXT[24]_IOC_SETVERSION` rewrites without
/// touching the page cache) must not be part of the key: entries stored
/// under an old value would be orphaned and come back with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct FileKey {
    /// Identifier of the file system instance (superblock).
    pub(crate) sb: u32,
    /// Inode number.
    pub(crate) ino: u64,
    /// Page index in the file.
    pub(crate) index: u64,
}

impl FileKey {
    /// The inclusive key range of every page of one file.
    pub(crate) fn file_range(sb: u32, ino: u64) -> (FileKey, FileKey) {
        let key = |index| FileKey { sb, ino, index };
        (key(0), key(u64::MAX))
    }
}

impl Key for FileKey {
    fn bucket_hash(&self) -> u64 {
        mix(mix(0, self.sb.into()), self.ino)
    }

    fn same_group(lo: &Self, hi: &Self) -> bool {
        (lo.sb, lo.ino) == (hi.sb, hi.ino)
    }
}

/// Key of a swap page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct SwapKey {
    /// Swap type (index of the swap device).
    pub(crate) swap_type: u32,
    /// Offset in the swap device, in pages.
    pub(crate) offset: u64,
}

impl SwapKey {
    /// The inclusive key range of every page of one swap device.
    pub(crate) fn device_range(swap_type: u32) -> (SwapKey, SwapKey) {
        (
            SwapKey {
                swap_type,
                offset: 0,
            },
            SwapKey {
                swap_type,
                offset: u64::MAX,
            },
        )
    }
}

impl Key for SwapKey {
    fn bucket_hash(&self) -> u64 {
        mix(
            mix(0, self.swap_type.into()),
            self.offset >> SWAP_CLUSTER_SHIFT,
        )
    }

    fn same_group(lo: &Self, hi: &Self) -> bool {
        lo.swap_type == hi.swap_type
            && lo.offset >> SWAP_CLUSTER_SHIFT == hi.offset >> SWAP_CLUSTER_SHIFT
    }
}

/// What the index maps a key to: a page and the sequence number of the
/// binding of the page to the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Handle {
    /// Area page index.
    pub(crate) page: usize,
    /// Sequence number of the binding; a handle whose number differs from
    /// the slot's is stale.
    pub(crate) seq: u64,
}
