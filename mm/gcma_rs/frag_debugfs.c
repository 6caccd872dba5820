// SPDX-License-Identifier: GPL-2.0
/*
 * GCMA: /sys/kernel/debug/gcma/fragmentation, the fragmentation metrics of
 * every populated zone: the unusable free space index of each order, the
 * kernel's fragmentation index and the pollution of the movable
 * pageblocks.  The Rust crate computes and formats them (frag.rs); this
 * file only creates the file, in C because 6.12 has no Rust abstraction of
 * debugfs or seq_file operations.  See Documentation/mm/gcma.rst.
 */

#include <linux/debugfs.h>
#include <linux/gcma.h>
#include <linux/init.h>
#include <linux/seq_file.h>

static int gcma_frag_show(struct seq_file *m, void *unused)
{
	return gcma_rs_frag_show(m);
}
DEFINE_SHOW_ATTRIBUTE(gcma_frag);

static int __init gcma_frag_debugfs_init(void)
{
	debugfs_create_file("fragmentation", 0444, gcma_debugfs_root(), NULL,
			    &gcma_frag_fops);
	return 0;
}
late_initcall(gcma_frag_debugfs_init);
