# Kernel reports ("splats") that fail a test run, shared by the KUnit tier
# (tools/kunit/run.sh) and the scenario tier (tools/scenarios/run.py, and
# /scenarios/splat.re in the initramfs for lib.sh's no_splat).
#
# One extended regular expression per line, valid for Python's re and for
# grep -E (so no [[:classes:]]); a console line matching any of them is a
# splat.  Lines starting with '#' and empty lines are ignored.
#
# Generic reports: WARN(), BUG(), oops, panic
WARNING:
BUG:
Oops
Kernel panic
general protection fault
# Lockdep and RCU-lockdep
possible circular locking
inconsistent lock state
possible recursive locking
suspicious RCU usage
INFO: lockdep
# Memory debugging (KASAN, page state, kmemleak found leaks or gave up)
KASAN
UBSAN
Bad page state
Bad page map
Bad rss-counter
kmemleak: .*(suspected memory leak|[Ee]rror|[Cc]annot|pool empty|exceeded)
list_(add|del) corruption
pagealloc: (memory corruption|single bit error)
# Sleeping where one must not (DEBUG_ATOMIC_SLEEP; "BUG:" covers them too)
sleeping function called from invalid context
scheduling while atomic
# RCU stalls, hung tasks, lockups
detected stall
rcu: INFO:
RCU stall
INFO: task .* blocked for more than
blocked for more than [0-9]+ seconds
hung_task
soft lockup
hard LOCKUP
