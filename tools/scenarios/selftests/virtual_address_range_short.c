// SPDX-License-Identifier: GPL-2.0
/*
 * The kernel's virtual_address_range selftest on a mostly reserved
 * address space, for the scenarios.
 *
 * The upstream test (tools/testing/selftests/mm/virtual_address_range.c,
 * compiled here unchanged in the same translation unit; run.py renames
 * this main() to SELFTEST_MAIN in its multi-call program) maps the whole
 * 128 TiB user address space in 1 GiB chunks, checks that no chunk lands
 * above 128 TiB without a hint, that /proc/self/maps then has no gap of
 * 1 GiB or more, and writes a byte from every chunk: 131072 mmap() calls
 * and as many page faults, over three minutes under QEMU TCG with KASAN.
 * This main() first reserves all but about RESERVE_LEAVE_TIB of it with
 * one PROT_NONE mapping (not readable, so the test's walk skips it), then
 * runs upstream's main(): the same checks, with a few thousand chunks to
 * map next to the reservation instead.
 *
 * Upstream's failure message ("BUG in mmap() or /proc/self/maps") does
 * not say which check failed.  Its mmap() and write() calls therefore
 * go through wrappers that remember how the chunk loop ended and which
 * write failed, and an exit handler prints that, with the gaps of 1 GiB
 * or more and the maps around them, when the test did not pass.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "../kselftest.h"

static unsigned long var_maps_ok;	/* mmap() calls that succeeded */
static unsigned long var_maps_failed;
static int var_first_map_errno;
static unsigned long var_first_map_len;
static void *var_first_map_hint;
static unsigned long var_maps_ok_before_failure;
static void *var_write_failed_at;
static long var_write_ret;
static int var_write_errno;

static void *var_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	void *p = mmap(addr, len, prot, flags, fd, off);

	if (p != MAP_FAILED) {
		var_maps_ok++;
	} else if (!var_maps_failed++) {
		var_first_map_errno = errno;
		var_first_map_len = len;
		var_first_map_hint = addr;
		var_maps_ok_before_failure = var_maps_ok;
	}
	return p;
}

static ssize_t var_write(int fd, const void *buf, size_t count)
{
	ssize_t ret = write(fd, buf, count);

	if (ret != (ssize_t)count && !var_write_failed_at) {
		var_write_failed_at = (void *)buf;
		var_write_ret = ret;
		var_write_errno = ret < 0 ? errno : 0;
	}
	return ret;
}

#define mmap var_mmap
#define write var_write
#undef main
#define main virtual_address_range_main
#include "virtual_address_range.c"
#undef main
#undef mmap
#undef write
#ifdef SELFTEST_MAIN
#define main SELFTEST_MAIN
#endif

#define RESERVE_LEAVE_TIB 2

/* Print the lines of /proc/self/maps on both sides of every gap of 1 GiB
 * or more, and how many mappings and such gaps there are.
 */
static void var_report_maps(void)
{
	unsigned long start, end, prev_end = 0;
	char line[400], prev[400] = "(start)\n";
	unsigned int n = 0, gaps = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f) {
		ksft_print_msg("diagnosis: cannot open /proc/self/maps: %s\n", strerror(errno));
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx", &start, &end) != 2)
			continue;
		n++;
		if (!(start & (1UL << 63)) && start - prev_end >= MAP_CHUNK_SIZE) {
			gaps++;
			ksft_print_msg("diagnosis: gap of %lu MiB between\n", (start - prev_end) >> 20);
			ksft_print_msg("  %s", prev);
			ksft_print_msg("  %s", line);
		}
		prev_end = end;
		memcpy(prev, line, sizeof(prev));
	}
	fclose(f);
	ksft_print_msg("diagnosis: %u mappings, %u gaps of 1 GiB or more\n", n, gaps);
}

static void var_report(void)
{
	if (ksft_get_pass_cnt() > 0)
		return;
	/*
	 * The first failure ends the chunk loop (ENOMEM once the address
	 * space is full); the hint probe and the high loop that follow are
	 * meant to fail too.
	 */
	ksft_print_msg("diagnosis: %lu mmap() calls succeeded, %lu failed\n",
		       var_maps_ok, var_maps_failed);
	if (var_maps_failed)
		ksft_print_msg("diagnosis: the chunk loop ended after %lu chunks: %lu bytes at hint %p: %s\n",
			       var_maps_ok_before_failure, var_first_map_len,
			       var_first_map_hint, strerror(var_first_map_errno));
	if (var_write_failed_at)
		ksft_print_msg("diagnosis: write() from %p returned %ld: %s\n",
			       var_write_failed_at, var_write_ret,
			       var_write_ret < 0 ? strerror(var_write_errno) : "short");
	var_report_maps();
}

int main(int argc, char *argv[])
{
	size_t len = (128 - RESERVE_LEAVE_TIB) * SZ_1TB;
	void *p;

	p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		ksft_print_header();
		ksft_exit_fail_msg("reserving %zu TiB: %s\n", len / SZ_1TB, strerror(errno));
	}
	atexit(var_report);
	return virtual_address_range_main(argc, argv);
}
