#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Writes the rust-project.json of the KUnit kernel for rust-analyzer: the
# kernel's own `make rust-analyzer` (scripts/generate_rust_analyzer.py,
# patched to find the crates of mm/) on the configured build/kunit, then
# tools/build/rust_analyzer_check.py, which fails unless every Rust crate
# that build compiles under mm/ and samples/ is listed once with its root,
# the kernel's cfgs and the kernel crate as a dependency.  The file is
# build/kunit/rust-project.json, linked from build/linux, where an editor
# opening the kernel tree looks for it.
#
# Usage: tools/build/rust-analyzer.sh [--build-dir DIR]   (default build/kunit)

set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
. "$repo/tools/build/env.sh"

out="$RSMM_BUILD/kunit"
case "${1:-}" in
--build-dir) out=$(realpath -m "$2") ;;
"") ;;
*) echo "rust-analyzer: unknown argument $1" >&2; exit 2 ;;
esac

python3 "$repo/tools/build/tree.py" prepare
# The generator reads the kernel's cfgs (include/generated/rustc_cfg) and
# points rust-analyzer at the macros crate the build made: it needs a
# configured and built tree.
if [ ! -f "$out/include/generated/rustc_cfg" ] || [ ! -f "$out/rust/libmacros.so" ]; then
	echo "rust-analyzer: $out is not a built kernel tree; run tools/kunit/run.sh --build-only" >&2
	exit 1
fi
make -s -C "$RSMM_KSRC" O="$out" ARCH=x86_64 "${RSMM_MAKE_OPTS[@]}" rust-analyzer
python3 "$repo/tools/build/rust_analyzer_check.py" "$out/rust-project.json" "$RSMM_KSRC" "$out"
ln -sfn "$out/rust-project.json" "$RSMM_KSRC/rust-project.json"
echo "rust-analyzer: $out/rust-project.json (linked from $RSMM_KSRC)"
