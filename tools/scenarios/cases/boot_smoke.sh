# shellcheck shell=dash
# description: boot sanity: vCPUs, NUMA nodes, mounts, memhog; gcma=64M reserves area gcma0 at boot and the Rust allocator takes it over; the fragmentation file's format; no kernel splat
# duration: 30
# append: gcma=64M
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

# The area of gcma=64M.
check area_reserved expect_dmesg 'gcma: area gcma0 reserved: 64 MiB at 0x'
check area_taken_over expect_dmesg 'gcma: gcma0: 16384 pages from pfn 0x[0-9a-f]+, node [0-9]+, 16384 free'
check allocator_ready expect_dmesg 'gcma: 1 area\(s\) ready'
check no_gcma_errors expect_no_dmesg 'gcma: .*(invalid|fail|error)'
check area_in_sysfs expect_exists /sys/kernel/mm/gcma/gcma0/primary_used_pages

# /sys/kernel/debug/gcma/fragmentation: one line per populated zone, with
# exactly these keys in this order (the demo parses them).
frag=/sys/kernel/debug/gcma/fragmentation
frag_format() {
	awk -v want="node zone free_pages unusable_9 extfrag_9 movable_blocks polluted_blocks polluted_permille unmovable_in_movable reserved_in_movable unusable" '
	BEGIN { nk = split(want, keys, " ") }
	/^#/ { next }
	{
		lines++
		if (NF != nk) { print "line " NR ": " NF " fields: " $0; bad = 1; next }
		for (i = 1; i <= NF; i++) {
			eq = index($i, "=")
			k = substr($i, 1, eq - 1); v = substr($i, eq + 1)
			if (eq == 0 || k != keys[i]) { print "line " NR ": field " i " is " $i ", want " keys[i]; bad = 1 }
			else if (k == "zone") { if (v !~ /^[A-Za-z0-9]+$/) { print "line " NR ": zone " v; bad = 1 } }
			else if (k == "unusable") {
				n = split(v, u, ",")
				if (n < 10) { print "line " NR ": " n " orders"; bad = 1 }
				for (j = 1; j <= n; j++) if (u[j] !~ /^[0-9]+$/ || u[j] > 1000) { print "line " NR ": unusable " v; bad = 1 }
				if (u[10] != uthp) { print "line " NR ": unusable_9 " uthp " but order 9 " u[10]; bad = 1 }
			} else if (v !~ /^-?[0-9]+$/) { print "line " NR ": " k "=" v; bad = 1 }
			if (k == "unusable_9") uthp = v
		}
	}
	END { if (!lines) { print "no zone line"; exit 1 } print lines " zone lines"; exit bad }
	' "$frag"
}
if check frag_file expect_exists "$frag"; then
	while IFS= read -r line; do log "$line"; done <"$frag"
	check frag_format frag_format
fi
check no_splat no_splat
