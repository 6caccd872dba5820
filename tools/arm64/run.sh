#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The arm64 tier: builds a lean arm64 test kernel (allnoconfig plus
# tools/arm64/arm64.config: GCMA with its device-tree areas, the dma-buf
# heaps, KUnit, KASAN, lockdep, PROVE_RCU, DEBUG_VM) with LLVM in
# build/arm64, boots it on QEMU's virt machine (TCG, -cpu max) with a
# device tree that carries GCMA reserved-memory nodes and a device of the
# test driver (tools/arm64/gcma.dtsi), and runs the scenarios whose
# "# arch:" header names arm64 (tools/scenarios/run.py --arch arm64):
# gcma_of (the GCMA KUnit suites at boot, the device's DMA allocations
# from its area, refused nodes, a dma-buf heap of a device-tree area) and
# the DMEM smoke tests (swap, and ext2/ext4 page cache, every byte
# verified).  The KUnit cases of gcma_of's boot are then judged by
# kunit.py's parser (tools/kunit/run.sh --parse).  The build and the boots
# are timed separately.
#
# Usage: tools/arm64/run.sh [--build-only | --no-build] [--no-prepare]
#                           [run.py options]
#   --no-prepare  build build/linux as it is (make test prepared it)
# Prints "arm64: N passed, N failed" last; exit status non-zero on failure.

set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
. "$repo/tools/build/env.sh"

out="$RSMM_BUILD/arm64"
logs="$RSMM_BUILD/arm64-logs"
build=1
boot=1
prepare=1
extra=()
while [ $# -gt 0 ]; do
	case "$1" in
	--build-only) boot=0; shift ;;
	--no-build) build=0; shift ;;
	--no-prepare) prepare=0; shift ;;
	-h|--help) sed -n '4,/^$/p' "$0" | sed '$d'; exit 0 ;;
	*) extra+=("$1"); shift ;;
	esac
done

fail() {
	echo "arm64: $*" >&2
	echo "arm64: 0 passed, 1 failed"
	exit 1
}

if [ $build = 1 ]; then
	if [ $prepare = 1 ]; then
		python3 "$repo/tools/build/tree.py" prepare || fail "tree.py prepare failed"
	fi
	rm -f "$out/.rsmm-build-ok"
	mkdir -p "$out"
	start=$(date +%s)
	make=(make -s -C "$RSMM_KSRC" O="$out" ARCH=arm64 "${RSMM_MAKE_OPTS[@]}")
	# allnoconfig with the fragment: every option not named is off, so
	# the configuration is the fragment's and what it selects.
	"${make[@]}" KCONFIG_ALLCONFIG="$repo/tools/arm64/arm64.config" allnoconfig ||
		fail "configuration failed"
	missing=$(grep -E '^CONFIG_[A-Z0-9_]+=' "$repo/tools/arm64/arm64.config" |
		grep -vxF -f "$out/.config" || true)
	[ -z "$missing" ] || fail "options of tools/arm64/arm64.config not set (unmet dependencies?): $missing"
	if ! nice -n 10 "${make[@]}" -j"$(nproc)" Image >"$out/build.log" 2>&1; then
		tail -n 30 "$out/build.log" >&2
		fail "kernel build failed; see $out/build.log"
	fi
	touch "$out/.rsmm-build-ok"
	echo "arm64: build $(($(date +%s) - start)) s"
fi
[ $boot = 1 ] || exit 0
[ -f "$out/.rsmm-build-ok" ] || fail "no successful build in $out (run without --no-build)"

start=$(date +%s)
rm -f "$logs"/*.log
rc=0
python3 "$repo/tools/scenarios/run.py" --arch arm64 --kernel "$out/arch/arm64/boot/Image" \
	--scenario all --jobs auto --log-dir "$logs" "${extra[@]}" | tee "$logs.out" || rc=$?
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$logs.out" | tail -n 1)
passed=$(echo "$line" | sed -nE 's/^([0-9]+) passed.*/\1/p')
failed=$(echo "$line" | sed -nE 's/.* ([0-9]+) failed.*/\1/p')
passed=${passed:-0}
failed=${failed:-1}
[ "$rc" -eq 0 ] || [ "$failed" -gt 0 ] || failed=1
echo "arm64: boots $(($(date +%s) - start)) s"

# The KUnit cases of the gcma_of boot, by kunit.py's parser.
kunit_out=$("$repo/tools/kunit/run.sh" --parse "$logs/gcma_of.log" 2>&1)
echo "$kunit_out"
kline=$(echo "$kunit_out" | grep -E '^kunit: [0-9]+ passed, [0-9]+ failed' | tail -n 1)
kp=$(echo "$kline" | sed -nE 's/^kunit: ([0-9]+) passed.*/\1/p')
kf=$(echo "$kline" | sed -nE 's/.* ([0-9]+) failed.*/\1/p')
passed=$((passed + ${kp:-0}))
failed=$((failed + ${kf:-1}))
echo "arm64: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
