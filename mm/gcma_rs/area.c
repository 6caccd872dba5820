// SPDX-License-Identifier: GPL-2.0
/*
 * GCMA: the C side of contiguous allocations.
 *
 * The Rust crate owns the page-state map of each area and decides which
 * range an allocation gets; this file does what touches struct pages and
 * the rest of the kernel:
 *
 * - gcma_area_attach() prepares the struct pages of an area once, at
 *   subsys_initcall: memblock left them PageReserved with a reference
 *   each; a free GCMA page has no flag and no reference, like a free page
 *   of the buddy allocator.  They are never freed to the buddy allocator.
 * - gcma_alloc() and gcma_release() are the entry points.  An allocation
 *   goes through the page allocator's own allocation steps
 *   (post_alloc_hook(): init_on_alloc, KASAN, page_owner,
 *   debug_pagealloc), then the pages get one reference each, as
 *   alloc_contig_range() gives them; with __GFP_COMP (cma_alloc_folio())
 *   the range becomes one compound page with one reference on its head.
 *   Pages a secondary client held had those steps when they were lent:
 *   an allocation of plain pages takes them as they are (the handoff,
 *   gcma_take_discarded()).
 * - A release drops the owner's references.  A page whose last reference
 *   goes away, then or later, goes through free_pages_prepare() and back
 *   to the area, never to the buddy allocator: the page allocator's free
 *   paths call gcma_free_page() (behind a static key), which queues it on
 *   its area, and every entry point of GCMA drains that queue.
 * - /sys/kernel/mm/gcma/<area>/ shows the counters of each area, and
 *   /sys/kernel/debug/gcma/<area>/alloc_latency a log2 histogram of the
 *   time gcma_alloc() takes; tracepoints gcma:gcma_alloc_start,
 *   gcma_alloc_finish and gcma_release follow each call.
 */

#define pr_fmt(fmt) "gcma: " fmt

#include <linux/bug.h>
#include <linux/debugfs.h>
#include <linux/gcma.h>
#include <linux/highmem.h>
#include <linux/kasan.h>
#include <linux/kobject.h>
#include <linux/log2.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/page-isolation.h>
#include <linux/page_ref.h>
#include <linux/pgalloc_tag.h>
#include <linux/sched/clock.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/static_key.h>
#include <linux/seq_file.h>
#include <linux/sysfs.h>
#include <linux/workqueue.h>

#define CREATE_TRACE_POINTS
#include <trace/events/gcma.h>

#include "../internal.h"

static void gcma_release_deferred(struct work_struct *work);

/* On once an area is in service: the page free paths then check pfns. */
DEFINE_STATIC_KEY_FALSE(gcma_in_service);
/*
 * The span of the areas in service, widened before each area is published
 * (no page of an area can be freed before then: none was allocated).
 */
unsigned long gcma_pfn_lo = ULONG_MAX, gcma_pfn_hi;

static unsigned long gcma_base_pfn(const struct gcma_area *area)
{
	return PHYS_PFN(area->base);
}

static unsigned long gcma_nr_pages(const struct gcma_area *area)
{
	return area->size >> PAGE_SHIFT;
}

static const void *gcma_area_rs(const struct gcma_area *area)
{
	/* Pairs with the release in gcma_area_attach(). */
	return area ? smp_load_acquire(&area->rs) : NULL;
}

static void gcma_sysfs_add(struct gcma_area *area);
static void gcma_debugfs_add(struct gcma_area *area);

/**
 * gcma_area_attach() - put an area in service
 * @area: the area, as reserved at boot
 * @rs: its allocator state, valid for the life of the system
 *
 * Called once per area by the Rust crate at subsys_initcall time.
 */
