# shellcheck shell=dash
# SPDX-License-Identifier: GPL-2.0
#
# Helpers for scenario scripts.  Sourced inside the guest (busybox ash) by
# /init before the scenario file itself; see README.md for the protocol.
#
# The init sets SCENARIO (the scenario name) and SCENARIO_FILE (its path).
#
# Protocol lines written to the console:
#   CHECK <scenario> <check> PASS [info]
#   CHECK <scenario> <check> FAIL [rc=N]: <reason>
#   | <detail line>                  (output of a failed check)
#   # <free text>                    (log)
#   SCENARIO <scenario> PASS
#   SCENARIO <scenario> FAIL: <reason>

SCENARIO=${SCENARIO:-unknown}
SCENARIO_FILE=${SCENARIO_FILE:-}
SCN_RESULTS=${SCN_RESULTS:-/tmp/scenario-results}
SCN_SPLAT_RE=${SCN_SPLAT_RE:-/scenarios/splat.re}
SCN_SPLAT_IGNORE_RE=${SCN_SPLAT_IGNORE_RE:-/scenarios/splat-ignore.re}
SCN_CHECKS=0
SCN_FAILED=0
SCN_FAILED_NAMES=
SCN_REASONS=
SCN_DETAIL_LINES=${SCN_DETAIL_LINES:-30}

mkdir -p "$SCN_RESULTS" 2>/dev/null

# log MSG...: free-text line, ignored by the runner.
log() {
	printf '# %s\n' "$*"
}

# Check names are single tokens.
_scn_token() {
	printf '%s' "$1" | tr -c 'A-Za-z0-9_.:+=-' '_'
}

# Print the last lines of a multi-line file as "| " detail lines.
_scn_detail() {
	[ "$(wc -l <"$1")" -gt 1 ] || return 0
	tail -n "$SCN_DETAIL_LINES" "$1" | sed 's/^/| /'
}

