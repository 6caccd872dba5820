# shellcheck shell=dash
# description: arm64, device-tree GCMA areas: the GCMA KUnit suites (gcma_of: a device's DMA API allocations come from the area its memory-region names, counted there) at boot; areas named after their nodes, the default DMA area, malformed nodes refused by name, a THP area refused to a device, a dma-buf heap of a device-tree area
# arch: arm64
# dtsi: gcma.dtsi
# duration: 240
# append: kunit.enable=1 gcma=1028K@0x60001000 nokaslr init_on_alloc=1
# mem: 1G
# timeout: 1200

# The KUnit suites run at boot, before /init: the GCMA crate's on the
# first area (gcma-dev, from the device tree, which is also the default
# DMA area), gcma_cma's alignment case on gcma0 (the odd-based area of
# the command line), gcma_thp on gcma-thp, and gcma_of through the test
# driver bound to the gcma-dma-test node.  make test's arm64 tier judges
# the cases from this boot's log (tools/kunit/run.sh --parse); this
# scenario checks that they ran and passed too.
check suites_ran expect_dmesg '# gcma_of: pass:[1-9][0-9]* fail:0'
no_failed_case() {
	if expect_no_dmesg '^(\[[ 0-9.]*\] )? *not ok ' >/dev/null; then
		return 0
	fi
	dmesg | grep -E -A 4 '(EXPECTATION|ASSERTION) FAILED' | head -n 40
	dmesg | grep -E '^(\[[ 0-9.]*\] )? *not ok '
	echo "a KUnit case failed"
	return 1
}
check no_failed_case no_failed_case

M=/sys/kernel/mm/gcma
H=/dev/dma_heap
# Areas named after their nodes (unit address dropped), and the command
# line's after them.
for a in gcma-dev gcma-cam gcma-thp gcma0; do
	check "area_$a" expect_exists $M/$a
done
check dev_area_size expect_eq "$(read_counter $M/gcma-dev/total_pages)" 4096
check cam_area_at_reg expect_dmesg 'gcma: area gcma-cam reserved: 32 MiB at 0x0*70000000'
check default_dma_area expect_dmesg 'gcma: gcma-dev is the default DMA CMA area'

# Each malformed node refused by name, and no area of it.
check refused_nosize expect_dmesg 'gcma: bad-nosize: neither "reg" nor "size"; not reserved'
check refused_align expect_dmesg 'gcma: bad-align@72100000: .* is not aligned to .*; not reserved'
check refused_overlap expect_dmesg 'gcma: bad-overlap@71000000: .* overlaps area gcma-cam; not reserved'
check refused_fw_overlap expect_dmesg 'gcma: bad-fw-overlap@72c00000: .* overlaps fw@72e00000; not reserved'
check refused_kernel_overlap expect_dmesg 'gcma: bad-kernel@40200000: .* overlaps the kernel image; not reserved'
check refused_align_kernel_overlap expect_dmesg 'gcma: bad-align-kernel@40500000: .* overlaps the kernel image; not reserved'
# run.py places bad-blob on the blob, after the initrd (its address
# changes with the initrd's size).
check refused_blob_overlap expect_dmesg 'gcma: bad-blob@[0-9a-f]+: .* overlaps the device tree blob; not reserved'
check refused_thp_default expect_dmesg 'gcma: bad-thp-default: .*linux,cma-default.* together.*; not reserved'
check refused_nomap expect_dmesg 'gcma: bad-nomap: .*"reusable" and mapped.*; not reserved'
check no_bad_area expect_eq "$(ls $M | grep -c '^bad')" 0

# The test driver: bound to the device area, refused the THP area.
check device_attached expect_dmesg 'gcma-dma-test: DMA allocations from CMA area gcma-dev'
check thp_area_refused expect_dmesg 'GCMA area gcma-thp serves transparent huge pages only; memory-region not attached'
# gcma_of's allocations are in the device area's counters, all released.
check dev_area_allocated expect_gt "$(read_counter $M/gcma-dev/alloc_success)" 0
check dev_area_idle expect_eq "$(read_counter $M/gcma-dev/primary_used_pages)" 0

# Heaps: each device area (gcma-dev as the default area), none for THP.
check heap_dev expect_exists $H/gcma-dev
check heap_cam expect_exists $H/gcma-cam
check no_heap_thp expect_missing $H/gcma-thp
heap() {
	local rc
	dma_heap "$@" > /tmp/heap.out 2>&1
	rc=$?
	tail -n 1 /tmp/heap.out
	cat /tmp/heap.out
	return $rc
}
check heap_basic heap basic -g $M/gcma-cam $H/gcma-cam
check heap_exhaust heap exhaust -g $M/gcma-cam $H/gcma-cam
check cam_idle expect_eq "$(read_counter $M/gcma-cam/primary_used_pages)" 0
check no_splat no_splat
