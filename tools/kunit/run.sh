#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Builds the test kernel and runs the KUnit suites under QEMU through the
# kernel's own tools/testing/kunit/kunit.py.
#
# Usage: tools/kunit/run.sh [--kunitconfig FILE] [--smp N] [--build-dir DIR]
#                           [--build-only | --no-build] [FILTER_GLOB]
#        tools/kunit/run.sh --parse LOG...
#   FILTER_GLOB   e.g. 'gcma*' or 'rcx_node_lock.*' (kunit.py syntax)
#   --build-dir   kernel output directory (default build/kunit)
#   --build-only  build the kernel, run nothing
#   --no-build    run the kernel a --build-only run of this tree built (no
#                 resync, no make); refused if that build did not succeed
#   --parse       boot nothing: judge the KUnit results in the console
#                 logs LOG... (kunit.py parse), as make test does with the
#                 scenario boots that ran the suites (kunit_kmemleak,
#                 kunit_rcx_smp4); a log without results counts as a failure
#
# The kernel tree (build/linux) is resynced from the repository first, so an
# edit is picked up and only what it affects is rebuilt.  Output goes to
# build/kunit; the parsed results end with kunit.py's summary, and a plain
# "N passed, N failed" line is printed last.  A run without FILTER_GLOB and
# with fewer than 4 CPUs adds a pass of rcx_stress* with 4 vCPUs (two per
# node), and the last line sums both passes.

set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
. "$repo/tools/build/env.sh"

kunitconfig="$repo/tools/kunit/rsmm.kunitconfig"
smp=2
build_only=0
no_build=0
out="$RSMM_BUILD/kunit"
args=()
parse=0
while [ $# -gt 0 ]; do
	case "$1" in
	--kunitconfig) kunitconfig=$(realpath "$2"); shift 2 ;;
	--smp) smp=$2; shift 2 ;;
	--build-only) build_only=1; shift ;;
	--no-build) no_build=1; shift ;;
	--build-dir) out=$(realpath -m "$2"); shift 2 ;;
	--parse) parse=1; shift ;;
	-h|--help) sed -n '4,/^$/p' "$0" | sed '$d'; exit 0 ;;
	-*) echo "kunit: unknown option $1" >&2; exit 2 ;;
	*) args+=("$1"); shift ;;
	esac
done
case "$smp" in
''|*[!0-9]*|0|1) echo "kunit: --smp needs a number >= 2 (two NUMA nodes need two CPUs)" >&2; exit 2 ;;
esac

# KUnit judges test cases only; a WARN, lockdep, KASAN or kmemleak report,
# a sleep in atomic context, an RCU stall or a hung task anywhere in the
# boot fails the run too.  The patterns are shared with the scenario tier.
splat_re="$repo/tools/build/splat.re"
splat_ignore="$repo/tools/build/splat-ignore.re"
check_splats() {
	local f=$1 hits
	[ -f "$f" ] || return 0
	hits=$(grep -aE -f <(grep -vE '^(#|$)' "$splat_re") "$f" |
		grep -avE -f <(grep -vE '^(#|$)' "$splat_ignore") | head -n 5)
	if [ -n "$hits" ]; then
		echo "kunit: kernel splat in $f:" >&2
		echo "$hits" | sed 's/^/  /' >&2
		return 1
	fi
}

# summary_of LOG: kunit.py's "Testing complete. Ran N tests: passed: P,
# failed: F, crashed: C, ..." line in LOG, or nothing.
summary_of() {
	grep -E '^\[[0-9:]+\] Testing complete\. Ran [0-9]+ tests' "$1" | tail -n 1 || true
}
passed_in() {
	echo "$1" | grep -oE 'passed: [0-9]+' | grep -oE '[0-9]+' || echo 0
}
failed_in() {
	echo "$1" | grep -oE '(failed|crashed): [0-9]+' | grep -oE '[0-9]+' | paste -sd+ | bc || echo 0
}

