/*
 * conf_mmap.c - GUARANTEES.md §1-3 for stores through oa_mmap.
 *
 *  1. Stores are pending: no other handle, process or plain reader sees them
 *     before oa_commit; after it everyone does; the handle's oa_pread sees
 *     them before.
 *  2. oa_abort and oa_close discard them; the mapping shows the committed
 *     file again.
 *  3. A commit carries exactly the bytes stored: another handle's commit to
 *     the same page, after the store, is kept.
 *  4. Coherence within the handle: the mapping shows the handle's pending
 *     writes (made before or after mapping), two mappings of a range are one
 *     memory, oa_munmap keeps the stores pending, truncation and growth
 *     read as the file would.
 *  5. Threads storing while the handle's thread commits lose nothing.
 *  6. Errors; a program's own SIGSEGV handler still gets its faults, and
 *     one installed after the library's stays in front without a loop; a
 *     store into a read-only mapping still faults, also once the
 *     read-write mappings over it are unmapped; fork, also after a
 *     transaction that spilled.
 *
 * SPDX-License-Identifier: MIT
 */
#include "testutil.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define PG 4096
#define FSZ (64 * 1024)

static unsigned char *pattern(size_t n, uint64_t seed)
{
	unsigned char *b = tu_malloc(n);
	tu_fill(b, n, seed, 0);
	return b;
}

struct expect {
	const char *path;
	const unsigned char *buf;
	size_t n;
};

static int child_sees(void *arg)
{
	const struct expect *e = arg;
	CHECK_FILE(e->path, e->buf, e->n, (off_t)e->n);
	oa_file *f = tu_oa_open(e->path, O_RDONLY, 0);
	CHECK_OA_VIEW(f, e->buf, e->n);
	/* a mapping of another process shows the committed file */
	unsigned char *m = oa_mmap(f, e->n, PROT_READ, 0);
	CHECK(m != NULL);
	CHECK_MEM(m, e->buf, e->n);
	CHECK_OK(oa_munmap(f, m, e->n));
	CHECK_OK(oa_close(f));
	return 0;
}

static void others_see(const char *path, const unsigned char *buf, size_t n)
{
	struct expect e = { path, buf, n };
	CHECK_FILE(path, buf, n, (off_t)n);
	oa_file *g = tu_oa_open(path, O_RDONLY, 0);
	CHECK_OA_VIEW(g, buf, n);
	CHECK_OK(oa_close(g));
	CHECK_CHILD_OK(tu_run_child(child_sees, &e));
}

/* ---- 1, 2 ---- */

static void test_pending_commit_abort(void)
{
	const char *path = tu_path("basic");
	unsigned char *old = pattern(FSZ, 1), *neu = pattern(FSZ, 1);
	unsigned char got[FSZ];
	tu_write_file(path, old, FSZ, 0644);

	oa_file *w = tu_oa_open(path, O_RDWR, 0);
	oa_file *r = tu_oa_open(path, O_RDONLY, 0);   /* opened before */
	unsigned char *m = oa_mmap(w, FSZ, PROT_READ | PROT_WRITE, 0);
	CHECK(m != NULL);
	CHECK_MEM(m, old, FSZ);
	/* stores in three pages, one spanning a page boundary */
	memset(m + 10, 0xA1, 100);
	memset(m + 5 * PG - 7, 0xB2, 20);
	m[15 * PG + 4095] = 0xC3;
	memset(neu + 10, 0xA1, 100);
	memset(neu + 5 * PG - 7, 0xB2, 20);
	neu[15 * PG + 4095] = 0xC3;
	CHECK_MEM(m, neu, FSZ);
	/* pending: nobody else sees them; the handle's reads do */
	others_see(path, old, FSZ);
	CHECK_OA_VIEW(r, old, FSZ);
	tu_oa_pread(w, got, FSZ, 0);
	CHECK_MEM(got, neu, FSZ);
	/* a store after the read is pending too */
	m[7] = 0xD4;
	neu[7] = 0xD4;
	CHECK_OK(oa_commit(w));
	others_see(path, neu, FSZ);
	CHECK_OA_VIEW(r, neu, FSZ);
	CHECK_MEM(m, neu, FSZ);

	/* abort: the stores go, the mapping shows the file */
	memset(m + 3 * PG, 0xEE, 3 * PG);
	tu_oa_pwrite(w, "written", 7, 100);
	CHECK_OK(oa_abort(w));
	CHECK_MEM(m, neu, FSZ);
	others_see(path, neu, FSZ);

	/* a second transaction through the same pages */
	memset(m + 3 * PG, 0x11, 10);
	memset(neu + 3 * PG, 0x11, 10);
	CHECK_OK(oa_commit(w));
	others_see(path, neu, FSZ);

	/* close discards */
	memset(m + 8 * PG, 0x99, PG);
	CHECK_OK(oa_close(w));
	others_see(path, neu, FSZ);
	CHECK_OK(oa_close(r));
	free(old);
	free(neu);
}

