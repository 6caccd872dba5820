/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The C side of the RCX benchmark.
 *
 * bench.rs, the benchmark, is part of the RCX crate and calls these
 * through bindgen (rust/bindings/bindings_helper.h includes this header):
 * the kthread and sleep calls that are macros or inline functions in C.
 */
#ifndef _MM_RCX_RS_BENCH_H
#define _MM_RCX_RS_BENCH_H

/* Runs the whole benchmark; implemented in Rust. */
void rcx_bench_run(void);

unsigned int rcx_bench_online_cpus(void);
void *rcx_bench_thread_start(int (*fn)(void *), void *arg, unsigned int cpu);
void rcx_bench_thread_join(void *task);
void rcx_bench_msleep(unsigned int ms);
void rcx_bench_cond_resched(void);

#endif /* _MM_RCX_RS_BENCH_H */
