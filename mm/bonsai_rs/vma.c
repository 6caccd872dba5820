// SPDX-License-Identifier: GPL-2.0
/*
 * Bonsai VMA index: switches and counters.
 *
 * The index itself is Rust (mm/bonsai_rs/vma/).  This file is C because
 * what it holds has no Rust interface in 6.12: the static key the fault
 * path tests, the boot parameters, per-CPU counters, and the sysfs and
 * debugfs files.
 *
 *   bonsai_vma=on|off		 boot: lookups in the index (default on)
 *   bonsai_vma_crosscheck=0|1	 boot: compare every lookup with mm_mt
 *   /sys/kernel/mm/bonsai_vma/enabled	  the same switches at run time
 *   /sys/kernel/mm/bonsai_vma/crosscheck
 *   /sys/kernel/debug/bonsai_vma/<counter>
 *
 * "enabled" decides whether new address spaces get an index and whether
 * faults look their VMA up in one.  An index, once made, is kept up to
 * date by its address space until it is torn down, whatever the switch
 * says, so turning lookups back on never consults a stale index; an
 * address space made while the switch was off has none, and its faults
 * use the maple tree.
 */
#define pr_fmt(fmt) "bonsai_vma: " fmt

#include <linux/bonsai_vma.h>
#include <linux/debugfs.h>
#include <linux/init.h>
#include <linux/kobject.h>
#include <linux/mm.h>
#include <linux/mm_types.h>
#include <linux/percpu.h>
#include <linux/sysfs.h>

DEFINE_STATIC_KEY_TRUE(bonsai_vma_lookup_key);
bool bonsai_vma_crosscheck __read_mostly;

static DEFINE_PER_CPU(long[NR_BONSAI_VMA_EVENTS], bonsai_vma_events);

static const char *const bonsai_vma_event_names[NR_BONSAI_VMA_EVENTS] = {
	[BONSAI_VMA_LOOKUPS]		= "lookups",
	[BONSAI_VMA_HITS]		= "hits",
	[BONSAI_VMA_MISSES]		= "misses",
	[BONSAI_VMA_RETRIES]		= "retries",
	[BONSAI_VMA_FALLBACK_NOINDEX]	= "fallback_noindex",
	[BONSAI_VMA_FALLBACK_RETRIES]	= "fallback_retries",
	[BONSAI_VMA_STORES]		= "stores",
	[BONSAI_VMA_INDEX_CREATED]	= "index_created",
	[BONSAI_VMA_INDEX_DROPPED]	= "index_dropped",
	[BONSAI_VMA_INDEX_ALLOC_FAILED]	= "index_alloc_failed",
	[BONSAI_VMA_PREALLOC_FAILED]	= "prealloc_failed",
	[BONSAI_VMA_INDEXES]		= "indexes",
	[BONSAI_VMA_VMAS]		= "vmas",
	[BONSAI_VMA_NODES]		= "nodes",
	[BONSAI_VMA_CROSSCHECK_CHECKED]	= "crosscheck_checked",
	[BONSAI_VMA_CROSSCHECK_DIFFS]	= "crosscheck_diffs",
	[BONSAI_VMA_CROSSCHECK_UNVERIFIED] = "crosscheck_unverified",
};

/*
 * Any context: a per-CPU add, safe against interrupts on this CPU.
 * BONSAI_VMA_LOOKUPS itself is never counted (see bonsai_vma_read()).
 */
void bonsai_vma_count(enum bonsai_vma_event ev, long delta)
{
	this_cpu_add(bonsai_vma_events[ev], delta);
}

long bonsai_vma_read(enum bonsai_vma_event ev)
{
	long sum = 0;
	int cpu;

	/* Every lookup is a hit or a miss: one count per lookup, not two. */
	if (ev == BONSAI_VMA_LOOKUPS)
		return bonsai_vma_read(BONSAI_VMA_HITS) +
		       bonsai_vma_read(BONSAI_VMA_MISSES);
	for_each_possible_cpu(cpu)
		sum += per_cpu(bonsai_vma_events, cpu)[ev];
	return sum;
}

bool bonsai_vma_enabled(void)
{
	return static_branch_likely(&bonsai_vma_lookup_key);
}

