// SPDX-License-Identifier: GPL-2.0
/*
 * GCMA: the C side of contiguous allocations.
 *
 * The Rust crate owns the page-state map of each area and decides which
 * range an allocation gets; this file does what touches struct pages and
 * the rest of the kernel:
 *
 * - gcma_area_attach() prepares the struct pages of an area once, at
 *   subsys_initcall: memblock left them PageReserved with a reference
 *   each; a free GCMA page has no flag and no reference, like a page
 *   that alloc_contig_range() is about to hand out.  They are never
 *   freed to the buddy allocator.
 * - gcma_alloc() and gcma_release() are the entry points: the pages of
 *   an allocation get one reference each, as alloc_contig_range() gives
 *   them, and lose it on release.  With __GFP_COMP (cma_alloc_folio())
 *   the range becomes one compound page with one reference on its head,
 *   and is turned back into plain free pages when the folio is released.
 * - /sys/kernel/mm/gcma/<area>/ shows the counters of each area, and
 *   /sys/kernel/debug/gcma/<area>/alloc_latency a log2 histogram of the
 *   time gcma_alloc() takes; tracepoints gcma:gcma_alloc_start,
 *   gcma_alloc_finish and gcma_release follow each call.
 */

#define pr_fmt(fmt) "gcma: " fmt

#include <linux/bug.h>
#include <linux/debugfs.h>
#include <linux/gcma.h>
#include <linux/highmem.h>
#include <linux/kasan.h>
#include <linux/kobject.h>
#include <linux/log2.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/page_ref.h>
#include <linux/sched/clock.h>
#include <linux/slab.h>
#include <linux/seq_file.h>
#include <linux/sysfs.h>

#define CREATE_TRACE_POINTS
#include <trace/events/gcma.h>

#include "../internal.h"

static gcma_discard_fn gcma_discard;

static unsigned long gcma_base_pfn(const struct gcma_area *area)
{
	return PHYS_PFN(area->base);
}

static unsigned long gcma_nr_pages(const struct gcma_area *area)
{
	return area->size >> PAGE_SHIFT;
}

static const void *gcma_area_rs(const struct gcma_area *area)
{
	/* Pairs with the release in gcma_area_attach(). */
	return area ? smp_load_acquire(&area->rs) : NULL;
}

static void gcma_sysfs_add(struct gcma_area *area);
static void gcma_debugfs_add(struct gcma_area *area);

/**
 * gcma_area_attach() - put an area in service
 * @area: the area, as reserved at boot
 * @rs: its allocator state, valid for the life of the system
 *
 * Called once per area by the Rust crate at subsys_initcall time.
 */
void gcma_area_attach(struct gcma_area *area, const void *rs)
{
	unsigned long pfn, base = gcma_base_pfn(area);

	for (pfn = base; pfn < base + gcma_nr_pages(area); pfn++) {
		struct page *page = pfn_to_page(pfn);

		ClearPageReserved(page);
		set_page_count(page, 0);
		if (!((pfn - base) % 4096))
			cond_resched();
	}
	/* The pages are ready before the area can be seen in service. */
	smp_store_release(&area->rs, rs);
	gcma_sysfs_add(area);
	gcma_debugfs_add(area);
}

/**
 * gcma_register_discard() - register the secondary clients' discard hook
 * @fn: called for each lent page a contiguous allocation takes over
 *
 * Return: 0, or -EBUSY if a hook is registered already.
 */
int gcma_register_discard(gcma_discard_fn fn)
{
	return cmpxchg(&gcma_discard, NULL, fn) ? -EBUSY : 0;
}
EXPORT_SYMBOL_GPL(gcma_register_discard);

void gcma_call_discard(struct gcma_area *area, unsigned long pfn)
{
	gcma_discard_fn fn = READ_ONCE(gcma_discard);

	if (fn)
		fn(area, pfn);
}

/* Give the @count free pages from @page the state an allocation returns. */
static void gcma_prep_pages(struct page *page, unsigned long count, gfp_t gfp)
{
	bool compound = gfp & __GFP_COMP;
	unsigned long i;

	/* One pass over the struct pages: the per-page work is the cost. */
	for (i = 0; i < count; i++) {
		struct page *p = nth_page(page, i);

		page_kasan_tag_reset(p);
		if (gfp & __GFP_ZERO)
			clear_highpage(p);
		if (!compound)
			set_page_count(p, 1);
	}
	if (compound) {
		/* One reference, on the head; tails keep a zero count. */
		set_page_count(page, 1);
		prep_compound_page(page, ilog2(count));
	}
}

