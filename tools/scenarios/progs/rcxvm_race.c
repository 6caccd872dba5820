// SPDX-License-Identifier: GPL-2.0
/*
 * rcxvm_race: mprotect() calls on different VMAs of one process, which
 * RCXVM runs under the mmap read lock, checked for their meaning, the
 * layout they leave and every byte, with GUP, faults, fork and
 * mmap/munmap beside them.
 *
 *  - togglers (-n, default 3) each own a VMA of TPAGES pages with holes
 *    on both sides (no neighbour, so no merge: the fast path's case) and
 *    toggle it: mprotect(PROT_READ|PROT_WRITE), write every byte and
 *    check it, mprotect(PROT_READ), check every byte, and a write of
 *    their own, which must fault.  A sequence number, odd while the VMA
 *    may be writable and even once mprotect(PROT_READ) has returned,
 *    tells the other threads when a write must fault;
 *  - a prober writes into a toggler's VMA whose sequence number is even,
 *    and reads it back: a write that does not fault while the number
 *    stays even is a semantic violation (a writable PTE, or a stale
 *    permission check, survived mprotect(PROT_READ));
 *  - a GUP thread reads a file opened with O_DIRECT into togglers' pages
 *    and writes them with process_vm_writev(), both with the bytes they
 *    already hold: a call that succeeds while the sequence number stays
 *    even wrote through a read-only mapping; a call that takes longer
 *    than 10 s is a livelock (the main thread ends the run if the thread
 *    stops progressing);
 *  - layout threads (-l, default 2) own every -l-th page of a region of
 *    LPAGES pages, all written first (one anon_vma), and change each of
 *    their pages to PROT_NONE, PROT_READ or PROT_READ|PROT_WRITE at
 *    random, so that neighbouring VMAs split, merge and are toggled
 *    whole at the same time; each call is logged.  Afterwards the calls
 *    are replayed one thread after the other in a fresh region, and the
 *    VMAs of the two regions in /proc/self/maps (offsets and
 *    permissions) must be the same: each page's last protection is
 *    fixed by its owner's log, and mainline's merges make one layout of
 *    them, which concurrent calls must reproduce;
 *  - a faulter zaps (MADV_DONTNEED) and rewrites its own region, whose
 *    pages are all alike and KSM-mergeable, a mapper maps, writes,
 *    checks and unmaps regions, a churner maps and unmaps regions
 *    without touching them, and a forker forks children that check
 *    every toggler's bytes;
 *  - at the end, the mm's page counters of /proc/self/status must equal
 *    the sums over /proc/self/maps: munmap() lowers them after
 *    downgrading the mmap lock, beside the fast path's accounting.
 *
 * With -A only the counters' race runs, tight: -n togglers that only
 * mprotect() their VMA back and forth, beside the churner, for -t s, then
 * the counters' check ("RCXVM-ACCOUNTING key=value ...").
 *
 * With -S only the swap-in check runs (see swapin_fork()).
 *
 * Prints "RCXVM-RACE key=value ..." and exits 0 when every check held,
 * 1 otherwise (each failure is printed with MISMATCH, VIOLATION,
 * LAYOUT, LIVELOCK, ACCOUNTING, SWAPWAIT or UNEXPECTED SIG), 2 on a usage
 * error.
 * -C MODE breaks one thing on purpose, to show that the checks catch it:
 * "prot" makes a toggler skip one mprotect(PROT_READ) (the prober or its
 * own write must report a violation), "layout" drops one call from the
 * replay, "byte" flips a byte behind a toggler's model, "accounting"
 * adds 4 kB to the data sum of the maps.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pattern.h"
#include "wchan.h"

#define PAGE		4096UL
#define TPAGES		4
#define MAXT		8
#define LPAGES		24
#define MAXL		4
#define LOGMAX		20000
#define FPAGES		16

struct toggler {
	unsigned char *mem;
	_Atomic unsigned long seq;	/* odd: may be writable */
	unsigned long toggles;
};