/*
 * The cross-check found the index and the maple tree disagree about
 * @addr while holding the mmap lock, so neither was being changed.
 */
void bonsai_vma_report_diff(struct mm_struct *mm, unsigned long addr,
			    struct vm_area_struct *index_vma,
			    struct vm_area_struct *tree_vma)
{
	WARN_ONCE(1, "bonsai_vma: mm %p addr %#lx: index has %p, maple tree %p\n",
		  mm, addr, index_vma, tree_vma);
}

static void bonsai_vma_set_enabled(bool on)
{
	if (on)
		static_branch_enable(&bonsai_vma_lookup_key);
	else
		static_branch_disable(&bonsai_vma_lookup_key);
}

/*
 * Only recorded here, and applied by bonsai_vma_init(): a static key is
 * not flipped while parameters are parsed.  No user address space exists
 * before the initcalls, so none sees the default meanwhile.
 */
static bool bonsai_vma_boot_on __initdata = true;

static int __init bonsai_vma_setup(char *str)
{
	if (kstrtobool(str, &bonsai_vma_boot_on))
		pr_err("bonsai_vma=%s: expected on or off; keeping on\n", str);
	return 1;
}
__setup("bonsai_vma=", bonsai_vma_setup);

static int __init bonsai_vma_crosscheck_setup(char *str)
{
	if (kstrtobool(str, &bonsai_vma_crosscheck))
		pr_err("bonsai_vma_crosscheck=%s: expected 0 or 1\n", str);
	return 1;
}
__setup("bonsai_vma_crosscheck=", bonsai_vma_crosscheck_setup);

static ssize_t enabled_show(struct kobject *kobj, struct kobj_attribute *attr,
			    char *buf)
{
	return sysfs_emit(buf, "%d\n", bonsai_vma_enabled());
}

static ssize_t enabled_store(struct kobject *kobj, struct kobj_attribute *attr,
			     const char *buf, size_t count)
{
	bool on;
	int err = kstrtobool(buf, &on);

	if (err)
		return err;
	bonsai_vma_set_enabled(on);
	return count;
}

static struct kobj_attribute enabled_attr = __ATTR_RW(enabled);

static ssize_t crosscheck_show(struct kobject *kobj,
			       struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%d\n", READ_ONCE(bonsai_vma_crosscheck));
}

static ssize_t crosscheck_store(struct kobject *kobj,
				struct kobj_attribute *attr, const char *buf,
				size_t count)
{
	bool on;
	int err = kstrtobool(buf, &on);

	if (err)
		return err;
	WRITE_ONCE(bonsai_vma_crosscheck, on);
	return count;
}

static struct kobj_attribute crosscheck_attr = __ATTR_RW(crosscheck);

static struct attribute *bonsai_vma_attrs[] = {
	&enabled_attr.attr,
	&crosscheck_attr.attr,
	NULL,
};

static const struct attribute_group bonsai_vma_group = {
	.name = "bonsai_vma",
	.attrs = bonsai_vma_attrs,
};

static int bonsai_vma_event_get(void *data, u64 *val)
{
	/* A gauge's per-CPU parts may be negative; their sum is not. */
	*val = bonsai_vma_read((long)data);
	return 0;
}
DEFINE_DEBUGFS_ATTRIBUTE(bonsai_vma_event_fops, bonsai_vma_event_get, NULL,
			 "%lld\n");

static int __init bonsai_vma_init(void)
{
	struct dentry *dir;
	long ev;
	int err;

	if (!bonsai_vma_boot_on)
		bonsai_vma_set_enabled(false);
	err = sysfs_create_group(mm_kobj, &bonsai_vma_group);
	if (err)
		pr_err("no /sys/kernel/mm/bonsai_vma (%d)\n", err);
	dir = debugfs_create_dir("bonsai_vma", NULL);
	for (ev = 0; ev < NR_BONSAI_VMA_EVENTS; ev++)
		debugfs_create_file_unsafe(bonsai_vma_event_names[ev], 0444, dir,
					   (void *)ev, &bonsai_vma_event_fops);
	pr_info("lookups %s, cross-check %s\n",
		bonsai_vma_enabled() ? "on" : "off",
		bonsai_vma_crosscheck ? "on" : "off");
	return 0;
}
subsys_initcall(bonsai_vma_init);
