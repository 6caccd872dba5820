// SPDX-License-Identifier: GPL-2.0
/*
 * RCXVM: switches, counters and the mainline calls of the fast path.
 *
 * The fast path is Rust (mm/rcx_rs/vm/fast.rs).  This file is C because
 * what it holds has no Rust interface in 6.12: the static keys the hooks
 * of include/linux/rcxvm.h test, the boot parameter, per-CPU counters,
 * the sysfs and debugfs files, and the calls into mm/ that need the
 * mmu_gather on the stack, the LSM hook and the mm counters.
 *
 *   rcxvm=on|off|never		boot: the fast path on, off (default), or
 *				off and impossible to turn on (no
 *				exclusion of readers either)
 *   /sys/kernel/mm/rcxvm/enabled	the fast path at run time
 *   /sys/kernel/debug/rcxvm/<counter>
 *
 * The exclusion key (readers of vm_flags under the mmap read lock take
 * the VMA's read lock) is turned on here before any user address space
 * exists and is never turned off: a fault that began while it was off
 * would not hold the lock the fast path relies on, and nothing can tell
 * when the last such fault has ended.  So the fast path can be turned on
 * and off at any time, and rcxvm=never is the way to run without the
 * exclusion.
 */
#define pr_fmt(fmt) "rcxvm: " fmt

#include <linux/debugfs.h>
#include <linux/init.h>
#include <linux/kobject.h>
#include <linux/mm.h>
#include <linux/mman.h>
#include <linux/pagewalk.h>
#include <linux/perf_event.h>
#include <linux/percpu.h>
#include <linux/personality.h>
#include <linux/rcxvm.h>
#include <linux/resource.h>
#include <linux/sched/signal.h>
#include <linux/security.h>
#include <linux/swap.h>
#include <linux/swapops.h>
#include <linux/sysfs.h>
#include <asm/tlb.h>

#include "rcx_glue.h"

DEFINE_STATIC_KEY_FALSE(rcxvm_fast_key);
DEFINE_STATIC_KEY_FALSE(rcxvm_exclusion_key);

static DEFINE_PER_CPU(unsigned long[RCXVM_NR_EVENTS], rcxvm_events);

static const char *const rcxvm_event_names[RCXVM_NR_EVENTS] = {
	[RCXVM_EV_NO_VMA]		= "no_vma",
	[RCXVM_EV_PARTIAL]		= "partial",
	[RCXVM_EV_SEVERAL_VMAS]		= "several_vmas",
	[RCXVM_EV_MERGE]		= "merge",
	[RCXVM_EV_NOT_ANONYMOUS]	= "not_anonymous",
	[RCXVM_EV_SHARED]		= "shared",
	[RCXVM_EV_HUGETLB]		= "hugetlb",
	[RCXVM_EV_SPECIAL]		= "special",
	[RCXVM_EV_LOCKED]		= "locked",
	[RCXVM_EV_USERFAULTFD]		= "userfaultfd",
	[RCXVM_EV_KSM]			= "ksm",
	[RCXVM_EV_GROWS]		= "grows",
	[RCXVM_EV_PKEY]			= "pkey",
	[RCXVM_EV_SHADOW_STACK]		= "shadow_stack",
	[RCXVM_EV_DROPPABLE]		= "droppable",
	[RCXVM_EV_SEALED]		= "sealed",
	[RCXVM_EV_DENIED]		= "denied",
	[RCXVM_EV_ACCOUNTING]		= "accounting",
	[RCXVM_EV_VMA_BUSY]		= "vma_busy",
	[RCXVM_EV_FAST]			= "fast",
	[RCXVM_EV_UNCHANGED]		= "unchanged",
	[RCXVM_EV_ERRORS]		= "errors",
	[RCXVM_EV_MERGE_AT_COMMIT]	= "merge_at_commit",
	[RCXVM_EV_RCX_RETRIES]		= "rcx_retries",
	[RCXVM_EV_WRITE_LOCKS_AVOIDED]	= "write_locks_avoided",
};

/* Any context: a per-CPU increment, safe against interrupts. */
void rcxvm_count(unsigned int ev)
{
	if (!WARN_ON_ONCE(ev >= RCXVM_NR_EVENTS))
		this_cpu_inc(rcxvm_events[ev]);
}

unsigned long rcxvm_read(unsigned int ev)
{
	unsigned long sum = 0;
	int cpu;

	if (ev >= RCXVM_NR_EVENTS)
		return 0;
	for_each_possible_cpu(cpu)
		sum += per_cpu(rcxvm_events, cpu)[ev];
	return sum;
}

const char *rcxvm_event_name(unsigned int ev)
{
	return ev < RCXVM_NR_EVENTS ? rcxvm_event_names[ev] : NULL;
}

/*
 * The parts of an mprotect() request that do_mprotect_pkey() and
 * arch_override_mprotect_pkey() read from the task and the mm.  A call
 * asking for PROT_EXEC alone may be given an execute-only key, which
 * execute_only_pkey() allocates under the mmap write lock: on an
 * architecture with protection keys it is counted as a key.
 */
