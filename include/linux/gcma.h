/* SPDX-License-Identifier: GPL-2.0 */
/*
 * GCMA: guaranteed contiguous memory allocator.
 *
 * Areas are reserved at boot from the "gcma=" parameter and owned by GCMA
 * for the life of the system: they are never given to the buddy allocator.
 * The allocator itself is written in Rust (mm/gcma_rs/), struct page
 * state included; this header is the boundary between it, the C glue
 * (boot reservation, tracepoints, allocation tags, sysfs and debugfs
 * files, the static keys of the hooks) and the CMA interface, through
 * which GCMA areas are also reachable.
 */
#ifndef _LINUX_GCMA_H
#define _LINUX_GCMA_H

#include <linux/atomic.h>
#include <linux/gfp_types.h>
#include <linux/init.h>
#include <linux/jump_label.h>
#include <linux/list.h>
#include <linux/nodemask_types.h>
#include <linux/types.h>
#include <asm/page.h>

/* Upper bound on "gcma=" areas; more are refused with a boot message. */
#define GCMA_MAX_AREAS		8
#define GCMA_AREA_NAME_LEN	16

struct address_space;
struct alloc_tag;
struct cma;
struct folio;
struct page;
struct super_block;

/**
 * struct gcma_area - an area reserved at boot
 * @name: "gcma<N>", N counting from 0 in command-line order
 * @base: physical address of the first byte, page aligned
 * @size: size in bytes, a multiple of PAGE_SIZE
 * @cma: the CMA area registered on the same range, or NULL
 * @in_service: set once, when the Rust crate puts the area in service
 *	(gcma_area_enter_service()); read with READ_ONCE()
 * @refused: not put in service (it spans zones); its memory went to the
 *	page allocator
 * @thp: reserved with ":thp": serves transparent huge pages only (not a
 *	CMA area); see include/linux/gcma_thp.h
 */
struct gcma_area {
	char name[GCMA_AREA_NAME_LEN];
	phys_addr_t base;
	phys_addr_t size;
	struct cma *cma;
	bool in_service;
	bool refused;
	bool thp;
};

/**
 * struct gcma_stats - counters of one area
 * @total_pages: pages in the area
 * @primary_used_pages: pages owned by contiguous allocations
 * @secondary_lent_pages: pages lent to secondary clients
 * @alloc_success: contiguous allocations that succeeded
 * @alloc_fail: contiguous allocations that found no room
 * @discarded_pages: lent pages discarded for contiguous allocations
 * @released: contiguous releases
 * @hwpoisoned_pages: pages found hardware-poisoned and taken out of use
 *	for good (GCMA finds them where it takes pages: allocation, lending,
 *	DMEM copies, the last reference of a released page)
 * @release_pending_pages: released pages still referenced elsewhere,
 *	freed when their last reference goes
 * @bad_pages: pages the page allocator's free steps found in a bad state
 *	(and reported) and taken out of use for good
 */
struct gcma_stats {
	u64 total_pages;
	u64 primary_used_pages;
	u64 secondary_lent_pages;
	u64 alloc_success;
	u64 alloc_fail;
	u64 discarded_pages;
	u64 released;
	u64 release_pending_pages;
	u64 hwpoisoned_pages;
	u64 bad_pages;
};

#ifdef CONFIG_GCMA
void __init gcma_reserve(void);
unsigned int gcma_nr_reserved_areas(void);
struct gcma_area *gcma_reserved_area(unsigned int idx);
struct gcma_area *gcma_area_by_name(const char *name);
struct cma *gcma_device_cma(unsigned int idx);

/**
 * struct gcma_request - an area "gcma=" asks for, checked
 * @size: size in bytes, a non-zero multiple of PAGE_SIZE
 * @base: physical base address if @fixed, page aligned
 * @fixed: the value gave a base ("gcma=<size>@<base>")
 * @thp: ":thp", an area for transparent huge pages (@size and @base are
 *	multiples of PMD_SIZE)
 */
struct gcma_request {
	phys_addr_t size;
	phys_addr_t base;
	bool fixed;
	bool thp;
};

/*
 * The handlers of the early parameters (Rust, mm/gcma_rs/boot_params.rs),
 * which the C files register with early_param(): each prints why it
 * refuses a value, and keeps the values for gcma_reserve() and the crate.
 */
