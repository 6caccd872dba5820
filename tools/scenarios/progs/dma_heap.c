// SPDX-License-Identifier: GPL-2.0
/*
 * dma_heap - allocate dma-bufs from a heap of /dev/dma_heap and check them
 * from userspace: zeroed on allocation, mapped, written and read back
 * under DMA_BUF_IOCTL_SYNC, shared between processes, freed in any order,
 * and a full heap refusing with ENOMEM.
 *
 *   dma_heap basic   [-g GCMA_DIR] HEAP
 *   dma_heap alloc   [-g GCMA_DIR] HEAP PAGES
 *   dma_heap exhaust [-g GCMA_DIR] HEAP
 *   dma_heap stress  [-t SECONDS] [-s SEED] [-k KEEP] [-m MAX_PAGES] HEAP
 *
 * HEAP is a path, such as /dev/dma_heap/gcma0.  With -g (the area's
 * directory, /sys/kernel/mm/gcma/<area>) the program also checks GCMA's
 * counters around each step: primary_used_pages follows every allocation
 * and free page for page, and alloc_fail counts each refusal.  Nothing
 * else may allocate from the area meanwhile (DMEM may lend and lose
 * pages: lent pages are not counted as used).
 *
 * basic    buffers of 1, 3 and 17 pages, 64 KiB, 1 MiB and 1 MiB + 4 KiB:
 *          the size the fd reports, zeroed, filled and read back through a
 *          second mapping; a freed buffer's memory comes back zeroed; an fd
 *          passed to another process with SCM_RIGHTS (both write, each
 *          reads the other's bytes, the sender closes first and the
 *          receiver still reads them), a mapping inherited by fork; twelve
 *          buffers freed in a shuffled order, some by close() before
 *          munmap(), every live one verified after each free; malformed
 *          requests (length 0, unknown flags, a private or oversized
 *          mapping) refused with EINVAL.
 * alloc    one buffer of PAGES pages: zeroed, filled, read back, freed.
 * exhaust  fills the heap: one page, then 1 MiB, 64 KiB and 4 KiB buffers
 *          until each size is refused; every refusal must be ENOMEM and
 *          every buffer zeroed (every word; then the first word of each
 *          page is written and read back); then a page more is refused, a
 *          1 MiB buffer freed in the middle is allocated again, and all
 *          are freed in a shuffled order.  With -g, the area must be full
 *          (primary_used_pages = total_pages) and empty again at the end.
 * stress   until SECONDS pass: allocate buffers of 1 to MAX_PAGES pages
 *          (at most KEEP alive), check they are zeroed, fill them, and free
 *          a random live one after reading it back; every 8th step a fork
 *          child reads a live buffer through the inherited mapping and
 *          writes the next version, which the parent then reads.  Any
 *          failure to allocate is an error: run it with KEEP x MAX_PAGES
 *          well below the area, and the area can never be full.
 *
 * The bytes of version V of a buffer are 64-bit words W(i) = V << 40 ^
 * i * 0x9e3779b97f4a7c15 (pattern.h's pattern, word by word), so a word of
 * another buffer, another version or another place is told apart.
 *
 * Prints "# ..." lines and one summary line "DMA-HEAP <mode> key=value...".
 * Exit status: 0 all checks passed, 1 a check failed (the reason on
 * stderr), 2 usage error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/dma-buf.h>
#include <linux/dma-heap.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL
#define KIB 1024UL
#define MIB (1024UL * 1024UL)
#define MAX_BUFS 16384

struct buf {
	int fd;			/* -1 once closed */
	uint64_t *map;		/* NULL once unmapped */
	size_t len;		/* bytes, a multiple of PAGE */
	unsigned int ver;	/* the version its words hold */
};

static const char *heap_path;
static const char *gcma_dir;
static int heap_fd = -1;
static unsigned long long allocs, frees, refusals, words_checked, forks;
/* Words from one written or checked to the next (exhaust: one a page). */
static size_t stride = 1;
static uint64_t rng = 0x2545f4914f6cdd1dULL;

static void fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "dma_heap: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static uint64_t word(unsigned int ver, size_t i)
{
	return ((uint64_t)ver << 40) ^ (i * 0x9e3779b97f4a7c15ULL);
}

