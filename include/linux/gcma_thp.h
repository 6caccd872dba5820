/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Guaranteed THP: GCMA areas marked ":thp" as a source of PMD-sized
 * anonymous folios for the huge page fault and khugepaged's collapse.
 *
 * Each wrapper below replaces one allocation call of those paths.  While
 * the static key is off (mode "never", no THP area, or CONFIG_GCMA_THP=n)
 * it is that call and nothing else.  When it is on, the call goes to
 * Rust (mm/gcma_rs/thp.rs), which decides where to look, in which order:
 * the buddy allocator, a GCMA THP area, or both.
 * A full area is an ordinary allocation failure: the caller falls back to
 * base pages as it always does.  See Documentation/mm/gcma.rst.
 */
#ifndef _LINUX_GCMA_THP_H
#define _LINUX_GCMA_THP_H

#include <linux/alloc_tag.h>
#include <linux/gfp.h>
#include <linux/jump_label.h>
#include <linux/mm_types.h>
#include <linux/nodemask.h>
#include <linux/pgtable.h>

#ifdef CONFIG_GCMA_THP
DECLARE_STATIC_KEY_FALSE(gcma_thp_on);	/* also in <linux/gcma.h>, for Rust */
struct folio *__gcma_vma_alloc_thp(gfp_t gfp, struct vm_area_struct *vma,
				   unsigned long haddr);
struct folio *__gcma_collapse_alloc_thp(gfp_t gfp, int nid, nodemask_t *nmask);
#endif

/**
 * gcma_vma_alloc_thp() - allocate the folio of an anonymous PMD fault
 * @gfp: the fault's THP allocation flags (vma_thp_gfp_mask())
 * @vma: the faulting VMA, locked by the fault path
 * @haddr: the PMD-aligned address
 *
 * A macro, as vma_alloc_folio() is: allocation profiling counts the folio,
 * from the buddy allocator or an area, at the caller's line.
 *
 * Return: a large rmappable folio of PMD order, or NULL (fall back).
 */
#define gcma_vma_alloc_thp(...)	alloc_hooks(gcma_vma_alloc_thp_noprof(__VA_ARGS__))
static inline struct folio *gcma_vma_alloc_thp_noprof(gfp_t gfp,
						      struct vm_area_struct *vma,
						      unsigned long haddr)
{
#ifdef CONFIG_GCMA_THP
	if (static_branch_unlikely(&gcma_thp_on))
		return __gcma_vma_alloc_thp(gfp, vma, haddr);
#endif
	return vma_alloc_folio_noprof(gfp, PMD_ORDER, vma, haddr, true);
}

/**
 * gcma_collapse_alloc_thp() - allocate the folio of a khugepaged collapse
 * @gfp: the collapse's allocation flags
 * @nid: the preferred node
 * @nmask: the allowed nodes
 * @anon: an anonymous collapse; GCMA serves no other
 *
 * A macro, as __folio_alloc() is (see gcma_vma_alloc_thp()).
 *
 * Return: a large rmappable folio of PMD order, or NULL.
 */
#define gcma_collapse_alloc_thp(...) \
	alloc_hooks(gcma_collapse_alloc_thp_noprof(__VA_ARGS__))
static inline struct folio *gcma_collapse_alloc_thp_noprof(gfp_t gfp, int nid,
							   nodemask_t *nmask,
							   bool anon)
{
#ifdef CONFIG_GCMA_THP
	if (anon && static_branch_unlikely(&gcma_thp_on))
		return __gcma_collapse_alloc_thp(gfp, nid, nmask);
#endif
	return __folio_alloc_noprof(gfp, PMD_ORDER, nid, nmask);
}

#endif /* _LINUX_GCMA_THP_H */
