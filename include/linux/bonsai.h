/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Bonsai tree (mm/bonsai_rs): the debugfs view of a tree's counters.
 *
 * The tree itself is Rust code; this header declares the small C glue
 * that exposes its counters as /sys/kernel/debug/bonsai/<name>/stats.
 */
#ifndef _LINUX_BONSAI_H
#define _LINUX_BONSAI_H

#include <linux/types.h>

/* A snapshot of one tree's counters (see Documentation/mm/bonsai.rst). */
struct bonsai_stats {
	u64 ranges;
	u64 nodes_allocated;
	u64 nodes_retired;
	u64 single_rotations;
	u64 double_rotations;
	u64 commits;
	u64 root_stores;
	u64 rcu_batches;
	u64 nodes_pending;
	u64 nodes_reserved;
};

/* Fills @st with the counters of @tree; must not sleep. */
typedef void (*bonsai_stats_fn)(const void *tree, struct bonsai_stats *st);

struct bonsai_debugfs;

struct bonsai_debugfs *bonsai_debugfs_add(const char *name, const void *tree,
					  bonsai_stats_fn get);
void bonsai_debugfs_remove(struct bonsai_debugfs *d);

#endif /* _LINUX_BONSAI_H */
