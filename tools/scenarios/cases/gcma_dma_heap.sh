# shellcheck shell=dash
# description: dma-buf heaps of GCMA areas: /dev/dma_heap/gcma0 for a device area only; buffers zeroed, mapped, synced, shared between processes and freed in any order; ENOMEM on a full area, idle and fully lent to DMEM (every lent page discarded, the file intact); allocators racing a page-cache workload that keeps lending; no page left behind
# duration: 75
# append: cma=16M gcma=32M gcma=2M:thp gcma=1028K
# mem: 1G
# disk: 128M ext2
# timeout: 300
# No kmemleak: gcma_dma says why (its first automatic scan can stall the
# probe of a disk).  Leaks are counted instead: GCMA's and CMA's page
# counters, and the dma-bufs still alive (debugfs dma_buf/bufinfo).

H=/dev/dma_heap
G=/sys/kernel/mm/gcma/gcma0
F=/sys/kernel/mm/gcma/dmem/file
CS=/sys/kernel/mm/cma/gcma0
CG=/sys/fs/cgroup

# gcma0 is a device area: a heap of its name.  gcma1 (":thp") is not a CMA
# area and gcma2 (1028 KiB, not a multiple of CMA's 2 MiB) could not be
# one: no heap.  The default CMA area keeps its own heap.
log "scenario starts at $(cut -d' ' -f1 /proc/uptime) s"
check heap_of_device_area expect_exists $H/gcma0
check no_heap_of_thp_area expect_missing $H/gcma1
check gcma2_not_cma expect_dmesg 'gcma: gcma2: not registered with CMA'
check no_heap_of_non_cma_area expect_missing $H/gcma2
check default_cma_heap expect_exists $H/reserved
check no_heap_error expect_no_dmesg 'cma_heap: no heap|dma_heap: Already registered'

# heap ARGS...: dma_heap ARGS with its summary line first (a check shows
# the first line of a pass, the last of a failure: the reason).
heap() {
	local rc
	dma_heap "$@" > /tmp/heap.out 2>&1
	rc=$?
	tail -n 1 /tmp/heap.out
	cat /tmp/heap.out
	return $rc
}
# No compaction of its own accord and no NUMA balancing (two nodes): the
# lent run checks that nothing was migrated, with a counter of the whole
# system.  With NUMA balancing on, CI (2cbd36c) once saw one page
# migrated meanwhile.
echo 0 > /proc/sys/vm/compaction_proactiveness
echo 0 > /proc/sys/kernel/numa_balancing

total=$(read_counter $G/total_pages)
check total_pages expect_eq "$total" 8192
fail0=$(read_counter $G/alloc_fail)
succ0=$(read_counter $G/alloc_success)

# The default heap is CMA's own and takes nothing from GCMA.
check cma_heap_still_works heap alloc $H/reserved 64
check cma_heap_not_gcma expect_eq "$(read_counter $G/alloc_success)" "$succ0"

# Sizes, zeroing, sharing, frees in any order, malformed requests; every
# allocation and free followed page for page in primary_used_pages.
check basic heap basic -g $G $H/gcma0
# The whole area, idle: ENOMEM once full, every buffer zeroed (basic left
# its bytes in the pages the first ones get).
check empty_before_exhaust expect_eq "$(read_counter $G/primary_used_pages)" 0
check exhaust_idle heap exhaust -g $G $H/gcma0
check idle_nothing_discarded expect_eq "$(read_counter $G/discarded_pages)" 0

# Lend the whole area to DMEM: a 48 MiB file (more than the three areas)
# evicted by reclaim from its cgroup is stored in area pages, gcma0's
# first.  Held open so that reclaim does not evict its inode (which would
# drop its entries).
mkdir -p $CG /mnt/d && mount -t cgroup2 none $CG
echo +memory > $CG/cgroup.subtree_control
mkdir -p $CG/lend $CG/churn
in_cgroup() {
	sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$@"
}
check mounted mount -t ext2 /dev/vda /mnt/d
in_cgroup $CG/lend dd if=/dev/urandom of=/mnt/d/lent bs=1M count=48 conv=fsync 2>/dev/null
sum=$(md5sum < /mnt/d/lent)
exec 3</mnt/d/lent
i=0
while [ $i -lt 5 ] && [ "$(read_counter $G/secondary_lent_pages)" -lt "$total" ]; do
	echo 1G > $CG/lend/memory.reclaim 2>/dev/null
	i=$((i + 1))
done
log "lent: $(read_counter $G/secondary_lent_pages) of $total pages after $i memory.reclaim writes; file entries $(read_counter $F/stored_pages)"
check fully_lent expect_eq "$(read_counter $G/secondary_lent_pages)" "$total"

# The same over the lent area: each allocation discards the lent pages it
# takes (none migrated); the buffers, which held file data, read as zeroes.
disc=$(read_counter $G/discarded_pages)
fdisc=$(read_counter $F/discards)
migrated=$(read_counter /proc/vmstat pgmigrate_success)
check exhaust_lent heap exhaust -g $G $H/gcma0
log "migrations: $(grep -E '^(pgmigrate_success|numa_pages_migrated|compact_migrate_scanned|compact_stall) ' /proc/vmstat | tr '\n' ' ')"
check nothing_migrated expect_eq "$(read_counter /proc/vmstat pgmigrate_success)" "$migrated"
check every_lent_page_discarded expect_eq "$(($(read_counter $G/discarded_pages) - disc))" "$total"
check dmem_discards expect_eq "$(($(read_counter $F/discards) - fdisc))" "$total"
check nothing_lent_after expect_eq "$(read_counter $G/secondary_lent_pages)" 0
# The file reads back whole: discarded pages from the disk, the entries
# left in gcma1 and gcma2 from DMEM (verify mode checks each hit).
check file_intact test "$(md5sum < /mnt/d/lent)" = "$sum"
exec 3<&-
rm /mnt/d/lent
log "lent phase done at $(cut -d' ' -f1 /proc/uptime) s"