int gcma_param_area(char *arg);
int gcma_param_dma_cma(char *arg);
int gcma_param_dmem_file(char *arg);
int gcma_param_dmem_swap(char *arg);
int gcma_param_dmem_verify(char *arg);
int gcma_param_thp_mode(char *arg);
/* gcma= request @idx in command-line order, of size 0 past the last. */
struct gcma_request gcma_boot_request(unsigned int idx);
bool gcma_boot_dma_cma(void);

/**
 * struct gcma_of_node - what of.c read of a "guarantee" reserved-memory node
 * @name: the node's full name, "<name>[@<unit address>]", non-NULL and
 *	NUL-terminated
 * @base: physical base of the range the reserved-memory code placed
 * @size: its size in bytes
 * @reusable: the "reusable" property
 * @no_map: the "no-map" property
 * @thp: "linux,gcma-thp", an area for transparent huge pages only
 * @dma_default: "linux,cma-default", the default DMA area
 */
struct gcma_of_node {
	const char *name;
	phys_addr_t base;
	phys_addr_t size;
	bool reusable;
	bool no_map;
	bool thp;
	bool dma_default;
};

/*
 * Checks a node (Rust, boot_params.rs): returns the length of the area's
 * name, the node's name before '@', or 0 after a message saying why the
 * node makes no area.
 */
size_t gcma_of_check_node(struct gcma_of_node node);

struct page *gcma_alloc(struct gcma_area *area, unsigned long count,
			unsigned int align, bool no_warn);
struct page *gcma_alloc_gfp(struct gcma_area *area, unsigned long count,
			    unsigned int align, gfp_t gfp);
struct page *gcma_alloc_gfp_noprof(struct gcma_area *area, unsigned long count,
				   unsigned int align, gfp_t gfp);
bool gcma_release(struct gcma_area *area, const struct page *pages,
		  unsigned long count);
bool __gcma_release(const struct gcma_area *area, unsigned long pfn,
		    unsigned long count);
void gcma_flush_releases(struct gcma_area *area);
struct gcma_stats __gcma_stats(const struct gcma_area *area);

/* The counters of @area, all zero if it is not in service. */
static inline void gcma_stats(struct gcma_area *area, struct gcma_stats *st)
{
	*st = __gcma_stats(area);
}

struct gcma_area *gcma_area_of_pfn(unsigned long pfn);
unsigned long gcma_area_pfn_in_range(unsigned long start_pfn,
				     unsigned long end_pfn);

DECLARE_STATIC_KEY_FALSE(gcma_in_service);
/* Page frame numbers spanned by the areas in service: [lo, hi). */
extern unsigned long gcma_pfn_lo, gcma_pfn_hi;
bool __gcma_free_page(unsigned long pfn, unsigned int order);

/**
 * gcma_free_page() - give a freed block of a GCMA area back to GCMA
 * @page: first page of the block, after free_pages_prepare()
 * @pfn: its page frame number
 * @order: its order
 *
 * Called by the page allocator's free paths: the pages of a GCMA area
 * must never reach the buddy lists, whoever drops their last reference.
 * Costs a static branch while no area is in service.  Any context.
 *
 * Return: true if GCMA took the block.
 */
static inline bool gcma_free_page(struct page *page, unsigned long pfn,
				  unsigned int order)
{
	if (!static_branch_unlikely(&gcma_in_service))
		return false;
	/* Most pages freed are outside every area: no call for them. */
	if (pfn < READ_ONCE(gcma_pfn_lo) || pfn >= READ_ONCE(gcma_pfn_hi))
		return false;
	return __gcma_free_page(pfn, order);
}

/**
 * gcma_pfn_in_area() - whether a page frame lies in a GCMA area in service
 * @pfn: the page frame number
 *
 * For the page allocator's pfn walkers: an area's pages are GCMA's, not
 * the zone's.  Costs a static branch while no area is in service.
 */
static inline bool gcma_pfn_in_area(unsigned long pfn)
{
	if (!static_branch_unlikely(&gcma_in_service))
		return false;
	if (pfn < READ_ONCE(gcma_pfn_lo) || pfn >= READ_ONCE(gcma_pfn_hi))
		return false;
	return gcma_area_of_pfn(pfn);
}

/**
 * gcma_area_pfn() - a page frame of a GCMA area in a range of page frames
 * @start_pfn: first page frame of the range
 * @end_pfn: page frame after its last
 *
 * For has_unmovable_pages(): the free pages of an area never become buddy
 * pages, so a pageblock that holds any must not be isolated.  The
 * pageblocks wholly inside an area are isolated for good; this refuses the
 * edge pageblocks an area shares with the page allocator when its base or
 * end is not pageblock-aligned, so that memory offlining and
 * alloc_contig_range() fail at once there too.  Costs a static branch
 * while no area is in service.  Any context.
 *
 * Return: a page frame of an area in service in the range, or @end_pfn.
 */
