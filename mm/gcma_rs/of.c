// SPDX-License-Identifier: GPL-2.0
/*
 * GCMA areas described by the device tree.
 *
 * A /reserved-memory node that is a reusable "shared-dma-pool" carrying the
 * boolean "guarantee" property is a GCMA area instead of a CMA area (the
 * binding of Documentation/devicetree/bindings/reserved-memory/
 * gcma-shared-dma-pool.yaml).  The node's name, without its unit address,
 * names the area: /sys/kernel/mm/gcma/<name>, /dev/dma_heap/<name>.  The
 * reserved-memory core places and reserves the memory ("reg", or "size"
 * with "alignment" and "alloc-ranges") and calls gcma_rmem_setup(), which
 * checks the node (its own properties and name in Rust, of_node.rs, through
 * gcma_of_check_node()) and puts the area in the table of reserve.c,
 * registered with CMA under the same name like a "gcma=" area.  A device
 * whose node names the area in "memory-region" and whose driver calls
 * of_reserved_mem_device_init() gets it as its CMA area, so that its
 * dma_alloc_coherent(), dma_alloc_pages() and every other allocation of
 * the DMA API's contiguous path come from the area.  "linux,cma-default"
 * makes the area the default DMA area of all devices.
 *
 * rmem_cma_setup() (kernel/dma/contiguous.c), which comes first in the
 * table of reserved-memory handlers (kernel/ links before mm/), leaves
 * "guarantee" nodes to this file.  A node refused here is refused with a
 * message naming it; the core then gives its memory back to the page
 * allocator and the kernel boots without the area.
 *
 * This is C because reserved-memory handlers are registered with a C macro
 * (RESERVEDMEM_OF_DECLARE) and run while the kernel scans the flattened
 * device tree, before the page allocator exists, on functions of memblock
 * and of the FDT scan that are __init.
 */

#define pr_fmt(fmt) "gcma: " fmt

#include <linux/cma.h>
#include <linux/crash_dump.h>
#include <linux/device.h>
#include <linux/dma-map-ops.h>
#include <linux/gcma.h>
#include <linux/initrd.h>
#include <linux/libfdt.h>
#include <linux/memblock.h>
#include <linux/of_fdt.h>
#include <linux/of_reserved_mem.h>
#include <linux/pgtable.h>
#include <linux/string.h>
#include <asm/sections.h>

#include "reserve.h"

/* The property of the binding that makes a shared-dma-pool a GCMA area. */
#define GCMA_OF_PROP		"guarantee"
/* Ours: the area serves transparent huge pages only (as "gcma=...:thp"). */
#define GCMA_OF_PROP_THP	"linux,gcma-thp"

/* FDT offsets of the nodes gcma_rmem_setup() has seen, taken or not. */
static unsigned long gcma_of_seen[GCMA_MAX_AREAS * 2] __initdata;
static unsigned int gcma_of_nr_seen __initdata;

static int gcma_rmem_device_init(struct reserved_mem *rmem, struct device *dev)
{
	struct gcma_area *area = rmem->priv;

	if (area->thp || area->refused || !area->cma) {
		dev_err(dev, "GCMA area %s %s; memory-region not attached\n",
			area->name, area->thp ? "serves transparent huge pages only" :
			area->refused ? "was refused at boot" : "is not a CMA area");
		return -EINVAL;
	}
	dev->cma_area = area->cma;
	return 0;
}

static void gcma_rmem_device_release(struct reserved_mem *rmem,
				     struct device *dev)
{
	dev->cma_area = NULL;
}

static const struct reserved_mem_ops gcma_rmem_ops = {
	.device_init	= gcma_rmem_device_init,
	.device_release	= gcma_rmem_device_release,
};

/* True if [base, base + size) overlaps an area already in the table. */
static bool __init gcma_of_overlaps(phys_addr_t base, phys_addr_t size,
				    const char **other)
{
	unsigned int i;

	for (i = 0; i < gcma_nr_reserved_areas(); i++) {
		struct gcma_area *a = gcma_reserved_area(i);

		if (a && base < a->base + a->size && a->base < base + size) {
			*other = a->name;
			return true;
		}
	}
	return false;
}

