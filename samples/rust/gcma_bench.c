// SPDX-License-Identifier: GPL-2.0
/*
 * C side of the GCMA benchmark (rust_gcma_bench.rs, compiled inside the
 * GCMA crate): the debugfs trigger and the CMA calls it times.
 *
 * Writing a repeat count (or anything else, for 30) to
 * /sys/kernel/debug/gcma_bench runs the benchmark and prints its table to
 * the kernel log; the write returns when it is done.  It compares the
 * default DMA CMA area ("reserved", from "cma=") with the first GCMA area,
 * both reached through cma_alloc()/cma_release().
 *
 * The benchmark runs in a kthread bound to one CPU, first at normal
 * priority, as any caller would, then at SCHED_FIFO's lowest priority
 * (gcma_bench_set_fifo()), where the program that keeps memory under
 * pressure (a normal task) cannot preempt a call while it is timed, though
 * it runs whenever the call sleeps, e.g. while CMA waits for a migration.
 * Being bound lets the timing use local_clock(), which is cheap
 * everywhere; ktime_get_ns() may read a slow clocksource (QEMU's HPET).
 */

#define pr_fmt(fmt) "gcma_bench: " fmt

#include <linux/cma.h>
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/completion.h>
#include <linux/init.h>
#include <linux/kernel.h>
#include <linux/kthread.h>
#include <linux/ktime.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/sched/clock.h>
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
	return local_clock();
}

u64 gcma_bench_ktime_ns(void)
{
	return ktime_get_ns();
}

static u64 gcma_bench_last_pause;

/*
 * Between two timed pairs: after every 100 ms of running, sleep for a
 * millisecond or two, so that normal tasks get this CPU too and the
 * real-time throttle (950 ms of every second by default) never stops a
 * timed call.  Sleeping after every pair instead would start each timed
 * call cold; under QEMU's TCG, refilling the soft TLB after a switch costs
 * tens of microseconds, more than a whole GCMA allocation.
 */
void gcma_bench_pause(void)
{
	if (local_clock() - gcma_bench_last_pause < 100 * NSEC_PER_MSEC)
		return;
	usleep_range(1000, 2000);
	gcma_bench_last_pause = local_clock();
}

struct gcma_bench_job {
	unsigned int reps;
	struct completion done;
};

/* Called by the benchmark, on its kthread, between its two passes. */
void gcma_bench_set_fifo(void)
{
	sched_set_fifo_low(current);
}

static int gcma_bench_thread(void *data)
{
	struct gcma_bench_job *job = data;

	gcma_bench_run(job->reps);
	complete(&job->done);
	return 0;
}

static ssize_t gcma_bench_write(struct file *file, const char __user *ubuf,
				size_t len, loff_t *ppos)
{
	struct gcma_bench_job job;
	struct task_struct *t;

	if (kstrtouint_from_user(ubuf, len, 0, &job.reps) || !job.reps ||
	    job.reps > 1000)
		job.reps = 30;
	init_completion(&job.done);
	mutex_lock(&gcma_bench_lock);
	t = kthread_create(gcma_bench_thread, &job, "gcma_bench");
	if (IS_ERR(t)) {
		mutex_unlock(&gcma_bench_lock);
		return PTR_ERR(t);
	}
	kthread_bind(t, raw_smp_processor_id());
	wake_up_process(t);
	/* The job lives on this stack: wait even if a signal comes. */
	wait_for_completion(&job.done);
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