struct lcall {
	unsigned short page;
	unsigned char prot;
};

static struct toggler tog[MAXT];
static int ntog = 3, nlay = 2, secs = 20;
static const char *file = "/tmp/rcxvm_race.dat";
static const char *breakmode = "";
static unsigned char *lregion;
static struct lcall *llog[MAXL];
static int lcount[MAXL];
static atomic_int stop, failures;
static _Atomic unsigned long probes, probe_faults, gup_calls, gup_ok,
	gup_efault, gup_progress, forks, maps, zaps, own_faults, churns,
	tight_toggles;
static pthread_t gup_tid;
static atomic_int sw_tid;

static __thread sigjmp_buf probe_env;
static __thread volatile int probing;

__attribute__((format(printf, 1, 2)))
static void fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
	atomic_fetch_add(&failures, 1);
}

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (probing) {
		probing = 0;
		siglongjmp(probe_env, 1);
	}
	printf("UNEXPECTED SIG %d at %p\n", sig, si->si_addr);
	fflush(stdout);
	_exit(1);
}

/* Writes @v at @p; returns whether the write faulted. */
static int write_faults(volatile unsigned char *p, unsigned char v)
{
	if (sigsetjmp(probe_env, 1))
		return 1;
	probing = 1;
	*p = v;
	probing = 0;
	return 0;
}

static unsigned long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000UL + ts.tv_nsec / 1000000;
}

static unsigned int rnd(unsigned int *s)
{
	*s = *s * 1103515245 + 12345;
	return *s >> 8;
}

/* Toggler @t's bytes carry version t + 1 at their offset in the VMA. */
static int check_bytes(const unsigned char *mem, size_t len, unsigned int ver,
		       const char *who)
{
	for (size_t i = 0; i < len; i++) {
		if (mem[i] != pattern(ver, i)) {
			fail("MISMATCH %s: byte %zu of %p is %#x, not %#x\n",
			     who, i, mem, mem[i], pattern(ver, i));
			return -1;
		}
	}
	return 0;
}

