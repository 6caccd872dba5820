// SPDX-License-Identifier: GPL-2.0
/*
 * fragpin: leave no free 2 MiB block in physical memory, so that order-9
 * (THP) allocations from the buddy allocator fail, and hold that state.
 *
 *   fragpin [-m MARGIN_MIB] [-r READY_FILE] [-z] [-v]
 *
 * 0. With -z, first makes the kernel allocate the huge zero page and keeps
 *    it mapped (see hold_huge_zero_page()).
 * 1. Takes all free memory but MARGIN_MIB (default 32) in base pages
 *    (MADV_NOHUGEPAGE), mlock()ed (mlockall: swap must not take them away
 *    before their frames are read), and reads each page's frame from
 *    /proc/self/pagemap (root only).
 * 2. Keeps one page of each 2 MiB physical block it got, and unlocks and
 *    gives back every other page: each block it touched now has one
 *    unevictable page in it.  With vm.compact_unevictable_allowed=0 (the
 *    caller sets it) compaction does not move those pages, so no block
 *    can be made whole again.
 * 3. The blocks it did not get (the margin) may still be free whole: it
 *    raises vm.nr_hugepages by their number, until /proc/pagetypeinfo
 *    shows no free block of order >= 9 a THP could take (outside ZONE_DMA,
 *    which user memory does not reach, and the high-order atomic reserve).  The hugetlb pool takes them from the buddy allocator
 *    only, never from a GCMA THP area, whatever the GCMA THP mode; the
 *    kernel needs CONFIG_HUGETLBFS.
 * 4. Asks for one hugetlb page more, which empties the per-CPU lists,
 *    where freed THPs wait invisible to /proc/pagetypeinfo for the next
 *    THP allocation, and takes the blocks that freed.
 *
 * Then it prints one summary line, creates READY_FILE if given, and holds
 * everything until killed; ten times a second it takes the blocks that
 * have become whole since (as in step 3, one line on stderr when it took
 * some).  Exit 0 never (it sleeps), 1 error, 2 usage error.
 *
 * Our own minimal version for the selftest scenario; see also fragment.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define BLOCK_ORDER 9			/* pages per 2 MiB block: 1 << 9 */
#define PFN_MASK ((1ULL << 55) - 1)
#define PM_PRESENT (1ULL << 63)

static long page;
static int verbose;

static void die(const char *what)
{
	fprintf(stderr, "fragpin: %s: %s\n", what, strerror(errno));
	exit(1);
}