static inline unsigned long gcma_area_pfn(unsigned long start_pfn,
					  unsigned long end_pfn)
{
	if (!static_branch_unlikely(&gcma_in_service))
		return end_pfn;
	if (end_pfn <= READ_ONCE(gcma_pfn_lo) ||
	    start_pfn >= READ_ONCE(gcma_pfn_hi))
		return end_pfn;
	return gcma_area_pfn_in_range(start_pfn, end_pfn);
}

/* C glue used by the Rust crate (mm/gcma_rs/area.c). */
void gcma_area_enter_service(struct gcma_area *area);
void gcma_trace_alloc_start(const struct gcma_area *area, unsigned long count,
			    unsigned int align);
void gcma_alloc_done(const struct gcma_area *area, unsigned long pfn,
		     unsigned long count, unsigned int align, int ret, u64 ns,
		     gfp_t gfp);
void gcma_warn_compound_count(const struct gcma_area *area,
			      unsigned long count);
void gcma_release_done(const struct gcma_area *area, unsigned long pfn,
		       unsigned long count);
void gcma_release_refused(const struct gcma_area *area, unsigned long pfn,
			  unsigned long count, const char *why);
struct alloc_tag *gcma_lend_tag_enter(struct alloc_tag **old);
void gcma_lend_tag_exit(struct alloc_tag *tag, struct alloc_tag *old);

/**
 * struct gcma_dmem_stats - counters of one DMEM client
 * @stored_pages: entries stored now
 * @held_pages: area pages held, including unbound ones still being copied
 * @stores: stores that stored
 * @loads: loads that hit
 * @misses: loads that missed
 * @invalidations: entries dropped by invalidations
 * @discards: held pages discarded for contiguous allocations
 * @evictions: entries evicted (least recently stored) to make room
 * @refused_nomem: stores refused: no memory for the index node
 * @refused_nospace: stores refused: no page free nor evictable
 * @refused_discarded: stores refused: page discarded while being filled
 * @refused_superseded: stores refused: entry replaced while being filled
 * @refused_disabled: stores refused: client switched off (while off, the
 *	hooks are disabled and do not call DMEM at all)
 * @refused_large: large folios not stored
 * @poisoned: stores refused and loads missed because the area page held
 *	was found hardware-poisoned (the entry is dropped, the page retired),
 *	or, for a store, the page it copied from
 */
struct gcma_dmem_stats {
	u64 stored_pages;
	u64 held_pages;
	u64 stores;
	u64 loads;
	u64 misses;
	u64 invalidations;
	u64 discards;
	u64 evictions;
	u64 refused_nomem;
	u64 refused_nospace;
	u64 refused_discarded;
	u64 refused_superseded;
	u64 refused_disabled;
	u64 refused_large;
	u64 poisoned;
};

/* DMEM clients: index of /sys/kernel/mm/gcma/dmem/<client>. */
enum gcma_dmem_client {
	GCMA_DMEM_FILE,
	GCMA_DMEM_SWAP,
	GCMA_DMEM_NR_CLIENTS,
};

/*
 * Guaranteed THP (mm/gcma_rs/thp.c, thp.rs): on while the mode of
 * /sys/kernel/mm/gcma/thp/mode is not "never" and a THP area is in
 * service.  The wrappers of <linux/gcma_thp.h> test it, thp.rs flips it
 * with the mode.
 */
DECLARE_STATIC_KEY_FALSE(gcma_thp_on);

/*
 * Implemented in Rust (mm/gcma_rs/init.rs).  gcma_rs_init() takes the
 * areas over; gcma_init() calls it once, before anything else reaches the
 * areas through the crate (only the boot parameters' functions run
 * earlier).
 */
int gcma_rs_init(void);
/* Gives the memory of an area never put in service to the page allocator. */
void gcma_area_refuse(struct gcma_area *area);

/* KUnit helpers of the THP suite (mm/gcma_rs/thp_test.c). */
struct folio *gcma_thp_test_collapse_alloc(void);
void gcma_thp_test_put(struct folio *folio, bool irqs_off);
/*
 * DMEM (mm/gcma_rs/dmem_client.rs): whether a client is on (-ENODEV
 * without an instance), and the swap entry points the KUnit suite of
 * cma_test.c fills DMEM through.
 */