/* Maps @pages pages with an unmapped page on each side. */
static unsigned char *map_isolated(size_t pages)
{
	unsigned char *p = mmap(NULL, (pages + 2) * PAGE, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	munmap(p, PAGE);
	munmap(p + (pages + 1) * PAGE, PAGE);
	return p + PAGE;
}

static void *toggler(void *arg)
{
	struct toggler *t = arg;
	unsigned int ver = (unsigned int)(t - tog) + 1;
	size_t len = TPAGES * PAGE;
	int broke = 0;

	while (!atomic_load(&stop)) {
		atomic_fetch_add(&t->seq, 1);	/* odd: writable from here */
		if (mprotect(t->mem, len, PROT_READ | PROT_WRITE))
			fail("VIOLATION mprotect(RW) failed: %s\n", strerror(errno));
		for (size_t i = 0; i < len; i += 64)
			t->mem[i] = pattern(ver, i);	/* must not fault */
		if (check_bytes(t->mem, len, ver, "toggler after RW"))
			break;
		if (!strcmp(breakmode, "prot") && !broke && t == tog && t->toggles > 10)
			broke = 1;	/* skip mprotect(PROT_READ) once */
		else if (mprotect(t->mem, len, PROT_READ))
			fail("VIOLATION mprotect(R) failed: %s\n", strerror(errno));
		atomic_fetch_add(&t->seq, 1);	/* even: read-only */
		if (check_bytes(t->mem, len, ver, "toggler after R"))
			break;
		if (!write_faults(t->mem + (t->toggles % TPAGES) * PAGE, pattern(ver, (t->toggles % TPAGES) * PAGE)))
			fail("VIOLATION own write after mprotect(PROT_READ) did not fault (toggle %lu)\n",
			     t->toggles);
		else
			atomic_fetch_add(&own_faults, 1);
		if (!strcmp(breakmode, "byte") && t == tog && t->toggles == 10) {
			atomic_fetch_add(&t->seq, 1);
			mprotect(t->mem, len, PROT_READ | PROT_WRITE);
			t->mem[100] ^= 1;
			mprotect(t->mem, len, PROT_READ);
			atomic_fetch_add(&t->seq, 1);
		}
		t->toggles++;
	}
	return NULL;
}

static void *prober(void *arg)
{
	unsigned int s = 7;

	(void)arg;
	while (!atomic_load(&stop)) {
		struct toggler *t = &tog[rnd(&s) % ntog];
		size_t off = (rnd(&s) % (TPAGES * PAGE)) & ~7UL;
		unsigned long s1 = atomic_load(&t->seq), s2;
		int faulted;

		if (s1 & 1)
			continue;
		faulted = write_faults(t->mem + off, pattern(t - tog + 1, off));
		s2 = atomic_load(&t->seq);
		atomic_fetch_add(&probes, 1);
		if (faulted)
			atomic_fetch_add(&probe_faults, 1);
		else if (s1 == s2)
			fail("VIOLATION write into toggler %ld at +%zu did not fault while it was read-only (seq %lu)\n",
			     (long)(t - tog), off, s1);
	}
	return NULL;
}

static void *gup(void *arg)
{
	unsigned char *src = aligned_alloc(PAGE, TPAGES * PAGE * MAXT);
	int fd = open(file, O_RDONLY | O_DIRECT);
	unsigned int s = 11;

	(void)arg;
	if (!src || fd < 0) {
		fail("LIVELOCK setup: %s: %s\n", file, strerror(errno));
		return NULL;
	}
	for (int t = 0; t < ntog; t++)
		fill(src + t * TPAGES * PAGE, 0, TPAGES * PAGE, t + 1);
	while (!atomic_load(&stop)) {
		int t = rnd(&s) % ntog, pg = rnd(&s) % TPAGES, direct = rnd(&s) & 1;
		unsigned char *dst = tog[t].mem + pg * PAGE;
		unsigned long s1 = atomic_load(&tog[t].seq), s2, t0 = now_ms();
		ssize_t n;

		if (direct) {
			n = pread(fd, dst, PAGE, (t * TPAGES + pg) * PAGE);
		} else {
			struct iovec l = { src + (t * TPAGES + pg) * PAGE, PAGE };
			struct iovec r = { dst, PAGE };

			n = process_vm_writev(getpid(), &l, 1, &r, 1, 0);
		}
		s2 = atomic_load(&tog[t].seq);
		if (now_ms() - t0 > 10000)
			fail("LIVELOCK %s took %lu ms\n", direct ? "O_DIRECT read" : "process_vm_writev",
			     now_ms() - t0);
		atomic_fetch_add(&gup_calls, 1);
		atomic_fetch_add(&gup_progress, 1);
		if (n == (ssize_t)PAGE) {
			atomic_fetch_add(&gup_ok, 1);
			if (s1 == s2 && !(s1 & 1))
				fail("VIOLATION %s wrote into toggler %d page %d while it was read-only\n",
				     direct ? "O_DIRECT read" : "process_vm_writev", t, pg);
		} else if (n < 0 && errno == EFAULT) {
			atomic_fetch_add(&gup_efault, 1);
		} else {
			fail("VIOLATION %s returned %zd (%s)\n", direct ? "O_DIRECT read" : "process_vm_writev",
			     n, n < 0 ? strerror(errno) : "short");
		}
	}
	close(fd);
	free(src);
	return NULL;
}

static const int lprots[3] = { PROT_NONE, PROT_READ, PROT_READ | PROT_WRITE };

static void *layout(void *arg)
{
	int id = (int)(long)arg;
	unsigned int s = 101 + id;

	while (!atomic_load(&stop) && lcount[id] < LOGMAX) {
		int k = rnd(&s) % ((LPAGES + nlay - 1 - id) / nlay);
		int page = id + k * nlay;
		int p = rnd(&s) % 3;

		if (page >= LPAGES)
			continue;
		if (mprotect(lregion + page * PAGE, PAGE, lprots[p]))
			fail("LAYOUT mprotect of page %d failed: %s\n", page, strerror(errno));
		llog[id][lcount[id]++] = (struct lcall){ page, p };
	}
	return NULL;
}

/*
 * Every page of the faulter's region holds the same bytes, and the region
 * is KSM-mergeable: with ksmd running (the scenario starts it) its pages
 * are merged and unmerged again beside the toggles.
 */
static void *faulter(void *arg)
{
	unsigned char *mem = map_isolated(FPAGES);

	(void)arg;
	madvise(mem, FPAGES * PAGE, MADV_MERGEABLE);
	/* Fork children would share the pages, which KSM then skips. */
	madvise(mem, FPAGES * PAGE, MADV_DONTFORK);
	for (unsigned long n = 0; !atomic_load(&stop); n++) {
		/* Kept 50 rounds, so that ksmd can merge them, then zapped. */
		if (n % 50 == 0) {
			madvise(mem, FPAGES * PAGE, MADV_DONTNEED);
			for (size_t i = 0; i < FPAGES * PAGE; i += PAGE)
				if (mem[i])
					fail("MISMATCH faulter: zapped page not zero\n");
			for (size_t i = 0; i < FPAGES * PAGE; i += PAGE)
				fill(mem + i, 0, PAGE, 99);
			atomic_fetch_add(&zaps, 1);
		}
		for (size_t i = 0; i < FPAGES * PAGE; i += PAGE)
			if (check_bytes(mem + i, PAGE, 99, "faulter"))
				return NULL;
		usleep(10000);
	}
	return NULL;
}

static void *mapper(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		unsigned char *p = mmap(NULL, 8 * PAGE, PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED) {
			fail("MISMATCH mapper: mmap: %s\n", strerror(errno));
			break;
		}
		fill(p, 0, 8 * PAGE, 77);
		check_bytes(p, 8 * PAGE, 77, "mapper");
		munmap(p, 8 * PAGE);
		atomic_fetch_add(&maps, 1);
	}
	return NULL;
}