/* A GCMA counter of the area, or -1 without -g. */
static long long counter(const char *name)
{
	char path[512];
	long long v;
	FILE *f;

	if (!gcma_dir)
		return -1;
	snprintf(path, sizeof(path), "%s/%s", gcma_dir, name);
	f = fopen(path, "r");
	if (!f)
		fail("%s: %s", path, strerror(errno));
	if (fscanf(f, "%lld", &v) != 1)
		fail("%s: not a number", path);
	fclose(f);
	return v;
}

static void expect_counter(const char *name, long long want, const char *when)
{
	long long v = counter(name);

	if (gcma_dir && v != want)
		fail("%s: %s is %lld, expected %lld", when, name, v, want);
}

static void sync_buf(struct buf *b, unsigned long long flags)
{
	struct dma_buf_sync s = { .flags = flags };

	while (ioctl(b->fd, DMA_BUF_IOCTL_SYNC, &s)) {
		if (errno != EINTR && errno != EAGAIN)
			fail("DMA_BUF_IOCTL_SYNC %#llx: %s", flags, strerror(errno));
	}
}

/* Asks the heap for @len bytes: 0 and an fd in @fd, or the errno. */
static int heap_alloc(size_t len, unsigned int fd_flags,
		      unsigned long long heap_flags, int *fd)
{
	struct dma_heap_allocation_data d = {
		.len = len,
		.fd_flags = fd_flags,
		.heap_flags = heap_flags,
	};

	if (ioctl(heap_fd, DMA_HEAP_IOCTL_ALLOC, &d))
		return errno;
	*fd = d.fd;
	return 0;
}

static uint64_t *map_fd(int fd, size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (p == MAP_FAILED)
		fail("mmap of %zu bytes: %s", len, strerror(errno));
	return p;
}

/* The first word of @p that is not version @ver's (or zero), or -1. */
static long check_words(const uint64_t *p, size_t len, unsigned int ver,
			int zero)
{
	size_t n = len / 8, step = zero ? 1 : stride;

	for (size_t i = 0; i < n; i += step) {
		uint64_t want = zero ? 0 : word(ver, i);

		if (p[i] != want)
			return (long)i;
		words_checked++;
	}
	return -1;
}

static void verify(struct buf *b, const char *what)
{
	long i;

	sync_buf(b, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ);
	i = check_words(b->map, b->len, b->ver, 0);
	sync_buf(b, DMA_BUF_SYNC_END | DMA_BUF_SYNC_READ);
	if (i >= 0)
		fail("%s: buffer of %zu bytes, word %ld is %#" PRIx64
		     ", version %u has %#" PRIx64, what, b->len, i,
		     b->map[i], b->ver, word(b->ver, (size_t)i));
}

static void fill(struct buf *b, unsigned int ver)
{
	size_t n = b->len / 8;

	sync_buf(b, DMA_BUF_SYNC_START | DMA_BUF_SYNC_WRITE);
	for (size_t i = 0; i < n; i += stride)
		b->map[i] = word(ver, i);
	sync_buf(b, DMA_BUF_SYNC_END | DMA_BUF_SYNC_WRITE);
	b->ver = ver;
}

/*
 * Allocates and maps a buffer of @len bytes and checks that it reads as
 * zeroes and that the area's used pages grew by its size (@used: the
 * count before, updated).  Returns the errno of a refused allocation.
 */
static int get_buf(struct buf *b, size_t len, long long *used)
{
	off_t size;
	long i;
	int err;

	err = heap_alloc(len, O_RDWR | O_CLOEXEC, 0, &b->fd);
	if (err)
		return err;
	allocs++;
	size = lseek(b->fd, 0, SEEK_END);
	if (size != (off_t)len)
		fail("a buffer of %zu bytes has size %lld", len, (long long)size);
	b->len = len;
	b->map = map_fd(b->fd, len);
	sync_buf(b, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ);
	i = check_words(b->map, len, 0, 1);
	sync_buf(b, DMA_BUF_SYNC_END | DMA_BUF_SYNC_READ);
	if (i >= 0)
		fail("new buffer of %zu bytes not zeroed: word %ld is %#" PRIx64,
		     len, i, b->map[i]);
	if (used && *used >= 0) {
		*used += len / PAGE;
		expect_counter("primary_used_pages", *used, "after an allocation");
	}
	return 0;
}

