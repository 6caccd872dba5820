/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Bonsai VMA index: a Bonsai tree per address space that holds the same
 * VMAs as mm->mm_mt, so that page faults find their VMA in it under RCU
 * (Documentation/mm/bonsai.rst).
 *
 * The index is Rust (mm/bonsai_rs/vma/); its switches and counters are
 * C glue (mm/bonsai_rs/vma.c).  This header holds the hooks the existing
 * files call where the maple tree of an address space changes or is
 * searched by the fault path.  Each is an inline test of a pointer or a
 * static key around a call into Rust, and nothing at all without
 * CONFIG_BONSAI_VMA.
 *
 * Writers: every hook that changes an index runs with the mmap lock of
 * its address space held for writing (or with the address space not yet
 * or no longer visible to any other task), the rule the maple tree's own
 * stores follow.  The stores never sleep or allocate: they draw nodes
 * from a reserve that bonsai_vma_prealloc_mas() fills where the maple
 * tree preallocates, and an index whose reserve runs short is dropped.
 */
#ifndef _LINUX_BONSAI_VMA_H
#define _LINUX_BONSAI_VMA_H

#include <linux/gfp_types.h>
#include <linux/jump_label.h>
#include <linux/maple_tree.h>
#include <linux/mm_types.h>

/*
 * Events and gauges, counted per CPU and shown summed in
 * /sys/kernel/debug/bonsai_vma/<name> (names in vma.c).
 */
enum bonsai_vma_event {
	BONSAI_VMA_LOOKUPS,		/* fault-path lookups in an index */
	BONSAI_VMA_HITS,		/* ... that found a VMA */
	BONSAI_VMA_MISSES,		/* ... that found none (maple tree asked) */
	BONSAI_VMA_RETRIES,		/* lookups after a detached candidate */
	BONSAI_VMA_FALLBACK_NOINDEX,	/* faults of an mm without index */
	BONSAI_VMA_FALLBACK_RETRIES,	/* retries exhausted: maple tree */
	BONSAI_VMA_STORES,		/* stores and clears mirrored */
	BONSAI_VMA_INDEX_CREATED,
	BONSAI_VMA_INDEX_DROPPED,	/* reserve ran short: index given up */
	BONSAI_VMA_INDEX_ALLOC_FAILED,	/* no index for a new mm */
	BONSAI_VMA_PREALLOC_FAILED,	/* reserve top-up failed (no harm yet) */
	BONSAI_VMA_INDEXES,		/* gauge: live indexes */
	BONSAI_VMA_VMAS,		/* gauge: ranges in live indexes */
	BONSAI_VMA_NODES,		/* gauge: nodes owned by live indexes */
	BONSAI_VMA_CROSSCHECK_CHECKED,
	BONSAI_VMA_CROSSCHECK_DIFFS,
	BONSAI_VMA_CROSSCHECK_UNVERIFIED,
	NR_BONSAI_VMA_EVENTS
};

#ifdef CONFIG_BONSAI_VMA

DECLARE_STATIC_KEY_TRUE(bonsai_vma_lookup_key);
extern bool bonsai_vma_crosscheck;

/* vma.c */
bool bonsai_vma_enabled(void);
void bonsai_vma_count(enum bonsai_vma_event ev, long delta);
void bonsai_vma_report_diff(struct mm_struct *mm, unsigned long addr,
			    struct vm_area_struct *index_vma,
			    struct vm_area_struct *tree_vma);

/* Rust, mm/bonsai_rs/vma/entry.rs */
void bonsai_vma_create(struct mm_struct *mm);
void bonsai_vma_dup(struct mm_struct *mm);
void bonsai_vma_destroy(struct mm_struct *mm);
void bonsai_vma_prealloc(struct mm_struct *mm, unsigned long start,
			 unsigned long last, gfp_t gfp);
void bonsai_vma_store(struct mm_struct *mm, unsigned long start,
		      unsigned long last, struct vm_area_struct *vma);
struct vm_area_struct *bonsai_vma_find(struct mm_struct *mm,
				       unsigned long addr,
				       unsigned int attempt);

/* The sum over CPUs of counter @ev (tests, debugfs). */
long bonsai_vma_read(enum bonsai_vma_event ev);

#ifdef CONFIG_BONSAI_KUNIT_TEST
/* KUnit fixture (vma_test.c): VMA changes through the system calls. */
enum bonsai_vma_test_call {
	BONSAI_VMA_TEST_MMAP,
	BONSAI_VMA_TEST_MUNMAP,
	BONSAI_VMA_TEST_MPROTECT,
	BONSAI_VMA_TEST_MREMAP,
	BONSAI_VMA_TEST_MADVISE,
};