/* ---- 3 ---- */

static void test_byte_exact(void)
{
	const char *path = tu_path("exact");
	unsigned char *want = pattern(FSZ, 2);
	tu_write_file(path, want, FSZ, 0644);

	oa_file *w = tu_oa_open(path, O_RDWR, 0);
	unsigned char *m = oa_mmap(w, FSZ, PROT_READ | PROT_WRITE, 0);
	CHECK(m != NULL);
	m[2 * PG + 10] = 0x5A;           /* the page is copied here */
	want[2 * PG + 10] = 0x5A;
	/* another handle commits to the same page afterwards */
	tu_oa_update(path, "other!", 6, 2 * PG + 100);
	memcpy(want + 2 * PG + 100, "other!", 6);
	/* and to a page this handle only reads */
	tu_oa_update(path, "third", 5, 9 * PG);
	memcpy(want + 9 * PG, "third", 5);
	CHECK_OK(oa_commit(w));
	others_see(path, want, FSZ);
	/* after the commit the mapping shows both */
	CHECK_MEM(m, want, FSZ);
	CHECK_OK(oa_close(w));
	free(want);
}

/* ---- 4 ---- */

static void test_coherence(void)
{
	const char *path = tu_path("coh");
	unsigned char *want = pattern(FSZ, 3);
	unsigned char got[FSZ];
	tu_write_file(path, want, FSZ, 0644);

	oa_file *w = tu_oa_open(path, O_RDWR, 0);
	/* pending before the mapping */
	tu_oa_pwrite(w, "before", 6, 4 * PG + 1);
	memcpy(want + 4 * PG + 1, "before", 6);
	unsigned char *m = oa_mmap(w, FSZ, PROT_READ | PROT_WRITE, 0);
	CHECK(m != NULL);
	CHECK_MEM(m, want, FSZ);
	/* a write after it, over a page stored to and one not */
	m[6 * PG] = 0x77;
	want[6 * PG] = 0x77;
	tu_oa_pwrite(w, "after", 5, 6 * PG + 2);
	memcpy(want + 6 * PG + 2, "after", 5);
	tu_oa_pwrite(w, "clean", 5, 7 * PG + 2);
	memcpy(want + 7 * PG + 2, "clean", 5);
	CHECK_MEM(m, want, FSZ);
	/* a store after the write wins over it */
	m[6 * PG + 3] = 'X';
	want[6 * PG + 3] = 'X';
	/* a second mapping of an overlapping range is the same memory */
	unsigned char *m2 = oa_mmap(w, 2 * PG, PROT_READ | PROT_WRITE, 6 * PG);
	CHECK(m2 == m + 6 * PG);
	m2[PG + 9] = 'Y';
	want[7 * PG + 9] = 'Y';
	CHECK(m[7 * PG + 9] == 'Y');
	CHECK_OK(oa_munmap(w, m2, 2 * PG));
	tu_oa_pread(w, got, FSZ, 0);
	CHECK_MEM(got, want, FSZ);
	/* unmapping keeps the stores pending; mapping again shows them */
	m[12 * PG] = 'Z';
	want[12 * PG] = 'Z';
	CHECK_OK(oa_munmap(w, m, FSZ));
	m = oa_mmap(w, FSZ, PROT_READ | PROT_WRITE, 0);
	CHECK(m != NULL);
	CHECK_MEM(m, want, FSZ);
	unsigned char *old = pattern(FSZ, 3);
	others_see(path, old, FSZ);
	free(old);
	CHECK_OK(oa_commit(w));
	others_see(path, want, FSZ);
	CHECK_OK(oa_close(w));
	free(want);
}

static void test_size(void)
{
	const char *path = tu_path("size");
	unsigned char *base = pattern(FSZ, 4);
	unsigned char *want = tu_zalloc(2 * FSZ);
	struct stat st;
	tu_write_file(path, base, FSZ, 0644);

	oa_file *w = tu_oa_open(path, O_RDWR, 0);
	/* the window may reach beyond the end, as mmap(2)'s may */
	unsigned char *m = oa_mmap(w, 2 * FSZ, PROT_READ | PROT_WRITE, 0);
	CHECK(m != NULL);
	/* shrink: bytes past the new end read as zeros */
	m[3 * PG] = 0x42;                /* stored, then cut off */
	CHECK_OK(oa_ftruncate(w, 10000));
	for (size_t i = 10000; i < FSZ; i++)
		CHECKF(m[i] == 0, "byte %zu is %d after truncate", i, m[i]);
	/* grow with a write beyond the committed end */
	tu_oa_pwrite(w, "grown", 5, FSZ + 100);
	CHECK(!memcmp(m + FSZ + 100, "grown", 5));
	/* a store in the grown part, within the new end, is pending */
	m[FSZ + 50] = 0x33;
	/* a store beyond the pending end is not part of the file */
	m[FSZ + 200] = 0x44;
	CHECK_OK(oa_fstat(w, &st));
	CHECK_EQ(st.st_size, FSZ + 105);
	CHECK_OK(oa_commit(w));
	memcpy(want, base, 10000);
	want[FSZ + 50] = 0x33;
	memcpy(want + FSZ + 100, "grown", 5);
	others_see(path, want, FSZ + 105);
	CHECK_MEM(m, want, FSZ + 105);
	CHECK_OK(oa_close(w));
	free(base);
	free(want);
}