if [ $parse = 1 ]; then
	if [ ${#args[@]} -eq 0 ] || [ $build_only = 1 ] || [ $no_build = 1 ]; then
		echo "kunit: --parse takes console logs and nothing else" >&2
		exit 2
	fi
	passed=0
	failed=0
	for f in "${args[@]}"; do
		echo "=== kunit.py parse $f"
		parsed="${f%.log}.kunit"
		if [ ! -r "$f" ]; then
			echo "kunit: no log $f (did its scenario run?)" >&2
			failed=$((failed + 1))
			continue
		fi
		set +e
		python3 "$RSMM_KSRC/tools/testing/kunit/kunit.py" parse "$f" 2>&1 | tee "$parsed"
		rc=${PIPESTATUS[0]}
		set -e
		summary=$(summary_of "$parsed")
		if [ -z "$summary" ]; then
			echo "kunit: no test summary in $f" >&2
			failed=$((failed + 1))
			continue
		fi
		p=$(passed_in "$summary")
		f1=$(failed_in "$summary")
		[ -n "$f1" ] || f1=0
		if [ "$rc" -ne 0 ] && [ "$f1" -eq 0 ]; then
			f1=1
		fi
		# Any kernel report in the boot fails it too, as for a run.  The
		# scenario runner's own lines ("# qemu-system-x86_64 ...", with
		# the command line) start with "# ", which no report does.
		grep -av '^# ' "$f" >"$parsed.console"
		check_splats "$parsed.console" || f1=$((f1 + 1))
		passed=$((passed + ${p:-0}))
		failed=$((failed + f1))
	done
	echo "kunit: $passed passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit
fi

if [ $build_only = 1 ] && [ $no_build = 1 ]; then
	echo "kunit: --build-only and --no-build exclude each other" >&2
	exit 2
fi
if [ $no_build = 1 ] && [ ! -f "$out/.rsmm-build-ok" ]; then
	echo "kunit: --no-build: no successful build in $out; run with --build-only first" >&2
	echo "kunit: 0 passed, 1 failed"
	exit 1
fi
if [ $no_build = 0 ]; then
	# No build of this run has succeeded yet (see the build step below).
	rm -f "$out/.rsmm-build-ok"
	python3 "$repo/tools/build/tree.py" prepare
fi

# Two emulated NUMA nodes, CPUs split evenly between them.  Each node is
# its own socket: CPUs of one socket share a last-level cache, and the
# scheduler warns when such CPUs sit on different nodes.
case "$smp" in *[13579]) echo "kunit: --smp must be even (two nodes)" >&2; exit 2 ;; esac
qemu_for() {
	local n=$1 half=$(($1 / 2))
	echo "-smp $n,sockets=2,cores=$half,threads=1 -m 2048" \
		"-object memory-backend-ram,id=m0,size=1024M -numa node,nodeid=0,cpus=0-$((half - 1)),memdev=m0" \
		"-object memory-backend-ram,id=m1,size=1024M -numa node,nodeid=1,cpus=$half-$((n - 1)),memdev=m1"
}
qemu_args=$(qemu_for "$smp")

cd "$RSMM_KSRC"
mkdir -p "$out"
kunit=(python3 tools/testing/kunit/kunit.py)
common=(--arch=x86_64 --build_dir="$out" --kunitconfig="$kunitconfig")
for o in "${RSMM_MAKE_OPTS[@]}"; do common+=(--make_options "$o"); done
build=(build "${common[@]}" --jobs="$(nproc)")

if [ $build_only = 1 ]; then
	rm -f "$out/.rsmm-build-ok"
	"${kunit[@]}" "${build[@]}"
	python3 "$repo/tools/build/bzimage-fresh.py" "$out"
	touch "$out/.rsmm-build-ok"
	exit 0
fi

# The build of this run, separate from the boot so that a failed build is
# reported as such.  $out/.rsmm-build-ok exists only after a successful
# build of the current tree: tools/build/test.sh checks it before the
# scenario tier boots $out's bzImage, which must not be a stale one.
if [ $no_build = 0 ]; then
	if ! "${kunit[@]}" "${build[@]}" 2>&1 | tee "$out/kunit-build.log"; then
		echo "kunit: kernel build failed; see $out/kunit-build.log" >&2
		echo "kunit: 0 passed, 1 failed"
		exit 1
	fi
	# The bzImage must carry the kernel just built (ccache-cc).
	if ! python3 "$repo/tools/build/bzimage-fresh.py" "$out"; then
		echo "kunit: 0 passed, 1 failed"
		exit 1
	fi
	touch "$out/.rsmm-build-ok"
fi

log="$out/kunit-run.log"
set +e
# gcma=16M: the area the GCMA suites work on; gcma.dma_cma=1 makes it the
# default DMA CMA area, so gcma_cma's DMA cases run instead of skipping.
# gcma=1028K@0x20001000: a second area at an odd page frame number, for
# gcma_cma's alignment case (a fixed base: where memblock would put it
# depends on the kernel's other early allocations); nokaslr keeps the
# kernel image out of its way.
# gcma=8M:thp: a THP area of four PMD blocks for gcma_thp, which fills it.
# init_on_alloc=1: GCMA allocations must be zeroed as the page allocator's.
"${kunit[@]}" exec "${common[@]}" --qemu_args="$qemu_args" --timeout=1800 \
	--kernel_args="gcma=16M" --kernel_args="gcma=1028K@0x20001000" \
	--kernel_args="gcma=8M:thp" --kernel_args="gcma.dma_cma=1" --kernel_args="nokaslr" \
	--kernel_args="init_on_alloc=1" "${args[@]}" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
# kunit.py ends with "Testing complete. Ran N tests: passed: P, failed: F, ...".
summary=$(grep -E '^\[[0-9:]+\] Testing complete\. Ran [0-9]+ tests' "$log" | tail -n 1 || true)
passed=$(echo "$summary" | grep -oE 'passed: [0-9]+' | grep -oE '[0-9]+' || echo 0)
failed=$(echo "$summary" | grep -oE '(failed|crashed): [0-9]+' | grep -oE '[0-9]+' | paste -sd+ | bc || echo 0)
[ -n "$passed" ] || passed=0
[ -n "$failed" ] || failed=0
if [ -z "$summary" ]; then
	echo "kunit: no test summary (build failure or kernel crash); see $log" >&2
	failed=$((failed + 1))
fi
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
	failed=1
fi
check_splats "$out/test.log" || failed=$((failed + 1))

# Second pass of a full run: the RCX stress suite again with four vCPUs,
# two per node, so that updaters of one node contend for its lock words.
if [ ${#args[@]} -eq 0 ] && [ "$smp" -lt 4 ] && [ -n "$summary" ]; then
	log4="$out/kunit-run-smp4.log"
	set +e
	"${kunit[@]}" exec "${common[@]}" --qemu_args="$(qemu_for 4)" --timeout=1800 \
		--kernel_args="gcma=16M" 'rcx_stress*' 2>&1 | tee "$log4"
	rc4=${PIPESTATUS[0]}
	set -e
	s4=$(grep -E '^\[[0-9:]+\] Testing complete\. Ran [0-9]+ tests' "$log4" | tail -n 1 || true)
	p4=$(echo "$s4" | grep -oE 'passed: [0-9]+' | grep -oE '[0-9]+' || true)
	f4=$(echo "$s4" | grep -oE '(failed|crashed): [0-9]+' | grep -oE '[0-9]+' | paste -sd+ | bc || true)
	if [ -z "$s4" ] || { [ "$rc4" -ne 0 ] && [ "${f4:-0}" -eq 0 ]; }; then
		echo "kunit: the --smp 4 pass of rcx_stress failed; see $log4" >&2
		f4=$((${f4:-0} + 1))
	fi
	check_splats "$out/test.log" || f4=$((${f4:-0} + 1))
	passed=$((passed + ${p4:-0}))
	failed=$((failed + ${f4:-0}))
fi
echo "kunit: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
