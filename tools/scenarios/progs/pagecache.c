// SPDX-License-Identifier: GPL-2.0
/*
 * pagecache - change files while their pages are out of the page cache and
 * check that every read returns the file's current bytes.
 *
 *   pagecache [-c CGROUP] [-r ROUNDS] [-v] DIR MIB
 *
 * Keeps two files in DIR (a: MIB MiB, b: MIB/2 MiB) and an exact copy of
 * each in memory.  Between steps it evicts the files' pages through
 * reclaim (CGROUP/memory.reclaim; the program must run in that cgroup, so
 * that its page cache is charged there) and then verifies every byte of
 * both files against the copies.  The changes are made while the pages
 * are evicted (so a store of the old pages exists outside the page cache,
 * e.g. in GCMA's DMEM) and, in a second round, while they are cached:
 *
 *   truncation to a partial page and extension; buffered writes of whole
 *   pages (no read first) and of partial pages (read first); hole punches
 *   of whole and partial pages (where the file system has them); O_DIRECT
 *   writes; unlink and recreate;
 *   a whole-page overwrite followed by drop_caches (pages leave the cache
 *   without reclaim).
 *
 * Prints one "# ..." line per step with the share of pages still cached
 * after eviction, and a summary line.  Exit status: 0 every byte right,
 * 1 a wrong byte or an I/O error (details on stderr), 2 usage error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pattern.h"

#define PAGE 4096UL
#define MIB (1024UL * 1024UL)

struct file {
	const char *name;
	char path[512];
	unsigned char *model;	/* expected contents */
	size_t size;		/* expected size */
	size_t cap;		/* bytes allocated for model */
};

static const char *cgroup;
static int verbose;
static unsigned long long verified, wrong;
static int punch_unsupported;

static void die(const char *what)
{
	fprintf(stderr, "pagecache: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* Grow the model to @size bytes, zero-filled (a sparse extension). */
static void model_resize(struct file *f, size_t size)
{
	if (size > f->cap) {
		f->model = realloc(f->model, size);
		if (!f->model)
			die("model");
		f->cap = size;
	}
	if (size > f->size)
		memset(f->model + f->size, 0, size - f->size);
	f->size = size;
}

static int open_file(struct file *f, int flags)
{
	int fd = open(f->path, flags, 0644);

	if (fd < 0)
		die(f->path);
	return fd;
}

/* Buffered or direct write of version @ver at [off, off + len). */
static void write_ver(struct file *f, size_t off, size_t len, unsigned int ver,
		      int direct)
{
	unsigned char *buf;
	int fd = open_file(f, O_WRONLY | O_CREAT | (direct ? O_DIRECT : 0));

	if (posix_memalign((void **)&buf, PAGE, len ? len : PAGE))
		die("buffer");
	fill(buf, off, len, ver);
	if (pwrite(fd, buf, len, off) != (ssize_t)len)
		die(direct ? "direct write" : "write");
	if (fsync(fd))
		die("fsync");
	close(fd);
	if (off + len > f->size)
		model_resize(f, off + len);
	memcpy(f->model + off, buf, len);
	free(buf);
}

static void truncate_to(struct file *f, size_t size)
{
	if (truncate(f->path, size))
		die("truncate");
	if (size < f->size)
		f->size = size;
	model_resize(f, size);
}

static void punch(struct file *f, size_t off, size_t len)
{
	int fd = open_file(f, O_RDWR);

	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len)) {
		if (errno != EOPNOTSUPP)
			die("punch hole");
		/* ext2 cannot punch holes: the bytes stay. */
		if (!punch_unsupported++)
			printf("# punch hole not supported here; skipped\n");
		close(fd);
		return;
	}
	close(fd);
	memset(f->model + off, 0, len);
}

