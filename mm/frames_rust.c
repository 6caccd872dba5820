// SPDX-License-Identifier: GPL-2.0
/*
 * The page allocator's steps for kernel::mm::frames (see frames_rust.h).
 * One-line forwarders of what is inline or mm-internal; never exported.
 */

#include <linux/mm.h>
#include <linux/page-isolation.h>
#include <linux/pgalloc_tag.h>

#include "frames_rust.h"
#include "internal.h"

void rsmm_frames_post_alloc_hook(struct page *page, unsigned int order,
				 gfp_t gfp)
{
	post_alloc_hook(page, order, gfp);
}

bool rsmm_frames_free_pages_prepare(struct page *page, unsigned int order)
{
	return free_pages_prepare(page, order);
}

void rsmm_frames_prep_compound_page(struct page *page, unsigned int order)
{
	prep_compound_page(page, order);
}

void rsmm_frames_set_page_refcounted(struct page *page)
{
	set_page_refcounted(page);
}

void rsmm_frames_set_page_count(struct page *page, int v)
{
	set_page_count(page, v);
}

void rsmm_frames_clear_page_reserved(struct page *page)
{
	ClearPageReserved(page);
}

void rsmm_frames_clear_page_tag_ref(struct page *page)
{
	clear_page_tag_ref(page);
}

void rsmm_frames_pgalloc_tag_sub(struct page *page, unsigned int nr)
{
	pgalloc_tag_sub(page, nr);
}

void rsmm_frames_pgalloc_tag_add_current(struct page *page, unsigned int nr)
{
	pgalloc_tag_add(page, current, nr);
}

bool rsmm_frames_check_pages_enabled(void)
{
	return static_branch_unlikely(&check_pages_enabled);
}

unsigned long rsmm_frames_zone_lock_irqsave(struct zone *zone)
{
	unsigned long flags;

	spin_lock_irqsave(&zone->lock, flags);
	return flags;
}

void rsmm_frames_zone_unlock_irqrestore(struct zone *zone, unsigned long flags)
{
	spin_unlock_irqrestore(&zone->lock, flags);
}

void rsmm_frames_set_pageblock_migratetype(struct page *page, int mt)
{
	set_pageblock_migratetype(page, mt);
}

#ifdef CONFIG_NUMA
nodemask_t *rsmm_policy_nodemask(gfp_t gfp, struct mempolicy *pol, pgoff_t ilx,
				 int *nid)
{
	return policy_nodemask(gfp, pol, ilx, nid);
}
#endif

struct folio *rsmm_page_rmappable_folio(struct page *page)
{
	return page_rmappable_folio(page);
}
