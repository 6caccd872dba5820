// SPDX-License-Identifier: GPL-2.0
/*
 * GCMA: guaranteed transparent huge pages, the C side.
 *
 * An area reserved with "gcma=<size>[@<base>]:thp" serves PMD-sized
 * anonymous folios when the buddy allocator has no free block of that
 * order.  The policy and the choice of area are Rust (thp.rs); this file
 * holds what the fault and collapse paths call (include/linux/gcma_thp.h),
 * the static key that keeps those paths untouched while the feature is
 * off, and "gcma.thp_mode="; the files of /sys/kernel/mm/gcma/thp/ are
 * Rust (sysfs.rs) and set the mode through gcma_thp_set_mode().
 *
 * An area is used only if its node is one the buddy allocation would
 * be allowed to use: for a fault, a node of the VMA's memory policy
 * (policy_nodemask(), as vma_alloc_folio() applies it) that the task's
 * cpuset allows; for a collapse, a node of the caller's mask that the
 * cpuset allows.  The preferred node's area comes first.
 *
 * The folio is an ordinary compound page of the area (gcma_alloc_gfp()
 * with __GFP_COMP); its caller charges it to the memcg and maps it like
 * any THP.  However it is freed later (whole, split into base pages,
 * after migration), its pages reach the page allocator's free path, whose
 * pfn check (gcma_free_page()) returns them to the area.
 *
 * This is C for what 6.12 gives Rust no way to do: the early parameter,
 * the static key and its mutex, the memory-policy and cpuset reads of the
 * fault path (get_vma_policy(), policy_nodemask() of mm/internal.h, and
 * cpusets_enabled(), a static branch), page_rmappable_folio() of
 * mm/internal.h, and the allocation-tag macro of the test's allocation.
 */

#define pr_fmt(fmt) "gcma: " fmt

#include <linux/gcma.h>
#include <linux/gcma_thp.h>
#include <linux/init.h>
#include <linux/cpuset.h>
#include <linux/mempolicy.h>
#include <linux/mutex.h>
#include <linux/string.h>
#include <linux/topology.h>

#include "../internal.h"

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

/* Whether the current task's cpuset lets an allocation with @gfp use @nid. */
static bool gcma_thp_cpuset_allows(int nid, gfp_t gfp)
{
#ifdef CONFIG_CPUSETS
	return !cpusets_enabled() || cpuset_node_allowed(nid, gfp);
#else
	return true;
#endif
}

/*
 * The nodes of @nmask (all if NULL) with memory that the current task's
 * cpuset lets an allocation with @gfp use, as the page allocator checks
 * them (cpuset_zone_allowed()).  Read without retry against a concurrent
 * change of the cpuset's mems, as the allocator's first pass does.
 */
static void gcma_thp_nodes(gfp_t gfp, const nodemask_t *nmask,
			   nodemask_t *allowed)
{
	int nid;

	nodes_clear(*allowed);
	for_each_node_state(nid, N_MEMORY) {
		if (nmask && !node_isset(nid, *nmask))
			continue;
		if (!gcma_thp_cpuset_allows(nid, gfp))
			continue;
		node_set(nid, *allowed);
	}
}

/*
 * A folio of a THP area on a node of @nmask for @user, preferably on @nid,
 * or NULL if none has room.
 */
static struct folio *gcma_thp_alloc(gfp_t gfp, int nid, const nodemask_t *nmask,
				    unsigned int user)
{
	struct page *page;
	nodemask_t allowed;

	gcma_thp_nodes(gfp, nmask, &allowed);
	page = gcma_rs_thp_alloc(gfp | __GFP_COMP | __GFP_NOWARN, nid, &allowed,
				 user);
	return page ? page_rmappable_folio(page) : NULL;
}

/*
 * vma_alloc_folio()'s choice of nodes for the fault at @haddr, from the
 * VMA's memory policy (the task's, or the default).
 */
static struct folio *gcma_thp_alloc_vma(gfp_t gfp, struct vm_area_struct *vma,
					unsigned long haddr)
{
	int nid = numa_node_id();
#ifdef CONFIG_NUMA
	struct mempolicy *pol;
	struct folio *folio;
	nodemask_t *nmask;
	pgoff_t ilx;

	pol = get_vma_policy(vma, haddr, PMD_ORDER, &ilx);
	nmask = policy_nodemask(gfp, pol, ilx, &nid);
	/* Preferred nodes, not required: the page allocator falls back. */
	if (pol->mode == MPOL_PREFERRED_MANY)
		nmask = NULL;
	folio = gcma_thp_alloc(gfp, nid, nmask, GCMA_THP_FAULT);
	mpol_cond_put(pol);
	return folio;
#else
	return gcma_thp_alloc(gfp, nid, NULL, GCMA_THP_FAULT);
#endif
}

struct folio *__gcma_vma_alloc_thp(gfp_t gfp, struct vm_area_struct *vma,
				   unsigned long haddr)
{
	int plan = gcma_rs_thp_fault_plan(vma, haddr);
	struct folio *folio = NULL;

	if (plan == GCMA_THP_PLAN_GCMA_BUDDY)
		folio = gcma_thp_alloc_vma(gfp, vma, haddr);
	/* In the caller's allocation tag (gcma_vma_alloc_thp()). */
	if (!folio)
		folio = vma_alloc_folio_noprof(gfp, PMD_ORDER, vma, haddr, true);
	if (!folio && plan == GCMA_THP_PLAN_BUDDY_GCMA)
		folio = gcma_thp_alloc_vma(gfp, vma, haddr);
	return folio;
}

struct folio *__gcma_collapse_alloc_thp(gfp_t gfp, int nid, nodemask_t *nmask)
{
	int plan = gcma_rs_thp_collapse_plan();
	struct folio *folio = NULL;

	if (plan == GCMA_THP_PLAN_GCMA_BUDDY)
		folio = gcma_thp_alloc(gfp, nid, nmask, GCMA_THP_COLLAPSE);
	if (!folio)
		folio = __folio_alloc_noprof(gfp, PMD_ORDER, nid, nmask);
	if (!folio && plan == GCMA_THP_PLAN_BUDDY_GCMA)
		folio = gcma_thp_alloc(gfp, nid, nmask, GCMA_THP_COLLAPSE);
	return folio;
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