/* A node whose "status" is absent, "okay" or "ok". */
static bool __init gcma_of_available(const void *fdt, int node)
{
	const char *status = fdt_getprop(fdt, node, "status", NULL);

	return !status || !strcmp(status, "okay") || !strcmp(status, "ok");
}

static bool __init gcma_of_meets(phys_addr_t base, phys_addr_t size,
				 phys_addr_t b, phys_addr_t s)
{
	return s && base < b + s && b < base + size;
}

/* A GCMA node: a "shared-dma-pool" with the "guarantee" property. */
static bool __init gcma_of_is_gcma(const void *fdt, int node)
{
	return fdt_getprop(fdt, node, GCMA_OF_PROP, NULL) &&
	       !fdt_node_check_compatible(fdt, node, "shared-dma-pool");
}

/*
 * What else holds part of a fixed node's range, or NULL.  The
 * reserved-memory core's first pass reserves a mapped "reg" node with
 * memblock_reserve(), which takes overlaps in silence, and marks a no-map
 * one only if no reservation holds its range; its second pass calls
 * gcma_rmem_setup() for every node all the same.  So the range may belong
 * to another node (every "reg" entry of it counts; overlaps between GCMA
 * nodes are left to gcma_of_overlaps(), the first taken keeps it), to the
 * kernel, the initrd, the device tree or a crash kernel's elfcorehdr, to
 * a /memreserve/ entry, or not be mapped RAM (@nomap: the node is no-map
 * itself, so its own range is).  Reservations made by firmware code
 * (EFI's memory map, TPM logs) are not looked for.  Nodes placed by the
 * kernel ("size") are allocated from free memory and cannot share.
 */
static const char * __init gcma_of_claimed(unsigned long node, bool nomap,
					   phys_addr_t base, phys_addr_t size)
{
	int t_len = (dt_root_addr_cells + dt_root_size_cells) * sizeof(__be32);
	const void *fdt = initial_boot_params;
	struct memblock_region *r;
	int root, child, n;
	u64 b, s;

	root = fdt_path_offset(fdt, "/reserved-memory");
	fdt_for_each_subnode(child, fdt, root) {
		int len;
		const __be32 *reg = fdt_getprop(fdt, child, "reg", &len);

		if (child == node || !reg || !gcma_of_available(fdt, child) ||
		    gcma_of_is_gcma(fdt, child))
			continue;
		for (; len >= t_len; len -= t_len) {
			b = dt_mem_next_cell(dt_root_addr_cells, &reg);
			s = dt_mem_next_cell(dt_root_size_cells, &reg);
			if (gcma_of_meets(base, size, b, s))
				return fdt_get_name(fdt, child, NULL);
		}
	}
	if (gcma_of_meets(base, size, __pa_symbol(_text),
			  __pa_symbol(_end) - __pa_symbol(_text)))
		return "the kernel image";
	if (IS_ENABLED(CONFIG_BLK_DEV_INITRD) &&
	    gcma_of_meets(base, size, phys_initrd_start, phys_initrd_size))
		return "the initrd";
	/* On arm64 the blob is mapped in the fixmap: __pa() cannot take it. */
	if (gcma_of_meets(base, size, initial_boot_params_pa,
			  fdt_totalsize(fdt)))
		return "the device tree blob";
	if (IS_ENABLED(CONFIG_CRASH_DUMP) &&
	    gcma_of_meets(base, size, elfcorehdr_addr, elfcorehdr_size))
		return "the elfcorehdr";
	for (n = 0; !fdt_get_mem_rsv(fdt, n, &b, &s) && s; n++)
		if (gcma_of_meets(base, size, b, s))
			return "a /memreserve/ entry";
	if (!memblock_is_region_memory(base, size))
		return "no RAM";
	for_each_mem_region(r)
		if (!nomap && memblock_is_nomap(r) &&
		    gcma_of_meets(base, size, r->base, r->size))
			return "no-map memory";
	return NULL;
}

