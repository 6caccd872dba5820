// SPDX-License-Identifier: GPL-2.0
/*
 * GCMA DMEM: boot switches and hook keys of the two DMEM clients.
 *
 * The store, the hooks of the swap and page-cache paths and the sysfs
 * files (/sys/kernel/mm/gcma/dmem/<client>/) are Rust (mm/gcma_rs/dmem*.rs,
 * sysfs.rs), and so is the switch that flips a client's static key with
 * its state (dmem_client.rs, on kernel::jump_label).  This file is C for
 * what 6.12 gives Rust no way to do: it parses "gcma.dmem_file=" and
 * "gcma.dmem_swap=" (booleans, default on) as early parameters, which run
 * before the Rust crate starts, and defines the static keys that the
 * inline hooks of <linux/gcma.h> test (static keys are C objects).
 */

#define pr_fmt(fmt) "gcma: " fmt

#include <linux/errno.h>
#include <linux/gcma.h>
#include <linux/init.h>
#include <linux/static_key.h>

DEFINE_STATIC_KEY_FALSE(gcma_dmem_file_on);
DEFINE_STATIC_KEY_FALSE(gcma_dmem_swap_on);
DEFINE_STATIC_KEY_FALSE(gcma_dmem_fences_on);

static const char *const gcma_dmem_names[GCMA_DMEM_NR_CLIENTS] = {
	[GCMA_DMEM_FILE] = "file",
	[GCMA_DMEM_SWAP] = "swap",
};

static bool gcma_dmem_boot_on[GCMA_DMEM_NR_CLIENTS] = { true, true };

static int __init gcma_dmem_parse(unsigned int client, char *arg)
{
	bool on;

	if (!arg || gcma_parse_bool(arg, &on)) {
		pr_err("gcma.dmem_%s=%s: not a boolean (1/0, y/n, yes/no, on/off); client stays %s\n",
		       gcma_dmem_names[client], arg ?: "",
		       gcma_dmem_boot_on[client] ? "on" : "off");
		return -EINVAL;
	}
	gcma_dmem_boot_on[client] = on;
	return 0;
}

static int __init gcma_dmem_parse_file(char *arg)
{
	return gcma_dmem_parse(GCMA_DMEM_FILE, arg);
}
early_param("gcma.dmem_file", gcma_dmem_parse_file);

static int __init gcma_dmem_parse_swap(char *arg)
{
	return gcma_dmem_parse(GCMA_DMEM_SWAP, arg);
}
early_param("gcma.dmem_swap", gcma_dmem_parse_swap);

/* Whether @client is on at boot ("gcma.dmem_<client>=", default on). */
bool gcma_dmem_boot_enabled(unsigned int client)
{
	return client < GCMA_DMEM_NR_CLIENTS && gcma_dmem_boot_on[client];
}
