# shellcheck shell=dash
# description: gcma.dma_cma=1 makes the GCMA area the default DMA CMA area
# append: gcma=32M gcma.dma_cma=1

check made_default expect_dmesg 'gcma: gcma0 is the default DMA CMA area'
check no_plain_cma_area expect_missing /sys/kernel/debug/cma/reserved
check gcma_via_cma expect_exists /sys/kernel/debug/cma/gcma0/alloc
# Whatever the guest's drivers allocate through the DMA API (more than one
# page at a time) comes from GCMA; this guest may have no such driver (its
# virtio devices bypass the DMA API), so the counters are only logged.
# The KUnit suite gcma_cma allocates a coherent DMA buffer for a device
# and checks that it lands in the area.
log "gcma0: $(read_counter /sys/kernel/mm/gcma/gcma0/alloc_success) allocations, $(read_counter /sys/kernel/mm/gcma/gcma0/primary_used_pages) pages in use"
check counters_readable expect_ge "$(read_counter /sys/kernel/mm/gcma/gcma0/primary_used_pages)" 0
check no_splat no_splat