/* Pages of @f in the page cache, per mille. */
static unsigned int cached_permille(struct file *f)
{
	size_t pages = (f->size + PAGE - 1) / PAGE, n = 0;
	unsigned char *vec;
	void *map;
	int fd;

	if (!pages)
		return 0;
	fd = open_file(f, O_RDONLY);
	map = mmap(NULL, f->size, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		die("mmap");
	vec = malloc(pages);
	if (!vec || mincore(map, f->size, vec))
		die("mincore");
	for (size_t i = 0; i < pages; i++)
		n += vec[i] & 1;
	free(vec);
	munmap(map, f->size);
	close(fd);
	return n * 1000 / pages;
}

/* Reclaim the cgroup's page cache: memory.reclaim, as much as it can. */
static void evict(struct file *a, struct file *b, const char *step)
{
	char path[512];
	int fd;

	if (cgroup) {
		snprintf(path, sizeof(path), "%s/memory.reclaim", cgroup);
		for (int i = 0; i < 4; i++) {
			fd = open(path, O_WRONLY);
			if (fd < 0)
				die(path);
			/* EAGAIN: less than asked could be reclaimed; fine. */
			if (write(fd, "1G", 2) < 0 && errno != EAGAIN)
				die("memory.reclaim");
			close(fd);
		}
	}
	printf("# %s: cached after reclaim a=%u b=%u per mille\n", step,
	       cached_permille(a), cached_permille(b));
	fflush(stdout);
}

static void verify(struct file *f, const char *step)
{
	unsigned long long bad = 0;
	unsigned char *buf = malloc(MIB);
	size_t first_bad = 0;
	unsigned char got = 0;
	struct stat st;
	int fd = open_file(f, O_RDONLY);

	if (!buf || fstat(fd, &st))
		die("verify");
	if ((size_t)st.st_size != f->size) {
		fprintf(stderr, "pagecache: %s: %s: size %lld, expected %zu\n",
			step, f->name, (long long)st.st_size, f->size);
		wrong++;
	}
	for (size_t off = 0; off < f->size; off += MIB) {
		size_t len = f->size - off < MIB ? f->size - off : MIB;

		if (pread(fd, buf, len, off) != (ssize_t)len)
			die("read");
		for (size_t i = 0; i < len; i++) {
			if (buf[i] != f->model[off + i] && !bad++) {
				first_bad = off + i;
				got = buf[i];
			}
		}
	}
	close(fd);
	free(buf);
	verified += f->size;
	if (bad) {
		fprintf(stderr,
			"pagecache: %s: %s: %llu wrong bytes, first at %zu (page %zu): got %#x, expected %#x\n",
			step, f->name, bad, first_bad, first_bad / PAGE,
			got, f->model[first_bad]);
		wrong += bad;
	}
	if (verbose)
		printf("# %s: %s verified (%zu bytes)\n", step, f->name, f->size);
}

static void verify_both(struct file *a, struct file *b, const char *step)
{
	verify(a, step);
	verify(b, step);
}

static void drop_caches(void)
{
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);

	sync();
	if (fd < 0 || write(fd, "1", 1) != 1)
		die("drop_caches");
	close(fd);
}

static void init_file(struct file *f, const char *dir, const char *name)
{
	memset(f, 0, sizeof(*f));
	f->name = name;
	snprintf(f->path, sizeof(f->path), "%s/%s", dir, name);
	unlink(f->path);
}

/* One round of changes; @ver is the first version this round writes. */
static void round_changes(struct file *a, struct file *b, unsigned int ver,
			  int cached)
{
	size_t as = a->size, bs = b->size;
	const char *when = cached ? "cached" : "evicted";
	char step[64];

	if (cached) {
		verify_both(a, b, "warm");	/* pages in the cache again */
	} else {
		evict(a, b, "before changes");
	}
	/* Truncate into a page, then extend again: a zeroed tail. */
	truncate_to(a, as / 2 + 100);
	truncate_to(a, as);
	/* Whole pages of b without a read, then part of a page (read). */
	write_ver(b, 3 * PAGE, 8 * PAGE, ver, 0);
	write_ver(b, 20 * PAGE + 123, 1000, ver + 1, 0);
	/* Holes: whole pages and parts of two pages. */
	punch(b, 30 * PAGE, 10 * PAGE);
	punch(b, 50 * PAGE + 1000, 2 * PAGE + 10 - 1000);
	/* Direct I/O over pages that reclaim saw (a) and b's last pages. */
	write_ver(a, 8 * PAGE, 16 * PAGE, ver + 2, 1);
	write_ver(b, bs - 4 * PAGE, 4 * PAGE, ver + 3, 1);
	snprintf(step, sizeof(step), "changes while %s", when);
	evict(a, b, step);
	verify_both(a, b, step);

	/* A whole-page overwrite, then the pages leave without reclaim. */
	evict(a, b, "before overwrite");
	write_ver(a, 40 * PAGE, 2 * PAGE, ver + 4, 0);
	drop_caches();
	verify_both(a, b, "overwrite and drop_caches");

	/* A new inode under the old name. */
	evict(a, b, "before recreate");
	unlink(b->path);
	b->size = 0;
	write_ver(b, 0, bs, ver + 5, 0);
	evict(a, b, "recreated");
	verify_both(a, b, "recreated");
}

int main(int argc, char **argv)
{
	unsigned long mib, rounds = 1;
	struct file a, b;
	int opt;

	while ((opt = getopt(argc, argv, "c:r:v")) != -1) {
		switch (opt) {
		case 'c':
			cgroup = optarg;
			break;
		case 'r':
			rounds = strtoul(optarg, NULL, 0);
			break;
		case 'v':
			verbose = 1;
			break;
		default:
			goto usage;
		}
	}
	if (argc - optind != 2)
		goto usage;
	mib = strtoul(argv[optind + 1], NULL, 0);
	if (mib < 1 || mib > 4096 || rounds < 1)
		goto usage;

	init_file(&a, argv[optind], "a");
	init_file(&b, argv[optind], "b");
	write_ver(&a, 0, mib * MIB, 1, 0);
	write_ver(&b, 0, mib * MIB / 2, 2, 0);
	evict(&a, &b, "written");
	verify_both(&a, &b, "first re-read");
	for (unsigned long r = 0; r < rounds; r++) {
		round_changes(&a, &b, 10 + 20 * r, 0);
		round_changes(&a, &b, 20 + 20 * r, 1);
	}
	unlink(a.path);
	unlink(b.path);
	printf("pagecache: %llu bytes verified, %llu wrong\n", verified, wrong);
	return wrong ? 1 : 0;
usage:
	fprintf(stderr, "usage: pagecache [-c CGROUP] [-r ROUNDS] [-v] DIR MIB (MIB >= 1)\n");
	return 2;
}
