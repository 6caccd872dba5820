# shellcheck shell=dash
# description: the DMEM boot switches: a valid value switches its client off at boot, a malformed one is refused with its reason and changes nothing
# duration: 24
# append: gcma=16M gcma.dmem_swap=off gcma.dmem_file=0x1 gcma.dmem_file=yes-
# Both malformed values would be taken by kstrtobool() (as off and on).

F=/sys/kernel/mm/gcma/dmem/file
S=/sys/kernel/mm/gcma/dmem/swap

check swap_off_at_boot expect_eq "$(cat $S/enabled)" 0
check file_default_kept expect_eq "$(cat $F/enabled)" 1
check refused_hex expect_dmesg 'gcma: gcma.dmem_file=0x1: not a boolean .*; client stays on'
check refused_suffix expect_dmesg 'gcma: gcma.dmem_file=yes-: not a boolean .*; client stays on'
check boot_line expect_dmesg 'gcma: dmem: [0-9]+ pages in 1 area\(s\); file on, swap off'
# Off at boot can be switched on at run time, and off again.
echo on > $S/enabled
check switched_on expect_eq "$(cat $S/enabled)" 1
echo n > $S/enabled
check switched_off expect_eq "$(cat $S/enabled)" 0
check no_splat no_splat
