// SPDX-License-Identifier: GPL-2.0
/*
 * thp_fault - fault anonymous memory in 2 MiB regions, time it, see how much
 * of it is backed by transparent huge pages, then run operations on it.
 *
 *   thp_fault -m MIB [-H | -N] [-s SEED] [-a LO-HI] [-w STATEFILE] [-c CPU]
 *             [-b NODE] [-o OP[,OP...]] [-q]
 *
 * -m N    map N MiB (a multiple of 2) of anonymous memory, 2 MiB aligned
 * -H, -N  madvise(MADV_HUGEPAGE) / madvise(MADV_NOHUGEPAGE) before faulting
 * -s S    pattern seed (default 1)
 * -a L-H  a physical range [L, H) of page frame numbers (decimal or 0x hex),
 *         e.g. a GCMA area: report how many of our pages and huge pages
 *         are in it
 * -w F    state file for "pause" (see below)
 * -c CPU  run on CPU only (sched_setaffinity), e.g. on a node of choice
 * -b NODE set_mempolicy(MPOL_BIND) to NODE before mapping: every page of
 *         the mapping (huge pages and khugepaged's collapses included)
 *         must come from NODE
 * -o OPS  operations after the fault pass, comma-separated, in order:
 *   verify            check every word of every page still mapped
 *   write             write the pattern of the next generation everywhere
 *   rand:N            N random 8-byte read+write-back accesses (xorshift64,
 *                     fixed seed), timed
 *   pause[:NAME]      write "NAME PID" to the state file and wait for SIGUSR1
 *   munmap:OFF:LEN    in every 2 MiB region, munmap [OFF, OFF+LEN) KiB
 *   dontneed:OFF:LEN  in every 2 MiB region, MADV_DONTNEED [OFF, OFF+LEN)
 *                     KiB (reads back as zeroes)
 *   unmapall          munmap the whole mapping
 *   split             split our huge pages through debugfs split_huge_pages
 *   collapse          madvise(MADV_COLLAPSE) the mapping; EAGAIN (a page
 *                     to collapse was isolated or referenced by someone
 *                     else, compaction under fragmentation mostly) is
 *                     retried up to 20 times, 50 ms apart; regions
 *                     already collapsed are skipped by the retry
 *   hugepage, nohugepage  madvise(MADV_HUGEPAGE / MADV_NOHUGEPAGE) the
 *                     mapping (MADV_HUGEPAGE also registers it with
 *                     khugepaged)
 *   migrate[:NODE]    mbind(MPOL_BIND, MPOL_MF_MOVE) to NODE (default: the
 *                     node after the one of the first page), then check with
 *                     move_pages() that every page is there
 *   fork[:pause]      fork; the child writes the next generation (copy on
 *                     write), verifies it, optionally pauses (state name
 *                     "child"), and exits; the parent verifies that its own
 *                     data did not change
 *   wait-huge:SEC[:P] poll up to SEC seconds until AnonHugePages of the
 *                     mapping is > 0 and at least P thousandths of the
 *                     mapping (khugepaged)
 *   sleep:SEC
 * -q      only the machine-readable lines
 *
 * The fault pass writes the first word of every 4 KiB page of one 2 MiB
 * region after the other and times each region (CLOCK_MONOTONIC); a second,
 * untimed pass fills every page with a pattern that depends on the offset,
 * the seed and a generation number, so that any data moved to the wrong
 * place or lost is found by "verify".
 *
 * Output, one line each (key=value):
 *   THP-FAULT mib= regions= fault_mean_ns= fault_p99_ns= fault_max_ns=
 *             anon_huge_kb= rss_kb= coverage_permille= huge_regions=
 *             area_pages= huge_in_area= node0_pages= ...
 *   THP-OP op=NAME ... (the same memory figures after each operation)
 *   THP-RAND ops= ns= ns_per_op=
 * Exit status: 0 ok, 1 runtime or verification error, 2 usage error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KIB 1024UL
#define MIB (1024UL * 1024UL)
#define PAGE 4096UL
#define HPAGE (2 * MIB)
#define PAGES_PER_HPAGE (HPAGE / PAGE)
#define WORDS_PER_PAGE (PAGE / 8)
#define MAX_NODES 64

#define PM_PRESENT (1ULL << 63)
#define PM_PFN_MASK ((1ULL << 55) - 1)
#define KPF_COMPOUND_HEAD 15
#define KPF_THP 22

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
#define MPOL_BIND_ 2
#define MPOL_MF_STRICT_ (1 << 0)
#define MPOL_MF_MOVE_ (1 << 1)

enum { LIVE = 0, ZERO = 1, GONE = 2 };

static char *base;
static size_t len, npages, nregions;
static uint8_t *state;			/* per page: LIVE, ZERO or GONE */
static uint64_t seed = 1, gen;
static unsigned long area_lo, area_hi;
static int have_area, quiet;
static const char *state_file;
static sigset_t usr1;

