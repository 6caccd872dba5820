#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Host tier: cargo test over the tools/host workspace, where the shared
# modules of mm/*_rs build unchanged against a shim of the kernel crate.
# Tests run in the debug profile, whose overflow checks match the kernel's
# CONFIG_RUST_OVERFLOW_CHECKS; the loom models run in release mode with
# their own target directory (RUSTFLAGS differ), one model at a time;
# the self-tests of
# tools/build/tcg-jump-cache.py, tools/scenarios/run.py and
# tools/build/tree.py run last.
# The crates' build scripts take the kernel's page geometry and options
# from the configured kernel tree, $RSMM_KERNEL_BUILD or else build/kunit
# (tools/host/build-support/kernel_config.rs), and warn when they fall
# back to x86-64's defaults.
# Prints "host: N passed, N failed" last.

set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
. "$repo/tools/build/env.sh"
cd "$repo/tools/host" || exit 2

# The loom models run on one test thread: each model maps and unmaps
# its threads' stacks thousands of times, and with two models at once
# on two CPUs every unmap also flushes the other CPU's TLB.  bonsai-core's
# models took 29.2 s wall and 29.1 CPU-s on one thread, 43.9 s wall and
# 69.1 CPU-s (51.3 in the kernel) on two, with 11 TLB shootdowns
# against 856,137 (/proc/interrupts, 2026-11-27).
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --workspace 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR="$repo/tools/host/target/loom" \
	cargo test --release -p bonsai-core --test loom -- --test-threads=1 2>&1 | tee -a "$log"
rc_loom=${PIPESTATUS[0]}
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR="$repo/tools/host/target/loom" \
	cargo test --release -p rcx-core --test loom -- --test-threads=1 2>&1 | tee -a "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc_loom=1
# dmem-core's shared module is pub(crate): its loom model is in the library.
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR="$repo/tools/host/target/loom" \
	cargo test --release -p dmem-core --lib -- --test-threads=1 2>&1 | tee -a "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc_loom=1
[ "$rc" -ne 0 ] || rc=$rc_loom
# The jump-cache layout checker of the benchmarks (a cargo-style result line).
python3 "$repo/tools/build/tcg-jump-cache.py" --self-test 2>&1 | tee -a "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
# The scenario runner's --jobs choice and parallel scheduler (no boot).
python3 "$repo/tools/scenarios/run.py" --self-test 2>&1 | tee -a "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
# tree.py's pristine snapshot and the git record it makes when needed, on
# a small tree of its own.
python3 "$repo/tools/build/tree.py" self-test 2>&1 | tee -a "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
# "test result: ok. 12 passed; 0 failed; 0 ignored; ..." once per test binary.
passed=$(grep -oE '^test result: [a-zA-Z]+\. [0-9]+ passed' "$log" | grep -oE '[0-9]+ passed' |
	 grep -oE '[0-9]+' | paste -sd+ | bc)
failed=$(grep -oE '^test result: [a-zA-Z]+\. [0-9]+ passed; [0-9]+ failed' "$log" |
	 grep -oE '[0-9]+ failed' | grep -oE '[0-9]+' | paste -sd+ | bc)
passed=${passed:-0}
failed=${failed:-0}
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
	echo "host: cargo test failed to build or run (exit $rc)" >&2
	failed=1
fi
if [ "$passed" -eq 0 ] && [ "$failed" -eq 0 ]; then
	echo "host: no test ran" >&2
	failed=1
fi
echo "host: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
