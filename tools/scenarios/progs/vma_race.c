// SPDX-License-Identifier: GPL-2.0
/*
 * vma_race: page faults racing VMA changes in one address space, every
 * byte read checked.
 *
 * Faults look their VMA up without the mmap lock (lock_vma_under_rcu(),
 * and with CONFIG_BONSAI_VMA in a Bonsai tree kept equal to the maple
 * tree).  A lookup that returns a stale or wrong VMA shows up as a page
 * mapped at the wrong place, with the wrong contents or permissions, or
 * a signal where memory is mapped.  So every thread only touches memory
 * it owns, with a model of what each of its bytes must read, while the
 * other threads change the VMAs around it:
 *
 *  - faulters (-n, default 4) own private anonymous regions, mapped at
 *    start-up one after the other with everyone else's (the kernel then
 *    merges neighbours into VMAs that span several threads' memory), and
 *    keep zapping parts of them (MADV_DONTNEED), reading the zeroes back
 *    and writing the pattern again: a stream of read and write faults;
 *  - mutators (-m, default 2) own regions of the same kind and keep
 *    changing them: mmap, munmap, mremap (grow, shrink, move, move with
 *    MREMAP_DONTUNMAP), mprotect of a middle part to read-only or to
 *    PROT_NONE (splitting the VMA, whose neighbours may be a faulter's)
 *    and back (merging it again), MAP_FIXED over a part, MADV_DONTNEED,
 *    and aliases of their slice of the file mapped elsewhere;
 *  - forkers (-k, default 1) own regions too and fork children, which
 *    check their copy of the forker's memory while the forker writes a
 *    new generation into it (copy on write on both sides), change and
 *    check their own copy, and exit.
 * Every thread also owns a slice of a MAP_SHARED|MAP_ANONYMOUS region and
 * of a MAP_SHARED file mapping (FILE, default /tmp/vma_race.dat, on tmpfs),
 * which it writes, zaps and checks, and all read and zap a read-only
 * file mapping whose contents never change.
 *
 * Contents: word i of a private region holds pattern(key + 8 * i, gen),
 * where key is the address the region had when generation gen was
 * written (mremap moves keep the old key: the bytes must move along),
 * and gen holds the owner's thread number, so that another thread's page
 * or an older copy is told apart; file and shared memory use their file
 * or region offset as key.
 *
 * An unexpected SIGSEGV or SIGBUS is reported with its address and the
 * thread's last operation, and ends the program with status 1.  A page
 * that is PROT_NONE is probed, and must fault.
 *
 * Prints one line "VMA-RACE key=value ..." (operation counts, faults,
 * mismatches) and exits 0 when every byte was right, 1 otherwise, 2 on a
 * usage error.  -C MODE breaks one thing on purpose, to show that the
 * checks catch it: "byte" flips a byte of a faulter's region behind its
 * model, "child" a byte of a fork child's copy, "segv" reads a PROT_NONE
 * page without a probe.
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
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif

#define MAX_THREADS	32
#define REGIONS		6	/* private regions per thread */
#define REGION_MIN	4	/* pages */
#define REGION_MAX	32	/* pages */
#define SLICE		8	/* pages of the shared and the file mapping per thread */
#define STATIC_PAGES	64	/* read-only file pages everyone checks */
#define MAX_REPORTS	10

enum role { FAULTER, MUTATOR, FORKER };
static const char *const role_name[] = { "faulter", "mutator", "forker" };

/* A private anonymous region: len bytes at base, all of (key, gen). */
struct region {
	char *base;		/* NULL: not mapped */
	size_t len;
	uintptr_t key;
	uint64_t gen;
	size_t split_from;	/* pages [split_from, split_to) have split_prot */
	size_t split_to;
	int split_prot;		/* PROT_READ|PROT_WRITE: not split */
};

