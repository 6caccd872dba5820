// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit suite "gcma_cma": a GCMA area through the interfaces existing
 * users call, without knowing GCMA is behind them: cma_alloc() and
 * cma_release(), cma_alloc_folio() and cma_free_folio(), and the DMA API
 * when "gcma.dma_cma=1" made the area the default DMA CMA area.
 *
 * These run in C because the callers they stand for are C: the CMA and DMA
 * entry points and the folio helpers are static inlines or macros that the
 * Rust bindings do not reach.  The allocator itself is tested from Rust
 * (mm/gcma_rs/tests.rs).  The kernel must boot with "gcma=16M" (at least
 * 2 MiB, for the PMD-sized folio); without "gcma.dma_cma=1" the DMA cases
 * are skipped, without "init_on_alloc=1" the zeroing case, and without a
 * small area at an odd base ("gcma=1028K@0x20001000") the alignment case.
 *
 * The release contract under test: cma_release() on a GCMA area returns
 * true for any range inside it (false makes dma_free_contiguous() hand the
 * pages to the buddy allocator), and pages of the area never reach the
 * buddy allocator, whoever drops their last reference.
 *
 * One suite, one file, over the 700 lines the project aims for: its cases
 * share the suite's context (the area and its counters), the checks that
 * a page is the area's and has not escaped to the buddy allocator, and
 * the timer that releases from softirq; a split would only move those
 * into a header for two files of one suite.
 */

#include <kunit/device.h>
#include <kunit/test.h>
#include <linux/cma.h>
#include <linux/delay.h>
#include <linux/dma-direct.h>
#include <linux/dma-map-ops.h>
#include <linux/dma-mapping.h>
#include <linux/gcma.h>
#include <linux/kthread.h>
#include <linux/mm.h>
#include <linux/page-flags.h>
#include <linux/string.h>
#include <linux/timer.h>

#include "../cma.h"

struct gcma_cma_ctx {
	struct gcma_area *area;
	struct cma *cma;
	unsigned long base_pfn, nr_pages;
};

static int gcma_cma_test_init(struct kunit *test)
{
	struct gcma_cma_ctx *ctx = kunit_kzalloc(test, sizeof(*ctx), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, ctx);
	ctx->area = gcma_reserved_area(0);
	KUNIT_ASSERT_NOT_NULL_MSG(test, ctx->area, "no GCMA area: boot with gcma=16M");
	ctx->cma = ctx->area->cma;
	KUNIT_ASSERT_NOT_NULL_MSG(test, ctx->cma, "gcma0 is not registered with CMA");
	KUNIT_ASSERT_PTR_EQ(test, cma_gcma(ctx->cma), ctx->area);
	ctx->base_pfn = PHYS_PFN(ctx->area->base);
	ctx->nr_pages = ctx->area->size >> PAGE_SHIFT;
	test->priv = ctx;
	return 0;
}

static u64 gcma_cma_used(struct gcma_cma_ctx *ctx)
{
	struct gcma_stats st;

	gcma_stats(ctx->area, &st);
	return st.primary_used_pages;
}

/* A cma_release() or cma_free_folio() made from a timer (softirq). */
struct gcma_cma_timer_release {
	struct timer_list timer;
	struct cma *cma;
	struct page *page;
	unsigned long count;
	bool folio, ret, in_softirq;
	struct completion done;
};

static void gcma_cma_timer_fn(struct timer_list *t)
{
	struct gcma_cma_timer_release *r = from_timer(r, t, timer);

	r->in_softirq = in_softirq() && !in_task();
	if (r->folio)
		r->ret = cma_free_folio(r->cma, page_folio(r->page));
	else
		r->ret = cma_release(r->cma, r->page, r->count);
	complete(&r->done);
}

/* Runs the release of @r from a timer callback and waits for it. */
static void gcma_cma_release_from_timer(struct gcma_cma_timer_release *r)
{
	init_completion(&r->done);
	timer_setup_on_stack(&r->timer, gcma_cma_timer_fn, 0);
	mod_timer(&r->timer, jiffies + 1);
	wait_for_completion(&r->done);
	del_timer_sync(&r->timer);
	destroy_timer_on_stack(&r->timer);
}

static u64 gcma_cma_pending(struct gcma_cma_ctx *ctx)
{
	struct gcma_stats st;

	gcma_stats(ctx->area, &st);
	return st.release_pending_pages;
}

/*
 * Pages of the area found in the buddy allocator's free lists, or free
 * (no reference) while GCMA counts them in use: either means a release
 * let pages escape.  Free pages must have no reference and no flag GCMA
 * did not leave there.
 */
static unsigned long gcma_cma_escaped(struct gcma_cma_ctx *ctx)
{
	unsigned long i, bad = 0;

	for (i = 0; i < ctx->nr_pages; i++) {
		struct page *p = pfn_to_page(ctx->base_pfn + i);

		bad += PageBuddy(p);
	}
	return bad;
}

static bool gcma_cma_in_area(struct gcma_cma_ctx *ctx, const struct page *page,
			     unsigned long count)
{
	unsigned long pfn = page_to_pfn(page);

	return pfn >= ctx->base_pfn && pfn + count <= ctx->base_pfn + ctx->nr_pages;
}

