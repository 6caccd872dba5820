// SPDX-License-Identifier: GPL-2.0
/*
 * Spinlock and preemption glue of the RCX crate.
 *
 * An RCX update takes the global locks of up to three items in address
 * order.  All item locks share one lockdep class, so each is taken with
 * its rank in that order as the subclass: lockdep then checks the order
 * instead of reporting recursive locking.  The Rust crate's SpinLock has
 * no nested acquisition, hence this glue; a Rust guard (GlobalGuard in
 * global.rs) calls rcx_unlock(), so an unheld lock is never released.  An
 * uncontended update tries all its global locks at once instead
 * (rcx_trylock_all(), released by the GlobalSet guard).
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

/*
 * Takes the @n locks of @locks if they are all free, or none of them: an
 * uncontended update's global locks in one call rather than one call
 * each, which under QEMU's TCG was a tenth of such an update.  A trylock
 * never waits, so the locks need no subclass and any order does.
 */
bool rcx_trylock_all(spinlock_t *const *locks, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		if (!spin_trylock(locks[i])) {
			while (i--)
				spin_unlock(locks[i]);
			return false;
		}
	}
	return true;
}

/* Releases the @n locks of @locks, which rcx_trylock_all() took. */
void rcx_unlock_all(spinlock_t *const *locks, unsigned int n)
{
	while (n--)
		spin_unlock(locks[n]);
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
