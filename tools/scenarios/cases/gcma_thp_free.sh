# shellcheck shell=dash
# description: Guaranteed THP, freeing: huge pages from the THP-only area gcma0 are unmapped, partly unmapped, MADV_DONTNEEDed, split (deferred and debugfs), reclaimed to swap, migrated to the other node, shared by fork and copy-on-write, and freed at exit; the area's page count follows each step and ends at 0; ten fault-split-exit cycles leak nothing
# duration: 97
# tcg: single
# append: gcma=128M:thp
# mem: 1G
# disk: 256M
# timeout: 500

T=/sys/kernel/mm/gcma/thp
G=/sys/kernel/mm/gcma/gcma0
THP=/sys/kernel/mm/transparent_hugepage
CG=/sys/fs/cgroup
MIB=32
H=$((MIB / 2))		# huge pages per run, all from the area
ST=/tmp/state

used() {
	read_counter $G/primary_used_pages
}
vm() {
	read_counter /proc/vmstat "$1"
}
f() {
	kv "$1" "$(grep "^$2 " "$3" | tail -n 1)"
}
# start NAME OPS: thp_fault in the background, output in /tmp/NAME.log.
start() {
	log "$1: start at $(cut -d ' ' -f 1 /proc/uptime) s"
	rm -f $ST
	thp_fault -a "$range" -m $MIB -w $ST -o "$2" >"/tmp/$1.log" 2>&1 &
	pid=$!
}
# at NAME: wait until it pauses at NAME.
at() {
	check "${tc}_at_$1" thp_wait_pause $ST "$1" $pid
}
resume() {
	kill -USR1 "$1"
}
# used_is N: the area's page count is N (after up to 5 s: frees may be
# batched).
used_is() {
	if wait_for 5 value_is used -eq "$1"; then
		echo "primary_used_pages $(used)"
		return 0
	fi
	echo "primary_used_pages $(used), expected $1"
	return 1
}
# used_at_most N: the area's page count drops to N or below (after up to
# 5 s).  Used where kswapd may also swap mapped pages out meanwhile (the
# fragmenter leaves little free memory), which frees more.
used_at_most() {
	if wait_for 5 value_is used -le "$1"; then
		echo "primary_used_pages $(used) <= $1"
		return 0
	fi
	echo "primary_used_pages $(used), expected at most $1"
	return 1
}
# finish_case: the process exits (every byte it checked was right), the
# area is empty again, no huge page is left over.
finish_case() {
	resume $pid
	check "${tc}_every_byte" wait $pid
	check "${tc}_exit_freed" used_is 0
	check "${tc}_anon_thp_baseline" expect_eq "$(vm nr_anon_transparent_hugepages)" "$thp0"
	grep -E '^THP-(FAULT|OP|MIGRATE) ' "/tmp/$tc.log" | sed "s/^/# $tc: /"
}
# fault_check: the run's huge pages all came from the area.
fault_check() {
	check "${tc}_huge_from_area" expect_eq "$(f huge_in_area THP-FAULT /tmp/$tc.log)" $H
	check "${tc}_area_used" used_is $((512 * H))
}

check thp_area expect_eq "$(cat $G/thp)" 1
range=$(gcma_area_range gcma0)
check area_range test -n "$range"
echo always >$THP/enabled
# khugepaged stays out of the way: it would collapse split or swapped-in
# pages into new huge pages (from the area).
echo 3600000 >$THP/khugepaged/scan_sleep_millisecs
echo 8 >$THP/khugepaged/pages_to_scan
# Mode always: every huge page of a run comes from the area, which the
# counts below rely on.  In mode fallback a 2 MiB block that reclaim or
# compaction frees in the buddy allocator meanwhile (the fragmenter cannot
# rule that out) serves a fault first; one run in CI got 15 of 16 from the
# area that way.  This scenario tests the freeing paths; gcma_thp_fault
# tests the fallback order.
echo always >$T/mode

# Swap on a non-rotational disk, a cgroup for memory.reclaim.
echo 0 >/sys/block/vda/queue/rotational
mkswap /dev/vda >/dev/null
check swapon swapon /dev/vda
mkdir -p $CG && mount -t cgroup2 none $CG
echo +memory >$CG/cgroup.subtree_control
mkdir -p $CG/thp

log "fragment: start at $(cut -d ' ' -f 1 /proc/uptime) s"
fragment -r 32 -p /tmp/frag.pid >/tmp/frag.out 2>&1 &
check fragmented wait_for 240 test -s /tmp/frag.pid
cat /tmp/frag.out
check u9_fragmented expect_ge "$(unusable_index)" 900
thp0=$(vm nr_anon_transparent_hugepages)
log "baseline: nr_anon_transparent_hugepages $thp0, primary_used_pages $(used)"

# 1. Whole munmap.
tc="munmap"
start $tc verify,pause:mapped,unmapall,pause:unmapped
at mapped
fault_check
resume $pid
at unmapped
check munmap_freed used_is 0
finish_case