/* cma_alloc() on the area returns plain referenced pages from GCMA. */
static void gcma_cma_alloc_release(struct kunit *test)
{
	struct gcma_cma_ctx *ctx = test->priv;
	u64 used = gcma_cma_used(ctx);
	struct page *page;
	unsigned long i, bad = 0;

	page = cma_alloc(ctx->cma, 100, 2, false);
	KUNIT_ASSERT_NOT_NULL(test, page);
	KUNIT_EXPECT_TRUE(test, gcma_cma_in_area(ctx, page, 100));
	KUNIT_EXPECT_EQ(test, page_to_pfn(page) % 4, 0);
	KUNIT_EXPECT_EQ(test, gcma_cma_used(ctx), used + 100);
	for (i = 0; i < 100; i++) {
		struct page *p = nth_page(page, i);

		bad += page_ref_count(p) != 1 || PageCompound(p);
	}
	KUNIT_EXPECT_EQ_MSG(test, bad, 0, "pages without exactly one reference");
	/* The memory is usable. */
	memset(page_address(page), 0x5a, 100 * PAGE_SIZE);

	/*
	 * A page someone else still holds does not stop the release (false
	 * would make DMA callers free the pages to the buddy allocator): the
	 * others are free at once, that one when its last reference goes.
	 */
	get_page(nth_page(page, 60));
	KUNIT_EXPECT_TRUE(test, cma_release(ctx->cma, page, 100));
	KUNIT_EXPECT_EQ(test, gcma_cma_used(ctx), used + 1);
	KUNIT_EXPECT_EQ(test, gcma_cma_pending(ctx), 1);
	KUNIT_EXPECT_EQ(test, page_ref_count(nth_page(page, 60)), 1);
	for (i = 0, bad = 0; i < 100; i++)
		bad += i != 60 && page_ref_count(nth_page(page, i)) != 0;
	KUNIT_EXPECT_EQ_MSG(test, bad, 0, "released pages still referenced");
	put_page(nth_page(page, 60));
	KUNIT_EXPECT_EQ(test, gcma_cma_used(ctx), used);
	KUNIT_EXPECT_EQ(test, gcma_cma_pending(ctx), 0);
	KUNIT_EXPECT_EQ(test, page_ref_count(nth_page(page, 60)), 0);
	KUNIT_EXPECT_EQ(test, gcma_cma_escaped(ctx), 0);

	/* A double free is ignored (and logged), and frees nothing else. */
	page = cma_alloc(ctx->cma, 8, 0, false);
	KUNIT_ASSERT_NOT_NULL(test, page);
	KUNIT_EXPECT_TRUE(test, cma_release(ctx->cma, page, 8));
	KUNIT_EXPECT_TRUE(test, cma_release(ctx->cma, page, 8));
	KUNIT_EXPECT_EQ(test, gcma_cma_used(ctx), used);
	KUNIT_EXPECT_EQ(test, gcma_cma_escaped(ctx), 0);
	/* Outside the area: not GCMA's, CMA refuses as before. */
	KUNIT_EXPECT_FALSE(test, gcma_release(ctx->area, pfn_to_page(ctx->base_pfn - 1), 1));
}

/*
 * cma_release() and cma_free_folio() are safe in softirq context for CMA
 * (dma_free_attrs() from a completion handler reaches them), so they must
 * be for GCMA: the area's map lock is also taken in process context with
 * softirqs on (allocations, DMEM), which lockdep reports as an
 * inconsistent lock state, and which deadlocks when the softirq interrupts
 * a holder on its CPU.  The release is done shortly after, in process
 * context, and frees exactly what a release in process context would.
 */
static void gcma_cma_release_softirq(struct kunit *test)
{
	struct gcma_cma_ctx *ctx = test->priv;
	struct gcma_cma_timer_release r = { .cma = ctx->cma };
	u64 used = gcma_cma_used(ctx);
	struct folio *folio;

	/* Process context takes the map lock with softirqs on. */
	r.page = cma_alloc(ctx->cma, 37, 0, false);
	KUNIT_ASSERT_NOT_NULL(test, r.page);
	r.count = 37;
	gcma_cma_release_from_timer(&r);
	KUNIT_EXPECT_TRUE(test, r.in_softirq);
	KUNIT_EXPECT_TRUE(test, r.ret);
	gcma_flush_releases(ctx->area);
	KUNIT_EXPECT_EQ(test, gcma_cma_used(ctx), used);

	folio = cma_alloc_folio(ctx->cma, 2, GFP_KERNEL | __GFP_COMP);
	KUNIT_ASSERT_NOT_NULL(test, folio);
	KUNIT_EXPECT_EQ(test, gcma_cma_used(ctx), used + 4);
	r.page = &folio->page;
	r.folio = true;
	gcma_cma_release_from_timer(&r);
	KUNIT_EXPECT_TRUE(test, r.ret);
	gcma_flush_releases(ctx->area);
	KUNIT_EXPECT_EQ(test, gcma_cma_used(ctx), used);
	KUNIT_EXPECT_EQ(test, gcma_cma_escaped(ctx), 0);

	/* Released twice from softirq: logged, nothing else freed. */
	r.page = cma_alloc(ctx->cma, 8, 0, false);
	KUNIT_ASSERT_NOT_NULL(test, r.page);
	r.count = 8;
	r.folio = false;
	gcma_cma_release_from_timer(&r);
	gcma_flush_releases(ctx->area);
	gcma_cma_release_from_timer(&r);
	gcma_flush_releases(ctx->area);
	KUNIT_EXPECT_TRUE(test, r.ret);
	KUNIT_EXPECT_EQ(test, gcma_cma_used(ctx), used);
	KUNIT_EXPECT_EQ(test, gcma_cma_escaped(ctx), 0);
}

