// SPDX-License-Identifier: GPL-2.0
/*
 * memhog - put the guest under memory pressure and verify data integrity.
 *
 *   memhog [-a ANON_MIB] [-c CACHE_MIB] [-t SECONDS | -n PASSES] [-f FILE] [-D] [-w] [-k] [-v]
 *
 * -a N   mmap N MiB of anonymous memory and fill every page with a pattern.
 *        Every further pass verifies the previous pattern and writes a new
 *        one (so swapped, migrated or compacted pages are checked).
 * -c M   page cache churn: write a file of M MiB (then fsync), and in every
 *        pass read it back and verify it.
 * -t S   keep making passes for S seconds (default 0: a single pass).
 * -n N   make exactly N passes (a fixed amount of work, e.g. to count I/O).
 * -f P   file for -c (default /tmp/memhog.dat; use a disk-backed filesystem
 *        to exercise reclaim of clean page cache).
 * -D     write 1 to /proc/sys/vm/drop_caches before each read pass.
 * -w     rewrite the file with a new pattern in every pass.
 * -k     keep the file on exit (default: unlink it).
 * -v     print one line per pass.
 *
 * Exit status: 0 ok, 1 runtime or verification error, 2 usage error.
 * SIGINT/SIGTERM end the run within a page: the anonymous pass under way
 * stops where it is (its words below that point hold the new generation,
 * those above the old one, and the last verification checks each against
 * its own), a file pass ends after the current pass.  So a caller can
 * stop the hog when its other workloads end without waiting for a pass
 * that may take a minute under swap.
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
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MIB (1024UL * 1024UL)
#define MAX_MIB (1UL << 20)		/* 1 TiB */
#define MAX_SECONDS (7UL * 24 * 3600)
#define CHUNK MIB

static volatile sig_atomic_t stop;
static unsigned long page_size;
static int verbose;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: memhog [-a ANON_MIB] [-c CACHE_MIB] [-t SECONDS | -n PASSES] [-f FILE] [-D] [-w] [-k] [-v]\n"
		"  -a N  allocate, touch and verify N MiB of anonymous memory\n"
		"  -c M  write a file of M MiB and re-read/verify it every pass\n"
		"  -t S  repeat passes for S seconds (default 0: one pass)\n"
		"  -n N  make exactly N passes\n"
		"  -f P  file for -c (default /tmp/memhog.dat)\n"
		"  -D    drop caches before each read pass\n"
		"  -w    rewrite the file with a new pattern every pass\n"
		"  -k    keep the file on exit\n"
		"  -v    report every pass\n"
		"at least one of -a and -c must be non-zero\n");
}

