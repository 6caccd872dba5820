# shellcheck shell=dash
# description: area pages where the page allocator's other rules meet them: hardware-poisoned pages stay out of every path (a contiguous allocation never gets one, DMEM neither lends nor reads one, a released page found poisoned is retired; all counted in sysfs); alloc_contig_pages() (a runtime 1 GiB hugetlb page) leaves a THP area and its huge pages alone; an area across a zone boundary is refused; offlining an area's memory block fails at once, also where the area has no pageblock of its own
# duration: 60
# tcg: single
# gcma1 (THP) lies in [1 GiB, 2 GiB), the only 1 GiB-aligned range
# alloc_contig_pages() may try: memblock's allocations (the memory map,
# KASAN's shadow) sit at the top of the 3 GiB, the kernel at 16 MiB
# (nokaslr).  movablecore=768M puts ZONE_MOVABLE from 2304 MiB: gcma2
# spans that boundary, gcma3 lies in ZONE_MOVABLE, in a memory block
# that holds nothing unmovable but it; so does gcma4, 1028 KiB from 4 KiB
# past a pageblock boundary (no pageblock of its own).
# append: gcma=16M gcma=64M@1G:thp gcma=16M@2296M gcma=16M@2432M
# append: gcma=1028K@0x96001000
# append: movablecore=768M nokaslr
# 1 GiB pages need the CPU flag.
# qemu: -cpu qemu64,+pdpe1gb
# mem: 3G
# numa: 1
# disk: 64M ext2
# timeout: 300

C=/sys/kernel/debug/cma/gcma0
G=/sys/kernel/mm/gcma/gcma0
F=/sys/kernel/mm/gcma/dmem/file
H=/sys/kernel/debug/hwpoison
CG=/sys/fs/cgroup

