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
# areas, memhog filling memory); RSMM_DEMO_GCMA_REPS=N shortens it.
python3 "$repo/tools/scenarios/run.py" --kernel "$kernel" --scenario gcma_bench \
	--append "gcma_bench.reps=${RSMM_DEMO_GCMA_REPS:-30}" --log-dir "$logs" || rc=$?
echo
echo "=== subsystem report"
grep -a '^REPORT ' "$logs/demo.log" | sed 's/^REPORT //' || true
echo
echo "GCMA against CMA, allocate+release latency under memory pressure (gcma_bench):"
grep -a 'gcma: bench: ' "$logs/gcma_bench.log" | grep -av '^ *CHECK' |
	sed -E -e 's/^.*gcma: bench: /  /' | awk '!seen[$0]++' || true
exit $rc