# check NAME CMD [ARGS...]: run CMD, report a CHECK line.  CMD's output is
# captured; on success its first line is appended as info, on failure its
# last lines are printed as detail.  Returns CMD's status.
check() {
	local name out rc first
	name=$(_scn_token "${1:-unnamed}")
	if [ $# -lt 2 ]; then
		scenario_fail "check $name: no command given"
		return 2
	fi
	shift
	out=/tmp/.scn-check.$$
	"$@" >"$out" 2>&1
	rc=$?
	SCN_CHECKS=$((SCN_CHECKS + 1))
	if [ "$rc" -eq 0 ]; then
		first=$(head -n 1 "$out" | cut -c1-200)
		if [ -n "$first" ]; then
			echo "CHECK $SCENARIO $name PASS $first"
		else
			echo "CHECK $SCENARIO $name PASS"
		fi
	else
		first=$(tail -n 1 "$out" | cut -c1-200)
		echo "CHECK $SCENARIO $name FAIL rc=$rc: ${first:-command failed: $*}"
		_scn_detail "$out"
		SCN_FAILED=$((SCN_FAILED + 1))
		SCN_FAILED_NAMES="$SCN_FAILED_NAMES $name"
	fi
	rm -f "$out"
	return "$rc"
}

# not CMD...: invert CMD's status (check NAME not CMD...).
not() {
	if "$@"; then
		echo "unexpectedly succeeded: $*"
		return 1
	fi
	return 0
}

# scenario_fail REASON: mark the scenario failed without a check.
scenario_fail() {
	log "FAIL: $*"
	if [ -n "$SCN_REASONS" ]; then
		SCN_REASONS="$SCN_REASONS; $*"
	else
		SCN_REASONS="$*"
	fi
}

# finish: print the SCENARIO result line (once).  Called by /init after the
# scenario file has been sourced; scenarios may call it earlier.
finish() {
	local reason
	[ -e "$SCN_RESULTS/$SCENARIO" ] && return 0
	reason=$SCN_REASONS
	if [ "$SCN_FAILED" -gt 0 ]; then
		reason="${reason:+$reason; }$SCN_FAILED of $SCN_CHECKS checks failed:$SCN_FAILED_NAMES"
	fi
	if [ -z "$reason" ] && [ "$SCN_CHECKS" -eq 0 ]; then
		reason="no checks were run"
	fi
	if [ -z "$reason" ]; then
		echo "SCENARIO $SCENARIO PASS"
		echo PASS >"$SCN_RESULTS/$SCENARIO"
	else
		echo "SCENARIO $SCENARIO FAIL: $reason"
		echo FAIL >"$SCN_RESULTS/$SCENARIO"
	fi
}

# cmdline_arg KEY [DEFAULT]: value of KEY=VALUE on /proc/cmdline (last one
# wins); DEFAULT (or nothing, status 1) if absent.
cmdline_arg() {
	local word val found
	found=1
	# shellcheck disable=SC2013 # words, not lines
	for word in $(cat /proc/cmdline); do
		case "$word" in
		"$1="*)
			val=${word#*=}
			found=0
			;;
		esac
	done
	if [ "$found" -eq 0 ]; then
		printf '%s\n' "$val"
		return 0
	fi
	if [ $# -ge 2 ]; then
		printf '%s\n' "$2"
		return 0
	fi
	return 1
}

# is_int VALUE: VALUE is a (possibly negative) decimal integer.
is_int() {
	case "$1" in
	'' | - | *[!0-9-]* | ?*-*) return 1 ;;
	esac
	return 0
}

# read_counter FILE [KEY]: print an integer counter.  Without KEY the file
# holds a single integer (e.g. /sys/.../nr_pages); with KEY it is a
# "KEY VALUE" or "KEY: VALUE [unit]" file (/proc/vmstat, /proc/meminfo).
read_counter() {
	local v
	if [ ! -r "$1" ]; then
		echo "read_counter: cannot read $1" >&2
		return 1
	fi
	if [ $# -ge 2 ]; then
		v=$(awk -v k="$2" '$1 == k || $1 == k":" { print $2; exit }' "$1")
	else
		v=$(head -n 1 "$1" | tr -d ' \t')
	fi
	if ! is_int "$v"; then
		echo "read_counter: $1${2:+ [$2]}: not an integer: '$v'" >&2
		return 1
	fi
	printf '%s\n' "$v"
}

# count_list LIST: number of entries in a cpulist/nodelist ("0-1,4").
count_list() {
	printf '%s\n' "$1" | awk -F, '
	{ n = 0
	  for (i = 1; i <= NF; i++) {
		if ($i == "") continue
		if (split($i, r, "-") == 2) n += r[2] - r[1] + 1; else n++
	  }
	  print n }'
}

# Numeric comparisons with a readable failure message.
_scn_cmp() {
	local op a b
	op=$1 a=$2 b=$3
	if ! is_int "$a" || ! is_int "$b"; then
		echo "not integers: '$a' $op '$b'"
		return 1
	fi
	case "$op" in
	-eq) [ "$a" -eq "$b" ] ;;
	-ne) [ "$a" -ne "$b" ] ;;
	-ge) [ "$a" -ge "$b" ] ;;
	-gt) [ "$a" -gt "$b" ] ;;
	-le) [ "$a" -le "$b" ] ;;
	-lt) [ "$a" -lt "$b" ] ;;
	*) false ;;
	esac || {
		echo "expected $a $op $b"
		return 1
	}
	echo "$a $op $b"
}
expect_eq() { _scn_cmp -eq "$1" "$2"; }
expect_ne() { _scn_cmp -ne "$1" "$2"; }
expect_ge() { _scn_cmp -ge "$1" "$2"; }
expect_gt() { _scn_cmp -gt "$1" "$2"; }
expect_le() { _scn_cmp -le "$1" "$2"; }
expect_lt() { _scn_cmp -lt "$1" "$2"; }

# expect_dmesg REGEX: some kernel log line matches REGEX (grep -E).
expect_dmesg() {
	if dmesg | grep -E -e "$1" | head -n 5 | grep .; then
		return 0
	fi
	echo "no dmesg line matches /$1/"
	return 1
}

