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

#endif /* _MM_RCX_RS_RCX_GLUE_H */