/* A mapping made (or made again) after a pending shrink: the bytes the
 * shrink cut off read as zeros, beyond the pending end too, and a store
 * of the value they had before the shrink is a change. */
static void test_map_after_shrink(void)
{
	const char *path = tu_path("shrunk");
	unsigned char *want = tu_zalloc(2 * PG), got[2 * PG];
	memset(want, 'a', 2 * PG);
	tu_write_file(path, want, 2 * PG, 0644);

	oa_file *w = tu_oa_open(path, O_RDWR, 0);
	CHECK_OK(oa_ftruncate(w, 100));
	unsigned char *m = oa_mmap(w, 2 * PG, PROT_READ | PROT_WRITE, 0);
	CHECK(m != NULL);
	for (size_t i = 100; i < 2 * PG; i++)
		CHECKF(m[i] == 0, "byte %zu is %d after the shrink", i, m[i]);
	/* grow again: the bytes between read as zeros, and a store of the
	 * old value there is part of the commit */
	tu_oa_pwrite(w, "w", 1, 8000);
	memset(want + 100, 0, 2 * PG - 100);
	want[8000] = 'w';
	CHECK_MEM(m, want, 8001);
	m[5000] = 'a';
	m[5001] = 'x';
	want[5000] = 'a';
	want[5001] = 'x';
	tu_oa_pread(w, got, 8001, 0);
	CHECK_MEM(got, want, 8001);
	CHECK_OK(oa_commit(w));
	CHECK_FILE(path, want, 8001, (off_t)8001);

	/* shrunk under the mapping, then unmapped and mapped again */
	CHECK_OK(oa_ftruncate(w, 50));
	CHECK_OK(oa_munmap(w, m, 2 * PG));
	m = oa_mmap(w, 2 * PG, PROT_READ | PROT_WRITE, 0);
	CHECK(m != NULL);
	for (size_t i = 50; i < 2 * PG; i++)
		CHECKF(m[i] == 0, "byte %zu is %d after the shrink and a new "
		       "mapping", i, m[i]);
	tu_oa_pwrite(w, "v", 1, 6000);
	m[5000] = 'a';
	memset(want + 50, 0, 2 * PG - 50);
	want[5000] = 'a';
	want[6000] = 'v';
	CHECK_OK(oa_commit(w));
	CHECK_FILE(path, want, 6001, (off_t)6001);
	CHECK_MEM(m, want, 6001);
	CHECK_OK(oa_close(w));
	free(want);
}

/* Mapped again after oa_munmap, with pending bytes beyond the committed
 * end: the pages there are memory again, as at the first mapping (a file
 * page beyond the end would raise SIGBUS, in the library or the program).
 * In a child: a SIGBUS is a failure, not the end of the test. */
static int child_remap_grown(void *arg)
{
	const char *path = arg;
	unsigned char *want = tu_zalloc(3 * PG);
	memset(want, '.', PG);
	tu_write_file(path, want, PG, 0644);

	oa_file *w = tu_oa_open(path, O_RDWR, 0);
	unsigned char *m = oa_mmap(w, 3 * PG, PROT_READ | PROT_WRITE, 0);
	CHECK(m != NULL);
	tu_oa_pwrite(w, "x", 1, 2 * PG);   /* pending, two pages on */
	want[2 * PG] = 'x';
	CHECK_MEM(m, want, 2 * PG + 1);
	CHECK_OK(oa_munmap(w, m, 3 * PG));
	/* the first of the two only: nothing pending shown in it */
	m = oa_mmap(w, 2 * PG, PROT_READ | PROT_WRITE, 0);
	CHECK(m != NULL);
	CHECK_MEM(m, want, 2 * PG);
	m[PG + 5] = 'y';
	want[PG + 5] = 'y';
	CHECK_OK(oa_munmap(w, m, 2 * PG));
	/* all three */
	m = oa_mmap(w, 3 * PG, PROT_READ | PROT_WRITE, 0);
	CHECK(m != NULL);
	CHECK_MEM(m, want, 2 * PG + 1);
	m[2 * PG - 1] = 'z';
	m[2 * PG] = 'Z';                   /* over the pending write */
	want[2 * PG - 1] = 'z';
	want[2 * PG] = 'Z';
	CHECK_OK(oa_commit(w));
	CHECK_FILE(path, want, 2 * PG + 1, (off_t)(2 * PG + 1));
	CHECK_MEM(m, want, 2 * PG + 1);
	CHECK_OK(oa_close(w));
	free(want);
	return 0;
}

static void test_remap_grown(void)
{
	CHECK_CHILD_OK(tu_run_child(child_remap_grown,
				    (void *)tu_path("regrown")));
}

