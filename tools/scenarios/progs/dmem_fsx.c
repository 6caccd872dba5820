// SPDX-License-Identifier: GPL-2.0
/*
 * dmem_fsx - an fsx-style exerciser for GCMA's DMEM page-cache client:
 * random operations on one file, every byte read checked against a model
 * of the file kept in memory.
 *
 *   dmem_fsx [-s SEED] [-t SECONDS] [-p PAGES] [-i] [-m MODEL] [-V COUNTER]
 *            [-P] FILE
 *
 *   -s SEED     random seed (default: the pid)
 *   -t SECONDS  run time (default 20)
 *   -p PAGES    largest file size in pages (default 256)
 *   -i          start from FILE's current contents (after a remount);
 *               without it FILE is created empty
 *   -m MODEL    where the model is written at the end (default
 *               FILE.model)
 *   -V COUNTER  a counter file (DMEM's verify_mismatches) read after
 *               every operation: when it moves, the last operations are
 *               printed (the run goes on)
 *   -P          the race's reader does not page the range out
 *
 * Operations, chosen at random: buffered reads and writes (partial pages
 * included), O_DIRECT reads and writes, writes and reads through a shared
 * mapping, fsync, truncation down and up, hole punching (where the file
 * system has it), MADV_PAGEOUT of a range (reclaim stores its clean pages
 * in DMEM), POSIX_FADV_DONTNEED, FS_IOC_SETVERSION (where taken), and a
 * race: an O_DIRECT write of a range while a child process reads the range
 * through the page cache and pages it out again and again (every byte it
 * reads must be the old or the new one, and once the write has returned
 * every read must return the new bytes).
 *
 * Meant to run several at once, in small memory cgroups, while other
 * programs reclaim and allocate the GCMA area (which discards DMEM's
 * pages).  At the end FILE is fsync'ed and its model written to MODEL,
 * so that a caller can compare the file after a remount.
 * Prints a summary line; on the first wrong byte, the last operations
 * and the offending range, and exits 1.  Exit 2: usage error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
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

#define PAGE 4096UL

enum op { OP_READ, OP_WRITE, OP_DREAD, OP_DWRITE, OP_MWRITE, OP_MREAD,
	  OP_FSYNC, OP_TRUNC, OP_PUNCH, OP_PAGEOUT, OP_DONTNEED, OP_SETVER,
	  OP_RACE, NR_OPS };
static const char *const op_names[NR_OPS] = {
	"read", "write", "dread", "dwrite", "mwrite", "mread", "fsync",
	"truncate", "punch", "pageout", "dontneed", "setversion", "race",
};
/* Relative weights. */
static const unsigned int op_weight[NR_OPS] = {
	8, 6, 3, 3, 3, 3, 2, 2, 2, 6, 2, 1, 1,
};

static const char *path, *model_path, *mismatch_path;
static int fd, dfd;
static unsigned char *model;
static size_t size, max_size;
static uint64_t rng;
static unsigned long counts[NR_OPS], bytes_checked;
static int no_punch, no_setver, race_no_pageout;
static unsigned char *buf;	/* aligned, max_size bytes */
static unsigned int version;

#define LOG_LEN 32
static char oplog[LOG_LEN][96];
static unsigned long nops;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static size_t below(size_t n)
{
	return n ? rnd() % n : 0;
}

static void logop(const char *fmt, size_t a, size_t b)
{
	snprintf(oplog[nops % LOG_LEN], sizeof(oplog[0]), "%lu %s %zu %zu",
		 nops, fmt, a, b);
	nops++;
}

static void dump_log(void)
{
	unsigned long i = nops > LOG_LEN ? nops - LOG_LEN : 0;

	for (; i < nops; i++)
		fprintf(stderr, "  op %s\n", oplog[i % LOG_LEN]);
}

static void die(const char *what)
{
	fprintf(stderr, "dmem_fsx: %s: %s: %s\n", path, what, strerror(errno));
	dump_log();
	exit(1);
}

static void fill(unsigned char *p, size_t len)
{
	version++;
	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)((version * 131u) ^ (i * 7u) ^ (i >> 9));
}