int gcma_dmem_rs_enabled(unsigned int client);
bool gcma_dmem_rs_store_swap(unsigned int type, unsigned long offset,
			     struct page *page);
bool gcma_dmem_rs_load_swap(unsigned int type, unsigned long offset,
			    struct page *page);

/*
 * DMEM hooks of the swap and page-cache paths (mm/gcma_rs/dmem_hooks.rs,
 * keys in dmem_switch.c): each is a static branch, on while its client is.
 * None sleeps; all run in process context.
 */
DECLARE_STATIC_KEY_FALSE(gcma_dmem_file_on);
DECLARE_STATIC_KEY_FALSE(gcma_dmem_swap_on);
DECLARE_STATIC_KEY_FALSE(gcma_dmem_fences_on);
void __gcma_dmem_evict_folio(struct folio *folio, bool reclaimed);
bool __gcma_dmem_read_folio(struct folio *folio);
void __gcma_dmem_invalidate_file(struct address_space *mapping,
				 unsigned long first, unsigned long last);
void __gcma_dmem_umount(struct super_block *sb);
bool __gcma_dmem_fence_begin(struct address_space *mapping,
			     unsigned long first, unsigned long last);
void __gcma_dmem_fence_end(struct address_space *mapping,
			   unsigned long first, unsigned long last);
void __gcma_dmem_swap_store(struct folio *folio);
bool __gcma_dmem_swap_load(struct folio *folio);
void __gcma_dmem_swap_drop_folio(struct folio *folio);
void __gcma_dmem_swap_free(unsigned int type, unsigned long offset,
			   unsigned int nr);
void __gcma_dmem_swapoff(unsigned int type);

#ifdef CONFIG_GCMA_DMEM_VERIFY
/*
 * Verify mode (mm/gcma_rs/dmem_verify.rs, kernel::mm::gcma::verify):
 * every hit is read back from the device into a private folio and
 * compared.
 */
DECLARE_STATIC_KEY_FALSE(gcma_dmem_verify_on);
#endif

/*
 * A locked file folio leaves the page cache: reclaim and invalidation
 * (__remove_mapping()) or any single removal (filemap_remove_folio()).
 */
static inline void gcma_dmem_evict_folio(struct folio *folio, bool reclaimed)
{
	if (static_branch_unlikely(&gcma_dmem_file_on))
		__gcma_dmem_evict_folio(folio, reclaimed);
}

/* Before read I/O of a locked folio: true if filled (uptodate, unlocked). */
static inline bool gcma_dmem_read_folio(struct folio *folio)
{
	if (static_branch_unlikely(&gcma_dmem_file_on))
		return __gcma_dmem_read_folio(folio);
	return false;
}

/* Truncation, hole punch, eviction: bytes @lstart to @lend (-1: EOF). */
static inline void gcma_dmem_truncate(struct address_space *mapping,
				      loff_t lstart, loff_t lend)
{
	/* An arithmetic shift keeps lend == -1 all ones: the end of file. */
	if (static_branch_unlikely(&gcma_dmem_file_on))
		__gcma_dmem_invalidate_file(mapping, lstart >> PAGE_SHIFT,
					    (unsigned long)(lend >> PAGE_SHIFT));
}

/*
 * Invalidation of page indices @first to @last: invalidations of the page
 * cache (direct-I/O writes, before and after), moved extents.
 */
static inline void gcma_dmem_invalidate_pages(struct address_space *mapping,
					      unsigned long first,
					      unsigned long last)
{
	if (static_branch_unlikely(&gcma_dmem_file_on))
		__gcma_dmem_invalidate_file(mapping, first, last);
}

/*
 * A walk that invalidates page indices @first to @last of a file whose
 * bytes changed behind its page cache (direct I/O) runs between
 * gcma_dmem_fence_begin() and gcma_dmem_fence_end(): nothing of the file
 * is stored in DMEM or loaded from it meanwhile, and both drop the range.
 * Begin returns whether it raised a fence; the walk passes that to end as
 * @fenced, which lowers exactly the fences begin raised, whatever the
 * client's switch did in between (testing the switch again would leave a
 * fence raised, or lower one another walk raised).  Fences are raised
 * whenever DMEM exists, the file client on or off: a walk that began
 * with it off must still be fenced if it comes on before the walk ends.
 */