/*
 * Maps and unmaps without touching the pages, as fast as it can: each
 * munmap() lowers the mm's page counters after downgrading the mmap lock
 * to read, beside the togglers' fast paths, which account their changes
 * under the read lock too.
 */
static void *churner(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		void *p = mmap(NULL, 16 * PAGE, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED) {
			fail("MISMATCH churner: mmap: %s\n", strerror(errno));
			break;
		}
		munmap(p, 16 * PAGE);
		atomic_fetch_add(&churns, 1);
	}
	return NULL;
}

/* A child reads every toggler's bytes (readable in both states). */
static void *forker(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		pid_t pid = fork();
		int st;

		if (pid == 0) {
			for (int t = 0; t < ntog; t++)
				if (check_bytes(tog[t].mem, TPAGES * PAGE, t + 1, "fork child"))
					_exit(1);
			_exit(0);
		}
		if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
		    WEXITSTATUS(st))
			fail("MISMATCH fork child failed\n");
		atomic_fetch_add(&forks, 1);
		usleep(20000);
	}
	return NULL;
}

/* The VMAs inside [base, base + len) as "start-end perms;" offsets. */
static void maps_of(unsigned char *base, size_t len, char *out, size_t cap)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	size_t n = 0;

	out[0] = 0;
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long s, e;
		char perms[8];

		if (sscanf(line, "%lx-%lx %7s", &s, &e, perms) != 3)
			continue;
		if (e <= (unsigned long)base || s >= (unsigned long)base + len)
			continue;
		n += snprintf(out + n, cap - n, "%lx-%lx %s;", s - (unsigned long)base,
			      e - (unsigned long)base, perms);
		if (n >= cap)
			break;
	}
	if (f)
		fclose(f);
}

