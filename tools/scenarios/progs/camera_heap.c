// SPDX-License-Identifier: GPL-2.0
/*
 * camera_heap - the thesis's camera case through dma-buf heaps: a set of
 * camera-sized buffers allocated and freed again and again from a GCMA
 * heap and from a CMA heap, alternately, while a background workload keeps
 * memory full of page cache and anonymous pages.
 *
 *   camera_heap [-r ROUNDS] [-b BUFFERS] [-s MIB] [-a ANON_MIB] [-F FILE_MIB]
 *               [-l PERMILLE] -f FILE -g GCMA_DIR GCMA_HEAP CMA_HEAP
 *
 * Each round allocates BUFFERS buffers of MIB MiB from each heap (which
 * heap goes first alternates from round to round), timing every
 * DMA_HEAP_IOCTL_ALLOC, then writes one word per page of each buffer (a
 * camera fills them) and frees them all.  Before a GCMA round the program
 * waits, up to 30 s, until at least PERMILLE (default 900) of the GCMA
 * area's pages are lent to DMEM (GCMA_DIR/secondary_lent_pages of
 * total_pages), and records the share lent when the round starts; before a
 * CMA round it records the share of the CMA area that holds other pages
 * (CmaTotal less CmaFree of /proc/meminfo).
 *
 * The background child (started first, stopped at the end) maps ANON_MIB
 * MiB of anonymous memory and, in a loop, reads FILE (FILE_MIB MiB, written
 * by the program with a pattern and larger than what memory can cache, so
 * that clean page cache keeps being evicted, to DMEM among others) and
 * rewrites one MiB of its anonymous memory per MiB read, verifying every
 * word it reads back of both.  It counts the MiB it reads in a shared
 * counter: its throughput during each round is reported, so that the cost
 * of each allocator to the rest of the system shows.
 *
 * Output: "CAMERA round=... heap=... lent_permille=... alloc_us=... bg_mib_s=..."
 * per round and heap; a summary per heap:
 *   CAMERA-SUM heap=H n= fail= mean_us= median_us= p99_us= max_us=
 *              lent_permille_min= bg_mib_s=
 * and the sorted latencies in the form tools/build/plot_cdf.py draws
 * ("gcma: bench: cdf pass=2 alloc=H pages=P n=N part=K: ...").
 * Exit status: 0 no failed GCMA allocation, no buffer that was not zeroed
 * and no word the background read wrong; 1 otherwise (the CMA heap's
 * failures are reported, not judged); 2 usage error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/dma-buf.h>
#include <linux/dma-heap.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIB (1024UL * 1024UL)
#define PAGE 4096UL
#define MAX_BUFS 64
#define MAX_ROUNDS 200
#define MAX_SAMPLES (MAX_BUFS * MAX_ROUNDS)

enum { GCMA, CMA, NHEAPS };
static const char *const heap_name[NHEAPS] = { "gcma", "cma" };

struct shared {
	volatile unsigned long mib_read;	/* background progress */
	volatile unsigned long wrong;		/* words the background read wrong */
	volatile int stop;
};

static struct shared *sh;

