# shellcheck shell=dash
# description: invalid or impossible gcma= values are rejected with a reason, boot continues
# append: gcma=0 gcma=12345xyz gcma=1M@0x1001 gcma=64G gcma=4M@0x0 gcma=8M

# Malformed values are refused when parsed.
check rejects_zero expect_dmesg 'gcma: invalid gcma=0: size must be a non-zero multiple'
check rejects_garbage expect_dmesg 'gcma: invalid gcma=12345xyz: expected <size>\[@<base>\]'
check rejects_unaligned expect_dmesg 'gcma: invalid gcma=1M@0x1001: base must be page aligned'
# Well-formed but impossible requests are refused when memory is reserved.
check rejects_too_large expect_dmesg 'gcma: area of .* bytes is larger than memory; not reserved'
check rejects_overlap expect_dmesg 'gcma: \[0x0+\+0x0*400000\] (overlaps reserved memory|is not all RAM)'
# The one valid request still gets its area, named gcma0.
check valid_one_kept expect_dmesg 'gcma: area gcma0 reserved: 8 MiB at 0x'
check only_one_area expect_no_dmesg 'gcma: area gcma1 reserved'
check no_splat no_splat
