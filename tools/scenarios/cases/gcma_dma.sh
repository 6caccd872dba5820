# shellcheck shell=dash
# description: gcma.dma_cma=1 makes the GCMA area the default DMA CMA area
# append: gcma=32M gcma.dma_cma=1

check made_default expect_dmesg 'gcma: gcma0 is the default DMA CMA area'
check no_plain_cma_area expect_missing /sys/kernel/debug/cma/reserved
check gcma_via_cma expect_exists /sys/kernel/debug/cma/gcma0/alloc
# DMA allocations of more than one page (virtio rings) come from GCMA.
log "gcma0: $(read_counter /sys/kernel/mm/gcma/gcma0/alloc_success) allocations, $(read_counter /sys/kernel/mm/gcma/gcma0/primary_used_pages) pages in use"
check counters_readable expect_ge "$(read_counter /sys/kernel/mm/gcma/gcma0/primary_used_pages)" 0
check no_splat no_splat