range=$(gcma_area_range gcma0)
base=${range%-*}
n=$((${range#*-} - base))
check area_found expect_gt "$n" 0
check injector expect_exists $H/corrupt-pfn
check none_poisoned expect_eq "$(read_counter $G/hwpoisoned_pages)" 0

# poison PAGE: memory_failure() on area page PAGE, as a machine check
# would report it (the write's own result does not matter: for an area
# page it is "ignored", as no reference can be taken).
poison() {
	echo $((base + $1)) > $H/corrupt-pfn 2>/dev/null
	expect_dmesg "$(printf '%#x' $((base + $1))): recovery action for"
}
retired_msg() {
	printf 'gcma0: page at pfn %#x is hardware-poisoned: taken out of use' $((base + $1))
}

# A free page: memory_failure() can only mark it (no reference, no buddy
# page).  The allocation of the whole area finds it, retires it and fails;
# every other page can still be allocated, and only those.
check free_page_poisoned poison 100
echo $n > $C/alloc 2>/dev/null
check whole_area_refused expect_eq "$(read_counter $G/primary_used_pages)" 0
check free_page_retired expect_eq "$(read_counter $G/hwpoisoned_pages)" 1
check free_page_logged expect_dmesg "$(retired_msg 100)"
echo 100 > $C/alloc
echo $((n - 101)) > $C/alloc
check all_but_the_bad_page expect_eq "$(read_counter $G/primary_used_pages)" $((n - 1))
echo 1 > $C/alloc 2>/dev/null
check bad_page_never_given expect_eq "$(read_counter $G/primary_used_pages)" $((n - 1))
echo $((n - 1)) > $C/free
check freed expect_eq "$(read_counter $G/primary_used_pages)" 0

# A page of a live allocation: it is marked while allocated and found
# when the allocation is released; it is retired, not left pending.
echo 8 > $C/alloc
check held_page_poisoned poison 3
echo 8 > $C/free
check released_page_retired expect_eq "$(read_counter $G/hwpoisoned_pages)" 2
check released_page_logged expect_dmesg "$(retired_msg 3)"
check nothing_pending expect_eq "$(read_counter $G/release_pending_pages)" 0
check nothing_used expect_eq "$(read_counter $G/primary_used_pages)" 0

# DMEM lends from the top of the area down.  The top page, free and
# poisoned, is retired when DMEM would lend it; the next one down takes
# the first copy, and once poisoned, the load of that copy misses and
# reads the disk.  Every byte of the file is checked.
mkdir -p $CG /mnt/ext2 && mount -t cgroup2 none $CG
echo +memory > $CG/cgroup.subtree_control
mkdir -p $CG/files
in_cgroup() {
	sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$@"
}
check mounted mount -t ext2 /dev/vda /mnt/ext2
dd if=/dev/urandom of=/tmp/src bs=1M count=2 2>/dev/null
in_cgroup $CG/files cp /tmp/src /mnt/ext2/f
sync
check top_page_poisoned poison $((n - 1))
exec 3</mnt/ext2/f
reclaim_until_stored $CG/files 256 >/dev/null
check stored expect_ge "$(read_counter $F/stored_pages)" 256
check lend_skips_bad_page expect_eq "$(read_counter $G/hwpoisoned_pages)" 3
check lend_logged expect_dmesg "$(retired_msg $((n - 1)))"
check stored_page_poisoned poison $((n - 2))
loads=$(read_counter $F/loads)
check every_byte in_cgroup $CG/files cmp /tmp/src /mnt/ext2/f
check other_pages_hit expect_gt "$(read_counter $F/loads)" "$loads"
check poisoned_copy_missed expect_eq "$(read_counter $F/poisoned)" 1
check stored_page_retired expect_eq "$(read_counter $G/hwpoisoned_pages)" 4
check stored_page_logged expect_dmesg "$(retired_msg $((n - 2)))"

# Stored and read again: no copy goes near the retired pages any more.
reclaim_until_stored $CG/files 256 >/dev/null
check every_byte_again in_cgroup $CG/files cmp /tmp/src /mnt/ext2/f
check no_more_poisoned_copies expect_eq "$(read_counter $F/poisoned)" 1
exec 3<&-
umount /mnt/ext2
check all_returned expect_eq "$(read_counter $G/secondary_lent_pages)" 0
check still_four expect_eq "$(read_counter $G/hwpoisoned_pages)" 4

# A runtime gigantic page: alloc_contig_pages() may only try [1 GiB,
# 2 GiB), which holds the THP area.  Isolating the area's pageblocks fails
# at once; the area's huge pages are not migrated out of it first.
T=/sys/kernel/mm/gcma/thp
G1=/sys/kernel/mm/gcma/gcma1
range=$(gcma_area_range gcma1)
echo always >$T/mode
echo madvise >/sys/kernel/mm/transparent_hugepage/enabled
thp_fault -a "$range" -m 32 -H -w /tmp/state -o pause:held,verify >/tmp/g.log 2>&1 &
pid=$!
check thp_paused thp_wait_pause /tmp/state held $pid
check thp_in_area expect_eq "$(read_counter $G1/primary_used_pages)" 8192
m0=$(read_counter /proc/vmstat pgmigrate_success)
echo 1 >/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages
log "gigantic pages: $(cat /sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages); pgmigrate_success $m0 -> $(read_counter /proc/vmstat pgmigrate_success)"
check gigantic_left_area expect_eq "$(read_counter $G1/primary_used_pages)" 8192
check gigantic_migrated_nothing expect_eq "$(read_counter /proc/vmstat pgmigrate_success)" "$m0"
echo 0 >/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages
kill -USR1 $pid
check thp_every_byte wait $pid
cat /tmp/g.log

# An area across the zone boundary is refused, its memory given to the
# page allocator; its CMA area fails every allocation, cleanly.
check movable_zone expect_dmesg 'Node 0: 0x0000000090000000'
check straddling_refused expect_dmesg 'gcma: gcma2: \[0x000000008f800000\+0x0000000001000000\] spans zones DMA32 \(node 0\) and Movable \(node 0\) at pfn 0x90000; not used, its memory goes to the page allocator'
check straddling_not_in_service expect_missing /sys/kernel/mm/gcma/gcma2
check straddling_cma_alloc_fails not sh -c 'echo 1 > /sys/kernel/debug/cma/gcma2/alloc'
check four_areas expect_dmesg 'gcma: 4 area\(s\) ready'

# Offlining the memory block that holds gcma3: refused at once with
# EBUSY (its pageblocks are isolated for good), not retried for ever.
bs=$(($(sed 's/^/0x/' /sys/devices/system/memory/block_size_bytes)))
# offline_refused PREFIX ADDR: writing offline to the memory block that
# holds physical address ADDR fails with EBUSY within 10 s (the timeout
# kills it after 60), and the block stays online.
offline_refused() {
	local blk t0 rc
	blk=/sys/devices/system/memory/memory$(($2 / bs))
	check "${1}block_online" expect_file_contains $blk/state '^online$'
	t0=$(cut -d. -f1 /proc/uptime)
	timeout 60 sh -c "echo offline > $blk/state" 2>/tmp/offline.err
	rc=$?
	cat /tmp/offline.err
	check "${1}offline_refused" expect_eq $rc 1
	check "${1}offline_ebusy" expect_file_contains /tmp/offline.err 'Device or resource busy'
	check "${1}offline_at_once" expect_le $(($(cut -d. -f1 /proc/uptime) - t0)) 10
	check "${1}still_online" expect_file_contains $blk/state '^online$'
}
offline_refused "" $((2432 * 1024 * 1024))
echo 16 > /sys/kernel/debug/cma/gcma3/alloc
check area_still_works expect_eq "$(read_counter /sys/kernel/mm/gcma/gcma3/primary_used_pages)" 16
echo 16 > /sys/kernel/debug/cma/gcma3/free

# gcma4 lies inside one pageblock, which it shares with the page
# allocator, so it has none isolated for good.  has_unmovable_pages() counts an area's pages as unmovable, so isolating
# gcma4's pageblock fails at once and names its first page (without
# that, offline_pages() waited for gcma4's free pages to become buddy
# pages, until the timeout killed it).
offline_refused edge_ 0x96001000
check edge_unmovable_logged expect_dmesg 'page dumped because: unmovable page'
check edge_area_page_named expect_dmesg "page: refcount:0 .* pfn:$(printf '%#x' $((0x96001000 / 4096)))\$"
check edge_area_whole expect_eq "$(read_counter /sys/kernel/mm/gcma/gcma4/total_pages)" 257
check no_splat no_splat