/*
 * The mm's page counters against its VMAs, once every thread is done:
 * VmSize (total_vm), VmData (data_vm), VmStk (stack_vm) and VmExe+VmLib
 * (exec_vm) of /proc/self/status must equal the sums over
 * /proc/self/maps, classed as vm_stat_account() classes a VMA (exec:
 * executable, not writable, not a stack; stack: [stack], the one
 * VM_GROWSDOWN VMA; data: private and writable, not a stack).  An
 * update lost by a racing writer stays lost, so a difference here
 * outlives the race that made it.
 */
static int accounting_check(void)
{
	unsigned long total = 0, data = 0, stack = 0, exec = 0;
	unsigned long vmsize = 0, vmdata = 0, vmstk = 0, vmexe = 0, vmlib = 0;
	char line[512], perms[8], name[256];
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f) {
		fail("MISMATCH accounting: /proc/self/maps: %s\n", strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		unsigned long start, end, kb;

		name[0] = 0;
		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %255s", &start, &end, perms,
			   name) < 3)
			continue;
		/* The vsyscall page is not a VMA of the mm. */
		if (!strcmp(name, "[vsyscall]"))
			continue;
		kb = (end - start) >> 10;
		total += kb;
		if (!strcmp(name, "[stack]"))
			stack += kb;
		else if (perms[2] == 'x' && perms[1] != 'w')
			exec += kb;
		else if (perms[1] == 'w' && perms[3] == 'p')
			data += kb;
	}
	fclose(f);
	f = fopen("/proc/self/status", "r");
	if (!f) {
		fail("MISMATCH accounting: /proc/self/status: %s\n", strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "VmSize: %lu", &vmsize);
		sscanf(line, "VmData: %lu", &vmdata);
		sscanf(line, "VmStk: %lu", &vmstk);
		sscanf(line, "VmExe: %lu", &vmexe);
		sscanf(line, "VmLib: %lu", &vmlib);
	}
	fclose(f);
	if (!strcmp(breakmode, "accounting"))
		data += 4;
	printf("accounting: VmSize %lu VmData %lu VmStk %lu VmExe+VmLib %lu kB; maps %lu %lu %lu %lu kB\n",
	       vmsize, vmdata, vmstk, vmexe + vmlib, total, data, stack, exec);
	if (vmsize != total || vmdata != data || vmstk != stack || vmexe + vmlib != exec) {
		fail("ACCOUNTING the mm's counters (VmSize %lu VmData %lu VmStk %lu VmExe+VmLib %lu kB) differ from its VMAs (%lu %lu %lu %lu kB)\n",
		     vmsize, vmdata, vmstk, vmexe + vmlib, total, data, stack, exec);
		return -1;
	}
	return 0;
}

static unsigned char *map_written(size_t pages, unsigned int ver)
{
	unsigned char *p = map_isolated(pages);

	fill(p, 0, pages * PAGE, ver);
	return p;
}

static int layout_replay(void)
{
	static char got[8192], want[8192];
	unsigned char *fresh = map_written(LPAGES, 55);
	int skip = !strcmp(breakmode, "layout");

	maps_of(lregion, LPAGES * PAGE, got, sizeof(got));
	for (int id = 0; id < nlay; id++)
		for (int i = 0; i < lcount[id]; i++) {
			int p = llog[id][i].prot;

			/* -C layout: thread 0's last call replayed wrong */
			if (skip && id == 0 && i == lcount[id] - 1)
				p = (p + 1) % 3;
			mprotect(fresh + llog[id][i].page * PAGE, PAGE, lprots[p]);
		}
	maps_of(fresh, LPAGES * PAGE, want, sizeof(want));
	if (strcmp(got, want)) {
		fail("LAYOUT concurrent calls left\n  %s\nbut their sequential replay\n  %s\n",
		     got, want);
		return -1;
	}
	/* Every byte of both regions. */
	mprotect(lregion, LPAGES * PAGE, PROT_READ);
	mprotect(fresh, LPAGES * PAGE, PROT_READ);
	if (check_bytes(lregion, LPAGES * PAGE, 55, "layout region") ||
	    check_bytes(fresh, LPAGES * PAGE, 55, "replay region"))
		return -1;
	printf("layout: %s\n", got);
	return 0;
}

