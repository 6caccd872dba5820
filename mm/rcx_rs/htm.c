// SPDX-License-Identifier: GPL-2.0
/*
 * Intel RTM transaction of the RCX crate.
 *
 * Phase 1 of an RCX update wins the current node's lock word on every
 * item it touches, all at once: inside one hardware transaction it checks
 * that every word is free (aborting explicitly otherwise) and writes the
 * updater's token into each.  Two transactions writing the same word
 * conflict and at most one commits.
 *
 * The instructions are emitted as bytes so that no assembler support for
 * RTM is needed.  rcx_htm_lock_words() must only be called when
 * rcx_htm_available() is true; on other CPUs XBEGIN is undefined.
 */
#include <linux/compiler.h>
#include <linux/types.h>
#ifdef CONFIG_X86_64
#include <asm/cpufeature.h>
#endif

#include "rcx_glue.h"

/* XABORT code of a transaction that found a word taken. */
#define RCX_HTM_BUSY	0xff

bool rcx_htm_available(void)
{
#ifdef CONFIG_X86_64
	return boot_cpu_has(X86_FEATURE_RTM);
#else
	return false;
#endif
}

#ifdef CONFIG_X86_64
/*
 * XBEGIN with its abort handler at the next instruction: returns
 * RCX_HTM_COMMITTED inside the transaction, the abort status in EAX after
 * an abort (never all ones: bits 6 to 23 are zero).
 */
static __always_inline unsigned int rcx_xbegin(void)
{
	unsigned int status = RCX_HTM_COMMITTED;

	asm volatile(".byte 0xc7, 0xf8; .long 0" : "+a" (status) : : "memory");
	return status;
}

static __always_inline void rcx_xend(void)
{
	asm volatile(".byte 0x0f, 0x01, 0xd5" : : : "memory");
}

static __always_inline void rcx_xabort_busy(void)
{
	asm volatile(".byte 0xc6, 0xf8, %c0" : : "i" (RCX_HTM_BUSY) : "memory");
}

unsigned int rcx_htm_lock_words(unsigned long *const *words, unsigned int n,
				unsigned long token)
{
	unsigned int status, i;

	status = rcx_xbegin();
	if (status != RCX_HTM_COMMITTED)
		return status;
	for (i = 0; i < n; i++)
		if (READ_ONCE(*words[i]))
			rcx_xabort_busy();
	for (i = 0; i < n; i++)
		WRITE_ONCE(*words[i], token);
	rcx_xend();
	return RCX_HTM_COMMITTED;
}
#else
unsigned int rcx_htm_lock_words(unsigned long *const *words, unsigned int n,
				unsigned long token)
{
	return 0;
}
#endif
