# shellcheck shell=dash
# description: DMEM's verify mode finds a stale copy: hits of the page-cache client (ext2) and of the swap client made stale on purpose (verify_inject) are each found, counted, warned about once, and the reader gets the device's bytes, every byte checked
# duration: 45
# append: gcma=32M
# mem: 1G
# disk: 64M ext2
# disk: 128M
# allow-splat: WARNING: CPU: [0-9]+ PID: [0-9]+ at rust/helpers/mm.c:[0-9]+ rust_helper_rsmm_warn
# timeout: 400

# The other DMEM scenarios check that verify mode never finds a mismatch;
# this one checks that it would: the self-test flips one byte of the copy
# a hit gives, before verify mode compares it with the device.
F=/sys/kernel/mm/gcma/dmem/file
S=/sys/kernel/mm/gcma/dmem/swap
CG=/sys/fs/cgroup
N=4

check verify_mode_built expect_exists $F/verify_inject
check inject_idle expect_eq "$(cat $F/verify_inject)" 0
check inject_refuses_junk not sh -c "echo x > $F/verify_inject"

mkdir -p $CG && mount -t cgroup2 none $CG
echo +memory > $CG/cgroup.subtree_control
mkdir -p $CG/files $CG/anon
in_cgroup() {
	sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$@"
}

# Page cache: a 4 MiB file written, evicted to DMEM, and read back with
# N of its hits made stale.
mkdir -p /mnt/ext2
check mounted mount -t ext2 /dev/vda /mnt/ext2
in_cgroup $CG/files dd if=/dev/urandom of=/mnt/ext2/f bs=1M count=4 conv=fsync 2>/dev/null
sum=$(md5sum < /mnt/ext2/f)
exec 3</mnt/ext2/f
i=$(reclaim_until_stored $CG/files 512)
log "file: $i memory.reclaim writes, $(read_counter $F/stored_pages) pages stored"
check file_stored expect_ge "$(read_counter $F/stored_pages)" 512
mism=$(read_counter $F/verify_mismatches)
loads=$(read_counter $F/loads)
echo $N > $F/verify_inject
now=$(md5sum < /mnt/ext2/f)
check file_bytes_right test "$now" = "$sum"
exec 3<&-
check file_hits expect_ge "$(read_counter $F/loads)" $((loads + N))
check file_injected_all expect_eq "$(cat $F/verify_inject)" 0
check file_found_each expect_eq "$(read_counter $F/verify_mismatches)" $((mism + N))
check file_warned_each expect_eq "$(dmesg | grep -c 'gcma: dmem: stale file page')" $N
umount /mnt/ext2

# Swap: 24 MiB of patterned anonymous memory in a 12 MiB cgroup, every
# word checked on each pass, with N swap-ins made stale.
echo 0 > /sys/block/vdb/queue/rotational
mkswap /dev/vdb >/dev/null
check swapon swapon /dev/vdb
echo 12M > $CG/anon/memory.max
mism=$(read_counter $S/verify_mismatches)
echo $N > $S/verify_inject
check swap_every_word in_cgroup $CG/anon memhog -a 24 -n 2 -v
check swap_injected_all expect_eq "$(cat $S/verify_inject)" 0
check swap_found_each expect_eq "$(read_counter $S/verify_mismatches)" $((mism + N))
check swap_warned_each expect_eq "$(dmesg | grep -c 'gcma: dmem: stale swap page')" $N
swapoff /dev/vdb

# The warnings allowed above are these reports' and no others.
check warnings_each expect_eq "$(dmesg | grep -cE 'WARNING: .* rust_helper_rsmm_warn')" $((2 * N))
check no_splat no_splat