void gcma_area_attach(struct gcma_area *area, const void *rs)
{
	unsigned long pfn, base = gcma_base_pfn(area);
	unsigned long end = base + gcma_nr_pages(area);
	struct zone *zone = page_zone(pfn_to_page(base));
	unsigned long flags;

	spin_lock_init(&area->free_lock);
	INIT_LIST_HEAD(&area->freed);
	INIT_LIST_HEAD(&area->deferred);
	INIT_WORK(&area->release_work, gcma_release_deferred);
	/*
	 * Memblock left the pages PageReserved, with a reference each and no
	 * allocation tag.  A free page of an area is a free page to every
	 * debug option: each naturally aligned block gets the page
	 * allocator's free steps, as memory memblock hands to the buddy
	 * allocator does (page_poison fills it, KASAN poisons it,
	 * debug_pagealloc unmaps it, init_on_free clears it), so that the
	 * allocation steps find what they expect (gcma_prep_pages()).
	 */
	for (pfn = base; pfn < end; ) {
		unsigned int order = min3((unsigned int)__ffs(pfn | BIT(MAX_PAGE_ORDER)),
					  (unsigned int)ilog2(end - pfn),
					  (unsigned int)MAX_PAGE_ORDER);
		unsigned long i, n = 1UL << order;

		for (i = 0; i < n; i++) {
			struct page *page = pfn_to_page(pfn + i);

			ClearPageReserved(page);
			set_page_count(page, 0);
		}
		/*
		 * The free steps drop the block's tag, on its first page: mark
		 * that one as never tagged (the others' tags were never set).
		 * Cannot fail: memblock's pages have no state to report.
		 */
		clear_page_tag_ref(pfn_to_page(pfn));
		free_pages_prepare(pfn_to_page(pfn), order);
		pfn += n;
		cond_resched();
	}
	/*
	 * The pageblocks wholly inside the area are isolated for good, so
	 * that memory offlining fails to isolate them (-EBUSY) instead of
	 * retrying for ever on free area pages that never become buddy
	 * pages.  No page of an area is ever on a free list, so no free list
	 * changes.  (alloc_contig_pages() is kept out by a pfn check, as
	 * alloc_contig_range() undoes the isolation of a range it failed to
	 * isolate, others' included.)
	 */
	spin_lock_irqsave(&zone->lock, flags);
	for (pfn = ALIGN(base, pageblock_nr_pages);
	     pfn + pageblock_nr_pages <= end; pfn += pageblock_nr_pages)
		set_pageblock_migratetype(pfn_to_page(pfn), MIGRATE_ISOLATE);
	spin_unlock_irqrestore(&zone->lock, flags);
	WRITE_ONCE(gcma_pfn_lo, min(gcma_pfn_lo, base));
	WRITE_ONCE(gcma_pfn_hi, max(gcma_pfn_hi, base + gcma_nr_pages(area)));
	/* The pages are ready before the area can be seen in service. */
	smp_store_release(&area->rs, rs);
	static_branch_enable(&gcma_in_service);
	gcma_sysfs_add(area);
	gcma_debugfs_add(area);
}

/**
 * __gcma_free_page() - take back a page of an area from the page allocator
 * @page: first page of a block whose last reference is gone, after
 *	free_pages_prepare() succeeded on it
 * @order: order of the block
 *
 * Called by the page allocator's free paths, in any context (interrupts
 * included), through gcma_free_page().  The block is queued on its area
 * and freed in the area's map at the next GCMA call in process context
 * (gcma_drain_freed()): the map's lock is never taken here.
 *
 * Return: true if the block belongs to a GCMA area and was taken; false
 * if the page allocator should free it as usual.
 */
bool __gcma_free_page(struct page *page, unsigned int order)
{
	struct gcma_area *area = gcma_area_of_pfn(page_to_pfn(page));
	unsigned long flags;

	if (!area)
		return false;
	/* A block never straddles the end of an area: it was allocated in it. */
	VM_WARN_ON_ONCE(page_to_pfn(page) + (1UL << order) >
			gcma_base_pfn(area) + gcma_nr_pages(area));
	set_page_private(page, order);
	spin_lock_irqsave(&area->free_lock, flags);
	list_add_tail(&page->lru, &area->freed);
	area->nr_freed += 1UL << order;
	spin_unlock_irqrestore(&area->free_lock, flags);
	return true;
}

/* Frees @count pages from the area's page @start in its map. */
static void gcma_free_range(struct gcma_area *area, unsigned long start,
			    unsigned long count)
{
	int ret = gcma_rs_free(gcma_area_rs(area), start, count);

	if (ret)
		pr_err("%s: %lu freed pages at pfn %#lx are not allocated (%d); leaked\n",
		       area->name, count, gcma_base_pfn(area) + start, ret);
}

