// SPDX-License-Identifier: GPL-2.0
/*
 * rcxvm_workloads: the two application workloads of the RCX thesis's
 * RCXVM evaluation, in the shape of their kernel traffic, with RCXVM's
 * fast path off (stock) and on alternately in the same boot.
 *
 *  ebizzy  T threads each keep 8 chunks of 256 KiB from malloc(); an
 *          operation frees a random chunk, allocates it again, copies a
 *          sorted table of records into it and binary-searches the copy
 *          for a record drawn at random, which must be where the source
 *          has it.  After glibc raises its mmap threshold (the first free
 *          of a mapped chunk) the chunks come from the threads' arenas.
 *          glibc grows an arena's heap with mprotect() only past its
 *          highest size so far, and shrinks it with MADV_DONTNEED, so the
 *          calls come while the heaps first grow.
 *  metis   A word count in the shape of Metis's MapReduce jobs: T threads
 *          each count the words of their share of a 512 KiB text into a
 *          hash table of malloc()ed nodes (map), the tables are merged
 *          into one (reduce), checked word by word against the counts the
 *          text was generated with, and everything is freed; one
 *          operation is one job.
 *
 * For each workload and thread count, and each setting, several rounds:
 * operations per second (median and spread) and, from RCXVM's counters
 * over the runs with the fast path on, the mprotect() calls per
 * operation, the share that took the fast path, and the three commonest
 * reasons for falling back.  The counters are the whole system's; the
 * guest runs nothing else meanwhile.  Where a workload makes no calls,
 * its ratio only shows the noise of the measurement.
 *
 *   rcxvm_workloads [-r rounds] [-d ms] [-T 1,2,4] [-w ebizzy,metis]
 *
 * Output lines start with RCXVM-WORK (the table) and RCXVM-WRUN (each
 * measurement).  Exits 1 if a result is wrong or the switch cannot be
 * written, 2 on a usage error.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rcxvm_switch.h"

#define MAXT		8
#define MAXR		15
#define CHUNKS		8
#define CHUNK_BYTES	(256UL << 10)
#define RECORDS		(CHUNK_BYTES / sizeof(uint64_t))
#define TEXT_WORDS	(64UL << 10)
#define VOCAB		4096
#define BUCKETS		1024

static atomic_int go, stop, jobs_end;
static int ms = 1000, rounds = 5;

/* The fallback reasons RCXVM counts (mm/rcx_rs/rcxvm.c). */
static const char *const reasons[] = {
	"no_vma", "partial", "several_vmas", "merge", "not_anonymous",
	"shared", "hugetlb", "special", "locked", "userfaultfd", "ksm",
	"grows", "pkey", "shadow_stack", "droppable", "sealed", "denied",
	"accounting", "vma_busy", "errors",
};
#define NREASONS (sizeof(reasons) / sizeof(reasons[0]))

struct counters {
	unsigned long fast, unchanged, reason[NREASONS];
};

static void read_counters(struct counters *c)
{
	c->fast = rcxvm_counter("fast");
	c->unchanged = rcxvm_counter("unchanged");
	for (size_t i = 0; i < NREASONS; i++)
		c->reason[i] = rcxvm_counter(reasons[i]);
}

/* Adds what happened between a and b to sum. */
static void add_delta(struct counters *sum, const struct counters *a,
		      const struct counters *b)
{
	sum->fast += b->fast - a->fast;
	sum->unchanged += b->unchanged - a->unchanged;
	for (size_t i = 0; i < NREASONS; i++)
		sum->reason[i] += b->reason[i] - a->reason[i];
}

/*
 * Prints the calls a counter delta holds (all outcomes), the fast path's
 * share and the three commonest fallback reasons into buf; returns the
 * number of calls.  Consumes the reasons of c.
 */
