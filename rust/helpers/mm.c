// SPDX-License-Identifier: GPL-2.0

#include <linux/buffer_head.h>
#include <linux/cpumask.h>
#include <linux/cpuset.h>
#include <linux/gfp.h>
#include <linux/highmem.h>
#include <linux/huge_mm.h>
#include <linux/memory_hotplug.h>
#include <linux/mempolicy.h>
#include <linux/mm.h>
#include <linux/mmap_lock.h>
#include <linux/minmax.h>
#include <linux/mmzone.h>
#include <linux/nodemask.h>
#include <linux/pagemap.h>
#include <linux/pgalloc_tag.h>
#include <linux/sched/clock.h>
#include <linux/sched/mm.h>
#include <linux/smp.h>
#include <linux/swap.h>
#include <linux/swapops.h>
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

/* Hardware-poisoned pages (kernel::mm::page_access). */

bool rust_helper_rsmm_page_hwpoisoned(const struct page *page)
{
	return PageHWPoison(page);
}

loff_t rust_helper_i_size_read(const struct inode *inode)
{
	return i_size_read(inode);
}

/* For tests that need a page marked bad without a machine check. */
void rust_helper_SetPageHWPoison(struct page *page)
{
	SetPageHWPoison(page);
}

void rust_helper_ClearPageHWPoison(struct page *page)
{
	ClearPageHWPoison(page);
}

/* Pages memory_failure() has poisoned and not unpoisoned, in all. */
long rust_helper_rsmm_num_poisoned_pages(void)
{
#ifdef CONFIG_MEMORY_FAILURE
	return atomic_long_read(&num_poisoned_pages);
#else
	return 0;
#endif
}

int rust_helper_copy_mc_highpage(struct page *to, struct page *from)
{
	return copy_mc_highpage(to, from);
}

/* The clock of GCMA's allocation-path profile (mm/gcma_rs/gcma.rs). */
u64 rust_helper_rsmm_local_clock(void)
{
	return local_clock();
}

/* Address spaces and VMAs (kernel::mm::{Mm, MmWithUser, virt}). */

/* The current task's mm with a user reference, or NULL (kernel thread). */
struct mm_struct *rust_helper_rsmm_current_mm_get(void)
{
	return get_task_mm(current);
}

void rust_helper_rsmm_mmgrab(struct mm_struct *mm)
{
	mmgrab(mm);
}

void rust_helper_rsmm_mmdrop(struct mm_struct *mm)
{
	mmdrop(mm);
}

void rust_helper_rsmm_mmget(struct mm_struct *mm)
{
	mmget(mm);
}

bool rust_helper_rsmm_mmget_not_zero(struct mm_struct *mm)
{
	return mmget_not_zero(mm);
}

void rust_helper_rsmm_mmput(struct mm_struct *mm)
{
	mmput(mm);
}

void rust_helper_rsmm_mmap_read_lock(struct mm_struct *mm)
{
	mmap_read_lock(mm);
}

int rust_helper_rsmm_mmap_read_lock_killable(struct mm_struct *mm)
{
	return mmap_read_lock_killable(mm);
}

void rust_helper_rsmm_mmap_read_unlock(struct mm_struct *mm)
{
	mmap_read_unlock(mm);
}

void rust_helper_rsmm_mmap_write_lock(struct mm_struct *mm)
{
	mmap_write_lock(mm);
}

void rust_helper_rsmm_mmap_write_unlock(struct mm_struct *mm)
{
	mmap_write_unlock(mm);
}

bool rust_helper_rsmm_mmap_read_trylock(struct mm_struct *mm)
{
	return mmap_read_trylock(mm);
}

void rust_helper_rsmm_mmap_assert_write_locked(struct mm_struct *mm)
{
	mmap_assert_write_locked(mm);
}

unsigned long rust_helper_rsmm_task_size_max(void)
{
	return TASK_SIZE_MAX;
}

struct vm_area_struct *rust_helper_rsmm_vma_lookup(struct mm_struct *mm,
						   unsigned long addr)
{
	return vma_lookup(mm, addr);
}

void rust_helper_rsmm_vm_flags_init(struct vm_area_struct *vma,
				    vm_flags_t flags)
{
	vm_flags_init(vma, flags);
}

bool rust_helper_rsmm_vma_is_anonymous(struct vm_area_struct *vma)
{
	return vma_is_anonymous(vma);
}