/**
 * gcma_drain_freed() - free in the map the blocks the page allocator gave back
 * @area: the area
 *
 * Adjacent blocks are freed together.  Any context that may take the
 * area's map lock (not interrupt context).
 */
void gcma_drain_freed(struct gcma_area *area)
{
	unsigned long base = gcma_base_pfn(area), run = 0, len = 0;
	struct page *page, *next;
	unsigned long flags;
	LIST_HEAD(list);

	if (!gcma_area_rs(area) || list_empty_careful(&area->freed))
		return;
	spin_lock_irqsave(&area->free_lock, flags);
	list_splice_init(&area->freed, &list);
	area->nr_freed = 0;
	spin_unlock_irqrestore(&area->free_lock, flags);

	list_for_each_entry_safe(page, next, &list, lru) {
		unsigned long pfn = page_to_pfn(page);
		unsigned long nr = 1UL << page_private(page);

		list_del(&page->lru);
		set_page_private(page, 0);
		if (len && pfn == base + run + len) {
			len += nr;
			continue;
		}
		if (len)
			gcma_free_range(area, run, len);
		run = pfn - base;
		len = nr;
	}
	if (len)
		gcma_free_range(area, run, len);
}
EXPORT_SYMBOL_GPL(gcma_drain_freed);

/**
 * gcma_lend_page() - make a free page of an area usable by a secondary client
 * @pfn: the page, just lent in the area's map
 *
 * A free page of an area may be poisoned for KASAN and unmapped under
 * debug_pagealloc; it gets the page allocator's allocation steps, but no
 * reference: its refcount stays 0, so the speculative references of pfn
 * walkers fail.  Does not sleep.
 */
void gcma_lend_page(unsigned long pfn)
{
	/*
	 * Allocation profiling counts lent pages here, whoever's reclaim
	 * or swap-out stores a copy in them.
	 */
	DEFINE_ALLOC_TAG(gcma_lend_tag);
	struct alloc_tag * __maybe_unused old = alloc_tag_save(&gcma_lend_tag);

	post_alloc_hook(pfn_to_page(pfn), 0, GFP_NOWAIT | __GFP_NOWARN);
	alloc_tag_restore(&gcma_lend_tag, old);
}
EXPORT_SYMBOL_GPL(gcma_lend_page);

/**
 * gcma_unlend_page() - undo gcma_lend_page()
 * @pfn: the page, about to be returned to the area's map
 *
 * Runs the page allocator's free steps, so the page is in the state of a
 * free page of the area again.  Does not sleep.
 *
 * Return: false if the page was found in a bad state (reported by the
 * free steps); it must then be kept out of use.
 */
bool gcma_unlend_page(unsigned long pfn)
{
	return free_pages_prepare(pfn_to_page(pfn), 0);
}
EXPORT_SYMBOL_GPL(gcma_unlend_page);

/*
 * Whether an allocation with @gfp takes the lent pages its discards free as
 * they are.  Not a compound page: its tail pages must have no reference
 * until it is built, and the handoff marks the pages with one.  Not with
 * tag-based KASAN: a lent page keeps the tag its lending gave it, where the
 * pages of an allocated block share one.
 */
static bool gcma_handoff_ok(gfp_t gfp)
{
	return !(gfp & __GFP_COMP) && !IS_ENABLED(CONFIG_KASAN_SW_TAGS) &&
	       !IS_ENABLED(CONFIG_KASAN_HW_TAGS);
}

/*
 * A lent page may go to an allocation as it is only in the state
 * gcma_lend_page() left it in: no reference, mapping, mapcount, page flag
 * or memcg charge.  The secondary clients only copy into and out of their
 * pages, so anything else is a bug; such a page gets the free steps, whose
 * checks report it.  The reference count is always checked, as the handoff
 * overwrites it; the rest only when the page allocator checks the pages it
 * hands out and takes back (check_pages_enabled: CONFIG_DEBUG_VM, or a page
 * debugging or hardening option).
 */
static bool gcma_lent_page_clean(const struct page *page)
{
	if (page_ref_count(page) || PageHWPoison(page))
		return false;
	if (!static_branch_unlikely(&check_pages_enabled))
		return true;
#ifdef CONFIG_MEMCG
	if (page->memcg_data)
		return false;
#endif
	return atomic_read(&page->_mapcount) == -1 && !page->mapping &&
	       !(page->flags & PAGE_FLAGS_CHECK_AT_PREP);
}