/* Compares @len bytes read at @off with the model; exits on a mismatch. */
static void check(const unsigned char *got, size_t off, size_t len,
		  const char *how)
{
	for (size_t i = 0; i < len; i++) {
		if (got[i] != model[off + i]) {
			fprintf(stderr, "dmem_fsx: %s: %s at offset %zu (of %zu at %zu, size %zu): 0x%02x, expected 0x%02x\n",
				path, how, off + i, len, off, size, got[i],
				model[off + i]);
			dump_log();
			exit(1);
		}
	}
	bytes_checked += len;
}

static void set_size(size_t n)
{
	if (n > size)
		memset(model + size, 0, n - size);
	size = n;
}

static void range(size_t *off, size_t *len, size_t align, size_t limit)
{
	*off = below(limit / align + 1) * align;
	if (*off >= limit)
		*off = limit ? limit - align : 0;
	*len = (below(16) + 1) * (align == 1 ? below(PAGE) + 1 : align);
	if (*off + *len > limit)
		*len = limit - *off;
}

static void do_read(void)
{
	size_t off, len;

	if (!size)
		return;
	range(&off, &len, 1, size);
	logop("read", off, len);
	if (pread(fd, buf, len, off) != (ssize_t)len)
		die("pread");
	check(buf, off, len, "buffered read");
}

static void do_write(void)
{
	size_t off, len;

	range(&off, &len, 1, max_size);
	logop("write", off, len);
	fill(buf, len);
	if (pwrite(fd, buf, len, off) != (ssize_t)len)
		die("pwrite");
	if (off + len > size)
		set_size(off + len);
	memcpy(model + off, buf, len);
}

static void do_dread(void)
{
	size_t off, len, n;

	if (size < PAGE)
		return;
	range(&off, &len, PAGE, size - size % PAGE);
	if (!len)
		return;
	logop("dread", off, len);
	n = pread(dfd, buf, len, off);
	if (n != len)
		die("O_DIRECT pread");
	check(buf, off, len, "O_DIRECT read");
}

static void do_dwrite(void)
{
	size_t off, len;

	range(&off, &len, PAGE, max_size);
	if (!len)
		return;
	logop("dwrite", off, len);
	fill(buf, len);
	if (pwrite(dfd, buf, len, off) != (ssize_t)len)
		die("O_DIRECT pwrite");
	if (off + len > size)
		set_size(off + len);
	memcpy(model + off, buf, len);
}

/* Maps the pages covering [off, off + len); returns the byte at off. */
static unsigned char *map(size_t off, size_t len, size_t *moff, size_t *mlen)
{
	unsigned char *p;

	*moff = off - off % PAGE;
	*mlen = off + len - *moff;
	p = mmap(NULL, *mlen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, *moff);
	if (p == MAP_FAILED)
		die("mmap");
	return p + (off - *moff);
}

static void do_mwrite(void)
{
	size_t off, len, moff, mlen;
	unsigned char *p;

	if (!size)
		return;
	range(&off, &len, 1, size);
	logop("mwrite", off, len);
	p = map(off, len, &moff, &mlen);
	fill(buf, len);
	memcpy(p, buf, len);
	memcpy(model + off, buf, len);
	munmap(p - (off - moff), mlen);
}

static void do_mread(void)
{
	size_t off, len, moff, mlen;
	unsigned char *p;

	if (!size)
		return;
	range(&off, &len, 1, size);
	logop("mread", off, len);
	p = map(off, len, &moff, &mlen);
	check(p, off, len, "read through a mapping");
	munmap(p - (off - moff), mlen);
}

static void do_trunc(void)
{
	size_t n = below(max_size + 1);

	logop("truncate", n, size);
	if (ftruncate(fd, n))
		die("ftruncate");
	set_size(n);
}

static void do_punch(void)
{
	size_t off, len;

	if (no_punch || !size)
		return;
	range(&off, &len, 1, size);
	logop("punch", off, len);
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len)) {
		if (errno == EOPNOTSUPP) {
			no_punch = 1;
			return;
		}
		die("fallocate(PUNCH_HOLE)");
	}
	memset(model + off, 0, len);
}