/* Frees @b: munmap() then close(), or the other way round. */
static void put_buf(struct buf *b, int close_first, long long *used)
{
	if (close_first) {
		close(b->fd);
		b->fd = -1;
		/* The mapping holds the dma-buf: still readable. */
		for (size_t i = 0; i < b->len / 8; i += PAGE / 8)
			if (b->map[i] != word(b->ver, i))
				fail("buffer lost its bytes when its fd was closed");
		if (used && *used >= 0)
			expect_counter("primary_used_pages", *used,
				       "after close() of a mapped buffer");
	}
	if (munmap(b->map, b->len))
		fail("munmap: %s", strerror(errno));
	b->map = NULL;
	if (b->fd >= 0)
		close(b->fd);
	b->fd = -1;
	frees++;
	if (used && *used >= 0) {
		*used -= b->len / PAGE;
		expect_counter("primary_used_pages", *used, "after a free");
	}
}

static void shuffle(unsigned int *order, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		order[i] = i;
	for (unsigned int i = n; i > 1; i--) {
		unsigned int j = rnd() % i, t = order[i - 1];

		order[i - 1] = order[j];
		order[j] = t;
	}
}

static void wait_child(pid_t pid, const char *what)
{
	int status;

	if (waitpid(pid, &status, 0) != pid)
		fail("waitpid: %s", strerror(errno));
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		fail("%s: child failed (status %#x)", what, status);
}

static void send_fd(int sock, int fd)
{
	char byte = 'f';
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = u.buf, .msg_controllen = sizeof(u.buf),
	};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	if (sendmsg(sock, &msg, 0) != 1)
		fail("sendmsg: %s", strerror(errno));
}

static int recv_fd(int sock)
{
	char byte;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = u.buf, .msg_controllen = sizeof(u.buf),
	};
	struct cmsghdr *c;
	int fd;

	if (recvmsg(sock, &msg, 0) != 1)
		fail("recvmsg: %s", strerror(errno));
	c = CMSG_FIRSTHDR(&msg);
	if (!c || c->cmsg_type != SCM_RIGHTS)
		fail("no fd received");
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

static void token(int sock, char t)
{
	if (write(sock, &t, 1) != 1)
		fail("socket write: %s", strerror(errno));
}

static void expect_token(int sock, char t)
{
	char c;

	if (read(sock, &c, 1) != 1 || c != t)
		fail("socket: expected '%c'", t);
}

/*
 * Two processes share a buffer through SCM_RIGHTS: each writes a version
 * the other reads; the sender then drops its fd and mapping first, and
 * the receiver still reads the last version.
 */
static void share_scm_rights(long long *used)
{
	struct buf b = { .fd = -1 };
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		fail("socketpair: %s", strerror(errno));
	pid = fork();
	if (pid < 0)
		fail("fork: %s", strerror(errno));
	if (!pid) {
		struct buf c = { .len = 64 * KIB, .ver = 101 };

		close(sv[0]);
		c.fd = recv_fd(sv[1]);
		c.map = map_fd(c.fd, c.len);
		verify(&c, "SCM_RIGHTS receiver");
		fill(&c, 102);
		token(sv[1], 'w');
		expect_token(sv[1], 'c');	/* the sender has let go */
		verify(&c, "SCM_RIGHTS receiver, after the sender's free");
		munmap(c.map, c.len);
		close(c.fd);
		_exit(0);
	}
	close(sv[1]);
	if (get_buf(&b, 64 * KIB, used))
		fail("64 KiB for SCM_RIGHTS: %s", strerror(errno));
	fill(&b, 101);
	send_fd(sv[0], b.fd);
	expect_token(sv[0], 'w');
	b.ver = 102;
	verify(&b, "SCM_RIGHTS sender, the receiver's version");
	/* The receiver holds it: freeing here leaves the pages in use. */
	munmap(b.map, b.len);
	close(b.fd);
	if (used && *used >= 0)
		expect_counter("primary_used_pages", *used,
			       "after the sender's free of a shared buffer");
	token(sv[0], 'c');
	wait_child(pid, "SCM_RIGHTS");
	close(sv[0]);
	frees++;
	if (used && *used >= 0) {
		*used -= 64 * KIB / PAGE;
		expect_counter("primary_used_pages", *used,
			       "after the receiver's exit");
	}
}