/**
 * gcma_take_discarded() - give an allocation the lent pages a discard freed
 * @pfn: the page of bit 0 of @mask
 * @mask: the pages, a bit each; a secondary client held them and no copy
 *	into or out of them is in flight any more
 * @handoff: as the allocation asked
 *
 * Called by DMEM's discard of the lent pages of a claimed range.  A lent
 * page had the page allocator's allocation steps when it was lent
 * (gcma_lend_page()) and has no reference.  With @handoff the allocation
 * takes it as it is: it gets its reference here, by which
 * gcma_prep_pages() knows it (a free page of an area never has one:
 * speculative references fail on a zero count).
 * page_owner and allocation tags keep the lending as its allocation.
 * Without @handoff, or if the page is not in the state of a lent page, it
 * gets the free steps (gcma_unlend_page()), whose checks report a page in
 * a bad state, and is prepared as a free page.  Does not sleep.
 *
 * Return: how many pages were handed off.
 */
unsigned long gcma_take_discarded(unsigned long pfn, u64 mask, bool handoff)
{
	unsigned long handed = 0;

	while (mask) {
		struct page *page = pfn_to_page(pfn + __ffs64(mask));

		mask &= mask - 1;
		if (handoff && gcma_lent_page_clean(page)) {
			set_page_refcounted(page);
			handed++;
		} else {
			free_pages_prepare(page, 0);
		}
	}
	return handed;
}
EXPORT_SYMBOL_GPL(gcma_take_discarded);

/*
 * The order of the block of free pages from @pfn: at most @order, and no
 * page of it handed off (gcma_take_discarded()).
 */
static unsigned int gcma_free_block_order(unsigned long pfn, unsigned int order)
{
	unsigned long i, n = 1UL << order;

	for (i = 1; i < n; i++)
		if (page_ref_count(pfn_to_page(pfn + i)))
			return ilog2(i);
	return order;
}

/*
 * Give the @count pages from @page the state the page allocator gives an
 * allocation: post_alloc_hook() on each naturally aligned block of free
 * pages (or the whole range for a compound page), then one reference per
 * page, or one on the head of the compound page.  @handed pages of the
 * range were handed off by the discard (gcma_take_discarded()): they have
 * their reference and had the allocation steps, and are only zeroed if the
 * allocation asks for it, or if init_on_free wants the data of a page gone
 * before its next owner.
 */
static void gcma_prep_pages(struct page *page, unsigned long count, gfp_t gfp,
			    unsigned long handed)
{
	unsigned long pfn = page_to_pfn(page), end = pfn + count;
	bool zero = want_init_on_alloc(gfp) || want_init_on_free();

	if (handed == count) {
		/* The whole range, as it is when the area is fully lent. */
		for (; pfn < end; pfn++) {
			if (zero)
				clear_highpage(pfn_to_page(pfn));
			pgalloc_tag_sub(pfn_to_page(pfn), 1);
			pgalloc_tag_add(pfn_to_page(pfn), current, 1);
		}
		return;
	}
	if (gfp & __GFP_COMP) {
		unsigned int order = ilog2(count);

		post_alloc_hook(page, order, gfp);
		set_page_refcounted(page);
		prep_compound_page(page, order);
		return;
	}
	while (pfn < end) {
		struct page *p = pfn_to_page(pfn);
		unsigned int order;

		if (handed && page_ref_count(p)) {
			if (zero)
				clear_highpage(p);
			/* The allocation's tag replaces the lending's. */
			pgalloc_tag_sub(p, 1);
			pgalloc_tag_add(p, current, 1);
			pfn++;
			continue;
		}
		order = min3((unsigned int)__ffs(pfn | BIT(MAX_PAGE_ORDER)),
			     (unsigned int)ilog2(end - pfn), (unsigned int)MAX_PAGE_ORDER);
		if (handed)
			order = gcma_free_block_order(pfn, order);
		post_alloc_hook(p, order, gfp);
		set_page_refcounted(p);
		if (order)
			split_page(p, order);
		pfn += 1UL << order;
	}
}