enum op {
	OP_NONE, OP_MMAP, OP_MUNMAP, OP_GROW, OP_SHRINK, OP_MOVE, OP_DONTUNMAP,
	OP_SPLIT, OP_MERGE, OP_PROBE, OP_FIXED, OP_DONTNEED, OP_ALIAS, OP_FORK,
	OP_SHARED, OP_STATIC, OP_VERIFY, OP_REBUILD, NR_OPS
};
static const char *const op_name[NR_OPS] = {
	"none", "mmap", "munmap", "grow", "shrink", "move", "dontunmap",
	"split", "merge", "probe", "fixed", "dontneed", "alias", "fork",
	"shared", "static", "verify", "rebuild",
};

struct thread {
	int id;
	enum role role;
	pthread_t tid;
	uint64_t rnd;
	uint64_t gen;
	struct region r[REGIONS];
	unsigned long ops[NR_OPS];
	unsigned long verified;	/* bytes */
	unsigned long errors;	/* system calls that failed */
	unsigned long child_failures;
	enum op last_op;
	char *last_addr;
};

static struct thread threads[MAX_THREADS];
static int nthreads, nfaulters = 4, nmutators = 2, nforkers = 1;
static size_t page;
static char *shared_map;	/* MAP_SHARED|MAP_ANONYMOUS, a slice per thread */
static char *file_map;		/* MAP_SHARED of the file, a slice per thread */
static char *static_map;	/* read-only file pages after the slices */
static char *segv_page;		/* PROT_NONE, for -C segv */
static int file_fd;
static atomic_int stop;
static atomic_ulong mismatches;
static atomic_int reports;
static const char *corrupt;
static int in_child;

static __thread struct thread *self;
static __thread sigjmp_buf probe_env;
static __thread volatile int probing;

static uint64_t next_rand(struct thread *t)
{
	uint64_t x = t->rnd;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	t->rnd = x;
	return x;
}

static size_t rand_range(struct thread *t, size_t lo, size_t hi)
{
	return lo + next_rand(t) % (hi - lo + 1);
}

/* Never 0, so that a zero-filled page is never right by chance. */
static inline uint64_t pattern(uintptr_t key, uint64_t gen)
{
	uint64_t x = key * 0x9e3779b97f4a7c15ULL ^ gen * 0xc2b2ae3d27d4eb4fULL;

	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 32;
	return x | 1;
}

static void fill(char *p, size_t len, uintptr_t key, uint64_t gen)
{
	uint64_t *w = (uint64_t *)p;

	for (size_t i = 0; i < len / 8; i++)
		w[i] = pattern(key + 8 * i, gen);
}

/*
 * Messages go out with one write(): no stdio lock, which another thread
 * may hold when the forker forks, so that a fork child can report too.
 */
static void say(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 1)
		n = sizeof(buf) - 1;
	if (write(2, buf, n) < 0)
		return;
}

static void report(const char *what, const char *addr, uint64_t want, uint64_t got,
		   uintptr_t key, uint64_t gen)
{
	atomic_fetch_add(&mismatches, 1);
	if (atomic_fetch_add(&reports, 1) >= MAX_REPORTS)
		return;
	say("vma_race: MISMATCH in %s%s, thread %d (%s), at %p: want %#llx got %#llx (key %#lx gen %#llx, last op %s at %p)\n",
		what, in_child ? " of a fork child" : "", self->id, role_name[self->role],
		addr, (unsigned long long)want, (unsigned long long)got,
		(unsigned long)key, (unsigned long long)gen, op_name[self->last_op],
		self->last_addr);
}

/* Checks len bytes at p against (key, gen), or zeroes if gen is 0. */
static int check(const char *what, const char *p, size_t len, uintptr_t key, uint64_t gen)
{
	const volatile uint64_t *w = (const volatile uint64_t *)p;
	int bad = 0;

	for (size_t i = 0; i < len / 8; i++) {
		uint64_t want = gen ? pattern(key + 8 * i, gen) : 0;
		uint64_t got = w[i];

		if (got != want) {
			report(what, p + 8 * i, want, got, key + 8 * i, gen);
			bad = 1;
			/* One report per page is enough. */
			i |= page / 8 - 1;
		}
	}
	self->verified += len;
	return bad;
}

