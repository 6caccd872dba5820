// SPDX-License-Identifier: GPL-2.0
/*
 * dmem_coherence - regression tests for paths that could leave an old copy
 * of a file page in GCMA's DMEM, each built so that the old copy, if DMEM
 * kept it, is what the final read returns.
 *
 *   dmem_coherence dio -w CGROUP DIR
 *	An O_DIRECT write (V1 to V2) held in flight by CGROUP's io.max while
 *	this process reads the last page (V1, from the disk) and pages it out
 *	(MADV_PAGEOUT: DMEM stores V1).  When the write has completed the page
 *	must not be cached (mincore()) and every byte read must be V2.
 *	The caller puts a write limit on CGROUP; the writer joins it.
 *
 *   dmem_coherence dioswitch -w WCGROUP -r RCGROUP DIR
 *	With the file client off, an O_DIRECT write (V1 to V2) held in flight
 *	by WCGROUP's io.max while this process reads pages 1 to 40 and the
 *	last page (V1, from the disk); a reader in RCGROUP, whose io.max makes
 *	its read of page 0
 *	take seconds, keeps page 0's folio locked, so that when the write's
 *	bios are done its invalidation walk waits at page 0 (seen in the
 *	writer's /proc/PID/wchan).  Then the client is switched on and the
 *	last page paged out: reclaim offers V1 to DMEM, which must refuse it
 *	(the walk's fence stands though it began with the client off).  When
 *	the walk is done the page must not be cached, every byte read must be
 *	V2, and verify mode (where built) must have caught no stale copy.
 *	Leaves the client on.
 *
 *   dmem_coherence diofail -w CGROUP DIR
 *	The file's first 40 pages are written (V1), its last 8 a hole, and
 *	the file system is filled up; an O_DIRECT write of the whole file
 *	(V2), held in flight by CGROUP's io.max, fails with ENOSPC at the
 *	hole after its first 40 pages reached the disk, while this process
 *	reads page 39 (V1) during it.  After the write the page is paged out
 *	if still cached, and every read must return what the disk holds (V2),
 *	verify mode (where built) catching no stale copy.
 *
 *   dmem_coherence setversion DIR
 *	The file's pages are stored by DMEM under one inode generation, the
 *	generation is changed (FS_IOC_SETVERSION), the file rewritten and
 *	stored again, and the generation set back: every read must return the
 *	rewritten bytes.  Exits 77 if the file system refuses SETVERSION.
 *
 *   dmem_coherence hwpoison DIR
 *	A page is stored by DMEM (V1), then partly rewritten through a folio
 *	that write_begin reads from the disk (not through DMEM), written back,
 *	and removed from the page cache by memory failure (MADV_HWPOISON, as
 *	a machine check on a clean page would).  The next read must return
 *	the rewritten bytes.
 *
 *   dmem_coherence rt CMADIR DIR SECONDS
 *	A copier (normal priority) pages a file out and reads it back, so
 *	DMEM copies pages in and out without pause, while an allocator at
 *	SCHED_FIFO on the same CPU wakes every 500 us and allocates and frees
 *	the whole area through CMADIR's debugfs files (alloc, free): each
 *	allocation discards the lent pages and must wait for a copy it
 *	interrupted, which only a waiter that sleeps lets finish.  Every byte
 *	the copier reads is checked.  The caller turns RT throttling and
 *	CPU 0's fair server off, so that nothing else lets the copier run;
 *	a waiter that only polls then never returns.
 *
 *   dmem_coherence switch DIR
 *	O_DIRECT writers rewrite pages of eight files (with the bytes they
 *	hold: every write fences its file's DMEM group around the page-cache
 *	walk) while the file client is switched off and on 150 times.  A
 *	fence raised by a walk must be lowered by the same walk, whatever the
 *	switch did meanwhile.  Then every file is read, paged out and read
 *	again: its pages must be stored and loaded (a group left fenced, its
 *	count wrapped below zero or stuck above it, refuses both for good),
 *	and every byte must be right.
 *
 * DMEM's counters are read from /sys/kernel/mm/gcma/dmem/file/.  Every
 * test first checks that its setup happened (the write was still in
 * flight, the page was stored), so that it cannot pass without having
 * exercised the path.  Prints one "# ..." line per step.  Exit status: 0
 * every byte right, 1 a wrong byte or a failed setup (details on stderr),
 * 2 usage error, 77 not supported here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pattern.h"
#include "wchan.h"

#define PAGE 4096UL
#define DMEM "/sys/kernel/mm/gcma/dmem/file/"

static const char *prog = "dmem_coherence";

static void die(const char *what)
{
	fprintf(stderr, "%s: %s: %s\n", prog, what, strerror(errno));
	exit(1);
}

static void fail(const char *what)
{
	fprintf(stderr, "%s: FAIL: %s\n", prog, what);
	exit(1);
}

static unsigned long counter(const char *name)
{
	char path[256], buf[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), DMEM "%s", name);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		die(path);
	n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		die(path);
	close(fd);
	buf[n] = 0;
	return strtoul(buf, NULL, 10);
}

/* A counter that exists only in some builds (verify mode): 0 without. */
static unsigned long optional_counter(const char *name)
{
	char path[256];

	snprintf(path, sizeof(path), DMEM "%s", name);
	return access(path, R_OK) ? 0 : counter(name);
}