/**
 * gcma_alloc_gfp_noprof() - allocate contiguous pages from a GCMA area
 * @area: the area
 * @count: number of pages
 * @align: alignment of the first page, as a page order
 * @gfp: passed to the page allocator's allocation steps (__GFP_ZERO,
 *	and init_on_alloc, zero the pages); __GFP_NOWARN is honoured; with
 *	__GFP_COMP, @count must be a power of two and the pages form one
 *	compound page (a folio of that order, aligned to its size)
 *
 * The first page's frame number is a multiple of 1 << @align.  May sleep:
 * the pages of secondary clients in the range are discarded first.
 *
 * The caller's allocation tag (current->alloc_tag) counts the pages in
 * /proc/allocinfo: callers without one use gcma_alloc_gfp().
 *
 * Return: the first page, or NULL if @count is 0, the area is not in
 * service or has no free range of @count pages at that alignment, or
 * __GFP_COMP is asked for a count that is not a power of two.
 */
struct page *gcma_alloc_gfp_noprof(struct gcma_area *area, unsigned long count,
				   unsigned int align, gfp_t gfp)
{
	const void *rs = gcma_area_rs(area);
	unsigned long start, handed = 0;
	struct page *page = NULL;
	u64 t0, ns;
	int ret;

	might_sleep();
	if (!rs || !count)
		return NULL;
	gcma_drain_freed(area);
	if (count == 1)
		gfp &= ~__GFP_COMP;	/* an order-0 page is never compound */
	if (gfp & __GFP_COMP) {
		if (!is_power_of_2(count)) {
			pr_warn_ratelimited("%s: a compound allocation needs a power-of-two count, not %lu\n",
					    area->name, count);
			return NULL;
		}
		align = max_t(unsigned int, align, ilog2(count));
	}
	trace_gcma_alloc_start(area->name, count, align);
	/*
	 * local_clock(): cheap on every machine, where ktime_get_ns() may
	 * read a slow clocksource (HPET).  The caller may move to another
	 * CPU meanwhile; a negative difference counts as 0.
	 */
	t0 = local_clock();
	ret = gcma_rs_alloc(rs, count, align, gcma_handoff_ok(gfp), &start,
			    &handed);
	if (!ret) {
		page = pfn_to_page(gcma_base_pfn(area) + start);
		gcma_prep_pages(page, count, gfp, handed);
	}
	ns = local_clock() - t0;
	if ((s64)ns < 0)
		ns = 0;
	atomic_long_inc(&area->lat[min(ns ? ilog2(ns) : 0, GCMA_LAT_BUCKETS - 1)]);
	trace_gcma_alloc_finish(area->name, page ? page_to_pfn(page) : -1UL,
				count, align, ret, ns);
	if (ret && !(gfp & __GFP_NOWARN))
		pr_err_ratelimited("%s: alloc of %lu pages (align %u) failed: %d\n",
				   area->name, count, align, ret);
	return page;
}
EXPORT_SYMBOL_GPL(gcma_alloc_gfp_noprof);

/*
 * gcma_alloc_gfp_noprof() with its own allocation tag: /proc/allocinfo
 * counts the GCMA allocations made through it (CMA's included) here.
 */
struct page *gcma_alloc_gfp(struct gcma_area *area, unsigned long count,
			    unsigned int align, gfp_t gfp)
{
	return alloc_hooks(gcma_alloc_gfp_noprof(area, count, align, gfp));
}
EXPORT_SYMBOL_GPL(gcma_alloc_gfp);

struct page *gcma_alloc(struct gcma_area *area, unsigned long count,
			unsigned int align, bool no_warn)
{
	return alloc_hooks(gcma_alloc_gfp_noprof(area, count, align,
						 GFP_KERNEL | (no_warn ? __GFP_NOWARN : 0)));
}
EXPORT_SYMBOL_GPL(gcma_alloc);

/*
 * Why the range of @count pages from @page cannot be released, or NULL: a
 * compound page is released whole, and a range of plain pages must not
 * run into one.
 */