/*
 * A release of plain pages that runs into a folio is ignored, whether it
 * ends on the folio's head or covers part of it, and changes nothing.
 */
static void gcma_cma_plain_then_folio(struct kunit *test)
{
	struct gcma_cma_ctx *ctx = test->priv;
	u64 used = gcma_cma_used(ctx);
	struct folio *folio;
	struct page *page;

	/* First fit in an otherwise empty area: the folio follows the pages. */
	page = cma_alloc(ctx->cma, 2, 1, false);
	KUNIT_ASSERT_NOT_NULL(test, page);
	folio = cma_alloc_folio(ctx->cma, 1, GFP_KERNEL | __GFP_COMP);
	KUNIT_ASSERT_NOT_NULL(test, folio);
	KUNIT_ASSERT_EQ(test, folio_pfn(folio), page_to_pfn(page) + 2);

	/* Ignored, as wrong releases are: the range is GCMA's all the same. */
	KUNIT_EXPECT_TRUE(test, cma_release(ctx->cma, page, 3));
	KUNIT_EXPECT_TRUE(test, cma_release(ctx->cma, page, 4));
	KUNIT_EXPECT_EQ(test, page_ref_count(page), 1);
	KUNIT_EXPECT_EQ(test, page_ref_count(nth_page(page, 1)), 1);
	KUNIT_EXPECT_EQ(test, folio_ref_count(folio), 1);
	KUNIT_EXPECT_TRUE(test, folio_test_large(folio));
	KUNIT_EXPECT_EQ(test, gcma_cma_used(ctx), used + 4);

	KUNIT_EXPECT_TRUE(test, cma_free_folio(ctx->cma, folio));
	KUNIT_EXPECT_TRUE(test, cma_release(ctx->cma, page, 2));
	KUNIT_EXPECT_EQ(test, gcma_cma_used(ctx), used);
}

static void gcma_cma_check_folio(struct kunit *test, struct gcma_cma_ctx *ctx,
				 struct folio *folio, unsigned int order)
{
	unsigned long i, nr = 1UL << order, bad = 0;

	KUNIT_EXPECT_TRUE(test, folio_test_large(folio));
	KUNIT_EXPECT_EQ(test, folio_order(folio), order);
	KUNIT_EXPECT_EQ(test, folio_nr_pages(folio), nr);
	KUNIT_EXPECT_EQ(test, folio_ref_count(folio), 1);
	KUNIT_EXPECT_FALSE(test, folio_mapped(folio));
	KUNIT_EXPECT_EQ(test, folio_pfn(folio) % nr, 0);
	KUNIT_EXPECT_TRUE(test, gcma_cma_in_area(ctx, &folio->page, nr));
	for (i = 1; i < nr; i++) {
		struct page *p = folio_page(folio, i);

		bad += !PageTail(p) || page_folio(p) != folio ||
		       page_ref_count(p) != 0;
	}
	KUNIT_EXPECT_EQ_MSG(test, bad, 0, "tail pages not part of the folio");
}

/*
 * cma_alloc_folio() gives a folio of the order asked for, aligned to its
 * size; a folio freed while someone else holds a reference goes back to
 * GCMA when that reference goes; part of it is never released; once freed,
 * its pages are plain again.
 */
