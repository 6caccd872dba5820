// SPDX-License-Identifier: GPL-2.0
/*
 * vma_faultbench - page faults and VMA operations with the Bonsai VMA index
 * against the maple tree (the microbenchmark of the Bonsai paper, section
 * 7.3, through real faults), will-it-scale style.
 *
 *   vma_faultbench fault -t THREADS -p PAD [-c] [-d MS] [-w MS] [-n PAGES]
 *   vma_faultbench ops -p PAD [-d MS]
 *   vma_faultbench run [-r ROUNDS] [-d MS] [-T LIST] [-P LIST] [-C LIST]
 *                      [-O PAD] [-s NODE_BYTES]
 *
 * fault: THREADS threads, each with its own anonymous region of PAGES
 *   pages (default 2048, MADV_NOHUGEPAGE), write one byte to every page of
 *   it and drop it again with MADV_DONTNEED, in a loop: every write is one
 *   page fault.  The address space is padded with PAD single-page VMAs of
 *   alternating protection (so that they do not merge).  With -c one more
 *   thread maps and unmaps a page in a loop (mapping churn: the VMA tree
 *   changes under the faults).  After a warm-up of -w MS (default d/5) the
 *   threads' counts, getrusage() minflt and the bonsai_vma debugfs
 *   counters are read, again after -d MS (default 500); one line:
 *     VMA-FAULT threads= pad= churn= switch= ns= faults= minflt= churn_ops=
 *               <counter>=<delta>... vmas_added= nodes_added=
 *   and, with CONFIG_PER_VMA_LOCK_STATS, the deltas of /proc/vmstat's
 *   vma_lock_success/abort/retry/miss (switch=-1 and no counters: no
 *   bonsai_vma in this kernel; vmas_added and nodes_added are the growth
 *   of the vmas and nodes gauges from before the padding to the end of
 *   the run).
 *
 * ops: in an address space padded with PAD VMAs, for -d MS each: batches
 *   of 128 mmap()s of one page, each in a fresh VMA (a one-page hole
 *   between two, so nothing merges), then 128 munmap()s, each timed as a
 *   batch; then mprotect() of one page in the middle of a 64-page VMA to
 *   read-only (split into three) and back (merge into one); then fork()
 *   of the whole address space, the child exiting at once and waited
 *   for (dup_mmap() with the child's index built, and its teardown).
 *   One line:
 *     VMA-OPS pad= switch= mmap_ops= mmap_ns= munmap_ops= munmap_ns=
 *             mprotect_ops= mprotect_ns= fork_ops= fork_ns=
 *
 * run: the driver.  For each round, for each cell (THREADS x PAD x CHURN,
 *   then the ops cell with PAD -O, default 1000) it runs the cell twice,
 *   alternating: first with /sys/kernel/mm/bonsai_vma/enabled = 0 (the
 *   maple tree only), then = 1 (the index), each in a fresh child
 *   (fork + exec of this program) created after the switch was written:
 *   the switch decides whether a NEW address space gets an index.  Without
 *   the switch (a kernel without CONFIG_BONSAI_VMA) both runs use the
 *   maple tree and the table says so.  The switch is restored at the end.
 *   Lists are comma-separated (defaults -T 1,2,4 -P 10,1000,10000 -C 0,1).
 *   The table gives, per cell and configuration, the median (min-max)
 *   over the rounds, and the ratio index/maple of each round's two runs
 *   (median, min-max), the goal judged on that median; the counters per
 *   fault (timing-independent); the index's nodes per VMA.
 *   -s is the index's node size in bytes (the kernel's "VMA index node
 *   size N bytes"), for the memory per VMA.  Each child's line is printed
 *   with the prefix VMA-RUN, then the table, every line prefixed VMA-BENCH.
 *   Exit status 1 if a child failed, the crosscheck counted a difference,
 *   or the hits counter says that a child with the switch on did not use
 *   its index (< 0.5 hits per fault) or one with it off did (> 0.01).
 *
 * $VMA_FAULTBENCH_ROOT, if set, is prefixed to the kernel's paths (to try
 * the driver out on a host against a fake tree of those files).
 *
 * Exit status: 0 ok, 1 runtime error, 2 usage error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/*
 * The kernel's files; $VMA_FAULTBENCH_ROOT, if set, is put before them, so
 * that the driver can be tried out on a host against a fake tree.
 */
#define SWITCH_FILE "/sys/kernel/mm/bonsai_vma/enabled"
#define COUNTERS_DIR "/sys/kernel/debug/bonsai_vma"
static char switch_path[256], counters_dir[256], vmstat_path[256];

