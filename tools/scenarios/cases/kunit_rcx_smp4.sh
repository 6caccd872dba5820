# shellcheck shell=dash
# description: the RCX stress suite, run at boot with four vCPUs (two per node), passes: updaters of one node contend for its lock words
# duration: 25
# append: kunit.enable=1 kunit.filter_glob=rcx_stress* gcma=16M
# append: rcupdate.rcu_cpu_stall_timeout=21
# smp: 4
# mem: 2G
# timeout: 300

# The second KUnit pass of make test (tools/build/test.sh): the KUnit
# tier's other suites run in kunit_kmemleak, with two vCPUs, one per
# node, where no two updaters share a node's lock words.  As there, the
# KUnit tier judges the cases from this boot's log (kunit.py parse); this
# scenario checks that the suite ran and that no case failed, so that a
# failure shows in both tiers' reports.  The arguments are those of
# tools/kunit/run.sh's own four-vCPU pass (2 GiB, gcma=16M), with its
# RCU stall timeout (21 s, the kernel's default, where scenarios use 10 s
# for reports late in the run): four vCPUs on a loaded two-CPU host
# stretch the stress cases' busy loops.
check suite_ran expect_dmesg '# rcx_stress: pass:[1-9][0-9]* fail:'
check no_failed_case expect_no_dmesg '^(\[[ 0-9.]*\] )? *not ok '
check no_splat no_splat
