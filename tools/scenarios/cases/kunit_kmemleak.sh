# shellcheck shell=dash
# description: the KUnit suites, run at boot with kmemleak on, pass and leak nothing
# duration: 125
# append: kunit.enable=1 kmemleak=on gcma=16M gcma=8M:thp gcma.dma_cma=1
# mem: 2G
# timeout: 900

# The odd-based second area of the KUnit tier (gcma=1028K) is left out:
# its placement depends on the memory layout, which differs here; the
# gcma_cma case that needs it skips (area 1 is the THP area).
# The KUnit tier cannot look for leaks: its kernel halts right after the
# last suite, before kmemleak's first automatic scan (60 s after boot), and
# there is no user space to ask for one.  Here the same suites run at boot
# (built-in suites finish before /init starts) with kmemleak on, and then
# this scenario asks for a scan.  The KUnit tier judges the suites; this
# one only checks that they ran and passed, so a leak is not hidden by a
# failure elsewhere.
check suites_ran expect_dmesg '# [a-z0-9_]+: pass:[1-9][0-9]* fail:'
# A failed case prints what failed, so the report shows why, not only which.
no_failed_case() {
	if expect_no_dmesg '^(\[[ 0-9.]*\] )? *not ok ' >/dev/null; then
		return 0
	fi
	dmesg | grep -E -A 4 '(EXPECTATION|ASSERTION) FAILED' |
		head -n 40
	dmesg | grep -E '^(\[[ 0-9.]*\] )? *not ok '
	echo "a KUnit case failed"
	return 1
}
check no_failed_case no_failed_case
check kmemleak_on expect_exists /sys/kernel/debug/kmemleak

# kmemleak reports objects that have been unreferenced for at least 5 s;
# a leak shows as "kmemleak: N new suspected memory leaks" on the console
# (a splat) and as a record in /sys/kernel/debug/kmemleak.
sleep 6
kmemleak_scan() {
	echo scan >/sys/kernel/debug/kmemleak || return 1
	if [ -n "$(head -c 1 /sys/kernel/debug/kmemleak)" ]; then
		head -n 40 /sys/kernel/debug/kmemleak
		echo "kmemleak reports suspected leaks"
		return 1
	fi
	echo "no suspected leak"
}
check no_leak kmemleak_scan
check no_splat no_splat