static const char *const counter_names[] = {
	"lookups", "hits", "misses", "retries", "fallback_noindex",
	"fallback_retries", "index_created", "index_dropped",
	"index_alloc_failed", "indexes", "vmas", "nodes",
	"crosscheck_checked", "crosscheck_diffs", "crosscheck_unverified",
};
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define NCOUNTERS ARRAY_SIZE(counter_names)
enum { C_ALLOC_FAILED = 8, C_VMAS = 10, C_NODES = 11, C_DIFFS = 13, C_UNVERIFIED = 14 };

static long page_size;

static void die(const char *what)
{
	fprintf(stderr, "vma_faultbench: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: vma_faultbench fault -t THREADS -p PAD [-c] [-d MS] [-w MS] [-n PAGES]\n"
		"       vma_faultbench ops -p PAD [-d MS]\n"
		"       vma_faultbench run [-r ROUNDS] [-d MS] [-T LIST] [-P LIST] [-C LIST] [-O PAD] [-s BYTES]\n");
	exit(2);
}

static long parse_num(const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0)
		usage();
	return v;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* The value of a one-number file, -1 if it cannot be read. */
static long long read_ll(const char *path)
{
	char buf[64];
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return strtoll(buf, NULL, 10);
}

static int have_counters(void)
{
	char path[320];

	snprintf(path, sizeof(path), "%s/lookups", counters_dir);
	return access(path, R_OK) == 0;
}

/*
 * The per-VMA lock's own counters (CONFIG_PER_VMA_LOCK_STATS): faults
 * handled under the VMA lock, and those that gave up and took mmap_lock,
 * whichever structure found the VMA.  Absent: -1.
 */
static const char *const vl_names[] = {
	"vma_lock_success", "vma_lock_abort", "vma_lock_retry", "vma_lock_miss",
};
#define NVL ARRAY_SIZE(vl_names)

static int read_vmstat(long long *v)
{
	char key[64];
	long long val;
	int found = 0;
	size_t i;
	FILE *f;

	for (i = 0; i < NVL; i++)
		v[i] = -1;
	f = fopen(vmstat_path, "r");
	if (!f)
		return 0;
	while (fscanf(f, "%63s %lld", key, &val) == 2)
		for (i = 0; i < NVL; i++)
			if (!strcmp(key, vl_names[i])) {
				v[i] = val;
				found = 1;
			}
	fclose(f);
	return found;
}

static void read_counters(long long *v)
{
	char path[320];
	size_t i;

	for (i = 0; i < NCOUNTERS; i++) {
		snprintf(path, sizeof(path), "%s/%s", counters_dir, counter_names[i]);
		v[i] = read_ll(path);
	}
}

/*
 * PAD single-page VMAs: one mapping, every other page made PROT_NONE, so
 * that neighbours differ in protection and cannot merge.  Never touched:
 * they only make the trees larger.
 */
static void pad_address_space(long pad)
{
	char *p;
	long i;

	if (!pad)
		return;
	p = mmap(NULL, pad * page_size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap padding");
	for (i = 1; i < pad; i += 2)
		if (mprotect(p + i * page_size, page_size, PROT_NONE))
			die("mprotect padding");
}

/* fault */

/*
 * Pages per thread: MADV_DONTNEED takes mmap_lock for reading (behind the
 * churn thread's writes) and, with more than one thread, flushes the
 * other CPUs' TLBs by IPI, which under TCG waits for every vCPU to be
 * scheduled on the host.  A large region makes that once per 2048 faults,
 * so that the figures are the faults' own.
 */
#define REGION_PAGES 2048

struct worker {
	/* written by its thread only, read by main: own cache line */
	unsigned long count __attribute__((aligned(64)));
	pthread_t tid;
	char *region;
	long pages;
};

static int stop;

static void *fault_thread(void *arg)
{
	struct worker *w = arg;
	unsigned long n = 0;
	long i;

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		for (i = 0; i < w->pages; i++) {
			w->region[i * page_size] = 1;
			__atomic_store_n(&w->count, ++n, __ATOMIC_RELAXED);
		}
		if (madvise(w->region, w->pages * page_size, MADV_DONTNEED))
			die("madvise(MADV_DONTNEED)");
	}
	return NULL;
}

/*
 * The paper's mapping thread: an mmap and an munmap of one page, in a
 * loop, never touched (so that every fault counted is a faulting thread's).
 * MAP_NORESERVE gives the VMA flags no other VMA here has, so it never
 * merges with a neighbour: every mmap inserts a VMA, every munmap removes
 * one.
 */
