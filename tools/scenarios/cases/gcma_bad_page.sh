# shellcheck shell=dash
# description: lent pages the page allocator's free steps find in a bad state are retired and counted in bad_pages, neither handed to an allocation nor kept lent, and the private field of one someone still references is left alone (the KUnit suite gcma_bad_page, run at boot, makes them so; the free steps' "Bad page state" reports are expected)
# duration: 30
# tcg: single
# append: kunit.enable=1 kunit.filter_glob=gcma_bad_page gcma_test.bad_pages gcma=16M
# allow-splat: BUG: Bad page state in process kunit_try_catch
# timeout: 300

# The case runs only when the command line asks for it
# (gcma_test.bad_pages): the free steps report each bad page with a
# splat, which fails the KUnit tier, so there it passes without doing
# anything.  Here the reports are allowed, and only the case's own.
G=/sys/kernel/mm/gcma/gcma0

check suite_ran expect_dmesg '^(\[[ 0-9.]*\] )?ok 1 gcma_bad_page'
check case_passed expect_dmesg '^(\[[ 0-9.]*\] )? *ok 1 bad_lent_pages'
check private_kept expect_dmesg '^(\[[ 0-9.]*\] )? *ok 2 bad_page_private_kept'
# bad_lent_pages: one report for the page an allocation discarded, one
# for the page DMEM gave back; bad_page_private_kept: one for the page
# the test holds a reference to.  Each found bad once, by one pass of the
# free steps.
check reported_thrice expect_eq "$(dmesg | grep -c 'BUG: Bad page state in process kunit_try_catch')" 3
check retired_logged expect_dmesg 'gcma: gcma0: page at pfn 0x[0-9a-f]+ is in a bad state: taken out of use'
check counter_shown expect_exists $G/bad_pages
# The case undid what it did: the pages are good and free again.
check counter_back expect_eq "$(read_counter $G/bad_pages)" 0
check area_whole expect_eq "$(read_counter $G/primary_used_pages)" 0
check none_lent expect_eq "$(read_counter $G/secondary_lent_pages)" 0