/*
 * -A: the counters' race alone, tight: togglers that only mprotect()
 * their VMA (no bytes written, so thousands of fast paths a second)
 * beside the churner, then the counters checked against the maps.
 */
static void *tight_toggler(void *arg)
{
	unsigned char *mem = map_isolated(TPAGES);

	(void)arg;
	mem[0] = 1;
	while (!atomic_load(&stop)) {
		if (mprotect(mem, TPAGES * PAGE, PROT_READ | PROT_WRITE) ||
		    mprotect(mem, TPAGES * PAGE, PROT_READ)) {
			fail("MISMATCH tight toggler: mprotect: %s\n", strerror(errno));
			break;
		}
		atomic_fetch_add(&tight_toggles, 1);
	}
	return NULL;
}

static int accounting_race(void)
{
	pthread_t th[MAXT + 1];
	int n = 0;

	for (int t = 0; t < ntog; t++)
		pthread_create(&th[n++], NULL, tight_toggler, NULL);
	pthread_create(&th[n++], NULL, churner, NULL);
	sleep(secs);
	atomic_store(&stop, 1);
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	accounting_check();
	printf("RCXVM-ACCOUNTING toggles=%lu churns=%lu failures=%d\n",
	       (unsigned long)tight_toggles, (unsigned long)churns, atomic_load(&failures));
	return atomic_load(&failures) ? 1 : 0;
}

/*
 * -S MAJ:MIN: a fault that waits for a swap-in must not keep its VMA
 * locked.  The caller runs this in a cgroup of its own (io and memory
 * controllers on), with swap on device MAJ:MIN and vm.page-cluster 0
 * (one page per read).  A region is written and paged out, then the
 * cgroup's io.max lets it read the device at 4 KiB/s; a thread faults it back in with
 * MADV_POPULATE_READ (GUP, which lets the fault drop the mmap lock while
 * it waits); while that thread waits on a folio (its wchan), fork()
 * write-locks every VMA of the process.  fork() must not wait for the
 * swap-in: the pages resident in the region must be as many after it as
 * before it.  Three forks; a swap-in may complete during one of them by
 * chance, so two must see no change.
 */
#define SW_PAGES 8

static unsigned char *sw_region;
static atomic_int sw_done;

static void *sw_populate(void *arg)
{
	(void)arg;
	atomic_store(&sw_tid, gettid());
	if (madvise(sw_region, SW_PAGES * PAGE, MADV_POPULATE_READ))
		fail("MISMATCH swap-in: MADV_POPULATE_READ: %s\n", strerror(errno));
	atomic_store(&sw_done, 1);
	return NULL;
}

static int sw_resident(void)
{
	unsigned char vec[SW_PAGES];
	int n = 0;

	if (mincore(sw_region, SW_PAGES * PAGE, vec))
		return -1;
	for (int i = 0; i < SW_PAGES; i++)
		n += vec[i] & 1;
	return n;
}

static int sw_waits_on_folio(void)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/task/%d/wchan", atomic_load(&sw_tid));
	return wchan_has(path, "folio");
}