/* ---- 5 ---- */

#define NTHR 4
#define ROUNDS 200
struct thr {
	unsigned char *m;
	int id;
};

static void *storer(void *arg)
{
	struct thr *t = arg;
	/* thread I owns bytes I, I + NTHR, ... of pages 0..15: each round
	 * writes its round number there */
	for (int r = 1; r <= ROUNDS; r++)
		for (int p = 0; p < 16; p++)
			t->m[p * PG + t->id * 8 + (r % 8) * 64] = (unsigned char)r;
	return NULL;
}

static void test_threads(void)
{
	const char *path = tu_path("thr");
	unsigned char *zero = tu_zalloc(FSZ);
	tu_write_file(path, zero, FSZ, 0644);
	oa_file *w = tu_oa_open(path, O_RDWR, 0);
	unsigned char *m = oa_mmap(w, FSZ, PROT_READ | PROT_WRITE, 0);
	CHECK(m != NULL);
	pthread_t th[NTHR];
	struct thr t[NTHR];
	for (int i = 0; i < NTHR; i++) {
		t[i].m = m;
		t[i].id = i;
		CHECK_OK(pthread_create(&th[i], NULL, storer, &t[i]));
	}
	/* commits while the threads store */
	for (int i = 0; i < 20; i++)
		CHECK_OK(oa_commit(w));
	for (int i = 0; i < NTHR; i++)
		CHECK_OK(pthread_join(th[i], NULL));
	CHECK_OK(oa_commit(w));
	unsigned char *want = tu_zalloc(FSZ);
	for (int i = 0; i < NTHR; i++)
		for (int r = ROUNDS - 7; r <= ROUNDS; r++)
			for (int p = 0; p < 16; p++)
				want[p * PG + i * 8 + (r % 8) * 64] =
					(unsigned char)r;
	others_see(path, want, FSZ);
	CHECK_OK(oa_close(w));
	free(zero);
	free(want);
}

/* many pages: the commit's read-only span covers pages that other
 * threads capture meanwhile */
#define BIGPG 1024
struct thr2 {
	unsigned char *m;
	int id;
	volatile int *stop;
};

static void *storer2(void *arg)
{
	struct thr2 *t = arg;
	for (int r = 1; r <= 30; r++)
		for (int p = 0; p < BIGPG; p++)
			t->m[p * PG + t->id * 8 + (r % 8) * 64] = (unsigned char)r;
	return NULL;
}

static void test_threads_many_pages(void)
{
	const char *path = tu_path("thr2");
	unsigned char *zero = tu_zalloc(BIGPG * PG);
	tu_write_file(path, zero, BIGPG * PG, 0644);
	oa_file *w = tu_oa_open(path, O_RDWR, 0);
	unsigned char *m = oa_mmap(w, BIGPG * PG, PROT_READ | PROT_WRITE, 0);
	CHECK(m != NULL);
	pthread_t th[NTHR];
	struct thr2 t[NTHR];
	for (int i = 0; i < NTHR; i++) {
		t[i].m = m;
		t[i].id = i;
		CHECK_OK(pthread_create(&th[i], NULL, storer2, &t[i]));
	}
	for (int i = 0; i < 30; i++) {
		CHECK_OK(oa_commit(w));
		unsigned char got[PG];
		tu_oa_pread(w, got, PG, (off_t)(i * 7 % BIGPG) * PG);
	}
	for (int i = 0; i < NTHR; i++)
		CHECK_OK(pthread_join(th[i], NULL));
	CHECK_OK(oa_commit(w));
	unsigned char *want = tu_zalloc(BIGPG * PG);
	for (int i = 0; i < NTHR; i++)
		for (int r = 23; r <= 30; r++)
			for (int p = 0; p < BIGPG; p++)
				want[p * PG + i * 8 + (r % 8) * 64] =
					(unsigned char)r;
	CHECK_FILE(path, want, BIGPG * PG, BIGPG * PG);
	CHECK_MEM(m, want, BIGPG * PG);
	CHECK_OK(oa_close(w));
	free(zero);
	free(want);
}

/* ---- 6 ---- */

static sigjmp_buf jb;
static volatile int own_faults;
static void own_handler(int sig, siginfo_t *si, void *uc)
{
	own_faults++;
	siglongjmp(jb, 1);
}

static int child_ro_store(void *arg)
{
	/* the default action behind ours (not a sanitizer's report) */
	signal(SIGSEGV, SIG_DFL);
	oa_file *ro = tu_oa_open((const char *)arg, O_RDONLY, 0);
	unsigned char *m = oa_mmap(ro, FSZ, PROT_READ, 0);
	CHECK(m != NULL);
	m[0] = 1;   /* must die by SIGSEGV */
	return 3;
}

static int child_forked(void *arg)
{
	oa_file *w = arg;
	/* the inherited handle may only be closed; its window goes */
	CHECK_ERR(oa_commit(w), EBADF);
	CHECK_OK(oa_close(w));
	return 0;
}

