// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit suite of device-tree GCMA areas, and the test driver it works
 * through.
 *
 * The driver binds to device-tree nodes compatible with
 * "rsmm,gcma-dma-test" and attaches the node's "memory-region" with
 * of_reserved_mem_device_init(), as the driver of a camera or a display
 * controller does.  The suite then allocates through the DMA API on each
 * bound device (dma_alloc_coherent() and dma_alloc_pages(), several sizes)
 * and checks that every buffer lies in the GCMA area that the node names,
 * that the area's counters count the allocation and the release, and that
 * a "linux,cma-default" GCMA node is the default DMA area.  Without such a
 * node (x86, or a device tree without one) the cases skip.
 */

#include <kunit/test.h>
#include <linux/cma.h>
#include <linux/dma-direct.h>
#include <linux/dma-map-ops.h>
#include <linux/dma-mapping.h>
#include <linux/completion.h>
#include <linux/gcma.h>
#include <linux/kthread.h>
#include <linux/of.h>
#include <linux/of_reserved_mem.h>
#include <linux/platform_device.h>
#include <linux/sizes.h>
#include <linux/string.h>

#define GCMA_OF_TEST_COMPAT	"rsmm,gcma-dma-test"
#define GCMA_OF_TEST_MAX_DEVS	4

/* Devices the driver bound, in probe order; probes run before the suites. */
static struct device *gcma_of_test_devs[GCMA_OF_TEST_MAX_DEVS];
static unsigned int gcma_of_test_nr_devs;

static int gcma_of_test_probe(struct platform_device *pdev)
{
	struct device *dev = &pdev->dev;
	int ret;

	ret = of_reserved_mem_device_init(dev);
	if (ret)
		return dev_err_probe(dev, ret, "memory-region not attached\n");
	if (gcma_of_test_nr_devs < GCMA_OF_TEST_MAX_DEVS)
		gcma_of_test_devs[gcma_of_test_nr_devs++] = dev;
	dev_info(dev, "DMA allocations from CMA area %s\n",
		 dev->cma_area ? cma_get_name(dev->cma_area) : "(none)");
	return 0;
}

static const struct of_device_id gcma_of_test_ids[] = {
	{ .compatible = GCMA_OF_TEST_COMPAT },
	{ }
};

static struct platform_driver gcma_of_test_driver = {
	.probe = gcma_of_test_probe,
	.driver = {
		.name = "gcma-dma-test",
		.of_match_table = gcma_of_test_ids,
		.suppress_bind_attrs = true,
	},
};

builtin_platform_driver(gcma_of_test_driver);

/* The GCMA area the node of @dev names in "memory-region", or NULL. */
static struct gcma_area *gcma_of_test_region(struct device *dev)
{
	struct device_node *np = of_parse_phandle(dev->of_node, "memory-region", 0);
	struct reserved_mem *rmem;
	bool gcma;

	if (!np)
		return NULL;
	rmem = of_reserved_mem_lookup(np);
	/* The priv of a GCMA node's region is its area (of.c). */
	gcma = of_property_read_bool(np, "guarantee");
	of_node_put(np);
	return rmem && gcma ? rmem->priv : NULL;
}

static int gcma_of_test_init(struct kunit *test)
{
	struct device_node *np = of_find_compatible_node(NULL, NULL, GCMA_OF_TEST_COMPAT);

	if (!np)
		kunit_skip(test, "no " GCMA_OF_TEST_COMPAT " node in the device tree");
	of_node_put(np);
	KUNIT_ASSERT_GT_MSG(test, gcma_of_test_nr_devs, 0,
			    GCMA_OF_TEST_COMPAT " node, but the driver bound no device");
	return 0;
}

/* Every bound device has its node's area as its CMA area. */
static void gcma_of_test_attached(struct kunit *test)
{
	unsigned int i;

	for (i = 0; i < gcma_of_test_nr_devs; i++) {
		struct device *dev = gcma_of_test_devs[i];
		struct gcma_area *area = gcma_of_test_region(dev);

		KUNIT_ASSERT_NOT_NULL_MSG(test, area, "%s: memory-region is no GCMA area",
					  dev_name(dev));
		KUNIT_EXPECT_PTR_EQ(test, dev->cma_area, area->cma);
		KUNIT_EXPECT_PTR_EQ(test, gcma_area_by_name(area->name), area);
		KUNIT_EXPECT_STREQ(test, cma_get_name(area->cma), area->name);
	}
}