# expect_no_dmesg REGEX: no kernel log line matches REGEX.
expect_no_dmesg() {
	local hits
	hits=$(dmesg | grep -E -e "$1" | head -n 20)
	if [ -n "$hits" ]; then
		printf '%s\n' "$hits"
		echo "dmesg has lines matching /$1/"
		return 1
	fi
	return 0
}

# expect_file_contains FILE REGEX: FILE exists and a line matches REGEX.
expect_file_contains() {
	if [ ! -r "$1" ]; then
		echo "cannot read $1"
		return 1
	fi
	if grep -E -e "$2" "$1" | head -n 5 | grep .; then
		return 0
	fi
	echo "$1: no line matches /$2/"
	return 1
}

# expect_exists PATH / expect_missing PATH
expect_exists() {
	if [ -e "$1" ]; then
		echo "$1 exists"
		return 0
	fi
	echo "$1 does not exist"
	return 1
}
expect_missing() {
	if [ -e "$1" ]; then
		echo "$1 exists but should not"
		return 1
	fi
	return 0
}

# expect_mounted MOUNTPOINT [FSTYPE]
expect_mounted() {
	if awk -v m="$1" -v t="${2:-}" '$2 == m && (t == "" || $3 == t) { f = 1 } END { exit !f }' /proc/mounts; then
		echo "$1 mounted"
		return 0
	fi
	echo "$1 is not mounted${2:+ as $2}"
	return 1
}

# wait_for SECONDS CMD...: poll CMD once a second until it succeeds.  The
# arguments are expanded once, by the caller's shell: to wait for a value
# that changes, poll it with value_is, not with test "$(...)".
wait_for() {
	local t
	t=$1
	shift
	while ! "$@" >/dev/null 2>&1; do
		if [ "$t" -le 0 ]; then
			echo "timed out waiting for: $*"
			return 1
		fi
		sleep 1
		t=$((t - 1))
	done
	return 0
}

# value_is 'CMD' OP N: the output of the shell command CMD, run now,
# compares to N with test's OP (-eq, -ge, -le, ...), e.g.
# wait_for 5 value_is "read_counter $G/primary_used_pages" -eq 0.
value_is() {
	local v
	v=$(eval "$1") || return 1
	[ -n "$v" ] && [ "$v" "$2" "$3" ]
}

# Splat lines the scenario header allows ("# allow-splat: REGEX").
_scn_allowed_re() {
	[ -n "$SCENARIO_FILE" ] && [ -r "$SCENARIO_FILE" ] || return 0
	sed -n 's/^#[[:space:]]*allow-splat[[:space:]]*:[[:space:]]*//p' "$SCENARIO_FILE"
}

# no_splat: the kernel log has no WARNING/BUG/Oops/lockdep/KASAN/... lines
# (same patterns as the host runner, minus "# allow-splat:" ones).
no_splat() {
	local allow hits
	allow=/tmp/.scn-allow.$$
	{
		_scn_allowed_re
		cat "$SCN_SPLAT_IGNORE_RE"
	} >"$allow"
	hits=$(dmesg | grep -E -f "$SCN_SPLAT_RE" | grep -v -E -f "$allow" | head -n 20)
	rm -f "$allow"
	if [ -n "$hits" ]; then
		printf '%s\n' "$hits"
		echo "kernel log has splat lines"
		return 1
	fi
	echo "no kernel splat in dmesg"
	return 0
}

# disks: list the virtio-blk scratch disks (/dev/vda ...), one per line.
disks() {
	local d
	for d in /sys/block/vd*; do
		[ -e "$d" ] || continue
		echo "/dev/${d##*/}"
	done
}

# --- The kernel's selftests (scenarios with "# selftests: mm") ---

