// SPDX-License-Identifier: GPL-2.0
/*
 * GCMA: guaranteed transparent huge pages, the C side.
 *
 * An area reserved with "gcma=<size>[@<base>]:thp" serves PMD-sized
 * anonymous folios when the buddy allocator has no free block of that
 * order.  The policy, the choice of area and the allocations the fault
 * and collapse paths make through include/linux/gcma_thp.h are Rust
 * (thp.rs, on kernel::mm::mempolicy): an area is used only if its node is
 * one the buddy allocation would be allowed to use, the preferred node's
 * first.  So are the files of /sys/kernel/mm/gcma/thp/ (sysfs.rs) and the
 * mode's switch, which flips the static key under the mode's mutex
 * (thp::set_mode(), on kernel::jump_label).
 *
 * The folio is an ordinary compound page of the area (gcma_alloc_gfp()
 * with __GFP_COMP); its caller charges it to the memcg and maps it like
 * any THP.  However it is freed later (whole, split into base pages,
 * after migration), its pages reach the page allocator's free path, whose
 * pfn check (gcma_free_page()) returns them to the area.
 *
 * This is C for what 6.12 gives Rust no way to do: the definition of the
 * static key that include/linux/gcma_thp.h tests (static keys are C
 * objects), and the registration of "gcma.thp_mode=" as an early
 * parameter, a C macro, whose handler is Rust (boot_params.rs).  The KUnit
 * suite's C helpers are in thp_test.c.
 */

#include <linux/gcma.h>
#include <linux/gcma_thp.h>
#include <linux/init.h>

/* On while the mode is not "never" and a THP area is in service. */
DEFINE_STATIC_KEY_FALSE(gcma_thp_on);

early_param("gcma.thp_mode", gcma_param_thp_mode);
