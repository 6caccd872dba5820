// SPDX-License-Identifier: GPL-2.0
/*
 * GCMA DMEM: boot switches, hook keys and sysfs of the two DMEM clients.
 *
 * The store and the hooks of the swap and page-cache paths are Rust
 * (mm/gcma_rs/dmem*.rs).  This file is C for what 6.12 gives Rust no way
 * to do: it parses "gcma.dmem_file=" and "gcma.dmem_swap=" (booleans,
 * default on) as early parameters, defines the static keys that the inline
 * hooks of <linux/gcma.h> test and flips them with the client's state, and
 * creates /sys/kernel/mm/gcma/dmem/<client>/ ("enabled" switches the
 * client at run time, off drops its pages; the other files are its
 * counters) from attribute tables, as there is no sysfs abstraction.
 */

#define pr_fmt(fmt) "gcma: " fmt

#include <linux/gcma.h>
#include <linux/init.h>
#include <linux/kobject.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/static_key.h>
#include <linux/string.h>
#include <linux/sysfs.h>

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

#ifdef CONFIG_SYSFS
struct gcma_dmem_kobject {
	struct kobject kobj;
	unsigned int client;
};

static unsigned int gcma_dmem_client_of(struct kobject *kobj)
{
	return container_of(kobj, struct gcma_dmem_kobject, kobj)->client;
}

static ssize_t enabled_show(struct kobject *kobj, struct kobj_attribute *attr,
			    char *buf)
{
	int on = gcma_dmem_rs_enabled(gcma_dmem_client_of(kobj));

	return on < 0 ? on : sysfs_emit(buf, "%d\n", on);
}

static ssize_t enabled_store(struct kobject *kobj, struct kobj_attribute *attr,
			     const char *buf, size_t count)
{
	unsigned int client = gcma_dmem_client_of(kobj);
	bool on;
	int ret;

	if (gcma_parse_bool(buf, &on)) {
		pr_warn_ratelimited("dmem/%s/enabled: \"%.*s\" is not a boolean (1/0, y/n, yes/no, on/off); unchanged\n",
				    gcma_dmem_names[client],
				    (int)min_t(size_t, strcspn(buf, "\n"), 16), buf);
		return -EINVAL;
	}
	ret = gcma_dmem_switch(client, on);
	return ret ? ret : count;
}

static struct kobj_attribute gcma_dmem_enabled_attr = __ATTR_RW(enabled);

struct gcma_dmem_stat_attr {
	struct kobj_attribute attr;
	size_t offset;		/* of the counter in struct gcma_dmem_stats */
};

static ssize_t gcma_dmem_stat_show(struct kobject *kobj,
				   struct kobj_attribute *attr, char *buf)
{
	struct gcma_dmem_stat_attr *sa =
		container_of(attr, struct gcma_dmem_stat_attr, attr);
	struct gcma_dmem_stats st;
	int ret = gcma_dmem_rs_stats(gcma_dmem_client_of(kobj), &st);

	if (ret)
		return ret;
	return sysfs_emit(buf, "%llu\n", *(u64 *)((char *)&st + sa->offset));
}

#define GCMA_DMEM_STAT(name)						\
	{ __ATTR(name, 0444, gcma_dmem_stat_show, NULL),		\
	  offsetof(struct gcma_dmem_stats, name) }

static struct gcma_dmem_stat_attr gcma_dmem_stat_attrs[] = {
	GCMA_DMEM_STAT(stored_pages),
	GCMA_DMEM_STAT(held_pages),
	GCMA_DMEM_STAT(stores),
	GCMA_DMEM_STAT(loads),
	GCMA_DMEM_STAT(misses),
	GCMA_DMEM_STAT(invalidations),
	GCMA_DMEM_STAT(discards),
	GCMA_DMEM_STAT(evictions),
	GCMA_DMEM_STAT(refused_nomem),
	GCMA_DMEM_STAT(refused_nospace),
	GCMA_DMEM_STAT(refused_discarded),
	GCMA_DMEM_STAT(refused_superseded),
	GCMA_DMEM_STAT(refused_disabled),
	GCMA_DMEM_STAT(refused_large),
	GCMA_DMEM_STAT(poisoned),
};

