# shellcheck shell=dash
# description: both DMEM clients at once while CMA debugfs allocates and frees large ranges of the same GCMA area, so lent pages are discarded constantly
# duration: 105
# append: gcma=32M
# mem: 1G
# disk: 128M ext4
# disk: 256M
# timeout: 900

F=/sys/kernel/mm/gcma/dmem/file
S=/sys/kernel/mm/gcma/dmem/swap
G=/sys/kernel/mm/gcma/gcma0
C=/sys/kernel/debug/cma/gcma0
CG=/sys/fs/cgroup

echo 0 > /sys/block/vdb/queue/rotational
mkswap /dev/vdb >/dev/null
check swapon swapon /dev/vdb
mkdir -p /mnt/ext4
check mounted mount -t ext4 /dev/vda /mnt/ext4
mkdir -p $CG && mount -t cgroup2 none $CG
echo +memory > $CG/cgroup.subtree_control
mkdir -p $CG/files $CG/anon
echo 32M > $CG/anon/memory.max
in_cgroup() {
	sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$@"
}

# The allocator loop (lib.sh): half the area (4096 of 8192 pages), then a
# quarter, allocated and freed through CMA's debugfs files until told to
# stop.  The area holds nothing else, so every request fits and none may
# fail.
discarded=$(read_counter $G/discarded_pages)
cma_loop $C 4096 2048 &
loop=$!
in_cgroup $CG/anon memhog -a 48 -n 2 > /tmp/hog.out 2>&1 &
hog=$!
check every_file_byte in_cgroup $CG/files pagecache -c $CG/files /mnt/ext4 8
check every_anon_byte wait $hog
touch /tmp/stop
wait $loop
read -r allocs fails < /tmp/cma_loop.out
log "cma loop: $allocs allocations, $fails failed; $(cat /tmp/hog.out | tail -n 1)"
check allocations_ran expect_gt "$allocs" 0
check no_alloc_failure expect_eq "$fails" 0
check gcma_alloc_fail expect_eq "$(read_counter $G/alloc_fail)" 0
check discards expect_gt "$(read_counter $G/discarded_pages)" "$discarded"
check file_discards expect_gt "$(read_counter $F/discards)" 0
check swap_discards expect_gt "$(read_counter $S/discards)" 0
check file_hits expect_gt "$(read_counter $F/loads)" 0
check swap_hits expect_gt "$(read_counter $S/loads)" 0
log "file: $(for c in stores loads misses discards evictions; do printf '%s=%s ' $c "$(read_counter $F/$c)"; done)"
log "swap: $(for c in stores loads misses discards evictions; do printf '%s=%s ' $c "$(read_counter $S/$c)"; done)"
check area_free expect_eq "$(read_counter $G/primary_used_pages)" 0
swapoff /dev/vdb
umount /mnt/ext4
check nothing_left expect_eq "$(($(read_counter $F/stored_pages) + $(read_counter $S/stored_pages)))" 0
check no_splat no_splat
