// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel services for the RCX benchmark, and the initcall that runs it.
 *
 * The benchmark (bench.rs) is Rust code compiled inside the RCX
 * crate; its baselines live there too.  This file gives it worker
 * kthreads bound to CPUs, sleeping and rescheduling, and starts it once
 * at boot.
 */

#include <linux/cpumask.h>
#include <linux/delay.h>
#include <linux/err.h>
#include <linux/init.h>
#include <linux/kthread.h>
#include <linux/moduleparam.h>
#include <linux/printk.h>
#include <linux/sched.h>
#include <linux/sched/task.h>

#include "bench.h"

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

#undef MODULE_PARAM_PREFIX
#define MODULE_PARAM_PREFIX "rcx_bench."

/*
 * "rcx_bench.run=0" on the command line skips the run at boot, for boots
 * of the performance kernel that measure something else: the initcall
 * holds up boot for as long as the run lasts (minutes under TCG).
 */
static bool run = true;
module_param(run, bool, 0444);
MODULE_PARM_DESC(run, "Run the RCX benchmark at boot (default: yes)");

static int __init rcx_bench_init(void)
{
	if (!run) {
		pr_info("rcx_bench: skipped (rcx_bench.run=0)\n");
		return 0;
	}
	rcx_bench_run();
	return 0;
}
late_initcall(rcx_bench_init);
