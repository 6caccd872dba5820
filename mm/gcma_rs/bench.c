// SPDX-License-Identifier: GPL-2.0
/*
 * C side of the GCMA benchmark (bench.rs, compiled inside the
 * GCMA crate): the debugfs trigger and the CMA calls it times.
 *
 * Writing a repeat count (1 to 1000) to /sys/kernel/debug/gcma_bench runs
 * the benchmark and prints its table to the kernel log; the write returns
 * when it is done.  Anything else is refused with -EINVAL and runs
 * nothing.  It compares the
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
 *
 * Before every CMA allocation, gcma_bench_cma_fill() fills the free pages
 * of the CMA area with movable pages that the allocation has to migrate,
 * as the benchmark fills the GCMA area with DMEM pages that the GCMA
 * allocation has to discard: page-cache folios of an internal file (an
 * inode of a private pseudo file system), taken from the area's free runs
 * with alloc_contig_range() and added to the file's page cache and to the
 * LRU.  The file's mapping is unevictable, like ramfs or mlocked memory,
 * so reclaim does not thin the fill out between two allocations, and clean
 * and never mapped, so each is the cheapest kind of page for CMA to
 * migrate (no unmapping, no TLB flush, no writeback).  A folio that a
 * migration moves out of the area (the file's migrate_folio callback sees
 * each) is dropped at the next fill, so the file never holds more folios
 * than the area has pages.  Free runs shorter than
 * GCMA_BENCH_FILL_MIN_RUN pages are left alone (each alloc_contig_range()
 * call drains every CPU's lists); the share of the area occupied when the
 * allocation starts is measured and reported.
 */

#define pr_fmt(fmt) "gcma_bench: " fmt

#include <linux/cma.h>
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/completion.h>
#include <linux/fs.h>
#include <linux/gfp.h>
#include <linux/init.h>
#include <linux/kernel.h>
#include <linux/kthread.h>
#include <linux/ktime.h>
#include <linux/migrate.h>
#include <linux/mm.h>
#include <linux/mount.h>
#include <linux/mutex.h>
#include <linux/pagemap.h>
#include <linux/pseudo_fs.h>
#include <linux/sched.h>
#include <linux/sched/clock.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/uaccess.h>

#include <asm/tlbflush.h>

#include "bench.h"

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

/* Shortest free run of the CMA area that a fill takes. */
#define GCMA_BENCH_FILL_MIN_RUN	8
/* Tries to take one free run. */
#define GCMA_BENCH_FILL_TRIES	3
/* Magic number of the pseudo file system ("gcmb"). */
#define GCMA_BENCH_FS_MAGIC	0x67636d62

/*
 * The CMA fill: the area's pfns [base, end), the internal file, the next
 * page index to use in it, and the indices of folios migrated out of the
 * area since the last fill (moved[], nr_moved; a full array makes the next
 * fill drop every folio of the file and start over).
 */
static struct gcma_bench_fill {
	unsigned long base, end;
	struct vfsmount *mnt;
	struct inode *inode;
	pgoff_t next;
	/* Guards moved[], nr_moved and overflow, which migration appends to. */
	spinlock_t lock;
	pgoff_t *moved;
	unsigned long nr_moved;
	bool overflow;
	/* Statistics, reported at the end. */
	unsigned long added, dropped, failed_runs;
} gcma_bench_fill = {
	.lock = __SPIN_LOCK_UNLOCKED(gcma_bench_fill.lock),
};

static bool gcma_bench_in_area(unsigned long pfn)
{
	return pfn >= gcma_bench_fill.base && pfn < gcma_bench_fill.end;
}

static int gcma_bench_migrate_folio(struct address_space *mapping,
				    struct folio *dst, struct folio *src,
				    enum migrate_mode mode)
{
	struct gcma_bench_fill *f = &gcma_bench_fill;
	int rc = migrate_folio(mapping, dst, src, mode);
	unsigned long flags;

	if (rc != MIGRATEPAGE_SUCCESS || gcma_bench_in_area(folio_pfn(dst)))
		return rc;
	spin_lock_irqsave(&f->lock, flags);
	if (f->nr_moved < f->end - f->base)
		f->moved[f->nr_moved++] = src->index;
	else
		f->overflow = true;
	spin_unlock_irqrestore(&f->lock, flags);
	return rc;
}