static bool gcma_of_test_inside(struct gcma_area *area, phys_addr_t phys, size_t size)
{
	return phys >= area->base && phys + size <= area->base + area->size;
}

static const size_t gcma_of_test_sizes[] = { SZ_4K, SZ_64K, SZ_1M, SZ_4M };

/*
 * dma_alloc_coherent() of each size: the buffer lies in the area, holds
 * what was written to it, and the area counts one allocation of the
 * buffer's pages, then one release.
 */
static void gcma_of_test_coherent(struct kunit *test)
{
	unsigned int i, j;

	for (i = 0; i < gcma_of_test_nr_devs; i++) {
		struct device *dev = gcma_of_test_devs[i];
		struct gcma_area *area = gcma_of_test_region(dev);

		KUNIT_ASSERT_NOT_NULL(test, area);
		for (j = 0; j < ARRAY_SIZE(gcma_of_test_sizes); j++) {
			size_t size = gcma_of_test_sizes[j];
			struct gcma_stats before, mid, after;
			dma_addr_t handle;
			phys_addr_t phys;
			u8 *buf;

			if (size > area->size / 2)
				continue;
			gcma_stats(area, &before);
			buf = dma_alloc_coherent(dev, size, &handle, GFP_KERNEL);
			KUNIT_ASSERT_NOT_NULL_MSG(test, buf, "%zu bytes", size);
			phys = dma_to_phys(dev, handle);
			KUNIT_EXPECT_TRUE_MSG(test, gcma_of_test_inside(area, phys, size),
					      "%zu bytes at %pa, area %s at %pa+%pa", size,
					      &phys, area->name, &area->base, &area->size);
			memset(buf, 0x5a, size);
			KUNIT_EXPECT_EQ(test, buf[0], 0x5a);
			KUNIT_EXPECT_EQ(test, buf[size - 1], 0x5a);
			KUNIT_EXPECT_NULL(test, memchr_inv(buf, 0x5a, size));
			gcma_stats(area, &mid);
			KUNIT_EXPECT_EQ(test, mid.alloc_success, before.alloc_success + 1);
			KUNIT_EXPECT_EQ(test, mid.primary_used_pages,
					before.primary_used_pages + (size >> PAGE_SHIFT));
			dma_free_coherent(dev, size, buf, handle);
			gcma_stats(area, &after);
			KUNIT_EXPECT_EQ(test, after.released, before.released + 1);
			KUNIT_EXPECT_EQ(test, after.primary_used_pages,
					before.primary_used_pages);
		}
	}
}

/* dma_alloc_pages() of each size: pages of the area, counted the same way. */
static void gcma_of_test_pages(struct kunit *test)
{
	unsigned int i, j;

	for (i = 0; i < gcma_of_test_nr_devs; i++) {
		struct device *dev = gcma_of_test_devs[i];
		struct gcma_area *area = gcma_of_test_region(dev);

		KUNIT_ASSERT_NOT_NULL(test, area);
		for (j = 0; j < ARRAY_SIZE(gcma_of_test_sizes); j++) {
			size_t size = gcma_of_test_sizes[j];
			struct gcma_stats before, mid, after;
			dma_addr_t handle;
			struct page *page;
			phys_addr_t phys;

			if (size > area->size / 2)
				continue;
			gcma_stats(area, &before);
			page = dma_alloc_pages(dev, size, &handle, DMA_BIDIRECTIONAL,
					       GFP_KERNEL);
			KUNIT_ASSERT_NOT_NULL_MSG(test, page, "%zu bytes", size);
			phys = page_to_phys(page);
			KUNIT_EXPECT_TRUE_MSG(test, gcma_of_test_inside(area, phys, size),
					      "%zu bytes at %pa, area %s at %pa+%pa", size,
					      &phys, area->name, &area->base, &area->size);
			KUNIT_EXPECT_PTR_EQ(test, gcma_area_of_pfn(page_to_pfn(page)), area);
			KUNIT_EXPECT_EQ(test, dma_to_phys(dev, handle), phys);
			gcma_stats(area, &mid);
			KUNIT_EXPECT_EQ(test, mid.alloc_success, before.alloc_success + 1);
			KUNIT_EXPECT_EQ(test, mid.primary_used_pages,
					before.primary_used_pages + (size >> PAGE_SHIFT));
			dma_free_pages(dev, size, page, handle, DMA_BIDIRECTIONAL);
			gcma_stats(area, &after);
			KUNIT_EXPECT_EQ(test, after.released, before.released + 1);
			KUNIT_EXPECT_EQ(test, after.primary_used_pages,
					before.primary_used_pages);
		}
	}
}