static unsigned long summarize(struct counters *c, char *buf, size_t len)
{
	unsigned long calls = c->fast + c->unchanged;
	size_t at;

	for (size_t j = 0; j < NREASONS; j++)
		calls += c->reason[j];
	at = snprintf(buf, len, "%5.0f%%  ", calls ? 100.0 * c->fast / calls : 0);
	for (int n = 0; n < 3; n++) {
		size_t best = NREASONS;

		for (size_t j = 0; j < NREASONS; j++)
			if (c->reason[j] && (best == NREASONS || c->reason[j] > c->reason[best]))
				best = j;
		if (best == NREASONS)
			break;
		at += snprintf(buf + at, at < len ? len - at : 0, "%s%s %.0f%%", n ? ", " : "",
			       reasons[best], 100.0 * c->reason[best] / calls);
		c->reason[best] = 0;
	}
	if (calls == c->fast + c->unchanged)
		snprintf(buf + at, at < len ? len - at : 0, "none");
	return calls;
}

static uint64_t next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* ebizzy: the sorted records every copy is made of. */
static uint64_t *records;

static int search(const uint64_t *v, size_t n, uint64_t key)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid] == key)
			return (int)mid;
		if (v[mid] < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* metis: the text (word ids) and how often each word occurs in it. */
static uint16_t *text;
static unsigned long expected[VOCAB];

struct node {
	struct node *next;
	char *word;
	unsigned long count;
};

struct table {
	struct node *bucket[BUCKETS];
};

static unsigned int hash(const char *w)
{
	unsigned int h = 5381;

	while (*w)
		h = h * 33 + (unsigned char)*w++;
	return h % BUCKETS;
}

static void word_of(unsigned int id, char *buf)
{
	sprintf(buf, "w%04x-%u", id, id % 7);
}

/* Adds n occurrences of word w to t; allocates a node for a new word. */
static int add(struct table *t, const char *w, unsigned long n)
{
	struct node **p = &t->bucket[hash(w)], *n_new;

	for (; *p; p = &(*p)->next)
		if (!strcmp((*p)->word, w)) {
			(*p)->count += n;
			return 0;
		}
	n_new = calloc(1, sizeof(*n_new));
	if (!n_new)
		return -1;
	n_new->word = strdup(w);
	if (!n_new->word) {
		free(n_new);
		return -1;
	}
	n_new->count = n;
	*p = n_new;
	return 0;
}

static void drop(struct table *t)
{
	for (int b = 0; b < BUCKETS; b++)
		while (t->bucket[b]) {
			struct node *n = t->bucket[b];

			t->bucket[b] = n->next;
			free(n->word);
			free(n);
		}
	free(t);
}

struct worker {
	pthread_t th;
	int id, nthreads;
	int metis;
	unsigned long ops;
	int bad;
	/* metis: this thread's map output, for the reduce. */
	struct table *map;
	pthread_barrier_t *bar;
};

static void ebizzy(struct worker *w)
{
	uint64_t seed = 0x9e3779b97f4a7c15ULL * (w->id + 1);
	uint64_t *chunk[CHUNKS] = { 0 };

	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		int c = next(&seed) % CHUNKS;
		size_t at = next(&seed) % RECORDS;

		free(chunk[c]);
		chunk[c] = malloc(CHUNK_BYTES);
		if (!chunk[c]) {
			w->bad = 1;
			break;
		}
		memcpy(chunk[c], records, CHUNK_BYTES);
		if (search(chunk[c], RECORDS, records[at]) != (int)at)
			w->bad = 1;
		w->ops++;
	}
	for (int c = 0; c < CHUNKS; c++)
		free(chunk[c]);
}

/* Thread 0 reduces and checks; every job ends with all tables freed. */
static void metis(struct worker *w, struct worker *all)
{
	size_t per = TEXT_WORDS / w->nthreads;
	size_t lo = w->id * per, hi = w->id == w->nthreads - 1 ? TEXT_WORDS : lo + per;
	char buf[32];

	for (;;) {
		int done;

		w->map = calloc(1, sizeof(*w->map));
		for (size_t i = lo; i < hi && w->map; i++) {
			word_of(text[i], buf);
			if (add(w->map, buf, 1))
				w->bad = 1;
		}
		if (!w->map)
			w->bad = 1;
		pthread_barrier_wait(w->bar);
		if (w->id == 0) {
			struct table *r = calloc(1, sizeof(*r));

			for (int t = 0; t < w->nthreads && r; t++) {
				for (int b = 0; all[t].map && b < BUCKETS; b++)
					for (struct node *n = all[t].map->bucket[b]; n; n = n->next)
						if (add(r, n->word, n->count))
							w->bad = 1;
				if (all[t].map)
					drop(all[t].map);
				all[t].map = NULL;
			}
			for (unsigned int id = 0; r && id < VOCAB; id++) {
				struct node *n;

				word_of(id, buf);
				for (n = r->bucket[hash(buf)]; n && strcmp(n->word, buf); n = n->next)
					;
				if ((n ? n->count : 0) != expected[id])
					w->bad = 1;
			}
			if (r)
				drop(r);
			else
				w->bad = 1;
			w->ops++;
		}
		/* Thread 0 decides whether the next job starts, for everyone. */
		if (w->id == 0)
			atomic_store(&jobs_end, atomic_load(&stop));
		pthread_barrier_wait(w->bar);
		done = atomic_load(&jobs_end);
		if (done)
			break;
	}
}

