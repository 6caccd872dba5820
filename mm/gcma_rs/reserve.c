// SPDX-License-Identifier: GPL-2.0
/*
 * Boot-time reservation of GCMA areas.
 *
 * "gcma=<size>[@<base>][:thp]" may be given several times; each occurrence
 * asks for one area (":thp": one that serves transparent huge pages only,
 * see thp.c).  Values are checked and kept when parsed, by
 * gcma_param_area() (Rust, boot_params.rs, which early_param() registers),
 * memory is taken from memblock in gcma_reserve() (called
 * by the architecture's setup code right after the DMA CMA area is
 * reserved), and a request that cannot be met is dropped with a message:
 * the kernel always boots, with the areas it could reserve.  The allocator
 * proper lives in Rust and starts at subsys_initcall, where it refuses an
 * area that spans zones (gcma_area_refuse() gives its memory back).
 *
 * With CONFIG_CMA, each area is also registered as a CMA area of the same
 * name and marked as GCMA's, so that cma_alloc() and cma_release() on it
 * are served by GCMA (mm/cma.c dispatches on cma->gcma) and CMA never
 * hands its pages to the buddy allocator.  "gcma.dma_cma=1" makes the
 * first area the default DMA CMA area.
 *
 * This is C because the architecture's setup code calls it to fill the
 * table of areas, which the crate reads at subsys_initcall time and of.c
 * fills too, through memblock and CMA functions that are __init, and
 * because early parameters are registered by a C macro.
 * gcma_area_by_name() is exported to modules, which 6.12 cannot do for a
 * Rust function.
 */

#define pr_fmt(fmt) "gcma: " fmt

#include <linux/cma.h>
#include <linux/dma-map-ops.h>
#include <linux/gcma.h>
#include <linux/init.h>
#include <linux/kernel.h>
#include <linux/memblock.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/pgtable.h>
#include <linux/sizes.h>

#ifdef CONFIG_CMA
#include "../cma.h"
#endif
#include "reserve.h"

static struct gcma_area gcma_areas[GCMA_MAX_AREAS];
static unsigned int gcma_nr_areas;

/* The handlers, in boot_params.rs, check the values and keep them. */
early_param("gcma", gcma_param_area);
early_param("gcma.dma_cma", gcma_param_dma_cma);

/*
 * Registers @area as a CMA area of the same name, served by GCMA.  An area
 * CMA cannot take (not aligned to CMA_MIN_ALIGNMENT_BYTES, or no CMA slot
 * left) stays usable through the GCMA interface only.
 */
static void __init gcma_register_cma(struct gcma_area *area)
{
#ifdef CONFIG_CMA
	struct cma *cma;
	int ret;

	ret = cma_init_reserved_mem(area->base, area->size, 0, area->name, &cma);
	if (ret) {
		pr_warn("%s: not registered with CMA (%d); GCMA interface only\n",
			area->name, ret);
		return;
	}
	cma->gcma = area;
	/* Should CMA fail to activate it, the pages must stay ours. */
	cma_reserve_pages_on_error(cma);
	area->cma = cma;
#endif
}

/*
 * Areas are aligned to the PMD size when the caller lets us choose, so that
 * huge pages can be carved out of them.
 */
static phys_addr_t __init gcma_align(phys_addr_t size)
{
	return size >= PMD_SIZE ? PMD_SIZE : PAGE_SIZE;
}

/*
 * "gcma.dma_cma=1": the first command-line area, @first, replaces the
 * default DMA CMA area.
 */
static void __init gcma_set_dma_default(struct gcma_area *first)
{
#ifdef CONFIG_DMA_CMA
	if (first && first->cma) {
		dma_contiguous_default_area = first->cma;
		pr_info("%s is the default DMA CMA area\n", first->name);
		return;
	}
#endif
	pr_err("gcma.dma_cma: no area registered with CMA; default DMA area unchanged\n");
}

/**
 * gcma_add_area() - put reserved memory in the table of areas
 * @name: the area's name, unique, shorter than GCMA_AREA_NAME_LEN
 * @base: physical address, reserved in memblock by the caller
 * @size: size in bytes
 * @thp: an area that serves transparent huge pages only
 *
 * Registers a device area (not @thp) with CMA under the same name.  Called
 * for "gcma=" requests by gcma_reserve() and for device-tree nodes by of.c,
 * before the areas go in service at subsys_initcall time.
 *
 * Return: the area, ERR_PTR(-EEXIST) if @name is taken, ERR_PTR(-ENOSPC)
 * if the table is full.  On error the caller still owns the memory.
 */