static void pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	if (pwrite(fd, buf, len, off) != (ssize_t)len)
		die("pwrite");
}

/* Writes version @ver of @len bytes to @path (created) and syncs it. */
static int make_file(const char *path, size_t len, unsigned int ver)
{
	unsigned char *buf = malloc(len);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);

	if (fd < 0 || !buf)
		die(path);
	fill(buf, 0, len, ver);
	pwrite_all(fd, buf, len, 0);
	if (fsync(fd))
		die("fsync");
	free(buf);
	return fd;
}

/*
 * Compares @len bytes of @fd at @off, read through the page cache, with
 * @want; reports the first wrong byte and counts wrong ones.
 */
static unsigned long check_read(int fd, off_t off, const unsigned char *want,
				size_t len, const char *what)
{
	unsigned char *buf = malloc(len);
	unsigned long wrong = 0;
	size_t first = 0;

	if (!buf)
		die("malloc");
	if (pread(fd, buf, len, off) != (ssize_t)len)
		die("pread");
	for (size_t i = 0; i < len; i++) {
		if (buf[i] != want[i] && !wrong++)
			first = i;
	}
	if (wrong)
		fprintf(stderr, "%s: %s: %lu wrong bytes of %zu, first at offset %jd: 0x%02x, expected 0x%02x\n",
			prog, what, wrong, len, (intmax_t)(off + first),
			buf[first], want[first]);
	free(buf);
	return wrong;
}

/* Pages out @npages pages of @fd from page @first; returns the stores. */
static unsigned long page_out(int fd, size_t first, size_t npages)
{
	unsigned long before = counter("stores");
	volatile unsigned char sum = 0;
	unsigned char *p;

	p = mmap(NULL, npages * PAGE, PROT_READ, MAP_SHARED, fd, first * PAGE);
	if (p == MAP_FAILED)
		die("mmap");
	for (size_t i = 0; i < npages; i++)
		sum += p[i * PAGE];
	if (madvise(p, npages * PAGE, MADV_PAGEOUT))
		die("madvise(MADV_PAGEOUT)");
	munmap(p, npages * PAGE);
	return counter("stores") - before;
}

/*
 * Pages out until every page of the range has left the page cache, or 20
 * tries; returns the stores.  MADV_PAGEOUT only takes folios on the LRU
 * lists, and a folio just read may still sit in the per-CPU batch of
 * another CPU than the one paging out: the tests run pinned to CPU 0, and
 * try again.
 */
static size_t cached(int fd, size_t first, size_t npages);

static unsigned long page_out_all(int fd, size_t first, size_t npages)
{
	unsigned long stores = 0;

	for (int i = 0; i < 20; i++) {
		stores += page_out(fd, first, npages);
		if (!cached(fd, first, npages))
			break;
		usleep(50 * 1000);
	}
	return stores;
}

/* Pages of @fd from page @first (of @npages) in the page cache. */
static size_t cached(int fd, size_t first, size_t npages)
{
	unsigned char vec[64];
	size_t n = 0;
	void *p;

	if (npages > sizeof(vec))
		npages = sizeof(vec);
	p = mmap(NULL, npages * PAGE, PROT_READ, MAP_SHARED, fd, first * PAGE);
	if (p == MAP_FAILED)
		die("mmap");
	if (mincore(p, npages * PAGE, vec))
		die("mincore");
	munmap(p, npages * PAGE);
	for (size_t i = 0; i < npages; i++)
		n += vec[i] & 1;
	return n;
}