/* Writes @val to @file of this process's cgroup (cgroup v2). */
static int sw_cgroup_write(const char *file, const char *val)
{
	char cg[256], path[512];
	FILE *f = fopen("/proc/self/cgroup", "r");
	int fd, ok;

	if (!f || !fgets(cg, sizeof(cg), f) || strncmp(cg, "0::", 3)) {
		if (f)
			fclose(f);
		return -1;
	}
	fclose(f);
	cg[strcspn(cg, "\n")] = 0;
	snprintf(path, sizeof(path), "/sys/fs/cgroup%s/%s", cg + 3, file);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return -1;
	ok = write(fd, val, strlen(val)) == (ssize_t)strlen(val);
	close(fd);
	return ok ? 0 : -1;
}

static int swapin_fork(const char *dev)
{
	int unchanged = 0, forks = 0, before, after;
	char throttle[64];
	unsigned long t0;
	pthread_t th;

	sw_region = map_isolated(SW_PAGES);
	fill(sw_region, 0, SW_PAGES * PAGE, 5);
	/*
	 * Paged out and, once written, out of the swap cache too (which
	 * mincore() counts as resident, and which a fault takes without I/O):
	 * memory.reclaim frees what MADV_PAGEOUT left there.
	 */
	for (int i = 0; i < 50 && sw_resident() != 0; i++) {
		madvise(sw_region, SW_PAGES * PAGE, MADV_PAGEOUT);
		usleep(50000);
		sw_cgroup_write("memory.reclaim", "64K");
	}
	if (sw_resident() != 0) {
		fail("MISMATCH swap-in: %d of %d pages still resident after MADV_PAGEOUT and memory.reclaim (no swap?)\n",
		     sw_resident(), SW_PAGES);
		return 1;
	}
	/* From now on this cgroup reads the swap device at 4 KiB/s. */
	snprintf(throttle, sizeof(throttle), "%s rbps=4096", dev);
	if (sw_cgroup_write("io.max", throttle)) {
		fail("MISMATCH swap-in: cannot throttle reads of %s\n", dev);
		return 1;
	}
	pthread_create(&th, NULL, sw_populate, NULL);
	t0 = now_ms();
	while (forks < 3 && !atomic_load(&sw_done) && now_ms() - t0 < 60000) {
		pid_t child;

		if (!atomic_load(&sw_tid) || !sw_waits_on_folio()) {
			usleep(5000);
			continue;
		}
		before = sw_resident();
		child = fork();
		if (child == 0)
			_exit(0);
		after = sw_resident();
		if (child < 0) {
			fail("MISMATCH swap-in: fork: %s\n", strerror(errno));
			break;
		}
		waitpid(child, NULL, 0);
		printf("swapin: fork %d: %d pages resident before, %d after\n", forks, before, after);
		unchanged += after == before;
		forks++;
		usleep(20000);
	}
	pthread_join(th, NULL);
	snprintf(throttle, sizeof(throttle), "%s rbps=max", dev);
	sw_cgroup_write("io.max", throttle);
	if (check_bytes(sw_region, SW_PAGES * PAGE, 5, "swapped-in region"))
		return 1;
	if (forks < 3)
		fail("MISMATCH swap-in: only %d forks while the fault waited (the swap-in was not slow)\n",
		     forks);
	else if (unchanged < 2)
		fail("SWAPWAIT fork() waited for a swap-in in %d of 3 forks: the fault kept its VMA locked\n",
		     3 - unchanged);
	printf("RCXVM-SWAPIN forks=%d unchanged=%d failures=%d\n", forks, unchanged,
	       atomic_load(&failures));
	return atomic_load(&failures) ? 1 : 0;
}

