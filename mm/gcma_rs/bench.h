/* SPDX-License-Identifier: GPL-2.0 */
/*
 * GCMA benchmark: the calls between bench.rs (part of the GCMA crate) and
 * bench.c.  rust/bindings/bindings_helper.h includes this header, so the
 * Rust side calls the C functions through bindgen.
 */
#ifndef _MM_GCMA_RS_BENCH_H
#define _MM_GCMA_RS_BENCH_H

#include <linux/types.h>

struct cma;
struct page;

/* Rust. */
void gcma_bench_run(unsigned int reps);

/* C. */
struct cma *gcma_bench_cma(const char *name);
unsigned long gcma_bench_cma_pages(struct cma *cma);
struct page *gcma_bench_alloc(struct cma *cma, unsigned long count);
bool gcma_bench_release(struct cma *cma, struct page *pages,
			unsigned long count);
u64 gcma_bench_now_ns(void);
u64 gcma_bench_ktime_ns(void);
void gcma_bench_pause(void);
void gcma_bench_flush_tlb(void);
void gcma_bench_set_fifo(void);
int gcma_bench_cma_fill_start(struct cma *cma);
void gcma_bench_cma_fill_stop(void);
unsigned int gcma_bench_cma_fill(void);
void gcma_bench_cma_fill_stats(unsigned long *added, unsigned long *dropped,
			       unsigned long *failed_runs);

#endif /* _MM_GCMA_RS_BENCH_H */