static void join_cgroup(const char *cg)
{
	char path[512], pid[32];
	int fd, n;

	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		die(path);
	n = snprintf(pid, sizeof(pid), "%d\n", getpid());
	if (write(fd, pid, n) != n)
		die(path);
	close(fd);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * Forks the O_DIRECT writer of the "dio" tests: it joins @cg, writes
 * version 2 of the first @len bytes of @path, and returns once the child
 * is about to write.  The child exits 0 when the write had the wanted
 * result: all of it, or with @enospc an ENOSPC failure; 3 otherwise.
 */
static pid_t fork_dio_writer(const char *path, const char *cg, size_t len, int enospc)
{
	int sync_pipe[2];
	pid_t child;
	char c;

	if (pipe(sync_pipe))
		die("pipe");
	child = fork();
	if (child < 0)
		die("fork");
	if (!child) {
		unsigned char *buf;
		ssize_t n;
		int dfd;

		join_cgroup(cg);
		dfd = open(path, O_WRONLY | O_DIRECT);
		if (dfd < 0 || posix_memalign((void **)&buf, PAGE, len))
			die("O_DIRECT open");
		fill(buf, 0, len, 2);
		if (write(sync_pipe[1], "w", 1) != 1)
			die("pipe");
		n = pwrite(dfd, buf, len, 0);
		if (enospc ? n < 0 && errno == ENOSPC : n == (ssize_t)len)
			_exit(0);
		fprintf(stderr, "%s: the O_DIRECT write returned %zd (%s)\n", prog, n,
			n < 0 ? strerror(errno) : "no error");
		_exit(3);
	}
	close(sync_pipe[1]);
	if (read(sync_pipe[0], &c, 1) != 1)
		fail("the writer died before writing");
	close(sync_pipe[0]);
	return child;
}

/* Waits for child @pid; fails with @what unless it exited with 0. */
static void wait_ok(pid_t pid, const char *what)
{
	int status;

	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		fail(what);
}

/* Pages in the O_DIRECT write of test "dio". */
#define DIO_PAGES 32

static int test_dio(const char *dir, const char *cg)
{
	size_t len = DIO_PAGES * PAGE, last = DIO_PAGES - 1;
	unsigned char *v1 = malloc(PAGE), *v2;
	unsigned long stores;
	char path[512];
	int status, fd;
	double t0;
	pid_t child;

	snprintf(path, sizeof(path), "%s/dio", dir);
	fd = make_file(path, len, 1);
	/* Start with nothing cached: the read below goes to the disk. */
	if (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED))
		die("fadvise");
	child = fork_dio_writer(path, cg, len, 0);
	t0 = now();
	/* Give the write time to be submitted and queued by the throttle. */
	usleep(300 * 1000);

	/* The disk still has V1: a buffered read caches it... */
	fill(v1, last * PAGE, PAGE, 1);
	if (check_read(fd, last * PAGE, v1, PAGE, "read during the write"))
		fail("the page read during the write is not V1: the write was not held in flight");
	/* ...and reclaim hands it to DMEM. */
	stores = page_out_all(fd, last, 1);
	printf("# dio: V1 read and paged out %.2f s into the write: %lu stores\n",
	       now() - t0, stores);
	if (!stores)
		fail("DMEM stored nothing on MADV_PAGEOUT");
	if (waitpid(child, &status, WNOHANG) != 0)
		fail("the write completed before the page was paged out: not held in flight");
	wait_ok(child, "the O_DIRECT writer failed");
	printf("# dio: write completed after %.2f s\n", now() - t0);

	if (cached(fd, last, 1))
		fail("the page is cached after the write: the test would not read through DMEM");
	v2 = malloc(len);
	if (!v2)
		die("malloc");
	fill(v2, 0, len, 2);
	if (check_read(fd, last * PAGE, v2 + last * PAGE, PAGE, "read after the write") ||
	    check_read(fd, 0, v2, len, "whole file after the write"))
		fail("a read after the O_DIRECT write returned old bytes");
	printf("# dio: every byte is V2\n");
	close(fd);
	return 0;
}

#define VER_PAGES 4