# selftest_summary OUTFILE RC: one line "pass=P fail=F skip=S" for the
# output of a selftest that exited with status RC.  kselftest programs
# print "# Totals: pass:P fail:F ... skip:S error:E"; uffd-unit-tests
# prints "Userfaults unit tests: pass=P, skip=S, fail=F (total=T)";
# khugepaged prints "Run test: ..." and ends each step with OK,
# Fail..., Skip or Timeout (in colour), and a test fails with any failed
# step.  Any other output (uffd-stress, or a crash or bail-out before
# the totals) is one test, judged by RC: 0 passed, 4 (KSFT_SKIP)
# skipped, anything else failed.
selftest_summary() {
	tr -d '\033' <"$1" | sed 's/\[[0-9;]*m//g' | awk -v rc="$2" '
	/^# Totals: / {
		for (i = 3; i <= NF; i++) { split($i, kv, ":"); t[kv[1]] = kv[2] }
		printf "pass=%d fail=%d skip=%d\n", t["pass"] + t["xfail"], t["fail"] + t["error"] + t["xpass"], t["skip"]
		found = 1
		exit
	}
	/^Userfaults unit tests: pass=[0-9]+, skip=[0-9]+, fail=[0-9]+/ {
		gsub(/[=,]/, " ")
		printf "pass=%d fail=%d skip=%d\n", $5, $9, $7
		found = 1
		exit
	}
	/^Run test: / { n++; st[n] = "pass"; next }
	n && / (Fail(: .*)?|Timeout)$/ { st[n] = "fail"; next }
	n && / Skip$/ && st[n] != "fail" { st[n] = "skip" }
	END {
		if (found) exit
		if (!n) {
			printf "pass=%d fail=%d skip=%d\n", rc == 0, rc != 0 && rc != 4, rc == 4
			exit
		}
		for (i = 1; i <= n; i++) c[st[i]]++
		# A test that died mid-way (exit status, no "Restore" line)
		# has left its last step unreported.
		if (rc != 0 && !c["fail"]) c["fail"] = 1
		printf "pass=%d fail=%d skip=%d\n", c["pass"], c["fail"], c["skip"]
	}'
}

# selftest_skips OUTFILE: why tests skipped, "count reason" per line.
selftest_skips() {
	tr -d '\033' <"$1" | sed 's/\[[0-9;]*m//g' |
		sed -n 's/^ok [0-9]* # SKIP //p; s/^\(.*\) Skip$/\1/p; s/.*skipped \[reason: \(.*\)\]$/\1/p' |
		sort | uniq -c
}

# proc_tree PID: PID and every process descended from it, one per line
# (parents found through field 4 of /proc/N/stat).
proc_tree() {
	cat /proc/[0-9]*/stat 2>/dev/null | awk -v root="$1" '
	{ sub(/ \(.*\) /, " comm "); parent[$1] = $4 }
	END {
		for (p in parent)
			for (q = p; q != "" && q > 1; q = parent[q])
				if (q == root) { print p; break }
	}'
}

# dump_tasks PID...: state, wait channel and kernel stack of every
# thread of the processes PID..., at most 300 lines: what a hung test
# waits for.
dump_tasks() {
	local p t
	for p in "$@"; do
		for t in /proc/"$p"/task/*; do
			[ -r "$t/stat" ] || continue
			echo "-- pid $p tid ${t##*/} $(cat "$t/comm" 2>/dev/null):" \
				"$(sed -n 's/^State:[[:space:]]*//p' "$t/status" 2>/dev/null)," \
				"wchan $(cat "$t/wchan" 2>/dev/null)"
			sed 's/^/   /' "$t/stack" 2>/dev/null
		done
	done | head -n 300
}