/*
 * PMD-sized THP allowed by the sysfs settings, madvise/prctl and the kind,
 * as the page-fault path asks (khugepaged's extra conditions left out).
 */
bool rust_helper_rsmm_vma_thp_allowed(struct vm_area_struct *vma)
{
	return thp_vma_allowable_order(vma, vma->vm_flags,
				       TVA_IN_PF | TVA_ENFORCE_SYSFS, PMD_ORDER);
}

bool rust_helper_rsmm_vma_pmd_fits(struct vm_area_struct *vma,
				   unsigned long addr)
{
	return thp_vma_suitable_order(vma, addr, PMD_ORDER);
}

#ifdef CONFIG_PER_VMA_LOCK
/*
 * The VMA write hold of kernel::mm::virt::VmaWriteHold: the VMA's lock
 * taken for writing by a task that holds the mmap lock for reading only,
 * without waiting (no writer may queue on a VMA lock under the mmap read
 * lock).  vm_lock_seq is left alone, so that the hold ends when up_write()
 * runs and not when the mmap lock is next released by a writer; see
 * Documentation/mm/rcx.rst, "RCXVM".
 */
bool rust_helper_rsmm_vma_hold_write_trylock(struct vm_area_struct *vma)
{
	return down_write_trylock(&vma->vm_lock->lock);
}

void rust_helper_rsmm_vma_release_write(struct vm_area_struct *vma)
{
	up_write(&vma->vm_lock->lock);
}

/* Waits for the VMA's read lock under the mmap lock, as uffd_lock_vma(). */
void rust_helper_rsmm_vma_read_lock_wait(struct vm_area_struct *vma)
{
	down_read(&vma->vm_lock->lock);
}

bool rust_helper_rsmm_vma_start_read(struct vm_area_struct *vma)
{
	return vma_start_read(vma);
}

void rust_helper_rsmm_vma_end_read(struct vm_area_struct *vma)
{
	vma_end_read(vma);
}
#endif

/* vm_flags_reset_once() without its assertion of the mmap write lock. */
void rust_helper_rsmm_vm_flags_write_once(struct vm_area_struct *vma,
					  vm_flags_t flags)
{
	WRITE_ONCE(ACCESS_PRIVATE(vma, __vm_flags), flags);
}

/*
 * Zones and pageblocks (rust/kernel/mm/zone.rs).  The counters read here
 * change under the zone lock or without any lock: every read is a racy
 * snapshot, marked as such with data_race(READ_ONCE()).
 */

/* Zone @idx of node @nid, or NULL (no such zone, node offline or absent). */
struct zone *rust_helper_rsmm_node_zone(int nid, unsigned int idx)
{
	pg_data_t *pgdat;

	if (nid < 0 || nid >= nr_node_ids || !node_online(nid) ||
	    idx >= MAX_NR_ZONES)
		return NULL;
	pgdat = NODE_DATA(nid);
	return pgdat ? &pgdat->node_zones[idx] : NULL;
}

const char *rust_helper_rsmm_zone_name(const struct zone *zone)
{
	return zone->name;
}

int rust_helper_rsmm_zone_nid(struct zone *zone)
{
	return zone_to_nid(zone);
}

unsigned int rust_helper_rsmm_zone_idx(const struct zone *zone)
{
	return zone_idx(zone);
}

unsigned long rust_helper_rsmm_zone_start_pfn(const struct zone *zone)
{
	/* Changes under the span seqlock on memory hotplug: a snapshot. */
	return data_race(READ_ONCE(zone->zone_start_pfn));
}

unsigned long rust_helper_rsmm_zone_spanned_pages(const struct zone *zone)
{
	/* Changes under the span seqlock on memory hotplug: a snapshot. */
	return data_race(READ_ONCE(zone->spanned_pages));
}

unsigned long rust_helper_rsmm_zone_present_pages(const struct zone *zone)
{
	/* Changes on memory hotplug: a snapshot. */
	return data_race(READ_ONCE(zone->present_pages));
}

unsigned long rust_helper_rsmm_zone_managed_pages(struct zone *zone)
{
	return zone_managed_pages(zone);
}

/* Free blocks of @order in the buddy lists of @zone (order < NR_PAGE_ORDERS). */
unsigned long rust_helper_rsmm_zone_nr_free(const struct zone *zone,
					    unsigned int order)
{
	/* Changes under the zone lock: a snapshot, as /proc/buddyinfo reads. */
	return data_race(READ_ONCE(zone->free_area[order].nr_free));
}