static unsigned long churn_ops __attribute__((aligned(64)));

static void *churn_thread(void *arg)
{
	unsigned long n = 0;
	void *p;

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		p = mmap(NULL, page_size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED)
			die("mmap churn");
		if (munmap(p, page_size))
			die("munmap churn");
		__atomic_store_n(&churn_ops, ++n, __ATOMIC_RELAXED);
	}
	return NULL;
}

static unsigned long sum_counts(struct worker *w, int threads)
{
	unsigned long s = 0;
	int i;

	for (i = 0; i < threads; i++)
		s += __atomic_load_n(&w[i].count, __ATOMIC_RELAXED);
	return s;
}

static long minflt(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt;
}

static int cmd_fault(int argc, char **argv)
{
	long threads = 0, pad = -1, ms = 500, warm = -1, pages = REGION_PAGES;
	long long c_start[NCOUNTERS], c0[NCOUNTERS], c1[NCOUNTERS], v0[NVL], v1[NVL];
	unsigned long f0, f1, ch0, ch1;
	int churn = 0, counters, vl, opt, i;
	long m0, m1;
	uint64_t t0, t1;
	pthread_t ctid;
	struct worker *w;
	size_t k;

	while ((opt = getopt(argc, argv, "t:p:cd:w:n:")) != -1) {
		switch (opt) {
		case 't':
			threads = parse_num(optarg);
			break;
		case 'p':
			pad = parse_num(optarg);
			break;
		case 'c':
			churn = 1;
			break;
		case 'd':
			ms = parse_num(optarg);
			break;
		case 'w':
			warm = parse_num(optarg);
			break;
		case 'n':
			pages = parse_num(optarg);
			break;
		default:
			usage();
		}
	}
	if (threads < 1 || threads > 64 || pad < 0 || pages < 1 || ms < 1)
		usage();
	if (warm < 0)
		warm = ms / 5;

	counters = have_counters();
	if (counters)
		read_counters(c_start);
	pad_address_space(pad);

	w = aligned_alloc(64, threads * sizeof(*w));
	if (!w)
		die("aligned_alloc");
	memset(w, 0, threads * sizeof(*w));
	for (i = 0; i < threads; i++) {
		w[i].pages = pages;
		w[i].region = mmap(NULL, pages * page_size, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (w[i].region == MAP_FAILED)
			die("mmap region");
		/* 4 KiB faults only: a huge page would make 1 fault of 512 */
		madvise(w[i].region, pages * page_size, MADV_NOHUGEPAGE);
	}
	for (i = 0; i < threads; i++)
		if (pthread_create(&w[i].tid, NULL, fault_thread, &w[i]))
			die("pthread_create");
	if (churn && pthread_create(&ctid, NULL, churn_thread, NULL))
		die("pthread_create");

	sleep_ms(warm);
	if (counters)
		read_counters(c0);
	vl = read_vmstat(v0);
	m0 = minflt();
	f0 = sum_counts(w, threads);
	ch0 = __atomic_load_n(&churn_ops, __ATOMIC_RELAXED);
	t0 = now_ns();
	sleep_ms(ms);
	t1 = now_ns();
	f1 = sum_counts(w, threads);
	ch1 = __atomic_load_n(&churn_ops, __ATOMIC_RELAXED);
	m1 = minflt();
	read_vmstat(v1);
	if (counters)
		read_counters(c1);
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (i = 0; i < threads; i++)
		pthread_join(w[i].tid, NULL);
	if (churn)
		pthread_join(ctid, NULL);

	printf("VMA-FAULT threads=%ld pad=%ld churn=%d switch=%lld ns=%llu faults=%lu minflt=%ld churn_ops=%lu",
	       threads, pad, churn, read_ll(switch_path), (unsigned long long)(t1 - t0),
	       f1 - f0, m1 - m0, ch1 - ch0);
	if (counters) {
		for (k = 0; k < NCOUNTERS; k++)
			printf(" %s=%lld", counter_names[k], c1[k] - c0[k]);
		printf(" vmas_added=%lld nodes_added=%lld",
		       c1[C_VMAS] - c_start[C_VMAS], c1[C_NODES] - c_start[C_NODES]);
	}
	if (vl)
		for (k = 0; k < NVL; k++)
			printf(" %s=%lld", vl_names[k], v1[k] - v0[k]);
	printf("\n");
	return 0;
}

/* ops */

#define OPS_BATCH 128
#define OPS_REGION 64

static int cmd_ops(int argc, char **argv)
{
	unsigned long mmaps = 0, munmaps = 0, mprotects = 0, forks = 0;
	uint64_t mmap_ns = 0, munmap_ns = 0, mprotect_ns = 0, fork_ns = 0, t, end;
	pid_t pid;
	int status;
	long pad = -1, ms = 500, i;
	char *base, *p, *region;
	int opt;

	while ((opt = getopt(argc, argv, "p:d:")) != -1) {
		switch (opt) {
		case 'p':
			pad = parse_num(optarg);
			break;
		case 'd':
			ms = parse_num(optarg);
			break;
		default:
			usage();
		}
	}
	if (pad < 0 || ms < 1)
		usage();
	pad_address_space(pad);

	/*
	 * A free range for the batch: reserved, then given back, so that the
	 * fixed mappings below land in it and nothing else does.  Mapping i
	 * is at page 2i: the holes keep them from merging.
	 */
	base = mmap(NULL, 2 * OPS_BATCH * page_size, PROT_NONE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
		die("mmap reserve");
	munmap(base, 2 * OPS_BATCH * page_size);
	end = now_ns() + ms * 1000000ull;
	do {
		t = now_ns();
		for (i = 0; i < OPS_BATCH; i++) {
			p = mmap(base + 2 * i * page_size, page_size, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
			if (p == MAP_FAILED)
				die("mmap");
		}
		mmap_ns += now_ns() - t;
		t = now_ns();
		for (i = 0; i < OPS_BATCH; i++)
			if (munmap(base + 2 * i * page_size, page_size))
				die("munmap");
		munmap_ns += now_ns() - t;
		mmaps += OPS_BATCH;
		munmaps += OPS_BATCH;
	} while (now_ns() < end);

	/*
	 * PROT_NONE guard pages on both sides, so that the region is a VMA of
	 * its own: making one page read-only splits it into three, making it
	 * writable again merges them back.
	 */
	region = mmap(NULL, (OPS_REGION + 2) * page_size, PROT_NONE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (region == MAP_FAILED)
		die("mmap region");
	region += page_size;
	if (mprotect(region, OPS_REGION * page_size, PROT_READ | PROT_WRITE))
		die("mprotect region");
	end = now_ns() + ms * 1000000ull;
	i = 0;
	do {
		p = region + (1 + i++ % (OPS_REGION - 2)) * page_size;
		t = now_ns();
		if (mprotect(p, page_size, PROT_READ) ||
		    mprotect(p, page_size, PROT_READ | PROT_WRITE))
			die("mprotect");
		mprotect_ns += now_ns() - t;
		mprotects += 2;
	} while (now_ns() < end);

	/* The child exits at once: the copy, the index and the teardown. */
	end = now_ns() + ms * 1000000ull;
	do {
		t = now_ns();
		pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0)
			_exit(0);
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0)
			die("fork child");
		fork_ns += now_ns() - t;
		forks++;
	} while (now_ns() < end);

	printf("VMA-OPS pad=%ld switch=%lld mmap_ops=%lu mmap_ns=%llu munmap_ops=%lu munmap_ns=%llu mprotect_ops=%lu mprotect_ns=%llu fork_ops=%lu fork_ns=%llu\n",
	       pad, read_ll(switch_path), mmaps, (unsigned long long)mmap_ns, munmaps,
	       (unsigned long long)munmap_ns, mprotects, (unsigned long long)mprotect_ns,
	       forks, (unsigned long long)fork_ns);
	return 0;
}

/* run: the driver */

#define MAXLIST 8
#define MAXROUNDS 32
#define NCFG 2			/* 0: maple tree only, 1: index */

struct cell {
	int threads;		/* 0: the ops cell */
	long pad;
	int churn;
	/* per configuration and round */
	double rate[NCFG][MAXROUNDS];		/* faults/s */
	double pairs[NCFG][MAXROUNDS];		/* churn mmap+munmap pairs/s */
	double per_fault[NCFG][MAXROUNDS][NCOUNTERS];
	double vl_per_fault[NCFG][MAXROUNDS][NVL];
	double minflt[NCFG][MAXROUNDS];		/* minflt per counted fault */
	double ops[NCFG][MAXROUNDS][4];		/* mmap, munmap, mprotect, fork ops/s */
	double vmas_added[NCFG][MAXROUNDS], nodes_added[NCFG][MAXROUNDS];
};

static int parse_list(const char *s, long *out)
{
	char *copy = strdup(s), *tok, *save = NULL;
	int n = 0;

	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n == MAXLIST)
			usage();
		out[n++] = parse_num(tok);
	}
	free(copy);
	if (!n)
		usage();
	return n;
}