static int test_setversion(const char *dir)
{
	size_t len = VER_PAGES * PAGE;
	unsigned char *want = malloc(len);
	unsigned long stores;
	long gen, other;
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/version", dir);
	fd = make_file(path, len, 1);
	if (ioctl(fd, FS_IOC_GETVERSION, &gen))
		die("FS_IOC_GETVERSION");
	other = gen + 1;
	if (ioctl(fd, FS_IOC_SETVERSION, &other)) {
		if (errno == ENOTTY || errno == EOPNOTSUPP) {
			printf("# setversion: refused by the file system (%s)\n",
			       strerror(errno));
			return 77;
		}
		die("FS_IOC_SETVERSION");
	}
	/* Restore the first generation before storing, then swap again. */
	if (ioctl(fd, FS_IOC_SETVERSION, &gen))
		die("FS_IOC_SETVERSION");

	/* V1 stored under generation gen. */
	stores = page_out_all(fd, 0, VER_PAGES);
	if (!stores || cached(fd, 0, VER_PAGES))
		fail("V1 not stored by DMEM");
	if (ioctl(fd, FS_IOC_SETVERSION, &other))
		die("FS_IOC_SETVERSION");
	/* Read (V1), rewritten (V2), stored again under the other generation. */
	fill(want, 0, len, 1);
	if (check_read(fd, 0, want, len, "V1 under the second generation"))
		fail("V1 read back wrong");
	fill(want, 0, len, 2);
	pwrite_all(fd, want, len, 0);
	if (fsync(fd))
		die("fsync");
	stores = page_out_all(fd, 0, VER_PAGES);
	if (!stores || cached(fd, 0, VER_PAGES))
		fail("V2 not stored by DMEM");
	/* Back to the first generation: V2 it must be. */
	if (ioctl(fd, FS_IOC_SETVERSION, &gen))
		die("FS_IOC_SETVERSION");
	printf("# setversion: V1 stored under generation %ld, V2 under %ld; reading under %ld\n",
	       gen, other, gen);
	if (check_read(fd, 0, want, len, "after setting the generation back"))
		fail("an old copy came back with the old generation");
	printf("# setversion: every byte is V2\n");
	close(fd);
	return 0;
}

static int test_hwpoison(const char *dir)
{
	size_t len = 4 * PAGE, page = 1, part = 100;
	unsigned char *want = malloc(len);
	volatile unsigned char sum;
	unsigned char *p;
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/poison", dir);
	fd = make_file(path, len, 1);
	fill(want, 0, len, 1);
	if (!page_out_all(fd, page, 1) || cached(fd, page, 1))
		fail("V1 not stored by DMEM");
	/*
	 * A partial write: write_begin reads the rest of the page from the
	 * disk through buffer heads, not through the read path that asks
	 * DMEM, so DMEM's copy of V1 stays while the folio holds V2.
	 */
	fill(want + page * PAGE, page * PAGE, part, 2);
	pwrite_all(fd, want + page * PAGE, part, page * PAGE);
	if (fsync(fd))
		die("fsync");
	p = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, fd, page * PAGE);
	if (p == MAP_FAILED)
		die("mmap");
	sum = p[0];
	(void)sum;
	/* Memory failure takes the clean folio out of the page cache. */
	if (madvise(p, PAGE, MADV_HWPOISON)) {
		if (errno == EINVAL || errno == EPERM) {
			printf("# hwpoison: MADV_HWPOISON refused (%s)\n", strerror(errno));
			return 77;
		}
		die("madvise(MADV_HWPOISON)");
	}
	munmap(p, PAGE);
	if (cached(fd, page, 1))
		fail("the poisoned page is still cached");
	printf("# hwpoison: page %zu partly rewritten and removed by memory failure\n", page);
	if (check_read(fd, 0, want, len, "after the memory failure"))
		fail("an old copy came back after the memory-failure removal");
	printf("# hwpoison: every byte right\n");
	close(fd);
	return 0;
}