static void test_errors_signals_fork(void)
{
	const char *path = tu_path("err");
	unsigned char *base = pattern(FSZ, 5);
	tu_write_file(path, base, FSZ, 0644);
	oa_file *wo = tu_oa_open(path, O_WRONLY, 0);
	oa_file *ro = tu_oa_open(path, O_RDONLY, 0);
	oa_file *w = tu_oa_open(path, O_RDWR, 0);
	CHECK_NULL_ERR(oa_mmap(wo, PG, PROT_READ, 0), EACCES);
	CHECK_NULL_ERR(oa_mmap(ro, PG, PROT_READ | PROT_WRITE, 0), EACCES);
	CHECK_NULL_ERR(oa_mmap(w, PG, PROT_READ, 100), EINVAL);
	CHECK_NULL_ERR(oa_mmap(w, 0, PROT_READ, 0), EINVAL);
	CHECK_NULL_ERR(oa_mmap(w, PG, PROT_READ | PROT_EXEC, 0), EINVAL);
	CHECK_NULL_ERR(oa_mmap(w, PG, PROT_READ, -PG), EINVAL);
	CHECK_NULL_ERR(oa_mmap(NULL, PG, PROT_READ, 0), EBADF);
	char local[16];
	CHECK_ERR(oa_munmap(w, local, 16), EINVAL);

	/* a read-only mapping: stores fault as the program's own */
	unsigned char *r = oa_mmap(ro, FSZ, PROT_READ, 0);
	CHECK(r != NULL);
	CHECK_MEM(r, base, FSZ);
	int st = tu_wait(tu_fork(child_ro_store, (void *)path));
	CHECKF(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "child: %s",
	       tu_status_str(st));

	unsigned char *m = oa_mmap(w, FSZ, PROT_READ | PROT_WRITE, 0);
	CHECK(m != NULL);

	/* fork: the child has the window and may only close */
	m[0] ^= 0xff;
	CHECK_CHILD_OK(tu_run_child(child_forked, w));
	CHECK_OK(oa_commit(w));
	base[0] ^= 0xff;
	others_see(path, base, FSZ);
	CHECK_OK(oa_close(w));
	CHECK_OK(oa_close(ro));
	CHECK_OK(oa_close(wo));
	free(base);
}

/* A handler the program installed before its first oa_mmap gets the faults
 * that are not the library's.  (Run first, so that the child's first
 * mapping is the process's: one installed after the library's must chain
 * to it, and the library leaves it in front - test_chain_after.) */
