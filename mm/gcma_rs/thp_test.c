// SPDX-License-Identifier: GPL-2.0
/*
 * C helpers of guaranteed THP's KUnit suite (thp_tests.rs): what the
 * suite needs of C macros.  A collapse's allocation goes through
 * alloc_hooks(), which makes the allocation tag of its call site, and the
 * last reference of a folio is dropped with interrupts off, as some free
 * paths do.
 */

#include <linux/gcma.h>
#include <linux/gcma_thp.h>
#include <linux/mm.h>
#include <linux/topology.h>

/* A collapse's allocation, as khugepaged asks for it. */
struct folio *gcma_thp_test_collapse_alloc(void)
{
	return alloc_hooks(__gcma_collapse_alloc_thp(GFP_TRANSHUGE, numa_node_id(),
						     NULL));
}

/* Drops the last reference, with interrupts off if @irqs_off. */
void gcma_thp_test_put(struct folio *folio, bool irqs_off)
{
	unsigned long flags;

	if (irqs_off) {
		local_irq_save(flags);
		folio_put(folio);
		local_irq_restore(flags);
	} else {
		folio_put(folio);
	}
}