/**
 * gcma_alloc_gfp() - allocate contiguous pages from a GCMA area
 * @area: the area
 * @count: number of pages
 * @align: alignment of the first page, as a page order
 * @gfp: __GFP_NOWARN and __GFP_ZERO are honoured; with __GFP_COMP,
 *	@count must be a power of two and the pages form one compound page
 *	(a folio of that order, aligned to its size)
 *
 * Return: the first page, or NULL if @count is 0, the area is not in
 * service or has no free range of @count pages at that alignment, or
 * __GFP_COMP is asked for a count that is not a power of two.
 */
struct page *gcma_alloc_gfp(struct gcma_area *area, unsigned long count,
			    unsigned int align, gfp_t gfp)
{
	const void *rs = gcma_area_rs(area);
	struct page *page = NULL;
	unsigned long start;
	u64 t0, ns;
	int ret;

	if (!rs || !count)
		return NULL;
	if (count == 1)
		gfp &= ~__GFP_COMP;	/* an order-0 page is never compound */
	if (gfp & __GFP_COMP) {
		if (!is_power_of_2(count)) {
			pr_warn_ratelimited("%s: a compound allocation needs a power-of-two count, not %lu\n",
					    area->name, count);
			return NULL;
		}
		align = max_t(unsigned int, align, ilog2(count));
	}
	trace_gcma_alloc_start(area->name, count, align);
	/*
	 * local_clock(): cheap on every machine, where ktime_get_ns() may
	 * read a slow clocksource (HPET).  The caller may move to another
	 * CPU meanwhile; a negative difference counts as 0.
	 */
	t0 = local_clock();
	ret = gcma_rs_alloc(rs, count, align, &start);
	if (!ret) {
		page = pfn_to_page(gcma_base_pfn(area) + start);
		gcma_prep_pages(page, count, gfp);
	}
	ns = local_clock() - t0;
	if ((s64)ns < 0)
		ns = 0;
	atomic_long_inc(&area->lat[min(ns ? ilog2(ns) : 0, GCMA_LAT_BUCKETS - 1)]);
	trace_gcma_alloc_finish(area->name, page ? page_to_pfn(page) : -1UL,
				count, align, ret, ns);
	if (ret && !(gfp & __GFP_NOWARN))
		pr_err_ratelimited("%s: alloc of %lu pages (align %u) failed: %d\n",
				   area->name, count, align, ret);
	return page;
}
EXPORT_SYMBOL_GPL(gcma_alloc_gfp);

struct page *gcma_alloc(struct gcma_area *area, unsigned long count,
			unsigned int align, bool no_warn)
{
	return gcma_alloc_gfp(area, count, align,
			      GFP_KERNEL | (no_warn ? __GFP_NOWARN : 0));
}
EXPORT_SYMBOL_GPL(gcma_alloc);

/*
 * Turn the compound page @head of @count pages back into plain pages, as
 * the page allocator does when it frees one: clear the head and tail marks
 * and the folio fields the tails' words hold.
 */
static void gcma_clear_compound(struct page *head, unsigned long count)
{
	unsigned long i;

	head[1].flags &= ~PAGE_FLAGS_SECOND;
	for (i = 1; i < count; i++) {
		struct page *p = nth_page(head, i);

		clear_compound_head(p);
		p->mapping = NULL;
		p->index = 0;
		set_page_private(p, 0);
		p->flags &= ~PAGE_FLAGS_CHECK_AT_PREP;
	}
	head->mapping = NULL;
	set_page_private(head, 0);
	head->flags &= ~PAGE_FLAGS_CHECK_AT_PREP;
}

/*
 * Take the allocation's reference of the compound page at @page of @count
 * pages.  Return NULL on success, else why it cannot be released: it must
 * be released whole, unmapped and with only the allocation's reference.
 */
