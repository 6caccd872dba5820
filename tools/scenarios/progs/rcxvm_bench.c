// SPDX-License-Identifier: GPL-2.0
/*
 * rcxvm_bench: mprotect-parallel.  T threads each toggle their own VMA
 * between PROT_READ|PROT_WRITE and PROT_READ and touch it (a write after
 * making it writable, a read after making it read-only), optionally with
 * F more threads faulting pages of their own in and out (MADV_DONTNEED)
 * beside them.  Every cell runs with RCXVM's fast path off (stock:
 * every mprotect() takes the mmap lock for writing) and on, switched
 * through /sys/kernel/mm/rcxvm/enabled in the same boot, alternately
 * (the order flips every round), for several rounds.
 *
 * Prints per cell the median mprotect() calls per second of each setting
 * with the spread of the rounds ((max - min) / median), the ratio of the
 * medians, and the mmap-lock write acquisitions per mprotect() of each
 * setting: calls minus those the fast path answered
 * (/sys/kernel/debug/rcxvm/write_locks_avoided), divided by the calls, a
 * figure that does not depend on timing, and the faulters' rounds per
 * second (median) in each setting, so that a setting that lets the
 * faulters run more shows beside the calls it costs the togglers.  Each
 * RCXVM-RUN line also gives
 * the TLB-shootdown and function-call interrupts (/proc/interrupts, "TLB"
 * and "CAL", all CPUs) per mprotect() of that measurement, another count
 * the clock does not set.
 *
 * With -P the faulters are threads of a second process: they load the
 * machine as before, but they share neither the togglers' mmap lock
 * (their MADV_DONTNEED takes it for reading, stock mprotect() for
 * writing) nor their TLB (no shootdown between the two).  Set beside the
 * default, this tells whether what the fast path pays beside faulters
 * comes from sharing the address space with them.  The interrupt counts
 * are machine-wide: with -P they include the faulters' shootdowns of
 * each other, divided by the togglers' calls.
 *
 *   rcxvm_bench [-r rounds] [-d ms] [-T 1,2,4] [-F 0,2] [-P]
 *
 * Output lines start with RCXVM-BENCH (the table) and RCXVM-RUN (each
 * measurement).  Exits 1 if a touch sees a wrong byte or the switch
 * cannot be written, 2 on a usage error.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rcxvm_switch.h"

#define PAGE	4096UL
#define VPAGES	4
#define MAXT	8
#define MAXR	15

/* Shared with the faulters' process (-P): MAP_SHARED. */
struct control {
	atomic_int go, stop, ready;
	atomic_ulong faults;
};

static struct control *ctl;
static int ms = 500, rounds = 5, separate;

struct worker {
	pthread_t th;
	unsigned char *mem;
	unsigned long ops;
	int fault;
	int bad;
};

