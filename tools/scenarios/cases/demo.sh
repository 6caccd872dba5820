# shellcheck shell=dash
# description: subsystem report for 'make demo' (also a smoke test of any kernel)
# duration: 28
# append: gcma=64M
# mem: 2G
# timeout: 600

# Lines starting with "REPORT " are what 'make demo' prints.
report() {
	echo "REPORT $*"
}

report "kernel: $(uname -r), $(grep -c ^processor /proc/cpuinfo) CPU(s)"
for n in /sys/devices/system/node/node[0-9]*; do
	[ -d "$n" ] || continue
	report "$(basename "$n"): CPUs $(cat "$n/cpulist"), $(awk '/MemTotal/ {print $4 " " $5}' "$n/meminfo")"
done
dmesg | grep -E 'gcma: ' | sed -E -e 's/^\[[ 0-9.]*\] //' | while IFS= read -r line; do
	report "$line"
done
# report_section PREFIX TITLE: the kernel log lines that start with PREFIX,
# without timestamp and prefix, under TITLE; nothing if there are none.
report_section() {
	dmesg | grep -q "$1" || return 0
	report ""
	report "$2"
	dmesg | grep "$1" | sed -E -e 's/^\[[ 0-9.]*\] //' -e "s/^$1//" | while IFS= read -r line; do
		report "  $line"
	done
}

report_section 'rust_mm_bench: ' "Rust mm abstractions (rust_mm_bench, mean ns per operation):"
report_section 'bonsai: bench: ' "Bonsai tree benchmark (bonsai: bench):"
report_section 'rcx: bench: ' "RCX benchmark (rcx: bench):"

stats=/sys/kernel/debug/bonsai/bench/stats
if [ -r "$stats" ]; then
	report ""
	report "Bonsai counters of the benchmark's tree ($stats):"
	while IFS= read -r line; do
		report "  $line"
	done < "$stats"
	check bonsai_debugfs grep -q '^single_rotations: *[1-9]' "$stats"
fi

check gcma_area expect_dmesg 'gcma: gcma0: [0-9]+ pages from pfn'
check two_nodes test -d /sys/devices/system/node/node1
check no_splat no_splat