unsigned int rust_helper_rsmm_pageblock_order(void)
{
	return pageblock_order;
}

/* Migrate type of the pageblock of @pfn, or -1 when @pfn is not online. */
int rust_helper_rsmm_pfn_migratetype(unsigned long pfn)
{
	struct page *page = pfn_to_online_page(pfn);

	return page ? get_pfnblock_flags_mask(page, pfn, MIGRATETYPE_MASK) : -1;
}

void rust_helper_rsmm_get_online_mems(void)
{
	get_online_mems();
}

void rust_helper_rsmm_put_online_mems(void)
{
	put_online_mems();
}

/*
 * The reads of one page for Zone::page_snapshot(), which makes of them a
 * racy snapshot of the page: flags are read as bits, without the checks
 * of the PageFoo() accessors, as the page may change under the reader.
 * The caller holds get_online_mems(), so the struct pages stay.
 */
struct page *rust_helper_rsmm_pfn_to_online_page(unsigned long pfn)
{
	return pfn_to_online_page(pfn);
}

struct zone *rust_helper_rsmm_page_zone(const struct page *page)
{
	return page_zone(page);
}

bool rust_helper_rsmm_page_buddy(const struct page *page)
{
	return PageBuddy(page);
}

/* The order of a free buddy block, read at its head. */
unsigned long rust_helper_rsmm_buddy_order_racy(const struct page *page)
{
	/* Changes under the zone lock: a snapshot. */
	return data_race(READ_ONCE(page_private(page)));
}

struct page *rust_helper_rsmm_compound_head(struct page *page)
{
	return compound_head(page);
}

unsigned int rust_helper_rsmm_compound_order(struct page *page)
{
	return compound_order(page);
}

bool rust_helper_rsmm_page_reserved_bit(const struct page *page)
{
	return test_bit(PG_reserved, &page->flags);
}

int rust_helper_rsmm_page_ref_count(const struct page *page)
{
	return page_ref_count(page);
}

bool rust_helper_rsmm_page_slab(const struct page *page)
{
	return PageSlab(page);
}

bool rust_helper_rsmm_page_lru_bit(const struct page *page)
{
	return test_bit(PG_lru, &page->flags);
}

bool rust_helper_rsmm_page_movable_ops(const struct page *page)
{
	return __PageMovable(page);
}

bool rust_helper_rsmm_page_huge(const struct page *page)
{
	return PageHuge(page);
}

/*
 * Page frames owned by an allocator of their own (kernel::mm::frames): what
 * its page steps read.  The steps themselves are in mm/frames_rust.c, which
 * is not exported to modules as these helpers are.
 */

bool rust_helper_rsmm_put_page_testzero(struct page *page)
{
	return put_page_testzero(page);
}

void rust_helper_rsmm_put_page(struct page *page)
{
	put_page(page);
}

bool rust_helper_rsmm_mem_alloc_profiling_enabled(void)
{
	return mem_alloc_profiling_enabled();
}

int rust_helper_rsmm_page_mapcount_raw(const struct page *page)
{
	return atomic_read(&page->_mapcount);
}

bool rust_helper_rsmm_page_has_mapping(const struct page *page)
{
	return page->mapping;
}

bool rust_helper_rsmm_page_has_memcg_data(const struct page *page)
{
#ifdef CONFIG_MEMCG
	return page->memcg_data;
#else
	return false;
#endif
}

bool rust_helper_rsmm_page_flags_checked_at_prep(const struct page *page)
{
	return page->flags & PAGE_FLAGS_CHECK_AT_PREP;
}

bool rust_helper_rsmm_want_init_on_alloc(gfp_t gfp)
{
	return want_init_on_alloc(gfp);
}

bool rust_helper_rsmm_want_init_on_free(void)
{
	return want_init_on_free();
}

void rust_helper_rsmm_clear_highpage(struct page *page)
{
	clear_highpage(page);
}

bool rust_helper_rsmm_page_head(const struct page *page)
{
	return PageHead(page);
}

bool rust_helper_rsmm_page_tail(const struct page *page)
{
	return PageTail(page);
}

bool rust_helper_rsmm_page_compound(const struct page *page)
{
	return PageCompound(page);
}

unsigned long rust_helper_rsmm_compound_nr(struct page *page)
{
	return compound_nr(page);
}

