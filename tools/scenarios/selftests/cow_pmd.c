// SPDX-License-Identifier: GPL-2.0
/*
 * The kernel's cow selftest with the PMD THP size only, for the scenarios.
 *
 * The upstream test (tools/testing/selftests/mm/cow.c, compiled here
 * unchanged in the same translation unit; run.py renames this main() to
 * SELFTEST_MAIN in its multi-call program) runs every anonymous case with
 * base pages, with hugetlb pages, and with a THP of each size the kernel
 * supports: on x86-64 the PMD size (2 MiB) and seven mTHP sizes (16 KiB
 * to 1 MiB).  GCMA backs PMD-sized THPs only; the mTHP sizes take the
 * buddy allocator whatever the GCMA mode, and they make up most of the
 * test's run time (over a minute under QEMU TCG with KASAN).  This main()
 * is upstream's with the THP sizes cut to the PMD size; every other case
 * runs as upstream.
 */
#undef main
#define main cow_main
#include "cow.c"
#undef main
#ifdef SELFTEST_MAIN
#define main SELFTEST_MAIN
#endif

int main(int argc, char **argv)
{
	int err;
	struct thp_settings default_settings;

	ksft_print_header();

	pagesize = getpagesize();
	pmdsize = read_pmd_pagesize();
	if (pmdsize) {
		thp_read_settings(&default_settings);
		default_settings.hugepages[sz2ord(pmdsize)].enabled = THP_INHERIT;
		thp_save_settings();
		thp_push_settings(&default_settings);

		ksft_print_msg("[INFO] detected PMD size: %zu KiB\n", pmdsize / 1024);
		ksft_print_msg("[INFO] THP sizes tested: the PMD size only\n");
		thpsizes[0] = pmdsize;
		nr_thpsizes = 1;
	}
	nr_hugetlbsizes = detect_hugetlb_page_sizes(hugetlbsizes, ARRAY_SIZE(hugetlbsizes));
	detect_huge_zeropage();

	ksft_set_plan(ARRAY_SIZE(anon_test_cases) * tests_per_anon_test_case() +
		      ARRAY_SIZE(anon_thp_test_cases) * tests_per_anon_thp_test_case() +
		      ARRAY_SIZE(non_anon_test_cases) * tests_per_non_anon_test_case());

	gup_fd = open("/sys/kernel/debug/gup_test", O_RDWR);
	pagemap_fd = open("/proc/self/pagemap", O_RDONLY);
	if (pagemap_fd < 0)
		ksft_exit_fail_msg("opening pagemap failed\n");

	run_anon_test_cases();
	run_anon_thp_test_cases();
	run_non_anon_test_cases();

	if (pmdsize)
		thp_restore_settings();

	err = ksft_get_fail_cnt();
	if (err)
		ksft_exit_fail_msg("%d out of %d tests failed\n", err, ksft_test_num());
	ksft_exit_pass();
}
