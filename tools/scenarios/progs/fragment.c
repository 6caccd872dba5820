// SPDX-License-Identifier: GPL-2.0
/*
 * fragment - leave no free order-9 (2 MiB) block that compaction could make.
 *
 *   fragment [-r RESERVE_MIB] [-m MAX_MIB] [-p PIDFILE] [-e] [-U] [-v]
 *
 * Takes every free 2 MiB block as a transparent huge page, keeps one 4 KiB
 * page of each and gives the other 511 back: each block then holds one
 * mlocked page, and with /proc/sys/vm/compact_unevictable_allowed = 0
 * (written here unless -U) compaction does not move mlocked pages, so none
 * of these blocks can become a free 2 MiB block while the program runs.
 *
 * In rounds, until a round gets no huge page: map anonymous memory with
 * MADV_HUGEPAGE and touch one word of each 2 MiB region until MemAvailable
 * is down to RESERVE_MIB or 8 regions in a row were not huge pages; then
 * mark it MADV_NOHUGEPAGE (so khugepaged leaves it alone), and region by
 * region MADV_DONTNEED all but the first 4 KiB page, split the huge page
 * (debugfs split_huge_pages, else the deferred split queue frees the rest
 * later) and mlock2(MLOCK_ONFAULT) the first page; at last drain the
 * per-CPU mlock batches (until drained, compaction may still move the
 * pages).  "moved=" in the output counts kept pages that moved anyway
 * (kcompactd may take one before it is mlocked); "blocks=" counts the
 * blocks the kept pages are in at the end.  Faulting huge pages is
 * much cheaper under emulation than faulting every 4 KiB page of memory.
 * Free memory outside these blocks was not in free 2 MiB blocks to begin
 * with; compaction could only make one there by moving other movable
 * pages out of a block, which the scenarios measure.
 *
 * While it allocates, /sys/kernel/mm/gcma/thp/mode (if present) is set to
 * "never", so that no huge page comes from a GCMA area; the mode is
 * restored afterwards.  Transparent huge pages must not be "never".
 *
 * -r N   leave N MiB of MemAvailable while allocating (default 32)
 * -m N   allocate at most N MiB per round
 * -p F   write the pid to F once ready (after the "FRAGMENT ready" line)
 * -e     exit (and free everything) right after fragmenting
 * -U     do not touch compact_unevictable_allowed
 * -v     progress on stderr
 *
 * Output: "FRAGMENT ready blocks=N held_kib=K rounds=R huge=H
 * free_kib=F u9_before=P u9=P" (P: unusable free space index at order 9
 * over /proc/buddyinfo, in thousandths) and a human-readable line.  Then it
 * sleeps until SIGTERM/SIGINT and exits 0.
 *
 * Exit status: 0 ok, 1 runtime error, 2 usage error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MIB (1024UL * 1024UL)
#define PAGE 4096UL
#define HPAGE (2 * MIB)
#define MAX_ROUNDS 64
#define MISS_LIMIT 8
#define PM_PRESENT (1ULL << 63)
#define PM_PFN_MASK ((1ULL << 55) - 1)
/* Writes to a page found unmapped right after it was written to. */
#define TOUCH_TRIES 10
#define KPF_THP 22
#define BLOCK_BITS (1UL << 19)		/* 2 MiB blocks of 1 TiB */
#ifndef MLOCK_ONFAULT
#define MLOCK_ONFAULT 1
#endif

static const char *gcma_mode_file = "/sys/kernel/mm/gcma/thp/mode";
static int verbose, pm = -1, kf = -1;
static uint8_t *pinned;			/* one bit per 2 MiB block */
static unsigned long nr_pinned;
/* The pages kept, and the pfn each had when kept. */
static struct kept {
	char *addr;
	uint64_t pfn;
} *kept;
static unsigned long nr_kept, max_kept;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: fragment [-r RESERVE_MIB] [-m MAX_MIB] [-p PIDFILE] [-e] [-U] [-v]\n"
		"  -r N  leave N MiB of MemAvailable while allocating (default 32)\n"
		"  -m N  allocate at most N MiB per round\n"
		"  -p F  write the pid to F when ready\n"
		"  -e    exit right after fragmenting\n"
		"  -U    leave compact_unevictable_allowed alone\n"
		"  -v    progress on stderr\n");
}

static int parse_ulong(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long long v;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return -1;
	*out = v;
	return 0;
}