static int child_chain(void *arg)
{
	const char *path = arg;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = own_handler;
	sa.sa_flags = SA_SIGINFO;
	CHECK_OK(sigaction(SIGSEGV, &sa, NULL));
	oa_file *w = tu_oa_open(path, O_RDWR, 0);
	unsigned char *m = oa_mmap(w, FSZ, PROT_READ | PROT_WRITE, 0);
	CHECK(m != NULL);
	m[5] = 1;                        /* the library's */
	char *own = mmap(NULL, PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	own_faults = 0;
	if (sigsetjmp(jb, 1) == 0)
		own[0] = 1;                  /* the program's */
	CHECK_EQ(own_faults, 1);
	m[PG + 5] = 2;
	CHECK_OK(oa_commit(w));
	CHECK_OK(oa_close(w));
	return 0;
}

static void test_chain(void)
{
	const char *path = tu_path("chain");
	unsigned char *base = tu_zalloc(FSZ);
	tu_write_file(path, base, FSZ, 0644);
	CHECK_CHILD_OK(tu_run_child(child_chain, (void *)path));
	base[5] = 1;
	base[PG + 5] = 2;
	others_see(path, base, FSZ);
	free(base);
}

/* Overlapping mappings, read-write and read-only: once the read-write ones
 * are unmapped, a page mapped read-only only still faults - right after
 * the unmapping, or after a commit (MODE 0, 1).  A range mapped both ways
 * and unmapped once stays writable. */
static int child_ro_overlap(void *arg)
{
	int mode = (int)(intptr_t)arg;
	const char *path = tu_path("overlap");
	signal(SIGSEGV, SIG_DFL);
	oa_file *w = tu_oa_open(path, O_RDWR, 0);
	unsigned char *m1 = oa_mmap(w, 12 * PG, PROT_READ | PROT_WRITE, 0);
	unsigned char *m2 = oa_mmap(w, 8 * PG, PROT_READ, 8 * PG);
	unsigned char *m3 = oa_mmap(w, 8 * PG, PROT_READ | PROT_WRITE, 4 * PG);
	CHECK(m1 != NULL && m2 == m1 + 8 * PG && m3 == m1 + 4 * PG);
	m1[9 * PG] = 'A';
	CHECK_OK(oa_munmap(w, m1, 12 * PG));
	m3[5 * PG + 1] = 'B';                /* page 9, still writable */
	CHECK_OK(oa_munmap(w, m3, 8 * PG));
	CHECK(m2[PG] == 'A' && m2[PG + 1] == 'B');
	/* the same range read-write and read-only, one unmapped: one of
	 * them is left, and the program may still store */
	unsigned char *a = oa_mmap(w, PG, PROT_READ | PROT_WRITE, 20 * PG);
	unsigned char *b = oa_mmap(w, PG, PROT_READ, 20 * PG);
	CHECK(a != NULL && b == a);
	CHECK_OK(oa_munmap(w, b, PG));
	a[0] = 'W';
	if (mode == 1) {
		CHECK_OK(oa_commit(w));
		CHECK(m2[PG] == 'A' && m2[PG + 1] == 'B');
	}
	m2[PG] = 'Z';                        /* must die by SIGSEGV */
	return 3;
}

static void test_ro_overlap(void)
{
	const char *path = tu_path("overlap");
	unsigned char *want = tu_malloc(24 * PG);
	for (int mode = 0; mode < 2; mode++) {
		memset(want, '.', 24 * PG);
		tu_write_file(path, want, 24 * PG, 0644);
		int st = tu_run_child(child_ro_overlap, (void *)(intptr_t)mode);
		CHECKF(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "child "
		       "(mode %d): %s", mode, tu_status_str(st));
		if (mode == 1) {
			want[9 * PG] = 'A';
			want[9 * PG + 1] = 'B';
			want[20 * PG] = 'W';
		}
		CHECK_FILE(path, want, 24 * PG, (off_t)(24 * PG));
	}
	free(want);
}

/* A handler the program installed after the library's, chaining to it as
 * oa_mmap(3) asks, stays in front when later handles map (each a new
 * window), and the chain ends: a fault nobody owns takes the default
 * action instead of going round the two handlers for ever. */
static struct sigaction after_prev;
static volatile int after_depth, after_calls;
static void after_handler(int sig, siginfo_t *si, void *uc)
{
	if (after_depth) {
		static const char msg[] = "the program's handler re-entered "
					  "through the chain: a loop\n";
		(void)!write(2, msg, sizeof(msg) - 1);
		_exit(5);
	}
	after_depth = 1;
	after_calls++;
	if (after_prev.sa_flags & SA_SIGINFO)
		after_prev.sa_sigaction(sig, si, uc);
	else if (after_prev.sa_handler == SIG_DFL)
		signal(sig, SIG_DFL);
	else if (after_prev.sa_handler != SIG_IGN)
		after_prev.sa_handler(sig);
	after_depth = 0;
}

static int child_chain_after(void *arg)
{
	const char *pa = tu_path("chain_a"), *pb = tu_path("chain_b");
	(void)arg;
	/* the default action behind ours (not a sanitizer's report) */
	signal(SIGSEGV, SIG_DFL);
	oa_file *a = tu_oa_open(pa, O_RDWR, 0);
	oa_file *b = tu_oa_open(pb, O_RDWR, 0);
	unsigned char *ma = oa_mmap(a, PG, PROT_READ | PROT_WRITE, 0);
	CHECK(ma != NULL);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = after_handler;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	CHECK_OK(sigaction(SIGSEGV, &sa, &after_prev));
	/* a second handle's first mapping: a new window */
	unsigned char *mb = oa_mmap(b, PG, PROT_READ | PROT_WRITE, 0);
	CHECK(mb != NULL);
	ma[0] = 'a';
	mb[0] = 'b';
	/* the program's handler is still in front: it got the stores'
	 * faults, and passed them on */
	CHECK(after_calls == 2);
	/* closed and opened again: another new window */
	CHECK_OK(oa_commit(b));
	CHECK_OK(oa_close(b));
	b = tu_oa_open(pb, O_RDWR, 0);
	mb = oa_mmap(b, PG, PROT_READ | PROT_WRITE, 0);
	CHECK(mb != NULL);
	mb[1] = 'B';
	CHECK(after_calls == 3);
	CHECK_OK(oa_commit(a));
	CHECK_OK(oa_commit(b));
	CHECK_FILE(pa, "a", 1, PG);
	CHECK_FILE(pb, "bB", 2, PG);
	/* a fault that is nobody's (the program's bug): the default action */
	volatile char *none = mmap(NULL, PG, PROT_NONE, MAP_PRIVATE |
				   MAP_ANONYMOUS, -1, 0);
	CHECK(none != MAP_FAILED);
	none[0] = 1;
	return 3;
}

static void test_chain_after(void)
{
	unsigned char *zero = tu_zalloc(PG);
	tu_write_file(tu_path("chain_a"), zero, PG, 0644);
	tu_write_file(tu_path("chain_b"), zero, PG, 0644);
	int st = tu_run_child(child_chain_after, NULL);
	CHECKF(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "child: %s",
	       tu_status_str(st));
	free(zero);
}

/* ---- 7: stores beyond the memory limit spill to disk ---- */

static long rss_anon_kib(void)
{
	FILE *fp = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;
	while (fp && fgets(line, sizeof(line), fp))
		if (sscanf(line, "RssAnon: %ld", &v) == 1)
			break;
	if (fp)
		fclose(fp);
	return v;
}

static void test_spill(void)
{
	const char *path = tu_path("spill");
	const size_t sz = 32 << 20, npg = sz / PG;
	unsigned char *want = tu_malloc(sz);
	tu_fill(want, sz, 7, 0);
	tu_write_file(path, want, sz, 0644);
	/* 1 MiB of memory for the stores of a transaction (read when the
	 * handle's window is made) */
	setenv("OATOMIC_MAP_MEM", "1048576", 1);
	oa_file *w = tu_oa_open(path, O_RDWR, 0);
	unsigned char *m = oa_mmap(w, sz, PROT_READ | PROT_WRITE, 0);
	unsetenv("OATOMIC_MAP_MEM");
	CHECK(m != NULL);
	for (int round = 0; round < 2; round++) {
		long rss0 = rss_anon_kib();
		/* a store in every page: 32 MiB of copies without spilling */
		for (size_t p = 0; p < npg; p++) {
			m[p * PG + (p * 7 + round) % PG] ^= 0x5a;
			want[p * PG + (p * 7 + round) % PG] ^= 0x5a;
		}
		long rss1 = rss_anon_kib();
		CHECKF(rss1 - rss0 < 8 * 1024, "anonymous memory grew by %ld KiB "
		       "for 32 MiB of stores with a 1 MiB limit", rss1 - rss0);
		/* spilled pages: reads see them, a write over one, another
		 * handle's commit to one */
		unsigned char got[PG];
		tu_oa_pread(w, got, PG, 5 * PG);
		CHECK_MEM(got, want + 5 * PG, PG);
		m[5 * PG + 1] = 0x11;        /* captured again after the read */
		want[5 * PG + 1] = 0x11;
		tu_oa_pwrite(w, "spilled", 7, 9 * PG + 100);
		memcpy(want + 9 * PG + 100, "spilled", 7);
		CHECK(!memcmp(m + 9 * PG + 100, "spilled", 7));
		tu_oa_update(path, "other", 5, 11 * PG + 2000);
		memcpy(want + 11 * PG + 2000, "other", 5);
		if (round == 0) {
			/* abort: the mapping shows the committed file */
			CHECK_OK(oa_abort(w));
			size_t cn;
			unsigned char *committed = tu_read_file(path, &cn);
			CHECK_EQ(cn, sz);
			CHECK_MEM(m, committed, sz);
			memcpy(want, committed, sz);
			free(committed);
			continue;
		}
		CHECK_OK(oa_commit(w));
	}
	CHECK_MEM(m, want, sz);
	CHECK_FILE(path, want, sz, (off_t)sz);
	CHECK_OK(oa_close(w));
	free(want);
}

/* fork after a transaction that spilled: the spill file stays open, and
 * the parent spills into it again after the fork.  A child storing to the
 * same pages never reaches it (nor the parent's mapping, nor the file). */
#define FSP 64
struct fork_spill {
	unsigned char *m;
	int go;
};

static int child_fork_spill(void *arg)
{
	struct fork_spill *fs = arg;
	char x;
	CHECK(read(fs->go, &x, 1) == 1);     /* the parent has spilled */
	for (int p = 0; p < FSP; p++)
		fs->m[p * PG] = 'C';
	/* its own copy, past its own limit: spilled or not, it shows */
	for (int p = 0; p < FSP; p++)
		CHECKF(fs->m[p * PG] == 'C', "child: page %d shows %c", p,
		       fs->m[p * PG]);
	return 0;
}

static void test_fork_spill(void)
{
	const char *path = tu_path("forkspill");
	unsigned char *want = tu_malloc(FSP * PG);
	memset(want, '.', FSP * PG);
	tu_write_file(path, want, FSP * PG, 0644);
	setenv("OATOMIC_MAP_MEM", "65536", 1);    /* 16 pages */
	oa_file *w = tu_oa_open(path, O_RDWR, 0);
	unsigned char *m = oa_mmap(w, FSP * PG, PROT_READ | PROT_WRITE, 0);
	unsetenv("OATOMIC_MAP_MEM");
	CHECK(m != NULL);
	/* a transaction that spills: the spill file is made, and kept */
	for (int p = 0; p < FSP; p++)
		m[p * PG] = '1';
	CHECK_OK(oa_commit(w));
	int go[2];
	CHECK_OK(pipe(go));
	struct fork_spill fs = { m, go[0] };
	pid_t c = tu_fork(child_fork_spill, &fs);
	/* the parent's stores spill into the file after the fork ... */
	for (int p = 0; p < FSP; p++) {
		m[p * PG] = 'P';
		want[p * PG] = 'P';
	}
	/* ... then the child stores to the same pages */
	CHECK(write(go[1], "x", 1) == 1);
	CHECK_CHILD_OK(tu_wait(c));
	close(go[0]);
	close(go[1]);
	for (int p = 0; p < FSP; p++)
		CHECKF(m[p * PG] == 'P', "parent's page %d shows %c after the "
		       "child's stores", p, m[p * PG]);
	CHECK_OK(oa_commit(w));
	CHECK_FILE(path, want, FSP * PG, (off_t)(FSP * PG));
	CHECK_OK(oa_close(w));
	free(want);
}

/* ---- 7b: runs of pages captured together (many pages writable) ---- */

static void test_chunks(void)
{
	const char *path = tu_path("chunks");
	const size_t sz = 16 << 20, npg = sz / PG;
	unsigned char *want = pattern(sz, 9);
	tu_write_file(path, want, sz, 0644);
	/* runs of 16 pages past 64 captured, of 512 past 256 */
	setenv("OATOMIC_MAP_CHUNKS", "64,256", 1);
	oa_file *w = tu_oa_open(path, O_RDWR, 0);
	unsigned char *m = oa_mmap(w, sz, PROT_READ | PROT_WRITE, 0);
	unsetenv("OATOMIC_MAP_CHUNKS");
	CHECK(m != NULL);
	uint64_t r = 12345;
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 600; i++) {
			size_t p = (size_t)(tu_rand(&r) % npg);
			size_t o = (size_t)(tu_rand(&r) % 3900);
			m[p * PG + o] ^= 0xa5;
			want[p * PG + o] ^= 0xa5;
		}
		/* another handle commits into pages the runs took but the
		 * program never stored to: kept */
		for (int i = 0; i < 20; i++) {
			size_t p = (size_t)(tu_rand(&r) % npg);
			char b[16];
			snprintf(b, sizeof(b), "o%06u", (unsigned)i % 1000000u);
			tu_oa_update(path, b, 7, (off_t)(p * PG + 4000));
			/* (the program's stores lie below 3900) */
			memcpy(want + p * PG + 4000, b, 7);
		}
		CHECK_OK(oa_commit(w));
		CHECK_FILE(path, want, sz, (off_t)sz);
		CHECK_MEM(m, want, sz);
	}
	CHECK_OK(oa_close(w));
	free(want);
}