/* Checks a region: the split part, if PROT_NONE, is probed instead. */
static int check_region(struct region *r)
{
	int bad = 0;

	if (r->split_prot != PROT_NONE)
		return check("region", r->base, r->len, r->key, r->gen);
	bad |= check("region", r->base, r->split_from * page, r->key, r->gen);
	bad |= check("region", r->base + r->split_to * page, r->len - r->split_to * page,
		     r->key + r->split_to * page, r->gen);
	return bad;
}

static void note(enum op op, void *addr)
{
	self->last_op = op;
	self->last_addr = addr;
	self->ops[op]++;
}

static void syscall_failed(const char *what, void *addr, size_t len)
{
	self->errors++;
	say("vma_race: thread %d (%s): %s(%p, %zu): %s\n", self->id,
		role_name[self->role], what, addr, len, strerror(errno));
}

/* A new generation for the whole region, written by this thread. */
static void rewrite(struct region *r)
{
	r->gen = ++self->gen;
	r->key = (uintptr_t)r->base;
	fill(r->base, r->len, r->key, r->gen);
}

static uint64_t thread_gen(int id)
{
	return (uint64_t)(id + 1) << 40;
}

/* ---------------------------------------------------------------- signals */

static void put_str(const char *s)
{
	ssize_t n = write(2, s, strlen(s));

	(void)n;
}

static void put_hex(unsigned long v)
{
	char buf[19] = "0x";
	int i;

	for (i = 0; i < 16; i++)
		buf[2 + i] = "0123456789abcdef"[(v >> (60 - 4 * i)) & 15];
	buf[18] = 0;
	put_str(buf);
}

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	if (probing && sig == SIGSEGV) {
		probing = 0;
		siglongjmp(probe_env, 1);
	}
	/* Async-signal-safe reporting only: the program ends here. */
	put_str(sig == SIGSEGV ? "vma_race: UNEXPECTED SIGSEGV" : "vma_race: UNEXPECTED SIGBUS");
	put_str(in_child ? " in a fork child" : "");
	put_str(" at ");
	put_hex((unsigned long)si->si_addr);
	put_str(" code ");
	put_hex(si->si_code);
	if (self) {
		put_str(" thread ");
		put_hex(self->id);
		put_str(" role ");
		put_str(role_name[self->role]);
		put_str(" last op ");
		put_str(op_name[self->last_op]);
		put_str(" at ");
		put_hex((unsigned long)self->last_addr);
	}
	put_str("\n");
	_exit(1);
}

/* Reads one byte at p: 1 if it faulted (SIGSEGV), 0 if it did not. */
static int probe(const char *p)
{
	if (sigsetjmp(probe_env, 1))
		return 1;
	probing = 1;
	(void)*(const volatile char *)p;
	probing = 0;
	return 0;
}

/* ------------------------------------------------------ private regions */

static int map_region(struct region *r, size_t pages, void *hint)
{
	void *p = mmap(hint, pages * page, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		syscall_failed("mmap", hint, pages * page);
		return -1;
	}
	r->base = p;
	r->len = pages * page;
	r->split_prot = PROT_READ | PROT_WRITE;
	rewrite(r);
	return 0;
}

/*
 * Zaps up to 8 pages: they must read zero, then what is written again,
 * and so must the pages around them.  The rest of the region is checked
 * by the other operations.
 */
static void op_dontneed(struct region *r)
{
	size_t pages = r->len / page;
	size_t from = rand_range(self, 0, pages - 1);
	size_t n = rand_range(self, 1, pages - from < 8 ? pages - from : 8);
	size_t lo = from ? from - 1 : 0, hi = from + n < pages ? from + n + 1 : pages;
	char *p = r->base + from * page;

	note(OP_DONTNEED, p);
	if (madvise(p, n * page, MADV_DONTNEED)) {
		syscall_failed("madvise(DONTNEED)", p, n * page);
		return;
	}
	/* Half the time read first (zero page, then a write fault). */
	if (next_rand(self) & 1)
		check("dontneed", p, n * page, 0, 0);
	fill(p, n * page, r->key + from * page, r->gen);
	check("dontneed", r->base + lo * page, (hi - lo) * page, r->key + lo * page, r->gen);
}