static void gcma_cma_folio(struct kunit *test)
{
	static const unsigned int orders[] = { 1, 2, 4, PMD_ORDER };
	struct gcma_cma_ctx *ctx = test->priv;
	u64 used = gcma_cma_used(ctx);
	unsigned int k;

	for (k = 0; k < ARRAY_SIZE(orders); k++) {
		unsigned int order = orders[k];
		unsigned long i, nr = 1UL << order, bad = 0;
		struct folio *folio;
		struct page *page;

		folio = cma_alloc_folio(ctx->cma, order, GFP_KERNEL | __GFP_COMP);
		KUNIT_ASSERT_NOT_NULL_MSG(test, folio, "order %u", order);
		gcma_cma_check_folio(test, ctx, folio, order);
		KUNIT_EXPECT_EQ(test, gcma_cma_used(ctx), used + nr);

		/* Half of the folio: ignored. */
		KUNIT_EXPECT_TRUE(test, cma_release(ctx->cma, &folio->page, nr / 2));
		KUNIT_EXPECT_TRUE(test, cma_release(ctx->cma, folio_page(folio, nr / 2),
						    nr / 2));
		KUNIT_EXPECT_EQ(test, gcma_cma_used(ctx), used + nr);
		KUNIT_EXPECT_EQ(test, gcma_cma_pending(ctx), 0);
		gcma_cma_check_folio(test, ctx, folio, order);

		/* Freed while referenced: back when the reference goes. */
		page = &folio->page;
		folio_get(folio);
		KUNIT_EXPECT_TRUE(test, cma_free_folio(ctx->cma, folio));
		KUNIT_EXPECT_EQ(test, gcma_cma_used(ctx), used + nr);
		KUNIT_EXPECT_EQ(test, gcma_cma_pending(ctx), nr);
		/* A second free is ignored. */
		KUNIT_EXPECT_TRUE(test, cma_free_folio(ctx->cma, folio));
		KUNIT_EXPECT_EQ(test, folio_ref_count(folio), 1);
		folio_put(folio);
		KUNIT_EXPECT_EQ(test, gcma_cma_used(ctx), used);
		KUNIT_EXPECT_EQ(test, gcma_cma_pending(ctx), 0);
		KUNIT_EXPECT_EQ(test, gcma_cma_escaped(ctx), 0);
		for (i = 0; i < nr; i++) {
			struct page *p = nth_page(page, i);

			bad += PageCompound(p) || page_ref_count(p) != 0 ||
			       p->mapping || page_private(p);
		}
		KUNIT_EXPECT_EQ_MSG(test, bad, 0, "order %u: pages not plain after free",
				    order);

		/* The same pages serve a plain allocation next. */
		page = cma_alloc(ctx->cma, nr, order, false);
		KUNIT_ASSERT_NOT_NULL(test, page);
		for (i = 0, bad = 0; i < nr; i++)
			bad += PageCompound(nth_page(page, i)) ||
			       page_ref_count(nth_page(page, i)) != 1;
		KUNIT_EXPECT_EQ(test, bad, 0);
		KUNIT_EXPECT_TRUE(test, cma_release(ctx->cma, page, nr));
	}
	KUNIT_EXPECT_EQ(test, gcma_cma_used(ctx), used);
}

/*
 * With "gcma.dma_cma=1", a coherent DMA buffer of a device without its own
 * CMA area comes from GCMA.
 */
static void gcma_cma_dma_coherent(struct kunit *test)
{
	struct gcma_cma_ctx *ctx = test->priv;
	const size_t size = 64 * PAGE_SIZE;
	struct device *dev;
	struct page *page;
	dma_addr_t handle;
	u64 used;
	void *buf;

	if (!IS_ENABLED(CONFIG_DMA_CMA) ||
	    dev_get_cma_area(NULL) != ctx->cma)
		kunit_skip(test, "gcma0 is not the default DMA area (boot with gcma.dma_cma=1)");

	dev = kunit_device_register(test, "gcma-dma-test");
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, dev);
	KUNIT_ASSERT_EQ(test, dma_coerce_mask_and_coherent(dev, DMA_BIT_MASK(64)), 0);

	used = gcma_cma_used(ctx);
	buf = dma_alloc_coherent(dev, size, &handle, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, buf);
	/*
	 * Not virt_to_page(buf): a device that is not cache-coherent (arm64's
	 * default) gets an uncached vmalloc mapping of the pages.
	 */
	page = pfn_to_page(PHYS_PFN(dma_to_phys(dev, handle)));
	KUNIT_EXPECT_TRUE(test, gcma_cma_in_area(ctx, page, 64));
	KUNIT_EXPECT_EQ(test, gcma_cma_used(ctx), used + 64);
	/* dma_alloc_coherent() returns zeroed memory. */
	KUNIT_EXPECT_NULL(test, memchr_inv(buf, 0, size));
	memset(buf, 0xa5, size);
	dma_free_coherent(dev, size, buf, handle);
	KUNIT_EXPECT_EQ(test, gcma_cma_used(ctx), used);
}

/*
 * A pfn walker: takes a speculative reference on every page that has one
 * in the range the test allocated last (as compaction or page_idle do with
 * folio_try_get() on the pfns they scan), holds it a moment, and drops it,
 * until told to stop.
 *
 * Left to itself the walker races the test's releases, and how often it
 * wins depends on the machine (a few rounds in a hundred under TCG, fewer
 * with kmemleak on).  So that the deferred free path runs on every
 * machine, the test can also ask it to hold: with @hold set, the walker
 * publishes the pfn it holds in @held and keeps its reference until the
 * test sets @released, so the release is known to come first.  It holds
 * only a page of [@hold_lo, @hold_hi): a walk that read the bounds while
 * the test was changing them can span other allocated pages of the area
 * (DMA buffers of devices, with gcma.dma_cma=1), which the test is not
 * about to release.
 */
struct gcma_cma_walker {
	unsigned long lo, hi;	/* pfns to walk, published by the test */
	unsigned long hold_lo, hold_hi;	/* pfns @hold applies to */
	bool hold;		/* keep the next reference until @released */
	bool released;
	unsigned long held;	/* pfn held for the test, 0 when none */
	unsigned long gets;
};