static inline bool gcma_dmem_fence_begin(struct address_space *mapping,
					 unsigned long first,
					 unsigned long last)
{
	if (static_branch_unlikely(&gcma_dmem_fences_on))
		return __gcma_dmem_fence_begin(mapping, first, last);
	return false;
}

static inline void gcma_dmem_fence_end(struct address_space *mapping,
				       unsigned long first, unsigned long last,
				       bool fenced)
{
	if (fenced)
		__gcma_dmem_fence_end(mapping, first, last);
}

static inline void gcma_dmem_umount(struct super_block *sb)
{
	if (static_branch_unlikely(&gcma_dmem_file_on))
		__gcma_dmem_umount(sb);
}

/*
 * iomap_dio_complete(), after a direct-I/O write that failed: whether to
 * invalidate the page cache of its range all the same.  Upstream skips
 * it, but bios of the write may have reached the disk before the error,
 * and a folio read meanwhile holds older bytes; DMEM would store that
 * folio at its eviction and keep its bytes after it.  As for fences, on
 * whenever DMEM exists.
 */
static inline bool gcma_dmem_invalidate_failed_dio(void)
{
	return static_branch_unlikely(&gcma_dmem_fences_on);
}

/* swap_writepage(): after zswap declined @folio, before the device write. */
static inline void gcma_dmem_swap_store(struct folio *folio)
{
	if (static_branch_unlikely(&gcma_dmem_swap_on))
		__gcma_dmem_swap_store(folio);
}

/* swap_read_folio(): after zswap, before the device; true if filled. */
static inline bool gcma_dmem_swap_load(struct folio *folio)
{
	if (static_branch_unlikely(&gcma_dmem_swap_on))
		return __gcma_dmem_swap_load(folio);
	return false;
}

/* zswap took @folio: an older copy of its slots must not survive. */
static inline void gcma_dmem_swap_drop_folio(struct folio *folio)
{
	if (static_branch_unlikely(&gcma_dmem_swap_on))
		__gcma_dmem_swap_drop_folio(folio);
}

static inline void gcma_dmem_swap_free(unsigned int type, unsigned long offset,
				       unsigned int nr)
{
	if (static_branch_unlikely(&gcma_dmem_swap_on))
		__gcma_dmem_swap_free(type, offset, nr);
}

static inline void gcma_dmem_swapoff(unsigned int type)
{
	if (static_branch_unlikely(&gcma_dmem_swap_on))
		__gcma_dmem_swapoff(type);
}
#else
static inline bool gcma_free_page(struct page *page, unsigned long pfn,
				  unsigned int order)
{
	return false;
}

static inline bool gcma_pfn_in_area(unsigned long pfn)
{
	return false;
}

static inline unsigned long gcma_area_pfn(unsigned long start_pfn,
					  unsigned long end_pfn)
{
	return end_pfn;
}

static inline void gcma_reserve(void) { }

static inline struct cma *gcma_device_cma(unsigned int idx)
{
	return NULL;
}

static inline struct page *gcma_alloc_gfp(struct gcma_area *area,
					  unsigned long count,
					  unsigned int align, gfp_t gfp)
{
	return NULL;
}

static inline bool gcma_release(struct gcma_area *area,
				const struct page *pages, unsigned long count)
{
	return false;
}

static inline void gcma_dmem_evict_folio(struct folio *folio, bool reclaimed) { }
static inline bool gcma_dmem_read_folio(struct folio *folio) { return false; }
static inline void gcma_dmem_truncate(struct address_space *mapping,
				      loff_t lstart, loff_t lend) { }
static inline void gcma_dmem_invalidate_pages(struct address_space *mapping,
					      unsigned long first,
					      unsigned long last) { }
static inline bool gcma_dmem_invalidate_failed_dio(void) { return false; }
static inline bool gcma_dmem_fence_begin(struct address_space *mapping,
					 unsigned long first,
					 unsigned long last) { return false; }
static inline void gcma_dmem_fence_end(struct address_space *mapping,
				       unsigned long first, unsigned long last,
				       bool fenced) { }
static inline void gcma_dmem_umount(struct super_block *sb) { }
static inline void gcma_dmem_swap_store(struct folio *folio) { }
static inline bool gcma_dmem_swap_load(struct folio *folio) { return false; }
static inline void gcma_dmem_swap_drop_folio(struct folio *folio) { }
static inline void gcma_dmem_swap_free(unsigned int type, unsigned long offset,
				       unsigned int nr) { }
static inline void gcma_dmem_swapoff(unsigned int type) { }
#endif

#endif /* _LINUX_GCMA_H */