static int __init gcma_rmem_setup(struct reserved_mem *rmem)
{
	unsigned long node = rmem->fdt_node;
	struct gcma_of_node facts = {
		.name = rmem->name,
		.base = rmem->base,
		.size = rmem->size,
		.reusable = of_get_flat_dt_prop(node, "reusable", NULL),
		.no_map = of_get_flat_dt_prop(node, "no-map", NULL),
		.thp = of_get_flat_dt_prop(node, GCMA_OF_PROP_THP, NULL),
		.dma_default = of_get_flat_dt_prop(node, "linux,cma-default", NULL),
	};
	char name[GCMA_AREA_NAME_LEN];
	struct gcma_area *area;
	const char *other;
	size_t len;

	if (!of_get_flat_dt_prop(node, GCMA_OF_PROP, NULL))
		return -ENOENT;
	if (gcma_of_nr_seen < ARRAY_SIZE(gcma_of_seen))
		gcma_of_seen[gcma_of_nr_seen++] = node;

	/*
	 * Overlaps first, with -ENOENT: on any other error the
	 * reserved-memory code gives the node's whole range back to memblock
	 * (or clears its no-map mark), and with it the pages of whoever else
	 * holds part of it.  -ENOENT leaves the range as it is.
	 */
	if (gcma_of_overlaps(rmem->base, rmem->size, &other)) {
		pr_err("%s: [%pa+%pa] overlaps area %s; not reserved\n",
		       rmem->name, &rmem->base, &rmem->size, other);
		return -ENOENT;
	}
	other = of_get_flat_dt_prop(node, "reg", NULL) ?
		gcma_of_claimed(node, facts.no_map, rmem->base, rmem->size) : NULL;
	if (other) {
		pr_err("%s: [%pa+%pa] overlaps %s; not reserved\n",
		       rmem->name, &rmem->base, &rmem->size, other);
		return -ENOENT;
	}

	/* The node's own properties, and its name (Rust: of_node.rs). */
	len = gcma_of_check_node(facts);
	if (!len || len >= sizeof(name))
		return -EINVAL;
	memcpy(name, rmem->name, len);
	name[len] = '\0';
	area = gcma_add_area(name, rmem->base, rmem->size, facts.thp);
	if (IS_ERR(area)) {
		pr_err("%s: %s; not reserved\n", rmem->name,
		       PTR_ERR(area) == -EEXIST ? "another area has this name" :
		       "too many areas");
		return PTR_ERR(area);
	}
	if (facts.dma_default && area->cma) {
		dma_contiguous_default_area = area->cma;
		pr_info("%s is the default DMA CMA area\n", area->name);
	} else if (facts.dma_default) {
		pr_err("%s: not a CMA area, so not the default DMA area\n",
		       area->name);
	}
	rmem->ops = &gcma_rmem_ops;
	rmem->priv = area;
	return 0;
}

RESERVEDMEM_OF_DECLARE(gcma, "shared-dma-pool", gcma_rmem_setup);

/*
 * Called by gcma_reserve(), once the kernel has handled every reserved-memory
 * node: names the "guarantee" nodes that never reached gcma_rmem_setup(),
 * which the reserved-memory core skips without a word when they have
 * neither "reg" nor "size", or reports in its own terms when it could not
 * place them.
 */
void __init gcma_of_check(void)
{
	const void *fdt = initial_boot_params;
	int root, child;
	unsigned int i;

	if (!fdt)
		return;
	root = fdt_path_offset(fdt, "/reserved-memory");
	if (root < 0)
		return;
	fdt_for_each_subnode(child, fdt, root) {
		const char *uname = fdt_get_name(fdt, child, NULL);

		if (!gcma_of_is_gcma(fdt, child) ||
		    !gcma_of_available(fdt, child))
			continue;
		for (i = 0; i < gcma_of_nr_seen; i++)
			if (gcma_of_seen[i] == child)
				break;
		if (i < gcma_of_nr_seen)
			continue;
		if (!fdt_getprop(fdt, child, "reg", NULL) &&
		    !fdt_getprop(fdt, child, "size", NULL))
			pr_err("%s: neither \"reg\" nor \"size\"; not reserved\n",
			       uname);
		else
			pr_err("%s: the reserved-memory code did not reserve it (see its message above); not reserved\n",
			       uname);
	}
}
