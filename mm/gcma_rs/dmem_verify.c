// SPDX-License-Identifier: GPL-2.0
/*
 * GCMA DMEM verify mode (CONFIG_GCMA_DMEM_VERIFY): every DMEM hit is
 * checked against the device it stands for.
 *
 * DMEM may only ever return bytes the file or the swap slot holds.  With
 * verify mode on, a page-cache hit is followed by a read of the same page
 * through the file system's own ->read_folio() into a private folio (the
 * read the miss path would have made), and a swap hit by a read of the
 * slot from the swap device; the two are compared.  A mismatch is a
 * warning naming the key and both CRC32s, it is counted, and the device's
 * bytes are what the reader gets.  So a stale copy is caught at the first
 * read that would have returned it, by whatever test made that read.
 *
 * The comparison, the counters, the reports and the switch are Rust
 * (mm/gcma_rs/dmem_verify.rs, boot_params.rs).  The two reads are C
 * because they drive the block layer and a file system's read path on a
 * folio outside the page cache, which 6.12's Rust has no abstraction for;
 * so are the early parameter's registration and the static key, which C
 * macros make.  They run in the read paths that call the
 * DMEM hooks: process context, with the reader's folio locked; they
 * allocate with GFP_NOIO and sleep for the read.  A hit they cannot read
 * back (no memory, a read error, an encrypted or verity file, a swap file
 * that is not on a block device) is counted as skipped and served as it
 * is.
 *
 * Switch: "gcma.dmem_verify=" (1/0, y/n, yes/no, on/off), on by default
 * when built; counters in /sys/kernel/mm/gcma/dmem/<client>/verified,
 * verify_mismatches and verify_skipped.
 */

#define pr_fmt(fmt) "gcma: " fmt

#include <linux/bio.h>
#include <linux/buffer_head.h>
#include <linux/fs.h>
#include <linux/gcma.h>
#include <linux/pagemap.h>
#include <linux/sched/mm.h>
#include <linux/swap.h>
#include <linux/swapops.h>

DEFINE_STATIC_KEY_FALSE(gcma_dmem_verify_on);

static int __init gcma_dmem_verify_parse(char *arg)
{
	return gcma_boot_param(GCMA_PARAM_DMEM_VERIFY, arg);
}
early_param("gcma.dmem_verify", gcma_dmem_verify_parse);

/**
 * gcma_dmem_verify_read_file() - read a page-cache hit back from its file
 * @folio: the locked folio DMEM just filled, not yet uptodate, in the page
 *	cache of @folio->mapping at @folio->index
 *
 * Return: a private folio holding what the file system reads at that
 * index, with no mapping and no buffers, whose one reference is the
 * caller's; NULL if the hit cannot be checked.
 */
struct folio *gcma_dmem_verify_read_file(struct folio *folio)
{
	struct address_space *mapping = folio->mapping;
	struct inode *inode = mapping->host;
	loff_t size = i_size_read(inode);
	unsigned int nofs;
	struct folio *dev;
	bool ok;
	int err;

	/*
	 * While a direct-I/O write is in flight the disk may hold bytes the
	 * file does not have yet (and, on ext2, a block allocated for a hole
	 * holds whatever it held before until the write lands): a read may
	 * see either, so there is nothing to compare with.  A direct write
	 * that starts after this check first invalidates the page cache,
	 * which waits for @folio's lock, held until the comparison is done.
	 */
	if (IS_ENCRYPTED(inode) || IS_VERITY(inode) ||
	    !mapping->a_ops->read_folio || atomic_read(&inode->i_dio_count) ||
	    folio_pos(folio) >= size)
		return NULL;
	nofs = memalloc_nofs_save();
	dev = folio_alloc(GFP_NOIO | __GFP_NOWARN, 0);
	if (!dev)
		goto out;
	/*
	 * A folio of the mapping at the same index, outside the page cache:
	 * the file system reads it as the miss would have, and
	 * __gcma_dmem_read_folio() leaves it to the device (it is not the
	 * folio the page cache holds at that index).
	 */
	__folio_set_locked(dev);
	dev->mapping = mapping;
	dev->index = folio->index;
	err = mapping->a_ops->read_folio(NULL, dev);
	if (!err)
		folio_wait_locked(dev);
	/* A truncation or extension meanwhile changes what the read gives. */
	ok = !err && folio_test_uptodate(dev) && i_size_read(inode) == size;
	/*
	 * The folio leaves the mapping before it is returned: its owner may
	 * keep it past the reader's lock on @folio, which is what keeps the
	 * mapping.  block_read_full_folio() may have given it buffers.
	 */
	if (folio_buffers(dev)) {
		folio_lock(dev);
		try_to_free_buffers(dev);
		folio_unlock(dev);
	}
	dev->mapping = NULL;
	if (!ok) {
		folio_put(dev);
		dev = NULL;
	}
out:
	memalloc_nofs_restore(nofs);
	return dev;
}

/**
 * gcma_dmem_verify_read_swap() - read a swap hit back from its slot
 * @folio: the locked swap-cache folio DMEM just filled; @folio->swap is
 *	its slot, whose device write completed before the folio left the
 *	swap cache
 *
 * Return: a private folio holding the slot's bytes, whose one reference
 * is the caller's; NULL if the hit cannot be checked.
 */
struct folio *gcma_dmem_verify_read_swap(struct folio *folio)
{
	struct swap_info_struct *sis = swp_swap_info(folio->swap);
	struct bio_vec bvec;
	unsigned int noio;
	struct folio *dev;
	struct bio bio;

	if (!sis || !sis->bdev || (sis->flags & SWP_FS_OPS))
		return NULL;
	noio = memalloc_noio_save();
	dev = folio_alloc(GFP_NOIO | __GFP_NOWARN, 0);
	if (dev) {
		bio_init(&bio, sis->bdev, &bvec, 1, REQ_OP_READ);
		bio.bi_iter.bi_sector = swap_folio_sector(folio);
		bio_add_folio_nofail(&bio, dev, PAGE_SIZE, 0);
		if (submit_bio_wait(&bio)) {
			folio_put(dev);
			dev = NULL;
		}
		bio_uninit(&bio);
	}
	memalloc_noio_restore(noio);
	return dev;
}