static void op_munmap(struct region *r)
{
	note(OP_MUNMAP, r->base);
	if (munmap(r->base, r->len))
		syscall_failed("munmap", r->base, r->len);
	r->base = NULL;
}

/*
 * mremap() moves or grows only a range within one VMA (else EFAULT), and
 * a region is often several: a part mapped over with MAP_FIXED, or a
 * part that got an anon_vma of its own, does not merge with the rest.
 * Such a region is copied into a new mapping of one VMA instead.
 */
static void op_rebuild(struct region *r)
{
	char *p;

	note(OP_REBUILD, r->base);
	p = mmap(NULL, r->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		syscall_failed("mmap(rebuild)", NULL, r->len);
		return;
	}
	check_region(r);
	memcpy(p, r->base, r->len);
	if (munmap(r->base, r->len))
		syscall_failed("munmap(rebuild)", r->base, r->len);
	r->base = p;
	check_region(r);
}

static void op_grow(struct region *r)
{
	size_t old = r->len, len = old + rand_range(self, 1, 8) * page;
	char *p;

	note(OP_GROW, r->base);
	p = mremap(r->base, old, len, MREMAP_MAYMOVE);
	if (p == MAP_FAILED && errno == EFAULT) {
		op_rebuild(r);
		return;
	}
	if (p == MAP_FAILED) {
		syscall_failed("mremap(grow)", r->base, len);
		return;
	}
	r->base = p;
	r->len = len;
	check("grow", p, old, r->key, r->gen);
	check("grow tail", p + old, len - old, 0, 0);
	fill(p + old, len - old, r->key + old, r->gen);
	check_region(r);
}

static void op_shrink(struct region *r)
{
	size_t len = r->len - rand_range(self, 1, r->len / page - REGION_MIN) * page;
	char *p;

	note(OP_SHRINK, r->base);
	p = mremap(r->base, r->len, len, 0);
	if (p == MAP_FAILED) {
		syscall_failed("mremap(shrink)", r->base, len);
		return;
	}
	r->len = len;
	check_region(r);
}

/*
 * Moves the region onto a mapping of its own (so that MREMAP_FIXED
 * replaces nothing of anyone else's), or with MREMAP_DONTUNMAP, after
 * which the old range stays mapped and empty.
 */