static void pageout(size_t off, size_t len)
{
	size_t moff, mlen;
	volatile unsigned char sum = 0;
	unsigned char *p;

	if (!len)
		return;
	p = map(off, len, &moff, &mlen) - (off - moff);
	for (size_t i = 0; i < mlen; i += PAGE)
		sum += p[i];
	madvise(p, mlen, MADV_PAGEOUT);
	munmap(p, mlen);
}

static void do_pageout(void)
{
	size_t off, len;

	if (!size)
		return;
	range(&off, &len, PAGE, size);
	logop("pageout", off, len);
	/* Dirty pages are not stored: write them back first, mostly. */
	if (below(4))
		fsync(fd);
	pageout(off, len);
}

static void do_setver(void)
{
	long v = (long)below(1000000);

	if (no_setver)
		return;
	logop("setversion", v, 0);
	if (ioctl(fd, FS_IOC_SETVERSION, &v)) {
		if (errno == ENOTTY || errno == EOPNOTSUPP) {
			no_setver = 1;
			return;
		}
		die("FS_IOC_SETVERSION");
	}
}

/*
 * An O_DIRECT write of a range while a child reads it through the page
 * cache and pages it out: each sector the child reads holds the old or
 * the new bytes; after the write, the new ones only.
 */
static void do_race(void)
{
	size_t off, len;
	unsigned char *old, *done;
	int status;
	pid_t child;

	if (size < 2 * PAGE)
		return;
	range(&off, &len, PAGE, size - size % PAGE);
	if (!len)
		return;
	logop("race", off, len);
	/*
	 * Make the write a pure overwrite: an O_DIRECT write into a hole of
	 * ext2 (no unwritten extents) maps the new block before its data
	 * lands, and a racing read may see the block's former contents.
	 * That is ext2's, not DMEM's; rewriting the range's bytes through
	 * the page cache allocates its blocks.
	 */
	if (pwrite(fd, model + off, len, off) != (ssize_t)len)
		die("race: pwrite");
	fsync(fd);
	old = malloc(len);
	done = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (!old || done == MAP_FAILED)
		die("race setup");
	memcpy(old, model + off, len);
	fill(buf, len);
	child = fork();
	if (child < 0)
		die("fork");
	if (!child) {
		unsigned char *got = malloc(len);

		while (!__atomic_load_n(done, __ATOMIC_ACQUIRE)) {
			if (pread(fd, got, len, off) != (ssize_t)len)
				_exit(3);
			/*
			 * Byte by byte: the host may tear a read that races a
			 * write even within a sector (QEMU's image file I/O).
			 */
			for (size_t b = 0; b < len; b++) {
				if (got[b] != old[b] && got[b] != buf[b]) {
					fprintf(stderr, "dmem_fsx: %s: race: byte at %zu is neither old nor new\n",
						path, off + b);
					_exit(1);
				}
			}
			if (!race_no_pageout)
				pageout(off, len);
		}
		_exit(0);
	}
	if (pwrite(dfd, buf, len, off) != (ssize_t)len)
		die("race: O_DIRECT pwrite");
	memcpy(model + off, buf, len);
	__atomic_store_n(done, 1, __ATOMIC_RELEASE);
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
	    WEXITSTATUS(status)) {
		fprintf(stderr, "dmem_fsx: %s: race: the reader failed\n", path);
		dump_log();
		exit(1);
	}
	/* The reader's last page-out may have run after the write: read. */
	if (pread(fd, buf, len, off) != (ssize_t)len)
		die("pread after race");
	check(buf, off, len, "read after an O_DIRECT write raced by reads");
	munmap(done, PAGE);
	free(old);
}

static unsigned long read_ul(const char *p)
{
	char b[32] = "";
	int f = open(p, O_RDONLY);

	if (f < 0 || read(f, b, sizeof(b) - 1) < 0)
		die(p);
	close(f);
	return strtoul(b, NULL, 10);
}