static void gcma_cma_walker_wait_release(struct gcma_cma_walker *w,
					 unsigned long pfn)
{
	unsigned long timeout = jiffies + HZ;

	/* Publishes the reference taken above before the pfn that names it. */
	smp_store_release(&w->held, pfn);
	/* Pairs with the test's release of @released in _let_go(). */
	while (!smp_load_acquire(&w->released) && !kthread_should_stop() &&
	       time_before(jiffies, timeout))
		usleep_range(10, 20);
	WRITE_ONCE(w->hold, false);
	WRITE_ONCE(w->held, 0);
}

static int gcma_cma_walk(void *arg)
{
	struct gcma_cma_walker *w = arg;
	unsigned long pfn;

	while (!kthread_should_stop()) {
		unsigned long lo = READ_ONCE(w->lo), hi = READ_ONCE(w->hi);

		for (pfn = lo; pfn < hi; pfn++) {
			struct page *p = pfn_to_page(pfn);

			if (!get_page_unless_zero(p))
				continue;
			w->gets++;
			/* Pairs with the release in _hold(): the bounds are set. */
			if (smp_load_acquire(&w->hold) &&
			    pfn >= READ_ONCE(w->hold_lo) && pfn < READ_ONCE(w->hold_hi))
				gcma_cma_walker_wait_release(w, pfn);
			else
				udelay(2);
			put_page(p);
		}
		cond_resched();
	}
	return 0;
}

/*
 * Asks the walker to hold a reference on a page of [@pfn, @pfn + @n) and
 * waits until it does.  Returns false if it did not within a second.
 */
static bool gcma_cma_walker_hold(struct gcma_cma_walker *w, unsigned long pfn,
				 unsigned long n)
{
	unsigned long timeout = jiffies + HZ;

	WRITE_ONCE(w->released, false);
	WRITE_ONCE(w->hold_lo, pfn);
	WRITE_ONCE(w->hold_hi, pfn + n);
	/* Publishes the bounds before the request. */
	smp_store_release(&w->hold, true);
	WRITE_ONCE(w->hi, 0);
	WRITE_ONCE(w->lo, pfn);
	WRITE_ONCE(w->hi, pfn + n);
	while (time_before(jiffies, timeout)) {
		/* Pairs with the walker's release: its reference is taken. */
		unsigned long held = smp_load_acquire(&w->held);

		if (held >= pfn && held < pfn + n)
			return true;
		usleep_range(10, 20);
	}
	WRITE_ONCE(w->hold, false);
	return false;
}

/* Lets a held reference go and waits until the walker has dropped it. */
static void gcma_cma_walker_let_go(struct gcma_cma_walker *w)
{
	/* Orders the test's release of the range before the walker's put. */
	smp_store_release(&w->released, true);
	while (READ_ONCE(w->held))
		usleep_range(10, 20);
}

/*
 * Frees through cma_release() and the DMA API race the walker's transient
 * references: every release succeeds, no page of the area ever reaches the
 * buddy allocator, and once the walker stops the area is whole again.
 * Every eighth cma_release() is made while the walker holds a page of the
 * range, so the page must wait for the walker's put.
 */
static void gcma_cma_release_race(struct kunit *test)
{
	struct gcma_cma_ctx *ctx = test->priv;
	struct gcma_cma_walker w = { };
	const size_t dma_size = 16 * PAGE_SIZE;
	bool dma = IS_ENABLED(CONFIG_DMA_CMA) && dev_get_cma_area(NULL) == ctx->cma;
	struct device *dev = NULL;
	unsigned long round, refused = 0, escaped = 0, late = 0;
	unsigned long held = 0, held_late = 0, hold_timeouts = 0;
	struct task_struct *walker;
	u64 used = gcma_cma_used(ctx);
	struct page *page;

	if (dma) {
		dev = kunit_device_register(test, "gcma-race-test");
		KUNIT_ASSERT_NOT_ERR_OR_NULL(test, dev);
		KUNIT_ASSERT_EQ(test, dma_coerce_mask_and_coherent(dev, DMA_BIT_MASK(64)), 0);
	}
	walker = kthread_run(gcma_cma_walk, &w, "gcma-walker");
	KUNIT_ASSERT_FALSE(test, IS_ERR(walker));

	for (round = 0; round < 400; round++) {
		unsigned long n = 1 + round % 37;
		bool holding = false;

		/* No assertion in the loop: the walker must be stopped. */
		page = cma_alloc(ctx->cma, n, 0, false);
		if (!page) {
			KUNIT_FAIL(test, "round %lu: cma_alloc(%lu) failed", round, n);
			break;
		}
		if (!(round % 8)) {
			holding = gcma_cma_walker_hold(&w, page_to_pfn(page), n);
			held += holding;
			hold_timeouts += !holding;
		} else {
			WRITE_ONCE(w.hi, 0);
			WRITE_ONCE(w.lo, page_to_pfn(page));
			WRITE_ONCE(w.hi, page_to_pfn(page) + n);
			udelay(5);	/* let the walker reach the range */
		}
		refused += !cma_release(ctx->cma, page, n);
		/* A page the walker held is freed by its put, later. */
		late += gcma_cma_pending(ctx) > 0;
		if (holding) {
			held_late += gcma_cma_pending(ctx) > 0;
			gcma_cma_walker_let_go(&w);
		}
		if (dma) {
			dma_addr_t handle;
			void *buf = dma_alloc_coherent(dev, dma_size, &handle, GFP_KERNEL);

			if (!buf) {
				KUNIT_FAIL(test, "round %lu: dma_alloc_coherent failed", round);
				break;
			}
			WRITE_ONCE(w.hi, 0);
			WRITE_ONCE(w.lo, PHYS_PFN(handle));
			WRITE_ONCE(w.hi, PHYS_PFN(handle) + dma_size / PAGE_SIZE);
			udelay(5);
			dma_free_coherent(dev, dma_size, buf, handle);
		}
		if (!(round % 16)) {
			escaped += gcma_cma_escaped(ctx);
			cond_resched();
		}
	}
	kthread_stop(walker);
	kunit_info(test, "walker took %lu references; %lu releases left pages to its put (%lu of %lu made while it held one), %lu refused",
		   w.gets, late, held_late, held, refused);
	KUNIT_EXPECT_GT(test, w.gets, 0);
	/* The walker held a page for every release that asked it to... */
	KUNIT_EXPECT_EQ(test, hold_timeouts, 0);
	/* ... and each of those releases left the page to the walker's put. */
	KUNIT_EXPECT_GT(test, held, 0);
	KUNIT_EXPECT_EQ(test, held_late, held);
	KUNIT_EXPECT_EQ(test, refused, 0);
	KUNIT_EXPECT_EQ(test, escaped + gcma_cma_escaped(ctx), 0);
	KUNIT_EXPECT_EQ(test, gcma_cma_used(ctx), used);
	KUNIT_EXPECT_EQ(test, gcma_cma_pending(ctx), 0);
	/* Nothing leaked: the whole free part of the area is one range again. */
	page = cma_alloc(ctx->cma, ctx->nr_pages - used, 0, false);
	KUNIT_EXPECT_NOT_NULL(test, page);
	if (page)
		KUNIT_EXPECT_TRUE(test, cma_release(ctx->cma, page, ctx->nr_pages - used));
}