/* A "Key:   N kB" field of /proc/meminfo, in bytes; 0 if missing. */
static unsigned long meminfo(const char *key)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	size_t n = strlen(key);
	long v = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, key, n) && line[n] == ':') {
			v = strtol(line + n + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return v > 0 ? (unsigned long)v * 1024 : 0;
}

/*
 * Unusable free space index at order 9 over all zones, in thousandths:
 * (free pages - pages in free blocks of order >= 9) / free pages.
 */
static long unusable_9(unsigned long *free_pages)
{
	FILE *f = fopen("/proc/buddyinfo", "r");
	char line[512];
	unsigned long long total = 0, big = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, "zone");
		int order = 0;

		if (!p)
			continue;
		p += 4;
		while (*p == ' ')
			p++;
		while (*p && *p != ' ')	/* zone name */
			p++;
		for (;;) {
			char *end;
			unsigned long long k = strtoull(p, &end, 10);

			if (end == p)
				break;
			total += k << order;
			if (order >= 9)
				big += k << order;
			order++;
			p = end;
		}
	}
	fclose(f);
	if (free_pages)
		*free_pages = total;
	if (!total)
		return 1000;
	return (long)((total - big) * 1000 / total);
}

static int write_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, val, strlen(val));
	close(fd);
	return n == (ssize_t)strlen(val) ? 0 : -1;
}

