#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make demo: build the performance kernel, boot it in QEMU with a GCMA area,
# two emulated NUMA nodes and four vCPUs, and print what the subsystems
# report (and, as they land, the benchmark tables).

set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
. "$repo/tools/build/env.sh"

"$repo/tools/build/perf-kernel.sh"
perf=$(realpath -m "${RSMM_PERF_OUT:-$RSMM_BUILD/perf}")
logs="$RSMM_BUILD/demo-logs"
rc=0
kernel="$perf/arch/x86/boot/bzImage"
# Every boot runs without KASLR: a path's speed under TCG depends on where
# its code sits (QEMU's jump cache is indexed by virtual address, and a
# random base moves some hot branch targets onto others' entries), so the
# figures would change from boot to boot, and tcg-jump-cache.py, which
# reads vmlinux's link addresses, would describe none of them.
nokaslr="nokaslr"
# The first boot prints the Bonsai and RCX benchmarks; the others measure
# GCMA, DMEM and THP, and skip them (minutes of boot time under TCG).
quiet="$nokaslr rcx_bench.run=0 bonsai_bench.run=0"
python3 "$repo/tools/scenarios/run.py" --kernel "$kernel" \
	--scenario demo --smp 4 --numa 2 --append "$nokaslr" --log-dir "$logs" || rc=$?
# GCMA against CMA under memory pressure: a boot of its own (two 256 MiB
# areas, memhog filling memory, the GCMA area lent to DMEM before every
# GCMA allocation); RSMM_DEMO_GCMA_REPS=N (runs per size) shortens it.
python3 "$repo/tools/scenarios/run.py" --kernel "$kernel" --scenario gcma_bench \
	--append "$quiet" --append "gcma_bench.reps=${RSMM_DEMO_GCMA_REPS:-100}" --log-dir "$logs" || rc=$?
echo
echo "=== subsystem report"
grep -a '^REPORT ' "$logs/demo.log" | sed 's/^REPORT //' || true
# Under TCG a benchmark path whose hot branch targets share an entry of
# QEMU's jump cache runs slower for that reason alone; say which do in
# this build, next to the figures they affect.
echo
echo "RCX benchmark paths, conflicts in QEMU's jump cache in this build (tcg-jump-cache.py):"
"$repo/tools/build/tcg-jump-cache.py" "$perf/vmlinux" | sed 's/^/  /' || true
echo
echo "GCMA against CMA, allocation and release latency under memory pressure,"
echo "gcma0 lent to DMEM before each GCMA allocation (gcma_bench):"
grep -a 'gcma: bench: ' "$logs/gcma_bench.log" | grep -av -e '^ *CHECK' -e 'bench: cdf ' |
	sed -E -e 's/^.*gcma: bench: /  /' | awk '!seen[$0]++' || true
cdf="$logs/gcma_bench_cdf.svg"
if python3 "$repo/tools/build/plot_cdf.py" "$logs/gcma_bench.log" "$cdf" >/dev/null; then
	echo
	echo "GCMA and CMA allocation latency CDFs per size: $cdf"
fi

# The camera case from userspace (issue 26; thesis figures 2.6 and 2.7):
# 8 buffers of 12 MiB allocated and freed again and again through the
# GCMA area's dma-buf heap and the CMA heap of an equal area, alternately,
# beside a page-cache and anonymous workload; RSMM_DEMO_CAMERA_ROUNDS=N
# (default 20) rounds of each.
python3 "$repo/tools/scenarios/run.py" --kernel "$kernel" --scenario camera_bench \
	--append "$quiet" --append "camera_bench.rounds=${RSMM_DEMO_CAMERA_ROUNDS:-20}" \
	--log-dir "$logs/camera" || rc=$?
