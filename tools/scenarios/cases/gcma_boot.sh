# shellcheck shell=dash
# description: gcma=64M reserves area gcma0 at boot
# append: gcma=64M

check area_reserved expect_dmesg 'gcma: area gcma0 reserved'
check no_gcma_errors expect_no_dmesg 'gcma: .*(invalid|fail|error)'
if [ -e /sys/kernel/mm/gcma ]; then
	check sysfs_listable ls -l /sys/kernel/mm/gcma
else
	log "/sys/kernel/mm/gcma not present (not required yet)"
fi
check no_splat no_splat
