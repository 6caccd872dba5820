// SPDX-License-Identifier: GPL-2.0
/*
 * GCMA: guaranteed transparent huge pages, the C side.
 *
 * An area reserved with "gcma=<size>[@<base>]:thp" serves PMD-sized
 * anonymous folios when the buddy allocator has no free block of that
 * order.  The policy, the choice of area and the allocations the fault
 * and collapse paths make through include/linux/gcma_thp.h are Rust
 * (thp.rs, on kernel::mm::mempolicy): an area is used only if its node is
 * one the buddy allocation would be allowed to use, the preferred node's
 * first.  So are the files of /sys/kernel/mm/gcma/thp/ (sysfs.rs) and the
 * mode's switch, which flips the static key under the mode's mutex
 * (thp::set_mode(), on kernel::jump_label).
 *
 * The folio is an ordinary compound page of the area (gcma_alloc_gfp()
 * with __GFP_COMP); its caller charges it to the memcg and maps it like
 * any THP.  However it is freed later (whole, split into base pages,
 * after migration), its pages reach the page allocator's free path, whose
 * pfn check (gcma_free_page()) returns them to the area.
 *
 * This is C for what 6.12 gives Rust no way to do: "gcma.thp_mode=", an
 * early parameter parsed before the Rust crate starts, the definition of
 * the static key that include/linux/gcma_thp.h tests, and the
 * allocation-tag macro of the KUnit suite's allocation.
 */

#define pr_fmt(fmt) "gcma: " fmt

#include <linux/gcma.h>
#include <linux/gcma_thp.h>
#include <linux/init.h>
#include <linux/mm.h>
#include <linux/string.h>
#include <linux/topology.h>

/* On while the mode is not "never" and a THP area is in service. */
DEFINE_STATIC_KEY_FALSE(gcma_thp_on);

static const char *const gcma_thp_mode_names[GCMA_THP_NR_MODES] = {
	[GCMA_THP_NEVER] = "never",
	[GCMA_THP_FALLBACK] = "fallback",
	[GCMA_THP_ALWAYS] = "always",
};

/* Read by thp.rs at subsys_initcall time, when it applies the mode. */
static unsigned int gcma_thp_mode_param = GCMA_THP_FALLBACK;

static int __init gcma_thp_parse_mode(char *arg)
{
	int mode = arg ? match_string(gcma_thp_mode_names,
				      GCMA_THP_NR_MODES, arg) : -EINVAL;

	if (mode < 0) {
		pr_err("gcma.thp_mode=%s: expected never, fallback or always; stays %s\n",
		       arg ?: "", gcma_thp_mode_names[gcma_thp_mode_param]);
		return -EINVAL;
	}
	gcma_thp_mode_param = mode;
	return 0;
}
early_param("gcma.thp_mode", gcma_thp_parse_mode);

unsigned int gcma_thp_boot_mode(void)
{
	return gcma_thp_mode_param;
}

#ifdef CONFIG_GCMA_KUNIT_TEST
/* For the KUnit suite (thp_tests.rs): a collapse's allocation, as it asks. */
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
#endif