unsigned long rust_helper_rsmm_page_private(const struct page *page)
{
	return page_private(page);
}

void rust_helper_rsmm_set_page_private(struct page *page, unsigned long v)
{
	set_page_private(page, v);
}

void rust_helper_rsmm_might_sleep(void)
{
	might_sleep();
}

bool rust_helper_rsmm_in_task(void)
{
	return in_task();
}

void rust_helper_rsmm_warn(void)
{
	WARN_ON(1);
}

void rust_helper_rsmm_folio_put(struct folio *folio)
{
	folio_put(folio);
}

/* Locked folios of the page and swap caches (kernel::mm::folio). */

unsigned long rust_helper_rsmm_folio_index(const struct folio *folio)
{
	return folio->index;
}

long rust_helper_rsmm_folio_nr_pages(const struct folio *folio)
{
	return folio_nr_pages(folio);
}

bool rust_helper_rsmm_folio_test_large(const struct folio *folio)
{
	return folio_test_large(folio);
}

bool rust_helper_rsmm_folio_test_large_rmappable(const struct folio *folio)
{
	return folio_test_large_rmappable(folio);
}

bool rust_helper_rsmm_folio_test_swapcache(const struct folio *folio)
{
	return folio_test_swapcache(folio);
}

bool rust_helper_rsmm_folio_test_uptodate(const struct folio *folio)
{
	return folio_test_uptodate(folio);
}

bool rust_helper_rsmm_folio_test_dirty(const struct folio *folio)
{
	return folio_test_dirty(folio);
}

bool rust_helper_rsmm_folio_test_writeback(const struct folio *folio)
{
	return folio_test_writeback(folio);
}

bool rust_helper_rsmm_folio_maybe_dma_pinned(struct folio *folio)
{
	return folio_maybe_dma_pinned(folio);
}

bool rust_helper_rsmm_folio_has_buffers(struct folio *folio)
{
	return folio_buffers(folio);
}

void rust_helper_rsmm_folio_mark_uptodate(struct folio *folio)
{
	folio_mark_uptodate(folio);
}

struct address_space *rust_helper_rsmm_folio_mapping(struct folio *folio)
{
	return folio_mapping(folio);
}

void rust_helper_rsmm_folio_end_read(struct folio *folio, bool success)
{
	folio_end_read(folio, success);
}

unsigned int rust_helper_rsmm_folio_swap_type(const struct folio *folio)
{
	return swp_type(folio->swap);
}

unsigned long rust_helper_rsmm_folio_swap_offset(const struct folio *folio)
{
	return swp_offset(folio->swap);
}

unsigned int rust_helper_memalloc_noreclaim_save(void)
{
	return memalloc_noreclaim_save();
}

void rust_helper_memalloc_noreclaim_restore(unsigned int flags)
{
	memalloc_noreclaim_restore(flags);
}

unsigned int rust_helper_memalloc_nofs_save(void)
{
	return memalloc_nofs_save();
}

void rust_helper_memalloc_nofs_restore(unsigned int flags)
{
	memalloc_nofs_restore(flags);
}

unsigned int rust_helper_memalloc_noio_save(void)
{
	return memalloc_noio_save();
}

void rust_helper_memalloc_noio_restore(unsigned int flags)
{
	memalloc_noio_restore(flags);
}

/* Private folios that verify mode reads into (kernel::mm::gcma::verify). */

struct folio *rust_helper_folio_alloc(gfp_t gfp, unsigned int order)
{
	return folio_alloc(gfp, order);
}

void rust_helper___folio_set_locked(struct folio *folio)
{
	__folio_set_locked(folio);
}

void rust_helper_folio_lock(struct folio *folio)
{
	folio_lock(folio);
}

void rust_helper_folio_wait_locked(struct folio *folio)
{
	folio_wait_locked(folio);
}

void rust_helper_rsmm_mpol_cond_put(struct mempolicy *pol)
{
	mpol_cond_put(pol);
}

bool rust_helper_rsmm_cpusets_enabled(void)
{
	return cpusets_enabled();
}

struct folio *rust_helper_rsmm_vma_alloc_folio_noprof(gfp_t gfp, int order,
						      struct vm_area_struct *vma,
						      unsigned long addr,
						      bool hugepage)
{
	return vma_alloc_folio_noprof(gfp, order, vma, addr, hugepage);
}
