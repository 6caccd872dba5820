/* SPDX-License-Identifier: GPL-2.0 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM gcma

#if !defined(_TRACE_GCMA_H) || defined(TRACE_HEADER_MULTI_READ)
#define _TRACE_GCMA_H

#include <linux/types.h>
#include <linux/tracepoint.h>

TRACE_EVENT(gcma_alloc_start,
	    TP_PROTO(const char *name, unsigned long count, unsigned int align),
	    TP_ARGS(name, count, align),
	    TP_STRUCT__entry(__string(name, name)
			     __field(unsigned long, count)
			     __field(unsigned int, align)),
	    TP_fast_assign(__assign_str(name);
			   __entry->count = count;
			   __entry->align = align;),
	    TP_printk("name=%s count=%lu align=%u",
		      __get_str(name), __entry->count, __entry->align)
);

TRACE_EVENT(gcma_alloc_finish,
	    TP_PROTO(const char *name, unsigned long pfn, unsigned long count,
		     unsigned int align, int err, u64 ns),
	    TP_ARGS(name, pfn, count, align, err, ns),
	    TP_STRUCT__entry(__string(name, name)
			     __field(unsigned long, pfn)
			     __field(unsigned long, count)
			     __field(unsigned int, align)
			     __field(int, err)
			     __field(u64, ns)),
	    TP_fast_assign(__assign_str(name);
			   __entry->pfn = pfn;
			   __entry->count = count;
			   __entry->align = align;
			   __entry->err = err;
			   __entry->ns = ns;),
	    TP_printk("name=%s pfn=0x%lx count=%lu align=%u err=%d ns=%llu",
		      __get_str(name), __entry->pfn, __entry->count,
		      __entry->align, __entry->err, __entry->ns)
);

TRACE_EVENT(gcma_release,
	    TP_PROTO(const char *name, unsigned long pfn, unsigned long count,
		     bool ok),
	    TP_ARGS(name, pfn, count, ok),
	    TP_STRUCT__entry(__string(name, name)
			     __field(unsigned long, pfn)
			     __field(unsigned long, count)
			     __field(bool, ok)),
	    TP_fast_assign(__assign_str(name);
			   __entry->pfn = pfn;
			   __entry->count = count;
			   __entry->ok = ok;),
	    TP_printk("name=%s pfn=0x%lx count=%lu ok=%d",
		      __get_str(name), __entry->pfn, __entry->count,
		      __entry->ok)
);

#endif /* _TRACE_GCMA_H */

/* This part must be outside protection */
#include <trace/define_trace.h>
