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
 * first.  The files of /sys/kernel/mm/gcma/thp/ are Rust too (sysfs.rs)
 * and set the mode through gcma_thp_set_mode().
 *
 * The folio is an ordinary compound page of the area (gcma_alloc_gfp()
 * with __GFP_COMP); its caller charges it to the memcg and maps it like
 * any THP.  However it is freed later (whole, split into base pages,
 * after migration), its pages reach the page allocator's free path, whose
 * pfn check (gcma_free_page()) returns them to the area.
 *
 * This is C for what 6.12 gives Rust no way to do: "gcma.thp_mode=", an
 * early parameter parsed before the Rust crate starts, the static key
 * and the mutex that serialises it with the mode (no static mutex in
 * 6.12's Rust), and the allocation-tag macro of the KUnit suite's
 * allocation.
 */

#define pr_fmt(fmt) "gcma: " fmt

#include <linux/gcma.h>
#include <linux/gcma_thp.h>
#include <linux/init.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/string.h>
#include <linux/topology.h>

/* On while the mode is not "never" and a THP area is in service. */
DEFINE_STATIC_KEY_FALSE(gcma_thp_on);

static const char *const gcma_thp_mode_names[GCMA_THP_NR_MODES] = {
	[GCMA_THP_NEVER] = "never",
	[GCMA_THP_FALLBACK] = "fallback",
	[GCMA_THP_ALWAYS] = "always",
};

/* Serialises mode changes with the static key that follows them. */
static DEFINE_MUTEX(gcma_thp_mode_lock);
static unsigned int gcma_thp_boot_mode __initdata = GCMA_THP_FALLBACK;

static int __init gcma_thp_parse_mode(char *arg)
{
	int mode = arg ? match_string(gcma_thp_mode_names,
				      GCMA_THP_NR_MODES, arg) : -EINVAL;

	if (mode < 0) {
		pr_err("gcma.thp_mode=%s: expected never, fallback or always; stays %s\n",
		       arg ?: "", gcma_thp_mode_names[gcma_thp_boot_mode]);
		return -EINVAL;
	}
	gcma_thp_boot_mode = mode;
	return 0;
}
early_param("gcma.thp_mode", gcma_thp_parse_mode);

/* Sets @mode and the static key; caller holds gcma_thp_mode_lock. */
static int gcma_thp_apply(unsigned int mode)
{
	int hooks = gcma_rs_thp_set_mode(mode);

	if (hooks < 0)
		return hooks;
	if (hooks)
		static_branch_enable(&gcma_thp_on);
	else
		static_branch_disable(&gcma_thp_on);
	return 0;
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

/**
 * gcma_thp_set_mode() - switch guaranteed THP's mode
 * @mode: an enum gcma_thp_mode
 *
 * Writing /sys/kernel/mm/gcma/thp/mode (sysfs.rs) lands here: the mode and
 * the static key change together, under the mutex.  May sleep.
 *
 * Return: 0, or -EINVAL for an unknown mode.
 */
int gcma_thp_set_mode(unsigned int mode)
{
	int ret;

	mutex_lock(&gcma_thp_mode_lock);
	ret = gcma_thp_apply(mode);
	mutex_unlock(&gcma_thp_mode_lock);
	return ret;
}

/**
 * gcma_thp_init() - put guaranteed THP in service
 *
 * Called once the areas are in service: applies the boot mode (the Rust
 * crate has made /sys/kernel/mm/gcma/thp/).  Without a THP area the mode
 * can still be set, but the hooks stay off.
 */
void __init gcma_thp_init(void)
{
	unsigned int areas = gcma_rs_thp_nr_areas();

	if (!gcma_nr_reserved_areas())
		return;		/* no "gcma=": no /sys/kernel/mm/gcma either */
	mutex_lock(&gcma_thp_mode_lock);
	gcma_thp_apply(gcma_thp_boot_mode);
	mutex_unlock(&gcma_thp_mode_lock);
	if (areas)
		pr_info("thp: %u area(s), mode %s\n", areas,
			gcma_thp_mode_names[gcma_rs_thp_mode()]);
}
