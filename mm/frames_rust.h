/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The page allocator's steps for kernel::mm::frames (Rust): page frames
 * that an allocator of its own owns outside the buddy allocator.
 *
 * These forward to what mm/internal.h declares for the allocators inside
 * mm/, and to the page reference and tag steps around them; and, for
 * allocators that serve the THP fault and collapse (kernel::mm::mempolicy),
 * to the nodes of a memory policy and the making of a THP's folio.  They are
 * plain functions of vmlinux, not rust/helpers: those are exported to
 * modules, and none of these may be.
 */
#ifndef _MM_FRAMES_RUST_H
#define _MM_FRAMES_RUST_H

#include <linux/gfp_types.h>
#include <linux/nodemask_types.h>
#include <linux/types.h>

struct folio;
struct mempolicy;
struct page;
struct zone;

void rsmm_frames_post_alloc_hook(struct page *page, unsigned int order,
				 gfp_t gfp);
bool rsmm_frames_free_pages_prepare(struct page *page, unsigned int order);
void rsmm_frames_prep_compound_page(struct page *page, unsigned int order);
void rsmm_frames_set_page_refcounted(struct page *page);
void rsmm_frames_set_page_count(struct page *page, int v);
void rsmm_frames_clear_page_reserved(struct page *page);
void rsmm_frames_clear_page_tag_ref(struct page *page);
void rsmm_frames_pgalloc_tag_sub(struct page *page, unsigned int nr);
void rsmm_frames_pgalloc_tag_add_current(struct page *page, unsigned int nr);
bool rsmm_frames_check_pages_enabled(void);
unsigned long rsmm_frames_zone_lock_irqsave(struct zone *zone);
void rsmm_frames_zone_unlock_irqrestore(struct zone *zone, unsigned long flags);
void rsmm_frames_set_pageblock_migratetype(struct page *page, int mt);

/*
 * For kernel::mm::mempolicy and kernel::mm::folio: the nodes of a memory
 * policy, and the folio of a THP the page allocator makes.
 */
#ifdef CONFIG_NUMA
nodemask_t *rsmm_policy_nodemask(gfp_t gfp, struct mempolicy *pol, pgoff_t ilx,
				 int *nid);
#endif
struct folio *rsmm_page_rmappable_folio(struct page *page);

#endif /* _MM_FRAMES_RUST_H */
