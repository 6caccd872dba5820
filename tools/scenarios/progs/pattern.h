/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The data pattern the scenario programs write into files: version @ver
 * of a file has pattern(ver, off) at offset @off, so that a byte read back
 * from the wrong version or the wrong place is told apart.
 */
#ifndef SCENARIO_PATTERN_H
#define SCENARIO_PATTERN_H

#include <stddef.h>
#include <stdint.h>

static inline unsigned char pattern(unsigned int ver, size_t off)
{
	uint64_t w = ((uint64_t)ver << 40) ^ ((off / 8) * 0x9e3779b97f4a7c15ULL);

	return (unsigned char)(w >> (8 * (off % 8)));
}

/* Fills @len bytes of @buf with version @ver's bytes from offset @off. */
static inline void fill(unsigned char *buf, size_t off, size_t len,
			unsigned int ver)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = pattern(ver, off + i);
}

#endif
