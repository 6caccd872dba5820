#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Builds the performance kernel (tools/configs/perf.config, no debug
# options) in build/perf.  Every option the fragment asks for must survive
# olddefconfig; one that does not (an unmet dependency) is an error.
# RSMM_PERF_OUT overrides the output directory.

set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
. "$repo/tools/build/env.sh"

frag="$repo/tools/configs/perf.config"
out=$(realpath -m "${RSMM_PERF_OUT:-$RSMM_BUILD/perf}")
python3 "$repo/tools/build/tree.py" prepare
mkdir -p "$out"

# Regenerate the configuration only when the fragment changed, so that an
# unchanged configuration does not force a rebuild.
stamp="$out/.rsmm-fragment"
if ! cmp -s "$frag" "$stamp" || [ ! -f "$out/.config" ]; then
	grep -E '^CONFIG_' "$frag" > "$out/.config"
	make -s -C "$RSMM_KSRC" O="$out" ARCH=x86_64 "${RSMM_MAKE_OPTS[@]}" olddefconfig
	missing=$(grep -E '^CONFIG_' "$frag" | while read -r opt; do
		grep -qxF "$opt" "$out/.config" || echo "$opt"
	done)
	if [ -n "$missing" ]; then
		echo "perf-kernel: options lost to unmet dependencies:" $missing >&2
		rm -f "$stamp"
		exit 1
	fi
	cp "$frag" "$stamp"
fi
make -s -C "$RSMM_KSRC" O="$out" ARCH=x86_64 "${RSMM_MAKE_OPTS[@]}" -j"$(nproc)" bzImage
python3 "$RSMM_REPO/tools/build/bzimage-fresh.py" "$out"
echo "perf-kernel: $out/arch/x86/boot/bzImage"
