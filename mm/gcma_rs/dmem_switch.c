// SPDX-License-Identifier: GPL-2.0
/*
 * GCMA DMEM: the hook keys and boot switches of the two DMEM clients.
 *
 * The store, the hooks of the swap and page-cache paths and the sysfs
 * files (/sys/kernel/mm/gcma/dmem/<client>/) are Rust (mm/gcma_rs/dmem*.rs,
 * sysfs.rs), and so is the switch that flips a client's static key with
 * its state (dmem_client.rs, on kernel::jump_label).  This file is C for
 * what 6.12 gives Rust no way to do: it defines the static keys that the
 * inline hooks of <linux/gcma.h> test (static keys are C objects), and
 * registers "gcma.dmem_file=" and "gcma.dmem_swap=" (booleans, default on)
 * as early parameters, a C macro; boot_params.rs parses their values.
 */

#define pr_fmt(fmt) "gcma: " fmt

#include <linux/gcma.h>
#include <linux/init.h>
#include <linux/static_key.h>

DEFINE_STATIC_KEY_FALSE(gcma_dmem_file_on);
DEFINE_STATIC_KEY_FALSE(gcma_dmem_swap_on);
DEFINE_STATIC_KEY_FALSE(gcma_dmem_fences_on);

static int __init gcma_dmem_parse_file(char *arg)
{
	return gcma_boot_param(GCMA_PARAM_DMEM_FILE, arg);
}
early_param("gcma.dmem_file", gcma_dmem_parse_file);

static int __init gcma_dmem_parse_swap(char *arg)
{
	return gcma_boot_param(GCMA_PARAM_DMEM_SWAP, arg);
}
early_param("gcma.dmem_swap", gcma_dmem_parse_swap);
