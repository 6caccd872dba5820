// SPDX-License-Identifier: GPL-2.0
/*
 * GCMA: the C glue of contiguous allocations.
 *
 * The allocator, struct page state included, is Rust (gcma.rs, entry.rs,
 * and kernel::mm::frames for the page allocator's steps).  This file holds
 * what Rust cannot express in 6.12:
 *
 * - the static key and pfn span that the page allocator's free paths test
 *   (gcma_free_page() in <linux/gcma.h>): static keys are C objects;
 * - the tracepoints gcma:gcma_alloc_start, gcma_alloc_finish and
 *   gcma_release, and the rate-limited messages of failed calls;
 * - allocation tags: gcma_alloc() and gcma_alloc_gfp() count the pages
 *   they allocate under their caller's tag, and pages lent to DMEM are
 *   counted under a tag of their own; a tag is a static object that a C
 *   macro makes.
 *
 * The sysfs and debugfs files are Rust (sysfs.rs, debugfs.rs).
 *
 * Nothing here touches a struct page.
 */

#define pr_fmt(fmt) "gcma: " fmt

#include <linux/alloc_tag.h>
#include <linux/gcma.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/static_key.h>

#define CREATE_TRACE_POINTS
#include <trace/events/gcma.h>

/* On once an area is in service: the page free paths then check pfns. */
DEFINE_STATIC_KEY_FALSE(gcma_in_service);
/*
 * The span of the areas in service, widened before each area is published
 * (gcma_area_enter_service(): no page of an area can be freed before then,
 * none was allocated), under gcma_service_lock.
 */
unsigned long gcma_pfn_lo = ULONG_MAX, gcma_pfn_hi;
static DEFINE_MUTEX(gcma_service_lock);

/**
 * gcma_area_enter_service() - make the page free paths check an area's pfns
 * @area: the area, about to be put in service
 *
 * Called once per area by the Rust crate at subsys_initcall time
 * (kernel::mm::gcma::ReservedArea::enter_service()), before the first
 * allocation can find the area: no page of it can be freed before the
 * free paths send its pages back to GCMA.  Also marks the area in service
 * for gcma_device_cma(), a moment before the crate publishes its state:
 * the dma-buf heaps, which look, register at device_initcall time.
 * Another call changes nothing.  May sleep.
 */
void gcma_area_enter_service(struct gcma_area *area)
{
	unsigned long base = PHYS_PFN(area->base);

	mutex_lock(&gcma_service_lock);
	WRITE_ONCE(gcma_pfn_lo, min(gcma_pfn_lo, base));
	WRITE_ONCE(gcma_pfn_hi, max(gcma_pfn_hi, base + (area->size >> PAGE_SHIFT)));
	static_branch_enable(&gcma_in_service);
	WRITE_ONCE(area->in_service, true);
	mutex_unlock(&gcma_service_lock);
}

void gcma_trace_alloc_start(const struct gcma_area *area, unsigned long count,
			    unsigned int align)
{
	trace_gcma_alloc_start(area->name, count, align);
}

void gcma_alloc_done(const struct gcma_area *area, unsigned long pfn,
		     unsigned long count, unsigned int align, int ret, u64 ns,
		     gfp_t gfp)
{
	trace_gcma_alloc_finish(area->name, pfn, count, align, ret, ns);
	if (ret && !(gfp & __GFP_NOWARN))
		pr_err_ratelimited("%s: alloc of %lu pages (align %u) failed: %d\n",
				   area->name, count, align, ret);
}

void gcma_warn_compound_count(const struct gcma_area *area, unsigned long count)
{
	pr_warn_ratelimited("%s: a compound allocation needs a power-of-two count, not %lu\n",
			    area->name, count);
}

void gcma_release_done(const struct gcma_area *area, unsigned long pfn,
		       unsigned long count)
{
	trace_gcma_release(area->name, pfn, count, true);
}

void gcma_release_refused(const struct gcma_area *area, unsigned long pfn,
			  unsigned long count, const char *why)
{
	pr_err_ratelimited("%s: ignoring release of %lu pages at pfn %#lx: %s\n",
			   area->name, count, pfn, why);
	trace_gcma_release(area->name, pfn, count, false);
}

/*
 * gcma_alloc_gfp_noprof() (Rust) with an allocation tag of its own:
 * /proc/allocinfo counts the GCMA allocations made through it (CMA's
 * included) here.
 */
struct page *gcma_alloc_gfp(struct gcma_area *area, unsigned long count,
			    unsigned int align, gfp_t gfp)
{
	return alloc_hooks(gcma_alloc_gfp_noprof(area, count, align, gfp));
}

/*
 * cma_release() and the KUnit suites give the first page; the Rust side
 * (__gcma_release()) takes its page frame number.
 */
bool gcma_release(struct gcma_area *area, const struct page *pages,
		  unsigned long count)
{
	return pages && __gcma_release(area, page_to_pfn(pages), count);
}

struct page *gcma_alloc(struct gcma_area *area, unsigned long count,
			unsigned int align, bool no_warn)
{
	return alloc_hooks(gcma_alloc_gfp_noprof(area, count, align,
						 GFP_KERNEL | (no_warn ? __GFP_NOWARN : 0)));
}

/**
 * gcma_lend_tag_enter() - make the tag of lent pages current
 * @old: set to the tag that was current, for gcma_lend_tag_exit()
 *
 * Allocation profiling counts pages lent to DMEM under this tag, whoever's
 * reclaim or swap-out stores a copy in them.
 *
 * Return: the tag made current (NULL without allocation profiling).
 */
struct alloc_tag *gcma_lend_tag_enter(struct alloc_tag **old)
{
#ifdef CONFIG_MEM_ALLOC_PROFILING
	DEFINE_ALLOC_TAG(gcma_lend_tag);

	*old = alloc_tag_save(&gcma_lend_tag);
	return &gcma_lend_tag;
#else
	*old = NULL;
	return NULL;
#endif
}

/* Restores @old, checking (under debugging) that @tag is still current. */
void gcma_lend_tag_exit(struct alloc_tag *tag, struct alloc_tag *old)
{
	alloc_tag_restore(tag, old);
}