echo
echo "Camera buffers (8 x 12 MiB) from dma-buf heaps beside a page-cache workload (camera_bench):"
grep -a -h -o 'CAMERA-SUM .*' "$logs/camera/camera_bench.log" | awk '
	function v(key) { return match($0, "[ ]" key "=[-0-9.]+") ? substr($0, RSTART + length(key) + 2, RLENGTH - length(key) - 2) : "?" }
	{ h = substr($2, 6); n[h] = v("n"); f[h] = v("fail"); me[h] = v("mean_us"); md[h] = v("median_us")
	  p[h] = v("p99_us"); mx[h] = v("max_us"); bg[h] = v("bg_mib_s")
	  sh[h] = (h == "gcma") ? v("lent_permille_min") : v("occupied_permille_min") }
	END {
		printf "  %-5s %5s %5s %10s %10s %10s %10s %13s %13s\n", "heap", "n", "fail", "mean ms", "median ms", "p99 ms", "max ms", "area in use", "bg MiB/s"
		for (i = 1; i <= 2; i++) {
			h = i == 1 ? "gcma" : "cma"
			printf "  %-5s %5s %5s %10.2f %10.2f %10.2f %10.2f %12.1f%% %13s\n", h, n[h], f[h], me[h] / 1000, md[h] / 1000, p[h] / 1000, mx[h] / 1000, sh[h] / 10, bg[h]
		}
		if (p["gcma"] > 0)
			printf "  p99 CMA/GCMA %.1fx (goal >= 10x, GCMA area >= 90%% lent: least %.1f%%)\n", p["cma"] / p["gcma"], sh["gcma"] / 10
		print "  area in use: GCMA lent to DMEM (least share at a round start); CMA occupied by other pages"
	}' || true
cam_cdf="$logs/camera_cdf.svg"
if python3 "$repo/tools/build/plot_cdf.py" "$logs/camera/camera_bench.log" "$cam_cdf" \
	"Camera buffer (12 MiB) allocation latency CDF from dma-buf heaps: CMA (red) vs GCMA (blue, area lent to DMEM)" >/dev/null; then
	echo "  CDFs: $cam_cdf"
fi

# What a reserved area is worth (DMEM): the same file re-read and swapping
# workloads with a 128 MiB area that sits idle, a CMA area (its pages lent
# to the buddy allocator as movable memory), and a GCMA area whose DMEM
# clients are on.  Disk reads come from the block devices' statistics.
declare -A dmem_cfg=([idle]="gcma=128M gcma.dmem_file=0 gcma.dmem_swap=0"
		     [cma]="cma=128M" [gcma]="gcma=128M")
for cfg in idle cma gcma; do
	python3 "$repo/tools/scenarios/run.py" --kernel "$kernel" --scenario dmem_bench \
		--append "$quiet" --append "${dmem_cfg[$cfg]} dmem_bench.config=$cfg" \
		--log-dir "$logs/dmem-$cfg" || rc=$?
done
echo
echo "What the area is worth: MiB read from disk, same workloads, 128 MiB area (dmem_bench):"
for cfg in idle cma gcma; do
	grep -a -h -o 'DMEM-BENCH .*' "$logs/dmem-$cfg/dmem_bench.log" || true
done | awk '
	function v(line, key) { return match(line, key "=[0-9]+") ? substr(line, RSTART + length(key) + 1, RLENGTH - length(key) - 1) : "?" }
	function ratio(a, b) { return (a == 0 && b == 0) ? "equal" : (b > 0 ? sprintf("%.2f", a / b) : "-") }
	{ match($0, /config=[a-z]+/); c = substr($0, RSTART + 7, RLENGTH - 7); m = v($0, "mib")
	  if (!(m in seen)) { seen[m] = 1; order[++n] = m }
	  fr[c, m] = v($0, "reread_mib"); sw[c, m] = v($0, "swap_read_mib") }
	END {
		printf "  %-36s %7s %7s %7s %10s %9s\n", "workload (working set)", "idle", "CMA", "GCMA", "GCMA/idle", "GCMA/CMA"
		for (i = 1; i <= n; i++) {
			m = order[i]
			printf "  %-36s %7s %7s %7s %10s %9s\n", "file, 2 re-reads (" m " MiB)", fr["idle", m], fr["cma", m], fr["gcma", m], ratio(fr["gcma", m], fr["idle", m]), ratio(fr["gcma", m], fr["cma", m])
			printf "  %-36s %7s %7s %7s %10s %9s\n", "anon, 3 passes (" m " MiB)", sw["idle", m], sw["cma", m], sw["gcma", m], ratio(sw["gcma", m], sw["idle", m]), ratio(sw["gcma", m], sw["cma", m])
		}
		print "  goal: GCMA/idle <= 0.50 and GCMA/CMA <= 1.10 for both workloads"
	}'
