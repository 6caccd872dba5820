# shellcheck shell=dash
# description: invalid gcma= values are rejected with an error, boot continues
# append: gcma=0 gcma=12345xyz

check invalid_reported expect_dmesg 'gcma: .*invalid'
check no_area expect_no_dmesg 'gcma: area .*reserved'
check no_splat no_splat
