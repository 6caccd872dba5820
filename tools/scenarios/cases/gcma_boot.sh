# shellcheck shell=dash
# description: gcma=64M reserves area gcma0 at boot
# append: gcma=64M

check area_reserved expect_dmesg 'gcma: area gcma0 reserved: 64 MiB at 0x'
check area_taken_over expect_dmesg 'gcma: gcma0: 16384 pages from pfn 0x[0-9a-f]+, node [0-9]+, 16384 free'
check allocator_ready expect_dmesg 'gcma: 1 area\(s\) ready'
check no_gcma_errors expect_no_dmesg 'gcma: .*(invalid|fail|error)'
if [ -e /sys/kernel/mm/gcma ]; then
	check sysfs_listable ls -l /sys/kernel/mm/gcma
else
	log "/sys/kernel/mm/gcma not present (not required yet)"
fi
check no_splat no_splat