/* A child inherits a mapping and the fd, reads, writes; the parent reads. */
static void share_fork(long long *used)
{
	struct buf b = { .fd = -1 };
	pid_t pid;

	if (get_buf(&b, 3 * PAGE, used))
		fail("3 pages for fork: %s", strerror(errno));
	fill(&b, 201);
	pid = fork();
	if (pid < 0)
		fail("fork: %s", strerror(errno));
	if (!pid) {
		struct buf c = b;

		verify(&b, "fork child, inherited mapping");
		c.map = map_fd(b.fd, b.len);	/* and a mapping of its own */
		verify(&c, "fork child, inherited fd");
		fill(&c, 202);
		_exit(0);
	}
	wait_child(pid, "fork");
	b.ver = 202;
	verify(&b, "fork parent, the child's version");
	put_buf(&b, 0, used);
}

static void expect_einval(int err, const char *what)
{
	if (err != EINVAL)
		fail("%s: %s, expected EINVAL", what, err ? strerror(err) : "accepted");
	printf("# %s refused: EINVAL\n", what);
}

static void basic(void)
{
	static const size_t sizes[] = {
		PAGE, 3 * PAGE, 17 * PAGE, 64 * KIB, MIB, MIB + PAGE,
	};
	const unsigned int n = sizeof(sizes) / sizeof(sizes[0]);
	struct buf bufs[12];
	unsigned int order[12];
	long long used = counter("primary_used_pages");
	long long fails = counter("alloc_fail");
	struct buf b;
	void *p;
	int fd;

	/* Sizes, zeroing, fill and read back through a second mapping. */
	for (unsigned int i = 0; i < n; i++) {
		uint64_t *second;

		if (get_buf(&bufs[i], sizes[i], &used))
			fail("%zu bytes: %s", sizes[i], strerror(errno));
		fill(&bufs[i], 1 + i);
		second = map_fd(bufs[i].fd, sizes[i]);
		b = bufs[i];
		b.map = second;
		verify(&b, "second mapping");
		munmap(second, sizes[i]);
	}
	for (unsigned int i = 0; i < n; i++) {
		verify(&bufs[i], "after the others were written");
		put_buf(&bufs[i], i % 2, &used);
	}
	printf("# %u buffers of 1 page to 1 MiB + 4 KiB: zeroed, written, read back\n", n);

	/* A freed buffer's memory comes back zeroed (first fit: same pages). */
	for (unsigned int round = 0; round < 3; round++) {
		if (get_buf(&b, MIB, &used))
			fail("1 MiB again: %s", strerror(errno));
		fill(&b, 300 + round);
		put_buf(&b, 0, &used);
	}
	printf("# 1 MiB written, freed and allocated again 3 times: zeroed each time\n");

	share_scm_rights(&used);
	printf("# SCM_RIGHTS: both processes read each other's bytes; the receiver outlives the sender's free\n");
	share_fork(&used);
	printf("# fork: the child read the inherited mapping and fd, the parent its bytes\n");

	/* Twelve buffers freed in a shuffled order. */
	for (unsigned int i = 0; i < 12; i++) {
		if (get_buf(&bufs[i], (1 + i % 5) * 5 * PAGE + (i % 3) * 64 * KIB, &used))
			fail("buffer %u: %s", i, strerror(errno));
		fill(&bufs[i], 400 + i);
	}
	shuffle(order, 12);
	for (unsigned int k = 0; k < 12; k++) {
		put_buf(&bufs[order[k]], k % 3 == 0, &used);
		for (unsigned int j = k + 1; j < 12; j++)
			verify(&bufs[order[j]], "a live buffer after another's free");
	}
	printf("# 12 buffers freed in a shuffled order, the live ones verified after each free\n");

	/* Malformed requests. */
	expect_einval(heap_alloc(0, O_RDWR | O_CLOEXEC, 0, &fd), "length 0");
	expect_einval(heap_alloc(PAGE, O_RDWR | O_CLOEXEC, 1, &fd), "heap flag 1");
	expect_einval(heap_alloc(PAGE, O_RDWR | O_NONBLOCK, 0, &fd), "fd flag O_NONBLOCK");
	if (get_buf(&b, 2 * PAGE, &used))
		fail("2 pages: %s", strerror(errno));
	p = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, b.fd, 0);
	expect_einval(p == MAP_FAILED ? errno : 0, "MAP_PRIVATE mapping");
	p = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, b.fd, 0);
	expect_einval(p == MAP_FAILED ? errno : 0, "mapping beyond the buffer");
	fill(&b, 500);
	put_buf(&b, 0, &used);
	if (gcma_dir) {
		expect_counter("primary_used_pages", used, "at the end");
		expect_counter("alloc_fail", fails, "at the end (no allocation may fail)");
	}
	printf("DMA-HEAP basic allocs=%llu frees=%llu words_checked=%llu used_pages=%lld\n",
	       allocs, frees, words_checked, used);
}

