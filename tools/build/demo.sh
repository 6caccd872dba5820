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
exit $rc
