# shellcheck shell=dash
# description: a GCMA area is reachable through the CMA interface next to a plain CMA area; counters follow
# duration: 65
# tcg: single
# append: cma=32M gcma=32M
# Allocations and frees at run time: kmemleak on, /init scans after the run.
# append: kmemleak=on

C=/sys/kernel/debug/cma
G=/sys/kernel/mm/gcma/gcma0

check registered_with_cma expect_dmesg 'gcma: gcma0: 8192 pages from pfn 0x[0-9a-f]+, node [0-9]+, 8192 free, CMA interface'
check cma_debugfs_dir expect_exists $C/gcma0/alloc
check plain_cma_dir expect_exists $C/reserved/alloc
check sysfs_dir expect_exists $G/total_pages
check total_pages expect_eq "$(read_counter $G/total_pages)" 8192
check starts_unused expect_eq "$(read_counter $G/primary_used_pages)" 0
check nothing_lent expect_eq "$(read_counter $G/secondary_lent_pages)" 0

# Only the plain CMA area's pages went to the buddy allocator, and only
# they count in CmaTotal (GCMA's are reported in /sys/kernel/mm/gcma).
check gcma_not_in_buddy expect_le "$(read_counter /proc/meminfo CmaFree)" 32768
check cmatotal_without_gcma expect_eq "$(read_counter /proc/meminfo CmaTotal)" 32768
check release_pending_file expect_eq "$(read_counter $G/release_pending_pages)" 0

# Allocate through CMA's debugfs: the pages come from GCMA.
echo 100 > $C/gcma0/alloc
echo 512 > $C/gcma0/alloc
check used_after_alloc expect_eq "$(read_counter $G/primary_used_pages)" 612
check alloc_success expect_eq "$(read_counter $G/alloc_success)" 2
check cma_sysfs_success expect_eq "$(read_counter /sys/kernel/mm/cma/gcma0/alloc_pages_success)" 612

# The plain CMA area is unaffected and still works.
echo 64 > $C/reserved/alloc
check plain_cma_alloc expect_eq "$(read_counter /sys/kernel/mm/cma/reserved/alloc_pages_success)" 64
echo 64 > $C/reserved/free
check gcma_unchanged expect_eq "$(read_counter $G/primary_used_pages)" 612

# Partial and full frees.
echo 50 > $C/gcma0/free
check partial_free expect_eq "$(read_counter $G/primary_used_pages)" 562
echo 562 > $C/gcma0/free
check all_freed expect_eq "$(read_counter $G/primary_used_pages)" 0

# The whole area at once; one page more does not fit.
echo 8192 > $C/gcma0/alloc
check whole_area expect_eq "$(read_counter $G/primary_used_pages)" 8192
echo 1 > $C/gcma0/alloc 2>/dev/null
check full_fails expect_eq "$(read_counter $G/alloc_fail)" 1
echo 8192 > $C/gcma0/free
check whole_freed expect_eq "$(read_counter $G/primary_used_pages)" 0
check nothing_discarded expect_eq "$(read_counter $G/discarded_pages)" 0
# The latency histogram counts all four allocations: 100 and 512 pages,
# the whole area, and the page that did not fit.
check latency_histogram expect_eq "$(awk '!/^#/ { n += $2 } END { print n + 0 }' /sys/kernel/debug/gcma/gcma0/alloc_latency)" 4

# An in-kernel caller: the benchmark's cma_alloc()/cma_release() pairs on
# both areas, once for each size that fits (64 to 8192 pages: 8 sizes),
# in each of its two passes and in its profile pass (GCMA only).  One
# repeat: a second one of the same sizes took 12 s more under TCG and
# checked nothing the first does not.
if [ -e /sys/kernel/debug/gcma_bench ]; then
	before=$(read_counter $G/alloc_success)
	# Malformed counts are refused and run nothing.
	for v in x 0 1001 2x ""; do
		check "bench_refuses_$(echo "$v" | tr -c 'a-z0-9\n' _)" not sh -c "echo '$v' > /sys/kernel/debug/gcma_bench"
	done
	check bench_refused_ran_nothing expect_eq "$(read_counter $G/alloc_success)" "$before"
	check bench_refusal_logged expect_dmesg 'gcma_bench: expected a repeat count from 1 to 1000; nothing run'
	echo 1 > /sys/kernel/debug/gcma_bench
	check bench_gcma_never_fails expect_dmesg 'gcma: bench: done: [0-9]+ CMA and 0 GCMA allocations failed'
	check bench_allocations expect_eq "$(read_counter $G/alloc_success)" $((before + 24))
	check bench_released expect_eq "$(read_counter $G/primary_used_pages)" 0
	check bench_cma_sysfs expect_eq "$(read_counter /sys/kernel/mm/cma/gcma0/alloc_pages_success)" $((612 + 8192 + 3 * 16320))
else
	log "no /sys/kernel/debug/gcma_bench (CONFIG_GCMA_BENCH=n): in-kernel caller not run"
fi
check no_splat no_splat