/* The value of " key=" in line, NaN if absent. */
static double field(const char *line, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), " %s=", key);
	p = strstr(line, pat);
	if (!p)
		return __builtin_nan("");
	return strtod(p + strlen(pat), NULL);
}

static int write_switch(int on)
{
	int fd = open(switch_path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, on ? "1\n" : "0\n", 2);
	close(fd);
	return n == 2 ? 0 : -1;
}

/* Run this program with ARGV in a fresh process, its one output line in LINE. */
static int run_child(char *const *args, char *line, size_t size)
{
	int pfd[2], status;
	ssize_t n;
	size_t len = 0;
	pid_t pid;

	if (pipe(pfd))
		die("pipe");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (!pid) {
		dup2(pfd[1], 1);
		close(pfd[0]);
		close(pfd[1]);
		/* exec: a new address space, created after the switch was set */
		execv("/proc/self/exe", args);
		_exit(127);
	}
	close(pfd[1]);
	while (len < size - 1 && (n = read(pfd[0], line + len, size - 1 - len)) > 0)
		len += n;
	line[len] = 0;
	close(pfd[0]);
	if (waitpid(pid, &status, 0) < 0)
		die("waitpid");
	if (len && line[len - 1] == '\n')
		line[len - 1] = 0;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 && len ? 0 : -1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

struct stat3 {
	double med, min, max;
};

static struct stat3 stats(const double *v, int n)
{
	double s[MAXROUNDS];
	struct stat3 r;

	memcpy(s, v, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_double);
	r.min = s[0];
	r.max = s[n - 1];
	r.med = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
	return r;
}

/* Median over rounds of per_fault[cfg][*][k]. */
static double med_pf(struct cell *c, int cfg, int k, int rounds)
{
	double v[MAXROUNDS];
	int r;

	for (r = 0; r < rounds; r++)
		v[r] = c->per_fault[cfg][r][k];
	return stats(v, rounds).med;
}

static const char *cfg_name[NCFG] = { "maple", "bonsai" };

/* "median (min-max)" of V, divided by SCALE, DIGITS decimals, in WIDTH. */
static void print_spread(const double *v, int rounds, double scale, int digits,
			 const char *unit, int width)
{
	struct stat3 x = stats(v, rounds);
	char buf[64];

	snprintf(buf, sizeof(buf), "%.*f%s (%.*f-%.*f)", digits, x.med / scale, unit,
		 digits, x.min / scale, digits, x.max / scale);
	printf("  %-*s", width, buf);
}

#define COLUMN 22

/*
 * Both configurations' spreads, the ratio and the goal for it; met?  The
 * ratio is that of each round's two runs, which ran one after the other,
 * so that a change of the host's load between rounds (other guests,
 * builds) cancels out: its median (min-max) over the rounds.
 */
static int print_pair(const double *a, const double *b, int rounds, double scale,
		      int index, double goal)
{
	double ratios[MAXROUNDS], ratio;
	int r;

	for (r = 0; r < rounds; r++)
		ratios[r] = a[r] > 0 ? b[r] / a[r] : 0;
	/* judged as printed: 0.996 shows as 1.00x, which meets 1.00x */
	ratio = (long)(stats(ratios, rounds).med * 100 + 0.5) / 100.0;
	print_spread(a, rounds, scale, 1, "", COLUMN);
	print_spread(b, rounds, scale, 1, "", COLUMN);
	print_spread(ratios, rounds, 1, 2, "x", COLUMN);
	if (goal <= 0) {
		/* a figure to report, with no goal of the issue on it */
		printf("  none\n");
		return 0;
	}
	printf("  >=%.2fx %s\n", goal,
	       !index ? "n/a (no index)" : ratio >= goal ? "met" : "MISSED");
	return ratio >= goal;
}

static int cmd_run(int argc, char **argv)
{
	long tl[MAXLIST], pl[MAXLIST], cl[MAXLIST], rounds = 5, ms = 500, ops_pad = 1000;
	long node_size = 0, orig_switch;
	int nt = 0, np = 0, nc = 0, ncells, i, j, k, r, cfg, opt, index, failed = 0, misused = 0;
	int met_faults = 0, met_ops = 0, have_vl = 0;
	long long diffs = 0, unverified = 0, alloc_failed = 0;
	char line[4096], a_t[16], a_p[24], a_d[24];
	struct cell *cells, *c;

	nt = parse_list("1,2,4", tl);
	np = parse_list("10,1000,10000", pl);
	nc = parse_list("0,1", cl);
	while ((opt = getopt(argc, argv, "r:d:T:P:C:O:s:")) != -1) {
		switch (opt) {
		case 'r':
			rounds = parse_num(optarg);
			break;
		case 'd':
			ms = parse_num(optarg);
			break;
		case 'T':
			nt = parse_list(optarg, tl);
			break;
		case 'P':
			np = parse_list(optarg, pl);
			break;
		case 'C':
			nc = parse_list(optarg, cl);
			break;
		case 'O':
			ops_pad = parse_num(optarg);
			break;
		case 's':
			node_size = parse_num(optarg);
			break;
		default:
			usage();
		}
	}
	if (rounds < 1 || rounds > MAXROUNDS || ms < 1)
		usage();

	ncells = nt * np * nc + 1;
	cells = calloc(ncells, sizeof(*cells));
	if (!cells)
		die("calloc");
	k = 0;
	for (i = 0; i < nt; i++)
		for (j = 0; j < np; j++)
			for (r = 0; r < nc; r++) {
				cells[k].threads = tl[i];
				cells[k].pad = pl[j];
				cells[k].churn = !!cl[r];
				k++;
			}
	cells[k].threads = 0;
	cells[k].pad = ops_pad;

	orig_switch = read_ll(switch_path);
	index = orig_switch >= 0;
	if (index)
		printf("VMA-RUN switch %s present, was %ld; counters %s\n", switch_path,
		       orig_switch, have_counters() ? "present" : "ABSENT");
	else
		printf("VMA-RUN no %s: no index in this kernel, both configurations are the maple tree\n",
		       switch_path);

	/*
	 * A first, discarded run: the guest's first touch of memory is a
	 * fault in QEMU on the host, which would slow whichever cell came
	 * first.
	 */
	snprintf(a_d, sizeof(a_d), "%ld", ms);
	{
		char *args[] = { "vma_faultbench", "fault", "-t", "4", "-p", "10", "-c",
				 "-d", a_d, NULL };
		if (run_child(args, line, sizeof(line)))
			printf("VMA-RUN warm-up FAILED: %s\n", line);
	}

	for (r = 0; r < rounds; r++) {
		for (k = 0; k < ncells; k++) {
			c = &cells[k];
			for (cfg = 0; cfg < NCFG; cfg++) {
				char *args[16];
				int a = 0;

				if (index && write_switch(cfg))
					die("write the switch");
				snprintf(a_t, sizeof(a_t), "%d", c->threads);
				snprintf(a_p, sizeof(a_p), "%ld", c->pad);
				args[a++] = "vma_faultbench";
				args[a++] = c->threads ? "fault" : "ops";
				if (c->threads) {
					args[a++] = "-t";
					args[a++] = a_t;
				}
				args[a++] = "-p";
				args[a++] = a_p;
				if (c->churn)
					args[a++] = "-c";
				args[a++] = "-d";
				args[a++] = a_d;
				args[a] = NULL;
				if (run_child(args, line, sizeof(line))) {
					printf("VMA-RUN round=%d cfg=%s FAILED: %s %s %s %s: %s\n",
					       r + 1, cfg_name[cfg], args[1], args[2], args[3],
					       args[4], line);
					failed = 1;
					continue;
				}
				printf("VMA-RUN round=%d cfg=%s %s\n", r + 1, cfg_name[cfg], line);
				fflush(stdout);
				if (c->threads) {
					double f = field(line, "faults"), ns = field(line, "ns");

					c->rate[cfg][r] = f * 1e9 / ns;
					c->pairs[cfg][r] = field(line, "churn_ops") * 1e9 / ns;
					c->minflt[cfg][r] = f > 0 ? field(line, "minflt") / f : 0;
					for (j = 0; j < (int)NCOUNTERS; j++)
						c->per_fault[cfg][r][j] =
							f > 0 ? field(line, counter_names[j]) / f : 0;
					for (j = 0; j < (int)NVL; j++) {
						double v = field(line, vl_names[j]);

						have_vl |= v == v;	/* not NaN: present */
						c->vl_per_fault[cfg][r][j] = f > 0 ? v / f : 0;
					}
					c->vmas_added[cfg][r] = field(line, "vmas_added");
					c->nodes_added[cfg][r] = field(line, "nodes_added");
				} else {
					c->ops[cfg][r][0] = field(line, "mmap_ops") * 1e9 /
							    field(line, "mmap_ns");
					c->ops[cfg][r][1] = field(line, "munmap_ops") * 1e9 /
							    field(line, "munmap_ns");
					c->ops[cfg][r][2] = field(line, "mprotect_ops") * 1e9 /
							    field(line, "mprotect_ns");
					c->ops[cfg][r][3] = field(line, "fork_ops") * 1e9 /
							    field(line, "fork_ns");
				}
			}
		}
	}
	if (index && write_switch(orig_switch))
		die("restore the switch");
	if (have_counters()) {
		long long now[NCOUNTERS];

		read_counters(now);
		diffs = now[C_DIFFS];
		unverified = now[C_UNVERIFIED];
		alloc_failed = now[C_ALLOC_FAILED];
	}

	/* The table */
	if (!index)
		cfg_name[1] = "maple(2nd)";
	printf("VMA-BENCH %s\n", index ?
	       "index switch present: each cell run with the maple tree only, then with the Bonsai index" :
	       "NO INDEX IN THIS KERNEL (no " SWITCH_FILE "): both columns are the maple tree; goals not judged");
	printf("VMA-BENCH %ld round(s), cells of %ld ms, alternating %s, %s, each run a fresh process; median (min-max) over the rounds;\n",
	       rounds, ms, cfg_name[0], cfg_name[1]);
	printf("VMA-BENCH ratio = %s/%s of the two runs of each round (the goal is judged on its median)\n",
	       cfg_name[1], cfg_name[0]);
	printf("VMA-BENCH\n");
	printf("VMA-BENCH page faults, thousands per second (each thread: write every page of its %d MiB, MADV_DONTNEED, again)\n",
	       (int)(REGION_PAGES * page_size >> 20));
	printf("VMA-BENCH threads    VMAs churn  %-*s  %-*s  %-*s  goal\n",
	       COLUMN, cfg_name[0], COLUMN, cfg_name[1], COLUMN, "ratio of each round");
	for (k = 0; k < ncells - 1; k++) {
		c = &cells[k];
		printf("VMA-BENCH %7d %7ld %5s", c->threads, c->pad, c->churn ? "yes" : "-");
		met_faults += print_pair(c->rate[0], c->rate[1], rounds, 1e3, index,
					 c->churn ? 1.1 : 1.0);
	}
	printf("VMA-BENCH   VMAs = padding VMAs added; churn = one more thread mmap()s and munmap()s a page in a loop\n");
	printf("VMA-BENCH\n");
	printf("VMA-BENCH per fault, counts that do not depend on timing (median over the rounds)\n");
	printf("VMA-BENCH threads    VMAs churn config      minflt lookups   hits misses retries fb_noidx fb_retry  vl_ok vl_abort vl_retry vl_miss  churn pairs/s\n");
	for (k = 0; k < ncells - 1; k++) {
		c = &cells[k];
		for (cfg = 0; cfg < NCFG; cfg++) {
			printf("VMA-BENCH %7d %7ld %5s %-10s %7.3f", c->threads, c->pad,
			       c->churn ? "yes" : "-", cfg_name[cfg],
			       stats(c->minflt[cfg], rounds).med);
			if (have_counters()) {
				/* lookups .. fallback_retries, the first six counters */
				static const int width[] = { 7, 6, 6, 7, 8, 8 };

				for (j = 0; j < 6; j++)
					printf(" %*.3f", width[j], med_pf(c, cfg, j, rounds));
			} else {
				printf("       -      -      -       -        -        -");
			}
			if (have_vl) {
				static const int width[] = { 6, 8, 8, 7 };
				double v[MAXROUNDS];

				for (j = 0; j < (int)NVL; j++) {
					for (i = 0; i < rounds; i++)
						v[i] = c->vl_per_fault[cfg][i][j];
					printf(" %*.3f", width[j], stats(v, rounds).med);
				}
			} else {
				printf("      -        -        -       -");
			}
			if (c->churn)
				printf(" %14.0f", stats(c->pairs[cfg], rounds).med);
			printf("\n");
		}
	}
	printf("VMA-BENCH   minflt = getrusage() minor faults per fault counted by the program (1.000: every write faulted once);\n");
	printf("VMA-BENCH   lookups .. fb_retry: /sys/kernel/debug/bonsai_vma counters; vl_*: /proc/vmstat vma_lock_success, _abort,\n");
	printf("VMA-BENCH   _retry, _miss (faults under the per-VMA lock, or given up to mmap_lock)%s\n",
	       have_vl ? "" : ", absent: CONFIG_PER_VMA_LOCK_STATS is off");
	printf("VMA-BENCH\n");
	printf("VMA-BENCH VMA operations, thousands per second (fork: per second), %ld padding VMAs\n",
	       ops_pad);
	printf("VMA-BENCH operation              %-*s  %-*s  %-*s  goal\n",
	       COLUMN, cfg_name[0], COLUMN, cfg_name[1], COLUMN, "ratio of each round");
	c = &cells[ncells - 1];
	for (j = 0; j < 4; j++) {
		static const char *const op_desc[] = {
			"mmap (new VMA)", "munmap (one VMA)", "mprotect (split, merge)",
			"fork (copy, exit)",
		};
		double a[MAXROUNDS], b[MAXROUNDS];

		for (r = 0; r < rounds; r++) {
			a[r] = c->ops[0][r][j];
			b[r] = c->ops[1][r][j];
		}
		printf("VMA-BENCH %-23s", op_desc[j]);
		/* fork: no goal in the issue; the figure shows the child's build */
		met_ops += print_pair(a, b, rounds, j == 3 ? 1 : 1e3, index, j == 3 ? 0 : 0.9);
	}
	if (index)
		printf("VMA-BENCH goals met: page faults in %d of %d cells, VMA operations %d of 3\n",
		       met_faults, ncells - 1, met_ops);
	printf("VMA-BENCH\n");

	/* Memory: the largest fault cell with the index, its gauges' growth */
	if (index && have_counters()) {
		struct cell *best = NULL;

		for (k = 0; k < ncells - 1; k++)
			if (!best || cells[k].pad > best->pad ||
			    (cells[k].pad == best->pad && !cells[k].churn && best->churn))
				best = &cells[k];
		if (best) {
			double v = stats(best->vmas_added[1], rounds).med;
			double n = stats(best->nodes_added[1], rounds).med;

			if (v > 0 && node_size > 0)
				printf("VMA-BENCH index memory: %.0f nodes for %.0f VMAs added (%ld padding), %.3f nodes per VMA x %ld bytes per node = %.1f bytes per VMA\n",
				       n, v, best->pad, n / v, node_size, n / v * node_size);
			else if (v > 0)
				printf("VMA-BENCH index memory: %.0f nodes for %.0f VMAs added (%ld padding), %.3f nodes per VMA (node size not printed by the kernel)\n",
				       n, v, best->pad, n / v);
			else
				printf("VMA-BENCH index memory: the vmas gauge did not grow (%.0f), nothing to report\n", v);
		}
		printf("VMA-BENCH crosscheck: %lld differences, %lld unverified; %lld index allocations failed\n",
		       diffs, unverified, alloc_failed);
		/*
		 * That the switch did what the table assumes: a child created
		 * with it on looked its faults up in its index, one created
		 * with it off did not.
		 */
		for (k = 0; k < ncells - 1; k++) {
			double on = med_pf(&cells[k], 1, 1, rounds);
			double off = med_pf(&cells[k], 0, 1, rounds);

			if (on < 0.5 || off > 0.01) {
				printf("VMA-BENCH index use: NOT AS EXPECTED: %d threads, %ld VMAs, churn %d: hits per fault %.3f with the index, %.3f without\n",
				       cells[k].threads, cells[k].pad, cells[k].churn, on, off);
				misused = 1;
			}
		}
		if (!misused)
			printf("VMA-BENCH index use: as expected (hits per fault >= 0.5 in every bonsai cell, <= 0.01 in every maple cell)\n");
	} else {
		printf("VMA-BENCH index memory: no index in this kernel\n");
	}
	if (failed)
		printf("VMA-BENCH SOME RUNS FAILED (see the VMA-RUN lines)\n");
	return failed || diffs > 0 || misused ? 1 : 0;
}

int main(int argc, char **argv)
{
	const char *root = getenv("VMA_FAULTBENCH_ROOT");

	snprintf(switch_path, sizeof(switch_path), "%s" SWITCH_FILE, root ? root : "");
	snprintf(counters_dir, sizeof(counters_dir), "%s" COUNTERS_DIR, root ? root : "");
	snprintf(vmstat_path, sizeof(vmstat_path), "%s/proc/vmstat", root ? root : "");
	page_size = sysconf(_SC_PAGESIZE);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2)
		usage();
	optind = 2;
	if (!strcmp(argv[1], "fault"))
		return cmd_fault(argc, argv);
	if (!strcmp(argv[1], "ops"))
		return cmd_ops(argc, argv);
	if (!strcmp(argv[1], "run"))
		return cmd_run(argc, argv);
	usage();
	return 2;
}
