#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make test: every tier, each timed.  A failing tier does not stop the
# later ones; the summary counts tests of all tiers and ends with one line
# "N passed, N failed".  Exit status is non-zero on any failure.

set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
. "$repo/tools/build/env.sh"
cd "$repo"
test_start=$(date +%s)

# tier NAME CMD...: runs one tier, its output on the terminal and in
# build/test-NAME.log, and records "PASSED FAILED SECONDS END" in
# build/test-NAME.result for the summary (END: when it ended, in seconds
# since the epoch).
tier() {
	local name=$1; shift
	local log="$RSMM_BUILD/test-$name.log" start end line p f
	mkdir -p "$RSMM_BUILD"
	rm -f "$RSMM_BUILD/test-$name.result"
	echo "=== $name: $*"
	start=$(date +%s)
	"$@" 2>&1 | tee "$log"
	local rc=${PIPESTATUS[0]}
	end=$(date +%s)
	line=$(grep -E "^($name: )?[0-9]+ passed, [0-9]+ failed" "$log" | tail -n 1)
	p=$(echo "$line" | sed -nE 's/^([a-z0-9]+: )?([0-9]+) passed.*/\2/p')
	f=$(echo "$line" | sed -nE 's/.* ([0-9]+) failed.*/\1/p')
	p=${p:-0}
	f=${f:-0}
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1
	fi
	echo "$p $f $((end - start)) $end" >"$RSMM_BUILD/test-$name.result"
}

# summary_line NAME: the tier's line of the summary; adds its counts to the
# totals.  A tier that recorded nothing counts as one failure.
total_pass=0
total_fail=0
summary_line() {
	local p=0 f=1 secs=0
	if [ -r "$RSMM_BUILD/test-$1.result" ]; then
		read -r p f secs _ <"$RSMM_BUILD/test-$1.result"
	fi
	total_pass=$((total_pass + p))
	total_fail=$((total_fail + f))
	printf '%-10s %4d passed %3d failed %5ds\n' "$1" "$p" "$f" "$secs"
}

# The scenario tier boots the kernel the KUnit tier built.  run.sh creates
# the stamp only once the build of this run has succeeded (it removes it
# first), so a failed build fails the scenario tier instead of letting it
# boot the bzImage of an earlier build.
scenarios() {
	if [ ! -f "$RSMM_BUILD/kunit/.rsmm-build-ok" ]; then
		echo "scenarios: the KUnit kernel was not built in this run; not booting an old bzImage" >&2
		echo "scenarios: 0 passed, 1 failed"
		return 1
	fi
	python3 tools/scenarios/run.py --kernel "$RSMM_BUILD/kunit/arch/x86/boot/bzImage" \
		--scenario all --jobs auto --log-dir "$RSMM_BUILD/scenario-logs"
}

# The order of the work on a 2-CPU host, cold (empty ccache), and the
# measurements behind it:
# - The kernel build is C-compile bound and keeps both CPUs busy (the
#   cold run's object timestamps show no serial Rust stretch).  Beside it
#   run only the tree's other users that the scenarios need first: the
#   initramfs images, as SCHED_IDLE (see below).
# - The host tier (about 124 CPU seconds cold, mostly cargo compiling)
#   runs once the kernel is built, at nice 19, beside the scenarios, and
#   before the arm64 build (see below).  The guests leave CPU time idle,
#   their vCPUs waiting on disks, timers and sleeps (cold13's scenario
#   tier: 1,273 CPU-s in 712 s, 1.79 of 2 CPUs), and a nice-19 compile
#   loop beside three scenarios did not slow them (213 s alone, 208 s
#   beside).  Beside the build, even as SCHED_IDLE, it took the build
#   from 339 s alone to 422 s (at nice 10, 436 s), and the build is what
#   the first boot waits for.  In two cold runs of this order (2026-11-27)
#   it ended 13 s and 27 s after the scenario tier.  Started after the
#   build, it also finds the configured tree whose constants its crates
#   check (tools/host/build-support/kernel_config.rs); started with the
#   build, it fell back to x86-64's defaults in every clean-clone run,
#   with a warning.
# - Once the kernel is built, the scenarios boot it, as many guests at
#   once as the host has CPUs (a TCG guest keeps about 1.1 of two host
#   CPUs busy).
# The KUnit suites boot as two of those scenarios: kunit_kmemleak runs
# every suite at boot with kmemleak on (and then scans for leaks), and
# kunit_rcx_smp4 the RCX stress suite again with four vCPUs.  The KUnit
# tier then judges the cases from those two boots' logs (run.sh --parse,
# kunit.py's parser, and any kernel report in them fails the tier too),
# instead of booting every suite a second time without kmemleak: the
# same cases and kernel, and the KUnit runner's arguments (see each
# scenario's header).  Its time is that of the parse; the boots count in
# the scenario tier's.
# The host tier's output is printed once it is done, not interleaved.
# Each scenario's report is printed whole when it ends.  The build's time
# is printed on a line of its own.
mkdir -p "$RSMM_BUILD"
# Where SCHED_IDLE is refused (a sandbox may deny sched_setscheduler()),
# chrt would run nothing: nice 19 is the nearest then.
idle=(chrt -i 0)
"${idle[@]}" true 2>/dev/null || idle=(nice -n 19)
rm -f "$RSMM_BUILD/kunit/.rsmm-build-ok"
echo "=== build: tools/kunit/run.sh --build-only"
build_start=$(date +%s)
build_rc=0
# The scenarios' initramfs images (busybox, our static programs and the
# kernel's mm selftests, compiled against the prepared tree) do not
# depend on the kernel: they are built beside the kernel build, not
# before the first boot.  So the tree is prepared first (run.sh then
# finds it up to date); a failure shows again in run.sh and run.py.
# They build as SCHED_IDLE: about 16 CPU seconds that must be done when
# the kernel is, not before.
initramfs_pid=
if python3 tools/build/tree.py prepare 2>&1 | tee "$RSMM_BUILD/test-build.log"; then
	"${idle[@]}" python3 tools/scenarios/run.py --initramfs-only --scenario all \
		>"$RSMM_BUILD/test-initramfs.log" 2>&1 &
	initramfs_pid=$!