/*
 * Buffers held at once up to half the area, freed in reverse: each one in
 * the area, none overlapping another, the area's pages counted all along.
 */
static void gcma_of_test_many(struct kunit *test)
{
	struct device *dev = gcma_of_test_devs[0];
	struct gcma_area *area = gcma_of_test_region(dev);
	const size_t size = SZ_256K;
	struct gcma_stats before, st;
	unsigned int n, i, k;
	dma_addr_t *handles;
	void **bufs;

	KUNIT_ASSERT_NOT_NULL(test, area);
	n = min_t(size_t, area->size / 2 / size, 64);
	bufs = kunit_kcalloc(test, n, sizeof(*bufs), GFP_KERNEL);
	handles = kunit_kcalloc(test, n, sizeof(*handles), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, bufs);
	KUNIT_ASSERT_NOT_NULL(test, handles);
	gcma_stats(area, &before);
	for (i = 0; i < n; i++) {
		phys_addr_t phys;

		bufs[i] = dma_alloc_coherent(dev, size, &handles[i], GFP_KERNEL);
		KUNIT_ASSERT_NOT_NULL_MSG(test, bufs[i], "buffer %u", i);
		phys = dma_to_phys(dev, handles[i]);
		KUNIT_EXPECT_TRUE(test, gcma_of_test_inside(area, phys, size));
		for (k = 0; k < i; k++)
			KUNIT_EXPECT_TRUE(test, handles[k] + size <= handles[i] ||
					  handles[i] + size <= handles[k]);
	}
	gcma_stats(area, &st);
	KUNIT_EXPECT_EQ(test, st.primary_used_pages,
			before.primary_used_pages + n * (size >> PAGE_SHIFT));
	while (i--)
		dma_free_coherent(dev, size, bufs[i], handles[i]);
	gcma_stats(area, &st);
	KUNIT_EXPECT_EQ(test, st.primary_used_pages, before.primary_used_pages);
	KUNIT_EXPECT_EQ(test, st.released, before.released + n);
}

#define GCMA_OF_TEST_WORKERS	3
#define GCMA_OF_TEST_ROUNDS	64

struct gcma_of_test_worker {
	struct device *dev;
	struct gcma_area *area;
	struct completion done;
	u8 fill;
	unsigned int outside, corrupt, failed;
};

/*
 * One allocator of gcma_of_test_race: each round takes a buffer of 1 to 16
 * pages, fills it with the worker's byte, lets the others run, and checks
 * the byte is still everywhere before freeing it.
 */
static int gcma_of_test_worker_fn(void *data)
{
	struct gcma_of_test_worker *w = data;
	unsigned int round;

	for (round = 0; round < GCMA_OF_TEST_ROUNDS; round++) {
		size_t size = ((round * 7 + w->fill) % 16 + 1) * PAGE_SIZE;
		dma_addr_t handle;
		phys_addr_t phys;
		u8 *buf;

		buf = dma_alloc_coherent(w->dev, size, &handle, GFP_KERNEL);
		if (!buf) {
			w->failed++;
			continue;
		}
		phys = dma_to_phys(w->dev, handle);
		if (!gcma_of_test_inside(w->area, phys, size))
			w->outside++;
		memset(buf, w->fill, size);
		cond_resched();
		if (memchr_inv(buf, w->fill, size))
			w->corrupt++;
		dma_free_coherent(w->dev, size, buf, handle);
	}
	complete(&w->done);
	return 0;
}