static int parse_ulong(const char *s, const char *what, unsigned long max,
		       unsigned long *out)
{
	unsigned long long v;
	char *end;

	if (*s < '0' || *s > '9')
		goto bad;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		goto bad;
	*out = v;
	return 0;
bad:
	fprintf(stderr, "memhog: invalid %s '%s' (expected an integer 0..%lu)\n",
		what, s, max);
	return -1;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The 64-bit word at byte offset @off of generation @gen. */
static inline uint64_t pattern(uint64_t off, uint64_t gen)
{
	uint64_t x = (off / 8 + 1) * 0x9e3779b97f4a7c15ULL ^ (gen << 40);

	return x ^ (x >> 29);
}

/*
 * One pass over the anonymous area: verify generation @gen - 1 (unless
 * @gen is 0) and write generation @gen.  The words from *@split on hold
 * generation @gen - 2 instead (a pass stopped there); the pass makes them
 * whole.  Stops at a page boundary once @stoppable and a signal asked
 * to, and sets *@split to where it stopped (the area's end if it did
 * not).  Returns the number of bad words.
 */
static unsigned long anon_pass(uint64_t *mem, size_t bytes, uint64_t gen,
			       size_t *split, int stoppable)
{
	size_t words = bytes / 8, i, page_words = page_size / 8;
	/*
	 * A local copy: *@split has the type of the area's words, so the
	 * compiler would read it again after every store to the area.
	 */
	size_t old_split = *split;
	unsigned long bad = 0;

	for (i = 0; i < words; i++) {
		uint64_t off = (uint64_t)i * 8;
		uint64_t want = i < old_split ? gen - 1 : gen - 2;

		if ((i & (page_words - 1)) == 0 && stoppable && stop)
			break;
		if (gen && (i < old_split || gen >= 2) && mem[i] != pattern(off, want)) {
			if (bad < 10)
				fprintf(stderr,
					"memhog: anon corruption at offset %#" PRIx64
					" (page %" PRIu64 "): got %#" PRIx64
					" expected %#" PRIx64 "\n", off,
					off / page_size, mem[i],
					pattern(off, want));
			bad++;
		}
		mem[i] = pattern(off, gen);
	}
	*split = i;
	return bad;
}

static int write_file(int fd, const char *path, size_t bytes, uint64_t gen,
		      uint64_t *buf)
{
	size_t off, i;

	for (off = 0; off < bytes; off += CHUNK) {
		size_t done = 0;

		for (i = 0; i < CHUNK / 8; i++)
			buf[i] = pattern(off + i * 8, gen);
		while (done < CHUNK) {
			ssize_t n = pwrite(fd, (char *)buf + done, CHUNK - done,
					   off + done);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				fprintf(stderr, "memhog: write %s: %s\n", path,
					n < 0 ? strerror(errno) : "short write");
				return -1;
			}
			done += n;
		}
	}
	if (fsync(fd)) {
		fprintf(stderr, "memhog: fsync %s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* Returns the number of bad words, or -1 on I/O error. */
static long verify_file(int fd, const char *path, size_t bytes, uint64_t gen,
			uint64_t *buf)
{
	size_t off, i;
	long bad = 0;

	for (off = 0; off < bytes; off += CHUNK) {
		size_t done = 0;

		while (done < CHUNK) {
			ssize_t n = pread(fd, (char *)buf + done, CHUNK - done,
					  off + done);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				fprintf(stderr, "memhog: read %s: %s\n", path,
					n < 0 ? strerror(errno) : "short read");
				return -1;
			}
			done += n;
		}
		for (i = 0; i < CHUNK / 8; i++) {
			uint64_t want = pattern(off + i * 8, gen);

			if (buf[i] == want)
				continue;
			if (bad < 10)
				fprintf(stderr,
					"memhog: file corruption in %s at offset %#zx: got %#" PRIx64
					" expected %#" PRIx64 "\n", path,
					off + i * 8, buf[i], want);
			bad++;
		}
	}
	return bad;
}

static void drop_caches(void)
{
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);

	if (fd < 0 || write(fd, "1\n", 2) != 2)
		fprintf(stderr, "memhog: drop_caches: %s\n", strerror(errno));
	if (fd >= 0)
		close(fd);
}

int main(int argc, char **argv)
{
	unsigned long anon_mib = 0, cache_mib = 0, seconds = 0, npasses = 0;
	const char *path = "/tmp/memhog.dat";
	int drop = 0, rewrite = 0, keep = 0, opt, fd = -1, ret = 0;
	unsigned long anon_bad = 0, passes = 0;
	long file_bad = 0;
	uint64_t gen = 0, file_gen = 0;
	uint64_t *mem = NULL, *buf = NULL;
	size_t anon_bytes, cache_bytes, split;
	struct sigaction sa;
	double start, end;

	while ((opt = getopt(argc, argv, "a:c:t:n:f:Dwkvh")) != -1) {
		switch (opt) {
		case 'a':
			if (parse_ulong(optarg, "anonymous MiB (-a)", MAX_MIB, &anon_mib))
				return 2;
			break;
		case 'c':
			if (parse_ulong(optarg, "page cache MiB (-c)", MAX_MIB, &cache_mib))
				return 2;
			break;
		case 't':
			if (parse_ulong(optarg, "seconds (-t)", MAX_SECONDS, &seconds))
				return 2;
			break;
		case 'n':
			if (parse_ulong(optarg, "passes (-n)", 1UL << 20, &npasses))
				return 2;
			if (!npasses) {
				fprintf(stderr, "memhog: -n needs at least one pass\n");
				return 2;
			}
			break;
		case 'f':
			if (!*optarg) {
				fprintf(stderr, "memhog: empty file name (-f)\n");
				return 2;
			}
			path = optarg;
			break;
		case 'D':
			drop = 1;
			break;
		case 'w':
			rewrite = 1;
			break;
		case 'k':
			keep = 1;
			break;
		case 'v':
			verbose = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "memhog: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (seconds && npasses) {
		fprintf(stderr, "memhog: -t and -n exclude each other\n");
		return 2;
	}
	if (!anon_mib && !cache_mib) {
		fprintf(stderr, "memhog: nothing to do: give -a and/or -c\n");
		usage(stderr);
		return 2;
	}
	if (anon_mib > SIZE_MAX / MIB || cache_mib > SIZE_MAX / MIB) {
		fprintf(stderr, "memhog: size too large for this system\n");
		return 2;
	}

	page_size = sysconf(_SC_PAGESIZE);
	anon_bytes = anon_mib * MIB;
	cache_bytes = cache_mib * MIB;
	/* No pass stopped part-way yet. */
	split = anon_bytes / 8;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);

	if (anon_bytes) {
		mem = mmap(NULL, anon_bytes, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (mem == MAP_FAILED) {
			fprintf(stderr, "memhog: mmap %lu MiB: %s\n", anon_mib,
				strerror(errno));
			return 1;
		}
	}
	if (cache_bytes) {
		buf = malloc(CHUNK);
		if (!buf) {
			fprintf(stderr, "memhog: out of memory\n");
			ret = 1;
			goto out;
		}
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
		if (fd < 0) {
			fprintf(stderr, "memhog: open %s: %s\n", path, strerror(errno));
			ret = 1;
			goto out;
		}
		if (write_file(fd, path, cache_bytes, file_gen, buf)) {
			ret = 1;
			goto out;
		}
	}

	start = now();
	end = start + seconds;
	do {
		if (mem) {
			unsigned long bad = anon_pass(mem, anon_bytes, gen, &split, 1);

			anon_bad += bad;
		}
		if (fd >= 0) {
			long bad;

			if (drop)
				drop_caches();
			bad = verify_file(fd, path, cache_bytes, file_gen, buf);
			if (bad < 0) {
				ret = 1;
				break;
			}
			file_bad += bad;
			if (rewrite && !stop) {
				file_gen++;
				if (write_file(fd, path, cache_bytes, file_gen, buf)) {
					ret = 1;
					break;
				}
			}
		}
		gen++;
		passes++;
		if (verbose)
			printf("memhog: pass %lu done at %.1fs (anon errors %lu, file errors %ld)\n",
			       passes, now() - start, anon_bad, file_bad);
	} while (!stop && (npasses ? passes < npasses : now() < end));

	/* Verify the last anonymous generation once more. */
	if (mem && !ret)
		anon_bad += anon_pass(mem, anon_bytes, gen, &split, 0);

	printf("memhog: anon %lu MiB, cache %lu MiB, %lu passes in %.1fs, "
	       "errors: anon %lu file %ld\n", anon_mib, cache_mib, passes,
	       now() - start, anon_bad, file_bad);
	if (anon_bad || file_bad)
		ret = 1;
out:
	if (fd >= 0) {
		close(fd);
		if (!keep)
			unlink(path);
	}
	free(buf);
	if (mem && mem != MAP_FAILED)
		munmap(mem, anon_bytes);
	return ret;
}
