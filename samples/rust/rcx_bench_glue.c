// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel services for the RCX benchmark, and the initcall that runs it.
 *
 * The benchmark (rust_rcx_bench.rs) is Rust code compiled inside the RCX
 * crate; its baselines live there too.  This file gives it worker
 * kthreads bound to CPUs, sleeping and rescheduling, and starts it once
 * at boot.
 */

#include <linux/cpumask.h>
#include <linux/delay.h>
#include <linux/err.h>
#include <linux/init.h>
#include <linux/kthread.h>
#include <linux/sched.h>
#include <linux/sched/task.h>

#include "rcx_bench.h"

unsigned int rcx_bench_online_cpus(void)
{
	return num_online_cpus();
}

/*
 * Starts fn(arg) in a kthread bound to @cpu; the returned task carries a
 * reference, so rcx_bench_thread_join() works even after fn returned.
 * Returns NULL on failure.
 */
void *rcx_bench_thread_start(int (*fn)(void *), void *arg, unsigned int cpu)
{
	struct task_struct *t;

	t = kthread_create_on_cpu(fn, arg, cpu, "rcx_bench/%u");
	if (IS_ERR(t))
		return NULL;
	get_task_struct(t);
	wake_up_process(t);
	return t;
}

/* Waits for a thread of rcx_bench_thread_start() and releases it. */
void rcx_bench_thread_join(void *task)
{
	kthread_stop(task);
	put_task_struct(task);
}

void rcx_bench_msleep(unsigned int ms)
{
	msleep(ms);
}

void rcx_bench_cond_resched(void)
{
	cond_resched();
}

static int __init rcx_bench_init(void)
{
	rcx_bench_run();
	return 0;
}
late_initcall(rcx_bench_init);