static const struct address_space_operations gcma_bench_aops = {
	.dirty_folio = noop_dirty_folio,
	.migrate_folio = gcma_bench_migrate_folio,
};

static int gcma_bench_init_fs_context(struct fs_context *fc)
{
	return init_pseudo(fc, GCMA_BENCH_FS_MAGIC) ? 0 : -ENOMEM;
}

static struct file_system_type gcma_bench_fs = {
	.name = "gcma_bench",
	.init_fs_context = gcma_bench_init_fs_context,
	.kill_sb = kill_anon_super,
};

/* Sets up the fill of @cma: its file, empty.  0 or a negative errno. */
int gcma_bench_cma_fill_start(struct cma *cma)
{
	struct gcma_bench_fill *f = &gcma_bench_fill;
	int err;

	f->base = PHYS_PFN(cma_get_base(cma));
	f->end = f->base + (cma_get_size(cma) >> PAGE_SHIFT);
	f->next = 0;
	f->nr_moved = 0;
	f->overflow = false;
	f->added = 0;
	f->dropped = 0;
	f->failed_runs = 0;
	f->moved = kvmalloc_array(f->end - f->base, sizeof(*f->moved), GFP_KERNEL);
	if (!f->moved)
		return -ENOMEM;
	f->mnt = kern_mount(&gcma_bench_fs);
	if (IS_ERR(f->mnt)) {
		err = PTR_ERR(f->mnt);
		goto free_moved;
	}
	f->inode = alloc_anon_inode(f->mnt->mnt_sb);
	if (IS_ERR(f->inode)) {
		err = PTR_ERR(f->inode);
		goto unmount;
	}
	f->inode->i_mapping->a_ops = &gcma_bench_aops;
	mapping_set_gfp_mask(f->inode->i_mapping, GFP_HIGHUSER_MOVABLE);
	mapping_set_unevictable(f->inode->i_mapping);
	return 0;
unmount:
	kern_unmount(f->mnt);
free_moved:
	kvfree(f->moved);
	f->moved = NULL;
	return err;
}

/* Drops every folio of the file and the file. */
void gcma_bench_cma_fill_stop(void)
{
	struct gcma_bench_fill *f = &gcma_bench_fill;

	if (!f->moved)
		return;
	truncate_inode_pages(f->inode->i_mapping, 0);
	iput(f->inode);
	kern_unmount(f->mnt);
	kvfree(f->moved);
	f->moved = NULL;
}

/* Drops the folios of file pages @first..@last. */
static void gcma_bench_drop(pgoff_t first, pgoff_t last)
{
	truncate_inode_pages_range(gcma_bench_fill.inode->i_mapping,
				   (loff_t)first << PAGE_SHIFT,
				   ((loff_t)(last + 1) << PAGE_SHIFT) - 1);
	gcma_bench_fill.dropped += last - first + 1;
}

/* Drops the folios migrated out of the area since the last fill. */
static void gcma_bench_drop_moved(void)
{
	struct gcma_bench_fill *f = &gcma_bench_fill;
	unsigned long i, n;
	pgoff_t first = 0, last = 0;
	bool overflow;

	spin_lock_irq(&f->lock);
	n = f->nr_moved;
	overflow = f->overflow;
	f->nr_moved = 0;
	f->overflow = false;
	spin_unlock_irq(&f->lock);
	/*
	 * Only the fill adds to the array, under the benchmark's mutex, so
	 * moved[0..n) is stable; a migration meanwhile appends after it.
	 * Migrations move a range's folios in page order, which is index
	 * order, so runs of consecutive indices are dropped together.
	 */
	for (i = 0; i < n; i++) {
		pgoff_t idx = f->moved[i];

		if (i && idx == last + 1) {
			last = idx;
			continue;
		}
		if (i)
			gcma_bench_drop(first, last);
		first = idx;
		last = idx;
	}
	if (n)
		gcma_bench_drop(first, last);
	if (overflow)
		truncate_inode_pages(f->inode->i_mapping, 0);
}

/* Adds the pages [@pfn, @end), just taken from the area, to the file. */
static void gcma_bench_add(unsigned long pfn, unsigned long end)
{
	struct gcma_bench_fill *f = &gcma_bench_fill;

	for (; pfn < end; pfn++) {
		struct folio *folio = page_folio(pfn_to_page(pfn));

		__folio_set_locked(folio);
		if (filemap_add_folio(f->inode->i_mapping, folio, f->next++,
				      GFP_KERNEL | __GFP_NOWARN)) {
			__folio_clear_locked(folio);
			folio_put(folio);
			continue;
		}
		folio_mark_uptodate(folio);
		folio_unlock(folio);
		/* The page cache holds the folio now. */
		folio_put(folio);
		f->added++;
	}
}

