// SPDX-License-Identifier: GPL-2.0
/*
 * Bonsai tree: /sys/kernel/debug/bonsai/<name>/stats.
 *
 * The Rust side (RangeTree::debugfs_register) passes a tree and a
 * function that snapshots its counters; the file prints the snapshot.
 * bonsai_debugfs_remove() returns only once no reader of the file is
 * left, so the tree may be freed right after it.
 */
#include <linux/bonsai.h>
#include <linux/debugfs.h>
#include <linux/err.h>
#include <linux/mutex.h>
#include <linux/seq_file.h>
#include <linux/slab.h>

struct bonsai_debugfs {
	struct dentry *dir;
	const void *tree;
	bonsai_stats_fn get;
};

static DEFINE_MUTEX(bonsai_debugfs_lock);
static struct dentry *bonsai_debugfs_root;

static int bonsai_stats_show(struct seq_file *m, void *unused)
{
	struct bonsai_debugfs *d = m->private;
	struct bonsai_stats st = {};

	d->get(d->tree, &st);
	seq_printf(m, "ranges:           %llu\n", st.ranges);
	seq_printf(m, "nodes_allocated:  %llu\n", st.nodes_allocated);
	seq_printf(m, "nodes_retired:    %llu\n", st.nodes_retired);
	seq_printf(m, "nodes_pending:    %llu\n", st.nodes_pending);
	seq_printf(m, "nodes_reserved:   %llu\n", st.nodes_reserved);
	seq_printf(m, "single_rotations: %llu\n", st.single_rotations);
	seq_printf(m, "double_rotations: %llu\n", st.double_rotations);
	seq_printf(m, "commits:          %llu\n", st.commits);
	seq_printf(m, "root_stores:      %llu\n", st.root_stores);
	seq_printf(m, "rcu_batches:      %llu\n", st.rcu_batches);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(bonsai_stats);

/**
 * bonsai_debugfs_add() - create bonsai/<name>/stats in debugfs
 * @name: directory name, unique among the trees
 * @tree: passed to @get
 * @get: snapshots the counters of @tree
 *
 * Return: a handle for bonsai_debugfs_remove(), or an ERR_PTR().
 */
struct bonsai_debugfs *bonsai_debugfs_add(const char *name, const void *tree,
					  bonsai_stats_fn get)
{
	struct bonsai_debugfs *d;
	struct dentry *dir;

	d = kzalloc(sizeof(*d), GFP_KERNEL);
	if (!d)
		return ERR_PTR(-ENOMEM);
	d->tree = tree;
	d->get = get;

	mutex_lock(&bonsai_debugfs_lock);
	if (IS_ERR_OR_NULL(bonsai_debugfs_root))
		bonsai_debugfs_root = debugfs_create_dir("bonsai", NULL);
	dir = debugfs_create_dir(name, bonsai_debugfs_root);
	mutex_unlock(&bonsai_debugfs_lock);
	if (IS_ERR(dir)) {
		kfree(d);
		return ERR_CAST(dir);
	}
	d->dir = dir;
	debugfs_create_file("stats", 0444, dir, d, &bonsai_stats_fops);
	return d;
}

/**
 * bonsai_debugfs_remove() - remove what bonsai_debugfs_add() created
 * @d: the handle; NULL and ERR_PTR() values are ignored
 *
 * Waits for the readers of the file to finish.
 */
void bonsai_debugfs_remove(struct bonsai_debugfs *d)
{
	if (IS_ERR_OR_NULL(d))
		return;
	debugfs_remove(d->dir);
	kfree(d);
}
