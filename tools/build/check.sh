#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Static checks of our code: rustfmt, clippy, compile-fail and checkpatch.
#
# Usage: tools/build/check.sh rustfmt|clippy|compile-fail|checkpatch|dt|all
#        tools/build/check.sh clippy kunit|perf    (one kernel only)
#
# rustfmt   the kernel's 'make rustfmtcheck' on the prepared tree
# clippy    CLIPPY=1 builds of the KUnit and the performance kernels; any
#           warning in our code fails (warnings in upstream code are
#           listed, not counted).  Our Rust objects are always recompiled,
#           so a second run reports the same warnings as the first.
# compile-fail  tools/build/compile_fail.py: the snippets of
#           tools/build/compile_fail/ (misuses of the sleeping and RCU APIs:
#           a sleep inside a read-side section, a sleeping Drop handed to
#           RCU, ...) must fail to compile with the error each names, and the
#           control snippet must compile, against the KUnit build
# checkpatch  scripts/checkpatch.pl on the exported series: errors fail
# dt        the kernel's 'make dt_binding_check' on the GCMA binding (its
#           schema and example), then tools/build/dt_board_check.py: the
#           arm64 tier's device tree validated against it, each GCMA node
#           accepted or refused as the kernel does.  dt-schema comes from
#           PyPI, pinned to a release of 6.12's time (Debian's is older
#           than 6.12's minimum), in a virtualenv under build/.

set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
. "$repo/tools/build/env.sh"
what=${1:-all}
kernels=${2:-kunit perf}

# Our Rust files, as kernel-tree paths.
ours() {
	(cd "$repo" && find rust mm samples -name '*.rs' 2>/dev/null | sort)
}

rc=0
do_rustfmt() {
	python3 "$repo/tools/build/tree.py" prepare >/dev/null || return 1
	echo "check: rustfmtcheck"
	local out
	out=$(make -s -C "$RSMM_KSRC" O="$RSMM_BUILD/kunit" ARCH=x86_64 "${RSMM_MAKE_OPTS[@]}" \
		rustfmtcheck 2>&1)
	local st=$?
	if [ $st -ne 0 ]; then
		echo "$out" | head -n 60
		echo "check: rustfmt: differences found (run 'make -C build/linux O=../kunit LLVM=-16 rustfmt')" >&2
		return 1
	fi
	echo "check: rustfmt clean"
}

# One CLIPPY=1 build.  kbuild recompiles an object only when its source or
# its command line changed, so a second CLIPPY=1 build in a row would
# compile nothing and report nothing: first remove the objects clippy must
# look at (the kernel crate, which holds our rust/kernel/ modules, its
# doctests, and every Rust object under mm/ and samples/), so that every
# run sees every warning.  The C objects are left alone.
clippy_build() {
	local out=$1 log=$2 cmd
	while IFS= read -r cmd; do
		cmd=${cmd#./}
		rm -f "$out/$(dirname "$cmd")/$(basename "$cmd" .cmd | sed 's/^\.//')"
	done < <(cd "$out" && find mm samples -name '.*.o.cmd' -print0 2>/dev/null |
		xargs -0 -r grep -lE '(rustc|clippy-driver) ')
	rm -f "$out/rust/kernel.o" "$out/rust/doctests_kernel_generated.o"
	echo "check: CLIPPY=1 build of $(basename "$out")"
	# bzImage, not only vmlinux: the relinked vmlinux must stay the one
	# the bzImage was made of, or a profile of a boot (guest-profile.py
	# reads vmlinux's symbols) would name the wrong functions.
	make -C "$RSMM_KSRC" O="$out" ARCH=x86_64 "${RSMM_MAKE_OPTS[@]}" CLIPPY=1 \
		-j"$(nproc)" bzImage >"$log" 2>&1
}

do_clippy() {
	python3 "$repo/tools/build/tree.py" prepare >/dev/null || return 1
	# The KUnit kernel has the tests; the performance kernel has the samples.
	local log="$RSMM_BUILD/clippy.log" st=0 k
	: >"$log"
	for k in $kernels; do
		case "$k" in
		kunit) [ -f "$RSMM_BUILD/kunit/.config" ] || "$repo/tools/kunit/run.sh" --build-only || return 1 ;;
		perf) [ -f "$RSMM_BUILD/perf/.config" ] || "$repo/tools/build/perf-kernel.sh" >/dev/null || return 1 ;;
		*) echo "check: unknown kernel '$k' (kunit, perf)" >&2; return 1 ;;
		esac
		clippy_build "$RSMM_BUILD/$k" "$log.$k" || st=1
		cat "$log.$k" >>"$log"
	done
	# Warnings name their file on a "  --> path:line:col" line.
	local files hits=0
	files=$(ours | sed 's|^|/|')
	while read -r loc; do
		for f in $files; do
			case "$loc" in *"$f":*) echo "check: clippy: $loc"; hits=$((hits + 1)) ;; esac
		done
	done < <(grep -E '^ +--> ' "$log" | sed -E 's/^ +--> //' | sort -u)
	if [ $st -ne 0 ]; then
		grep -E '^(error|warning)' -A6 "$log" | head -n 60
		echo "check: clippy build failed; see $log" >&2
		return 1
	fi
	if [ $hits -ne 0 ]; then
		grep -E '^warning' -A8 "$log" | head -n 80
		echo "check: clippy: $hits warning(s) in our code; see $log" >&2
		return 1
	fi
	echo "check: clippy clean in our code ($(grep -c '^warning' "$log") warning line(s) elsewhere)"
}