static long meminfo_kb(const char *key)
{
	char line[256];
	size_t n = strlen(key);
	long v = -1;
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		die("/proc/meminfo");
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':') {
			v = strtol(line + n + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

/*
 * Free blocks of order >= 9, in units of 2 MiB, that a THP could take:
 * outside ZONE_DMA, on the free lists of the unmovable, movable and
 * reclaimable types (not the high-order atomic reserve, CMA, isolated).
 */
static long free_huge_blocks(void)
{
	char line[512], zone[32], type[32];
	long total = 0;
	FILE *f = fopen("/proc/pagetypeinfo", "r");

	if (!f)
		die("/proc/pagetypeinfo");
	while (fgets(line, sizeof(line), f)) {
		char *p = line;
		int order = 0, off;
		long cnt;

		if (sscanf(p, "Node %*d, zone %31[^,], type %31s%n", zone, type, &off) != 2)
			continue;
		if (!strcmp(zone, "DMA") || (strcmp(type, "Unmovable") && strcmp(type, "Movable") &&
					     strcmp(type, "Reclaimable")))
			continue;
		for (p += off; sscanf(p, "%ld%n", &cnt, &off) == 1; p += off, order++)
			if (order >= BLOCK_ORDER)
				total += cnt << (order - BLOCK_ORDER);
	}
	fclose(f);
	return total;
}

/* Unlock and free a range of the base-page mapping. */
static void give_back(char *p, size_t len)
{
	if (munlock(p, len))
		die("munlock");
	if (madvise(p, len, MADV_DONTNEED))
		die("madvise(MADV_DONTNEED)");
}

#define NR_HUGEPAGES "/proc/sys/vm/nr_hugepages"

static long nr_hugepages(void)
{
	long nr = -1;
	FILE *f = fopen(NR_HUGEPAGES, "r");

	if (!f || fscanf(f, "%ld", &nr) != 1)
		die(NR_HUGEPAGES " (CONFIG_HUGETLBFS?)");
	fclose(f);
	return nr;
}

static void set_nr_hugepages(long nr)
{
	FILE *f = fopen(NR_HUGEPAGES, "w");

	if (!f)
		die(NR_HUGEPAGES);
	fprintf(f, "%ld\n", nr);
	if (fclose(f))
		die("writing " NR_HUGEPAGES);
}

/*
 * Takes the free blocks of 2 MiB into the hugetlb pool, which takes them
 * from the buddy allocator only (a THP fault could get a block of a GCMA
 * THP area instead), until none is left or a round takes none.  Returns
 * the number of blocks taken.
 */
static long take_free_blocks(void)
{
	long left, prev = -1, nr0 = nr_hugepages();

	while ((left = free_huge_blocks()) > 0 && (prev < 0 || left < prev)) {
		set_nr_hugepages(nr_hugepages() + left);
		prev = left;
		if (verbose)
			fprintf(stderr, "fragpin: %ld free 2 MiB blocks, %ld huge pages now\n",
				left, nr_hugepages());
	}
	return nr_hugepages() - nr0;
}

#define USE_ZERO_PAGE "/sys/kernel/mm/transparent_hugepage/use_zero_page"

/*
 * -z: a read fault on a 2 MiB aligned MADV_HUGEPAGE range maps the huge
 * zero page, which the kernel allocates on first use, from the buddy
 * allocator only (a GCMA THP area never serves it), and frees through a
 * shrinker when no process maps it.  Once memory is fragmented that
 * allocation fails (or succeeds only when direct compaction happens to
 * make a block whole before this program takes it), and read faults that
 * would map it fall back to the 4 KiB zero page: the selftests' huge
 * zero page cases would skip.  Mapped here, before fragmenting, it stays
 * allocated while this program runs, as the hugetlb pages the caller
 * reserves before fragmenting stay in the pool.  The range is read-only:
 * mlockall() must not populate it with copies.  Returns 1 when the page
 * is mapped, 0 when the kernel has the huge zero page disabled, and exits
 * on any other failure.
 */
static int hold_huge_zero_page(void)
{
	size_t huge = (size_t)page << BLOCK_ORDER;
	uint64_t entry;
	char *map, *mem;
	int enabled = 0, fd;
	FILE *f = fopen(USE_ZERO_PAGE, "r");

	if (!f || fscanf(f, "%d", &enabled) != 1)
		die(USE_ZERO_PAGE " (CONFIG_TRANSPARENT_HUGEPAGE?)");
	fclose(f);
	if (!enabled)
		return 0;
	map = mmap(NULL, 2 * huge, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED)
		die("mmap");
	mem = (char *)(((uintptr_t)map + huge - 1) & ~(uintptr_t)(huge - 1));
	if (madvise(mem, huge, MADV_HUGEPAGE))
		die("madvise(MADV_HUGEPAGE)");
	*(volatile char *)mem;
	/* Only a huge mapping has the next page mapped as well. */
	fd = open("/proc/self/pagemap", O_RDONLY);
	if (fd < 0)
		die("/proc/self/pagemap");
	if (pread(fd, &entry, sizeof(entry), ((uintptr_t)mem / page + 1) * sizeof(entry)) !=
	    sizeof(entry))
		die("reading /proc/self/pagemap");
	close(fd);
	if (!(entry & PM_PRESENT)) {
		fprintf(stderr, "fragpin: a read fault did not map the huge zero page "
			"(thp_zero_page_alloc_failed in /proc/vmstat?)\n");
		exit(1);
	}
	return 1;
}

static void usage(void)
{
	fprintf(stderr, "usage: fragpin [-m MARGIN_MIB] [-r READY_FILE] [-z] [-v]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	long margin_mib = 32, avail_kb, npages, i, run, kept = 0, huge, left;
	const char *ready = NULL, *zero = "";
	uint64_t *pfns;
	uint8_t *seen;
	char *mem;
	size_t len, seen_len = 1 << 20;
	int opt, fd, hold_zero = 0;

	while ((opt = getopt(argc, argv, "m:r:vz")) != -1) {
		switch (opt) {
		case 'm':
			margin_mib = atol(optarg);
			if (margin_mib < 0)
				usage();
			break;
		case 'r':
			ready = optarg;
			break;
		case 'v':
			verbose = 1;
			break;
		case 'z':
			hold_zero = 1;
			break;
		default:
			usage();
		}
	}
	if (optind != argc)
		usage();
	page = sysconf(_SC_PAGESIZE);
	if (hold_zero)
		zero = hold_huge_zero_page() ? ", holding the huge zero page" :
					       ", huge zero page disabled";

	/*
	 * 1. All free memory but the margin, in base pages.  MemFree counts
	 * the watermarks and ZONE_DMA, which user memory cannot have, and
	 * these pages are locked (reclaim cannot help): MemAvailable, which
	 * leaves them out, is the limit when it is lower.
	 */
	avail_kb = meminfo_kb("MemFree");
	if (meminfo_kb("MemAvailable") < avail_kb)
		avail_kb = meminfo_kb("MemAvailable");
	avail_kb -= margin_mib * 1024;
	if (avail_kb <= 0) {
		fprintf(stderr, "fragpin: free memory is below the margin of %ld MiB\n", margin_mib);
		return 1;
	}
	npages = avail_kb * 1024 / page;
	len = (size_t)npages * page;
	if (mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT))
		die("mlockall");
	mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		die("mmap");
	if (madvise(mem, len, MADV_NOHUGEPAGE))
		die("madvise(MADV_NOHUGEPAGE)");
	/* One call instead of a fault per page: much faster under TCG. */
	if (madvise(mem, len, MADV_POPULATE_WRITE))
		for (i = 0; i < npages; i++)
			mem[i * page] = 1;

	pfns = malloc(npages * sizeof(*pfns));
	seen = calloc(seen_len, 1);
	if (!pfns || !seen)
		die("malloc");
	fd = open("/proc/self/pagemap", O_RDONLY);
	if (fd < 0)
		die("/proc/self/pagemap");
	if (pread(fd, pfns, npages * sizeof(*pfns),
		  (uintptr_t)mem / page * sizeof(*pfns)) != (ssize_t)(npages * sizeof(*pfns)))
		die("reading /proc/self/pagemap");
	close(fd);

	/*
	 * 2. The first page of each block stays locked; the runs of pages
	 * between kept ones are unlocked and go back, one call each.
	 */
	run = 0;
	for (i = 0; i < npages; i++) {
		uint64_t pfn = pfns[i] & PFN_MASK;
		size_t blk = pfn >> BLOCK_ORDER;

		if (!(pfns[i] & PM_PRESENT) || !pfn) {
			fprintf(stderr, "fragpin: no frame number in pagemap (not root?)\n");
			return 1;
		}
		if (blk >= seen_len * 8) {
			size_t n = (blk / 8 + 1) * 2;

			seen = realloc(seen, n);
			if (!seen)
				die("realloc");
			memset(seen + seen_len, 0, n - seen_len);
			seen_len = n;
		}
		if (seen[blk / 8] & (1 << (blk % 8)))
			continue;
		seen[blk / 8] |= 1 << (blk % 8);
		if (i > run)
			give_back(mem + run * page, (i - run) * page);
		kept++;
		run = i + 1;
	}
	if (npages > run)
		give_back(mem + run * page, (npages - run) * page);
	free(pfns);

	/* 3. Whole blocks still free (they were in the margin). */
	huge = take_free_blocks();
	/*
	 * 4. Freed THPs wait on the per-CPU lists, out of /proc/pagetypeinfo,
	 * and the next THP allocation there takes one.  One more hugetlb page
	 * than there are free blocks makes the allocation take the slow path,
	 * which empties those lists (and unreserves a high-order atomic
	 * block) before it gives up; then take what that freed.
	 */
	set_nr_hugepages(nr_hugepages() + 1);
	huge += take_free_blocks();
	left = free_huge_blocks();
	printf("fragpin: pinned one page in %ld blocks of 2 MiB, took %ld more as hugetlb pages, "
	       "%ld free blocks of order >= 9 left, MemFree %ld MiB%s\n",
	       kept, huge, left, meminfo_kb("MemFree") / 1024, zero);
	fflush(stdout);
	if (ready) {
		fd = open(ready, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			die(ready);
		close(fd);
	}
	/*
	 * Hold it, and ten times a second take the blocks that have become
	 * whole since (pages that were on per-CPU lists, freed kernel memory,
	 * memory that reclaim and kcompactd consolidated).
	 */
	for (;;) {
		usleep(100000);
		huge = take_free_blocks();
		if (huge)
			fprintf(stderr, "fragpin: took %ld blocks freed since\n", huge);
	}
}
