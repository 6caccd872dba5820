// SPDX-License-Identifier: GPL-2.0
/*
 * Boot-time reservation of GCMA areas.
 *
 * "gcma=<size>[@<base>]" may be given several times; each occurrence asks
 * for one area.  Parameters are checked when parsed, memory is taken from
 * memblock in gcma_reserve() (called by the architecture's setup code right
 * after the DMA CMA area is reserved), and a request that cannot be met is
 * dropped with a message: the kernel always boots, with the areas it could
 * reserve.  The allocator proper lives in Rust and starts at subsys_initcall.
 */

#define pr_fmt(fmt) "gcma: " fmt

#include <linux/gcma.h>
#include <linux/init.h>
#include <linux/kernel.h>
#include <linux/memblock.h>
#include <linux/mm.h>
#include <linux/pgtable.h>
#include <linux/sizes.h>

struct gcma_request {
	phys_addr_t size;
	phys_addr_t base;
	bool fixed;		/* base given on the command line */
};

static struct gcma_request gcma_requests[GCMA_MAX_AREAS] __initdata;
static unsigned int gcma_nr_requests __initdata;

static struct gcma_reserved_area gcma_areas[GCMA_MAX_AREAS];
static unsigned int gcma_nr_areas;

static int __init gcma_parse(char *arg)
{
	struct gcma_request req = { };
	char *end;

	if (!arg || !*arg) {
		pr_err("invalid gcma= parameter: empty value\n");
		return 0;
	}
	req.size = memparse(arg, &end);
	if (*end == '@') {
		req.base = memparse(end + 1, &end);
		req.fixed = true;
	}
	if (*end) {
		pr_err("invalid gcma=%s: expected <size>[@<base>]\n", arg);
		return 0;
	}
	if (!req.size || !PAGE_ALIGNED(req.size)) {
		pr_err("invalid gcma=%s: size must be a non-zero multiple of %lu\n",
		       arg, PAGE_SIZE);
		return 0;
	}
	if (!PAGE_ALIGNED(req.base)) {
		pr_err("invalid gcma=%s: base must be page aligned\n", arg);
		return 0;
	}
	if (req.fixed && req.base + req.size < req.base) {
		pr_err("invalid gcma=%s: area wraps around the address space\n", arg);
		return 0;
	}
	if (gcma_nr_requests == GCMA_MAX_AREAS) {
		pr_err("invalid gcma=%s: at most %d areas\n", arg, GCMA_MAX_AREAS);
		return 0;
	}
	gcma_requests[gcma_nr_requests++] = req;
	return 0;
}
early_param("gcma", gcma_parse);

/*
 * Areas are aligned to the PMD size when the caller lets us choose, so that
 * huge pages can be carved out of them.
 */
static phys_addr_t __init gcma_align(phys_addr_t size)
{
	return size >= PMD_SIZE ? PMD_SIZE : PAGE_SIZE;
}

void __init gcma_reserve(void)
{
	unsigned int i;

	for (i = 0; i < gcma_nr_requests; i++) {
		struct gcma_request *req = &gcma_requests[i];
		struct gcma_reserved_area *area;
		phys_addr_t base;

		if (req->size > memblock_phys_mem_size()) {
			pr_err("area of %pa bytes is larger than memory; not reserved\n",
			       &req->size);
			continue;
		}
		if (req->fixed) {
			if (memblock_is_region_reserved(req->base, req->size)) {
				pr_err("[%pa+%pa] overlaps reserved memory or another area; not reserved\n",
				       &req->base, &req->size);
				continue;
			}
			if (!memblock_is_region_memory(req->base, req->size)) {
				pr_err("[%pa+%pa] is not all RAM; not reserved\n",
				       &req->base, &req->size);
				continue;
			}
			if (memblock_reserve(req->base, req->size)) {
				pr_err("cannot reserve [%pa+%pa]; not reserved\n",
				       &req->base, &req->size);
				continue;
			}
			base = req->base;
		} else {
			base = memblock_phys_alloc(req->size, gcma_align(req->size));
			if (!base) {
				pr_err("no free range of %pa bytes; not reserved\n",
				       &req->size);
				continue;
			}
		}
		area = &gcma_areas[gcma_nr_areas];
		snprintf(area->name, sizeof(area->name), "gcma%u", gcma_nr_areas);
		area->base = base;
		area->size = req->size;
		gcma_nr_areas++;
		pr_info("area %s reserved: %llu MiB at %pa\n", area->name,
			(unsigned long long)(req->size >> 20), &area->base);
	}
}

unsigned int gcma_nr_reserved_areas(void)
{
	return gcma_nr_areas;
}

const struct gcma_reserved_area *gcma_reserved_area(unsigned int idx)
{
	return idx < gcma_nr_areas ? &gcma_areas[idx] : NULL;
}

static int __init gcma_init(void)
{
	return gcma_rs_init();
}
subsys_initcall(gcma_init);
