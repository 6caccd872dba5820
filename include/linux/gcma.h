/* SPDX-License-Identifier: GPL-2.0 */
/*
 * GCMA: guaranteed contiguous memory allocator.
 *
 * Areas are reserved at boot from the "gcma=" parameter and owned by GCMA
 * for the life of the system: they are never given to the buddy allocator.
 * The allocator itself is written in Rust (mm/gcma_rs/); this header is the
 * boundary between it and the C code that reserves the areas.
 */
#ifndef _LINUX_GCMA_H
#define _LINUX_GCMA_H

#include <linux/init.h>
#include <linux/types.h>

/* Upper bound on "gcma=" areas; more are refused with a boot message. */
#define GCMA_MAX_AREAS		8
#define GCMA_AREA_NAME_LEN	16

/**
 * struct gcma_reserved_area - an area reserved at boot
 * @name: "gcma<N>", N counting from 0 in command-line order
 * @base: physical address of the first byte, page aligned
 * @size: size in bytes, a multiple of PAGE_SIZE
 */
struct gcma_reserved_area {
	char name[GCMA_AREA_NAME_LEN];
	phys_addr_t base;
	phys_addr_t size;
};

#ifdef CONFIG_GCMA
void __init gcma_reserve(void);
unsigned int gcma_nr_reserved_areas(void);
const struct gcma_reserved_area *gcma_reserved_area(unsigned int idx);
/* Implemented in Rust (mm/gcma_rs/gcma.rs). */
int gcma_rs_init(void);
#else
static inline void gcma_reserve(void) { }
#endif

#endif /* _LINUX_GCMA_H */
