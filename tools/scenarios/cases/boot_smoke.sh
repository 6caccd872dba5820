# shellcheck shell=dash
# description: boot sanity: vCPUs, NUMA nodes, mounts, memhog, no kernel splat
# duration: 30
#
# Expected values come from the runner via scenario.smp= / scenario.numa= /
# scenario.disks= on the kernel command line.

smp=$(cmdline_arg scenario.smp 1)
numa=$(cmdline_arg scenario.numa 1)
ndisks=$(cmdline_arg scenario.disks 0)

check cpus expect_eq "$(grep -c '^processor' /proc/cpuinfo)" "$smp"
check cpus_online expect_eq "$(count_list "$(cat /sys/devices/system/cpu/online)")" "$smp"
if [ -r /sys/devices/system/node/online ]; then
	check numa_nodes expect_eq "$(count_list "$(cat /sys/devices/system/node/online)")" "$numa"
else
	check numa_nodes expect_eq 1 "$numa"
fi
n=1
while [ "$n" -lt "$numa" ]; do
	check "node$n" expect_exists "/sys/devices/system/node/node$n"
	n=$((n + 1))
done
check proc_mounted expect_mounted /proc proc
check sysfs_mounted expect_mounted /sys sysfs
check debugfs_mounted expect_mounted /sys/kernel/debug debugfs
if [ "$ndisks" -gt 0 ]; then
	check disks expect_eq "$(disks | wc -l)" "$ndisks"
fi
check memhog memhog -a 32 -c 8
check no_splat no_splat
