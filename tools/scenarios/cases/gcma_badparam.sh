# shellcheck shell=dash
# description: invalid or impossible gcma= values are rejected with a reason, boot continues; the DMEM boot switches: a valid value switches its client off at boot, a malformed one is refused with its reason and changes nothing
# duration: 30
# tcg: single
# append: gcma=0 gcma=12345xyz gcma=1M@0x1001 gcma=64G gcma=4M@0x0 gcma=8M gcma=3M:thp gcma=4M@0x1000:thp gcma=4M:thpx gcma=4M:THP gcma=16M@ gcma=@16M gcma.dma_cma=yes- gcma.dma_cma=0x1 gcma.thp_mode=sometimes
# append: gcma.dmem_swap=off gcma.dmem_file=0x1 gcma.dmem_file=yes- gcma=k gcma=16M@k

# Malformed values are refused when parsed.
check rejects_zero expect_dmesg 'gcma: invalid gcma=0: size must be a non-zero multiple'
check rejects_garbage expect_dmesg 'gcma: invalid gcma=12345xyz: expected <size>\[@<base>\]\[:thp\]'
# THP areas: whole 2 MiB blocks, and ":thp" spelled exactly.
check rejects_thp_size expect_dmesg 'gcma: invalid gcma=3M:thp: a THP area.s size and base must be multiples of 2 MiB'
check rejects_thp_base expect_dmesg 'gcma: invalid gcma=4M@0x1000:thp: a THP area.s size and base must be multiples of 2 MiB'
check rejects_thp_suffix expect_dmesg 'gcma: invalid gcma=4M:thpx: expected <size>\[@<base>\]\[:thp\]'
check rejects_thp_case expect_dmesg 'gcma: invalid gcma=4M:THP: expected <size>\[@<base>\]\[:thp\]'
check rejects_thp_mode expect_dmesg 'gcma: gcma.thp_mode=sometimes: expected never, fallback or always; stays fallback'
# A base or size left out is named, not read as zero.
check rejects_missing_base expect_dmesg "gcma: invalid gcma=16M@: '@' needs a base address"
check rejects_missing_size expect_dmesg 'gcma: invalid gcma=@16M: expected <size>\[@<base>\]\[:thp\]'
# memparse() takes a bare suffix for 0; an area's numbers need a digit.
check rejects_bare_suffix expect_dmesg 'gcma: invalid gcma=k: expected <size>\[@<base>\]\[:thp\]'
check rejects_bare_suffix_base expect_dmesg "gcma: invalid gcma=16M@k: '@' needs a base address"
# Each refusal is GCMA's own message, without the kernel's generic one.
check no_generic_complaint expect_no_dmesg 'Malformed early option .gcma'
# The DMA switch takes whole words only, as the DMEM switches do.
check rejects_dma_cma_word expect_dmesg 'gcma: gcma.dma_cma=yes-: not a boolean .*; stays off'
check rejects_dma_cma_hex expect_dmesg 'gcma: gcma.dma_cma=0x1: not a boolean .*; stays off'
check dma_cma_unchanged expect_no_dmesg 'is the default DMA CMA area'
check rejects_unaligned expect_dmesg 'gcma: invalid gcma=1M@0x1001: base must be page aligned'
# Well-formed but impossible requests are refused when memory is reserved.
check rejects_too_large expect_dmesg 'gcma: area of .* bytes is larger than memory; not reserved'
check rejects_overlap expect_dmesg 'gcma: \[0x0+\+0x0*400000\] (overlaps reserved memory|is not all RAM)'
# The one valid request still gets its area, named gcma0.
check valid_one_kept expect_dmesg 'gcma: area gcma0 reserved: 8 MiB at 0x'
check only_one_area expect_no_dmesg 'gcma: area gcma1 reserved'
# A bad mode leaves the default; the sysfs file refuses bad modes too.
check thp_mode_default expect_file_contains /sys/kernel/mm/gcma/thp/mode '^never \[fallback\] always$'
thp_mode_write() {
	if echo "$1" >/sys/kernel/mm/gcma/thp/mode; then
		echo "'$1' accepted"
		return 1
	fi
	echo "'$1' refused"
}
check thp_mode_bad_write thp_mode_write sometimes
check thp_mode_unchanged expect_file_contains /sys/kernel/mm/gcma/thp/mode '^never \[fallback\] always$'
check thp_mode_write_always sh -c 'echo always >/sys/kernel/mm/gcma/thp/mode'
check thp_mode_always expect_file_contains /sys/kernel/mm/gcma/thp/mode '^never fallback \[always\]$'
check thp_area_not_thp expect_file_contains /sys/kernel/mm/gcma/gcma0/thp '^0$'

# The DMEM switches (on the valid area gcma0).  Both malformed values
# would be taken by kstrtobool() (as off and on).
F=/sys/kernel/mm/gcma/dmem/file
S=/sys/kernel/mm/gcma/dmem/swap
check swap_off_at_boot expect_eq "$(cat $S/enabled)" 0
check file_default_kept expect_eq "$(cat $F/enabled)" 1
check refused_hex expect_dmesg 'gcma: gcma.dmem_file=0x1: not a boolean .*; client stays on'
check refused_suffix expect_dmesg 'gcma: gcma.dmem_file=yes-: not a boolean .*; client stays on'
check dmem_boot_line expect_dmesg 'gcma: dmem: [0-9]+ pages in 1 area\(s\); file on, swap off'
# Off at boot can be switched on at run time, and off again.
echo on > $S/enabled
check switched_on expect_eq "$(cat $S/enabled)" 1
echo n > $S/enabled
check switched_off expect_eq "$(cat $S/enabled)" 0
check no_splat no_splat
