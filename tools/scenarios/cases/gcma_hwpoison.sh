# shellcheck shell=dash
# description: hardware-poisoned area pages stay out of every path: a contiguous allocation never gets one, DMEM neither lends nor reads one, a released page found poisoned is retired; all counted in sysfs
# duration: 45
# append: gcma=16M
# mem: 512M
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
i=0
while [ $i -lt 5 ] && [ "$(read_counter $F/stored_pages)" -lt 256 ]; do
	echo 1G > $CG/files/memory.reclaim 2>/dev/null
	i=$((i + 1))
done
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
i=0
while [ $i -lt 5 ] && [ "$(read_counter $F/stored_pages)" -lt 256 ]; do
	echo 1G > $CG/files/memory.reclaim 2>/dev/null
	i=$((i + 1))
done
check every_byte_again in_cgroup $CG/files cmp /tmp/src /mnt/ext2/f
check no_more_poisoned_copies expect_eq "$(read_counter $F/poisoned)" 1
exec 3<&-
umount /mnt/ext2
check all_returned expect_eq "$(read_counter $G/secondary_lent_pages)" 0
check still_four expect_eq "$(read_counter $G/hwpoisoned_pages)" 4
check no_splat no_splat
