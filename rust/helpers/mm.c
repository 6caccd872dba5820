// SPDX-License-Identifier: GPL-2.0

#include <linux/cpumask.h>
#include <linux/gfp.h>
#include <linux/mm.h>
#include <linux/nodemask.h>
#include <linux/smp.h>
#include <linux/topology.h>

struct page *rust_helper_alloc_pages_node(int nid, gfp_t gfp_mask,
					  unsigned int order)
{
	return alloc_pages_node(nid, gfp_mask, order);
}

unsigned long rust_helper_page_to_pfn(const struct page *page)
{
	return page_to_pfn(page);
}

int rust_helper_page_to_nid(const struct page *page)
{
	return page_to_nid(page);
}

int rust_helper_numa_node_id(void)
{
	return numa_node_id();
}

unsigned int rust_helper_num_online_nodes(void)
{
	return num_online_nodes();
}

bool rust_helper_node_online(int nid)
{
	return node_online(nid);
}

/* nr_node_ids is a variable or a constant depending on MAX_NUMNODES. */
unsigned int rust_helper_rust_nr_node_ids(void)
{
	return nr_node_ids;
}

/*
 * node_possible() tests a bit of a MAX_NUMNODES-bit mask: check the id
 * against nr_node_ids first, so that any id may be asked about.
 */
bool rust_helper_rsmm_node_possible(int nid)
{
	return nid >= 0 && nid < nr_node_ids && node_possible(nid);
}

/* nr_cpu_ids is a variable or a constant depending on NR_CPUS. */
unsigned int rust_helper_rust_nr_cpu_ids(void)
{
	return nr_cpu_ids;
}

void rust_helper_cpu_relax(void)
{
	cpu_relax();
}

unsigned int rust_helper_raw_smp_processor_id(void)
{
	return raw_smp_processor_id();
}

/* The node of a page frame, or -1 when the frame has no struct page. */
int rust_helper_rsmm_pfn_to_nid(unsigned long pfn)
{
	if (!pfn_valid(pfn))
		return -1;
	return page_to_nid(pfn_to_page(pfn));
}

struct page *rust_helper_pfn_to_page(unsigned long pfn)
{
	return pfn_to_page(pfn);
}
