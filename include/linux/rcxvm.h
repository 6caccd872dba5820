/* SPDX-License-Identifier: GPL-2.0 */
/*
 * RCXVM: mprotect() of one whole private anonymous VMA under the mmap
 * read lock (Documentation/mm/rcx.rst, "RCXVM").
 *
 * The hooks mm/mprotect.c, mm/memory.c, mm/gup.c and mm/vma.c call.  Each is an
 * inline test of a static key around a call, and nothing at all without
 * CONFIG_RCXVM.  The fast path is Rust (mm/rcx_rs/vm/fast.rs); the keys,
 * counters and switches are C (mm/rcx_rs/rcxvm.c).
 *
 * Only the files that call the hooks include this header.
 */
#ifndef _LINUX_RCXVM_H
#define _LINUX_RCXVM_H

#include <linux/jump_label.h>
#include <linux/mm.h>

/* rcxvm_mprotect() could not decide the call: take mainline's path. */
#define RCXVM_FALLBACK	1

#ifdef CONFIG_RCXVM

/* mprotect() tries the fast path (sysfs, rcxvm= on the command line). */
DECLARE_STATIC_KEY_FALSE(rcxvm_fast_key);
/*
 * Readers under the mmap read lock are excluded from VMAs the fast path
 * may change: on from boot unless rcxvm=never, and never turned off.
 */
DECLARE_STATIC_KEY_FALSE(rcxvm_exclusion_key);

/* Rust, mm/rcx_rs/vm/fast.rs */
int rcxvm_mprotect_fast(struct mm_struct *mm, unsigned long start,
			unsigned long end, unsigned long prot, bool grows,
			int pkey);

/*
 * mprotect(start, end - start, prot) of do_mprotect_pkey(), after its
 * argument checks: 0 or an error as mainline's path would return, or
 * RCXVM_FALLBACK.
 */
static inline int rcxvm_mprotect(unsigned long start, unsigned long end,
				 unsigned long prot, int grows, int pkey)
{
	if (!static_branch_unlikely(&rcxvm_fast_key))
		return RCXVM_FALLBACK;
	return rcxvm_mprotect_fast(current->mm, start, end, prot, grows, pkey);
}

/*
 * A VMA whose access bits the fast path may change.  Only bits that
 * change under the mmap write lock and the VMA's write lock are tested,
 * so a fault that holds the VMA's read lock sees the same answer at its
 * end as at its start.  A superset of the fast path's kinds, but for
 * userfaultfd: handle_userfault() drops the mmap lock and waits for the
 * monitor, which may munmap() the VMA, and munmap() waits for every
 * reader of the VMA's lock.
 */
static inline bool rcxvm_vma_kind(struct vm_area_struct *vma)
{
	return vma_is_anonymous(vma) &&
	       !(vma->vm_flags & (VM_SHARED | VM_MAYSHARE | VM_HUGETLB |
				  VM_SPECIAL | VM_UFFD_MISSING | VM_UFFD_WP |
				  VM_UFFD_MINOR));
}

/*
 * handle_mm_fault() called under the mmap lock (not the VMA lock): hold
 * the VMA's read lock for the fault, as uffd_lock_vma() does, so that
 * the fast path cannot change vm_flags and vm_page_prot while the fault
 * reads them.  Returns whether it took the lock, and then marks the fault
 * FAULT_FLAG_RCXVM, so that release_fault_lock() drops the VMA's lock
 * with the mmap lock where the fault waits for I/O without them: held
 * across that wait, it would keep munmap(), fork() and the slow path of
 * mprotect() of the VMA waiting on a swap-in, with the mmap lock taken
 * for writing.
 */
static inline bool rcxvm_fault_lock(struct vm_area_struct *vma,
				    unsigned int *flags)
{
	if (!static_branch_unlikely(&rcxvm_exclusion_key) ||
	    (*flags & FAULT_FLAG_VMA_LOCK) || !rcxvm_vma_kind(vma))
		return false;
	down_read(&vma->vm_lock->lock);
	*flags |= FAULT_FLAG_RCXVM;
	return true;
}

/*
 * After the fault, if rcxvm_fault_lock() took the VMA's lock: drops it,
 * unless release_fault_lock() did so with the mmap lock, which the fault
 * tells by returning VM_FAULT_COMPLETED, or VM_FAULT_RETRY without
 * FAULT_FLAG_RETRY_NOWAIT (the contract its callers rely on for the mmap
 * lock); the VMA may be gone then.  Otherwise the VMA is still there,
 * since detaching it takes its write lock, which waits for this read
 * lock.  vma_end_read(), not a bare up_read(): once the count drops, a
 * writer may detach and free the VMA, and up_read() may still touch the
 * lock (on PREEMPT_RT it takes the rwsem's wait_lock after the count
 * dropped); the RCU read lock it holds keeps the VMA until it returns.
 */
static inline void rcxvm_fault_unlock(struct vm_area_struct *vma, bool held,
				      vm_fault_t ret, unsigned int flags)
{
	if (!held || (ret & VM_FAULT_COMPLETED) ||
	    ((ret & VM_FAULT_RETRY) && !(flags & FAULT_FLAG_RETRY_NOWAIT)))
		return;
	vma_end_read(vma);
}

/*
 * munmap(), brk() and mremap() lower total_vm and the data, exec and
 * stack counters after downgrading the mmap lock to read
 * (vms_complete_munmap_vmas()), with plain read-modify-writes that no
 * other writer could race in mainline.  The fast path accounts its
 * change under the read lock too, so both take mm->page_table_lock
 * around their updates (as stack expansion under the read lock once did
 * for the same counters); otherwise one update is lost for good.
 */
static inline void rcxvm_stat_lock(struct mm_struct *mm)
{
	spin_lock(&mm->page_table_lock);
}

static inline void rcxvm_stat_unlock(struct mm_struct *mm)
{
	spin_unlock(&mm->page_table_lock);
}

/*
 * __get_user_pages() after a fault that kept the mmap lock: whether to
 * look the VMA up and check its flags again before following the page,
 * since the fast path may have changed them (a FOLL_WRITE on a VMA made
 * read-only would otherwise fault forever).
 */
static inline bool rcxvm_gup_forget_vma(struct vm_area_struct **vma)
{
	if (!static_branch_unlikely(&rcxvm_exclusion_key))
		return false;
	*vma = NULL;
	return true;
}

#else /* !CONFIG_RCXVM */

static inline int rcxvm_mprotect(unsigned long start, unsigned long end,
				 unsigned long prot, int grows, int pkey)
{
	return RCXVM_FALLBACK;
}

static inline bool rcxvm_fault_lock(struct vm_area_struct *vma,
				    unsigned int *flags)
{
	return false;
}

static inline void rcxvm_fault_unlock(struct vm_area_struct *vma, bool held,
				      vm_fault_t ret, unsigned int flags)
{
}

static inline bool rcxvm_gup_forget_vma(struct vm_area_struct **vma)
{
	return false;
}

static inline void rcxvm_stat_lock(struct mm_struct *mm)
{
}

static inline void rcxvm_stat_unlock(struct mm_struct *mm)
{
}

#endif /* CONFIG_RCXVM */

#endif /* _LINUX_RCXVM_H */
