// SPDX-License-Identifier: GPL-2.0

#include <kunit/test-bug.h>

/*
 * Fails the KUnit test the current task runs, with a message that Rust
 * formats (%pA takes a pointer to core::fmt::Arguments).  The file and line
 * name the Rust caller, not this helper.
 */
void rust_helper_kunit_fail_current(const char *file, int line, const void *args)
{
#if IS_ENABLED(CONFIG_KUNIT)
	if (static_branch_unlikely(&kunit_running))
		kunit_hooks.fail_current_test(file, line, "%pA", args);
#endif
}