# run_watched SECONDS CMD...: run CMD in /tmp (output as this function's),
# its exit status as the function's.  A CMD still running after SECONDS
# is killed with its descendants (status 137), after dump_tasks has
# printed what each of them was doing (also on the console): a hung
# selftest then fails its check with the kernel's side of the hang in
# the log, instead of holding the scenario until its timeout.  The
# watchdog is a second job, so that CMD's end is seen at once.
run_watched() {
	local secs pid dog rc
	secs=$1
	shift
	(cd /tmp && exec "$@") &
	pid=$!
	(
		sleep "$secs"
		kill -0 "$pid" 2>/dev/null || exit 0
		echo "run_watched: $* still running after $secs s; its tasks:"
		# shellcheck disable=SC2046 # a list of pids
		dump_tasks $(proc_tree "$pid") | tee /dev/console
		# shellcheck disable=SC2046
		kill -KILL $(proc_tree "$pid") 2>/dev/null
	) >&2 &
	dog=$!
	wait "$pid"
	rc=$?
	# shellcheck disable=SC2046 # the watchdog and its sleep
	kill $(proc_tree "$dog") "$dog" 2>/dev/null
	wait "$dog" 2>/dev/null
	return $rc
}

# selftest_run DIR TAG SECONDS CMD...: run one selftest in /tmp, killed
# after SECONDS; its output goes to DIR/TAG.out and "pass=P fail=F
# skip=S rc=R" to DIR/TAG.sum.  Prints that summary, the time taken and
# the command; fails on a failed case or an exit status other than 0 or
# 4 (KSFT_SKIP), printing the failed cases and the end of the output.
selftest_run() {
	local dir tag secs t0 rc sum
	dir=$1 tag=$2 secs=$3
	shift 3
	mkdir -p "$dir"
	t0=$(date +%s)
	run_watched "$secs" "$@" >"$dir/$tag.out" 2>&1
	rc=$?
	sum="$(selftest_summary "$dir/$tag.out" "$rc") rc=$rc"
	echo "$sum" >"$dir/$tag.sum"
	echo "$sum ($(($(date +%s) - t0)) s): $*"
	case "$sum" in
	*" fail=0 "*"rc=0" | *" fail=0 "*"rc=4") return 0 ;;
	esac
	[ "$rc" -eq 137 ] && echo "killed after $secs s"
	# Progress lines ending in a carriage return split, colours removed.
	tr -d '\033' <"$dir/$tag.out" | tr '\r' '\n' | sed 's/\[[0-9;]*m//g' >"$dir/$tag.txt"
	grep -E '^not ok|Fail|failed|Timeout|Bail out' "$dir/$tag.txt" | tail -n 10
	echo "-- end of output:"
	tail -n 12 "$dir/$tag.txt" | cut -c1-160
	echo "$tag failed: $sum"
	return 1
}

# selftest_not_clean DIR LINES [KNOWN]: the lines of LINES ("tag:command",
# one test per line) whose run that selftest_run kept in DIR failed or
# skipped a case, passed none, exited non-zero, or left no summary.
# Those are the runs a second run in another setting can tell something
# about: a run that passed every case (one at least) and skipped none
# cannot do better elsewhere.  (A clean run is not compared with
# anything, so a change in its number of cases goes unseen.)
# KNOWN lists skips the guest explains, as lines "tag:count reason"
# (selftest_skips' lines): a run whose skips are exactly TAG's lines of
# KNOWN, in reason and number, counts as clean too (selftest_skips_known).
# Each scenario says where its lines come from.
selftest_not_clean() {
	local line
	while IFS= read -r line; do
		[ -n "$line" ] || continue
		case "$(cat "$1/${line%%:*}.sum" 2>/dev/null)" in
		"pass="[1-9]*" fail=0 skip=0 rc=0") ;;
		"pass="[1-9]*" fail=0 skip="[1-9]*" rc=0")
			selftest_skips_known "$1" "${line%%:*}" "$3" ||
				printf '%s\n' "$line"
			;;
		*) printf '%s\n' "$line" ;;
		esac
	done <<EOF
$2
EOF
}