# Guaranteed THP (thesis section 2.5, table 2.4): 1 GiB faulted and randomly
# accessed with a THP-only area in the three modes, without and with
# fragmentation; one boot.  RSMM_DEMO_THP_REPS=N boots it N times (the
# table shows the median of the runs' figures).
thp_reps=${RSMM_DEMO_THP_REPS:-1}
for ((i = 1; i <= thp_reps; i++)); do
	python3 "$repo/tools/scenarios/run.py" --kernel "$kernel" --scenario thp_bench \
		--append "$quiet" --log-dir "$logs/thp-$i" || rc=$?
done
echo
echo "Guaranteed THP: 1 GiB of anonymous memory, THP enabled=always, 1100 MiB THP-only area (thp_bench, $thp_reps boot(s)):"
for ((i = 1; i <= thp_reps; i++)); do
	grep -a -h -o 'THP-BENCH .*' "$logs/thp-$i/thp_bench.log" || true
done | awk '
	function v(line, key) { return match(line, "[ ]" key "=[-0-9]+") ? substr(line, RSTART + length(key) + 2, RLENGTH - length(key) - 2) : "" }
	function median(c, k,    n, i, j, t, a) {
		n = cnt[c]
		for (i = 1; i <= n; i++) a[i] = val[c, k, i]
		for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
		return n ? a[int((n + 1) / 2)] : "?"
	}
	{
		match($0, /config=[A-Za-z.]+/); c = substr($0, RSTART + 7, RLENGTH - 7)
		if (!(c in cnt)) order[++nc] = c
		n = ++cnt[c]
		split("u9 coverage_permille thp_fault_alloc thp_fault_fallback gcma_fault_alloc fault_mean_ns fault_p99_ns rand_ms", keys, " ")
		for (k in keys) val[c, keys[k], n] = v($0, keys[k])
	}
	END {
		printf "  %-10s %6s %9s %10s %9s %9s %12s %11s %9s\n", "config", "U9", "coverage", "thp_alloc", "fallback", "gcma_thp", "fault mean", "fault p99", "random"
		for (i = 1; i <= nc; i++) {
			c = order[i]
			printf "  %-10s %6.3f %8.1f%% %10s %9s %9s %9.0f us %8.0f us %6s ms\n", c,
				median(c, "u9") / 1000, median(c, "coverage_permille") / 10,
				median(c, "thp_fault_alloc"), median(c, "thp_fault_fallback"),
				median(c, "gcma_fault_alloc"), median(c, "fault_mean_ns") / 1000,
				median(c, "fault_p99_ns") / 1000, median(c, "rand_ms")
		}
		print "  Thp.bd = mode never (buddy only), Thp.bc = fallback (buddy, then GCMA), Thp.cma = always (GCMA first); .f = fragmented"
		print "  (no free 2 MiB block, U9 = unusable free space index at order 9).  coverage = AnonHugePages/Rss of the workload;"
		print "  fault = fault and first write of one 2 MiB region; random = 3 passes of 16M random 8-byte accesses (median)."
		print "  TCG does not model TLB reach: no conclusion is drawn from the random-access times."
	}'