static const char *gcma_release_shape(struct page *page, unsigned long count)
{
	unsigned long i;

	if (PageHead(page))
		return folio_nr_pages(page_folio(page)) == count ?
		       NULL : "not the whole folio";
	for (i = 0; i < count; i++)
		if (PageCompound(nth_page(page, i)))
			return "part of a folio";
	return NULL;
}

/*
 * Drop the owner's reference of each of the @count plain pages from @page
 * (area page @start on).  A page whose reference was the last is freed
 * now; one still referenced elsewhere is freed by the page allocator's
 * free path (gcma_free_page()) when its last reference goes.
 */
static void gcma_put_pages(struct gcma_area *area, struct page *page,
			   unsigned long start, unsigned long count)
{
	unsigned long i, run = 0;

	for (i = 0; i < count; i++) {
		struct page *p = nth_page(page, i);

		if (put_page_testzero(p)) {
			if (free_pages_prepare(p, 0))
				continue;
			/*
			 * Hardware-poisoned, or found in a bad state (reported
			 * by free_pages_prepare()): kept out of use, as the
			 * buddy allocator does.
			 */
			if (PageHWPoison(p))
				gcma_rs_retire(gcma_area_rs(area), start + i);
		}
		/* Or still referenced: freed when its last reference goes. */
		if (i > run)
			gcma_free_range(area, start + run, i - run);
		run = i + 1;
	}
	if (count > run)
		gcma_free_range(area, start + run, count - run);
}

/*
 * cma_release() may be called where CMA's own release is safe, softirq and
 * hardirq context included (dma_free_attrs() from a completion handler),
 * but the area's map lock is taken in process context with interrupts on.
 * A release from any other context is queued here and done by a work item
 * through gcma_release(): the allocation's first page lends its lru and
 * private fields to the queue, which nothing else uses while the caller
 * still owns the pages.  The checks for a bad release are made then.
 */
static bool gcma_defer_release(struct gcma_area *area, struct page *page,
			       unsigned long count)
{
	unsigned long flags;

	/*
	 * The fields are the owner's: a tail page's lru.next is its
	 * compound_head, and a page without a reference may sit in the free
	 * queue.  Either is a caller's bug; refuse it here as the process
	 * context path would.
	 */
	if (PageTail(page) || !page_ref_count(page) || !count) {
		pr_err_ratelimited("%s: ignoring release of %lu pages at pfn %#lx from interrupt context: not an allocation's first page\n",
				   area->name, count, page_to_pfn(page));
		return true;
	}
	set_page_private(page, count);
	spin_lock_irqsave(&area->free_lock, flags);
	list_add_tail(&page->lru, &area->deferred);
	spin_unlock_irqrestore(&area->free_lock, flags);
	schedule_work(&area->release_work);
	return true;
}

static void gcma_release_deferred(struct work_struct *work)
{
	struct gcma_area *area = container_of(work, struct gcma_area,
					      release_work);
	struct page *page, *next;
	unsigned long flags;
	LIST_HEAD(list);

	spin_lock_irqsave(&area->free_lock, flags);
	list_splice_init(&area->deferred, &list);
	spin_unlock_irqrestore(&area->free_lock, flags);
	list_for_each_entry_safe(page, next, &list, lru) {
		unsigned long count = page_private(page);

		list_del_init(&page->lru);
		set_page_private(page, 0);
		gcma_release(area, page, count);
	}
}

/**
 * gcma_flush_releases() - wait until releases queued from interrupt
 *	context are done
 * @area: the area
 *
 * Context: process context; may sleep.
 */
void gcma_flush_releases(struct gcma_area *area)
{
	flush_work(&area->release_work);
}
EXPORT_SYMBOL_GPL(gcma_flush_releases);

/**
 * gcma_release() - release pages allocated by gcma_alloc()
 * @area: the area
 * @pages: first page
 * @count: number of pages; plain pages may be released piecewise, a
 *	compound page (from __GFP_COMP) only whole
 *
 * Drops the allocation's reference of every page.  Pages nobody else
 * references are free in the area when this returns; a page someone
 * still holds (a speculative reference of a pfn walker, a pin) stays
 * allocated, counted in release_pending_pages, until its last reference
 * goes: the page allocator's free path then hands it back to GCMA.  Pages
 * of an area never reach the buddy allocator.
 *
 * Context: any context in which cma_release() may be called.  Outside
 * process context the release is queued and done shortly after by a work
 * item (gcma_flush_releases() waits for it).
 *
 * Return: false if @pages is not in @area (the caller must free the pages
 * elsewhere); true otherwise, including for a release GCMA refuses
 * because it is a caller's bug (pages not allocated or released already,
 * part of a compound page): that is logged, and nothing changes.
 */