/*
 * A DMA buffer freed twice: the second free must not hand the pages to the
 * buddy allocator (dma_free_contiguous() does that when cma_release()
 * returns false).  Goes through the DMA layer's free, which the double free
 * of a driver reaches, without DMA-API debugging in the way.
 */
static void gcma_cma_dma_double_free(struct kunit *test)
{
	struct gcma_cma_ctx *ctx = test->priv;
	u64 used = gcma_cma_used(ctx);
	struct device *dev;
	struct page *page;

	if (!IS_ENABLED(CONFIG_DMA_CMA) || dev_get_cma_area(NULL) != ctx->cma)
		kunit_skip(test, "gcma0 is not the default DMA area (boot with gcma.dma_cma=1)");
	dev = kunit_device_register(test, "gcma-dfree-test");
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, dev);
	page = dma_alloc_contiguous(dev, 8 * PAGE_SIZE, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, page);
	KUNIT_EXPECT_TRUE(test, gcma_cma_in_area(ctx, page, 8));
	dma_free_contiguous(dev, page, 8 * PAGE_SIZE);
	dma_free_contiguous(dev, page, 8 * PAGE_SIZE);
	KUNIT_EXPECT_EQ(test, gcma_cma_used(ctx), used);
	KUNIT_EXPECT_EQ(test, page_ref_count(page), 0);
	KUNIT_EXPECT_EQ(test, gcma_cma_escaped(ctx), 0);
}

/*
 * With init_on_alloc, reallocated pages read as zeros, as the page
 * allocator would give them: the previous owner's data never leaks.
 */
static void gcma_cma_init_on_alloc(struct kunit *test)
{
	struct gcma_cma_ctx *ctx = test->priv;
	struct page *page, *again;
	unsigned long i, dirty = 0;

	if (!want_init_on_alloc(GFP_KERNEL) || want_init_on_free())
		kunit_skip(test, "boot with init_on_alloc=1 (and init_on_free=0)");
	page = cma_alloc(ctx->cma, 32, 0, false);
	KUNIT_ASSERT_NOT_NULL(test, page);
	for (i = 0; i < 32; i++)
		memset(page_address(nth_page(page, i)), 0xa5, PAGE_SIZE);
	KUNIT_ASSERT_TRUE(test, cma_release(ctx->cma, page, 32));
	/* First fit: the same pages come back. */
	again = cma_alloc(ctx->cma, 32, 0, false);
	KUNIT_ASSERT_PTR_EQ(test, again, page);
	for (i = 0; i < 32; i++)
		dirty += !!memchr_inv(page_address(nth_page(again, i)), 0, PAGE_SIZE);
	KUNIT_EXPECT_EQ_MSG(test, dirty, 0, "pages still hold the previous owner's data");
	KUNIT_EXPECT_TRUE(test, cma_release(ctx->cma, again, 32));
}

/*
 * On an area whose first page frame number is odd ("gcma=1028K@0x20001000"),
 * every order up to the area's size gives
 * a range whose frame number is a multiple of its size, or no range only
 * when none fits.
 */