unsigned int rcxvm_request(struct mm_struct *mm, unsigned long prot, int pkey)
{
	unsigned int req = 0;

	if (prot & PROT_READ)
		req |= RCXVM_REQ_READ;
	if (prot & PROT_WRITE)
		req |= RCXVM_REQ_WRITE;
	if (prot & PROT_EXEC)
		req |= RCXVM_REQ_EXEC;
	if (prot & ~(PROT_READ | PROT_WRITE | PROT_EXEC | PROT_SEM))
		req |= RCXVM_REQ_ARCH;
	if (current->personality & READ_IMPLIES_EXEC)
		req |= RCXVM_REQ_RIE;
	if (pkey != -1 ||
	    (IS_ENABLED(CONFIG_ARCH_HAS_PKEYS) && prot == PROT_EXEC))
		req |= RCXVM_REQ_PKEY;
	if (test_bit(MMF_HAS_MDWE, &mm->flags))
		req |= RCXVM_REQ_MDWE;
	return req;
}

/*
 * The checks of do_mprotect_pkey() and mprotect_fixup() that decide.rs
 * does not make, in their order, for the new flags of the held VMA:
 * arch_validate_flags(), the LSM hook (with PROT_EXEC added where
 * READ_IMPLIES_EXEC added VM_EXEC, as mainline passes it) and, for a VMA
 * that becomes data, RLIMIT_DATA.  Returns 0, mainline's error, or
 * RCXVM_FALLBACK where only mainline's path can tell (a finite data
 * limit: may_expand_vm() reads counters the fast path does not lock).
 * May sleep: called outside the RCX update, under the VMA's hold.
 */
int rcxvm_check(struct vm_area_struct *vma, unsigned long reqprot,
		unsigned long oldflags, unsigned long newflags)
{
	unsigned long prot = reqprot;
	int err;

	if (newflags & VM_EXEC)
		prot |= PROT_EXEC;
	if (!arch_validate_flags(newflags))
		return -EINVAL;
	err = security_file_mprotect(vma, reqprot, prot);
	if (err)
		return err;
	if (newflags != oldflags && (newflags & VM_WRITE) &&
	    rlimit(RLIMIT_DATA) != RLIM_INFINITY)
		return RCXVM_FALLBACK;
	return 0;
}

/*
 * CONFIG_DEBUG_VM: after change_protection() made a VMA read-only, no
 * entry of its page tables may still be writable.  Under the hold no
 * fault fills the tables meanwhile, so an entry found writable is the
 * fast path's bug.
 */
static int rcxvm_check_pte(pte_t *pte, unsigned long addr, unsigned long next,
			   struct mm_walk *walk)
{
	pte_t entry = ptep_get(pte);

	WARN_ONCE(pte_present(entry) && pte_write(entry),
		  "rcxvm: writable PTE at %#lx after mprotect() made it read-only\n",
		  addr);
	return 0;
}

static int rcxvm_check_pmd(pmd_t *pmd, unsigned long addr, unsigned long next,
			   struct mm_walk *walk)
{
	pmd_t entry = pmdp_get_lockless(pmd);

	if (is_swap_pmd(entry)) {
		/*
		 * A THP under migration: change_protection() made a writable
		 * entry readable.  Not split (which the walk would do to
		 * descend): the check must not change what it checks.
		 */
		WARN_ONCE(is_pmd_migration_entry(entry) &&
			  is_writable_migration_entry(pmd_to_swp_entry(entry)),
			  "rcxvm: writable migration PMD at %#lx after mprotect() made it read-only\n",
			  addr);
		walk->action = ACTION_CONTINUE;
		return 0;
	}
	if (!pmd_trans_huge(entry))
		return 0;
	WARN_ONCE(pmd_write(entry),
		  "rcxvm: writable PMD at %#lx after mprotect() made it read-only\n",
		  addr);
	/* Do not split it to walk its PTEs: there are none. */
	walk->action = ACTION_CONTINUE;
	return 0;
}

static const struct mm_walk_ops rcxvm_check_ops = {
	.pmd_entry	= rcxvm_check_pmd,
	.pte_entry	= rcxvm_check_pte,
	.walk_lock	= PGWALK_RDLOCK,
};

/*
 * After the commit, under the VMA's hold: bring the page tables to the
 * new protection and account the change, as mprotect_fixup() does.  The
 * mm's counters are plain read-modify-writes; besides writers under the
 * mmap write lock, the fast paths of other VMAs and munmap() after its
 * downgrade update them under the read lock, all three under
 * mm->page_table_lock (rcxvm_stat_lock()).  total_vm goes down and up by
 * the same count: its value afterwards is unchanged.
 */