static struct worker *workers;

static void *work(void *arg)
{
	struct worker *w = arg;

	while (!atomic_load(&go))
		;
	if (w->metis)
		metis(w, workers);
	else
		ebizzy(w);
	return NULL;
}

/*
 * One measurement: operations per second and their number; 1 if a
 * result was wrong.
 */
static int run(int metis_on, int t, double *rate, unsigned long *nops)
{
	struct worker w[MAXT] = { 0 };
	pthread_barrier_t bar;
	struct timespec a, b;
	unsigned long ops = 0;
	int bad = 0;

	pthread_barrier_init(&bar, NULL, t);
	workers = w;
	atomic_store(&stop, 0);
	for (int i = 0; i < t; i++) {
		w[i].id = i;
		w[i].nthreads = t;
		w[i].metis = metis_on;
		w[i].bar = &bar;
		if (pthread_create(&w[i].th, NULL, work, &w[i])) {
			/* The barrier counts t threads: nothing can run. */
			printf("RCXVM-WORK cannot start thread %d\n", i);
			exit(1);
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &a);
	atomic_store(&go, 1);
	usleep(ms * 1000);
	atomic_store(&stop, 1);
	for (int i = 0; i < t; i++) {
		pthread_join(w[i].th, NULL);
		ops += w[i].ops;
		bad |= w[i].bad;
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	atomic_store(&go, 0);
	pthread_barrier_destroy(&bar);
	*rate = ops / ((b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9);
	*nops = ops;
	return bad;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void setup(void)
{
	uint64_t seed = 88172645463325252ULL, key = 0;

	records = malloc(CHUNK_BYTES);
	text = malloc(TEXT_WORDS * sizeof(*text));
	if (!records || !text) {
		printf("RCXVM-WORK no memory for the inputs\n");
		exit(1);
	}
	for (size_t i = 0; i < RECORDS; i++)
		records[i] = key += 1 + next(&seed) % 1000;
	for (size_t i = 0; i < TEXT_WORDS; i++) {
		/* A skewed vocabulary: low ids are common, as in prose. */
		unsigned int id = next(&seed) % VOCAB;

		id = id % (1 + next(&seed) % VOCAB);
		text[i] = id;
		expected[id]++;
	}
}

int main(int argc, char **argv)
{
	int tv[4] = { 1, 2, 4 }, nt = 3, opt, wl[2] = { 1, 1 };
	int have_switch = access("/sys/kernel/mm/rcxvm/enabled", W_OK) == 0;

	while ((opt = getopt(argc, argv, "r:d:T:w:")) != -1) {
		switch (opt) {
		case 'r': rounds = atoi(optarg); break;
		case 'd': ms = atoi(optarg); break;
		case 'T': {
			char *dup = strdup(optarg), *tok, *save;

			nt = 0;
			for (tok = strtok_r(dup, ",", &save); tok && nt < 4;
			     tok = strtok_r(NULL, ",", &save))
				tv[nt++] = atoi(tok);
			free(dup);
			break;
		}
		case 'w':
			wl[0] = strstr(optarg, "ebizzy") != NULL;
			wl[1] = strstr(optarg, "metis") != NULL;
			break;
		default:
			fprintf(stderr, "usage: %s [-r rounds] [-d ms] [-T 1,2,4] [-w ebizzy,metis]\n",
				argv[0]);
			return 2;
		}
	}
	if (rounds < 1 || rounds > MAXR || ms < 10 || nt < 1 || !(wl[0] || wl[1]))
		return 2;
	for (int i = 0; i < nt; i++)
		if (tv[i] < 1 || tv[i] > MAXT)
			return 2;
	setup();
	if (!have_switch)
		printf("RCXVM-WORK no /sys/kernel/mm/rcxvm/enabled: both columns are the stock path\n");
	printf("RCXVM-WORK workloads: operations/s (median of %d rounds of %d ms, spread), fast path off (stock) and on, same boot; mprotect() calls per operation and fast-path share with it on\n",
	       rounds, ms);
	/*
	 * The first runs of a process grow glibc's heaps (the main heap by
	 * brk(), the threads' arenas by mprotect() on a part of a PROT_NONE
	 * reservation); later runs reuse them.  One warm-up run of each
	 * workload with the fast path on, at the most threads, shows those
	 * calls and where they went.
	 */
	for (int m = 0; m < 2; m++) {
		int t = tv[0];
		struct counters c0, c1, d = { 0 };
		char top[160];
		unsigned long n, calls;
		double rate;

		if (!wl[m])
			continue;
		for (int i = 1; i < nt; i++)
			t = tv[i] > t ? tv[i] : t;
		if (have_switch && rcxvm_set_fast(1)) {
			printf("RCXVM-WORK cannot switch the fast path\n");
			return 1;
		}
		read_counters(&c0);
		if (run(m, t, &rate, &n)) {
			printf("RCXVM-WORK %s: a wrong result\n", m ? "metis" : "ebizzy");
			return 1;
		}
		read_counters(&c1);
		add_delta(&d, &c0, &c1);
		calls = summarize(&d, top, sizeof(top));
		printf("RCXVM-WORK %s warm-up, %d threads, fast path on: %lu operations, %lu mprotect() calls, fast share and fallbacks:%s\n",
		       m ? "metis" : "ebizzy", t, n, calls, top);
	}
	printf("RCXVM-WORK %-8s %-7s %16s %16s %7s %10s %6s  %s\n", "workload", "threads",
	       "stock", "rcxvm", "ratio", "mprot/op", "fast", "fallbacks (commonest)");
	for (int m = 0; m < 2; m++) {
		if (!wl[m])
			continue;
		for (int i = 0; i < nt; i++) {
			double r[2][MAXR], med[2], spread[2], calls, ops = 0;
			unsigned long n;
			struct counters on_sum = { 0 }, c0, c1;
			char top[160] = "";

			for (int k = 0; k < rounds; k++)
				for (int o = 0; o < 2; o++) {
					int on = (o + k) % 2;

					if (have_switch && rcxvm_set_fast(on)) {
						printf("RCXVM-WORK cannot switch the fast path\n");
						return 1;
					}
					read_counters(&c0);
					if (run(m, tv[i], &r[on][k], &n)) {
						printf("RCXVM-WORK %s: a wrong result\n", m ? "metis" : "ebizzy");
						return 1;
					}
					read_counters(&c1);
					if (on) {
						add_delta(&on_sum, &c0, &c1);
						ops += n;
					}
					printf("RCXVM-WRUN workload=%s threads=%d fast=%d round=%d ops_per_s=%.1f\n",
					       m ? "metis" : "ebizzy", tv[i], on, k, r[on][k]);
				}
			for (int on = 0; on < 2; on++) {
				qsort(r[on], rounds, sizeof(double), cmp);
				med[on] = r[on][rounds / 2];
				spread[on] = med[on] ? 100 * (r[on][rounds - 1] - r[on][0]) / med[on] : 0;
			}
			calls = summarize(&on_sum, top, sizeof(top));
			printf("RCXVM-WORK %-8s %-7d %9.1f +-%3.0f%% %9.1f +-%3.0f%% %6.2fx %10.2f %s\n",
			       m ? "metis" : "ebizzy", tv[i], med[0], spread[0], med[1], spread[1],
			       med[0] ? med[1] / med[0] : 0, ops ? calls / ops : 0, top);
			fflush(stdout);
		}
	}
	rcxvm_set_fast(1);
	return 0;
}
