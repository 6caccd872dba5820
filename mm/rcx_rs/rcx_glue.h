/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C glue of the RCX crate (rust/bindings/bindings_helper.h includes this
 * header, so the crate calls these as kernel::bindings::rcx_*): the
 * items' global spinlocks with lockdep subclasses, preemption control
 * around an update, and the Intel RTM transaction that wins a node's lock
 * words on several items at once.
 */
#ifndef _MM_RCX_RS_RCX_GLUE_H
#define _MM_RCX_RS_RCX_GLUE_H

#include <linux/spinlock_types.h>
#include <linux/types.h>

/* Status rcx_htm_lock_words() returns when its transaction committed. */
#define RCX_HTM_COMMITTED	0xffffffffU

void rcx_lock_init(spinlock_t *lock);
void rcx_lock(spinlock_t *lock, unsigned int subclass);
bool rcx_trylock_all(spinlock_t *const *locks, unsigned int n);
void rcx_unlock_all(spinlock_t *const *locks, unsigned int n);
void rcx_unlock(spinlock_t *lock);
void rcx_preempt_disable(void);
void rcx_preempt_enable(void);

bool rcx_htm_available(void);
unsigned int rcx_htm_lock_words(unsigned long *const *words, unsigned int n,
				unsigned long token);

#ifdef CONFIG_RCXVM
struct mm_struct;
struct vm_area_struct;

/*
 * RCXVM's glue (mm/rcx_rs/rcxvm.c), for the fast path in
 * mm/rcx_rs/vm/fast.rs.  Events are counted per CPU and shown in
 * /sys/kernel/debug/rcxvm/; the first RCXVM_NR_REASONS are the fallback
 * reasons, in the order of Reason::ALL (mm/rcx_rs/vm/decide.rs).
 */
enum rcxvm_event {
	RCXVM_EV_NO_VMA,
	RCXVM_EV_PARTIAL,
	RCXVM_EV_SEVERAL_VMAS,
	RCXVM_EV_MERGE,
	RCXVM_EV_NOT_ANONYMOUS,
	RCXVM_EV_SHARED,
	RCXVM_EV_HUGETLB,
	RCXVM_EV_SPECIAL,
	RCXVM_EV_LOCKED,
	RCXVM_EV_USERFAULTFD,
	RCXVM_EV_KSM,
	RCXVM_EV_GROWS,
	RCXVM_EV_PKEY,
	RCXVM_EV_SHADOW_STACK,
	RCXVM_EV_DROPPABLE,
	RCXVM_EV_SEALED,
	RCXVM_EV_DENIED,
	RCXVM_EV_ACCOUNTING,
	RCXVM_EV_VMA_BUSY,
	RCXVM_NR_REASONS,
	/* Calls that took the fast path and changed the VMA. */
	RCXVM_EV_FAST = RCXVM_NR_REASONS,
	/* Calls that changed nothing, answered under the read lock. */
	RCXVM_EV_UNCHANGED,
	/* Calls refused with an error under the read lock (LSM, arch). */
	RCXVM_EV_ERRORS,
	/* Decisions of "fast" that the RCX commit turned into a merge. */
	RCXVM_EV_MERGE_AT_COMMIT,
	/* RCX updates retried (revalidation failed). */
	RCXVM_EV_RCX_RETRIES,
	/* mprotect() calls answered without the mmap write lock. */
	RCXVM_EV_WRITE_LOCKS_AVOIDED,
	RCXVM_NR_EVENTS
};

/* What rcxvm_request() reports of an mprotect() call. */
#define RCXVM_REQ_READ		0x01U	/* PROT_READ */
#define RCXVM_REQ_WRITE		0x02U	/* PROT_WRITE */
#define RCXVM_REQ_EXEC		0x04U	/* PROT_EXEC */
#define RCXVM_REQ_ARCH		0x08U	/* an architecture's PROT_* bit */
#define RCXVM_REQ_RIE		0x10U	/* READ_IMPLIES_EXEC personality */
#define RCXVM_REQ_PKEY		0x20U	/* a protection key, or may get one */
#define RCXVM_REQ_MDWE		0x40U	/* the mm denies write+exec */

void rcxvm_count(unsigned int ev);
unsigned long rcxvm_read(unsigned int ev);
const char *rcxvm_event_name(unsigned int ev);
unsigned int rcxvm_request(struct mm_struct *mm, unsigned long prot,
			   int pkey);
int rcxvm_check(struct vm_area_struct *vma, unsigned long prot,
		unsigned long oldflags, unsigned long newflags);
void rcxvm_apply(struct vm_area_struct *vma, unsigned long oldflags,
		 unsigned long newflags);
bool rcxvm_neighbour_compatible(struct vm_area_struct *vma,
				struct vm_area_struct *other);

/* Rust, mm/rcx_rs/vm/fast.rs: makes the fast path's RCX update side. */
int rcxvm_rust_init(void);
#endif /* CONFIG_RCXVM */

#endif /* _MM_RCX_RS_RCX_GLUE_H */