# 2. Partial munmap (the second half of every huge page), then the
# deferred split: the folios wait on the split queue with all their pages,
# the shrinker (drop_caches) splits them and frees the unmapped halves.
tc="partial"
start $tc pause:mapped,munmap:1024:1024,pause:unmapped,verify,pause:split
at mapped
fault_check
dsp0=$(vm thp_deferred_split_page)
sp0=$(vm thp_split_page)
resume $pid
at unmapped
check partial_queued expect_ge "$(vm thp_deferred_split_page)" $((dsp0 + H))
check partial_not_yet_freed used_is $((512 * H))
echo 2 >/proc/sys/vm/drop_caches
check partial_split expect_ge "$(vm thp_split_page)" $((sp0 + H))
check partial_halves_freed used_at_most $((256 * H))
resume $pid
at split
finish_case

# 3. MADV_DONTNEED of the first half (reads back as zeroes), split by the
# shrinker.
tc="dontneed"
start $tc pause:mapped,dontneed:0:1024,verify,pause:zapped
at mapped
fault_check
resume $pid
at zapped
echo 2 >/proc/sys/vm/drop_caches
check dontneed_halves_freed used_at_most $((256 * H))
finish_case

# 4. Explicit split through debugfs split_huge_pages: the small pages stay
# mapped (and in the area) until the process exits.
tc="split"
sp0=$(vm thp_split_page)
start $tc pause:mapped,split,verify,pause:split
at mapped
fault_check
resume $pid
at split
check split_counted expect_ge "$(vm thp_split_page)" $((sp0 + H))
check split_no_huge_left expect_eq "$(f anon_huge_kb THP-OP /tmp/$tc.log)" 0
check split_pages_stay used_is $((512 * H))
finish_case

# 5. Reclaim: memory.reclaim swaps the huge pages out (whole or split) and
# frees them; the data comes back from swap.
tc="reclaim"
rm -f $ST
sh -c 'echo $$ > '$CG'/thp/cgroup.procs && exec thp_fault -a "$0" -m '$MIB' -w '$ST' -o pause:mapped,verify,pause:back' "$range" >/tmp/$tc.log 2>&1 &
pid=$!
at mapped
fault_check
out0=$(vm pswpout)
i=0
while [ $i -lt 20 ] && [ "$(used)" -gt 0 ]; do
	echo $((MIB * 2))M >$CG/thp/memory.reclaim 2>/dev/null
	i=$((i + 1))
	[ "$(used)" -gt 0 ] && sleep 0.5
done
check reclaim_swapped expect_gt "$(vm pswpout)" "$out0"
check reclaim_freed used_is 0
log "reclaim: $i memory.reclaim writes, thp_swpout $(vm thp_swpout), thp_swpout_fallback $(vm thp_swpout_fallback), pswpout $(vm pswpout)"
resume $pid
at back
check reclaim_no_area_swapin expect_eq "$(used)" 0
finish_case

# 6. Migration to the other node (move_pages/mbind MPOL_MF_MOVE): the data
# moves out of the area, which is empty afterwards.
tc="migrate"
start $tc pause:mapped,migrate,verify,pause:moved
at mapped
fault_check
resume $pid
at moved
check migrate_all_moved grep -q '^THP-MIGRATE ' /tmp/$tc.log
check migrate_freed used_is 0
finish_case

# 7. fork: the child writes every page (copy on write: its copies are 4 KiB
# pages from the buddy allocator) and verifies them; the parent's huge
# pages stay in the area, unchanged, until it exits.
tc="fork"
start $tc pause:mapped,fork:pause,pause:after
at mapped
fault_check
resume $pid
check fork_child_paused thp_wait_pause $ST child $pid
child=$(awk '{ print $2 }' $ST)
check fork_shared_area used_is $((512 * H))
resume "$child"
at after
check fork_parent_keeps used_is $((512 * H))
finish_case

# 8. Ten fault-split-exit cycles in the fragmented memory: nothing leaks.
i=1
while [ $i -le 10 ]; do
	tc="cycle$i"
	[ $i -eq 1 ] && log "cycles: start at $(cut -d ' ' -f 1 /proc/uptime) s"
	a0=$(read_counter $T/stat gcma_thp_fault_alloc)
	check "cycle${i}_run" thp_fault -q -a "$range" -m 16 -o split,verify
	allocs=$(($(read_counter $T/stat gcma_thp_fault_alloc) - a0))
	u=$(used)
	log "cycle $i: gcma_thp_fault_alloc +$allocs, primary_used_pages after exit $u, nr_anon_transparent_hugepages $(vm nr_anon_transparent_hugepages), U9 $(unusable_index)"
	check "cycle${i}_allocs" expect_ge "$allocs" 1
	check "cycle${i}_no_leak" used_is 0
	i=$((i + 1))
done

log "cycles: end at $(cut -d ' ' -f 1 /proc/uptime) s"
kill "$(cat /tmp/frag.pid)"
swapoff /dev/vda
check final_area_empty expect_eq "$(used)" 0
check final_anon_thp_baseline expect_eq "$(vm nr_anon_transparent_hugepages)" "$thp0"
log "stat: $(tr '\n' ' ' <$T/stat)"
check no_splat no_splat
