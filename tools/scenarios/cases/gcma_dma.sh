# shellcheck shell=dash
# description: gcma.dma_cma=1 makes gcma0 the default DMA CMA area, and a driver's coherent DMA buffers come from it
# duration: 39
# tcg: single
# append: gcma=32M gcma.dma_cma=1
# No kmemleak here: it would add its scans to this short boot and prove
# nothing the kernel's other boots do not.  (It was left out first on the
# pc machine, where kmemleak's first scan, holding its lock through long
# stretches, made the ACPI _PRT method that routes the disk's interrupt
# run past ACPICA's 30 s loop timeout and hang the boot; guests boot q35
# now, whose boot profile shows no such loop.)  The DMA paths into
# GCMA run under kmemleak in kunit_kmemleak (the gcma_cma suite's
# coherent DMA cases).
# disk: 16M
# qemu: -global virtio-blk-pci.disable-legacy=on -global virtio-blk-pci.iommu_platform=on

G=/sys/kernel/mm/gcma/gcma0

check made_default expect_dmesg 'gcma: gcma0 is the default DMA CMA area'
check no_plain_cma_area expect_missing /sys/kernel/debug/cma/reserved
check gcma_via_cma expect_exists /sys/kernel/debug/cma/gcma0/alloc

# The scratch disk is a modern virtio-blk device with iommu_platform=on, so
# its driver goes through the DMA API (without it, virtio bypasses the DMA
# API).  Each virtqueue ring is a coherent DMA buffer of more than one
# page, which dma_alloc_contiguous() takes from the default CMA area: with
# gcma0 as that area, the rings of the bound disk are GCMA allocations that
# stay in use.  Without gcma.dma_cma=1 both counters would stay at 0.
check disk_bound expect_eq "$(disks | wc -l)" 1
check rings_from_gcma expect_gt "$(read_counter $G/alloc_success)" 0
check rings_in_use expect_gt "$(read_counter $G/primary_used_pages)" 0

# The disk works through those buffers: what is written reads back after
# the page cache has been dropped.
disk_roundtrip() {
	dd if=/dev/urandom of=/tmp/pattern bs=64k count=16 2>/dev/null &&
		dd if=/tmp/pattern of=/dev/vda bs=64k conv=fsync 2>/dev/null &&
		echo 3 >/proc/sys/vm/drop_caches &&
		dd if=/dev/vda of=/tmp/readback bs=64k count=16 2>/dev/null &&
		cmp /tmp/pattern /tmp/readback && echo "1 MiB written and read back"
}
check disk_io disk_roundtrip
# The default area is gcma0: the CMA heap registers it once, under its name.
check one_heap expect_exists /dev/dma_heap/gcma0
check heap_registered_once expect_no_dmesg 'cma_heap: no heap|dma_heap: Already registered'
check heap_alloc dma_heap alloc -g $G /dev/dma_heap/gcma0 16
log "gcma0: $(read_counter $G/alloc_success) allocations, $(read_counter $G/primary_used_pages) pages in use"
check no_splat no_splat