static const char *gcma_freeze_folio(struct page *page, unsigned long count)
{
	struct folio *folio = page_folio(page);

	if (folio_nr_pages(folio) != count)
		return "not the whole folio";
	if (folio_mapped(folio) ||
	    (folio_order(folio) > 1 && !list_empty(&folio->_deferred_list)))
		return "folio still in use";
	if (!folio_ref_freeze(folio, 1))
		return "folio still in use";
	gcma_clear_compound(page, count);
	return NULL;
}

/*
 * Take the allocation's reference of each of the @count plain pages from
 * @page, in one pass: an atomic 1 -> 0 per page, so that a reference
 * taken concurrently (a speculative get by a pfn walker) is seen, and a
 * page found in use or belonging to a folio (a head with its reference,
 * a tail with none) undoes the pages already done.  Return NULL on
 * success, else why the pages cannot be released.
 */
static const char *gcma_freeze_pages(struct page *page, unsigned long count)
{
	const char *why = NULL;
	unsigned long i;

	for (i = 0; i < count; i++) {
		struct page *p = nth_page(page, i);

		if (unlikely(PageHead(p))) {
			why = "part of a folio";
			break;
		}
		if (unlikely(!page_ref_freeze(p, 1))) {
			why = PageTail(p) ? "part of a folio" : "pages still in use";
			break;
		}
	}
	if (why)
		while (i--)
			page_ref_unfreeze(nth_page(page, i), 1);
	return why;
}

/**
 * gcma_release() - release pages allocated by gcma_alloc()
 * @area: the area
 * @pages: first page
 * @count: number of pages; plain pages may be released piecewise, a
 *	compound page (from __GFP_COMP) only whole
 *
 * Return: true if the pages were released; false, with a warning and
 * nothing changed, if any of them is not allocated from @area or is
 * still referenced by someone else (its reference count is not 1), or if
 * the range covers part of a compound page.
 */
bool gcma_release(struct gcma_area *area, const struct page *pages,
		  unsigned long count)
{
	const void *rs = gcma_area_rs(area);
	unsigned long pfn, start;
	const char *why;
	bool folio;
	int ret;

	if (!rs || !pages || !count)
		return false;
	pfn = page_to_pfn(pages);
	start = pfn - gcma_base_pfn(area);
	if (pfn < gcma_base_pfn(area) ||
	    gcma_rs_check_allocated(rs, start, count)) {
		pr_warn_ratelimited("%s: refusing to release %lu pages at pfn %#lx: not allocated\n",
				    area->name, count, pfn);
		return false;
	}
	folio = PageHead(pfn_to_page(pfn));
	if (folio)
		why = gcma_freeze_folio(pfn_to_page(pfn), count);
	else
		why = gcma_freeze_pages(pfn_to_page(pfn), count);
	if (why) {
		/* Someone still holds the pages: keep the range allocated. */
		pr_warn_ratelimited("%s: refusing to release %lu pages at pfn %#lx: %s\n",
				    area->name, count, pfn, why);
		return false;
	}
	ret = gcma_rs_release(rs, start, count);
	if (ret) {
		/*
		 * The map refused (a concurrent change since the check above):
		 * give the pages back the state the caller handed them in.
		 */
		gcma_prep_pages(pfn_to_page(pfn), count,
				folio ? __GFP_COMP : 0);
		pr_warn_ratelimited("%s: refusing to release %lu pages at pfn %#lx: %d\n",
				    area->name, count, pfn, ret);
	}
	trace_gcma_release(area->name, pfn, count, !ret);
	return !ret;
}
EXPORT_SYMBOL_GPL(gcma_release);

/**
 * gcma_stats() - snapshot the counters of an area
 * @area: the area
 * @st: filled in; all zero if the area is not in service
 */
void gcma_stats(struct gcma_area *area, struct gcma_stats *st)
{
	const void *rs = gcma_area_rs(area);

	memset(st, 0, sizeof(*st));
	if (rs)
		gcma_rs_stats(rs, st);
}
EXPORT_SYMBOL_GPL(gcma_stats);

#ifdef CONFIG_SYSFS
struct gcma_kobject {
	struct kobject kobj;
	struct gcma_area *area;
};

static struct kobject *gcma_sysfs_root;

