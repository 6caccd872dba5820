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
 * WARN naming the key and both CRC32s, it is counted, and the device's
 * bytes are what the reader gets.  So a stale copy is caught at the first
 * read that would have returned it, by whatever test made that read.
 *
 * This is C because it drives the block layer and a file system's read
 * path on a folio outside the page cache, which 6.12's Rust has no
 * abstraction for.  It runs in the read paths that call the DMEM hooks:
 * process context, with the reader's folio locked; it allocates with
 * GFP_NOIO and sleeps for the read.  A hit it cannot check (no memory, a
 * read error, an encrypted or verity file, a swap file that is not on a
 * block device) is counted as skipped and served as it is.
 *
 * Switch: "gcma.dmem_verify=" (1/0, y/n, yes/no, on/off), on by default
 * when built; counters in /sys/kernel/mm/gcma/dmem/<client>/verified,
 * verify_mismatches and verify_skipped.
 */

#define pr_fmt(fmt) "gcma: " fmt

#include <linux/bio.h>
#include <linux/buffer_head.h>
#include <linux/crc32.h>
#include <linux/fs.h>
#include <linux/gcma.h>
#include <linux/highmem.h>
#include <linux/pagemap.h>
#include <linux/ratelimit.h>
#include <linux/sched/mm.h>
#include <linux/swap.h>
#include <linux/swapops.h>

DEFINE_STATIC_KEY_FALSE(gcma_dmem_verify_on);

static bool gcma_dmem_verify_boot = true;

static atomic_long_t gcma_dmem_verified[GCMA_DMEM_NR_CLIENTS];
static atomic_long_t gcma_dmem_mismatches[GCMA_DMEM_NR_CLIENTS];
static atomic_long_t gcma_dmem_skipped[GCMA_DMEM_NR_CLIENTS];

static int __init gcma_dmem_verify_parse(char *arg)
{
	if (!arg || gcma_parse_bool(arg, &gcma_dmem_verify_boot)) {
		pr_err("gcma.dmem_verify=%s: not a boolean (1/0, y/n, yes/no, on/off); stays %s\n",
		       arg ?: "", gcma_dmem_verify_boot ? "on" : "off");
		return 0;
	}
	return 0;
}
early_param("gcma.dmem_verify", gcma_dmem_verify_parse);

static int __init gcma_dmem_verify_init(void)
{
	if (!gcma_dmem_verify_boot)
		return 0;
	static_branch_enable(&gcma_dmem_verify_on);
	pr_info("dmem: verify mode on: every hit is checked against the device\n");
	return 0;
}
core_initcall(gcma_dmem_verify_init);

/**
 * gcma_dmem_verify_counts() - the verify counters of a client
 * @client: GCMA_DMEM_FILE or GCMA_DMEM_SWAP
 * @verified: hits that matched the device
 * @mismatches: hits that did not
 * @skipped: hits that could not be checked
 */
void gcma_dmem_verify_counts(unsigned int client, u64 *verified,
			     u64 *mismatches, u64 *skipped)
{
	*verified = atomic_long_read(&gcma_dmem_verified[client]);
	*mismatches = atomic_long_read(&gcma_dmem_mismatches[client]);
	*skipped = atomic_long_read(&gcma_dmem_skipped[client]);
}

/*
 * Compares the copy DMEM put in @folio with the device's bytes in @dev;
 * on a mismatch reports it and gives @folio the device's bytes.
 */
static void gcma_dmem_verify_compare(unsigned int client, struct folio *folio,
				     struct folio *dev, const char *what)
{
	void *copy = kmap_local_folio(folio, 0);
	void *disk = kmap_local_folio(dev, 0);