/*
 * Allocators racing on one device: every buffer in the area, none shared
 * (a buffer another worker also got would hold the other's byte), none
 * failed (the area is far from full), and the area idle again afterwards.
 */
static void gcma_of_test_race(struct kunit *test)
{
	struct device *dev = gcma_of_test_devs[0];
	struct gcma_area *area = gcma_of_test_region(dev);
	struct gcma_of_test_worker *w;
	struct gcma_stats before, after;
	unsigned int i;

	KUNIT_ASSERT_NOT_NULL(test, area);
	w = kunit_kcalloc(test, GCMA_OF_TEST_WORKERS, sizeof(*w), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, w);
	gcma_stats(area, &before);
	for (i = 0; i < GCMA_OF_TEST_WORKERS; i++) {
		struct task_struct *t;

		w[i].dev = dev;
		w[i].area = area;
		w[i].fill = 0x11 * (i + 1);
		init_completion(&w[i].done);
		t = kthread_run(gcma_of_test_worker_fn, &w[i], "gcma_of_race/%u", i);
		if (IS_ERR(t)) {
			/* Workers already started must end before w goes. */
			while (i--)
				wait_for_completion(&w[i].done);
			KUNIT_FAIL(test, "kthread_run: %ld", PTR_ERR(t));
			return;
		}
	}
	for (i = 0; i < GCMA_OF_TEST_WORKERS; i++) {
		wait_for_completion(&w[i].done);
		KUNIT_EXPECT_EQ_MSG(test, w[i].outside, 0, "worker %u", i);
		KUNIT_EXPECT_EQ_MSG(test, w[i].corrupt, 0, "worker %u", i);
		KUNIT_EXPECT_EQ_MSG(test, w[i].failed, 0, "worker %u", i);
	}
	gcma_stats(area, &after);
	KUNIT_EXPECT_EQ(test, after.alloc_success,
			before.alloc_success + GCMA_OF_TEST_WORKERS * GCMA_OF_TEST_ROUNDS);
	KUNIT_EXPECT_EQ(test, after.primary_used_pages, before.primary_used_pages);
}

/* A GCMA node with "linux,cma-default" is the default DMA area. */
static void gcma_of_test_default_area(struct kunit *test)
{
	struct device_node *root = of_find_node_by_path("/reserved-memory");
	struct device_node *np;
	bool found = false;

	KUNIT_ASSERT_NOT_NULL(test, root);
	for_each_available_child_of_node(root, np) {
		struct reserved_mem *rmem;
		struct gcma_area *area;

		if (!of_property_read_bool(np, "guarantee") ||
		    !of_property_read_bool(np, "linux,cma-default"))
			continue;
		rmem = of_reserved_mem_lookup(np);
		/* A node refused at boot has no area (and may have no rmem). */
		area = rmem ? rmem->priv : NULL;
		if (!area)
			continue;
		KUNIT_EXPECT_PTR_EQ(test, dev_get_cma_area(NULL), area->cma);
		found = true;
	}
	of_node_put(root);
	if (!found)
		kunit_skip(test, "no GCMA node with linux,cma-default");
}

static struct kunit_case gcma_of_test_cases[] = {
	KUNIT_CASE(gcma_of_test_attached),
	KUNIT_CASE(gcma_of_test_coherent),
	KUNIT_CASE(gcma_of_test_pages),
	KUNIT_CASE(gcma_of_test_many),
	KUNIT_CASE(gcma_of_test_race),
	KUNIT_CASE(gcma_of_test_default_area),
	{ }
};

static struct kunit_suite gcma_of_test_suite = {
	.name = "gcma_of",
	.init = gcma_of_test_init,
	.test_cases = gcma_of_test_cases,
};

kunit_test_suite(gcma_of_test_suite);
