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
python3 "$repo/tools/scenarios/run.py" --kernel "$kernel" \
	--scenario demo --smp 4 --numa 2 --log-dir "$logs" || rc=$?
# GCMA against CMA under memory pressure: a boot of its own (two 256 MiB
# areas, memhog filling memory, the GCMA area lent to DMEM before every
# GCMA allocation); RSMM_DEMO_GCMA_REPS=N (runs per size) shortens it.
python3 "$repo/tools/scenarios/run.py" --kernel "$kernel" --scenario gcma_bench \
	--append "gcma_bench.reps=${RSMM_DEMO_GCMA_REPS:-100}" --log-dir "$logs" || rc=$?
echo
echo "=== subsystem report"
grep -a '^REPORT ' "$logs/demo.log" | sed 's/^REPORT //' || true
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

# What a reserved area is worth (DMEM): the same file re-read and swapping
# workloads with a 128 MiB area that sits idle, a CMA area (its pages lent
# to the buddy allocator as movable memory), and a GCMA area whose DMEM
# clients are on.  Disk reads come from the block devices' statistics.
declare -A dmem_cfg=([idle]="gcma=128M gcma.dmem_file=0 gcma.dmem_swap=0"
		     [cma]="cma=128M" [gcma]="gcma=128M")
for cfg in idle cma gcma; do
	python3 "$repo/tools/scenarios/run.py" --kernel "$kernel" --scenario dmem_bench \
		--append "${dmem_cfg[$cfg]} dmem_bench.config=$cfg" \
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
exit $rc
