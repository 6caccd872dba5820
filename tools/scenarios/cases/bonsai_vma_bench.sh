# shellcheck shell=dash
# description: Bonsai VMA index against the maple tree (issue 27): page faults per second with 1-4 threads in address spaces of 10-10,000 extra VMAs, without and with a thread mapping and unmapping (the paper's microbenchmark through real faults), and mmap/munmap/mprotect per second; both configurations in the same boot, alternating, in fresh processes; VMA-BENCH table for 'make demo'
# group: bench
# append: bonsai_bench.run=0 rcx_bench.run=0 nokaslr
# smp: 4
# numa: 2
# mem: 1G
# timeout: 1200
# duration: 180
#
# bonsai_vma_bench.rounds=N (default 5), bonsai_vma_bench.ms=N (length of
# one cell, default 500), bonsai_vma_bench.quick=1: a smoke test of a few
# seconds (one round, 50 ms cells, 1 and 2 threads, 10 and 1,000 VMAs),
# for the KUnit kernel.  Without /sys/kernel/mm/bonsai_vma (a kernel
# without CONFIG_BONSAI_VMA) both columns are the maple tree and the table
# says so.  bonsai_vma_bench.icount=1 only labels the table: give it with
# QEMU's "-icount shift=3,sleep=off" (run.py --qemu-arg=-icount
# --qemu-arg=shift=3,sleep=off), under which the guest's clock counts
# instructions and the vCPUs run in turn: figures independent of the
# host's load, but the threads share one clock, so they do not add up.

D=/sys/kernel/debug/bonsai_vma
quick=$(cmdline_arg bonsai_vma_bench.quick 0)
if [ "$quick" = 1 ]; then
	rounds=$(cmdline_arg bonsai_vma_bench.rounds 1)
	ms=$(cmdline_arg bonsai_vma_bench.ms 50)
	cells="-T 1,2 -P 10,1000 -O 1000"
else
	rounds=$(cmdline_arg bonsai_vma_bench.rounds 5)
	ms=$(cmdline_arg bonsai_vma_bench.ms 500)
	cells="-T 1,2,4 -P 10,1000,10000 -O 1000"
fi
# The index's node size, printed once by the kernel at boot.
node_size=$(dmesg | sed -n 's/.*VMA index node size \([0-9]*\) bytes.*/\1/p' | tail -n 1)

if [ -e /sys/kernel/mm/bonsai_vma/enabled ]; then
	log "bonsai_vma: enabled=$(cat /sys/kernel/mm/bonsai_vma/enabled), node size ${node_size:-not printed}"
	check counters expect_exists $D/lookups
else
	log "no /sys/kernel/mm/bonsai_vma: no index in this kernel, both configurations are the maple tree"
fi
log "$rounds round(s), $ms ms cells, $cells; MemFree $(read_counter /proc/meminfo MemFree) kB"

# bench_run OUT: the driver, its output (VMA-RUN and VMA-BENCH lines) in OUT.
bench_run() {
	# shellcheck disable=SC2086 # $cells is a list of options
	vma_faultbench run -r "$rounds" -d "$ms" $cells ${node_size:+-s "$node_size"} >"$1" 2>&1
}

start=$(date +%s)
check bench bench_run /tmp/vma-bench.out
if [ "$(cmdline_arg bonsai_vma_bench.icount 0)" = 1 ]; then
	echo "VMA-BENCH QEMU icount mode: time is the guest's instruction count and the vCPUs run in turn, so the"
	echo "VMA-BENCH figures do not depend on the host's load, and do not grow with the threads (they share one clock)"
fi
cat /tmp/vma-bench.out
log "benchmark: $(($(date +%s) - start)) s"

if [ -e $D/crosscheck_diffs ]; then
	check crosscheck_no_diff expect_eq "$(read_counter $D/crosscheck_diffs)" 0
	check no_alloc_failure expect_eq "$(read_counter $D/index_alloc_failed)" 0
	log "counters: $(for f in $D/*; do printf '%s=%s ' "${f##*/}" "$(cat "$f")"; done)"
fi
check no_splat no_splat
