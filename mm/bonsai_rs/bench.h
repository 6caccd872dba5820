/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The C side of the Bonsai benchmark.
 *
 * bench/, the benchmark, is part of the Bonsai crate and calls these
 * through bindgen (rust/bindings/bindings_helper.h includes this header);
 * they give it the baselines it is measured against (an rbtree under an
 * rwlock_t and a maple tree in RCU mode) and the kthread, sleep and
 * scheduling calls that are macros or inline functions in C.
 */
#ifndef _MM_BONSAI_RS_BENCH_H
#define _MM_BONSAI_RS_BENCH_H

struct bonsai_bench_rb;
struct bonsai_bench_mt;

/* Runs the whole benchmark; implemented in Rust. */
void bonsai_bench_run(void);

unsigned int bonsai_bench_online_cpus(void);
void *bonsai_bench_thread_start(int (*fn)(void *), void *arg,
				unsigned int cpu);
void bonsai_bench_thread_join(void *task);
void bonsai_bench_msleep(unsigned int ms);
void bonsai_bench_cond_resched(void);

struct bonsai_bench_rb *bonsai_bench_rb_new(void);
void bonsai_bench_rb_free(struct bonsai_bench_rb *t);
unsigned long bonsai_bench_rb_lookup(struct bonsai_bench_rb *t,
				     unsigned long addr);
int bonsai_bench_rb_insert(struct bonsai_bench_rb *t, unsigned long start,
			   unsigned long end, unsigned long value);
int bonsai_bench_rb_remove(struct bonsai_bench_rb *t, unsigned long start);

struct bonsai_bench_mt *bonsai_bench_mt_new(void);
void bonsai_bench_mt_free(struct bonsai_bench_mt *t);
unsigned long bonsai_bench_mt_lookup(struct bonsai_bench_mt *t,
				     unsigned long addr);
int bonsai_bench_mt_insert(struct bonsai_bench_mt *t, unsigned long start,
			   unsigned long end, unsigned long value);
int bonsai_bench_mt_remove(struct bonsai_bench_mt *t, unsigned long start);

#endif /* _MM_BONSAI_RS_BENCH_H */
