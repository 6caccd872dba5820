// SPDX-License-Identifier: GPL-2.0
/*
 * Bonsai VMA index: fixture of the KUnit suite (vma/tests.rs).
 *
 * The suite changes the VMAs of a test address space the way a process
 * would, through mmap(), munmap(), mprotect(), mremap() and madvise(), so
 * that every path the index must follow runs as it does for users.  Its
 * kernel thread adopts the address space (kthread_use_mm()) and enters
 * the system calls through the architecture's dispatcher, which only
 * x86-64 offers to the rest of the kernel; elsewhere the calls fail with
 * -EOPNOTSUPP and the suite skips them.
 */
#include <linux/bonsai_vma.h>
#include <linux/kthread.h>
#include <linux/mm.h>
#include <linux/mmap_lock.h>
#include <linux/syscalls.h>
#include <asm/syscall.h>

long bonsai_vma_test_call(enum bonsai_vma_test_call call, unsigned long a,
			  unsigned long b, unsigned long c, unsigned long d,
			  unsigned long e)
{
#ifdef CONFIG_X86_64
	static const unsigned int nr[] = {
		[BONSAI_VMA_TEST_MMAP]		= __NR_mmap,
		[BONSAI_VMA_TEST_MUNMAP]	= __NR_munmap,
		[BONSAI_VMA_TEST_MPROTECT]	= __NR_mprotect,
		[BONSAI_VMA_TEST_MREMAP]	= __NR_mremap,
		[BONSAI_VMA_TEST_MADVISE]	= __NR_madvise,
	};
	struct pt_regs regs = {
		.di = a, .si = b, .dx = c, .r10 = d, .r8 = e,
	};

	if (call >= ARRAY_SIZE(nr))
		return -EINVAL;
	return x64_sys_call(&regs, nr[call]);
#else
	return -EOPNOTSUPP;
#endif
}

void bonsai_vma_test_use_mm(struct mm_struct *mm)
{
	kthread_use_mm(mm);
}

void bonsai_vma_test_unuse_mm(struct mm_struct *mm)
{
	kthread_unuse_mm(mm);
}

void bonsai_vma_test_end_read(struct vm_area_struct *vma)
{
	vma_end_read(vma);
}
