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
 */
#undef main
#define main virtual_address_range_main
#include "virtual_address_range.c"
#undef main
#ifdef SELFTEST_MAIN
#define main SELFTEST_MAIN
#endif

#define RESERVE_LEAVE_TIB 2

int main(int argc, char *argv[])
{
	size_t len = (128 - RESERVE_LEAVE_TIB) * SZ_1TB;
	void *p;

	p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		ksft_print_header();
		ksft_exit_fail_msg("reserving %zu TiB: %s\n", len / SZ_1TB, strerror(errno));
	}
	return virtual_address_range_main(argc, argv);
}