bool gcma_release(struct gcma_area *area, const struct page *pages,
		  unsigned long count)
{
	const void *rs = gcma_area_rs(area);
	unsigned long pfn, start;
	struct page *page;
	const char *why;
	int ret;

	if (!rs || !pages)
		return false;
	pfn = page_to_pfn(pages);
	if (pfn < gcma_base_pfn(area) ||
	    pfn >= gcma_base_pfn(area) + gcma_nr_pages(area))
		return false;
	start = pfn - gcma_base_pfn(area);
	page = pfn_to_page(pfn);
	if (!in_task())
		return gcma_defer_release(area, page, count);
	/* Pages freed behind GCMA's back are not released twice. */
	gcma_drain_freed(area);

	if (!count || count > gcma_nr_pages(area) - start)
		why = "range not in the area";
	else
		why = gcma_release_shape(page, count);
	if (!why) {
		ret = gcma_rs_begin_release(rs, start, count);
		if (ret == -EEXIST)
			why = "released already (double free)";
		else if (ret)
			why = "not allocated (double free?)";
	}
	if (why) {
		pr_err_ratelimited("%s: ignoring release of %lu pages at pfn %#lx: %s\n",
				   area->name, count, pfn, why);
		trace_gcma_release(area->name, pfn, count, false);
		return true;
	}

	if (PageHead(page)) {
		/* Through __folio_put(): teardown and free path as for any folio. */
		folio_put(page_folio(page));
	} else {
		gcma_put_pages(area, page, start, count);
	}
	/* A folio freed just now waits in the queue. */
	gcma_drain_freed(area);
	trace_gcma_release(area->name, pfn, count, true);
	return true;
}
EXPORT_SYMBOL_GPL(gcma_release);

/**
 * gcma_stats() - snapshot the counters of an area
 * @area: the area
 * @st: filled in; all zero if the area is not in service
 */
void gcma_stats(struct gcma_area *area, struct gcma_stats *st)
{
	const void *rs = gcma_area_rs(area);

	memset(st, 0, sizeof(*st));
	if (!rs)
		return;
	gcma_drain_freed(area);
	gcma_rs_stats(rs, st);
}
EXPORT_SYMBOL_GPL(gcma_stats);

#ifdef CONFIG_SYSFS
struct gcma_kobject {
	struct kobject kobj;
	struct gcma_area *area;
};

static struct kobject *gcma_sysfs_root;

/* /sys/kernel/mm/gcma, or NULL before the first area is in service. */
struct kobject *gcma_sysfs_dir(void)
{
	return gcma_sysfs_root;
}

static struct gcma_area *gcma_kobj_area(struct kobject *kobj)
{
	return container_of(kobj, struct gcma_kobject, kobj)->area;
}

struct gcma_stat_attr {
	struct kobj_attribute attr;
	size_t offset;		/* of the counter in struct gcma_stats */
};

static ssize_t gcma_stat_show(struct kobject *kobj,
			      struct kobj_attribute *attr, char *buf)
{
	struct gcma_stat_attr *sa = container_of(attr, struct gcma_stat_attr, attr);
	struct gcma_stats st;

	gcma_stats(gcma_kobj_area(kobj), &st);
	return sysfs_emit(buf, "%llu\n", *(u64 *)((char *)&st + sa->offset));
}

