# shellcheck shell=dash
# description: the RCX stress suite, run at boot with four vCPUs (two per node), passes: updaters of one node contend for its lock words
# duration: 25
# append: kunit.enable=1 kunit.filter_glob=rcx_stress* gcma=16M
# smp: 4
# timeout: 300

# The second KUnit pass of make test (tools/build/test.sh): the KUnit
# tier's other suites run in kunit_kmemleak, with two vCPUs, one per
# node, where no two updaters share a node's lock words.  As there, the
# KUnit tier judges the cases from this boot's log (kunit.py parse); this
# scenario checks that the suite ran and that no case failed, so that a
# failure shows in both tiers' reports.
check suite_ran expect_dmesg '# rcx_stress: pass:[1-9][0-9]* fail:'
check no_failed_case expect_no_dmesg '^(\[[ 0-9.]*\] )? *not ok '
check no_splat no_splat
