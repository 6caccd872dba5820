/* SPDX-License-Identifier: GPL-2.0 */
/*
 * RCXVM's switch and counters, for the benchmarks that compare its fast
 * path on and off in one boot (rcxvm_bench.c, rcxvm_workloads.c).
 */
#ifndef RCXVM_SWITCH_H
#define RCXVM_SWITCH_H

#include <stdio.h>

/* An RCXVM counter of /sys/kernel/debug/rcxvm/, or 0 without it. */
static inline unsigned long rcxvm_counter(const char *name)
{
	char path[128];
	unsigned long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/kernel/debug/rcxvm/%s", name);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fscanf(f, "%lu", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

/*
 * Switches the fast path on or off; 0 on success.  Without the switch
 * (CONFIG_RCXVM=n) only "off" succeeds, which is what the kernel does.
 */
static inline int rcxvm_set_fast(int on)
{
	FILE *f = fopen("/sys/kernel/mm/rcxvm/enabled", "w");

	if (!f)
		return on ? -1 : 0;
	fprintf(f, "%d\n", on);
	return fclose(f) ? -1 : 0;
}

#endif
