# shellcheck shell=dash
# description: Guaranteed THP honours the task's NUMA placement: with the THP area on node 1, a task bound to node 0 (set_mempolicy MPOL_BIND, or a cpuset) never gets a huge page from it, by fault or by MADV_COLLAPSE; bound to node 1 it does; move_pages() checks where every page is.  Compaction leaves the pages of split GCMA THPs in the area
# duration: 40
# tcg: single
# The area at 768 MiB: node 1 holds the upper half of the guest's 1 GiB.
# nokaslr keeps the kernel image out of its way.
# append: gcma=16M@768M:thp nokaslr
# mem: 1G
# numa: 2
# timeout: 300

T=/sys/kernel/mm/gcma/thp
G=/sys/kernel/mm/gcma/gcma0
THP=/sys/kernel/mm/transparent_hugepage
CG=/sys/fs/cgroup

tstat() {
	read_counter $T/stat "gcma_thp_$1"
}
# run OUT LINE ARGS...: thp_fault with the area's range; the first line
# starting with LINE ("THP-FAULT" or "THP-OP op=collapse") goes to OUT.
run() {
	local out line rc
	out=$1
	line=$2
	shift 2
	thp_fault -a "$range" -m 4 "$@" >"$out.log" 2>&1
	rc=$?
	cat "$out.log"
	grep -m 1 "^$line" "$out.log" >"$out"
	return $rc
}
f() {
	kv "$1" "$(cat "$2")"
}

check area_reserved expect_dmesg 'gcma: gcma0: 4096 pages from pfn 0x30000, node 1, 4096 free, THP only'
range=$(gcma_area_range gcma0)
echo madvise >$THP/enabled
echo 3600000 >$THP/khugepaged/scan_sleep_millisecs
# The area first: the buddy allocator, which has free 2 MiB blocks on both
# nodes, would otherwise serve every fault before the area is asked.
echo always >$T/mode

# Bound to node 1: the area is the first choice.
a0=$(tstat fault_alloc)
check bind1_runs run /tmp/b1 THP-FAULT -H -b 1 -o verify
check bind1_from_area expect_eq "$(f huge_in_area /tmp/b1)" 2
check bind1_counted expect_eq "$(tstat fault_alloc)" $((a0 + 2))
check bind1_on_node1 expect_eq "$(f node1_pages /tmp/b1)" 1024

# Bound to node 0: the area is not on an allowed node.  The huge pages come
# from the buddy allocator on node 0.
a0=$(tstat fault_alloc)
check bind0_runs run /tmp/b0 THP-FAULT -H -b 0 -o verify
check bind0_not_area expect_eq "$(f huge_in_area /tmp/b0)" 0
check bind0_on_node0 expect_eq "$(f node0_pages /tmp/b0)" 1024
check bind0_huge expect_eq "$(f huge_regions /tmp/b0)" 2
check bind0_no_area_alloc expect_eq "$(tstat fault_alloc)" "$a0"

# A cpuset with node 0's memory only, no memory policy.
mkdir -p $CG && mount -t cgroup2 none $CG
echo +cpuset >$CG/cgroup.subtree_control
mkdir -p $CG/n0
echo 0 >$CG/n0/cpuset.mems
check cpuset_mems expect_file_contains $CG/n0/cpuset.mems.effective '^0$'
a0=$(tstat fault_alloc)
sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' $CG/n0 \
	thp_fault -a "$range" -m 4 -H -o verify >/tmp/c0.log 2>&1
check cpuset_runs expect_eq $? 0
cat /tmp/c0.log
grep -m 1 '^THP-FAULT' /tmp/c0.log >/tmp/c0
check cpuset_not_area expect_eq "$(f huge_in_area /tmp/c0)" 0
check cpuset_on_node0 expect_eq "$(f node0_pages /tmp/c0)" 1024
check cpuset_no_area_alloc expect_eq "$(tstat fault_alloc)" "$a0"

# MADV_COLLAPSE of 4 KiB pages: khugepaged's allocation may use the nodes
# the pages are on (and the policy's).  On node 0, the area is not used;
# on node 1, it is.
c0=$(tstat collapse_alloc)
check collapse0_runs run /tmp/k0 "THP-OP op=collapse" -N -b 0 -o hugepage,collapse,verify
check collapse0_huge expect_eq "$(f huge_regions /tmp/k0)" 2
check collapse0_not_area expect_eq "$(f huge_in_area /tmp/k0)" 0
check collapse0_on_node0 expect_eq "$(f node0_pages /tmp/k0)" 1024
check collapse0_no_area_alloc expect_eq "$(tstat collapse_alloc)" "$c0"
check collapse1_runs run /tmp/k1 "THP-OP op=collapse" -N -b 1 -o hugepage,collapse,verify
check collapse1_from_area expect_eq "$(f huge_in_area /tmp/k1)" 2
check collapse1_counted expect_eq "$(tstat collapse_alloc)" $((c0 + 2))
check collapse1_on_node1 expect_eq "$(f node1_pages /tmp/k1)" 1024
check area_freed expect_eq "$(read_counter $G/primary_used_pages)" 0

# Compaction leaves the 4 KiB pages of split GCMA THPs where they are:
# moving them into the zone would free no page of it.
thp_fault -a "$range" -m 8 -H -b 1 -w /tmp/state -o split,pause:split,verify >/tmp/s.log 2>&1 &
pid=$!
check split_paused thp_wait_pause /tmp/state split $pid
cat /tmp/s.log
check split_in_area expect_eq "$(read_counter $G/primary_used_pages)" 2048
m0=$(read_counter /proc/vmstat pgmigrate_success)
echo 1 >/proc/sys/vm/compact_memory
log "compaction: pgmigrate_success $m0 -> $(read_counter /proc/vmstat pgmigrate_success)"
check compaction_left_area expect_eq "$(read_counter $G/primary_used_pages)" 2048
kill -USR1 $pid
check split_every_byte wait $pid
check split_freed expect_eq "$(read_counter $G/primary_used_pages)" 0
check no_splat no_splat
