// SPDX-License-Identifier: GPL-2.0
/*
 * GCMA DMEM: boot switches and hook keys of the two DMEM clients.
 *
 * The store, the hooks of the swap and page-cache paths and the sysfs
 * files (/sys/kernel/mm/gcma/dmem/<client>/) are Rust (mm/gcma_rs/dmem*.rs,
 * sysfs.rs).  This file is C for what 6.12 gives Rust no way to do: it
 * parses "gcma.dmem_file=" and "gcma.dmem_swap=" (booleans, default on) as
 * early parameters, which run before the Rust crate starts, and defines
 * the static keys that the inline hooks of <linux/gcma.h> test and flips
 * them with the client's state (static keys are C objects).
 */

#define pr_fmt(fmt) "gcma: " fmt

#include <linux/gcma.h>
#include <linux/init.h>
#include <linux/mutex.h>
#include <linux/static_key.h>

DEFINE_STATIC_KEY_FALSE(gcma_dmem_file_on);
DEFINE_STATIC_KEY_FALSE(gcma_dmem_swap_on);
DEFINE_STATIC_KEY_FALSE(gcma_dmem_fences_on);

/**
 * gcma_dmem_fences_start() - raise range fences from now on
 *
 * Called once by the Rust crate, when the DMEM instances exist and before
 * either client is switched on; the key is never turned off.  Direct-I/O
 * invalidation walks then fence their range whatever the file client's
 * switch says (see gcma_dmem_fence_begin()).  DMEM starts in an initcall,
 * before user space, so no walk is in flight that began without a fence.
 */
void gcma_dmem_fences_start(void)
{
	static_branch_enable(&gcma_dmem_fences_on);
}

/* Serialises switching: the static key and the client's state change together. */
static DEFINE_MUTEX(gcma_dmem_switch_lock);

/**
 * gcma_dmem_switch() - turn a DMEM client on or off
 * @client: GCMA_DMEM_FILE or GCMA_DMEM_SWAP
 * @on: the new state
 *
 * On: the hooks are enabled first, then the client accepts stores.  Off:
 * the client refuses stores and drops its pages, then the hooks are
 * disabled; the invalidation hooks therefore run for as long as the
 * client holds any page.  May sleep.
 *
 * Return: 0, -EINVAL for an unknown client, -ENODEV without DMEM.
 */
int gcma_dmem_switch(unsigned int client, bool on)
{
	struct static_key_false *key;
	int ret;

	if (client >= GCMA_DMEM_NR_CLIENTS)
		return -EINVAL;
	key = client == GCMA_DMEM_FILE ? &gcma_dmem_file_on : &gcma_dmem_swap_on;
	mutex_lock(&gcma_dmem_switch_lock);
	if (on)
		static_branch_enable(key);
	ret = gcma_dmem_rs_set_enabled(client, on);
	if (!on || ret)
		static_branch_disable(key);
	mutex_unlock(&gcma_dmem_switch_lock);
	return ret;
}

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