# Race: three allocators (at most 4 x 64 pages alive each: the area never
# fills, so any failure is an error) while memhog writes a 48 MiB file
# and reads it again and again in an 8 MiB cgroup, checking every byte:
# its pages are evicted, stored in the area and loaded back all the time,
# more than the three areas hold (35 MiB), so DMEM keeps every free page
# lent (gcma0's lowest last, where the allocators are) and the allocators
# discard pages DMEM keeps lending.  memhog runs until the allocators are
# done (SIGTERM ends it after its current pass).
#
# The first pass writes the file through the page cache.  Dirty pages are
# what reclaim cannot free without I/O: were the kernel's default limits
# (20% of free memory, far more than 8 MiB) to let them fill the cgroup,
# and the disk to complete no write for a while (QEMU's I/O waiting for a
# host CPU other guests hold), sixteen reclaim passes in a row would free
# nothing and the memory cgroup's OOM killer would take memhog.  A cold
# clean-clone run saw that: the cgroup held 5.7 MB dirty of its 8 MiB
# when memhog was killed, the lending never reached the allocators'
# threshold, and four checks failed.  Writers are held at 2 MiB dirty
# (1 MiB before background writeback starts) for the race.
dirty=$(cat /proc/sys/vm/dirty_bytes) dirty_bg=$(cat /proc/sys/vm/dirty_background_bytes)
dirty_ratio=$(cat /proc/sys/vm/dirty_ratio) dirty_bg_ratio=$(cat /proc/sys/vm/dirty_background_ratio)
echo $((2 << 20)) >/proc/sys/vm/dirty_bytes
echo $((1 << 20)) >/proc/sys/vm/dirty_background_bytes
echo 8M > $CG/churn/memory.max
disc=$(read_counter $G/discarded_pages)
stores=$(read_counter $F/stores)
fail1=$(read_counter $G/alloc_fail)
# Not through the in_cgroup function: in the background that would be a
# subshell, and $! its pid, not memhog's.
sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' $CG/churn \
	memhog -c 48 -f /mnt/d/churn -t 120 > /tmp/churn.out 2>&1 &
churn=$!
# The allocators start once DMEM holds (nearly) all of gcma0.
check race_area_lent wait_for 30 value_is "read_counter $G/secondary_lent_pages" -ge $((total - 256))
log "allocators start at $(cut -d' ' -f1 /proc/uptime) s"
pids=""
for s in 1 2 3; do
	dma_heap stress -t 10 -s $s -k 4 -m 64 $H/gcma0 > /tmp/stress$s.out 2>&1 &
	pids="$pids $!"
done
# waited PID FILE: wait for PID, then print FILE's last line (a summary,
# or the reason of a failure).
waited() {
	local rc
	wait "$1"
	rc=$?
	tail -n 1 "$2"
	return $rc
}
s=1
for p in $pids; do
	check stress$s waited "$p" /tmp/stress$s.out
	s=$((s + 1))
done
check churn_running kill -TERM $churn
check churn_every_byte waited $churn /tmp/churn.out
# The kernel's limits back (a ratio is written back as the ratio: writing
# one of a pair clears the other).
if [ "$dirty" -gt 0 ]; then echo "$dirty" >/proc/sys/vm/dirty_bytes; else echo "$dirty_ratio" >/proc/sys/vm/dirty_ratio; fi
if [ "$dirty_bg" -gt 0 ]; then echo "$dirty_bg" >/proc/sys/vm/dirty_background_bytes; else echo "$dirty_bg_ratio" >/proc/sys/vm/dirty_background_ratio; fi
check race_discarded expect_gt "$(($(read_counter $G/discarded_pages) - disc))" 0
check race_stored expect_gt "$(($(read_counter $F/stores) - stores))" 0
check race_never_failed expect_eq "$(read_counter $G/alloc_fail)" "$fail1"
log "race: $(($(read_counter $G/discarded_pages) - disc)) pages discarded, $(($(read_counter $F/stores) - stores)) DMEM stores"

# Nothing left behind: no page in use or pending, every page CMA counted
# as allocated counted as released, no dma-buf alive, and the only failed
# allocations the four refusals of each exhaust run.
check no_page_used expect_eq "$(read_counter $G/primary_used_pages)" 0
check no_release_pending expect_eq "$(read_counter $G/release_pending_pages)" 0
check cma_pages_balanced expect_eq "$(read_counter $CS/alloc_pages_success)" "$(read_counter $CS/release_pages_success)"
check bufinfo expect_exists /sys/kernel/debug/dma_buf/bufinfo
check no_dmabuf_alive not grep -q gcma0 /sys/kernel/debug/dma_buf/bufinfo
check only_full_area_failed expect_eq "$(($(read_counter $G/alloc_fail) - fail0))" 8
umount /mnt/d
check lent_returned expect_eq "$(read_counter $G/secondary_lent_pages)" 0
check no_stale_copy expect_eq "$(read_counter $F/verify_mismatches)" 0
log "scenario ends at $(cut -d' ' -f1 /proc/uptime) s"
check no_splat no_splat