static void save_model(void)
{
	char mpath[600];
	int mfd;

	if (fsync(fd))
		die("final fsync");
	snprintf(mpath, sizeof(mpath), "%s.model", path);
	mfd = open(model_path ?: mpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (mfd < 0 || write(mfd, model, size) != (ssize_t)size || close(mfd))
		die("writing the model");
}

int main(int argc, char **argv)
{
	unsigned int seconds = 20, pages = 256, total = 0, seed = getpid();
	int opt, init = 0;
	struct timespec t0, t;
	struct stat st;

	while ((opt = getopt(argc, argv, "s:t:p:im:V:P")) != -1) {
		switch (opt) {
		case 'V': mismatch_path = optarg; break;
		case 'P': race_no_pageout = 1; break;
		case 'm': model_path = optarg; break;
		case 's': seed = strtoul(optarg, NULL, 0); break;
		case 't': seconds = strtoul(optarg, NULL, 0); break;
		case 'p': pages = strtoul(optarg, NULL, 0); break;
		case 'i': init = 1; break;
		default: goto usage;
		}
	}
	if (optind != argc - 1 || !pages || pages > 65536)
		goto usage;
	path = argv[optind];
	rng = seed * 0x9e3779b97f4a7c15ULL + 1;
	max_size = pages * PAGE;
	model = calloc(1, max_size);
	if (!model || posix_memalign((void **)&buf, PAGE, max_size))
		die("malloc");
	fd = open(path, O_RDWR | O_CREAT | (init ? 0 : O_TRUNC), 0644);
	dfd = open(path, O_RDWR | O_DIRECT);
	if (fd < 0 || dfd < 0)
		die("open");
	if (init) {
		if (fstat(fd, &st) || (size_t)st.st_size > max_size)
			die("fstat (or file larger than -p)");
		size = st.st_size;
		if (pread(fd, model, size, 0) != (ssize_t)size)
			die("reading the initial contents");
	}
	for (int i = 0; i < NR_OPS; i++)
		total += op_weight[i];
	unsigned long mismatches = mismatch_path ? read_ul(mismatch_path) : 0;
	struct stat self;

	if (fstat(fd, &self))
		die("fstat");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		unsigned int r = below(total);
		int op = 0;

		while (r >= op_weight[op])
			r -= op_weight[op++];
		counts[op]++;
		switch (op) {
		case OP_READ: do_read(); break;
		case OP_WRITE: do_write(); break;
		case OP_DREAD: do_dread(); break;
		case OP_DWRITE: do_dwrite(); break;
		case OP_MWRITE: do_mwrite(); break;
		case OP_MREAD: do_mread(); break;
		case OP_FSYNC: logop("fsync", 0, 0); fsync(fd); break;
		case OP_TRUNC: do_trunc(); break;
		case OP_PUNCH: do_punch(); break;
		case OP_PAGEOUT: do_pageout(); break;
		case OP_DONTNEED:
			logop("dontneed", 0, 0);
			fsync(fd);
			posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
			break;
		case OP_SETVER: do_setver(); break;
		case OP_RACE: do_race(); break;
		}
		if (mismatch_path && read_ul(mismatch_path) != mismatches) {
			mismatches = read_ul(mismatch_path);
			fprintf(stderr, "dmem_fsx: %s (ino %lu): DMEM's verify mismatches moved to %lu during op %lu:\n",
				path, (unsigned long)self.st_ino, mismatches, nops - 1);
			dump_log();
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (t.tv_sec - t0.tv_sec < (time_t)seconds);
	/* Everything once more, through the page cache, after a page-out. */
	pageout(0, size);
	if (size) {
		if (pread(fd, buf, size, 0) != (ssize_t)size)
			die("final pread");
		check(buf, 0, size, "final read");
	}
	save_model();
	printf("dmem_fsx: %s: seed %u: %lu ops, %lu bytes checked, size %zu%s%s:",
	       path, seed, nops, bytes_checked, size,
	       no_punch ? ", no punch" : "", no_setver ? ", no setversion" : "");
	for (int i = 0; i < NR_OPS; i++)
		printf(" %s=%lu", op_names[i], counts[i]);
	printf("\n");
	return 0;
usage:
	fprintf(stderr, "usage: dmem_fsx [-s SEED] [-t SECONDS] [-p PAGES] [-i] [-m MODEL] [-V COUNTER] [-P] FILE\n");
	return 2;
}
