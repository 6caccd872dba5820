// SPDX-License-Identifier: GPL-2.0
/*
 * Spinlock and preemption glue of the RCX crate.
 *
 * An RCX update takes the global locks of up to three items in address
 * order.  All item locks share one lockdep class, so each is taken with
 * its rank in that order as the subclass: lockdep then checks the order
 * instead of reporting recursive locking.  The Rust crate's SpinLock has
 * no nested acquisition, hence this glue; a Rust guard (GlobalGuard in
 * rcx.rs) calls rcx_unlock(), so an unheld lock is never released.
 */
#include <linux/preempt.h>
#include <linux/spinlock.h>

#include "rcx_glue.h"

void rcx_lock_init(spinlock_t *lock)
{
	spin_lock_init(lock);
}

void rcx_lock(spinlock_t *lock, unsigned int subclass)
{
	spin_lock_nested(lock, subclass);
}

void rcx_unlock(spinlock_t *lock)
{
	spin_unlock(lock);
}

void rcx_preempt_disable(void)
{
	preempt_disable();
}

void rcx_preempt_enable(void)
{
	preempt_enable();
}