static void bind_cpu0(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(0, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		die("sched_setaffinity");
}

static void write_str(int fd, const char *s, const char *what)
{
	/* CMA's debugfs files are not seekable: no pwrite(). */
	if (write(fd, s, strlen(s)) != (ssize_t)strlen(s))
		die(what);
}

#define RT_PAGES 1024

static int test_rt(const char *cmadir, const char *dir, int seconds)
{
	size_t len = RT_PAGES * PAGE;
	unsigned long rounds = 0, allocs = 0;
	unsigned long area_pages;
	double worst = 0, t1;
	struct sched_param sp = { .sched_priority = 1 };
	char path[512], buf[64];
	unsigned char *want;
	int fd, afd, ffd;
	double end;
	pid_t child;
	FILE *f;

	snprintf(path, sizeof(path), "%s/count", cmadir);
	f = fopen(path, "r");
	if (!f || fscanf(f, "%lu", &area_pages) != 1)
		die(path);
	fclose(f);
	snprintf(path, sizeof(path), "%s/rt", dir);
	fd = make_file(path, len, 3);
	want = malloc(len);
	if (!want)
		die("malloc");
	fill(want, 0, len, 3);
	bind_cpu0();
	end = now() + seconds;
	child = fork();
	if (child < 0)
		die("fork");
	if (!child) {
		/* The copier: stores on page-out, loads on read. */
		while (now() < end) {
			page_out(fd, 0, RT_PAGES);
			if (check_read(fd, 0, want, len, "copier read"))
				_exit(1);
			rounds++;
		}
		printf("# rt: copier: %lu rounds of %d pages, every byte right\n",
		       rounds, RT_PAGES);
		_exit(0);
	}
	snprintf(path, sizeof(path), "%s/alloc", cmadir);
	afd = open(path, O_WRONLY);
	snprintf(path, sizeof(path), "%s/free", cmadir);
	ffd = open(path, O_WRONLY);
	if (afd < 0 || ffd < 0)
		die("CMA debugfs alloc/free");
	if (sched_setscheduler(0, SCHED_FIFO, &sp))
		die("sched_setscheduler(SCHED_FIFO)");
	snprintf(buf, sizeof(buf), "%lu", area_pages);
	while (now() < end) {
		usleep(500);
		t1 = now();
		write_str(afd, buf, "CMA alloc of the whole area");
		t1 = now() - t1;
		if (t1 > worst)
			worst = t1;
		write_str(ffd, buf, "CMA free");
		allocs++;
	}
	sp.sched_priority = 0;
	sched_setscheduler(0, SCHED_OTHER, &sp);
	printf("# rt: allocator (SCHED_FIFO): %lu allocations of %lu pages, the slowest %.1f ms\n",
	       allocs, area_pages, worst * 1e3);
	wait_ok(child, "the copier read wrong bytes or failed");
	close(fd);
	return 0;
}

#define SW_FILES 8
#define SW_PAGES 16
#define SW_WRITERS 3
#define SW_TOGGLES 150

/* Writes "0" or "1" to the file client's switch. */
static void switch_client(int on)
{
	int fd = open(DMEM "enabled", O_WRONLY);

	if (fd < 0)
		die(DMEM "enabled");
	write_str(fd, on ? "1\n" : "0\n", DMEM "enabled");
	close(fd);
}

/*
 * Writer @w of test "switch": rewrites page after page of its files with
 * O_DIRECT, each with the bytes it already holds, until killed.
 */
static void switch_writer(const char *dir, int w)
{
	unsigned char *buf;
	int fds[SW_FILES], n = 0;
	char path[512];

	if (posix_memalign((void **)&buf, PAGE, PAGE))
		die("posix_memalign");
	for (int f = w; f < SW_FILES; f += SW_WRITERS) {
		snprintf(path, sizeof(path), "%s/switch%d", dir, f);
		fds[n] = open(path, O_WRONLY | O_DIRECT);
		if (fds[n] < 0)
			die(path);
		n++;
	}
	for (unsigned long i = 0;; i++) {
		int f = w + (int)(i % n) * SW_WRITERS;
		size_t page = (i / n) % SW_PAGES;

		fill(buf, page * PAGE, PAGE, f + 1);
		pwrite_all(fds[i % n], buf, PAGE, page * PAGE);
	}
}

static int test_switch(const char *dir)
{
	size_t len = SW_PAGES * PAGE;
	unsigned char *want = malloc(len);
	pid_t writers[SW_WRITERS];
	unsigned long wrong = 0;
	cpu_set_t all;
	char path[512];

	if (!want)
		die("malloc");
	/* The writers and the switch run on every CPU, at the same time. */
	CPU_ZERO(&all);
	for (int c = 0; c < CPU_SETSIZE; c++)
		CPU_SET(c, &all);
	if (sched_setaffinity(0, sizeof(all), &all))
		die("sched_setaffinity");
	for (int f = 0; f < SW_FILES; f++) {
		snprintf(path, sizeof(path), "%s/switch%d", dir, f);
		close(make_file(path, len, f + 1));
	}
	for (int w = 0; w < SW_WRITERS; w++) {
		writers[w] = fork();
		if (writers[w] < 0)
			die("fork");
		if (!writers[w]) {
			switch_writer(dir, w);
			_exit(0);
		}
	}
	for (int t = 0; t < SW_TOGGLES; t++) {
		switch_client(0);
		switch_client(1);
	}
	for (int w = 0; w < SW_WRITERS; w++) {
		int status;

		kill(writers[w], SIGKILL);
		if (waitpid(writers[w], &status, 0) < 0)
			die("waitpid");
	}
	printf("# switch: %d switches off and on beside %d O_DIRECT writers\n",
	       SW_TOGGLES, SW_WRITERS);
	bind_cpu0();
	for (int f = 0; f < SW_FILES; f++) {
		unsigned long stores, loads;
		int fd;

		snprintf(path, sizeof(path), "%s/switch%d", dir, f);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			die(path);
		fill(want, 0, len, f + 1);
		wrong += check_read(fd, 0, want, len, "read before the page-out");
		stores = page_out_all(fd, 0, SW_PAGES);
		loads = counter("loads");
		wrong += check_read(fd, 0, want, len, "read after the page-out");
		loads = counter("loads") - loads;
		printf("# switch: file %d: %lu pages stored, %lu loaded\n", f, stores, loads);
		if (!stores || !loads) {
			fprintf(stderr, "%s: file %d: %lu stores, %lu loads: its DMEM group was left fenced\n",
				prog, f, stores, loads);
			wrong++;
		}
		close(fd);
		unlink(path);
	}
	free(want);
	if (wrong)
		fail("a file's pages were not stored or loaded, or a byte was wrong, after the switch raced O_DIRECT writes");
	printf("# switch: every file stored and loaded, every byte right\n");
	return 0;
}

/* Whether task @pid sleeps waiting for a folio (its lock, here). */
static int waits_on_folio(pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/wchan", pid);
	return wchan_has(path, "folio");
}

/*
 * Test "dioswitch": the file client is switched on while the invalidation
 * walk after an O_DIRECT write runs, and the page the walk has not reached
 * yet, read during the write with the old bytes, is paged out then.
 */
/*
 * Pages of test "dioswitch": the walk takes the folios it finds in
 * batches of up to 31 (PAGEVEC_SIZE) and holds a reference on each while
 * it waits at the first, which reclaim cannot then free; pages 1 to
 * CACHED_PAGES are cached too, so that the last page is outside the batch
 * the walk waits in.
 */
#define SWITCH_PAGES 48
#define CACHED_PAGES 40

static int test_dio_switch(const char *dir, const char *wcg, const char *rcg)
{
	size_t len = SWITCH_PAGES * PAGE, last = SWITCH_PAGES - 1;
	unsigned long offered, refused, stores, mismatches;
	unsigned char *v2 = malloc(SWITCH_PAGES * PAGE);
	int rpipe[2], status, fd;
	pid_t writer, reader;
	char path[512], c;
	double t0;

	if (!v2)
		die("malloc");
	snprintf(path, sizeof(path), "%s/dioswitch", dir);
	fd = make_file(path, len, 1);
	if (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED))
		die("fadvise");
	mismatches = optional_counter("verify_mismatches");
	switch_client(0);
	if (pipe(rpipe))
		die("pipe");
	reader = fork();
	if (reader < 0)
		die("fork");
	if (!reader) {
		unsigned char *buf = malloc(PAGE);
		int rfd;

		join_cgroup(rcg);
		rfd = open(path, O_RDONLY);
		/* One page, no readahead: its folio stays locked for the read. */
		if (rfd < 0 || !buf || posix_fadvise(rfd, 0, 0, POSIX_FADV_RANDOM))
			die("reader open");
		if (read(rpipe[0], &c, 1) != 1)
			die("pipe");
		if (pread(rfd, buf, PAGE, 0) != (ssize_t)PAGE)
			die("reader pread");
		_exit(0);
	}
	writer = fork_dio_writer(path, wcg, len, 0);
	t0 = now();
	usleep(300 * 1000);
	/*
	 * Pages 1 to CACHED_PAGES are cached, whatever they hold (bios of
	 * the write may have passed the throttle already); the disk still has
	 * V1 at the last page, which the write reaches last.
	 */
	if (pread(fd, v2, CACHED_PAGES * PAGE, PAGE) != (ssize_t)(CACHED_PAGES * PAGE))
		die("pread");
	fill(v2, last * PAGE, PAGE, 1);
	if (check_read(fd, last * PAGE, v2, PAGE, "read during the write"))
		fail("the last page read during the write is not V1: the write was not held in flight");
	if (waitpid(writer, &status, WNOHANG) != 0)
		fail("the write completed before its pages were read");
	/* Page 0 is read, slowly, behind the write's pre-invalidation. */
	if (write(rpipe[1], "r", 1) != 1)
		die("pipe");
	/* Once its bios are done, the writer's walk waits at page 0. */
	while (!waits_on_folio(writer)) {
		if (waitpid(writer, &status, WNOHANG) != 0)
			fail("the write completed before its walk waited at page 0");
		if (now() - t0 > 30)
			fail("the writer never waited on a folio");
		usleep(20 * 1000);
	}
	if (waitpid(reader, &status, WNOHANG) != 0)
		fail("the read of page 0 completed before the walk reached it");
	printf("# dioswitch: %.2f s into the write, its walk waits at page 0\n", now() - t0);
	switch_client(1);
	offered = counter("stores") + counter("refused_superseded");
	refused = counter("refused_superseded");
	stores = page_out_all(fd, last, 1);
	offered = counter("stores") + counter("refused_superseded") - offered;
	refused = counter("refused_superseded") - refused;
	printf("# dioswitch: client on, the page paged out: offered to DMEM %lu times, %lu stored, %lu refused\n",
	       offered, stores, refused);
	if (cached(fd, last, 1))
		fail("the page is still cached after the page-out");
	if (!offered)
		fail("reclaim offered the page to DMEM not once");
	if (waitpid(writer, &status, WNOHANG) != 0)
		fail("the walk ended before the page-out: the window was not held open");
	wait_ok(reader, "the reader of page 0 failed");
	wait_ok(writer, "the O_DIRECT writer failed");
	printf("# dioswitch: write and walk done after %.2f s\n", now() - t0);
	if (cached(fd, last, 1))
		fail("the page is cached after the write: the test would not read through DMEM");
	fill(v2, 0, len, 2);
	if (check_read(fd, last * PAGE, v2 + last * PAGE, PAGE, "read after the write") ||
	    check_read(fd, 0, v2, len, "whole file after the write"))
		fail("a read after the O_DIRECT write returned old bytes");
	/* Verify mode would have handed the device's bytes over a stale hit. */
	mismatches = optional_counter("verify_mismatches") - mismatches;
	if (mismatches)
		fail("verify mode caught a stale copy of the page (verify_mismatches moved)");
	printf("# dioswitch: every byte is V2, no stale copy loaded\n");
	close(fd);
	unlink(path);
	free(v2);
	return 0;
}