do_compile_fail() {
	python3 "$repo/tools/build/tree.py" prepare >/dev/null || return 1
	# The kernel crate the snippets compile against must be the current one.
	"$repo/tools/kunit/run.sh" --build-only >"$RSMM_BUILD/compile-fail-build.log" 2>&1 || {
		tail -n 30 "$RSMM_BUILD/compile-fail-build.log"
		echo "check: compile-fail: the KUnit kernel does not build" >&2
		return 1
	}
	echo "check: compile-fail"
	python3 "$repo/tools/build/compile_fail.py" --build-dir "$RSMM_BUILD/kunit"
}

DTSCHEMA_VERSION=2024.11
YAMLLINT_VERSION=1.35.1
do_dt() {
	python3 "$repo/tools/build/tree.py" prepare >/dev/null || return 1
	local venv="$RSMM_BUILD/dtschema" out="$RSMM_BUILD/dt" log="$RSMM_BUILD/dt.log"
	if [ "$("$venv/bin/dt-validate" --version 2>/dev/null)" != "$DTSCHEMA_VERSION" ]; then
		echo "check: dt: installing dtschema $DTSCHEMA_VERSION and yamllint into $venv"
		rm -rf "$venv"
		if ! python3 -m venv "$venv" ||
			! "$venv/bin/pip" install -q "dtschema==$DTSCHEMA_VERSION" \
				"yamllint==$YAMLLINT_VERSION"; then
			echo "check: dt: cannot install dtschema $DTSCHEMA_VERSION from PyPI" >&2
			return 1
		fi
	fi
	echo "check: dt_binding_check of the GCMA binding"
	# Its own output directory: dt_binding_check writes the example DTBs
	# and processed-schema.json there, nothing else.
	if ! PATH="$venv/bin:$PATH" make -s -C "$RSMM_KSRC" O="$out" ARCH=arm64 \
		"${RSMM_MAKE_OPTS[@]}" dt_binding_check \
		DT_SCHEMA_FILES=reserved-memory/gcma-shared-dma-pool.yaml >"$log" 2>&1 ||
		grep -q . "$log"; then
		head -n 40 "$log"
		echo "check: dt: dt_binding_check reported the binding; see $log" >&2
		return 1
	fi
	python3 "$repo/tools/build/dt_board_check.py" --dt-validate "$venv/bin/dt-validate" \
		--schema "$out/Documentation/devicetree/bindings/processed-schema.json"
}

do_checkpatch() {
	python3 "$repo/tools/build/tree.py" export || return 1
	"$repo/tools/build/checkpatch.sh"
}

case "$what" in
rustfmt) do_rustfmt || rc=1 ;;
clippy) do_clippy || rc=1 ;;
compile-fail) do_compile_fail || rc=1 ;;
checkpatch) do_checkpatch || rc=1 ;;
dt) do_dt || rc=1 ;;
all)
	do_rustfmt || rc=1
	do_clippy || rc=1
	do_compile_fail || rc=1
	do_checkpatch || rc=1
	do_dt || rc=1
	;;
*) echo "check: unknown check '$what' (rustfmt, clippy, compile-fail, checkpatch, dt, all)" >&2; exit 2 ;;
esac
exit $rc
