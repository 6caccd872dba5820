/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The part of libnuma's <numaif.h> that the migration selftest uses
 * (move_pages() and the MPOL_* flags), for the scenarios' static build
 * without libnuma; see numa.h.
 */
#ifndef SCENARIO_NUMAIF_SHIM_H
#define SCENARIO_NUMAIF_SHIM_H

#include <unistd.h>
#include <sys/syscall.h>
#include <linux/mempolicy.h>

static inline long move_pages(int pid, unsigned long count, void **pages,
			      const int *nodes, int *status, int flags)
{
	return syscall(SYS_move_pages, pid, count, pages, nodes, status, flags);
}

#endif /* SCENARIO_NUMAIF_SHIM_H */