fi
tools/kunit/run.sh --build-only 2>&1 | tee -a "$RSMM_BUILD/test-build.log" || build_rc=$?
build_end=$(date +%s)
build_secs=$((build_end - build_start))
# Beside the scenarios, at nice 19, run first the host tier and then the
# arm64 kernel build, one after the other: the host tier is one of the
# x86 tiers, and it needs the CPU time the guests leave idle more than
# the arm64 build does, whose boots come after the scenarios anyway.
# Started together, they shared that time, and in a cold run the host
# tier ended 99 s after the scenarios and the KUnit tier (2026-11-27).
# Built beside the x86 kernel, even at nice 19, the arm64 kernel held the
# x86 tiers back: with an empty ccache, the x86 build (kunit.py's) took
# 436 s with only the host tier and the initramfs beside it, and 524 and
# 532 s in make test with the arm64 build too; alone it takes 339 s.
# Both start once the initramfs is done: that build is SCHED_IDLE, below
# nice 19, and the scenarios need it first.
if [ -n "$initramfs_pid" ]; then
	wait "$initramfs_pid" || echo "build: the scenarios' initramfs did not build" \
		"(see $RSMM_BUILD/test-initramfs.log); the scenario tier tries again"
fi
beside_scenarios() {
	local rc=0
	tier host nice -n 19 tools/build/host-test.sh >"$RSMM_BUILD/test-host.out" 2>&1
	nice -n 19 tools/arm64/run.sh --build-only --no-prepare \
		>"$RSMM_BUILD/test-arm64-build.log" 2>&1 || rc=$?
	echo "$rc" >"$RSMM_BUILD/test-arm64-build.rc"
}
rm -f "$RSMM_BUILD/test-arm64-build.rc"
beside_scenarios &
beside_pid=$!
kunit_logs=("$RSMM_BUILD/scenario-logs/kunit_kmemleak.log"
	"$RSMM_BUILD/scenario-logs/kunit_rcx_smp4.log")
if [ "$build_rc" -eq 0 ]; then
	# Logs of an earlier run must not be judged as this one's.
	rm -f "${kunit_logs[@]}"
	tier scenarios scenarios
	tier kunit tools/kunit/run.sh --parse "${kunit_logs[@]}"
else
	# Neither tier has a kernel: each counts as one failure.
	echo "build: the KUnit kernel did not build (exit $build_rc); no KUnit run, no scenario"
	echo "0 1 0" >"$RSMM_BUILD/test-kunit.result"
	echo "0 1 0" >"$RSMM_BUILD/test-scenarios.result"
fi
wait "$beside_pid"
arm64_build_rc=$(cat "$RSMM_BUILD/test-arm64-build.rc" 2>/dev/null || echo 1)
# Its own time, which run.sh prints ("arm64: build N s"), not the wait.
arm64_build_secs=$(sed -nE 's/^arm64: build ([0-9]+) s$/\1/p' "$RSMM_BUILD/test-arm64-build.log")
cat "$RSMM_BUILD/test-arm64-build.log"
if [ "$arm64_build_rc" -eq 0 ]; then
	tier arm64 tools/arm64/run.sh --no-build
else
	echo "arm64: the kernel did not build (exit $arm64_build_rc); no arm64 boot"
	echo "0 1 0" >"$RSMM_BUILD/test-arm64.result"
fi
cat "$RSMM_BUILD/test-host.out"

echo
echo "=== summary"
printf '%-10s %28ds\n' build "$build_secs"
printf '%-10s %28ss\n' "arm64 bld" "${arm64_build_secs:-?}"
for name in host kunit scenarios arm64; do
	summary_line "$name"
done
# The x86 tiers (build, host, KUnit, scenarios) have a time budget of
# their own, apart from the arm64 tier's (README.md): when the last of
# them ended, counted from this script's start (make setup before it is
# not counted).
x86_end=$build_end
for name in host kunit scenarios; do
	end=
	[ -r "$RSMM_BUILD/test-$name.result" ] && read -r _ _ _ end <"$RSMM_BUILD/test-$name.result"
	[ -n "$end" ] && [ "$end" -gt "$x86_end" ] && x86_end=$end
done
printf '%-10s %28ds\n' "x86 done" "$((x86_end - test_start))"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