int main(int argc, char **argv)
{
	pthread_t th[32];
	int nth = 0, opt, fd, accounting_only = 0;
	const char *swapin_dev = NULL;
	unsigned long last = 0, stall = 0, calls = 0, t0;
	struct sigaction sa = { 0 };
	unsigned char *buf;

	while ((opt = getopt(argc, argv, "n:l:t:f:C:AS:")) != -1) {
		switch (opt) {
		case 'A': accounting_only = 1; break;
		case 'S': swapin_dev = optarg; break;
		case 'n': ntog = atoi(optarg); break;
		case 'l': nlay = atoi(optarg); break;
		case 't': secs = atoi(optarg); break;
		case 'f': file = optarg; break;
		case 'C': breakmode = optarg; break;
		default:
			fprintf(stderr, "usage: %s [-A|-S MAJ:MIN] [-n togglers] [-l layout threads] [-t s] [-f file] [-C prot|layout|byte|accounting]\n",
				argv[0]);
			return 2;
		}
	}
	if (ntog < 1 || ntog > MAXT || nlay < 1 || nlay > MAXL)
		return 2;
	if (accounting_only)
		return accounting_race();
	if (swapin_dev)
		return swapin_fork(swapin_dev);
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);

	/* The O_DIRECT file: toggler t's pages hold version t + 1. */
	buf = aligned_alloc(PAGE, MAXT * TPAGES * PAGE);
	for (int t = 0; t < MAXT; t++)
		fill(buf + t * TPAGES * PAGE, 0, TPAGES * PAGE, t + 1);
	fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, buf, MAXT * TPAGES * PAGE) != (ssize_t)(MAXT * TPAGES * PAGE) ||
	    fsync(fd)) {
		perror(file);
		return 2;
	}
	close(fd);
	free(buf);

	for (int t = 0; t < ntog; t++) {
		tog[t].mem = map_written(TPAGES, t + 1);
		mprotect(tog[t].mem, TPAGES * PAGE, PROT_READ);
	}
	lregion = map_written(LPAGES, 55);
	for (int id = 0; id < nlay; id++)
		llog[id] = calloc(LOGMAX, sizeof(struct lcall));

	for (int t = 0; t < ntog; t++)
		pthread_create(&th[nth++], NULL, toggler, &tog[t]);
	for (int id = 0; id < nlay; id++)
		pthread_create(&th[nth++], NULL, layout, (void *)(long)id);
	pthread_create(&th[nth++], NULL, prober, NULL);
	pthread_create(&th[nth++], NULL, faulter, NULL);
	pthread_create(&th[nth++], NULL, mapper, NULL);
	pthread_create(&th[nth++], NULL, churner, NULL);
	pthread_create(&th[nth++], NULL, forker, NULL);
	pthread_create(&gup_tid, NULL, gup, NULL);

	t0 = now_ms();
	while (now_ms() - t0 < secs * 1000UL && !atomic_load(&failures))
		sleep(1);
	atomic_store(&stop, 1);
	/* The GUP thread must come back: no livelock. */
	while (pthread_tryjoin_np(gup_tid, NULL)) {
		if (atomic_load(&gup_progress) != last)
			stall = 0;
		else if (++stall > 20) {
			printf("LIVELOCK GUP thread made no progress for 20 s\n");
			fflush(stdout);
			_exit(1);
		}
		last = atomic_load(&gup_progress);
		sleep(1);
	}
	for (int i = 0; i < nth; i++)
		pthread_join(th[i], NULL);

	layout_replay();
	accounting_check();
	for (int t = 0; t < ntog; t++)
		calls += 2 * tog[t].toggles;
	for (int id = 0; id < nlay; id++)
		calls += lcount[id];
	printf("RCXVM-RACE toggles=%lu layout_calls=%d+%d mprotects=%lu own_faults=%lu probes=%lu probe_faults=%lu gup=%lu gup_ok=%lu gup_efault=%lu forks=%lu maps=%lu churns=%lu zaps=%lu failures=%d\n",
	       tog[0].toggles, lcount[0], nlay > 1 ? lcount[1] : 0, calls,
	       (unsigned long)own_faults, (unsigned long)probes, (unsigned long)probe_faults,
	       (unsigned long)gup_calls, (unsigned long)gup_ok, (unsigned long)gup_efault,
	       (unsigned long)forks, (unsigned long)maps, (unsigned long)churns,
	       (unsigned long)zaps, atomic_load(&failures));
	return atomic_load(&failures) ? 1 : 0;
}