static void alloc_one(unsigned long pages)
{
	long long used = counter("primary_used_pages");
	struct buf b;
	int err;

	err = get_buf(&b, pages * PAGE, &used);
	if (err)
		fail("%lu pages: %s", pages, strerror(err));
	fill(&b, 600);
	verify(&b, "alloc");
	put_buf(&b, 0, &used);
	printf("DMA-HEAP alloc pages=%lu words_checked=%llu\n", pages, words_checked);
}

static void exhaust(void)
{
	static const size_t steps[] = { MIB, 64 * KIB, PAGE };
	static struct buf bufs[MAX_BUFS];
	static unsigned int order[MAX_BUFS];
	long long used = counter("primary_used_pages");
	long long used0 = used, fails0 = counter("alloc_fail");
	unsigned long pages = 0;
	unsigned int n = 0, mid = ~0u;
	struct buf extra;
	int err;

	/*
	 * Every word is checked to be zero, but only the first word of each
	 * page is written and read back: enough to leave each page non-zero
	 * for the next allocation and to tell buffers that overlap apart.
	 */
	stride = PAGE / 8;
	/* One page first: the larger sizes then meet an unaligned start. */
	if (get_buf(&bufs[n], PAGE, &used))
		fail("the first page: %s", strerror(errno));
	fill(&bufs[n], 700);
	pages++;
	n++;
	for (unsigned int s = 0; s < 3; s++) {
		unsigned int got = 0;

		for (;;) {
			if (n == MAX_BUFS)
				fail("more than %d buffers", MAX_BUFS);
			err = get_buf(&bufs[n], steps[s], &used);
			if (err) {
				if (err != ENOMEM)
					fail("a full heap refused %zu bytes with %s, not ENOMEM",
					     steps[s], strerror(err));
				refusals++;
				break;
			}
			fill(&bufs[n], 700 + n);
			if (s == 0 && got == 4)
				mid = n;
			pages += steps[s] / PAGE;
			n++;
			got++;
		}
		printf("# %u buffers of %zu KiB, then ENOMEM\n", got, steps[s] / KIB);
	}
	if (gcma_dir) {
		expect_counter("primary_used_pages", counter("total_pages"),
			       "the heap refused every size");
		expect_counter("alloc_fail", fails0 + 3, "after three refusals");
	}
	/* Full: a page more is refused, ENOMEM again. */
	err = get_buf(&extra, PAGE, &used);
	if (err != ENOMEM)
		fail("a page more on a full heap: %s, expected ENOMEM",
		     err ? strerror(err) : "allocated");
	refusals++;
	/* Room made in the middle is found again. */
	if (mid != ~0u) {
		put_buf(&bufs[mid], 0, &used);
		if (get_buf(&bufs[mid], MIB, &used))
			fail("1 MiB freed in a full heap is not found again: %s",
			     strerror(errno));
		fill(&bufs[mid], 800);
	}
	for (unsigned int i = 0; i < n; i++)
		verify(&bufs[i], "a full heap");
	shuffle(order, n);
	for (unsigned int k = 0; k < n; k++)
		put_buf(&bufs[order[k]], k % 4 == 0, &used);
	if (gcma_dir) {
		expect_counter("primary_used_pages", used0, "after every free");
		expect_counter("alloc_fail", fails0 + 4, "after four refusals");
	}
	printf("DMA-HEAP exhaust pages=%lu buffers=%u refusals=%llu words_checked=%llu\n",
	       pages, n, refusals, words_checked);
}