static void gcma_cma_odd_base_alignment(struct kunit *test)
{
	struct gcma_area *area = NULL;
	unsigned long base, nr, order;
	unsigned int i;

	/* The first device area at an odd pfn, wherever it is in the table. */
	for (i = 0; i < gcma_nr_reserved_areas() && !area; i++) {
		area = gcma_reserved_area(i);
		if (area && (area->thp || !(PHYS_PFN(area->base) & 1)))
			area = NULL;
	}
	if (!area)
		kunit_skip(test, "no area at an odd pfn: boot with gcma=1028K@0x20001000");
	base = PHYS_PFN(area->base);
	nr = area->size >> PAGE_SHIFT;
	for (order = 0; (1UL << order) <= nr; order++) {
		unsigned long count = 1UL << order;
		unsigned long first = ALIGN(base, count);
		bool fits = first + count <= base + nr;
		struct page *page = gcma_alloc(area, count, order, true);

		KUNIT_EXPECT_EQ_MSG(test, !!page, fits, "order %lu", order);
		if (!page)
			continue;
		KUNIT_EXPECT_EQ_MSG(test, page_to_pfn(page) % count, 0,
				    "order %lu at pfn %#lx", order, page_to_pfn(page));
		KUNIT_EXPECT_EQ(test, page_to_pfn(page), first);
		KUNIT_EXPECT_TRUE(test, gcma_release(area, page, count));
	}
	/* Folios too: aligned to their size whatever the base. */
	for (order = 1; (1UL << order) <= nr; order++) {
		struct page *page = gcma_alloc_gfp(area, 1UL << order, 0,
						   GFP_KERNEL | __GFP_COMP | __GFP_NOWARN);

		if (!page)
			continue;
		KUNIT_EXPECT_EQ(test, page_to_pfn(page) % (1UL << order), 0);
		KUNIT_EXPECT_TRUE(test, gcma_release(area, page, 1UL << order));
	}
}

/* Swap type of the test's DMEM entries: no swap device has it. */
#define GCMA_CMA_TEST_SWAP_TYPE	29
#define GCMA_CMA_TEST_WINDOW	64

/*
 * Holds every free page of the area one by one, then frees an aligned
 * window of GCMA_CMA_TEST_WINDOW pages among them: the window is then the
 * only free range of the area.  Returns the window's first index, or -1.
 */
static long gcma_cma_hold_all_but_window(struct kunit *test, struct gcma_cma_ctx *ctx,
					 bool *held)
{
	unsigned long i, run = 0;
	struct page *page;

	while ((page = gcma_alloc(ctx->area, 1, 0, true)))
		held[page_to_pfn(page) - ctx->base_pfn] = true;
	for (i = 0; i < ctx->nr_pages; i++) {
		run = held[i] ? run + 1 : 0;
		if (run >= GCMA_CMA_TEST_WINDOW &&
		    (ctx->base_pfn + i + 1) % GCMA_CMA_TEST_WINDOW == 0)
			break;
	}
	if (i == ctx->nr_pages)
		return -1;
	i = i + 1 - GCMA_CMA_TEST_WINDOW;
	for (run = 0; run < GCMA_CMA_TEST_WINDOW; run++) {
		held[i + run] = false;
		KUNIT_EXPECT_TRUE(test, gcma_release(ctx->area,
						     pfn_to_page(ctx->base_pfn + i + run), 1));
	}
	return i;
}

/* Stores @n swap pages in DMEM, each filled with its own byte. */
static unsigned long gcma_cma_store_swap(struct page *src, unsigned long n)
{
	unsigned long i, stored = 0;

	for (i = 0; i < n; i++) {
		memset(page_address(src), 0xc0 + i, PAGE_SIZE);
		stored += gcma_dmem_rs_store_swap(GCMA_CMA_TEST_SWAP_TYPE, i, src);
	}
	return stored;
}

/*
 * An allocation over pages DMEM holds takes them over in the state of
 * allocated pages: plain pages (handed off as they are, see
 * ClaimedRun::take_lent()), with some of the range lent or all of it, and a
 * folio (whose pages go through the free steps first) alike, zeroed when
 * asked, with the references the page allocator gives; DMEM no longer has
 * their data, and a release gives them back to the area.  Every byte is
 * read, under KASAN.
 */