/* The selected word of a "a [b] c" sysfs file into buf; -1 if none. */
static int read_selected(const char *path, char *buf, size_t size)
{
	char line[256], *l, *r;
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	if (!fgets(line, sizeof(line), f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	l = strchr(line, '[');
	r = l ? strchr(l, ']') : NULL;
	if (!r)
		return -1;
	*r = 0;
	snprintf(buf, size, "%s", l + 1);
	return 0;
}

static uint64_t pagemap(const void *addr)
{
	uint64_t e = 0;

	if (pread(pm, &e, sizeof(e), (off_t)((uintptr_t)addr / PAGE * sizeof(e))) != sizeof(e))
		return 0;
	return e;
}

/*
 * The pagemap entry of @addr, just written to.  A migration (kcompactd
 * moving the new huge page) may have unmapped it meanwhile: write to it
 * again, which waits for the migration to end, and look again, a few times.
 */
static uint64_t touched_entry(char *addr)
{
	uint64_t e = pagemap(addr);
	int tries;

	for (tries = 0; tries < TOUCH_TRIES && !(e & PM_PRESENT); tries++) {
		addr[0] = 1;
		e = pagemap(addr);
	}
	return e;
}

static int is_thp(uint64_t pfn)
{
	uint64_t flags = 0;

	if (kf < 0 || pread(kf, &flags, sizeof(flags), (off_t)(pfn * sizeof(flags))) !=
	    sizeof(flags))
		return 0;
	return !!(flags & (1ULL << KPF_THP));
}

/* Record the block of pfn as pinned; 1 if it was not yet. */
static int pin_block(uint64_t pfn)
{
	uint64_t blk = pfn >> 9;

	if (blk >= BLOCK_BITS || (pinned[blk / 8] & (1 << (blk % 8))))
		return 0;
	pinned[blk / 8] |= 1 << (blk % 8);
	nr_pinned++;
	return 1;
}

/* Split the huge pages mapped in [a, a + len) of this process now. */
static void split_now(char *a, size_t len)
{
	char buf[128];
	int n = snprintf(buf, sizeof(buf), "%d,%#lx,%#lx", getpid(), (unsigned long)a,
			 (unsigned long)a + len);

	if (write_file("/sys/kernel/debug/split_huge_pages", buf) && verbose)
		fprintf(stderr, "fragment: split_huge_pages: %s (left to the deferred split)\n",
			strerror(errno));
	(void)n;
}

/* Kept pages no longer at the pfn they had (or no longer small pages). */
static unsigned long count_moved(unsigned long *still_huge)
{
	unsigned long i, moved = 0;

	if (still_huge)
		*still_huge = 0;
	for (i = 0; i < nr_kept; i++) {
		uint64_t e = pagemap(kept[i].addr);

		if (!(e & PM_PRESENT) || (e & PM_PFN_MASK) != kept[i].pfn)
			moved++;
		else if (still_huge && is_thp(kept[i].pfn))
			(*still_huge)++;
	}
	return moved;
}

/*
 * mlock() puts pages on the unevictable list through per-CPU batches, and
 * compaction only leaves pages alone once they are there.  move_pages()
 * of one page to the node it is on migrates nothing but drains the batches
 * of every CPU (lru_cache_disable()).
 */
static void drain_mlock_batches(char *a)
{
	void *page = a;
	int node = -1, status = -1;

	if (syscall(SYS_move_pages, 0, 1, &page, NULL, &status, 0) || status < 0)
		return;
	node = status;
	if (syscall(SYS_move_pages, 0, 1, &page, &node, &status, 0) && verbose)
		perror("fragment: move_pages");
}

/*
 * One round: huge pages until the reserve or MISS_LIMIT misses in a row;
 * keep the first page of every region touched.  Returns the number of
 * huge pages it got, -1 on error.
 */
static long huge_round(unsigned long reserve, unsigned long max)
{
	unsigned long avail = meminfo("MemAvailable"), len, r, nr, huge = 0, miss = 0;
	char *raw, *a;

	if (avail <= reserve + HPAGE)
		return 0;
	len = (avail - reserve) & ~(HPAGE - 1);
	if (len > max)
		len = max;
	raw = mmap(NULL, len + HPAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED) {
		perror("fragment: mmap");
		return -1;
	}
	a = (char *)(((uintptr_t)raw + HPAGE - 1) & ~(HPAGE - 1));
	if (a > raw)
		munmap(raw, a - raw);
	munmap(a + len, raw + HPAGE - a);
	if (madvise(a, len, MADV_HUGEPAGE)) {
		perror("fragment: madvise(MADV_HUGEPAGE)");
		return -1;
	}
	nr = len / HPAGE;
	for (r = 0; r < nr; r++) {
		uint64_t e;

		if (!(r % 8) && meminfo("MemAvailable") < reserve + 8 * HPAGE)
			break;
		a[r * HPAGE] = 1;
		e = touched_entry(a + r * HPAGE);
		if (!(e & PM_PRESENT)) {
			fprintf(stderr, "fragment: page not mapped after %d writes\n",
				TOUCH_TRIES + 1);
			return -1;
		}
		if (!(e & PM_PFN_MASK)) {
			fprintf(stderr, "fragment: no pfn in pagemap (needs CAP_SYS_ADMIN)\n");
			return -1;
		}
		if (nr_kept < max_kept) {
			kept[nr_kept].addr = a + r * HPAGE;
			kept[nr_kept++].pfn = e & PM_PFN_MASK;
		}
		if (is_thp(e & PM_PFN_MASK)) {
			huge++;
			miss = 0;
		} else if (++miss >= MISS_LIMIT) {
			r++;
			break;
		}
	}
	/*
	 * Regions [0, r) were touched: keep their first page only.  One
	 * region at a time, so that the first page is mlocked right after its
	 * huge page is split: kcompactd, running on another CPU, may move a
	 * small page that is not mlocked yet.
	 */
	if (r < nr)
		munmap(a + r * HPAGE, (nr - r) * HPAGE);
	if (r && madvise(a, r * HPAGE, MADV_NOHUGEPAGE)) {
		perror("fragment: madvise(MADV_NOHUGEPAGE)");
		return -1;
	}
	for (nr = 0; nr < r; nr++) {
		char *region = a + nr * HPAGE;

		if (madvise(region + PAGE, HPAGE - PAGE, MADV_DONTNEED)) {
			perror("fragment: madvise(MADV_DONTNEED)");
			return -1;
		}
		split_now(region, PAGE);
		if (syscall(SYS_mlock2, region, PAGE, MLOCK_ONFAULT)) {
			perror("fragment: mlock2");
			return -1;
		}
	}
	if (r)
		drain_mlock_batches(a);
	if (verbose)
		fprintf(stderr, "fragment: round: %lu regions, %lu huge, MemAvailable %lu MiB, "
			"%lu of %lu kept pages moved\n", r, huge, meminfo("MemAvailable") / MIB,
			count_moved(NULL), nr_kept);
	return huge;
}

int main(int argc, char **argv)
{
	unsigned long reserve_mib = 32, max_mib = 1UL << 20, free_pages = 0, huge = 0;
	const char *pidfile = NULL;
	int exit_now = 0, keep_sysctl = 0, opt, rounds = 0, have_mode;
	char mode[32], thp[32];
	long before_u9, u9, got;
	unsigned long moved, still_huge, i;
	sigset_t set;

	while ((opt = getopt(argc, argv, "r:m:p:eUvh")) != -1) {
		switch (opt) {
		case 'r':
			if (parse_ulong(optarg, 1UL << 20, &reserve_mib))
				goto bad;
			break;
		case 'm':
			if (parse_ulong(optarg, 1UL << 20, &max_mib) || max_mib < 2)
				goto bad;
			break;
		case 'p':
			pidfile = optarg;
			break;
		case 'e':
			exit_now = 1;
			break;
		case 'U':
			keep_sysctl = 1;
			break;
		case 'v':
			verbose = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			goto bad;
		}
	}
	if (optind != argc)
		goto bad;

	/* SIGTERM/SIGINT are taken with sigwait() at the end. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);

	if (read_selected("/sys/kernel/mm/transparent_hugepage/enabled", thp, sizeof(thp)) ||
	    !strcmp(thp, "never")) {
		fprintf(stderr, "fragment: transparent huge pages are off "
			"(/sys/kernel/mm/transparent_hugepage/enabled)\n");
		return 1;
	}
	if (!keep_sysctl &&
	    write_file("/proc/sys/vm/compact_unevictable_allowed", "0\n")) {
		perror("fragment: compact_unevictable_allowed");
		return 1;
	}
	have_mode = !read_selected(gcma_mode_file, mode, sizeof(mode));
	if (have_mode && write_file(gcma_mode_file, "never\n")) {
		perror("fragment: writing never to /sys/kernel/mm/gcma/thp/mode");
		return 1;
	}
	before_u9 = unusable_9(NULL);
	pinned = calloc(BLOCK_BITS / 8, 1);
	max_kept = meminfo("MemTotal") / HPAGE + 1024;
	kept = calloc(max_kept, sizeof(*kept));
	pm = open("/proc/self/pagemap", O_RDONLY);
	kf = open("/proc/kpageflags", O_RDONLY);
	if (!pinned || !kept || pm < 0 || kf < 0) {
		perror("fragment: pagemap/kpageflags");
		return 1;
	}

	do {
		got = huge_round(reserve_mib * MIB, max_mib * MIB);
		if (got < 0)
			return 1;
		huge += got;
		rounds++;
	} while (got > 0 && rounds < MAX_ROUNDS);
	if (have_mode) {
		char buf[40];

		snprintf(buf, sizeof(buf), "%s\n", mode);
		if (write_file(gcma_mode_file, buf)) {
			perror("fragment: restoring /sys/kernel/mm/gcma/thp/mode");
			return 1;
		}
	}

	/*
	 * The kept pages should still be where they were, as small pages;
	 * count the blocks they are in now.
	 */
	moved = count_moved(&still_huge);
	memset(pinned, 0, BLOCK_BITS / 8);
	nr_pinned = 0;
	for (i = 0; i < nr_kept; i++) {
		uint64_t e = pagemap(kept[i].addr);

		if (e & PM_PRESENT)
			pin_block(e & PM_PFN_MASK);
	}
	u9 = unusable_9(&free_pages);
	printf("FRAGMENT ready blocks=%lu held_kib=%lu rounds=%d huge=%lu "
	       "moved=%lu still_huge=%lu free_kib=%lu u9_before=%ld u9=%ld\n",
	       nr_pinned, nr_pinned * PAGE / 1024, rounds, huge, moved, still_huge,
	       free_pages * (PAGE / 1024), before_u9, u9);
	printf("fragment: pinned one mlocked 4 KiB page in each of %lu 2 MiB blocks "
	       "(%lu KiB held), %lu MiB free, unusable index at order 9 %ld.%03ld "
	       "(was %ld.%03ld)\n",
	       nr_pinned, nr_pinned * PAGE / 1024, free_pages * PAGE / MIB,
	       u9 / 1000, u9 % 1000, before_u9 / 1000, before_u9 % 1000);
	fflush(stdout);
	if (pidfile) {
		FILE *f = fopen(pidfile, "w");

		if (!f || fprintf(f, "%d\n", getpid()) < 0 || fclose(f)) {
			perror("fragment: pid file");
			return 1;
		}
	}
	if (exit_now)
		return 0;
	for (;;) {
		int sig;

		if (!sigwait(&set, &sig))
			break;
	}
	if (pidfile)
		unlink(pidfile);
	return 0;
bad:
	usage(stderr);
	return 2;
}
