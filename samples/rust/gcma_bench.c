// SPDX-License-Identifier: GPL-2.0
/*
 * C side of the GCMA benchmark (rust_gcma_bench.rs, compiled inside the
 * GCMA crate): the debugfs trigger and the CMA calls it times.
 *
 * Writing a repeat count (or anything else, for 30) to
 * /sys/kernel/debug/gcma_bench runs the benchmark in the writer's context
 * and prints its table to the kernel log.  It compares the default DMA
 * CMA area ("reserved", from "cma=") with the first GCMA area, both
 * reached through cma_alloc()/cma_release().
 */

#define pr_fmt(fmt) "gcma_bench: " fmt

#include <linux/cma.h>
#include <linux/debugfs.h>
#include <linux/init.h>
#include <linux/kernel.h>
#include <linux/ktime.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/string.h>
#include <linux/uaccess.h>

#include "gcma_bench.h"

static DEFINE_MUTEX(gcma_bench_lock);

struct gcma_bench_find {
	const char *name;
	struct cma *cma;
};

static int gcma_bench_match(struct cma *cma, void *data)
{
	struct gcma_bench_find *f = data;

	if (strcmp(cma_get_name(cma), f->name))
		return 0;
	f->cma = cma;
	return 1;
}

struct cma *gcma_bench_cma(const char *name)
{
	struct gcma_bench_find f = { .name = name };

	cma_for_each_area(gcma_bench_match, &f);
	return f.cma;
}

unsigned long gcma_bench_cma_pages(struct cma *cma)
{
	return cma_get_size(cma) >> PAGE_SHIFT;
}

struct page *gcma_bench_alloc(struct cma *cma, unsigned long count)
{
	return cma_alloc(cma, count, 0, true);
}

bool gcma_bench_release(struct cma *cma, struct page *pages,
			unsigned long count)
{
	return cma_release(cma, pages, count);
}

u64 gcma_bench_now_ns(void)
{
	return ktime_get_ns();
}

void gcma_bench_cond_resched(void)
{
	cond_resched();
}

static ssize_t gcma_bench_write(struct file *file, const char __user *ubuf,
				size_t len, loff_t *ppos)
{
	unsigned int reps;

	if (kstrtouint_from_user(ubuf, len, 0, &reps) || !reps || reps > 1000)
		reps = 30;
	mutex_lock(&gcma_bench_lock);
	gcma_bench_run(reps);
	mutex_unlock(&gcma_bench_lock);
	return len;
}

static const struct file_operations gcma_bench_fops = {
	.write = gcma_bench_write,
	.llseek = noop_llseek,
};

static int __init gcma_bench_init(void)
{
	debugfs_create_file("gcma_bench", 0200, NULL, NULL, &gcma_bench_fops);
	return 0;
}
late_initcall(gcma_bench_init);
