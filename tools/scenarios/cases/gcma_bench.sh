# shellcheck shell=dash
# description: GCMA (area lent to DMEM) vs CMA (area filled with movable pages) allocation and release latency (64..32768 pages) under anonymous and page-cache pressure from memhog
# group: bench
# append: cma=256M gcma=256M
# mem: 2G
# disk: 512M
# timeout: 1800

# Runs per size: "gcma_bench.reps=N" on the command line (--append), else
# 100, so that the 99th percentile is not the maximum.
reps=$(cmdline_arg gcma_bench.reps)
reps=${reps:-100}
cma_kb=262144

check bench_file expect_exists /sys/kernel/debug/gcma_bench
check gcma_in_cma expect_exists /sys/kernel/debug/cma/gcma0

# Page cache backed by a real disk, so reclaim can drop clean pages and
# the next pass reads them back in: the file is re-read with the cache
# dropped before every pass, which keeps page-cache pages churning.
dev=$(disks | head -n 1)
cache_mib=0
if [ -n "$dev" ] && mke2fs -q "$dev" >/dev/null 2>&1 && mkdir -p /mnt/bench &&
	mount -t ext2 "$dev" /mnt/bench; then
	cache_mib=256
else
	log "no scratch disk: anonymous pressure only"
fi
# The rest of the free memory goes to anonymous pages (movable, so the
# allocator also places them in the CMA area), rewritten every pass, less
# the CMA area: the benchmark fills its free pages with unevictable
# page-cache folios before every CMA allocation.
avail=$(read_counter /proc/meminfo MemAvailable)
anon_mib=$((avail / 1024 - cache_mib - cma_kb / 1024 - 80))
log "MemAvailable ${avail} kB; memhog -a ${anon_mib} -c ${cache_mib}"
if [ "$cache_mib" -gt 0 ]; then
	memhog -a "$anon_mib" -c "$cache_mib" -f /mnt/bench/memhog.dat -D -t 1800 &
else
	memhog -a "$anon_mib" -t 1800 &
fi
hog_pid=$!
# Wait until memhog has taken its memory (MemFree below the CMA area's
# size plus 1/8 of what was available); the benchmark then fills what is
# free in the CMA area itself before every CMA allocation and reports the
# share occupied.
if wait_for 240 sh -c "[ \$(awk '/MemFree/ {print \$2}' /proc/meminfo) -lt $((cma_kb + avail / 8)) ]"; then
	pressure="reached"
else
	pressure="NOT reached (memhog still allocating)"
fi
log "pressure $pressure: MemFree $(read_counter /proc/meminfo MemFree) kB, CmaFree $(read_counter /proc/meminfo CmaFree) kB"
echo "gcma: bench: pressure $pressure; MemFree $(read_counter /proc/meminfo MemFree) kB; CmaFree $(read_counter /proc/meminfo CmaFree) kB of $cma_kb kB; page cache $(read_counter /proc/meminfo Cached) kB" > /dev/kmsg

echo "$reps" > /sys/kernel/debug/gcma_bench
kill "$hog_pid"
wait "$hog_pid"
hog_rc=$?

dmesg | grep 'gcma: bench: ' | sed -E -e 's/^\[[ 0-9.]*\] //'
check bench_done expect_dmesg 'gcma: bench: done'
# memhog verifies every page it wrote (SIGTERM ends it after the current
# pass, with status 0); a migration that lost data would fail it.
check memhog_data_intact expect_eq "$hog_rc" 0
# A GCMA allocation cannot fail while the area has room.
check gcma_never_fails expect_dmesg 'gcma: bench: done: [0-9]+ CMA and 0 GCMA allocations failed'
check gcma_all_released expect_eq "$(read_counter /sys/kernel/mm/gcma/gcma0/primary_used_pages)" 0
# Every fill lent the whole area, and the synthetic entries are gone.
# Every CMA allocation started with the CMA area at least 90% in use.
check cma_filled expect_eq "$(dmesg | grep -E 'gcma: bench: alloc +[0-9]+ \|' | awk -F'|' '{split($NF, o, " "); if (o[1] < 90) bad++} END {print bad + 0}')" 0
check gcma_filled expect_dmesg 'gcma: bench: fill: [0-9]+ synthetic pages stored, [0-9]+ stores refused, 0 fills short'
check dmem_cleaned expect_eq "$(read_counter /sys/kernel/mm/gcma/dmem/swap/stored_pages)" 0
check no_splat no_splat
