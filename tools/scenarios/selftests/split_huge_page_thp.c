// SPDX-License-Identifier: GPL-2.0
/*
 * The THP part of the kernel's split_huge_page_test, for the scenarios.
 *
 * The upstream test (tools/testing/selftests/mm/split_huge_page_test.c,
 * compiled here unchanged in the same translation unit, so that the
 * kselftest counters are shared; run.py renames this main() to
 * SELFTEST_MAIN in its multi-call program) ends with nine page-cache cases that
 * write a 4 MiB file one byte per write(): four million system calls per
 * case, about 45 s each under QEMU TCG with KASAN, and on a file system
 * without large folios (our /tmp) all nine skip anyway.  This driver runs
 * the other cases, in upstream order: splitting PMD-mapped huge zero
 * pages, PMD-mapped anonymous THPs, PTE-mapped anonymous THPs, and a
 * shmem THP of a huge=always tmpfs.
 */
#undef main
#define main split_huge_page_test_main
#include "split_huge_page_test.c"
#undef main
#ifdef SELFTEST_MAIN
#define main SELFTEST_MAIN
#endif

int main(int argc, char **argv)
{
	ksft_print_header();
	if (geteuid() != 0) {
		ksft_print_msg("Please run the test as root\n");
		ksft_finished();
	}
	ksft_set_plan(3);
	pagesize = getpagesize();
	pageshift = ffs(pagesize) - 1;
	pmd_pagesize = read_pmd_pagesize();
	if (!pmd_pagesize)
		ksft_exit_fail_msg("Reading PMD pagesize failed\n");

	split_pmd_zero_pages();
	split_pmd_thp();
	split_pte_mapped_thp();
	split_file_backed_thp();

	ksft_finished();
	return 0;
}
