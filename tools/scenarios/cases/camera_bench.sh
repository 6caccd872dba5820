# shellcheck shell=dash
# description: the thesis's camera case from userspace: 8 buffers of 12 MiB allocated and freed again and again through the GCMA area's dma-buf heap and through the CMA heap of an equal area, alternately, while a background workload keeps memory full of page cache (a file larger than memory, re-read and verified) and anonymous pages; per-buffer latency, the share of each area in other use when a round starts, failures and the background's throughput; CAMERA table and CDF for 'make demo'
# group: bench
# append: cma=128M gcma=128M
# mem: 1G
# disk: 1536M ext2
# timeout: 1500
# duration: 240
#
# camera_bench.rounds=N (default 20) rounds of each heap.  The GCMA area is
# lent to DMEM by the background's page-cache churn: each GCMA round waits
# (up to 30 s) until 90% of it is lent, and the table gives the least
# share lent at a round's start.  The CMA area holds the background's
# movable pages, which a CMA allocation has to migrate.

G=/sys/kernel/mm/gcma/gcma0
rounds=$(cmdline_arg camera_bench.rounds 20)
check gcma_heap expect_exists /dev/dma_heap/gcma0
check cma_heap expect_exists /dev/dma_heap/reserved
log "heaps: $(ls /dev/dma_heap 2>&1 | tr '\n' ' ')"
dev=$(disks | head -n 1)
check mount mount -t ext2 "$dev" /mnt

# camera ARGS...: camera_heap ARGS, its output in /tmp/camera.out; prints
# the per-heap summaries (a check shows the first line of a pass, the
# last of a failure: the reason).
camera() {
	local rc
	camera_heap "$@" >/tmp/camera.out 2>&1
	rc=$?
	grep '^CAMERA-SUM' /tmp/camera.out
	tail -n 3 /tmp/camera.out
	return $rc
}
# A file larger than memory (1 GiB guest, 256 MiB of it in the areas),
# and 256 MiB of anonymous memory: page cache keeps being evicted.
check camera camera -r "$rounds" -b 8 -s 12 -a 256 -F 1200 \
	-f /mnt/camera.dat -g $G /dev/dma_heap/gcma0 /dev/dma_heap/reserved
grep -E '^CAMERA|^gcma: bench: cdf' /tmp/camera.out
log "gcma0: $(for f in total_pages primary_used_pages secondary_lent_pages discarded_pages alloc_success alloc_fail; do printf '%s=%s ' $f "$(cat $G/$f 2>/dev/null)"; done)"
log "vmstat: $(grep -E '^(pgmigrate_success|pgmigrate_fail|compact_stall)' /proc/vmstat | tr '\n' ' ')"
check gcma_no_failure expect_file_contains /tmp/camera.out 'CAMERA-SUM heap=gcma n=[0-9]+ fail=0 '
check nothing_wrong expect_file_contains /tmp/camera.out 'CAMERA-CHECK wrong_words=0 nonzero_buffers=0 '
check area_empty expect_eq "$(read_counter $G/primary_used_pages)" 0
rm -f /mnt/camera.dat
umount /mnt
check no_splat no_splat