# selftest_skips_known DIR TAG KNOWN: whether the cases TAG's run in DIR
# skipped are exactly those KNOWN's lines "TAG:count reason" account
# for: the same reasons, each as often, and no skip without a reason
# (the counts add up to the summary's).  A skip of these is the guest's
# doing (a kernel option or CPU feature it lacks), the same in every
# setting a scenario compares, so a second run of a test whose only
# skips they are would prove nothing its first run does not; one more,
# or one fewer, and the test runs again.
selftest_skips_known() {
	local got want n
	want=$(printf '%s\n' "$3" | awk -v t="$2:" 'index($0, t) == 1 { print substr($0, length(t) + 1) }' | sort)
	[ -n "$want" ] || return 1
	got=$(selftest_skips "$1/$2.out" | sed 's/^ *//' | sort)
	[ "$got" = "$want" ] || return 1
	n=$(printf '%s\n' "$got" | awk '{ n += $1 } END { print n + 0 }')
	case "$(cat "$1/$2.sum" 2>/dev/null)" in
	*" skip=$n rc="*) return 0 ;;
	esac
	return 1
}

# selftest_tags_except LINES EXCEPT: the tags of the lines of LINES
# that are not lines of EXCEPT, on one line.
selftest_tags_except() {
	local line
	while IFS= read -r line; do
		case "
$2
" in
		*"
$line
"*) ;;
		*) printf '%s ' "${line%%:*}" ;;
		esac
	done <<EOF
$1
EOF
}

# selftest_compare DIR1 DIR2 LINES: a check "same_TAG" for each line
# of LINES ("tag:command"): its runs in DIR1 and DIR2 counted the same
# (selftest_same).
selftest_compare() {
	local line
	while IFS= read -r line; do
		[ -n "$line" ] || continue
		check "same_${line%%:*}" selftest_same "$1" "$2" "${line%%:*}"
	done <<EOF
$3
EOF
}

# selftest_catches_difference DIR TAG: a check that the comparison can
# fail: a copy of TAG's summary in DIR with another pass count must not
# compare equal to it.
selftest_catches_difference() {
	mkdir -p "$1.fake"
	sed -E 's/pass=([0-9]+)/pass=\10/' "$1/$2.sum" >"$1.fake/$2.sum"
	check catches_difference not selftest_same "$1" "$1.fake" "$2"
}

# selftest_catches_unknown_skip DIR TAG KNOWN: checks that a run of TAG
# with one skip more than KNOWN accounts for is not taken as clean: a copy
# of TAG's run in DIR with one more skipped case, of a reason KNOWN does
# not list, must run again.  The run itself, skips and all, must be known.
selftest_catches_unknown_skip() {
	mkdir -p "$1.skip"
	cp "$1/$2.out" "$1.skip/$2.out"
	echo "ok 999 # SKIP a reason no list has" >>"$1.skip/$2.out"
	awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^skip=/) $i = "skip=" substr($i, 6) + 1; print }' \
		"$1/$2.sum" >"$1.skip/$2.sum"
	check skips_known selftest_skips_known "$1" "$2" "$3"
	check catches_unknown_skip not selftest_skips_known "$1.skip" "$2" "$3"
}

# selftest_same DIR1 DIR2 TAG: the runs of TAG that selftest_run kept in
# DIR1 and DIR2 counted the same passes, failures and skips, and exited
# the same.
selftest_same() {
	local a b
	a=$(cat "$1/$3.sum" 2>/dev/null)
	b=$(cat "$2/$3.sum" 2>/dev/null)
	if [ -z "$a" ] || [ "$a" != "$b" ]; then
		echo "${1##*/}: ${a:-no result}"
		echo "${2##*/}: ${b:-no result}"
		echo "$3: the runs differ"
		return 1
	fi
	echo "$a in both runs"
}

# --- Guaranteed THP (gcma_thp_* scenarios) ---

# unusable_index [ORDER]: the unusable free space index at ORDER (default 9)
# over every zone of /proc/buddyinfo, in thousandths: the share of free
# memory that is not in free blocks of ORDER or more.
unusable_index() {
	awk -v o="${1:-9}" '$3 == "zone" {
		m = 1
		for (i = 5; i <= NF; i++) {
			f += $i * m
			if (i - 5 >= o) b += $i * m
			m *= 2
		}
	} END { if (f == 0) print 1000; else printf "%d\n", (f - b) * 1000 / f }' /proc/buddyinfo
}