/*
 * Test "diofail": pages 0 to FAIL_WRITTEN - 1 of the file are written,
 * the rest is a hole the full file system cannot fill.
 */
#define FAIL_PAGES 48
#define FAIL_WRITTEN 40

/* Writes to @path until the file system is full. */
static void fill_fs(const char *path)
{
	static unsigned char buf[1 << 20];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0)
		die(path);
	memset(buf, 0x5a, sizeof(buf));
	while (write(fd, buf, sizeof(buf)) > 0)
		;
	while (write(fd, buf, 1024) > 0)
		;
	if (errno != ENOSPC)
		die("filling the file system");
	fsync(fd);
	close(fd);
}

static int test_dio_fail(const char *dir, const char *cg)
{
	size_t len = FAIL_PAGES * PAGE, last = FAIL_WRITTEN - 1;
	unsigned char *buf = malloc(len), *dbuf;
	unsigned long mismatches = optional_counter("verify_mismatches"), stores;
	char path[512], filler[512];
	size_t still;
	int status, fd, dfd;
	pid_t writer;

	snprintf(path, sizeof(path), "%s/diofail", dir);
	snprintf(filler, sizeof(filler), "%s/diofail.filler", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || !buf)
		die(path);
	fill(buf, 0, FAIL_WRITTEN * PAGE, 1);
	pwrite_all(fd, buf, FAIL_WRITTEN * PAGE, 0);
	if (ftruncate(fd, len) || fsync(fd))
		die("ftruncate");
	fill_fs(filler);
	if (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED))
		die("fadvise");
	writer = fork_dio_writer(path, cg, len, 1);
	usleep(300 * 1000);
	/* The write reaches the last written page last: the disk has V1. */
	fill(buf, last * PAGE, PAGE, 1);
	if (check_read(fd, last * PAGE, buf, PAGE, "read during the write"))
		fail("the page read during the write is not V1: the write was not held in flight");
	if (waitpid(writer, &status, WNOHANG) != 0)
		fail("the write completed before the page was read");
	if (waitpid(writer, &status, 0) != writer || !WIFEXITED(status))
		fail("the O_DIRECT writer died");
	if (WEXITSTATUS(status))
		fail("the O_DIRECT write did not fail with ENOSPC part way");
	/* Its written part is on the disk. */
	dfd = open(path, O_RDONLY | O_DIRECT);
	if (dfd < 0 || posix_memalign((void **)&dbuf, PAGE, FAIL_WRITTEN * PAGE) ||
	    pread(dfd, dbuf, FAIL_WRITTEN * PAGE, 0) != (ssize_t)(FAIL_WRITTEN * PAGE))
		die("O_DIRECT read");
	fill(buf, 0, FAIL_WRITTEN * PAGE, 2);
	if (memcmp(dbuf, buf, FAIL_WRITTEN * PAGE))
		fail("the failed write's written part is not V2 on the disk");
	close(dfd);
	/*
	 * The page read during the write is paged out: if it is still
	 * cached, with V1, reclaim offers V1 to DMEM; if not, the page-out
	 * reads V2 from the disk first.
	 */
	still = cached(fd, last, 1);
	stores = page_out_all(fd, last, 1);
	printf("# diofail: write failed with ENOSPC after its first %d pages; the page read during it %s cached after it, %lu stores on page-out\n",
	       FAIL_WRITTEN, still ? "still" : "no longer", stores);
	if (cached(fd, last, 1))
		fail("the page is still cached after the page-out");
	fill(buf, 0, FAIL_WRITTEN * PAGE, 2);
	if (check_read(fd, last * PAGE, buf + last * PAGE, PAGE, "read after the failed write") ||
	    check_read(fd, 0, buf, FAIL_WRITTEN * PAGE, "written part after the failed write"))
		fail("a read after the failed O_DIRECT write returned old bytes");
	if (optional_counter("verify_mismatches") != mismatches)
		fail("verify mode caught a stale copy of the page (verify_mismatches moved)");
	printf("# diofail: every byte the write put on the disk reads back\n");
	close(fd);
	unlink(filler);
	unlink(path);
	free(buf);
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: %s dio -w CGROUP DIR | dioswitch -w CGROUP -r CGROUP DIR |\n"
		"       diofail -w CGROUP DIR |\n"
		"       setversion DIR | hwpoison DIR | switch DIR | rt CMADIR DIR SECONDS\n",
		prog);
	exit(2);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 3)
		usage();
	/* One CPU: the page-outs find what the reads put on its LRU. */
	bind_cpu0();
	if (!strcmp(argv[1], "dio")) {
		if (argc != 5 || strcmp(argv[2], "-w"))
			usage();
		return test_dio(argv[4], argv[3]);
	}
	if (!strcmp(argv[1], "diofail")) {
		if (argc != 5 || strcmp(argv[2], "-w"))
			usage();
		return test_dio_fail(argv[4], argv[3]);
	}
	if (!strcmp(argv[1], "dioswitch")) {
		if (argc != 7 || strcmp(argv[2], "-w") || strcmp(argv[4], "-r"))
			usage();
		return test_dio_switch(argv[6], argv[3], argv[5]);
	}
	if (!strcmp(argv[1], "rt")) {
		if (argc != 5 || atoi(argv[4]) <= 0)
			usage();
		return test_rt(argv[2], argv[3], atoi(argv[4]));
	}
	if (argc != 3)
		usage();
	if (!strcmp(argv[1], "setversion"))
		return test_setversion(argv[2]);
	if (!strcmp(argv[1], "hwpoison"))
		return test_hwpoison(argv[2]);
	if (!strcmp(argv[1], "switch"))
		return test_switch(argv[2]);
	usage();
	return 2;
}