#ifdef CONFIG_GCMA_DMEM_VERIFY
/* Verify mode's counters (dmem_verify.c). */
static ssize_t gcma_dmem_verify_show(struct kobject *kobj,
				     struct kobj_attribute *attr, char *buf)
{
	u64 n[3];

	gcma_dmem_verify_counts(gcma_dmem_client_of(kobj), &n[0], &n[1], &n[2]);
	if (!strcmp(attr->attr.name, "verified"))
		return sysfs_emit(buf, "%llu\n", n[0]);
	if (!strcmp(attr->attr.name, "verify_mismatches"))
		return sysfs_emit(buf, "%llu\n", n[1]);
	return sysfs_emit(buf, "%llu\n", n[2]);
}

static struct kobj_attribute gcma_dmem_verify_attrs[] = {
	__ATTR(verified, 0444, gcma_dmem_verify_show, NULL),
	__ATTR(verify_mismatches, 0444, gcma_dmem_verify_show, NULL),
	__ATTR(verify_skipped, 0444, gcma_dmem_verify_show, NULL),
};

#define GCMA_DMEM_NR_VERIFY_ATTRS ARRAY_SIZE(gcma_dmem_verify_attrs)
#else
#define GCMA_DMEM_NR_VERIFY_ATTRS 0
#endif

static struct attribute *gcma_dmem_attrs[ARRAY_SIZE(gcma_dmem_stat_attrs) +
					 GCMA_DMEM_NR_VERIFY_ATTRS + 2];

static const struct attribute_group gcma_dmem_group = {
	.attrs = gcma_dmem_attrs,
};

static const struct attribute_group *gcma_dmem_groups[] = {
	&gcma_dmem_group,
	NULL,
};

static void gcma_dmem_kobj_release(struct kobject *kobj)
{
	kfree(container_of(kobj, struct gcma_dmem_kobject, kobj));
}

static const struct kobj_type gcma_dmem_ktype = {
	.release = gcma_dmem_kobj_release,
	.sysfs_ops = &kobj_sysfs_ops,
	.default_groups = gcma_dmem_groups,
};

/**
 * gcma_dmem_sysfs_add() - create /sys/kernel/mm/gcma/dmem/<client>/
 *
 * Called once by the Rust crate, after both DMEM instances exist.
 */
void gcma_dmem_sysfs_add(void)
{
	struct kobject *parent = gcma_sysfs_dir(), *dir;
	unsigned int i;

	if (!parent)
		goto fail;
	gcma_dmem_attrs[0] = &gcma_dmem_enabled_attr.attr;
	for (i = 0; i < ARRAY_SIZE(gcma_dmem_stat_attrs); i++)
		gcma_dmem_attrs[i + 1] = &gcma_dmem_stat_attrs[i].attr.attr;
#ifdef CONFIG_GCMA_DMEM_VERIFY
	for (i = 0; i < GCMA_DMEM_NR_VERIFY_ATTRS; i++)
		gcma_dmem_attrs[ARRAY_SIZE(gcma_dmem_stat_attrs) + 1 + i] =
			&gcma_dmem_verify_attrs[i].attr;
#endif
	dir = kobject_create_and_add("dmem", parent);
	if (!dir)
		goto fail;
	for (i = 0; i < GCMA_DMEM_NR_CLIENTS; i++) {
		struct gcma_dmem_kobject *dk = kzalloc(sizeof(*dk), GFP_KERNEL);

		if (!dk)
			goto fail;
		dk->client = i;
		if (kobject_init_and_add(&dk->kobj, &gcma_dmem_ktype, dir, "%s",
					 gcma_dmem_names[i])) {
			kobject_put(&dk->kobj);
			goto fail;
		}
	}
	return;
fail:
	pr_warn("dmem: no sysfs directory\n");
}
#else
void gcma_dmem_sysfs_add(void) { }
#endif