static void usage(FILE *f)
{
	fprintf(f, "usage: thp_fault -m MIB [-H|-N] [-s SEED] [-a LO-HI] [-w STATEFILE] [-c CPU] "
		"[-o OP[,OP...]] [-q]\n"
		"ops: verify write rand:N pause[:NAME] munmap:OFF:LEN dontneed:OFF:LEN unmapall\n"
		"     split collapse hugepage nohugepage migrate[:NODE] fork[:pause] wait-huge:SEC[:P] sleep:SEC\n");
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static inline uint64_t pattern(size_t word, uint64_t g)
{
	uint64_t x = (word + 1) * 0x9e3779b97f4a7c15ULL ^ (seed << 32) ^ (g * 0xff51afd7ed558ccdULL);

	return x ^ (x >> 29);
}

static int parse_ul(const char *s, unsigned long *out)
{
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	*out = strtoul(s, &end, 0);
	return errno || *end ? -1 : 0;
}

/* Write the pattern of generation g to every LIVE page (first word too). */
static void fill(uint64_t g)
{
	uint64_t *w = (uint64_t *)base;
	size_t p, i;

	for (p = 0; p < npages; p++) {
		if (state[p] != LIVE)
			continue;
		for (i = 0; i < WORDS_PER_PAGE; i++)
			w[p * WORDS_PER_PAGE + i] = pattern(p * WORDS_PER_PAGE + i, g);
	}
}

/* 0 when every LIVE page holds generation g and every ZERO page zeroes. */
static int verify(uint64_t g, const char *who)
{
	const uint64_t *w = (const uint64_t *)base;
	size_t p, i, bad = 0;

	for (p = 0; p < npages; p++) {
		if (state[p] == GONE)
			continue;
		for (i = 0; i < WORDS_PER_PAGE; i++) {
			size_t k = p * WORDS_PER_PAGE + i;
			uint64_t want = state[p] == LIVE ? pattern(k, g) : 0;

			if (w[k] == want)
				continue;
			if (bad++ < 5)
				fprintf(stderr, "thp_fault: %s: offset %#zx: %#" PRIx64
					" instead of %#" PRIx64 "\n", who, k * 8, w[k], want);
		}
	}
	if (bad) {
		fprintf(stderr, "thp_fault: %s: %zu wrong words\n", who, bad);
		return -1;
	}
	return 0;
}

struct mem {
	unsigned long anon_huge_kb, rss_kb, huge_regions, area_pages, huge_in_area, present;
	unsigned long node_pages[MAX_NODES];
	/* pages move_pages() found mapped: kswapd may swap some out between
	 * the pagemap read and the query
	 */
	unsigned long node_present;
	int nodes_known;
};

/* Rss and AnonHugePages of the VMAs inside our mapping (/proc/self/smaps). */
static int smaps_range(struct mem *m)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	int inside = 0;

	if (!f) {
		perror("thp_fault: /proc/self/smaps");
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		unsigned long s, e, v;

		if (sscanf(line, "%lx-%lx ", &s, &e) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			inside = s >= (unsigned long)base && e <= (unsigned long)base + len;
			continue;
		}
		if (!inside)
			continue;
		if (sscanf(line, "Rss: %lu kB", &v) == 1)
			m->rss_kb += v;
		else if (sscanf(line, "AnonHugePages: %lu kB", &v) == 1)
			m->anon_huge_kb += v;
	}
	fclose(f);
	return 0;
}

