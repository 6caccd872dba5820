// SPDX-License-Identifier: GPL-2.0

#include <linux/jump_label.h>

void rust_helper_rsmm_static_key_false_enable(struct static_key_false *key)
{
	static_branch_enable(key);
}

void rust_helper_rsmm_static_key_false_disable(struct static_key_false *key)
{
	static_branch_disable(key);
}

bool rust_helper_rsmm_static_key_false_enabled(struct static_key_false *key)
{
	return static_key_enabled(key);
}
