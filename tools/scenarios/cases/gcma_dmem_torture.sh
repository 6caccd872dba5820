# shellcheck shell=dash
# description: DMEM torture: both clients at once; fsx-style processes in small memory cgroups on ext2 and ext4 (buffered, O_DIRECT and mmap I/O, truncation, hole punching, page-out, SETVERSION, O_DIRECT writes raced by reads) and an anonymous hog swapping, while the GCMA area is allocated and freed in a loop and memory.reclaim runs; a remount in the middle; verify mode on, every byte checked
# duration: 90
# append: gcma=32M
# mem: 1G
# disk: 128M ext2
# disk: 128M ext4
# disk: 256M
# timeout: 900

F=/sys/kernel/mm/gcma/dmem/file
S=/sys/kernel/mm/gcma/dmem/swap
G=/sys/kernel/mm/gcma/gcma0
C=/sys/kernel/debug/cma/gcma0
CG=/sys/fs/cgroup
# Knobs (kernel command line, through run.py --append):
# dmem_torture.seconds=N  seconds of each of the two phases (before and
#                         after the remount; default 14)
# dmem_torture.cma=0      no allocation loop (no discards)
# dmem_torture.fsx=ARGS   more dmem_fsx options, e.g. -P: the race's reader
#                         does not page out
# Each dmem_fsx watches verify_mismatches and prints its last operations
# when the counter moves, to find the operation that read a stale copy.
# Each phase took 20 s until they were cut for make test's cold budget:
# the stale copies behind the direct-I/O fence (gcma.rst) showed as 40
# verify mismatches in 30 s of this scenario, so 28 s of both phases
# would still show them many times over.
T=$(cmdline_arg dmem_torture.seconds)
T=${T:-14}

check verify_mode_built expect_exists $F/verify_mismatches
echo 0 > /sys/block/vdc/queue/rotational
mkswap /dev/vdc >/dev/null
check swapon swapon /dev/vdc
mkdir -p /mnt/ext2 /mnt/ext4
check ext2_mounted mount -t ext2 /dev/vda /mnt/ext2
check ext4_mounted mount -t ext4 /dev/vdb /mnt/ext4
mkdir -p $CG && mount -t cgroup2 none $CG
echo +memory > $CG/cgroup.subtree_control
for i in 0 1 2 3 anon; do
	mkdir -p $CG/t$i
	echo 6M > $CG/t$i/memory.max
done
echo 24M > $CG/tanon/memory.max
in_cgroup() {
	sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$@"
}

# Reclaim from outside the fsx processes, on top of their own limits.
reclaim_loop() {
	while [ ! -e /tmp/stop ]; do
		for i in 0 1 2 3; do
			echo 2M > $CG/t$i/memory.reclaim 2>/dev/null
		done
		sleep 1
	done
}

# phase NAME [-i]: four fsx processes, two per file system, each in its
# own cgroup, for $T seconds; every one must exit 0.
phase() {
	name=$1
	shift
	pids=""
	for i in 0 1 2 3; do
		fs=ext2
		[ $((i % 2)) = 1 ] && fs=ext4
		in_cgroup $CG/t$i dmem_fsx -s $((i + 1))$((${#name} * 7)) -t "$T" -p 256 \
			-m /tmp/f$i.model -V $F/verify_mismatches $(cmdline_arg dmem_torture.fsx) "$@" /mnt/$fs/f$i \
			> /tmp/fsx$i.out 2>&1 &
		pids="$pids $!"
	done
	i=0
	for p in $pids; do
		check ${name}_fsx$i wait "$p"
		cat /tmp/fsx$i.out
		i=$((i + 1))
	done
}

rm -f /tmp/stop
stores=$(read_counter $F/stores)
loads=$(read_counter $F/loads)
swap_stores=$(read_counter $S/stores)
swap_loads=$(read_counter $S/loads)
file_discards=$(read_counter $F/discards)
swap_discards=$(read_counter $S/discards)
alloc_fail=$(read_counter $G/alloc_fail)
# Discards: the whole area, half of it, a quarter, allocated and freed
# through CMA's debugfs files (lib.sh's cma_loop) until told to stop;
# dmem_torture.cma=0 leaves them out (to tell DMEM's own races apart).
if [ "$(cmdline_arg dmem_torture.cma)" = 0 ]; then
	echo "0 0" > /tmp/cma_loop.out
	sleep 1 &
else
	cma_loop $C 8192 4096 2048 &
fi
loop=$!
reclaim_loop &
rloop=$!
# Not through in_cgroup, a function, which would run in a subshell of its
# own: $hog must be memhog's pid, for the signal that stops it below.
sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' $CG/tanon \
	memhog -a 48 -t $((2 * T + 10)) > /tmp/hog.out 2>&1 &
hog=$!

phase first
# Remount: the files must read back as their models say, from the disk.
umount /mnt/ext2 && umount /mnt/ext4
check remount_dropped_file_entries expect_eq "$(read_counter $F/stored_pages)" 0
mount -t ext2 /dev/vda /mnt/ext2
mount -t ext4 /dev/vdb /mnt/ext4
for i in 0 1 2 3; do
	fs=ext2
	[ $((i % 2)) = 1 ] && fs=ext4
	check remount_f$i cmp /mnt/$fs/f$i /tmp/f$i.model
done
phase second -i

# The hog has swapped beside both phases; it stops now, within a page of
# the pass under way, and verifies every word once more (a pass under
# swap takes about 40 s: waiting for it to end took longer than a phase).
kill -TERM $hog 2>/dev/null
check every_anon_byte wait $hog
tail -n 1 /tmp/hog.out
touch /tmp/stop
wait $loop $rloop
read -r allocs fails < /tmp/cma_loop.out
log "cma loop: $allocs allocations, $fails failed"
check allocations_ran expect_gt "$allocs" 0
check no_alloc_failure expect_eq "$fails" 0
check file_stored expect_gt "$(read_counter $F/stores)" "$stores"
check file_hits expect_gt "$(read_counter $F/loads)" "$loads"
check gcma_alloc_fail expect_eq "$(read_counter $G/alloc_fail)" "$alloc_fail"
check swap_stored expect_gt "$(read_counter $S/stores)" "$swap_stores"
check swap_hits expect_gt "$(read_counter $S/loads)" "$swap_loads"
if [ "$(cmdline_arg dmem_torture.cma)" != 0 ]; then
	check file_discards expect_gt "$(read_counter $F/discards)" "$file_discards"
	check swap_discards expect_gt "$(read_counter $S/discards)" "$swap_discards"
fi
check file_verified expect_gt "$(read_counter $F/verified)" 0
check file_no_mismatch expect_eq "$(read_counter $F/verify_mismatches)" 0
check swap_no_mismatch expect_eq "$(read_counter $S/verify_mismatches)" 0
for c in F S; do
	eval d=\$$c
	log "$(basename $d): $(for k in stores loads misses invalidations discards verified verify_mismatches verify_skipped; do printf '%s=%s ' $k "$(read_counter $d/$k)"; done)"
done
# Nothing stays behind: the allocation loop has freed what it took, and
# with the swap device off and the file systems unmounted every DMEM copy
# is dropped and its page given back.
check area_free expect_eq "$(read_counter $G/primary_used_pages)" 0
swapoff /dev/vdc
umount /mnt/ext2 && umount /mnt/ext4
check nothing_left expect_eq "$(($(read_counter $F/stored_pages) + $(read_counter $S/stored_pages)))" 0
check none_lent expect_eq "$(read_counter $G/secondary_lent_pages)" 0
check no_splat no_splat