static struct gcma_area *gcma_kobj_area(struct kobject *kobj)
{
	return container_of(kobj, struct gcma_kobject, kobj)->area;
}

struct gcma_stat_attr {
	struct kobj_attribute attr;
	size_t offset;		/* of the counter in struct gcma_stats */
};

static ssize_t gcma_stat_show(struct kobject *kobj,
			      struct kobj_attribute *attr, char *buf)
{
	struct gcma_stat_attr *sa = container_of(attr, struct gcma_stat_attr, attr);
	struct gcma_stats st;

	gcma_stats(gcma_kobj_area(kobj), &st);
	return sysfs_emit(buf, "%llu\n", *(u64 *)((char *)&st + sa->offset));
}

static struct gcma_stat_attr gcma_stat_attrs[] = {
	{ __ATTR(total_pages, 0444, gcma_stat_show, NULL),
	  offsetof(struct gcma_stats, total_pages) },
	{ __ATTR(primary_used_pages, 0444, gcma_stat_show, NULL),
	  offsetof(struct gcma_stats, primary_used_pages) },
	{ __ATTR(secondary_lent_pages, 0444, gcma_stat_show, NULL),
	  offsetof(struct gcma_stats, secondary_lent_pages) },
	{ __ATTR(alloc_success, 0444, gcma_stat_show, NULL),
	  offsetof(struct gcma_stats, alloc_success) },
	{ __ATTR(alloc_fail, 0444, gcma_stat_show, NULL),
	  offsetof(struct gcma_stats, alloc_fail) },
	{ __ATTR(discarded_pages, 0444, gcma_stat_show, NULL),
	  offsetof(struct gcma_stats, discarded_pages) },
};

static struct attribute *gcma_attrs[] = {
	&gcma_stat_attrs[0].attr.attr,
	&gcma_stat_attrs[1].attr.attr,
	&gcma_stat_attrs[2].attr.attr,
	&gcma_stat_attrs[3].attr.attr,
	&gcma_stat_attrs[4].attr.attr,
	&gcma_stat_attrs[5].attr.attr,
	NULL,
};
ATTRIBUTE_GROUPS(gcma);

static void gcma_kobj_release(struct kobject *kobj)
{
	kfree(container_of(kobj, struct gcma_kobject, kobj));
}

static const struct kobj_type gcma_ktype = {
	.release = gcma_kobj_release,
	.sysfs_ops = &kobj_sysfs_ops,
	.default_groups = gcma_groups,
};

static void gcma_sysfs_add(struct gcma_area *area)
{
	struct gcma_kobject *gk;

	if (!gcma_sysfs_root) {
		gcma_sysfs_root = kobject_create_and_add("gcma", mm_kobj);
		if (!gcma_sysfs_root)
			goto fail;
	}
	gk = kzalloc(sizeof(*gk), GFP_KERNEL);
	if (!gk)
		goto fail;
	gk->area = area;
	if (kobject_init_and_add(&gk->kobj, &gcma_ktype, gcma_sysfs_root,
				 "%s", area->name)) {
		kobject_put(&gk->kobj);
		goto fail;
	}
	area->kobj = &gk->kobj;
	return;
fail:
	pr_warn("%s: no sysfs directory\n", area->name);
}
#else
static void gcma_sysfs_add(struct gcma_area *area) { }
#endif

#ifdef CONFIG_DEBUG_FS
static int gcma_latency_show(struct seq_file *m, void *unused)
{
	struct gcma_area *area = m->private;
	unsigned int i;

	seq_puts(m, "# allocations taking [2^i, 2^(i+1)) ns\n");
	for (i = 0; i < GCMA_LAT_BUCKETS; i++) {
		long n = atomic_long_read(&area->lat[i]);

		if (n)
			seq_printf(m, "%12llu %ld\n", 1ULL << i, n);
	}
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(gcma_latency);

static void gcma_debugfs_add(struct gcma_area *area)
{
	static struct dentry *root;
	struct dentry *dir;

	if (!root)
		root = debugfs_create_dir("gcma", NULL);
	dir = debugfs_create_dir(area->name, root);
	debugfs_create_file("alloc_latency", 0444, dir, area,
			    &gcma_latency_fops);
}
#else
static void gcma_debugfs_add(struct gcma_area *area) { }
#endif