static void stress(unsigned int seconds, unsigned int keep,
		   unsigned long max_pages)
{
	static struct buf live[64];
	unsigned int nlive = 0, step = 0, ver = (unsigned int)(rng & 0xffff) << 8;
	struct timespec t0, t;

	if (keep > 64)
		fail("-k: at most 64");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec >= (time_t)seconds)
			break;
		step++;
		if (nlive && step % 8 == 0) {
			/* A child writes the next version through the inherited mapping. */
			struct buf *b = &live[rnd() % nlive];
			pid_t pid = fork();

			if (pid < 0)
				fail("fork: %s", strerror(errno));
			if (!pid) {
				verify(b, "stress child");
				fill(b, b->ver + 1);
				_exit(0);
			}
			wait_child(pid, "stress");
			b->ver++;
			verify(b, "stress parent, the child's version");
			forks++;
		} else if (nlive < keep && (nlive == 0 || rnd() % 2)) {
			struct buf *b = &live[nlive];
			size_t len = (1 + rnd() % max_pages) * PAGE;
			int err = get_buf(b, len, NULL);

			if (err)
				fail("allocation of %zu bytes failed: %s (%u buffers live)",
				     len, strerror(err), nlive);
			fill(b, ++ver);
			nlive++;
		} else {
			unsigned int i = rnd() % nlive;

			verify(&live[i], "stress, before its free");
			put_buf(&live[i], rnd() % 2, NULL);
			live[i] = live[--nlive];
		}
	}
	while (nlive) {
		verify(&live[nlive - 1], "stress, at the end");
		put_buf(&live[--nlive], 0, NULL);
	}
	printf("DMA-HEAP stress seconds=%u allocs=%llu frees=%llu forks=%llu words_checked=%llu\n",
	       seconds, allocs, frees, forks, words_checked);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: dma_heap basic [-g GCMA_DIR] HEAP\n"
		"       dma_heap alloc [-g GCMA_DIR] HEAP PAGES\n"
		"       dma_heap exhaust [-g GCMA_DIR] HEAP\n"
		"       dma_heap stress [-t SECONDS] [-s SEED] [-k KEEP] [-m MAX_PAGES] HEAP\n");
	exit(2);
}

static unsigned long number(const char *s, unsigned long max)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 0);
	if (errno || end == s || *end || v == 0 || v > max)
		usage();
	return v;
}

int main(int argc, char **argv)
{
	unsigned long seconds = 10, keep = 4, max_pages = 64, pages = 0;
	const char *mode;
	int opt;

	if (argc < 2)
		usage();
	mode = argv[1];
	argv++;
	argc--;
	while ((opt = getopt(argc, argv, "g:t:s:k:m:")) != -1) {
		switch (opt) {
		case 'g': gcma_dir = optarg; break;
		case 't': seconds = number(optarg, 3600); break;
		case 's': rng = number(optarg, ~0UL) * 0x9e3779b97f4a7c15ULL | 1; break;
		case 'k': keep = number(optarg, 64); break;
		case 'm': max_pages = number(optarg, 1UL << 20); break;
		default: usage();
		}
	}
	if (optind >= argc)
		usage();
	heap_path = argv[optind++];
	if (!strcmp(mode, "alloc")) {
		if (optind >= argc)
			usage();
		pages = number(argv[optind++], 1UL << 24);
	}
	if (optind != argc)
		usage();
	setvbuf(stdout, NULL, _IOLBF, 0);
	heap_fd = open(heap_path, O_RDONLY | O_CLOEXEC);
	if (heap_fd < 0)
		fail("%s: %s", heap_path, strerror(errno));

	if (!strcmp(mode, "basic"))
		basic();
	else if (!strcmp(mode, "alloc"))
		alloc_one(pages);
	else if (!strcmp(mode, "exhaust"))
		exhaust();
	else if (!strcmp(mode, "stress"))
		stress(seconds, keep, max_pages);
	else
		usage();
	return 0;
}