	if (likely(!memcmp(copy, disk, PAGE_SIZE))) {
		atomic_long_inc(&gcma_dmem_verified[client]);
	} else {
		unsigned int first = 0, last = PAGE_SIZE - 1;

		while (((u8 *)copy)[first] == ((u8 *)disk)[first])
			first++;
		while (((u8 *)copy)[last] == ((u8 *)disk)[last])
			last--;
		atomic_long_inc(&gcma_dmem_mismatches[client]);
		WARN_RATELIMIT(1, "gcma: dmem: stale %s: bytes %u-%u differ; copy crc32 %08x, device crc32 %08x; the device's bytes are returned\n",
			       what, first, last, crc32_le(~0, copy, PAGE_SIZE),
			       crc32_le(~0, disk, PAGE_SIZE));
		memcpy(copy, disk, PAGE_SIZE);
	}
	kunmap_local(disk);
	kunmap_local(copy);
}

/**
 * gcma_dmem_verify_file() - check a page-cache hit against the file
 * @folio: the locked folio DMEM just filled, not yet uptodate, in the page
 *	cache of @folio->mapping at @folio->index
 * @key: its DMEM key
 */
void gcma_dmem_verify_file(struct folio *folio,
			   const struct gcma_dmem_file_key *key)
{
	struct address_space *mapping = folio->mapping;
	struct inode *inode = mapping->host;
	unsigned int nofs = memalloc_nofs_save();
	loff_t size = i_size_read(inode);
	char what[128];
	struct folio *dev;
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
		goto skip;
	dev = folio_alloc(GFP_NOIO | __GFP_NOWARN, 0);
	if (!dev)
		goto skip;
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
	if (!err && folio_test_uptodate(dev) && i_size_read(inode) == size) {
		snprintf(what, sizeof(what), "file page: dev %u:%u ino %llu index %lu (size %lld)",
			 MAJOR(key->sb), MINOR(key->sb), key->ino, folio->index,
			 size);
		gcma_dmem_verify_compare(GCMA_DMEM_FILE, folio, dev, what);
	} else {
		atomic_long_inc(&gcma_dmem_skipped[GCMA_DMEM_FILE]);
	}
	/* block_read_full_folio() may have given it buffers. */
	if (folio_buffers(dev)) {
		folio_lock(dev);
		try_to_free_buffers(dev);
		folio_unlock(dev);
	}
	dev->mapping = NULL;
	folio_put(dev);
	memalloc_nofs_restore(nofs);
	return;
skip:
	atomic_long_inc(&gcma_dmem_skipped[GCMA_DMEM_FILE]);
	memalloc_nofs_restore(nofs);
}

/**
 * gcma_dmem_verify_swap() - check a swap hit against the swap slot
 * @folio: the locked swap-cache folio DMEM just filled; @folio->swap is
 *	its slot, whose device write completed before the folio left the
 *	swap cache
 */
void gcma_dmem_verify_swap(struct folio *folio)
{
	struct swap_info_struct *sis = swp_swap_info(folio->swap);
	unsigned int noio = memalloc_noio_save();
	struct bio_vec bvec;
	struct folio *dev;
	struct bio bio;
	char what[64];

	if (!sis || !sis->bdev || (sis->flags & SWP_FS_OPS))
		goto skip;
	dev = folio_alloc(GFP_NOIO | __GFP_NOWARN, 0);
	if (!dev)
		goto skip;
	bio_init(&bio, sis->bdev, &bvec, 1, REQ_OP_READ);
	bio.bi_iter.bi_sector = swap_folio_sector(folio);
	bio_add_folio_nofail(&bio, dev, PAGE_SIZE, 0);
	if (!submit_bio_wait(&bio)) {
		snprintf(what, sizeof(what), "swap page: type %u offset %lu",
			 swp_type(folio->swap), swp_offset(folio->swap));
		gcma_dmem_verify_compare(GCMA_DMEM_SWAP, folio, dev, what);
	} else {
		atomic_long_inc(&gcma_dmem_skipped[GCMA_DMEM_SWAP]);
	}
	bio_uninit(&bio);
	folio_put(dev);
	memalloc_noio_restore(noio);
	return;
skip:
	atomic_long_inc(&gcma_dmem_skipped[GCMA_DMEM_SWAP]);
	memalloc_noio_restore(noio);
}
