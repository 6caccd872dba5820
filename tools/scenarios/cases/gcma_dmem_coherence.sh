# shellcheck shell=dash
# description: DMEM never serves a page older than the file: an O_DIRECT write racing a buffered read and reclaim, its invalidation walk racing the client's switch-on, one failing part way, a changed inode generation, a memory-failure removal, O_DIRECT fences raced by the client's switch (ext2 and ext4), a swap file's old pages after swapoff; a SCHED_FIFO allocator never waits for ever on a copy it preempted
# duration: 60
# append: gcma=32M preempt=full
# mem: 1G
# disk: 64M ext2
# disk: 64M ext4
# timeout: 600

F=/sys/kernel/mm/gcma/dmem/file
CG=/sys/fs/cgroup

check client_on expect_eq "$(cat $F/enabled)" 1
mkdir -p $CG && mount -t cgroup2 none $CG
echo "+io +memory" > $CG/cgroup.subtree_control
mkdir -p $CG/slow $CG/slowread

for fs in ext2 ext4; do
	dev=vda
	[ $fs = ext4 ] && dev=vdb
	mkdir -p /mnt/$fs
	check ${fs}_mounted mount -t $fs /dev/$dev /mnt/$fs

	# The writer's cgroup may write 32 KiB/s to this disk: the test's
	# 128 KiB O_DIRECT write stays in flight for about 4 s.
	echo "$(cat /sys/block/$dev/dev) wbps=32768" > $CG/slow/io.max
	check ${fs}_dio_write_racing_read dmem_coherence dio -w $CG/slow /mnt/$fs
	# The same throttle holds a write that fails with ENOSPC part way
	# (the test fills the file system; a failed run leaves its files).
	check ${fs}_dio_failed_write dmem_coherence diofail -w $CG/slow /mnt/$fs
	rm -f /mnt/$fs/diofail /mnt/$fs/diofail.filler
	# 96 KiB/s for the writer (its 192 KiB are done after about 2 s);
	# the reader's cgroup may read 512 B/s: its read of one page takes
	# about 8 s and holds the write's invalidation walk at page 0 while
	# the client comes on.
	echo "$(cat /sys/block/$dev/dev) wbps=98304" > $CG/slow/io.max
	echo "$(cat /sys/block/$dev/dev) rbps=512" > $CG/slowread/io.max
	check ${fs}_dio_walk_racing_switch dmem_coherence dioswitch -w $CG/slow -r $CG/slowread /mnt/$fs
	# The test switches the client off first and on again; whatever
	# became of it, the cases below need it on.
	echo 1 > $F/enabled
	echo "$(cat /sys/block/$dev/dev) rbps=max" > $CG/slowread/io.max
	echo "$(cat /sys/block/$dev/dev) wbps=max" > $CG/slow/io.max

	# ext4 with metadata checksums (mke2fs's default) refuses
	# SETVERSION; ext2 always takes it.
	dmem_coherence setversion /mnt/$fs
	rc=$?
	if [ $fs = ext4 ] && [ $rc = 77 ]; then
		log "ext4 refuses SETVERSION here: generation case run on ext2 only"
	else
		check ${fs}_setversion expect_eq $rc 0
	fi

	check ${fs}_memory_failure_removal dmem_coherence hwpoison /mnt/$fs
	check ${fs}_fence_survives_switch dmem_coherence switch /mnt/$fs
	umount /mnt/$fs
done

# A swap file: DMEM keeps its pages (written, paged out), then it is
# swapped to, which rewrites its blocks behind its page cache.  Nothing of
# it may be loaded from DMEM after swapoff: what was kept before swapon
# is dropped there (the drop must not skip the file for being a swap file
# still, as swapoff clears S_SWAPFILE only after it).
mount -t ext4 /dev/vdb /mnt/ext4
mkdir -p $CG/swapfile
echo 8M > $CG/swapfile/memory.max
sh -c 'echo $$ > "$0/cgroup.procs" && exec dd if=/dev/urandom of=/mnt/ext4/swapfile bs=1M count=8 conv=fsync 2>/dev/null' $CG/swapfile
# Held open, so that memory.reclaim does not evict the inode (which
# would drop its entries) until swapoff has had to.
exec 3</mnt/ext4/swapfile
stored=$(read_counter $F/stored_pages)
i=$(reclaim_until_stored $CG/swapfile $((stored + 1024)))
check swapfile_stored expect_ge "$(read_counter $F/stored_pages)" $((stored + 1024))
mkswap /mnt/ext4/swapfile >/dev/null
check swapfile_swapon swapon /mnt/ext4/swapfile
sh -c 'echo $$ > "$0/cgroup.procs" && exec memhog -a 12' $CG/swapfile >/tmp/swapfile_hog.out 2>&1
check swapfile_swapped_to expect_gt "$(read_counter /proc/vmstat pswpout)" 0
check swapfile_swapoff swapoff /mnt/ext4/swapfile
loads=$(read_counter $F/loads)
cat /mnt/ext4/swapfile >/dev/null
check swapfile_nothing_loaded expect_eq "$(read_counter $F/loads)" "$loads"
exec 3<&-
rm /mnt/ext4/swapfile
umount /mnt/ext4
# A SCHED_FIFO allocator and a copier on CPU 0, with RT throttling and
# CPU 0's fair server (6.12's deadline server, which gives normal tasks
# 50 ms a second whatever RT tasks do) off: every allocation discards the
# lent pages and may have preempted a copy into or out of one of them,
# which it must let finish.  (preempt=full: the copier can be preempted
# in the middle of a copy, and cond_resched() does nothing.)  A waiter
# that only polls never returns: the run must end within a minute of its
# 15 s.
D=/sys/kernel/mm/gcma/dmem/file
FS=/sys/kernel/debug/sched/fair_server/cpu0/runtime
echo -1 > /proc/sys/kernel/sched_rt_runtime_us
fair=$(cat $FS)
echo 0 > $FS
mount -t ext2 /dev/vda /mnt/ext2
discards=$(read_counter $D/discards)
rm -f /tmp/rt.rc
(dmem_coherence rt /sys/kernel/debug/cma/gcma0 /mnt/ext2 15 > /tmp/rt.out 2>&1; echo $? > /tmp/rt.rc) &
check fifo_allocator_returns wait_for 75 test -e /tmp/rt.rc
cat /tmp/rt.out
check fifo_allocator_and_copier expect_eq "$(cat /tmp/rt.rc 2>/dev/null)" 0
check fifo_allocator_discarded expect_gt "$(read_counter $D/discards)" "$discards"
echo "$fair" > $FS
echo 950000 > /proc/sys/kernel/sched_rt_runtime_us
umount /mnt/ext2

log "file client: $(for c in stored_pages stores loads misses invalidations; do printf '%s=%s ' $c "$(read_counter $F/$c)"; done)"
check no_splat no_splat