void rcxvm_apply(struct vm_area_struct *vma, unsigned long oldflags,
		 unsigned long newflags)
{
	struct mm_struct *mm = vma->vm_mm;
	long nrpages = vma_pages(vma);
	unsigned long cp_flags = 0;
	struct mmu_gather tlb;

	/* vma_wants_manual_pte_write_upgrade() of a private VMA */
	if (newflags & VM_WRITE)
		cp_flags |= MM_CP_TRY_CHANGE_WRITABLE;
	tlb_gather_mmu(&tlb, mm);
	change_protection(&tlb, vma, vma->vm_start, vma->vm_end, cp_flags);
	tlb_finish_mmu(&tlb);
	if (IS_ENABLED(CONFIG_DEBUG_VM) && !(newflags & VM_WRITE))
		walk_page_range_vma(vma, vma->vm_start, vma->vm_end,
				    &rcxvm_check_ops, NULL);

	rcxvm_stat_lock(mm);
	vm_stat_account(mm, oldflags, -nrpages);
	vm_stat_account(mm, newflags, nrpages);
	rcxvm_stat_unlock(mm);
	perf_event_mmap(vma);
}

/*
 * Whether a merge of @vma with its neighbour @other could be possible,
 * flags aside.  An over-approximation of can_vma_merge_before/after():
 * only a file makes a neighbour certainly incompatible with an anonymous
 * VMA.  Saying "compatible" where mainline would not merge only sends a
 * call to mainline's path; the reverse would change the layout.
 */
bool rcxvm_neighbour_compatible(struct vm_area_struct *vma,
				struct vm_area_struct *other)
{
	return READ_ONCE(other->vm_file) == vma->vm_file;
}

static void rcxvm_set_fast(bool on)
{
	if (on)
		static_branch_enable(&rcxvm_fast_key);
	else
		static_branch_disable(&rcxvm_fast_key);
}

/* Applied by rcxvm_init(): static keys are not flipped while parsing. */
static int rcxvm_boot __initdata;	/* 0 off, 1 on, -1 never */

static int __init rcxvm_setup(char *str)
{
	bool on;

	if (!strcmp(str, "never"))
		rcxvm_boot = -1;
	else if (!kstrtobool(str, &on))
		rcxvm_boot = on;
	else
		pr_err("rcxvm=%s: expected on, off or never; keeping off\n",
		       str);
	return 1;
}
__setup("rcxvm=", rcxvm_setup);

static ssize_t enabled_show(struct kobject *kobj, struct kobj_attribute *attr,
			    char *buf)
{
	return sysfs_emit(buf, "%d\n",
			  static_branch_unlikely(&rcxvm_fast_key) ? 1 : 0);
}

static ssize_t enabled_store(struct kobject *kobj, struct kobj_attribute *attr,
			     const char *buf, size_t count)
{
	bool on;
	int err = kstrtobool(buf, &on);

	if (err)
		return err;
	/* Without the exclusion of readers the fast path is unsound. */
	if (on && !static_branch_unlikely(&rcxvm_exclusion_key))
		return -EPERM;
	rcxvm_set_fast(on);
	return count;
}

static struct kobj_attribute enabled_attr = __ATTR_RW(enabled);

static struct attribute *rcxvm_attrs[] = {
	&enabled_attr.attr,
	NULL,
};

static const struct attribute_group rcxvm_group = {
	.name = "rcxvm",
	.attrs = rcxvm_attrs,
};

static int rcxvm_event_get(void *data, u64 *val)
{
	*val = rcxvm_read((unsigned long)data);
	return 0;
}
DEFINE_DEBUGFS_ATTRIBUTE(rcxvm_event_fops, rcxvm_event_get, NULL, "%llu\n");

/* Before any user address space: see the comment at the top. */
static int __init rcxvm_keys_init(void)
{
	if (rcxvm_boot >= 0)
		static_branch_enable(&rcxvm_exclusion_key);
	return 0;
}
early_initcall(rcxvm_keys_init);

static int __init rcxvm_init(void)
{
	struct dentry *dir;
	unsigned long ev;
	int err;

	err = rcxvm_rust_init();
	if (err) {
		pr_err("no RCX update side (%d): fast path off\n", err);
		rcxvm_boot = -1;
	}
	if (rcxvm_boot > 0)
		rcxvm_set_fast(true);
	if (rcxvm_boot >= 0) {
		err = sysfs_create_group(mm_kobj, &rcxvm_group);
		if (err)
			pr_err("no /sys/kernel/mm/rcxvm (%d)\n", err);
	}
	dir = debugfs_create_dir("rcxvm", NULL);
	for (ev = 0; ev < RCXVM_NR_EVENTS; ev++)
		debugfs_create_file_unsafe(rcxvm_event_names[ev], 0444, dir,
					   (void *)ev, &rcxvm_event_fops);
	pr_info("fast path %s, reader exclusion %s\n",
		static_branch_unlikely(&rcxvm_fast_key) ? "on" : "off",
		static_branch_unlikely(&rcxvm_exclusion_key) ? "on" : "off");
	return 0;
}
subsys_initcall(rcxvm_init);
