# shellcheck shell=dash
# description: the KUnit suites, run at boot with kmemleak on, pass and leak nothing
# duration: 170
# append: kunit.enable=1 kmemleak=on gcma=16M gcma=1028K@0x20001000 gcma=8M:thp gcma.dma_cma=1
# append: nokaslr init_on_alloc=1
# mem: 2G
# timeout: 900

# The arguments are the KUnit runner's (tools/kunit/run.sh: the areas,
# the odd-based one at a fixed base, nokaslr, init_on_alloc=1), and
# make test's KUnit tier judges the cases from this boot's log
# (run.sh --parse, kunit.py's parser) instead of booting every suite
# again without kmemleak.  kmemleak needs user space: a kernel that only
# runs KUnit halts right after the last suite, before kmemleak's first
# automatic scan (60 s after boot), so the suites run at boot here
# (built-in suites finish before /init starts) and this scenario then
# asks for a scan.  It also checks that the suites ran and passed, so
# that a failure shows in the scenario tier's report too.
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
