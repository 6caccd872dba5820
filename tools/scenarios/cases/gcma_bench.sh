# shellcheck shell=dash
# description: GCMA vs CMA alloc+release latency (64..32768 pages) under memory pressure from memhog
# group: bench
# append: cma=128M gcma=128M
# mem: 2G
# timeout: 1200

# Runs per size: "gcma_bench.reps=N" on the command line (--append), else 30.
reps=$(cmdline_arg gcma_bench.reps)
reps=${reps:-30}

check bench_file expect_exists /sys/kernel/debug/gcma_bench
check gcma_in_cma expect_exists /sys/kernel/debug/cma/gcma0

# Fill most of the free memory with anonymous pages (movable, so the
# allocator places them in the CMA area too) and keep rewriting them.
avail=$(read_counter /proc/meminfo MemAvailable)
hog=$((avail / 1024 - 80))
log "MemAvailable ${avail} kB; memhog -a ${hog}"
memhog -a "$hog" -t 1200 &
hog_pid=$!
# Movable allocations enter CMA pageblocks once free CMA memory exceeds
# half the free memory: wait until half of the CMA area is taken.
# Whether memhog's pages land in the CMA area depends on the allocator's
# timing, so the level reached is reported rather than required.
if wait_for 180 sh -c "[ \$(awk '/CmaFree/ {print \$2}' /proc/meminfo) -lt 65536 ]"; then
	pressure="reached"
else
	pressure="NOT reached (CMA area less than half full)"
fi
log "pressure $pressure: MemFree $(read_counter /proc/meminfo MemFree) kB, CmaFree $(read_counter /proc/meminfo CmaFree) kB"
echo "gcma: bench: pressure $pressure; CmaFree $(read_counter /proc/meminfo CmaFree) kB of 131072 kB" > /dev/kmsg

echo "$reps" > /sys/kernel/debug/gcma_bench
kill "$hog_pid"
wait "$hog_pid"

dmesg | grep 'gcma: bench: ' | sed -E -e 's/^\[[ 0-9.]*\] //'
check bench_done expect_dmesg 'gcma: bench: done'
# A GCMA allocation cannot fail while the area has room.
check gcma_never_fails expect_dmesg 'gcma: bench: done: [0-9]+ CMA and 0 GCMA allocations failed'
check gcma_all_released expect_eq "$(read_counter /sys/kernel/mm/gcma/gcma0/primary_used_pages)" 0
check no_splat no_splat
