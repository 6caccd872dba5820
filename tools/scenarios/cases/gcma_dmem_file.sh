# shellcheck shell=dash
# description: DMEM's page-cache client on ext2 and ext4: files evicted by reclaim come back from GCMA, and no change to a file is hidden by an old copy
# arch: x86_64 arm64
# duration: 150
# tcg: single
# append: gcma=64M
# mem: 1G
# disk: 128M ext2
# disk: 128M ext4
# timeout: 900

F=/sys/kernel/mm/gcma/dmem/file
G=/sys/kernel/mm/gcma/gcma0
CG=/sys/fs/cgroup

check client_on expect_eq "$(cat $F/enabled)" 1
check nothing_stored expect_eq "$(read_counter $F/stored_pages)" 0

# A cgroup whose page cache memory.reclaim evicts (reclaim, not drop_caches).
mkdir -p $CG && mount -t cgroup2 none $CG
echo +memory > $CG/cgroup.subtree_control
mkdir -p $CG/files
# in_cgroup DIR CMD...: run CMD as a member of cgroup DIR.
in_cgroup() {
	sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$@"
}

for fs in ext2 ext4; do
	dev=/dev/vda
	[ $fs = ext4 ] && dev=/dev/vdb
	mkdir -p /mnt/$fs
	check ${fs}_mounted mount -t $fs $dev /mnt/$fs
	loads=$(read_counter $F/loads)
	stores=$(read_counter $F/stores)
	inval=$(read_counter $F/invalidations)
	# Two files (4 and 2 MiB): written, evicted, re-read; then truncated,
	# rewritten, punched, overwritten with O_DIRECT, dropped, recreated,
	# with pages evicted and with pages cached; every byte verified.
	check ${fs}_every_byte in_cgroup $CG/files pagecache -c $CG/files /mnt/$fs 4
	check ${fs}_stored expect_gt "$(read_counter $F/stores)" "$stores"
	check ${fs}_hits expect_gt "$(read_counter $F/loads)" "$loads"
	check ${fs}_invalidated expect_gt "$(read_counter $F/invalidations)" "$inval"
done
log "file client: $(for c in stored_pages stores loads misses invalidations evictions refused_nomem refused_nospace refused_large; do printf '%s=%s ' $c "$(read_counter $F/$c)"; done)"

# A file kept on each file system, evicted: its pages are held in the area.
for fs in ext2 ext4; do
	in_cgroup $CG/files dd if=/dev/urandom of=/mnt/$fs/kept bs=1M count=4 conv=fsync 2>/dev/null
done
# Held open, so that their inodes stay in memory: memory.reclaim also
# shrinks the cgroup's dentry and inode caches, and an inode evicted
# drops its pages from DMEM (truncate_inode_pages_final()), which would
# leave nothing stored here.
exec 3</mnt/ext2/kept 4</mnt/ext4/kept
# memory.reclaim may stop short of evicting them (it gives up with
# EAGAIN when a round reclaims too little): ask up to five times.
i=$(reclaim_until_stored $CG/files 1024)
log "kept files: $i memory.reclaim writes; invalidations $(read_counter $F/invalidations)"
check kept_stored expect_ge "$(read_counter $F/stored_pages)" 1024
check lent_to_dmem expect_ge "$(read_counter $G/secondary_lent_pages)" 1024
exec 3<&- 4<&-

# Unmount drops every entry of the superblock; nothing is left.
umount /mnt/ext2
umount /mnt/ext4
check unmount_drops_all expect_eq "$(read_counter $F/stored_pages)" 0
check pages_returned expect_eq "$(read_counter $G/secondary_lent_pages)" 0

# The switch: off drops the pages and stops the stores, on again stores.
# Files of 2 and 1 MiB: the runs above covered the sizes; these check
# the switch, and took 45 s of the scenario's 100 with 4 and 2 MiB.
mount -t ext4 /dev/vdb /mnt/ext4
in_cgroup $CG/files pagecache -c $CG/files /mnt/ext4 2 >/dev/null
echo 0 > $F/enabled
check switched_off expect_eq "$(cat $F/enabled)" 0
check off_drops expect_eq "$(read_counter $F/stored_pages)" 0
check off_returns expect_eq "$(read_counter $G/secondary_lent_pages)" 0
stores=$(read_counter $F/stores)
check off_every_byte in_cgroup $CG/files pagecache -c $CG/files /mnt/ext4 2
check off_stores_nothing expect_eq "$(read_counter $F/stores)" "$stores"
echo 1 > $F/enabled
check on_every_byte in_cgroup $CG/files pagecache -c $CG/files /mnt/ext4 2
check on_stores expect_gt "$(read_counter $F/stores)" "$stores"
umount /mnt/ext4

# Malformed values are refused with a message and change nothing.
for v in 2 yes- "" maybe 0x1; do
	check "bad_enabled_$(echo "$v" | tr -c 'a-z0-9\n' _)" not sh -c "echo '$v' > $F/enabled"
done
check bad_unchanged expect_eq "$(cat $F/enabled)" 1
check bad_logged expect_dmesg 'gcma: dmem/file/enabled: .* is not a boolean'
# Verify mode (CONFIG_GCMA_DMEM_VERIFY): every hit was read back from
# the file and compared.
check file_verified expect_gt "$(read_counter $F/verified)" 0
check file_no_mismatch expect_eq "$(read_counter $F/verify_mismatches)" 0
check no_splat no_splat