static unsigned char *map_isolated(size_t pages)
{
	unsigned char *p = mmap(NULL, (pages + 2) * PAGE, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	munmap(p, PAGE);
	munmap(p + (pages + 1) * PAGE, PAGE);
	memset(p + PAGE, 1, pages * PAGE);
	return p + PAGE;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	unsigned long n = 0;
	unsigned char v = 1;

	atomic_fetch_add(&ctl->ready, 1);
	while (!atomic_load(&ctl->go))
		;
	while (!atomic_load_explicit(&ctl->stop, memory_order_relaxed)) {
		if (w->fault) {
			madvise(w->mem, VPAGES * PAGE, MADV_DONTNEED);
			for (size_t i = 0; i < VPAGES * PAGE; i += PAGE)
				w->mem[i] = 1;
			n++;
			continue;
		}
		mprotect(w->mem, VPAGES * PAGE, PROT_READ | PROT_WRITE);
		w->mem[(n % VPAGES) * PAGE] = v;
		mprotect(w->mem, VPAGES * PAGE, PROT_READ);
		if (w->mem[(n % VPAGES) * PAGE] != v)
			w->bad = 1;
		n += 2;
	}
	w->ops = n;
	return NULL;
}

/*
 * The sum over all CPUs of the /proc/interrupts line whose name is NAME
 * ("TLB:", "CAL:"); 0 where there is none.
 */
static unsigned long interrupts(const char *name)
{
	char line[4096];
	unsigned long sum = 0;
	size_t n = strlen(name);
	FILE *f = fopen("/proc/interrupts", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *p = line, *end;

		while (*p == ' ')
			p++;
		if (strncmp(p, name, n))
			continue;
		for (p += n;; p = end) {
			unsigned long v = strtoul(p, &end, 10);

			if (end == p)
				break;
			sum += v;
		}
		break;
	}
	fclose(f);
	return sum;
}

/*
 * The faulters' process of -P: f faulting threads, as run() starts them
 * in its own process without -P; their rounds go to ctl->faults.
 */
static int faulters(int f)
{
	struct worker w[MAXT] = { 0 };

	for (int i = 0; i < f; i++) {
		w[i].mem = map_isolated(VPAGES);
		w[i].fault = 1;
		if (pthread_create(&w[i].th, NULL, work, &w[i]))
			return 1;
	}
	for (int i = 0; i < f; i++) {
		pthread_join(w[i].th, NULL);
		atomic_fetch_add(&ctl->faults, w[i].ops);
	}
	return 0;
}

/*
 * One measurement: calls per second and write acquisitions per call; TLB
 * shootdown and function-call interrupts per call into ipis[0] and [1].
 */
static int run(int t, int f, double *rate, double *wl, double ipis[2], double *frate)
{
	unsigned long tlb0 = interrupts("TLB:"), cal0 = interrupts("CAL:");
	struct worker w[2 * MAXT] = { 0 };
	unsigned long avoided0 = rcxvm_counter("write_locks_avoided"), calls = 0, faults = 0;
	int own = separate ? t : t + f;	/* this process's threads */
	struct timespec a, b;
	pid_t child = -1;
	int bad = 0;
	double s;

	atomic_store(&ctl->stop, 0);
	atomic_store(&ctl->faults, 0);
	if (separate && f) {
		pid_t parent = getpid();

		/* Not twice: the child's exit() would flush it again. */
		fflush(stdout);
		child = fork();
		if (child < 0) {
			perror("fork");
			exit(1);
		}
		if (child == 0) {
			/* Never outlive the parent, whatever makes it exit. */
			if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent)
				_exit(1);
			_exit(faulters(f));
		}
	}
	for (int i = 0; i < own; i++) {
		w[i].mem = map_isolated(VPAGES);
		w[i].fault = i >= t;
		if (pthread_create(&w[i].th, NULL, work, &w[i])) {
			fprintf(stderr, "rcxvm_bench: cannot start a thread\n");
			exit(1);
		}
	}
	while (atomic_load(&ctl->ready) < t + f) {
		/* A faulters' process that could not start its threads. */
		if (child > 0 && waitpid(child, NULL, WNOHANG) == child) {
			fprintf(stderr, "rcxvm_bench: the faulters' process failed\n");
			exit(1);
		}
		usleep(1000);
	}
	atomic_store(&ctl->ready, 0);
	clock_gettime(CLOCK_MONOTONIC, &a);
	atomic_store(&ctl->go, 1);
	usleep(ms * 1000);
	atomic_store(&ctl->stop, 1);
	for (int i = 0; i < own; i++) {
		pthread_join(w[i].th, NULL);
		if (i < t)
			calls += w[i].ops;
		else
			faults += w[i].ops;
		bad |= w[i].bad;
		munmap(w[i].mem, VPAGES * PAGE);
	}
	/* Before the faulters' process exits: its teardown is not measured. */
	clock_gettime(CLOCK_MONOTONIC, &b);
	if (child > 0) {
		int status;

		if (waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
		    WEXITSTATUS(status)) {
			fprintf(stderr, "rcxvm_bench: the faulters' process failed\n");
			exit(1);
		}
		faults += atomic_load(&ctl->faults);
	}
	atomic_store(&ctl->go, 0);
	if (f && !faults) {
		fprintf(stderr, "rcxvm_bench: the faulters did not run\n");
		exit(1);
	}
	s = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
	*rate = calls / s;
	*frate = faults / s;
	*wl = calls ? (double)(calls - (rcxvm_counter("write_locks_avoided") - avoided0)) / calls : 0;
	ipis[0] = calls ? (double)(interrupts("TLB:") - tlb0) / calls : 0;
	ipis[1] = calls ? (double)(interrupts("CAL:") - cal0) / calls : 0;
	return bad;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void parse_list(const char *s, int *v, int *n)
{
	char *dup = strdup(s), *tok, *save;

	*n = 0;
	for (tok = strtok_r(dup, ",", &save); tok && *n < 4; tok = strtok_r(NULL, ",", &save))
		v[(*n)++] = atoi(tok);
	free(dup);
}

int main(int argc, char **argv)
{
	int tv[4] = { 1, 2, 4 }, fv[4] = { 0, 2 }, nt = 3, nf = 2, opt;
	int have_switch = access("/sys/kernel/mm/rcxvm/enabled", W_OK) == 0;

	while ((opt = getopt(argc, argv, "r:d:T:F:P")) != -1) {
		switch (opt) {
		case 'r': rounds = atoi(optarg); break;
		case 'd': ms = atoi(optarg); break;
		case 'T': parse_list(optarg, tv, &nt); break;
		case 'F': parse_list(optarg, fv, &nf); break;
		case 'P': separate = 1; break;
		default:
			fprintf(stderr, "usage: %s [-r rounds] [-d ms] [-T 1,2,4] [-F 0,2] [-P]\n", argv[0]);
			return 2;
		}
	}
	if (rounds < 1 || rounds > MAXR || ms < 10)
		return 2;
	for (int i = 0; i < nt; i++)
		if (tv[i] < 1 || tv[i] > MAXT)
			return 2;
	for (int j = 0; j < nf; j++)
		if (fv[j] < 0 || fv[j] > MAXT)
			return 2;
	ctl = mmap(NULL, sizeof(*ctl), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ctl == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	if (!have_switch)
		printf("RCXVM-BENCH no /sys/kernel/mm/rcxvm/enabled: both columns are the stock path\n");
	printf("RCXVM-BENCH mprotect-parallel: mprotect() calls/s (median of %d rounds of %d ms, spread), fast path off (stock) and on, same boot%s\n",
	       rounds, ms, separate ? "; faulters in a second process" : "");
	printf("RCXVM-BENCH %-7s %-8s %16s %16s %7s %16s %18s\n", "threads", "faulters",
	       "stock", "rcxvm", "ratio", "wlocks/mprotect", "faulter rounds/s");
	for (int i = 0; i < nt; i++)
		for (int j = 0; j < nf; j++) {
			double r[2][MAXR], wl[2][MAXR], fr[2][MAXR], med[2], spread[2], wlm[2], ipis[2];

			for (int k = 0; k < rounds; k++)
				for (int o = 0; o < 2; o++) {
					int on = (o + k) % 2;

					if (have_switch && rcxvm_set_fast(on)) {
						printf("RCXVM-BENCH cannot switch the fast path\n");
						return 1;
					}
					if (run(tv[i], fv[j], &r[on][k], &wl[on][k], ipis, &fr[on][k])) {
						printf("RCXVM-BENCH wrong byte read back\n");
						return 1;
					}
					printf("RCXVM-RUN threads=%d faulters=%d fast=%d round=%d calls_per_s=%.0f faulter_rounds_per_s=%.0f wlocks_per_call=%.3f tlb_ipis_per_call=%.3f cal_ipis_per_call=%.3f\n",
					       tv[i], fv[j], on, k, r[on][k], fr[on][k], wl[on][k], ipis[0], ipis[1]);
				}
			for (int on = 0; on < 2; on++) {
				qsort(r[on], rounds, sizeof(double), cmp);
				qsort(wl[on], rounds, sizeof(double), cmp);
				qsort(fr[on], rounds, sizeof(double), cmp);
				med[on] = r[on][rounds / 2];
				spread[on] = med[on] ? 100 * (r[on][rounds - 1] - r[on][0]) / med[on] : 0;
				wlm[on] = wl[on][rounds / 2];
			}
			printf("RCXVM-BENCH %-7d %-8d %9.0f +-%3.0f%% %9.0f +-%3.0f%% %6.2fx %7.2f / %5.2f %8.0f / %7.0f\n",
			       tv[i], fv[j], med[0], spread[0], med[1], spread[1],
			       med[0] ? med[1] / med[0] : 0, wlm[0], wlm[1],
			       fr[0][rounds / 2], fr[1][rounds / 2]);
			fflush(stdout);
		}
	rcxvm_set_fast(1);
	return 0;
}