/*
 * Where our pages are: pfns from pagemap, THP heads from kpageflags, nodes
 * from move_pages().  Fails softly (fields stay 0) without the files.
 */
static void physical(struct mem *m)
{
	int pm = open("/proc/self/pagemap", O_RDONLY);
	int kf = open("/proc/kpageflags", O_RDONLY);
	uint64_t *ent = malloc(PAGES_PER_HPAGE * sizeof(*ent));
	void **pages = malloc(npages * sizeof(*pages));
	int *status = malloc(npages * sizeof(*status));
	size_t r, i, n = 0;

	if (pm < 0 || !ent || !pages || !status)
		goto out;
	for (r = 0; r < nregions; r++) {
		char *a = base + r * HPAGE;
		uint64_t flags = 0;

		if (pread(pm, ent, PAGES_PER_HPAGE * sizeof(*ent),
			  (off_t)((uintptr_t)a / PAGE * sizeof(*ent))) !=
		    (ssize_t)(PAGES_PER_HPAGE * sizeof(*ent)))
			goto out;
		for (i = 0; i < PAGES_PER_HPAGE; i++) {
			uint64_t pfn = ent[i] & PM_PFN_MASK;

			if (!(ent[i] & PM_PRESENT) || state[r * PAGES_PER_HPAGE + i] == GONE)
				continue;
			if (have_area && pfn >= area_lo && pfn < area_hi)
				m->area_pages++;
			m->present++;
			pages[n++] = a + i * PAGE;
		}
		if (kf >= 0 && (ent[0] & PM_PRESENT) &&
		    pread(kf, &flags, sizeof(flags),
			  (off_t)((ent[0] & PM_PFN_MASK) * sizeof(flags))) == sizeof(flags) &&
		    (flags & (1ULL << KPF_THP)) && (flags & (1ULL << KPF_COMPOUND_HEAD))) {
			uint64_t pfn = ent[0] & PM_PFN_MASK;

			m->huge_regions++;
			if (have_area && pfn >= area_lo && pfn < area_hi)
				m->huge_in_area++;
		}
	}
	if (n && !syscall(SYS_move_pages, 0, n, pages, NULL, status, 0)) {
		for (i = 0; i < n; i++)
			if (status[i] >= 0 && status[i] < MAX_NODES) {
				m->node_pages[status[i]]++;
				m->node_present++;
			}
		m->nodes_known = 1;
	}
out:
	if (pm >= 0)
		close(pm);
	if (kf >= 0)
		close(kf);
	free(ent);
	free(pages);
	free(status);
}

static int measure(struct mem *m)
{
	memset(m, 0, sizeof(*m));
	if (smaps_range(m))
		return -1;
	physical(m);
	return 0;
}

static void print_mem(const struct mem *m)
{
	int n;

	printf(" anon_huge_kb=%lu rss_kb=%lu coverage_permille=%lu huge_regions=%lu",
	       m->anon_huge_kb, m->rss_kb, m->rss_kb ? m->anon_huge_kb * 1000 / m->rss_kb : 0,
	       m->huge_regions);
	if (have_area)
		printf(" area_pages=%lu huge_in_area=%lu", m->area_pages, m->huge_in_area);
	if (m->nodes_known)
		for (n = 0; n < MAX_NODES; n++)
			if (m->node_pages[n])
				printf(" node%d_pages=%lu", n, m->node_pages[n]);
	printf("\n");
}