long bonsai_vma_test_call(enum bonsai_vma_test_call call, unsigned long a,
			  unsigned long b, unsigned long c, unsigned long d,
			  unsigned long e);
void bonsai_vma_test_use_mm(struct mm_struct *mm);
void bonsai_vma_test_unuse_mm(struct mm_struct *mm);
void bonsai_vma_test_end_read(struct vm_area_struct *vma);
#endif

/* vma_iter_*() only ever iterate over the maple tree of an mm. */
static inline struct mm_struct *bonsai_vma_mm_of(struct ma_state *mas)
{
	return container_of(mas->tree, struct mm_struct, mm_mt);
}

/* mm_init(): a copy of the parent's mm_struct starts without index. */
static inline void bonsai_vma_mm_init(struct mm_struct *mm)
{
	mm->bonsai_vma = NULL;
}

/* mm_alloc(): a new, empty address space gets an index while enabled. */
static inline struct mm_struct *bonsai_vma_mm_alloc(struct mm_struct *mm)
{
	if (mm)
		bonsai_vma_create(mm);
	return mm;
}

/* dup_mmap() succeeded: build the child's index from its own VMAs. */
static inline void bonsai_vma_mm_dup(struct mm_struct *mm)
{
	bonsai_vma_dup(mm);
}

/* exit_mmap() before the VMAs are freed, and __mmdrop(). */
static inline void bonsai_vma_mm_exit(struct mm_struct *mm)
{
	if (mm->bonsai_vma)
		bonsai_vma_destroy(mm);
}

/* Where the maple tree preallocates for the range @mas is set to. */
static inline void bonsai_vma_prealloc_mas(struct ma_state *mas)
{
	struct mm_struct *mm = bonsai_vma_mm_of(mas);

	if (unlikely(mm->bonsai_vma))
		bonsai_vma_prealloc(mm, mas->index, mas->last, GFP_KERNEL);
}

/* After the maple tree stored @vma (or NULL) for [@start, @last]. */
static inline void bonsai_vma_mirror(struct ma_state *mas, unsigned long start,
				     unsigned long last,
				     struct vm_area_struct *vma)
{
	struct mm_struct *mm = bonsai_vma_mm_of(mas);

	if (unlikely(mm->bonsai_vma))
		bonsai_vma_store(mm, start, last, vma);
}

/* The same after a store that allocated with @gfp itself. */
static inline void bonsai_vma_mirror_gfp(struct ma_state *mas,
					 unsigned long start,
					 unsigned long last,
					 struct vm_area_struct *vma, gfp_t gfp)
{
	struct mm_struct *mm = bonsai_vma_mm_of(mas);

	if (unlikely(mm->bonsai_vma)) {
		bonsai_vma_prealloc(mm, start, last, gfp);
		bonsai_vma_store(mm, start, last, vma);
	}
}

/*
 * lock_vma_under_rcu(), inside its RCU read-side section: the candidate
 * VMA for @addr, from the index on the @attempt-th try while the key is
 * on and the mm has an index, else (or on a miss) from the maple tree.
 */
static inline struct vm_area_struct *
bonsai_vma_walk(struct mm_struct *mm, struct ma_state *mas, unsigned long addr,
		unsigned int attempt)
{
	if (static_branch_likely(&bonsai_vma_lookup_key)) {
		struct vm_area_struct *vma = bonsai_vma_find(mm, addr, attempt);

		if (vma)
			return vma;
	}
	return mas_walk(mas);
}

#else /* !CONFIG_BONSAI_VMA */

static inline void bonsai_vma_mm_init(struct mm_struct *mm) {}

static inline struct mm_struct *bonsai_vma_mm_alloc(struct mm_struct *mm)
{
	return mm;
}

static inline void bonsai_vma_mm_dup(struct mm_struct *mm) {}

static inline void bonsai_vma_mm_exit(struct mm_struct *mm) {}

static inline void bonsai_vma_prealloc_mas(struct ma_state *mas) {}

static inline void bonsai_vma_mirror(struct ma_state *mas, unsigned long start,
				     unsigned long last,
				     struct vm_area_struct *vma) {}

static inline void bonsai_vma_mirror_gfp(struct ma_state *mas,
					 unsigned long start,
					 unsigned long last,
					 struct vm_area_struct *vma,
					 gfp_t gfp) {}

static inline struct vm_area_struct *
bonsai_vma_walk(struct mm_struct *mm, struct ma_state *mas, unsigned long addr,
		unsigned int attempt)
{
	return mas_walk(mas);
}

#endif /* CONFIG_BONSAI_VMA */

#endif /* _LINUX_BONSAI_VMA_H */