static void die(const char *what)
{
	fprintf(stderr, "camera_heap: %s: %s\n", what, strerror(errno));
	exit(1);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static long read_long(const char *path)
{
	char buf[64];
	ssize_t n;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return strtol(buf, NULL, 10);
}

static long meminfo_kb(const char *key)
{
	char line[256];
	long v = -1;
	size_t len = strlen(key);
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, len) && line[len] == ':') {
			v = strtol(line + len + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

static uint64_t word(uint64_t gen, uint64_t i)
{
	return gen << 40 ^ i * 0x9e3779b97f4a7c15ull;
}

/* The background workload; never returns. */
static void background(const char *file, unsigned long file_mib, unsigned long anon_mib)
{
	uint64_t *anon = NULL, *chunk, gen = 1;
	unsigned long a = 0, i, m;
	int fd;

	if (anon_mib) {
		anon = mmap(NULL, anon_mib * MIB, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (anon == MAP_FAILED)
			die("background: mmap");
		for (i = 0; i < anon_mib * MIB / 8; i++)
			anon[i] = word(0, i);
	}
	chunk = malloc(MIB);
	if (!chunk)
		die("background: malloc");
	while (!sh->stop) {
		fd = open(file, O_RDONLY);
		if (fd < 0)
			die("background: open");
		for (m = 0; m < file_mib && !sh->stop; m++) {
			if (pread(fd, chunk, MIB, m * MIB) != (ssize_t)MIB)
				die("background: read");
			for (i = 0; i < MIB / 8; i++)
				if (chunk[i] != word(0, m * MIB / 8 + i))
					sh->wrong++;
			if (anon) {
				uint64_t *p = anon + a * MIB / 8;

				/* verify the last generation, write the next */
				for (i = 0; i < MIB / 8; i++) {
					if (p[i] != word(gen - 1, a * MIB / 8 + i))
						sh->wrong++;
					p[i] = word(gen, a * MIB / 8 + i);
				}
				if (++a == anon_mib) {
					a = 0;
					gen++;
				}
			}
			sh->mib_read++;
		}
		close(fd);
	}
	_exit(0);
}

static void write_file(const char *file, unsigned long file_mib)
{
	uint64_t *chunk = malloc(MIB);
	unsigned long m, i;
	int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0 || !chunk)
		die("create the file");
	for (m = 0; m < file_mib; m++) {
		for (i = 0; i < MIB / 8; i++)
			chunk[i] = word(0, m * MIB / 8 + i);
		if (write(fd, chunk, MIB) != (ssize_t)MIB)
			die("write the file");
	}
	if (fsync(fd))
		die("fsync the file");
	close(fd);
	free(chunk);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static unsigned long parse(const char *s)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (*s == 0 || *end != 0) {
		fprintf(stderr, "camera_heap: not a number: %s\n", s);
		exit(2);
	}
	return v;
}

static long lent_permille(const char *dir)
{
	char path[512];
	long lent, total;

	snprintf(path, sizeof(path), "%s/secondary_lent_pages", dir);
	lent = read_long(path);
	snprintf(path, sizeof(path), "%s/total_pages", dir);
	total = read_long(path);
	return lent >= 0 && total > 0 ? lent * 1000 / total : -1;
}

static long cma_occupied_permille(void)
{
	long total = meminfo_kb("CmaTotal"), free_kb = meminfo_kb("CmaFree");

	return total > 0 && free_kb >= 0 ? (total - free_kb) * 1000 / total : -1;
}

int main(int argc, char **argv)
{
	static uint64_t lat[NHEAPS][MAX_SAMPLES];
	unsigned long rounds = 10, nbuf = 8, mib = 12, anon_mib = 0, file_mib = 0;
	unsigned long n[NHEAPS] = { 0 }, fails[NHEAPS] = { 0 }, r, b, i;
	long min_lent[NHEAPS] = { 1000, 1000 }, want_permille = 900;
	double bg_mib[NHEAPS] = { 0 }, bg_s[NHEAPS] = { 0 };
	const char *file = NULL, *gdir = NULL, *heap_path[NHEAPS];
	int heap_fd[NHEAPS], opt, h, k, bad = 0;
	pid_t bg;

	while ((opt = getopt(argc, argv, "r:b:s:a:F:l:f:g:")) != -1) {
		switch (opt) {
		case 'r': rounds = parse(optarg); break;
		case 'b': nbuf = parse(optarg); break;
		case 's': mib = parse(optarg); break;
		case 'a': anon_mib = parse(optarg); break;
		case 'F': file_mib = parse(optarg); break;
		case 'l': want_permille = parse(optarg); break;
		case 'f': file = optarg; break;
		case 'g': gdir = optarg; break;
		default: return 2;
		}
	}
	if (argc - optind != 2 || !file || !gdir || !file_mib || !rounds ||
	    rounds > MAX_ROUNDS || !nbuf || nbuf > MAX_BUFS || !mib) {
		fprintf(stderr, "usage: camera_heap [-r ROUNDS<=%d] [-b BUFFERS<=%d] [-s MIB] [-a ANON_MIB] -F FILE_MIB [-l PERMILLE] -f FILE -g GCMA_DIR GCMA_HEAP CMA_HEAP\n",
			MAX_ROUNDS, MAX_BUFS);
		return 2;
	}
	heap_path[GCMA] = argv[optind];
	heap_path[CMA] = argv[optind + 1];
	for (h = 0; h < NHEAPS; h++) {
		heap_fd[h] = open(heap_path[h], O_RDONLY | O_CLOEXEC);
		if (heap_fd[h] < 0)
			die(heap_path[h]);
	}
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		die("mmap shared");
	write_file(file, file_mib);
	bg = fork();
	if (bg < 0)
		die("fork");
	if (bg == 0)
		background(file, file_mib, anon_mib);
	/* Let the background fill memory and the area be lent. */
	sleep(5);

	for (r = 0; r < rounds; r++) {
		for (k = 0; k < NHEAPS; k++) {
			int fds[MAX_BUFS];
			long share;
			uint64_t t0, t, sum = 0;
			unsigned long c0;

			h = (r + k) % 2;
			if (h == GCMA) {
				for (i = 0; i < 300 && lent_permille(gdir) < want_permille; i++)
					usleep(100000);
				share = lent_permille(gdir);
				if (share < min_lent[h])
					min_lent[h] = share;
			} else {
				share = cma_occupied_permille();
				if (share < min_lent[h])
					min_lent[h] = share;
			}
			c0 = sh->mib_read;
			t0 = now_ns();
			for (b = 0; b < nbuf; b++) {
				struct dma_heap_allocation_data d = {
					.len = mib * MIB,
					.fd_flags = O_RDWR | O_CLOEXEC,
				};

				t = now_ns();
				if (ioctl(heap_fd[h], DMA_HEAP_IOCTL_ALLOC, &d)) {
					fprintf(stderr, "camera_heap: round %lu %s buffer %lu: %s\n",
						r, heap_name[h], b, strerror(errno));
					fails[h]++;
					fds[b] = -1;
					continue;
				}
				t = now_ns() - t;
				lat[h][n[h]++] = t;
				sum += t;
				fds[b] = d.fd;
			}
			for (b = 0; b < nbuf; b++) {
				uint64_t *p;

				if (fds[b] < 0)
					continue;
				p = mmap(NULL, mib * MIB, PROT_READ | PROT_WRITE, MAP_SHARED, fds[b], 0);
				if (p == MAP_FAILED)
					die("mmap buffer");
				for (i = 0; i < mib * MIB / 8; i += PAGE / 8) {
					if (p[i] != 0)
						bad++;
					p[i] = word(r, i);
				}
				munmap(p, mib * MIB);
				close(fds[b]);
			}
			t = now_ns() - t0;
			bg_mib[h] += sh->mib_read - c0;
			bg_s[h] += t / 1e9;
			printf("CAMERA round=%lu heap=%s share_permille=%ld alloc_us=%.1f bg_mib_s=%.1f\n",
			       r + 1, heap_name[h], share, sum / 1e3 / nbuf,
			       (sh->mib_read - c0) / (t / 1e9));
			fflush(stdout);
			/* As a camera would, pause between sets of frames. */
			sleep(1);
		}
	}
	sh->stop = 1;
	if (waitpid(bg, &k, 0) != bg || !WIFEXITED(k) || WEXITSTATUS(k))
		bad++;

	for (h = 0; h < NHEAPS; h++) {
		double sum = 0;
		unsigned long part;

		qsort(lat[h], n[h], sizeof(lat[h][0]), cmp_u64);
		for (i = 0; i < n[h]; i++)
			sum += lat[h][i];
		printf("CAMERA-SUM heap=%s n=%lu fail=%lu mean_us=%.1f median_us=%.1f p99_us=%.1f max_us=%.1f %s=%ld bg_mib_s=%.1f\n",
		       heap_name[h], n[h], fails[h], n[h] ? sum / n[h] / 1e3 : 0,
		       n[h] ? lat[h][n[h] / 2] / 1e3 : 0,
		       n[h] ? lat[h][(n[h] * 99 + 99) / 100 - 1] / 1e3 : 0,
		       n[h] ? lat[h][n[h] - 1] / 1e3 : 0,
		       h == GCMA ? "lent_permille_min" : "occupied_permille_min", min_lent[h],
		       bg_s[h] > 0 ? bg_mib[h] / bg_s[h] : 0);
		/* the plot's format, 64 samples a line */
		for (part = 0; part * 64 < n[h]; part++) {
			printf("gcma: bench: cdf pass=2 alloc=%s pages=%lu n=%lu part=%lu:",
			       heap_name[h], mib * MIB / PAGE, n[h], part);
			for (i = part * 64; i < n[h] && i < (part + 1) * 64; i++)
				printf(" %.1f", lat[h][i] / 1e3);
			printf("\n");
		}
	}
	printf("CAMERA-CHECK wrong_words=%lu nonzero_buffers=%d failed=%lu\n",
	       sh->wrong, bad, fails[GCMA] + fails[CMA]);
	/* CMA's failures are a figure of the comparison, not an error here */
	return sh->wrong || bad || fails[GCMA] ? 1 : 0;
}