static void op_move(struct region *r, int dontunmap)
{
	char *old = r->base, *dst, *p;

	note(dontunmap ? OP_DONTUNMAP : OP_MOVE, old);
	dst = mmap(NULL, r->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (dst == MAP_FAILED) {
		syscall_failed("mmap(move target)", NULL, r->len);
		return;
	}
	p = mremap(old, r->len, r->len,
		   MREMAP_MAYMOVE | MREMAP_FIXED | (dontunmap ? MREMAP_DONTUNMAP : 0), dst);
	if (p == MAP_FAILED && errno == EFAULT) {
		/*
		 * mremap() unmapped the target before it found that the
		 * source is several VMAs: the range is free, and another
		 * thread may map it at any time, so it is not ours to unmap.
		 */
		op_rebuild(r);
		return;
	}
	if (p == MAP_FAILED) {
		syscall_failed("mremap(move)", old, r->len);
		if (munmap(dst, r->len))
			syscall_failed("munmap(move target)", dst, r->len);
		return;
	}
	r->base = p;
	check_region(r);
	if (dontunmap) {
		check("dontunmap source", old, page, 0, 0);
		check("dontunmap source", old + r->len - page, page, 0, 0);
		if (munmap(old, r->len))
			syscall_failed("munmap(dontunmap source)", old, r->len);
	}
	rewrite(r);
}

/* A middle part read-only or PROT_NONE: the VMA splits in three. */
static void op_split(struct region *r)
{
	size_t pages = r->len / page;
	size_t from = rand_range(self, 1, pages - 2);
	size_t to = rand_range(self, from + 1, pages - 1);
	int prot = (next_rand(self) & 1) ? PROT_READ : PROT_NONE;

	note(OP_SPLIT, r->base + from * page);
	if (mprotect(r->base + from * page, (to - from) * page, prot)) {
		syscall_failed("mprotect(split)", r->base + from * page, (to - from) * page);
		return;
	}
	r->split_from = from;
	r->split_to = to;
	r->split_prot = prot;
	check_region(r);
}

/* Read-only pages read; PROT_NONE pages must fault. */
static void op_probe(struct region *r)
{
	char *p = r->base + rand_range(self, r->split_from, r->split_to - 1) * page;

	note(OP_PROBE, p);
	if (r->split_prot == PROT_READ) {
		check("read-only", p, page, r->key + (p - r->base), r->gen);
		return;
	}
	if (!probe(p + rand_range(self, 0, page - 1))) {
		atomic_fetch_add(&mismatches, 1);
		say("vma_race: PROT_NONE page %p of thread %d readable\n", p, self->id);
	}
}

/* Read-write again: the VMAs merge back. */
static void op_merge(struct region *r)
{
	note(OP_MERGE, r->base);
	if (mprotect(r->base, r->len, PROT_READ | PROT_WRITE)) {
		syscall_failed("mprotect(merge)", r->base, r->len);
		return;
	}
	r->split_prot = PROT_READ | PROT_WRITE;
	check_region(r);
	rewrite(r);
}

/* A new mapping over a part of the region: it reads zero. */
static void op_fixed(struct region *r)
{
	size_t pages = r->len / page;
	size_t from = rand_range(self, 0, pages - 1);
	size_t n = rand_range(self, 1, pages - from);
	char *p = r->base + from * page, *q;

	note(OP_FIXED, p);
	q = mmap(p, n * page, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (q == MAP_FAILED) {
		syscall_failed("mmap(MAP_FIXED)", p, n * page);
		return;
	}
	check("fixed", p, n * page, 0, 0);
	fill(p, n * page, r->key + from * page, r->gen);
	check_region(r);
}

/* ------------------------------------------------- shared and file slices */

static char *shared_slice(int id)
{
	return shared_map + (size_t)id * SLICE * page;
}

static char *file_slice(int id)
{
	return file_map + (size_t)id * SLICE * page;
}

static size_t file_slice_off(int id)
{
	return (size_t)id * SLICE * page;
}

/* Generations of the thread's slices; 0: never written, zeroes. */
static __thread uint64_t my_shared_gen, my_file_gen;

/*
 * The thread's slices of the shared anonymous and the file mapping: zap
 * a part (the data stays in shmem or the page cache), check, write a new
 * generation now and then.
 */
static void op_shared(void)
{
	char *s = shared_slice(self->id), *f = file_slice(self->id);
	size_t off = file_slice_off(self->id);
	size_t from = rand_range(self, 0, SLICE - 1), n = rand_range(self, 1, SLICE - from);

	note(OP_SHARED, s);
	if (next_rand(self) & 1) {
		if (madvise(s + from * page, n * page, MADV_DONTNEED))
			syscall_failed("madvise(shared)", s + from * page, n * page);
		if (madvise(f + from * page, n * page, MADV_DONTNEED))
			syscall_failed("madvise(file)", f + from * page, n * page);
	}
	check("shared", s, SLICE * page, (uintptr_t)s - (uintptr_t)shared_map, my_shared_gen);
	check("file", f, SLICE * page, off, my_file_gen);
	if ((next_rand(self) & 7) == 0) {
		my_shared_gen = ++self->gen;
		fill(s, SLICE * page, (uintptr_t)s - (uintptr_t)shared_map, my_shared_gen);
		my_file_gen = ++self->gen;
		fill(f, SLICE * page, off, my_file_gen);
	}
}

/* The read-only file pages: everyone zaps and checks them. */
static void op_static(void)
{
	size_t nstatic = STATIC_PAGES;
	size_t from = rand_range(self, 0, nstatic - 1), n = rand_range(self, 1, nstatic - from);
	size_t base_off = (size_t)nthreads * SLICE * page;

	note(OP_STATIC, static_map + from * page);
	if (next_rand(self) & 1 && madvise(static_map + from * page, n * page, MADV_DONTNEED))
		syscall_failed("madvise(static)", static_map + from * page, n * page);
	check("static", static_map + from * page, n * page, base_off + from * page, 1);
}

/* The thread's file slice mapped a second time elsewhere: same bytes. */
static void op_alias(void)
{
	size_t off = file_slice_off(self->id);
	char *p;

	p = mmap(NULL, SLICE * page, PROT_READ | PROT_WRITE, MAP_SHARED, file_fd, off);
	note(OP_ALIAS, p);
	if (p == MAP_FAILED) {
		syscall_failed("mmap(alias)", NULL, SLICE * page);
		return;
	}
	check("alias", p, SLICE * page, off, my_file_gen);
	/* Written through the alias, read through the main mapping. */
	my_file_gen = ++self->gen;
	fill(p, SLICE * page, off, my_file_gen);
	if (munmap(p, SLICE * page))
		syscall_failed("munmap(alias)", p, SLICE * page);
	check("file after alias", file_slice(self->id), SLICE * page, off, my_file_gen);
}

/* -------------------------------------------------------------- threads */

static void faulter_step(void)
{
	struct region *r = &self->r[rand_range(self, 0, REGIONS - 1)];
	unsigned int what = next_rand(self) % 8;

	if (what < 5)
		op_dontneed(r);
	else if (what == 5)
		op_shared();
	else if (what == 6)
		op_static();
	else {
		note(OP_VERIFY, r->base);
		check_region(r);
	}
}

static void mutator_step(void)
{
	struct region *r = &self->r[rand_range(self, 0, REGIONS - 1)];
	unsigned int what = next_rand(self) % 16;

	if (!r->base) {
		/* Back where it was if that is free, next to the others. */
		note(OP_MMAP, NULL);
		map_region(r, rand_range(self, REGION_MIN, REGION_MAX), (void *)r->key);
		return;
	}
	if (r->split_prot != (PROT_READ | PROT_WRITE)) {
		if (what < 6)
			op_probe(r);
		else
			op_merge(r);
		return;
	}
	switch (what) {
	case 0:
		op_munmap(r);
		break;
	case 1:
	case 2:
		if (r->len < REGION_MAX * page)
			op_grow(r);
		else
			op_shrink(r);
		break;
	case 3:
		if (r->len > REGION_MIN * page)
			op_shrink(r);
		else
			op_grow(r);
		break;
	case 4:
		op_move(r, 0);
		break;
	case 5:
		op_move(r, 1);
		break;
	case 6:
	case 7:
		op_split(r);
		break;
	case 8:
		op_fixed(r);
		break;
	case 9:
	case 10:
		op_dontneed(r);
		break;
	case 11:
		op_alias();
		break;
	case 12:
		op_shared();
		break;
	case 13:
		op_static();
		break;
	default:
		note(OP_VERIFY, r->base);
		check_region(r);
	}
}

/*
 * In the child: its copy of the forker's regions must hold what they held
 * at fork (the parent is writing a new generation meanwhile), and the
 * slices what the parent last wrote (it leaves them alone until the child
 * has exited).  Then it changes its own copy and checks that.
 */
static int child_main(void)
{
	unsigned long before = atomic_load(&mismatches);
	int i;

	in_child = 1;
	for (i = 0; i < REGIONS; i++)
		check_region(&self->r[i]);
	check("shared", shared_slice(self->id), SLICE * page,
	      (uintptr_t)shared_slice(self->id) - (uintptr_t)shared_map, my_shared_gen);
	check("file", file_slice(self->id), SLICE * page, file_slice_off(self->id), my_file_gen);
	op_static();
	if (corrupt && !strcmp(corrupt, "child") && self->ops[OP_FORK] == 1) {
		self->r[0].base[page + 5] ^= 0x10;
		say("vma_race: -C child: flipped a byte at %p in a child\n",
			self->r[0].base + page + 5);
	}
	for (i = 0; i < REGIONS; i++) {
		struct region *r = &self->r[i];

		check_region(r);
		rewrite(r);
		op_dontneed(r);
		if (i == 0) {
			op_split(r);
			op_probe(r);
			op_merge(r);
		}
		if (i == 1)
			op_grow(r);
		check_region(r);
	}
	return atomic_load(&mismatches) != before;
}

static void forker_step(void)
{
	int status, i;
	pid_t pid;

	for (i = 0; i < REGIONS; i++)
		check_region(&self->r[i]);
	note(OP_FORK, NULL);
	pid = fork();
	if (pid < 0) {
		syscall_failed("fork", NULL, 0);
		return;
	}
	if (pid == 0) {
		/* A child that hangs is a failure, not a hang of the test. */
		alarm(60);
		_exit(child_main());
	}
	/* Copy on write in the parent, while the child reads its copy. */
	for (i = 0; i < REGIONS; i++) {
		rewrite(&self->r[i]);
		check_region(&self->r[i]);
	}
	if (waitpid(pid, &status, 0) != pid) {
		syscall_failed("waitpid", NULL, 0);
		return;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		self->child_failures++;
		say("vma_race: fork child of thread %d: %s %d\n", self->id,
			WIFEXITED(status) ? "exit status" : "signal",
			WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	}
	op_shared();
}

static void *thread_main(void *arg)
{
	struct thread *t = arg;
	time_t t0 = time(NULL);
	int corrupted = 0;

	self = t;
	while (!atomic_load(&stop)) {
		switch (t->role) {
		case FAULTER:
			faulter_step();
			break;
		case MUTATOR:
			mutator_step();
			break;
		case FORKER:
			forker_step();
			break;
		}
		if (corrupt && !corrupted && t->id == 0 && time(NULL) - t0 >= 1) {
			corrupted = 1;
			if (!strcmp(corrupt, "byte")) {
				/* Checked at once: a zap could hide it. */
				t->r[1].base[t->r[1].len / 2 + 3] ^= 0x40;
				say("vma_race: -C byte: flipped the byte at %p\n",
				    t->r[1].base + t->r[1].len / 2 + 3);
				note(OP_VERIFY, t->r[1].base);
				check_region(&t->r[1]);
			} else if (!strcmp(corrupt, "segv")) {
				say("vma_race: -C segv: reading %p\n", segv_page);
				(void)*(volatile char *)segv_page;
			}
		}
	}
	return NULL;
}

/* ---------------------------------------------------------------- setup */

static void usage(void)
{
	fprintf(stderr, "usage: vma_race [-t SECONDS] [-n FAULTERS] [-m MUTATORS] [-k FORKERS] [-f FILE] [-s SEED] [-C byte|child|segv] [-v]\n");
	exit(2);
}

static void setup(const char *path, unsigned long seed)
{
	size_t slices = (size_t)nthreads * SLICE * page;
	size_t fsize = slices + STATIC_PAGES * page;
	struct sigaction sa;
	char *buf;
	int i, j;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);

	file_fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (file_fd < 0 || ftruncate(file_fd, fsize)) {
		perror(path);
		exit(1);
	}
	/* The read-only part, generation 1 keyed by file offset. */
	buf = malloc(STATIC_PAGES * page);
	if (!buf) {
		perror("malloc");
		exit(1);
	}
	fill(buf, STATIC_PAGES * page, slices, 1);
	if (pwrite(file_fd, buf, STATIC_PAGES * page, slices) != (ssize_t)(STATIC_PAGES * page)) {
		perror("pwrite");
		exit(1);
	}
	free(buf);

	shared_map = mmap(NULL, slices, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	file_map = mmap(NULL, slices, PROT_READ | PROT_WRITE, MAP_SHARED, file_fd, 0);
	static_map = mmap(NULL, STATIC_PAGES * page, PROT_READ, MAP_SHARED, file_fd, slices);
	segv_page = mmap(NULL, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (shared_map == MAP_FAILED || file_map == MAP_FAILED || static_map == MAP_FAILED ||
	    segv_page == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}

	for (i = 0; i < nthreads; i++) {
		struct thread *t = &threads[i];

		t->id = i;
		t->role = i < nfaulters ? FAULTER : i < nfaulters + nmutators ? MUTATOR : FORKER;
		t->rnd = seed * 0x9e3779b97f4a7c15ULL + i + 1;
		t->gen = thread_gen(i);
	}
	/*
	 * Round robin, so that each thread's regions have other threads'
	 * regions next to them (mmap places them one below the other).
	 */
	for (j = 0; j < REGIONS; j++) {
		for (i = 0; i < nthreads; i++) {
			self = &threads[i];
			if (map_region(&self->r[j], rand_range(self, REGION_MIN, REGION_MAX), NULL))
				exit(1);
		}
	}
	self = NULL;
}

int main(int argc, char **argv)
{
	const char *path = "/tmp/vma_race.dat";
	unsigned long seed = 1, ops[NR_OPS] = { 0 }, verified = 0, errors = 0, child_failures = 0;
	unsigned long total = 0;
	int seconds = 30, verbose = 0, opt, i, k;
	struct rusage ru, ruc;
	struct timespec ts0, ts1;

	while ((opt = getopt(argc, argv, "t:n:m:k:f:s:C:v")) != -1) {
		switch (opt) {
		case 't':
			seconds = atoi(optarg);
			break;
		case 'n':
			nfaulters = atoi(optarg);
			break;
		case 'm':
			nmutators = atoi(optarg);
			break;
		case 'k':
			nforkers = atoi(optarg);
			break;
		case 'f':
			path = optarg;
			break;
		case 's':
			seed = strtoul(optarg, NULL, 0);
			break;
		case 'C':
			corrupt = optarg;
			if (strcmp(corrupt, "byte") && strcmp(corrupt, "child") &&
			    strcmp(corrupt, "segv"))
				usage();
			break;
		case 'v':
			verbose = 1;
			break;
		default:
			usage();
		}
	}
	nthreads = nfaulters + nmutators + nforkers;
	if (optind != argc || seconds < 1 || nfaulters < 1 || nmutators < 0 || nforkers < 0 ||
	    nthreads > MAX_THREADS)
		usage();
	page = sysconf(_SC_PAGESIZE);
	setup(path, seed);

	clock_gettime(CLOCK_MONOTONIC, &ts0);
	for (i = 0; i < nthreads; i++) {
		if (pthread_create(&threads[i].tid, NULL, thread_main, &threads[i])) {
			perror("pthread_create");
			return 1;
		}
	}
	sleep(seconds);
	atomic_store(&stop, 1);
	for (i = 0; i < nthreads; i++)
		pthread_join(threads[i].tid, NULL);
	clock_gettime(CLOCK_MONOTONIC, &ts1);
	getrusage(RUSAGE_SELF, &ru);
	getrusage(RUSAGE_CHILDREN, &ruc);

	for (i = 0; i < nthreads; i++) {
		struct thread *t = &threads[i];
		unsigned long n = 0;

		for (k = 0; k < NR_OPS; k++) {
			ops[k] += t->ops[k];
			n += t->ops[k];
		}
		total += n;
		verified += t->verified;
		errors += t->errors;
		child_failures += t->child_failures;
		if (verbose)
			fprintf(stderr, "vma_race: thread %d (%s): %lu ops, %lu MiB checked\n",
				i, role_name[t->role], n, t->verified >> 20);
	}
	printf("VMA-RACE seconds=%.1f threads=%d faulters=%d mutators=%d forkers=%d ops=%lu",
	       ts1.tv_sec - ts0.tv_sec + (ts1.tv_nsec - ts0.tv_nsec) / 1e9, nthreads,
	       nfaulters, nmutators, nforkers, total);
	for (k = 1; k < NR_OPS; k++)
		printf(" %s=%lu", op_name[k], ops[k]);
	printf(" checked_mib=%lu minflt=%ld majflt=%ld child_minflt=%ld errors=%lu child_failures=%lu mismatches=%lu\n",
	       verified >> 20, ru.ru_minflt, ru.ru_majflt, ruc.ru_minflt, errors, child_failures,
	       atomic_load(&mismatches));
	unlink(path);
	return atomic_load(&mismatches) || errors || child_failures ? 1 : 0;
}
