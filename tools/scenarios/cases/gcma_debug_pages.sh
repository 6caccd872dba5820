# shellcheck shell=dash
# description: area pages look like free pages to the page allocator's debug options: with page_poison=1 every area page is poisoned at boot and checked when GCMA hands it out (CMA, THP, DMEM); allocation profiling (MEM_ALLOC_PROFILING_DEBUG) counts GCMA's pages at their callers' lines, with no warning
# duration: 40
# tcg: single
# append: gcma=16M gcma=8M:thp page_poison=1
# disk: 64M ext2
# timeout: 300

C=/sys/kernel/debug/cma/gcma0
G=/sys/kernel/mm/gcma/gcma0
F=/sys/kernel/mm/gcma/dmem/file
T=/sys/kernel/mm/gcma/thp
CG=/sys/fs/cgroup
A=/proc/allocinfo

# bytes PATTERN: bytes /proc/allocinfo counts at the lines matching PATTERN.
bytes() {
	awk -v re="$1" '$0 ~ re { n += $1 } END { print n + 0 }' $A
}

check poisoning_on expect_file_contains /proc/cmdline 'page_poison=1'
check profiling_on expect_file_contains /proc/sys/vm/mem_profiling '^1$'

# The whole area through CMA: every page is checked for its poison on the
# way out (a page never poisoned is "memory corruption").
echo 4096 > $C/alloc
check whole_area expect_eq "$(read_counter $G/primary_used_pages)" 4096
check cma_counted_at_gcma expect_eq "$(bytes 'mm/gcma_rs/area.c:[0-9]+ func:gcma_alloc_gfp( |$)')" $((4096 * 4096))
echo 4096 > $C/free
check cma_uncounted expect_eq "$(bytes 'func:gcma_alloc_gfp( |$)')" 0

# THP from the THP area, counted at the fault's line in mm/huge_memory.c
# as the buddy allocator's are, never at a line of a header.
echo always > $T/mode
echo madvise > /sys/kernel/mm/transparent_hugepage/enabled
range=$(gcma_area_range gcma1)
thp_fault -a "$range" -m 8 -H -w /tmp/state -o pause:held,verify >/tmp/t.log 2>&1 &
pid=$!
check thp_paused thp_wait_pause /tmp/state held $pid
check thp_from_area expect_eq "$(read_counter /sys/kernel/mm/gcma/gcma1/primary_used_pages)" 2048
grep -E 'huge_memory|gcma' $A
check thp_counted_at_fault expect_ge "$(bytes 'mm/huge_memory.c:[0-9]+ func:')" $((8 * 1024 * 1024))
check thp_not_in_header expect_eq "$(bytes 'gcma_thp.h')" 0
kill -USR1 $pid
check thp_every_byte wait $pid
cat /tmp/t.log

# DMEM's lent pages, counted where they are lent.
mkdir -p $CG /mnt/ext2 && mount -t cgroup2 none $CG
echo +memory > $CG/cgroup.subtree_control
mkdir -p $CG/files
check mounted mount -t ext2 /dev/vda /mnt/ext2
dd if=/dev/urandom of=/tmp/src bs=1M count=2 2>/dev/null
sh -c 'echo $$ > "$0/cgroup.procs" && exec cp /tmp/src /mnt/ext2/f' $CG/files
sync
exec 3</mnt/ext2/f
reclaim_until_stored $CG/files 256 >/dev/null
check stored expect_ge "$(read_counter $F/stored_pages)" 256
check lent_counted expect_eq "$(bytes 'mm/gcma_rs/area.c:[0-9]+ func:gcma_lend_tag_enter( |$)')" $(($(read_counter $F/held_pages) * 4096))
check every_byte cmp /tmp/src /mnt/ext2/f
# An allocation takes the lent pages over: counted as its own.
echo 4096 > $C/alloc
check lent_handed_over expect_eq "$(bytes 'func:gcma_alloc_gfp( |$)')" $((4096 * 4096))
check none_lent_now expect_eq "$(bytes 'func:gcma_lend_tag_enter( |$)')" "$(($(read_counter $F/held_pages) * 4096))"
echo 4096 > $C/free
exec 3<&-
umount /mnt/ext2
check no_splat no_splat