# gcma_area_range NAME: "FIRST-END" page frame numbers (decimal, END
# excluded) of a GCMA area, from its boot message.
gcma_area_range() {
	local line pages base
	line=$(dmesg | grep -E "gcma: $1: [0-9]+ pages from pfn 0x[0-9a-f]+" | tail -n 1)
	pages=$(printf '%s\n' "$line" | sed -E 's/.*: ([0-9]+) pages from pfn.*/\1/')
	base=$(printf '%s\n' "$line" | sed -E 's/.*pages from pfn (0x[0-9a-f]+).*/\1/')
	is_int "$pages" || return 1
	echo "$((base))-$((base + pages))"
}

# cma_loop DIR SIZE...: allocates and frees SIZE pages, each size in turn,
# through CMA's debugfs files in DIR (/sys/kernel/debug/cma/<area>) until
# /tmp/stop exists; then writes "ALLOCATIONS FAILURES" to /tmp/cma_loop.out.
# Run it in the background; a GCMA area allocated this way discards the
# pages it lent to DMEM.
cma_loop() {
	local dir n fail size
	dir=$1
	shift
	n=0
	fail=0
	while [ ! -e /tmp/stop ]; do
		for size in "$@"; do
			if echo "$size" > "$dir/alloc"; then
				echo "$size" > "$dir/free"
			else
				fail=$((fail + 1))
			fi
			n=$((n + 1))
		done
	done
	echo "$n $fail" > /tmp/cma_loop.out
}

# reclaim_until_stored CGROUP MIN: write CGROUP's memory.reclaim until
# DMEM's file client holds at least MIN pages, at most five times (a write
# gives up with EAGAIN when a round reclaims too little); prints how many
# writes it made.
reclaim_until_stored() {
	local i
	i=0
	while [ $i -lt 5 ] &&
		[ "$(read_counter /sys/kernel/mm/gcma/dmem/file/stored_pages)" -lt "$2" ]; do
		echo 1G > "$1/memory.reclaim" 2>/dev/null
		i=$((i + 1))
	done
	echo $i
}

# kv KEY LINE...: the value of KEY=VALUE in a line of key=value words.
kv() {
	local key
	key=$1
	shift
	printf '%s\n' "$*" | tr ' ' '\n' | sed -n "s/^$key=//p" | head -n 1
}

# thp_wait_pause FILE NAME PID [SECONDS]: wait until a "thp_fault ... -w
# FILE -o ...,pause:NAME" is paused at NAME (prints its pid: a fork child
# pauses under its own); fails if PID exits first or after SECONDS (120).
thp_wait_pause() {
	local t
	t=$((${4:-120} * 10))
	while ! grep -q "^$2 " "$1" 2>/dev/null; do
		if ! kill -0 "$3" 2>/dev/null; then
			echo "thp_fault exited before pausing at $2"
			return 1
		fi
		if [ "$t" -le 0 ]; then
			echo "thp_fault did not pause at $2"
			return 1
		fi
		sleep 0.1
		t=$((t - 1))
	done
	awk '{ print $2 }' "$1"
}

# --- Bonsai VMA index (bonsai_vma_* scenarios) ---

BONSAI_VMA_SYS=/sys/kernel/mm/bonsai_vma
BONSAI_VMA_DBG=/sys/kernel/debug/bonsai_vma
BONSAI_VMA_COUNTERS='lookups hits misses retries fallback_noindex fallback_retries
index_created index_dropped index_alloc_failed indexes vmas nodes
crosscheck_checked crosscheck_diffs crosscheck_unverified'
# Set by bonsai_vma_files: 1 when the kernel has the index's files.
BONSAI_VMA=0

