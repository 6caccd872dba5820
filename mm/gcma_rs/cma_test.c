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
 * 2 MiB, for the PMD-sized folio); without "gcma.dma_cma=1" the DMA case is
 * skipped.
 */

#include <kunit/device.h>
#include <kunit/test.h>
#include <linux/cma.h>
#include <linux/dma-map-ops.h>
#include <linux/dma-mapping.h>
#include <linux/gcma.h>
#include <linux/mm.h>
#include <linux/string.h>

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
	 * A page someone else still holds stops the release, and the pages
	 * checked before it keep their reference.
	 */
	get_page(nth_page(page, 60));
	KUNIT_EXPECT_FALSE(test, cma_release(ctx->cma, page, 100));
	for (i = 0, bad = 0; i < 100; i++)
		bad += page_ref_count(nth_page(page, i)) != (i == 60 ? 2 : 1);
	KUNIT_EXPECT_EQ_MSG(test, bad, 0, "references changed by a refused release");
	KUNIT_EXPECT_EQ(test, gcma_cma_used(ctx), used + 100);
	put_page(nth_page(page, 60));

	KUNIT_EXPECT_TRUE(test, cma_release(ctx->cma, page, 100));
	KUNIT_EXPECT_EQ(test, gcma_cma_used(ctx), used);
}

/*
 * A release of plain pages that runs into a folio is refused, whether it
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

	KUNIT_EXPECT_FALSE(test, cma_release(ctx->cma, page, 3));
	KUNIT_EXPECT_FALSE(test, cma_release(ctx->cma, page, 4));
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
 * size; cma_free_folio() refuses it while someone else holds a reference,
 * and part of it is never released; once freed, its pages are plain again.
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

		/* Another reference, or half of the folio: refused. */
		folio_get(folio);
		KUNIT_EXPECT_FALSE(test, cma_free_folio(ctx->cma, folio));
		folio_put(folio);
		KUNIT_EXPECT_FALSE(test, cma_release(ctx->cma, &folio->page, nr / 2));
		KUNIT_EXPECT_FALSE(test, cma_release(ctx->cma, folio_page(folio, nr / 2),
						     nr / 2));
		KUNIT_EXPECT_EQ(test, gcma_cma_used(ctx), used + nr);
		gcma_cma_check_folio(test, ctx, folio, order);

		page = &folio->page;
		KUNIT_EXPECT_TRUE(test, cma_free_folio(ctx->cma, folio));
		KUNIT_EXPECT_EQ(test, gcma_cma_used(ctx), used);
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
	KUNIT_EXPECT_TRUE(test, gcma_cma_in_area(ctx, virt_to_page(buf), 64));
	KUNIT_EXPECT_EQ(test, gcma_cma_used(ctx), used + 64);
	/* dma_alloc_coherent() returns zeroed memory. */
	KUNIT_EXPECT_NULL(test, memchr_inv(buf, 0, size));
	memset(buf, 0xa5, size);
	dma_free_coherent(dev, size, buf, handle);
	KUNIT_EXPECT_EQ(test, gcma_cma_used(ctx), used);
}

static struct kunit_case gcma_cma_cases[] = {
	KUNIT_CASE(gcma_cma_alloc_release),
	KUNIT_CASE(gcma_cma_folio),
	KUNIT_CASE(gcma_cma_plain_then_folio),
	KUNIT_CASE(gcma_cma_dma_coherent),
	{}
};

static struct kunit_suite gcma_cma_suite = {
	.name = "gcma_cma",
	.init = gcma_cma_test_init,
	.test_cases = gcma_cma_cases,
};

kunit_test_suite(gcma_cma_suite);
