/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The part of libnuma's <numa.h> that the migration selftest uses, for
 * the scenarios' static build: the host need not have libnuma-dev (make
 * setup does not install it) and the guest has no libnuma.  Only
 * migration.c includes it (run.py puts this directory on the include
 * path after the tree's), so everything is static inline here.
 */
#ifndef SCENARIO_NUMA_SHIM_H
#define SCENARIO_NUMA_SHIM_H

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>

/*
 * libnuma sizes its node masks to the kernel's (CONFIG_NODES_SHIFT, up
 * to 1024 nodes); migration.c loops over node ids below
 * numa_max_possible_node(), so the mask must reach past the last node.
 */
#define NUMA_SHIM_NODES		1024
#define NUMA_SHIM_LONG_BITS	(8 * sizeof(unsigned long))

struct bitmask {
	unsigned long size;
	unsigned long *maskp;
};

/* -1 when the kernel has no NUMA system calls (CONFIG_NUMA=n), as libnuma. */
static inline int numa_available(void)
{
	if (syscall(SYS_get_mempolicy, NULL, NULL, 0UL, NULL, 0UL) < 0 &&
	    errno == ENOSYS)
		return -1;
	return 0;
}

static inline int numa_max_possible_node(void)
{
	return NUMA_SHIM_NODES - 1;
}

static inline int numa_bitmask_isbitset(const struct bitmask *bmp, unsigned int n)
{
	if (n >= bmp->size)
		return 0;
	return !!(bmp->maskp[n / NUMA_SHIM_LONG_BITS] & (1UL << (n % NUMA_SHIM_LONG_BITS)));
}

/*
 * The nodes with memory (libnuma's numa_all_nodes_ptr: the nodes the task
 * may allocate on), from /sys/devices/system/node/has_memory ("0-1,3").
 */
static inline struct bitmask *numa_shim_all_nodes(void)
{
	static unsigned long bits[NUMA_SHIM_NODES / NUMA_SHIM_LONG_BITS];
	static struct bitmask mask = { NUMA_SHIM_NODES, bits };
	static int done;
	unsigned int lo, hi, n;
	char list[256], *p;
	FILE *f;

	if (done)
		return &mask;
	done = 1;
	f = fopen("/sys/devices/system/node/has_memory", "r");
	if (!f)
		return &mask;
	if (fgets(list, sizeof(list), f)) {
		for (p = strtok(list, ",\n"); p; p = strtok(NULL, ",\n")) {
			if (sscanf(p, "%u-%u", &lo, &hi) != 2) {
				if (sscanf(p, "%u", &lo) != 1)
					continue;
				hi = lo;
			}
			for (n = lo; n <= hi && n < NUMA_SHIM_NODES; n++)
				bits[n / NUMA_SHIM_LONG_BITS] |= 1UL << (n % NUMA_SHIM_LONG_BITS);
		}
	}
	fclose(f);
	return &mask;
}
#define numa_all_nodes_ptr (numa_shim_all_nodes())

/*
 * The CPUs the task may run on, but at least 3.  Upstream's cases start
 * numa_num_task_cpus() - 2 threads (or processes) that read the page
 * while the main thread migrates it, and skip with fewer than one: on
 * the 2-vCPU guests of the scenario tier every case would skip.  With
 * at least 3, a 2-vCPU guest runs one reader beside the migrating
 * thread, one per vCPU.
 */
static inline int numa_num_task_cpus(void)
{
	cpu_set_t set;
	int n;

	if (sched_getaffinity(0, sizeof(set), &set))
		return 3;
	n = CPU_COUNT(&set);
	return n < 3 ? 3 : n;
}

#endif /* SCENARIO_NUMA_SHIM_H */