static struct gcma_stat_attr gcma_stat_attrs[] = {
	{ __ATTR(total_pages, 0444, gcma_stat_show, NULL),
	  offsetof(struct gcma_stats, total_pages) },
	{ __ATTR(primary_used_pages, 0444, gcma_stat_show, NULL),
	  offsetof(struct gcma_stats, primary_used_pages) },
	{ __ATTR(secondary_lent_pages, 0444, gcma_stat_show, NULL),
	  offsetof(struct gcma_stats, secondary_lent_pages) },
	{ __ATTR(alloc_success, 0444, gcma_stat_show, NULL),
	  offsetof(struct gcma_stats, alloc_success) },
	{ __ATTR(alloc_fail, 0444, gcma_stat_show, NULL),
	  offsetof(struct gcma_stats, alloc_fail) },
	{ __ATTR(discarded_pages, 0444, gcma_stat_show, NULL),
	  offsetof(struct gcma_stats, discarded_pages) },
	{ __ATTR(release_pending_pages, 0444, gcma_stat_show, NULL),
	  offsetof(struct gcma_stats, release_pending_pages) },
	{ __ATTR(hwpoisoned_pages, 0444, gcma_stat_show, NULL),
	  offsetof(struct gcma_stats, hwpoisoned_pages) },
};

/* 1 for an area reserved with ":thp" (transparent huge pages only). */
static ssize_t thp_show(struct kobject *kobj, struct kobj_attribute *attr,
			char *buf)
{
	return sysfs_emit(buf, "%d\n", gcma_kobj_area(kobj)->thp);
}

static struct kobj_attribute gcma_thp_attr = __ATTR_RO(thp);

static struct attribute *gcma_attrs[] = {
	&gcma_stat_attrs[0].attr.attr,
	&gcma_stat_attrs[1].attr.attr,
	&gcma_stat_attrs[2].attr.attr,
	&gcma_stat_attrs[3].attr.attr,
	&gcma_stat_attrs[4].attr.attr,
	&gcma_stat_attrs[5].attr.attr,
	&gcma_stat_attrs[6].attr.attr,
	&gcma_stat_attrs[7].attr.attr,
	&gcma_thp_attr.attr,
	NULL,
};
ATTRIBUTE_GROUPS(gcma);

static void gcma_kobj_release(struct kobject *kobj)
{
	kfree(container_of(kobj, struct gcma_kobject, kobj));
}

static const struct kobj_type gcma_ktype = {
	.release = gcma_kobj_release,
	.sysfs_ops = &kobj_sysfs_ops,
	.default_groups = gcma_groups,
};

static void gcma_sysfs_add(struct gcma_area *area)
{
	struct gcma_kobject *gk;

	if (!gcma_sysfs_root) {
		gcma_sysfs_root = kobject_create_and_add("gcma", mm_kobj);
		if (!gcma_sysfs_root)
			goto fail;
	}
	gk = kzalloc(sizeof(*gk), GFP_KERNEL);
	if (!gk)
		goto fail;
	gk->area = area;
	if (kobject_init_and_add(&gk->kobj, &gcma_ktype, gcma_sysfs_root,
				 "%s", area->name)) {
		kobject_put(&gk->kobj);
		goto fail;
	}
	area->kobj = &gk->kobj;
	return;
fail:
	pr_warn("%s: no sysfs directory\n", area->name);
}
#else
static void gcma_sysfs_add(struct gcma_area *area) { }
#endif

#ifdef CONFIG_DEBUG_FS
static int gcma_latency_show(struct seq_file *m, void *unused)
{
	struct gcma_area *area = m->private;
	unsigned int i;

	seq_puts(m, "# allocations taking [2^i, 2^(i+1)) ns\n");
	for (i = 0; i < GCMA_LAT_BUCKETS; i++) {
		long n = atomic_long_read(&area->lat[i]);

		if (n)
			seq_printf(m, "%12llu %ld\n", 1ULL << i, n);
	}
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(gcma_latency);

/**
 * gcma_debugfs_root() - the directory /sys/kernel/debug/gcma
 *
 * Created at the first call.  Called at boot only, from initcalls, which
 * run one at a time.
 *
 * Return: the directory (an error pointer if it could not be made; the
 * debugfs calls ignore such a parent).
 */
struct dentry *gcma_debugfs_root(void)
{
	static struct dentry *root;

	if (!root)
		root = debugfs_create_dir("gcma", NULL);
	return root;
}

static void gcma_debugfs_add(struct gcma_area *area)
{
	struct dentry *dir;

	dir = debugfs_create_dir(area->name, gcma_debugfs_root());
	debugfs_create_file("alloc_latency", 0444, dir, area,
			    &gcma_latency_fops);
}
#else
static void gcma_debugfs_add(struct gcma_area *area) { }
#endif