/* ---- 8: a full disk: the commit fails, nothing is lost ---- */

static void test_full(void)
{
	/* unmounted whatever happens (a failed check exits) */
	if (!tu_tmpfs("small", "1m"))
		return;
	const char *path = tu_path("small/f");
	const size_t sz = 512 << 10;
	unsigned char *old = pattern(sz, 8), *got = tu_malloc(sz);
	tu_write_file(path, old, sz, 0644);
	/* the journal whatever OATOMIC_METHOD forces elsewhere (tmpfs has
	 * none of the other methods) */
	struct oa_options jo = { .size = sizeof(jo), .method = OA_METHOD_JOURNAL };
	oa_file *w = oa_open_opts(path, O_RDWR, 0, &jo);
	CHECK(w != NULL);
	unsigned char *m = oa_mmap(w, sz, PROT_READ | PROT_WRITE, 0);
	CHECK(m != NULL);
	/* every byte changed: 512 KiB of changes do not fit beside the
	 * file on 1 MiB */
	for (size_t i = 0; i < sz; i++)
		m[i] = (unsigned char)~old[i];
	int r = oa_commit(w);
	CHECKF(r == -1 && (errno == ENOSPC || errno == EFBIG),
	       "commit on a full disk: %d (%s)", r, strerror(errno));
	/* the file is as it was; the stores are still pending and shown */
	CHECK_FILE(path, old, sz, (off_t)sz);
	tu_oa_pread(w, got, 100, 0);
	CHECK(got[0] == (unsigned char)~old[0]);
	CHECK(m[sz - 1] == (unsigned char)~old[sz - 1]);
	/* abort: the mapping shows the file.  (The journal keeps the space
	 * the aborted bytes took until the last close gives it back, as it
	 * does after a failed oa_pwrite: GUARANTEES.md §5.) */
	CHECK_OK(oa_abort(w));
	CHECK_MEM(m, old, sz);
	CHECK_OK(oa_close(w));
	w = oa_open_opts(path, O_RDWR, 0, &jo);
	CHECK(w != NULL);
	m = oa_mmap(w, sz, PROT_READ | PROT_WRITE, 0);
	CHECK(m != NULL);
	m[10] = 0x42;
	old[10] = 0x42;
	CHECK_OK(oa_commit(w));
	CHECK_FILE(path, old, sz, (off_t)sz);
	CHECK_OK(oa_close(w));
	free(old);
	free(got);
}

int main(void)
{
	tu_alarm(240);
	test_chain();   /* before this process maps anything */
	test_pending_commit_abort();
	test_byte_exact();
	test_coherence();
	test_size();
	test_map_after_shrink();
	test_remap_grown();
	test_threads();
	test_threads_many_pages();
	test_errors_signals_fork();
	test_chain_after();
	test_ro_overlap();
	test_spill();
	test_fork_spill();
	test_chunks();
	test_full();
	return 0;
}