static void gcma_cma_discard_handoff(struct kunit *test)
{
	static const struct {
		unsigned long lent;
		gfp_t gfp;
	} cases[] = {
		{ 8, GFP_KERNEL },
		{ 8, GFP_KERNEL | __GFP_ZERO },
		{ GCMA_CMA_TEST_WINDOW, GFP_KERNEL },
		{ GCMA_CMA_TEST_WINDOW, GFP_KERNEL | __GFP_ZERO },
		{ 8, GFP_KERNEL | __GFP_ZERO | __GFP_COMP },
	};
	struct gcma_cma_ctx *ctx = test->priv;
	u64 used = gcma_cma_used(ctx);
	struct gcma_stats st0, st;
	struct page *src, *page;
	unsigned long i, k, bad;
	bool *held;
	long w;

	if (gcma_dmem_rs_enabled(GCMA_DMEM_SWAP) < 0)
		kunit_skip(test, "no DMEM instance");
	src = alloc_page(GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, src);
	held = kunit_kcalloc(test, ctx->nr_pages, sizeof(*held), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, held);
	w = gcma_cma_hold_all_but_window(test, ctx, held);
	KUNIT_ASSERT_GE_MSG(test, w, 0, "no aligned window of %d free pages",
			    GCMA_CMA_TEST_WINDOW);

	for (k = 0; k < ARRAY_SIZE(cases); k++) {
		unsigned long n = cases[k].lent, dirty = 0;
		gfp_t gfp = cases[k].gfp;
		bool comp = gfp & __GFP_COMP;

		gcma_stats(ctx->area, &st0);
		KUNIT_ASSERT_EQ(test, gcma_cma_store_swap(src, n), n);
		gcma_stats(ctx->area, &st);
		KUNIT_ASSERT_EQ_MSG(test, st.secondary_lent_pages, st0.secondary_lent_pages + n,
				    "DMEM took its pages elsewhere");
		page = gcma_alloc_gfp(ctx->area, GCMA_CMA_TEST_WINDOW, 0, gfp);
		KUNIT_ASSERT_NOT_NULL(test, page);
		KUNIT_ASSERT_EQ(test, page_to_pfn(page), ctx->base_pfn + w);
		gcma_stats(ctx->area, &st);
		KUNIT_EXPECT_EQ_MSG(test, st.discarded_pages, st0.discarded_pages + n,
				    "case %lu", k);
		KUNIT_EXPECT_EQ(test, st.secondary_lent_pages, st0.secondary_lent_pages);
		for (i = 0; i < n; i++)
			KUNIT_EXPECT_FALSE(test, gcma_dmem_rs_load_swap(GCMA_CMA_TEST_SWAP_TYPE,
									i, src));
		for (i = 0, bad = 0; i < GCMA_CMA_TEST_WINDOW; i++) {
			struct page *p = nth_page(page, i);
			int refs = comp && i ? 0 : 1;

			/* Tail pages have their own use of ->mapping. */
			bad += page_ref_count(p) != refs || page_mapped(p) ||
			       (!PageTail(p) && p->mapping) || comp != PageCompound(p);
			/* Reads every byte: KASAN reports a poisoned page. */
			dirty += !!memchr_inv(page_address(p), 0, PAGE_SIZE);
		}
		KUNIT_EXPECT_EQ_MSG(test, bad, 0, "case %lu: pages not as allocated", k);
		if (gfp & __GFP_ZERO)
			KUNIT_EXPECT_EQ_MSG(test, dirty, 0, "case %lu: pages not zeroed", k);
		if (comp)
			KUNIT_EXPECT_EQ(test, folio_order(page_folio(page)),
					ilog2(GCMA_CMA_TEST_WINDOW));
		/* Usable, and back to the area when released. */
		memset(page_address(page), 0x5a, GCMA_CMA_TEST_WINDOW * PAGE_SIZE);
		KUNIT_EXPECT_TRUE(test, gcma_release(ctx->area, page, GCMA_CMA_TEST_WINDOW));
	}
	for (i = 0; i < ctx->nr_pages; i++)
		if (held[i])
			gcma_release(ctx->area, pfn_to_page(ctx->base_pfn + i), 1);
	__free_page(src);
	KUNIT_EXPECT_EQ(test, gcma_cma_used(ctx), used);
	KUNIT_EXPECT_EQ(test, gcma_cma_escaped(ctx), 0);
}

static int gcma_cma_sum_plain(struct cma *cma, void *data)
{
	if (!cma_gcma(cma))
		*(unsigned long *)data += cma_get_size(cma) >> PAGE_SHIFT;
	return 0;
}

/*
 * CmaTotal (totalcma_pages) counts the CMA areas whose pages the buddy
 * allocator holds, not GCMA's, which never reach it: CmaTotal - CmaFree
 * would otherwise count every idle GCMA area as used.
 */
static void gcma_cma_not_in_cmatotal(struct kunit *test)
{
	unsigned long plain = 0;

	cma_for_each_area(gcma_cma_sum_plain, &plain);
	KUNIT_EXPECT_EQ(test, totalcma_pages, plain);
}

static struct kunit_case gcma_cma_cases[] = {
	KUNIT_CASE(gcma_cma_alloc_release),
	KUNIT_CASE(gcma_cma_folio),
	KUNIT_CASE(gcma_cma_plain_then_folio),
	KUNIT_CASE(gcma_cma_dma_coherent),
	KUNIT_CASE(gcma_cma_release_race),
	KUNIT_CASE(gcma_cma_dma_double_free),
	KUNIT_CASE(gcma_cma_release_softirq),
	KUNIT_CASE(gcma_cma_init_on_alloc),
	KUNIT_CASE(gcma_cma_odd_base_alignment),
	KUNIT_CASE(gcma_cma_not_in_cmatotal),
	KUNIT_CASE(gcma_cma_discard_handoff),
	{}
};

static struct kunit_suite gcma_cma_suite = {
	.name = "gcma_cma",
	.init = gcma_cma_test_init,
	.test_cases = gcma_cma_cases,
};

kunit_test_suite(gcma_cma_suite);