static int report_op(const char *op)
{
	struct mem m;

	if (measure(&m))
		return -1;
	printf("THP-OP op=%s", op);
	print_mem(&m);
	fflush(stdout);
	return 0;
}

static int do_pause(const char *name)
{
	char tmp[4096];
	FILE *f;
	int sig;

	if (!state_file) {
		fprintf(stderr, "thp_fault: pause needs -w STATEFILE\n");
		return -1;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", state_file, getpid());
	f = fopen(tmp, "w");
	if (!f || fprintf(f, "%s %d\n", name, getpid()) < 0 || fclose(f) ||
	    rename(tmp, state_file)) {
		perror("thp_fault: state file");
		return -1;
	}
	fflush(stdout);
	if (sigwait(&usr1, &sig))
		return -1;
	return 0;
}

/* Apply fn to [OFF, OFF+LEN) KiB of every 2 MiB region, mark pages st. */
static int per_region(const char *arg, int st)
{
	unsigned long off, l;
	char buf[64], *colon;
	size_t r, p;

	snprintf(buf, sizeof(buf), "%s", arg ? arg : "");
	colon = strchr(buf, ':');
	if (!colon)
		return -2;
	*colon = 0;
	if (parse_ul(buf, &off) || parse_ul(colon + 1, &l) || !l || off % 4 || l % 4 ||
	    off + l > HPAGE / KIB)
		return -2;
	for (r = 0; r < nregions; r++) {
		char *a = base + r * HPAGE + off * KIB;
		int rc = st == GONE ? munmap(a, l * KIB) : madvise(a, l * KIB, MADV_DONTNEED);

		if (rc) {
			perror(st == GONE ? "thp_fault: munmap" : "thp_fault: MADV_DONTNEED");
			return -1;
		}
		for (p = off * KIB / PAGE; p < (off + l) * KIB / PAGE; p++)
			if (state[r * PAGES_PER_HPAGE + p] != GONE)
				state[r * PAGES_PER_HPAGE + p] = st;
	}
	return 0;
}

/*
 * MADV_COLLAPSE fails with EAGAIN when a page it has to copy is isolated or
 * referenced elsewhere for a moment; madvise(2) calls that transient.  The
 * scenarios fragment memory on purpose, so kcompactd isolates our pages
 * often enough that a 16 MiB collapse sometimes hits it (one CI run: 6 of 8
 * regions collapsed).  Retry; any other error stops at once.
 */
static int do_collapse(void)
{
	int tries;

	for (tries = 1;; tries++) {
		if (!madvise(base, len, MADV_COLLAPSE)) {
			if (tries > 1)
				printf("THP-COLLAPSE tries=%d\n", tries);
			return 0;
		}
		if (errno != EAGAIN || tries == 20)
			break;
		usleep(50000);
	}
	fprintf(stderr, "thp_fault: MADV_COLLAPSE (%d tries): %s\n", tries, strerror(errno));
	return -1;
}

static int do_split(void)
{
	char buf[128];
	int fd = open("/sys/kernel/debug/split_huge_pages", O_WRONLY);
	int n;

	if (fd < 0) {
		perror("thp_fault: /sys/kernel/debug/split_huge_pages");
		return -1;
	}
	n = snprintf(buf, sizeof(buf), "%d,%#lx,%#lx", getpid(), (unsigned long)base,
		     (unsigned long)base + len);
	if (write(fd, buf, n) != n) {
		perror("thp_fault: split_huge_pages write");
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

static int do_migrate(const char *arg)
{
	unsigned long node, mask[MAX_NODES / (8 * sizeof(long)) + 1] = { 0 };
	struct mem m;
	size_t live = 0, p;
	long rc;

	if (arg) {
		if (parse_ul(arg, &node) || node >= MAX_NODES)
			return -2;
	} else {
		int first = -1, n;

		if (measure(&m) || !m.nodes_known) {
			fprintf(stderr, "thp_fault: migrate: cannot tell the pages' node\n");
			return -1;
		}
		for (n = 0; n < MAX_NODES && first < 0; n++)
			if (m.node_pages[n])
				first = n;
		/* the next online node after it, wrapping around */
		node = MAX_NODES;
		for (n = 1; n < MAX_NODES && node == MAX_NODES; n++) {
			char path[64];

			snprintf(path, sizeof(path), "/sys/devices/system/node/node%d",
				 (first + n) % MAX_NODES);
			if (!access(path, F_OK))
				node = (first + n) % MAX_NODES;
		}
		if (node == MAX_NODES || (int)node == first) {
			fprintf(stderr, "thp_fault: migrate: no other node\n");
			return -1;
		}
	}
	mask[node / (8 * sizeof(long))] |= 1UL << (node % (8 * sizeof(long)));
	rc = syscall(SYS_mbind, base, len, MPOL_BIND_, mask, MAX_NODES + 1,
		     MPOL_MF_MOVE_ | MPOL_MF_STRICT_);
	if (rc) {
		fprintf(stderr, "thp_fault: mbind(node %lu, MPOL_MF_MOVE): %s\n", node,
			strerror(errno));
		return -1;
	}
	if (measure(&m) || !m.nodes_known)
		return -1;
	for (p = 0; p < npages; p++)
		live += state[p] != GONE;
	printf("THP-MIGRATE node=%lu pages_there=%lu mapped=%lu pages=%zu\n", node,
	       m.node_pages[node], m.node_present, live);
	if (m.node_pages[node] != m.node_present || !m.node_present) {
		fprintf(stderr, "thp_fault: migrate: %lu of %lu mapped pages on node %lu\n",
			m.node_pages[node], m.node_present, node);
		return -1;
	}
	return 0;
}

static int do_fork(const char *arg)
{
	int st, do_pause_child = arg && !strcmp(arg, "pause");
	pid_t pid;

	if (arg && !do_pause_child)
		return -2;
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		perror("thp_fault: fork");
		return -1;
	}
	if (!pid) {
		fill(gen + 1);
		if (verify(gen + 1, "fork child"))
			_exit(1);
		if (report_op("fork-child"))
			_exit(1);
		if (do_pause_child && do_pause("child"))
			_exit(1);
		_exit(0);
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "thp_fault: fork child failed (status %#x)\n", st);
		return -1;
	}
	return verify(gen, "fork parent");
}

static int do_rand(const char *arg)
{
	unsigned long n, i;
	uint64_t x = 0x2545f4914f6cdd1dULL, t0, t1, sum = 0;
	volatile uint64_t *w = (volatile uint64_t *)base;
	size_t nwords = len / 8, p;

	if (parse_ul(arg, &n) || !n)
		return -2;
	for (p = 0; p < npages; p++)
		if (state[p] != LIVE) {
			fprintf(stderr, "thp_fault: rand needs every page mapped\n");
			return -1;
		}
	t0 = now_ns();
	for (i = 0; i < n; i++) {
		size_t k;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		k = x % nwords;
		sum += w[k];
		w[k] = w[k];
	}
	t1 = now_ns();
	printf("THP-RAND ops=%lu ns=%" PRIu64 " ns_per_op=%" PRIu64 " sum=%" PRIx64 "\n", n,
	       t1 - t0, (t1 - t0) / n, sum);
	return 0;
}

static int wait_huge(const char *arg)
{
	unsigned long sec, permille = 0, i;
	char buf[64], *colon;
	struct mem m;

	snprintf(buf, sizeof(buf), "%s", arg ? arg : "");
	colon = strchr(buf, ':');
	if (colon) {
		*colon = 0;
		if (parse_ul(colon + 1, &permille) || permille > 1000)
			return -2;
	}
	if (parse_ul(buf, &sec))
		return -2;
	for (i = 0; i <= sec * 10; i++) {
		if (measure(&m))
			return -1;
		if (m.anon_huge_kb && m.anon_huge_kb * 1000 >= permille * (len / KIB))
			return 0;
		usleep(100000);
	}
	fprintf(stderr, "thp_fault: %lu KiB of %zu KiB in huge pages after %lu s\n",
		m.anon_huge_kb, len / KIB, sec);
	return -1;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int run_op(char *op)
{
	char *arg = strchr(op, ':');
	unsigned long v;
	int rc;

	if (arg)
		*arg++ = 0;
	if (!strcmp(op, "verify"))
		rc = arg ? -2 : verify(gen, "verify");
	else if (!strcmp(op, "write")) {
		gen++;
		fill(gen);
		rc = arg ? -2 : 0;
	} else if (!strcmp(op, "rand"))
		rc = do_rand(arg);
	else if (!strcmp(op, "pause"))
		rc = do_pause(arg ? arg : "pause");
	else if (!strcmp(op, "munmap"))
		rc = per_region(arg, GONE);
	else if (!strcmp(op, "dontneed"))
		rc = per_region(arg, ZERO);
	else if (!strcmp(op, "unmapall")) {
		rc = munmap(base, len);
		if (rc)
			perror("thp_fault: munmap");
		memset(state, GONE, npages);
	} else if (!strcmp(op, "split"))
		rc = arg ? -2 : do_split();
	else if (!strcmp(op, "hugepage") || !strcmp(op, "nohugepage")) {
		rc = madvise(base, len, op[0] == 'h' ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
		if (rc)
			perror("thp_fault: madvise");
	} else if (!strcmp(op, "collapse")) {
		rc = do_collapse();
	} else if (!strcmp(op, "migrate"))
		rc = do_migrate(arg);
	else if (!strcmp(op, "fork"))
		rc = do_fork(arg);
	else if (!strcmp(op, "wait-huge"))
		rc = wait_huge(arg);
	else if (!strcmp(op, "sleep")) {
		rc = parse_ul(arg, &v) ? -2 : 0;
		if (!rc)
			sleep(v);
	} else
		rc = -2;
	if (rc == -2)
		fprintf(stderr, "thp_fault: bad operation '%s%s%s'\n", op, arg ? ":" : "",
			arg ? arg : "");
	if (rc)
		return rc;
	return report_op(op);
}

int main(int argc, char **argv)
{
	unsigned long mib = 0;
	int advice = -1, opt, rc;
	char *ops = NULL, *op, *save;
	uint64_t *lat, sum = 0, t0, t1;
	size_t r, p;
	struct mem m;
	char *raw;

	while ((opt = getopt(argc, argv, "m:HNs:a:w:c:b:o:qh")) != -1) {
		switch (opt) {
		case 'm':
			if (parse_ul(optarg, &mib) || !mib || mib % 2 || mib > (1UL << 20))
				goto bad;
			break;
		case 'H':
			advice = MADV_HUGEPAGE;
			break;
		case 'N':
			advice = MADV_NOHUGEPAGE;
			break;
		case 's': {
			unsigned long s;

			if (parse_ul(optarg, &s))
				goto bad;
			seed = s;
			break;
		}
		case 'a': {
			char buf[64], *dash;

			snprintf(buf, sizeof(buf), "%s", optarg);
			dash = strchr(buf, '-');
			if (!dash)
				goto bad;
			*dash = 0;
			if (parse_ul(buf, &area_lo) || parse_ul(dash + 1, &area_hi) ||
			    area_hi <= area_lo)
				goto bad;
			have_area = 1;
			break;
		}
		case 'w':
			state_file = optarg;
			break;
		case 'c': {
			unsigned long cpu;
			cpu_set_t set;

			if (parse_ul(optarg, &cpu) || cpu >= CPU_SETSIZE)
				goto bad;
			CPU_ZERO(&set);
			CPU_SET(cpu, &set);
			if (sched_setaffinity(0, sizeof(set), &set)) {
				perror("thp_fault: sched_setaffinity");
				return 1;
			}
			break;
		}
		case 'b': {
			unsigned long node, mask[(MAX_NODES + 64) / 64] = { 0 };

			if (parse_ul(optarg, &node) || node >= MAX_NODES)
				goto bad;
			mask[node / 64] = 1UL << (node % 64);
			if (syscall(SYS_set_mempolicy, MPOL_BIND_, mask, MAX_NODES + 1)) {
				fprintf(stderr, "thp_fault: set_mempolicy(MPOL_BIND, node %lu): %s\n",
					node, strerror(errno));
				return 1;
			}
			break;
		}
		case 'o':
			ops = optarg;
			break;
		case 'q':
			quiet = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			goto bad;
		}
	}
	if (optind != argc || !mib)
		goto bad;

	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	sigprocmask(SIG_BLOCK, &usr1, NULL);

	len = mib * MIB;
	npages = len / PAGE;
	nregions = len / HPAGE;
	state = calloc(npages, 1);
	lat = calloc(nregions, sizeof(*lat));
	raw = mmap(NULL, len + HPAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!state || !lat || raw == MAP_FAILED) {
		perror("thp_fault: mmap");
		return 1;
	}
	base = (char *)(((uintptr_t)raw + HPAGE - 1) & ~(HPAGE - 1));
	if (base > raw)
		munmap(raw, base - raw);
	munmap(base + len, raw + HPAGE - base);
	if (advice >= 0 && madvise(base, len, advice)) {
		perror("thp_fault: madvise");
		return 1;
	}

	/* Timed fault pass: the first word of every page, region by region. */
	for (r = 0; r < nregions; r++) {
		uint64_t *w = (uint64_t *)(base + r * HPAGE);

		t0 = now_ns();
		for (p = 0; p < PAGES_PER_HPAGE; p++) {
			size_t k = (r * PAGES_PER_HPAGE + p) * WORDS_PER_PAGE;

			w[p * WORDS_PER_PAGE] = pattern(k, 0);
		}
		t1 = now_ns();
		lat[r] = t1 - t0;
		sum += lat[r];
	}
	fill(gen);
	if (measure(&m))
		return 1;
	qsort(lat, nregions, sizeof(*lat), cmp_u64);
	printf("THP-FAULT mib=%lu regions=%zu fault_mean_ns=%" PRIu64 " fault_p99_ns=%" PRIu64
	       " fault_max_ns=%" PRIu64, mib, nregions, sum / nregions,
	       lat[(nregions * 99 + 99) / 100 - 1], lat[nregions - 1]);
	print_mem(&m);
	if (!quiet)
		printf("thp_fault: %lu MiB in %zu regions of 2 MiB, %lu KiB of %lu KiB "
		       "resident in huge pages (%lu.%lu%%), fault+first write per region: "
		       "mean %" PRIu64 " us, p99 %" PRIu64 " us\n", mib, nregions,
		       m.anon_huge_kb, m.rss_kb,
		       m.rss_kb ? m.anon_huge_kb * 100 / m.rss_kb : 0,
		       m.rss_kb ? m.anon_huge_kb * 1000 / m.rss_kb % 10 : 0,
		       sum / nregions / 1000, lat[(nregions * 99 + 99) / 100 - 1] / 1000);
	fflush(stdout);

	for (op = ops ? strtok_r(ops, ",", &save) : NULL; op; op = strtok_r(NULL, ",", &save)) {
		rc = run_op(op);
		if (rc == -2)
			goto bad;
		if (rc) {
			fprintf(stderr, "thp_fault: operation %s failed\n", op);
			return 1;
		}
	}
	if (!quiet)
		printf("thp_fault: done\n");
	return 0;
bad:
	usage(stderr);
	return 2;
}
