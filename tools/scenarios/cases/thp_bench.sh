# shellcheck shell=dash
# description: Guaranteed THP benchmark (thesis table 2.4), 4 GiB guest: 1 GiB of anonymous memory faulted and randomly accessed with the THP-only area gcma0 in mode never (Thp.bd), fallback (Thp.bc) and always (Thp.cma), without and with fragmentation; THP-BENCH lines for 'make demo'
# group: bench
# append: gcma=1100M:thp nokaslr
# mem: 4G
# smp: 2
# timeout: 1800
# thp_bench.mib=N (workload size, default 1024), thp_bench.ops=N (random
# accesses per pass, default 16000000), thp_bench.passes=N (random-access
# passes per run, default 3).  nokaslr: a randomly placed kernel image can
# split node 0's free memory into ranges too small for the area.

T=/sys/kernel/mm/gcma/thp
G=/sys/kernel/mm/gcma/gcma0
THP=/sys/kernel/mm/transparent_hugepage
mib=$(cmdline_arg thp_bench.mib 1024)
ops=$(cmdline_arg thp_bench.ops 16000000)
passes=$(cmdline_arg thp_bench.passes 3)

vm() {
	read_counter /proc/vmstat "$1"
}
tstat() {
	read_counter $T/stat "gcma_thp_$1"
}

check thp_area expect_eq "$(cat $G/thp)" 1
range=$(gcma_area_range gcma0)
check area_range test -n "$range"
echo always >$THP/enabled
# No khugepaged collapse during the runs: the fault path alone.
echo 3600000 >$THP/khugepaged/scan_sleep_millisecs
echo 8 >$THP/khugepaged/pages_to_scan
# The workload runs on a CPU of a node without the area: a THP fault asks
# its local node only, and the area takes most of its own node.
area_node=$(dmesg | sed -n 's/.*gcma: gcma0: .* node \([0-9]*\).*/\1/p' | tail -n 1)
cpu=0
for n in /sys/devices/system/node/node[0-9]*; do
	[ "${n##*node}" = "$area_node" ] && continue
	cpu=$(cut -d, -f1 "$n/cpulist" | cut -d- -f1)
	break
done
log "gcma0: $(read_counter $G/total_pages) pages on node $area_node; workload on CPU $cpu; MemFree $(read_counter /proc/meminfo MemFree) kB"

randops=
i=0
while [ $i -lt "$passes" ]; do
	randops="$randops,rand:$ops"
	i=$((i + 1))
done

# bench_run OUT: the workload, its output in OUT.
bench_run() {
	thp_fault -q -c "$cpu" -a "$range" -m "$mib" -o "verify$randops" >"$1" 2>&1
}

# run FRAG: the three modes, one run each.
run() {
	local mode name u9 fa0 fb0 ga0 gf0 out rand
	for mode in never fallback always; do
		case $mode in
		never) name=Thp.bd ;;
		fallback) name=Thp.bc ;;
		always) name=Thp.cma ;;
		esac
		[ "$1" = 1 ] && name=$name.f
		echo $mode >$T/mode
		u9=$(unusable_index)
		fa0=$(vm thp_fault_alloc)
		fb0=$(vm thp_fault_fallback)
		ga0=$(tstat fault_alloc)
		gf0=$(tstat fault_fail)
		out=/tmp/bench-$name.log
		check "${name}_every_byte" bench_run "$out"
		cat "$out"
		# The median of the random-access passes.
		rand=$(sed -n 's/^THP-RAND .* ns=\([0-9]*\) .*/\1/p' "$out" | sort -n |
			awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print 0 }')
		echo "THP-BENCH config=$name mode=$mode frag=$1 u9=$u9" \
			"$(grep '^THP-FAULT ' "$out" | sed 's/^THP-FAULT //')" \
			"thp_fault_alloc=$(($(vm thp_fault_alloc) - fa0))" \
			"thp_fault_fallback=$(($(vm thp_fault_fallback) - fb0))" \
			"gcma_fault_alloc=$(($(tstat fault_alloc) - ga0))" \
			"gcma_fault_fail=$(($(tstat fault_fail) - gf0))" \
			"rand_ops=$ops rand_ms=$((rand / 1000000))"
		check "${name}_area_freed" wait_for 5 value_is "read_counter $G/primary_used_pages" -eq 0
	done
}

# Warm-up: the first touch of guest memory is a page fault in QEMU on the
# host, which would make whichever run comes first look slow.  Touch the
# area (mode always) and most free memory once.
echo always >$T/mode
warm=$((($(read_counter /proc/meminfo MemAvailable) / 1024 - 256) / 2 * 2))
check warm_up thp_fault -q -c "$cpu" -m "$warm"
log "warm-up: $warm MiB touched"
check warm_up_freed wait_for 5 value_is "read_counter $G/primary_used_pages" -eq 0

run 0
fragment -r 48 -p /tmp/frag.pid >/tmp/frag.out 2>&1 &
check fragmented wait_for 600 test -s /tmp/frag.pid
cat /tmp/frag.out
echo 1 >/proc/sys/vm/compact_memory
check u9_fragmented expect_ge "$(unusable_index)" 900
run 1
kill "$(cat /tmp/frag.pid)"
log "stat: $(tr '\n' ' ' <$T/stat)"
check no_splat no_splat