# The Bonsai VMA index against the maple tree (issue 27): page faults per
# second with 1, 2 and 4 threads in address spaces padded with 10, 1,000
# and 10,000 VMAs, without and with a thread mapping and unmapping (the
# paper's microbenchmark through real faults), and mmap/munmap/mprotect per
# second; both configurations in the same boot, alternating, each run in a
# fresh process.  RSMM_DEMO_VMA_ROUNDS=N (default 5) and RSMM_DEMO_VMA_MS=N
# (length of one cell, default 500) shorten it.  On a loaded host two runs
# of the same configuration can differ by 2x with several threads;
# RSMM_DEMO_VMA_ICOUNT=1 runs QEMU with -icount (the guest's clock counts
# instructions), whose figures do not depend on the host's load but do not
# grow with the threads.
vma_args=(--append "bonsai_vma_bench.rounds=${RSMM_DEMO_VMA_ROUNDS:-5}"
	  --append "bonsai_vma_bench.ms=${RSMM_DEMO_VMA_MS:-500}")
if [ "${RSMM_DEMO_VMA_ICOUNT:-0}" = 1 ]; then
	vma_args+=(--append "bonsai_vma_bench.icount=1"
		   --qemu-arg=-icount --qemu-arg=shift=3,sleep=off)
fi
python3 "$repo/tools/scenarios/run.py" --kernel "$kernel" --scenario bonsai_vma_bench \
	--append "$quiet" "${vma_args[@]}" --log-dir "$logs/vma" || rc=$?
echo
echo "Bonsai VMA index against the maple tree, page faults and VMA operations (bonsai_vma_bench):"
grep -a '^VMA-BENCH' "$logs/vma/bonsai_vma_bench.log" | sed -E 's/^VMA-BENCH ?/  /' || true
echo "  goals (issue 27): page faults with the index >= 1.0x the maple tree in every cell, >= 1.1x"
echo "  with mapping churn; mmap, munmap and mprotect with the index >= 0.9x."

# RCXVM (issue 28): mprotect() of whole VMAs under the mmap read lock,
# 1, 2 and 4 threads toggling their own VMAs, without and with faulting
# threads, the fast path off and on alternately in the same boot.
# RSMM_DEMO_RCXVM_ROUNDS=N (default 5) and RSMM_DEMO_RCXVM_MS=N (length
# of one measurement, default 500) shorten it.
python3 "$repo/tools/scenarios/run.py" --kernel "$kernel" --scenario rcxvm_bench \
	--append "$quiet" --append "rcxvm_bench.rounds=${RSMM_DEMO_RCXVM_ROUNDS:-5}" \
	--append "rcxvm_bench.ms=${RSMM_DEMO_RCXVM_MS:-500}" --log-dir "$logs/rcxvm" || rc=$?
echo
echo "RCXVM, mprotect() of whole VMAs under the mmap read lock (rcxvm_bench):"
grep -a '^RCXVM-BENCH' "$logs/rcxvm/rcxvm_bench.log" | sed -E 's/^RCXVM-BENCH ?/  /' || true
echo "  goals (issue 28): rcxvm/stock >= 1.5x with 2 threads, >= 1.8x with 4, >= 0.95x with 1;"
echo "  4 vCPUs on the host's cores under TCG cap what parallel calls can gain."
echo
echo "RCXVM on the thesis's application workloads, ebizzy-like and Metis-like (rcxvm_workloads):"
grep -a '^RCXVM-WORK' "$logs/rcxvm/rcxvm_bench.log" | sed -E 's/^RCXVM-WORK ?/  /' || true
echo "  glibc calls mprotect() only while it grows thread heaps and stacks (a part of a"
echo "  mapping: the warm-up lines' fallbacks), so in steady state there is nothing to speed up."

# The area map's search against first-fit bitmap scans: a host benchmark
# (tools/host/crates/gcma-core), the allocator's own work without the
# kernel around it, so that its figures are free of QEMU's noise.
echo
echo "GCMA area map against first-fit bitmap scans, host (gcma-bench, best of 3 rounds):"
if ! (cd "$repo/tools/host" && cargo run -q --release -p gcma-core --bin gcma-bench) 2>&1 |
	sed 's/^/  /'; then
	echo "  gcma-bench failed"
	rc=1
fi
exit $rc
