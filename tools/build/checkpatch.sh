#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Runs the kernel's scripts/checkpatch.pl on every patch of out/series.
# Errors fail the check; warnings and checks are printed for review.

set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
. "$repo/tools/build/env.sh"
shopt -s nullglob
patches=("$repo"/out/series/*.patch)
if [ ${#patches[@]} -eq 0 ]; then
	echo "checkpatch: no patches in out/series; run 'make patches'" >&2
	exit 1
fi
errors=0
warnings=0
for p in "${patches[@]}"; do
	out=$(cd "$RSMM_KSRC" && perl scripts/checkpatch.pl --no-tree --strict --terse \
		--ignore FILE_PATH_CHANGES,GIT_COMMIT_ID "$p" 2>&1)
	e=$(echo "$out" | grep -c ': ERROR:' || true)
	w=$(echo "$out" | grep -cE ': (WARNING|CHECK):' || true)
	errors=$((errors + e))
	warnings=$((warnings + w))
	printf 'checkpatch: %-60s %d error(s), %d warning(s)/check(s)\n' "$(basename "$p")" "$e" "$w"
	echo "$out" | grep -E ': (ERROR|WARNING|CHECK):' | sed 's/^/    /'
done
echo "checkpatch: ${#patches[@]} patches, $errors error(s), $warnings warning(s)/check(s)"
[ $errors -eq 0 ]
