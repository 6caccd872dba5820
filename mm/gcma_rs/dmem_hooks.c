// SPDX-License-Identifier: GPL-2.0
/*
 * GCMA DMEM: the hooks of the swap and page-cache paths.
 *
 * DMEM (mm/gcma_rs/dmem*.rs) keeps copies of pages the kernel has already
 * written elsewhere in pages GCMA lends it.  This file is what the swap
 * and page-cache paths call; it turns a folio into a key and a page and
 * calls the Rust store.  Every hook is an inline static branch in
 * <linux/gcma.h>, one key per client, on while the client is.
 *
 * Swap (write-through): swap_writepage() stores an order-0 folio after
 * zswap declined it, and the device is written all the same; a folio
 * zswap takes drops the slot's copy, so zswap's data is never shadowed by
 * an older one.  swap_read_folio() loads after zswap and before the
 * device (the entry is dropped by the load), slots are invalidated where
 * swap_range_free() frees them, and a whole device at swapoff.
 *
 * Clean page cache: file systems whose read path asks DMEM first (ext2
 * through mpage, ext4) set SB_I_GCMA_DMEM.  Every removal of a folio of
 * theirs from the page cache goes through a DMEM hook: reclaim
 * (__remove_mapping()) stores an order-0, clean, uptodate folio and drops
 * the entry of anything else it removes; truncation, hole punching and
 * inode eviction (truncate_inode_pages_range()), direct-I/O writes
 * (invalidate_inode_pages2_range() before the write, and
 * kiocb_invalidate_post_direct_write() after it, cached pages or not),
 * moved extents (EXT4_IOC_MOVE_EXT) and unmount drop the entries of the
 * range, and any other removal of a single folio (filemap_remove_folio():
 * memory-failure removal, for one) drops the folio's.  A store runs under
 * the folio lock before the folio leaves the mapping, so a truncation or
 * invalidation that finds the folio gone, or the mapping empty, runs its
 * DMEM invalidation after the store: no entry outlives a change of the
 * file.  The full argument is in Documentation/mm/gcma.rst.
 *
 * File keys are the superblock's device number (an id unique among
 * mounted superblocks; unmount drops every entry of it), the inode number
 * and the page index.  Entries never outlive the in-memory inode (its
 * eviction truncates the whole file), so nothing that may change during
 * the inode's life, such as i_generation, is part of the key.  Swap keys
 * are the swap type and offset.
 */

#define pr_fmt(fmt) "gcma: " fmt

#include <linux/buffer_head.h>
#include <linux/fs.h>
#include <linux/gcma.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/pagemap.h>
#include <linux/swap.h>
#include <linux/swapops.h>

DEFINE_STATIC_KEY_FALSE(gcma_dmem_file_on);
DEFINE_STATIC_KEY_FALSE(gcma_dmem_swap_on);

/* Serialises switching: the static key and the client's state change together. */
static DEFINE_MUTEX(gcma_dmem_switch_lock);

/**
 * gcma_dmem_switch() - turn a DMEM client on or off
 * @client: GCMA_DMEM_FILE or GCMA_DMEM_SWAP
 * @on: the new state
 *
 * On: the hooks are enabled first, then the client accepts stores.  Off:
 * the client refuses stores and drops its pages, then the hooks are
 * disabled; the invalidation hooks therefore run for as long as the
 * client holds any page.  May sleep.
 *
 * Return: 0, -EINVAL for an unknown client, -ENODEV without DMEM.
 */
int gcma_dmem_switch(unsigned int client, bool on)
{
	struct static_key_false *key;
	int ret;

	switch (client) {
	case GCMA_DMEM_FILE:
		key = &gcma_dmem_file_on;
		break;
	case GCMA_DMEM_SWAP:
		key = &gcma_dmem_swap_on;
		break;
	default:
		return -EINVAL;
	}
	mutex_lock(&gcma_dmem_switch_lock);
	if (on)
		static_branch_enable(key);
	ret = gcma_dmem_rs_set_enabled(client, on);
	if (!on || ret)
		static_branch_disable(key);
	mutex_unlock(&gcma_dmem_switch_lock);
	return ret;
}

/* The file part of the key of @mapping's pages; false if not kept. */
static bool gcma_dmem_file_key(struct address_space *mapping,
			       struct gcma_dmem_file_key *key)
{
	struct inode *inode = mapping ? mapping->host : NULL;

	/*
	 * Swap I/O rewrites an active swap file's blocks behind its page
	 * cache: none of its pages is stored or loaded (swapoff drops what
	 * was kept before swapon).
	 */
	if (!inode || !(inode->i_sb->s_iflags & SB_I_GCMA_DMEM) ||
	    !S_ISREG(inode->i_mode) || IS_SWAPFILE(inode))
		return false;
	key->sb = inode->i_sb->s_dev;
	key->ino = inode->i_ino;
	return true;
}

/**
 * __gcma_dmem_evict_folio() - a locked file folio is leaving the page cache
 * @folio: the folio, locked, still in its mapping
 * @reclaimed: removed by reclaim (stored if it can be) rather than by an
 *	invalidation that keeps no copy
 *
 * Called by __remove_mapping() and filemap_remove_folio() before they take
 * the mapping's locks.  Whatever is not stored has its entries dropped, so
 * that a later miss in the page cache never finds data older than the
 * folio's.  A folio that may be pinned for DMA is not stored: a device may
 * be writing it while it is copied, and the copy could be torn.
 */
