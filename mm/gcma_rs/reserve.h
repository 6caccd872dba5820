/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Between the two places that put GCMA areas in the table at boot:
 * reserve.c ("gcma=", from the architecture's setup code) and of.c
 * (reserved-memory nodes of the device tree, from the scan of
 * /reserved-memory, which comes first).
 */
#ifndef _MM_GCMA_RS_RESERVE_H
#define _MM_GCMA_RS_RESERVE_H

#include <linux/init.h>
#include <linux/types.h>

struct gcma_area;

struct gcma_area *gcma_add_area(const char *name, phys_addr_t base,
				phys_addr_t size, bool thp);

#ifdef CONFIG_GCMA_OF
void gcma_of_check(void);
#else
static inline void gcma_of_check(void) { }
#endif

#endif /* _MM_GCMA_RS_RESERVE_H */
