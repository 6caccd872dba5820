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
perf="${RSMM_PERF_OUT:-$RSMM_BUILD/perf}"
logs="$RSMM_BUILD/demo-logs"
rc=0
python3 "$repo/tools/scenarios/run.py" --kernel "$perf/arch/x86/boot/bzImage" \
	--scenario demo --smp 4 --numa 2 --log-dir "$logs" || rc=$?
echo
echo "=== subsystem report"
grep -a '^REPORT ' "$logs/demo.log" | sed 's/^REPORT //' || true
exit $rc