void __gcma_dmem_evict_folio(struct folio *folio, bool reclaimed)
{
	struct gcma_dmem_file_key key;
	pgoff_t index = folio->index;

	if (folio_test_swapcache(folio) ||
	    !gcma_dmem_file_key(folio->mapping, &key))
		return;
	if (reclaimed && !folio_test_large(folio) &&
	    folio_test_uptodate(folio) && !folio_test_dirty(folio) &&
	    !folio_test_writeback(folio) && !folio_maybe_dma_pinned(folio)) {
		gcma_dmem_rs_store_file(&key, index, folio_page(folio, 0));
		return;
	}
	if (reclaimed && folio_test_large(folio))
		gcma_dmem_rs_refused_large(GCMA_DMEM_FILE);
	gcma_dmem_rs_invalidate_file(&key, index,
				     index + folio_nr_pages(folio) - 1);
}

/**
 * __gcma_dmem_read_folio() - fill a folio from DMEM instead of the disk
 * @folio: a locked folio of the page cache, not uptodate, about to be read
 *
 * Return: true if DMEM had the page: the folio is then uptodate and
 * unlocked, and the caller must not read it.
 */
bool __gcma_dmem_read_folio(struct folio *folio)
{
	struct gcma_dmem_file_key key;

	if (folio_test_large(folio) || folio_buffers(folio) ||
	    !gcma_dmem_file_key(folio->mapping, &key))
		return false;
	/* Verify mode's own read of the device: not a page-cache folio. */
	if (gcma_dmem_verifying() &&
	    xa_load(&folio->mapping->i_pages, folio->index) != folio)
		return false;
	if (!gcma_dmem_rs_load_file(&key, folio->index, folio_page(folio, 0)))
		return false;
	if (gcma_dmem_verifying())
		gcma_dmem_verify_file(folio, &key);
	folio_end_read(folio, true);
	return true;
}

/**
 * __gcma_dmem_invalidate_file() - drop the entries of a range of a file
 * @mapping: the file's mapping
 * @first: first page index
 * @last: last page index (inclusive), ULONG_MAX for the end of the file
 */
void __gcma_dmem_invalidate_file(struct address_space *mapping, pgoff_t first,
				 pgoff_t last)
{
	struct gcma_dmem_file_key key;

	if (gcma_dmem_file_key(mapping, &key))
		gcma_dmem_rs_invalidate_file(&key, first, last);
}

/**
 * __gcma_dmem_fence_file() - begin or end a fenced invalidation of a range
 * @mapping: the file's mapping
 * @first: first page index
 * @last: last page index (inclusive)
 * @begin: true to begin (drop the range, then refuse stores and fail loads
 *	of the file), false to end (drop the range again, lift the fence)
 *
 * For walks that invalidate the page cache of a file whose bytes changed
 * behind it (direct-I/O writes): see Documentation/mm/gcma.rst.
 */
void __gcma_dmem_fence_file(struct address_space *mapping, pgoff_t first,
			    pgoff_t last, bool begin)
{
	struct gcma_dmem_file_key key;

	if (gcma_dmem_file_key(mapping, &key))
		gcma_dmem_rs_fence_file(&key, first, last, begin);
}

/**
 * __gcma_dmem_umount() - drop every entry of a superblock
 * @sb: the superblock, being shut down
 */
void __gcma_dmem_umount(struct super_block *sb)
{
	if (sb->s_iflags & SB_I_GCMA_DMEM)
		gcma_dmem_rs_invalidate_sb(sb->s_dev);
}

/**
 * __gcma_dmem_swap_store() - keep a copy of a folio being written to swap
 * @folio: a locked swap-cache folio, about to be written to its device
 *
 * A large folio is not stored: its slots' entries are dropped.
 */
void __gcma_dmem_swap_store(struct folio *folio)
{
	swp_entry_t entry = folio->swap;

	if (folio_test_large(folio)) {
		gcma_dmem_rs_refused_large(GCMA_DMEM_SWAP);
		gcma_dmem_rs_invalidate_swap(swp_type(entry), swp_offset(entry),
					     folio_nr_pages(folio));
		return;
	}
	gcma_dmem_rs_store_swap(swp_type(entry), swp_offset(entry),
				folio_page(folio, 0));
}

/**
 * __gcma_dmem_swap_load() - fill a folio being swapped in from DMEM
 * @folio: a locked folio, not uptodate, whose slot is @folio->swap
 *
 * Return: true if DMEM had the page (the entry is dropped): the folio is
 * uptodate and the caller must not read the device.  The caller unlocks.
 */
bool __gcma_dmem_swap_load(struct folio *folio)
{
	swp_entry_t entry = folio->swap;

	if (folio_test_large(folio) ||
	    !gcma_dmem_rs_load_swap(swp_type(entry), swp_offset(entry),
				    folio_page(folio, 0)))
		return false;
	if (gcma_dmem_verifying())
		gcma_dmem_verify_swap(folio);
	folio_mark_uptodate(folio);
	return true;
}

/**
 * __gcma_dmem_swap_drop_folio() - drop the entries of a folio's slots
 * @folio: a swap-cache folio whose data now lives elsewhere (zswap)
 */
void __gcma_dmem_swap_drop_folio(struct folio *folio)
{
	swp_entry_t entry = folio->swap;

	gcma_dmem_rs_invalidate_swap(swp_type(entry), swp_offset(entry),
				     folio_nr_pages(folio));
}

/**
 * __gcma_dmem_swap_free() - swap slots are being freed
 * @type: swap type
 * @offset: first slot
 * @nr: number of slots
 *
 * May be called under the swap device's lock; does not sleep.
 */
void __gcma_dmem_swap_free(unsigned int type, pgoff_t offset, unsigned int nr)
{
	gcma_dmem_rs_invalidate_swap(type, offset, nr);
}

/**
 * __gcma_dmem_swapoff() - drop every entry of a swap device
 * @type: swap type of the device being switched off
 */
void __gcma_dmem_swapoff(unsigned int type)
{
	gcma_dmem_rs_invalidate_swap_type(type);
}