/* Share of the area's pages in use, in hundredths of a percent. */
static unsigned int gcma_bench_occupied_bp(void)
{
	struct gcma_bench_fill *f = &gcma_bench_fill;
	unsigned long pfn, used = 0;

	for (pfn = f->base; pfn < f->end; pfn++)
		used += page_count(pfn_to_page(pfn)) != 0;
	return used * 10000 / (f->end - f->base);
}

/*
 * Takes the run of free pages of the area from @pfn, if it has at least
 * GCMA_BENCH_FILL_MIN_RUN pages, and adds them to the file; returns the end
 * of the run.  The pressure program may take a page of the run, or hold one
 * busy, while the run is isolated: the run is then looked at again, up to
 * GCMA_BENCH_FILL_TRIES times, rather than left free for the allocation.
 */
static unsigned long gcma_bench_fill_run(unsigned long pfn)
{
	struct gcma_bench_fill *f = &gcma_bench_fill;
	unsigned long run = pfn;
	int tries;

	for (tries = 0; tries < GCMA_BENCH_FILL_TRIES; tries++) {
		for (run = pfn; run < f->end && !page_count(pfn_to_page(run)); run++)
			;
		if (run - pfn < GCMA_BENCH_FILL_MIN_RUN)
			return run;
		if (!alloc_contig_range(pfn, run, MIGRATE_CMA,
					GFP_KERNEL | __GFP_NOWARN)) {
			gcma_bench_add(pfn, run);
			return run;
		}
		cond_resched();
	}
	f->failed_runs++;
	return run;
}

/**
 * gcma_bench_cma_fill() - fill the free pages of the CMA area
 *
 * Drops the file's folios that migrations moved out of the area, then takes
 * every free run of the area of at least GCMA_BENCH_FILL_MIN_RUN pages
 * (pages without references) and adds its pages to the file.
 *
 * Return: the share of the area's pages in use afterwards, in hundredths
 * of a percent.
 */
unsigned int gcma_bench_cma_fill(void)
{
	struct gcma_bench_fill *f = &gcma_bench_fill;
	unsigned long pfn;

	if (!f->moved)
		return 0;
	gcma_bench_drop_moved();
	for (pfn = f->base; pfn < f->end; pfn = gcma_bench_fill_run(pfn) + 1)
		cond_resched();
	return gcma_bench_occupied_bp();
}

/* Folios added to and dropped from the file, and runs not taken. */
void gcma_bench_cma_fill_stats(unsigned long *added, unsigned long *dropped,
			       unsigned long *failed_runs)
{
	*added = gcma_bench_fill.added;
	*dropped = gcma_bench_fill.dropped;
	*failed_runs = gcma_bench_fill.failed_runs;
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

/*
 * Before each allocation of the profile pass: in the timed passes, a GCMA
 * allocation follows a CMA one, whose migrations flush the TLBs, and under
 * TCG a flushed soft TLB is refilled page by page, at a cost that depends
 * on how many pages the allocation touches.  Without the flush, the
 * profile would time a path warmed up by the fill just before it.
 */
void gcma_bench_flush_tlb(void)
{
	flush_tlb_all();
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
	    job.reps > 1000) {
		pr_warn_ratelimited("gcma_bench: expected a repeat count from 1 to 1000; nothing run\n");
		return -EINVAL;
	}
	init_completion(&job.done);
	mutex_lock(&gcma_bench_lock);
	t = kthread_create(gcma_bench_thread, &job, "gcma_bench");
	if (IS_ERR(t)) {
		mutex_unlock(&gcma_bench_lock);
		return PTR_ERR(t);
	}
	kthread_bind(t, raw_smp_processor_id());
	wake_up_process(t);
	/*
	 * The job lives on this stack: wait even if a signal comes.  TASK_IDLE
	 * so that a run longer than the hung-task timeout (a debug kernel, a
	 * loaded machine) is not reported as a hung task.
	 */
	wait_for_completion_state(&job.done, TASK_IDLE);
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
