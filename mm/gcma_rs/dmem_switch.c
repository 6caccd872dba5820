// SPDX-License-Identifier: GPL-2.0
/*
 * GCMA DMEM: the hook keys and boot switches of the two DMEM clients, and
 * of verify mode (CONFIG_GCMA_DMEM_VERIFY).
 *
 * The store, the hooks of the swap and page-cache paths and the sysfs
 * files (/sys/kernel/mm/gcma/dmem/<client>/) are Rust (mm/gcma_rs/dmem*.rs,
 * sysfs.rs), and so is the switch that flips a client's static key with
 * its state (dmem_client.rs, on kernel::jump_label).  This file is C for
 * what 6.12 gives Rust no way to do: it defines the static keys that the
 * inline hooks of <linux/gcma.h> test (static keys are C objects), and
 * registers "gcma.dmem_file=", "gcma.dmem_swap=" and "gcma.dmem_verify="
 * (booleans, default on) as early parameters, a C macro, whose handlers
 * are Rust (boot_params.rs).  Verify mode's device reads and comparison are
 * Rust too (kernel::mm::gcma::verify, dmem_verify.rs).
 */

#include <linux/gcma.h>
#include <linux/init.h>
#include <linux/static_key.h>

DEFINE_STATIC_KEY_FALSE(gcma_dmem_file_on);
DEFINE_STATIC_KEY_FALSE(gcma_dmem_swap_on);
DEFINE_STATIC_KEY_FALSE(gcma_dmem_fences_on);

/* The handlers, in boot_params.rs, check the values and keep them. */
early_param("gcma.dmem_file", gcma_param_dmem_file);
early_param("gcma.dmem_swap", gcma_param_dmem_swap);

#ifdef CONFIG_GCMA_DMEM_VERIFY
/* On: every DMEM hit is checked against its device (dmem_verify.rs). */
DEFINE_STATIC_KEY_FALSE(gcma_dmem_verify_on);
early_param("gcma.dmem_verify", gcma_param_dmem_verify);
#endif
