// SPDX-License-Identifier: GPL-2.0
/*
 * Baselines and kernel services for the Bonsai benchmark.
 *
 * The benchmark itself (bench/) is Rust code compiled
 * inside the Bonsai crate.  This file starts it at boot and provides what
 * it compares Bonsai with, both holding non-overlapping [start, end)
 * ranges with an unsigned long value each:
 *
 * - an rbtree under an rwlock_t: lookups take the lock for reading,
 *   inserts and removes for writing (mmap_sem-style locking);
 * - a maple tree in RCU mode: lookups are mtree_load() under
 *   rcu_read_lock(), updates take the tree's internal spinlock.
 */

#include <linux/delay.h>
#include <linux/err.h>
#include <linux/init.h>
#include <linux/kthread.h>
#include <linux/moduleparam.h>
#include <linux/maple_tree.h>
#include <linux/printk.h>
#include <linux/rbtree.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/xarray.h>

#include "bench.h"

unsigned int bonsai_bench_online_cpus(void)
{
	return num_online_cpus();
}

/*
 * Starts fn(arg) in a kthread bound to @cpu and returns the task with a
 * reference held, so that bonsai_bench_thread_join() may be called after
 * fn has returned; NULL on failure.
 */
void *bonsai_bench_thread_start(int (*fn)(void *), void *arg,
				unsigned int cpu)
{
	struct task_struct *task;

	task = kthread_create_on_cpu(fn, arg, cpu, "bonsai_bench/%u");
	if (IS_ERR(task))
		return NULL;
	get_task_struct(task);
	wake_up_process(task);
	return task;
}

/* Waits for a thread of bonsai_bench_thread_start() and drops it. */
void bonsai_bench_thread_join(void *task)
{
	kthread_stop(task);
	put_task_struct(task);
}

void bonsai_bench_msleep(unsigned int ms)
{
	msleep(ms);
}

void bonsai_bench_cond_resched(void)
{
	cond_resched();
}

/* rbtree under a reader-writer lock */

struct bonsai_bench_rb {
	struct rb_root root;
	rwlock_t lock;
};

struct bonsai_bench_rb_range {
	struct rb_node node;
	unsigned long start;
	unsigned long end;
	unsigned long value;
};

static struct bonsai_bench_rb_range *rb_range(struct rb_node *node)
{
	return rb_entry(node, struct bonsai_bench_rb_range, node);
}

struct bonsai_bench_rb *bonsai_bench_rb_new(void)
{
	struct bonsai_bench_rb *t = kzalloc(sizeof(*t), GFP_KERNEL);

	if (!t)
		return NULL;
	t->root = RB_ROOT;
	rwlock_init(&t->lock);
	return t;
}

void bonsai_bench_rb_free(struct bonsai_bench_rb *t)
{
	struct bonsai_bench_rb_range *r, *next;

	rbtree_postorder_for_each_entry_safe(r, next, &t->root, node)
		kfree(r);
	kfree(t);
}

/* Returns the value of the range containing @addr, 0 if there is none. */
unsigned long bonsai_bench_rb_lookup(struct bonsai_bench_rb *t,
				     unsigned long addr)
{
	struct rb_node *node;
	unsigned long value = 0;

	read_lock(&t->lock);
	node = t->root.rb_node;
	while (node) {
		struct bonsai_bench_rb_range *r = rb_range(node);

		if (addr < r->start) {
			node = node->rb_left;
		} else if (addr >= r->end) {
			node = node->rb_right;
		} else {
			value = r->value;
			break;
		}
	}
	read_unlock(&t->lock);
	return value;
}

int bonsai_bench_rb_insert(struct bonsai_bench_rb *t, unsigned long start,
			   unsigned long end, unsigned long value)
{
	struct bonsai_bench_rb_range *r;
	struct rb_node **link, *parent = NULL;

	if (start >= end)
		return -EINVAL;
	r = kmalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	r->start = start;
	r->end = end;
	r->value = value;

	write_lock(&t->lock);
	link = &t->root.rb_node;
	while (*link) {
		struct bonsai_bench_rb_range *cur = rb_range(*link);

		parent = *link;
		if (end <= cur->start) {
			link = &parent->rb_left;
		} else if (start >= cur->end) {
			link = &parent->rb_right;
		} else {
			write_unlock(&t->lock);
			kfree(r);
			return -EEXIST;
		}
	}
	rb_link_node(&r->node, parent, link);
	rb_insert_color(&r->node, &t->root);
	write_unlock(&t->lock);
	return 0;
}

int bonsai_bench_rb_remove(struct bonsai_bench_rb *t, unsigned long start)
{
	struct rb_node *node;
	struct bonsai_bench_rb_range *r = NULL;

	write_lock(&t->lock);
	node = t->root.rb_node;
	while (node) {
		struct bonsai_bench_rb_range *cur = rb_range(node);

		if (start < cur->start) {
			node = node->rb_left;
		} else if (start > cur->start) {
			node = node->rb_right;
		} else {
			r = cur;
			rb_erase(node, &t->root);
			break;
		}
	}
	write_unlock(&t->lock);
	if (!r)
		return -ENOENT;
	kfree(r);
	return 0;
}

/* maple tree in RCU mode; values are stored as xarray value entries */

struct bonsai_bench_mt {
	struct maple_tree mt;
};

struct bonsai_bench_mt *bonsai_bench_mt_new(void)
{
	struct bonsai_bench_mt *t = kzalloc(sizeof(*t), GFP_KERNEL);

	if (!t)
		return NULL;
	mt_init_flags(&t->mt, MT_FLAGS_USE_RCU);
	return t;
}

void bonsai_bench_mt_free(struct bonsai_bench_mt *t)
{
	mtree_destroy(&t->mt);
	kfree(t);
}

unsigned long bonsai_bench_mt_lookup(struct bonsai_bench_mt *t,
				     unsigned long addr)
{
	void *entry;

	rcu_read_lock();
	entry = mtree_load(&t->mt, addr);
	rcu_read_unlock();
	return entry ? xa_to_value(entry) : 0;
}

int bonsai_bench_mt_insert(struct bonsai_bench_mt *t, unsigned long start,
			   unsigned long end, unsigned long value)
{
	if (start >= end || value > LONG_MAX)
		return -EINVAL;
	return mtree_insert_range(&t->mt, start, end - 1, xa_mk_value(value),
				  GFP_KERNEL);
}

int bonsai_bench_mt_remove(struct bonsai_bench_mt *t, unsigned long start)
{
	return mtree_erase(&t->mt, start) ? 0 : -ENOENT;
}

#undef MODULE_PARAM_PREFIX
#define MODULE_PARAM_PREFIX "bonsai_bench."

/*
 * "bonsai_bench.run=0" on the command line skips the run at boot, for boots
 * of the performance kernel that measure something else: the initcall
 * holds up boot for as long as the run lasts (half a minute under TCG).
 */
static bool run = true;
module_param(run, bool, 0444);
MODULE_PARM_DESC(run, "Run the Bonsai benchmark at boot (default: yes)");

static int __init bonsai_bench_init(void)
{
	if (!run) {
		pr_info("bonsai_bench: skipped (bonsai_bench.run=0)\n");
		return 0;
	}
	bonsai_bench_run();
	return 0;
}
late_initcall(bonsai_bench_init);