# bonsai_vma_files: the kernel has CONFIG_BONSAI_VMA's sysfs switches and
# debugfs counters (sets BONSAI_VMA=1).  Without them it fails, unless
# the command line has vma_scenarios.noindex=1: then it passes saying
# "no index in this kernel" and BONSAI_VMA stays 0 (the scenarios run
# their workloads without the index checks, to develop them on a kernel
# that has no index yet).
bonsai_vma_files() {
	local missing f
	missing=
	for f in enabled crosscheck; do
		[ -w "$BONSAI_VMA_SYS/$f" ] || missing="$missing $BONSAI_VMA_SYS/$f"
	done
	# shellcheck disable=SC2086 # a list of words
	for f in $BONSAI_VMA_COUNTERS; do
		[ -r "$BONSAI_VMA_DBG/$f" ] || missing="$missing $BONSAI_VMA_DBG/$f"
	done
	if [ -z "$missing" ]; then
		BONSAI_VMA=1
		echo "index files present: enabled=$(cat $BONSAI_VMA_SYS/enabled) crosscheck=$(cat $BONSAI_VMA_SYS/crosscheck)"
		return 0
	fi
	if [ "$(cmdline_arg vma_scenarios.noindex 0)" = 1 ]; then
		echo "no index in this kernel (vma_scenarios.noindex=1): index checks skipped; missing:$missing" | cut -c1-300
		return 0
	fi
	echo "missing:$missing" | cut -c1-400
	echo "no Bonsai VMA index in this kernel (CONFIG_BONSAI_VMA=n?); vma_scenarios.noindex=1 runs the workloads without it"
	return 1
}

# bonsai_vma_counter NAME: one counter's value.
bonsai_vma_counter() {
	read_counter "$BONSAI_VMA_DBG/$1"
}

# bonsai_vma_counters: every counter as "name=value" on one line, read
# by one process: a cat per counter would fault, and count, between two
# counters (hits read after lookups came out larger).
bonsai_vma_counters() {
	# shellcheck disable=SC2086 # a list of words
	(cd "$BONSAI_VMA_DBG" &&
		awk 'FNR == 1 { printf "%s=%s ", FILENAME, $1 } END { print "" }' $BONSAI_VMA_COUNTERS)
}

# bonsai_vma_delta BEFORE AFTER: "name=after-before" for the counters
# that changed between two bonsai_vma_counters lines.
bonsai_vma_delta() {
	printf '%s\n%s\n' "$1" "$2" | awk '
	NR == 1 { for (i = 1; i <= NF; i++) { split($i, kv, "="); b[kv[1]] = kv[2] } }
	NR == 2 { for (i = 1; i <= NF; i++) { split($i, kv, "=")
		if (kv[2] != b[kv[1]]) printf "%s=+%d ", kv[1], kv[2] - b[kv[1]] } }
	END { print "" }'
}

# bonsai_vma_set FILE VALUE: write VALUE (0 or 1) to a switch and read it
# back.
bonsai_vma_set() {
	if ! echo "$2" >"$BONSAI_VMA_SYS/$1"; then
		echo "cannot write $2 to $BONSAI_VMA_SYS/$1"
		return 1
	fi
	expect_eq "$(cat "$BONSAI_VMA_SYS/$1")" "$2"
}

# RCXVM (mm/rcx_rs/rcxvm.c): the fast-path switch and the counters.
RCXVM_SYS=/sys/kernel/mm/rcxvm
RCXVM_DBG=/sys/kernel/debug/rcxvm

# rcxvm_counters: every RCXVM counter as "name=value" on one line, read
# by one process (see bonsai_vma_counters).
rcxvm_counters() {
	(cd "$RCXVM_DBG" &&
		awk 'FNR == 1 { printf "%s=%s ", FILENAME, $1 } END { print "" }' *)
}

# rcxvm_set VALUE: the fast path on (1) or off (0), read back.
rcxvm_set() {
	if ! echo "$1" >"$RCXVM_SYS/enabled"; then
		echo "cannot write $1 to $RCXVM_SYS/enabled"
		return 1
	fi
	expect_eq "$(cat "$RCXVM_SYS/enabled")" "$1"
}