struct gcma_area * __init gcma_add_area(const char *name, phys_addr_t base,
					phys_addr_t size, bool thp)
{
	struct gcma_area *area;

	if (gcma_area_by_name(name))
		return ERR_PTR(-EEXIST);
	if (gcma_nr_areas == GCMA_MAX_AREAS)
		return ERR_PTR(-ENOSPC);
	area = &gcma_areas[gcma_nr_areas++];
	strscpy(area->name, name, sizeof(area->name));
	area->base = base;
	area->size = size;
	area->thp = thp;
	pr_info("area %s reserved: %llu MiB at %pa%s\n", area->name,
		(unsigned long long)(size >> 20), &area->base,
		thp ? ", for THP" : "");
	/* THP areas keep out of CMA: devices cannot drain them. */
	if (!thp)
		gcma_register_cma(area);
	return area;
}

/*
 * Reserves the "gcma=" areas.  Called by the architecture's setup code
 * right after dma_contiguous_reserve(); device-tree areas (of.c) were put
 * in the table before, when the kernel scanned /reserved-memory.
 * Command-line areas are named gcma0, gcma1, ... in command-line order,
 * whatever the device tree holds.
 */
void __init gcma_reserve(void)
{
	struct gcma_area *first = NULL;
	unsigned int i, nr_cmdline = 0;

	gcma_of_check();
	for (i = 0; i < GCMA_MAX_AREAS; i++) {
		struct gcma_request req = gcma_boot_request(i);
		char name[GCMA_AREA_NAME_LEN];
		struct gcma_area *area;
		phys_addr_t base;

		if (!req.size)
			break;
		if (req.size > memblock_phys_mem_size()) {
			pr_err("area of %pa bytes is larger than memory; not reserved\n",
			       &req.size);
			continue;
		}
		if (req.fixed) {
			if (memblock_is_region_reserved(req.base, req.size)) {
				pr_err("[%pa+%pa] overlaps reserved memory or another area; not reserved\n",
				       &req.base, &req.size);
				continue;
			}
			if (!memblock_is_region_memory(req.base, req.size)) {
				pr_err("[%pa+%pa] is not all RAM; not reserved\n",
				       &req.base, &req.size);
				continue;
			}
			if (memblock_reserve(req.base, req.size)) {
				pr_err("cannot reserve [%pa+%pa]; not reserved\n",
				       &req.base, &req.size);
				continue;
			}
			base = req.base;
		} else {
			base = memblock_phys_alloc(req.size, gcma_align(req.size));
			if (!base) {
				pr_err("no free range of %pa bytes; not reserved\n",
				       &req.size);
				continue;
			}
		}
		snprintf(name, sizeof(name), "gcma%u", nr_cmdline);
		area = gcma_add_area(name, base, req.size, req.thp);
		if (IS_ERR(area)) {
			pr_err("%s: %s; not reserved\n", name,
			       PTR_ERR(area) == -EEXIST ? "a device-tree area has this name" :
			       "too many areas");
			memblock_phys_free(base, req.size);
			continue;
		}
		if (!nr_cmdline++)
			first = area;
	}
	if (gcma_boot_dma_cma())
		gcma_set_dma_default(first);
}

unsigned int gcma_nr_reserved_areas(void)
{
	return gcma_nr_areas;
}

/* Area @idx in command-line order, or NULL (no such area, or refused). */
struct gcma_area *gcma_reserved_area(unsigned int idx)
{
	if (idx >= gcma_nr_areas || gcma_areas[idx].refused)
		return NULL;
	return &gcma_areas[idx];
}

/**
 * gcma_device_cma() - the CMA area of a device area
 * @idx: the area's index, from 0 to GCMA_MAX_AREAS - 1 (gcma<idx>)
 *
 * A device area is an area in service that CMA took: not a ":thp" area
 * (never a CMA area), not one CMA could not take (unaligned to
 * CMA_MIN_ALIGNMENT_BYTES, no CMA slot left), not one refused at boot.
 * The dma-buf CMA heap gives each a heap of its name.
 *
 * Return: the area's struct cma, or NULL if @idx is no device area.
 */
struct cma *gcma_device_cma(unsigned int idx)
{
	struct gcma_area *area;

	if (idx >= gcma_nr_areas)
		return NULL;
	area = &gcma_areas[idx];
	if (area->thp || area->refused || !READ_ONCE(area->in_service))
		return NULL;
	return area->cma;
}

struct gcma_area *gcma_area_by_name(const char *name)
{
	unsigned int i;

	for (i = 0; i < gcma_nr_areas; i++)
		if (!strcmp(gcma_areas[i].name, name))
			return &gcma_areas[i];
	return NULL;
}
EXPORT_SYMBOL_GPL(gcma_area_by_name);

/*
 * Gives the memory of @area, never put in service, to the page allocator:
 * gcma_rs_init() (init.rs) refuses an area that spans zones.
 */
void gcma_area_refuse(struct gcma_area *area)
{
	if (WARN_ON(READ_ONCE(area->in_service) || area->refused))
		return;
	WRITE_ONCE(area->refused, true);
	free_reserved_area(phys_to_virt(area->base),
			   phys_to_virt(area->base + area->size), -1, NULL);
}

static int __init gcma_init(void)
{
	gcma_rs_init();
	return 0;
}
subsys_initcall(gcma_init);
