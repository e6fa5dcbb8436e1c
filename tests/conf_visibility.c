/*
 * conf_visibility.c - GUARANTEES.md §1: nothing is visible before commit,
 * and readers that use the library see each commit whole.
 *
 * 1. Pending writes, growth and truncates reach no reader before oa_commit:
 *    not plain read()/fstat() of the file, not another handle in the same
 *    process (opened before or after the writes), not another process
 *    (plain or through the library).  After oa_commit all of it is visible
 *    to all of them, including handles that were already open.
 * 2. Torn reads: while a writer commits transactions that each stamp all of
 *    several ranges at once, reader threads and reader processes loop
 *    oa_pread over all the ranges in one call; every read must show a single
 *    transaction's stamp throughout, and no reader may go back in time.
 *    On the test's file system, and again on a tmpfs (root), where commits
 *    are fast enough to fall inside one read.
 *
 * SPDX-License-Identifier: MIT
 */
#include "testutil.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>

/* ---- 1. pending changes are invisible ------------------------------------ */

struct expect {
	const char *path;
	const unsigned char *buf;
	size_t n;
};

/* In another process: the file's bytes, plainly and through a handle. */
static int child_sees(void *arg)
{
	const struct expect *e = arg;
	oa_file *f;

	CHECK_FILE(e->path, e->buf, e->n, (off_t)e->n);
	f = tu_oa_open(e->path, O_RDONLY, 0);
	CHECK_OA_VIEW(f, e->buf, e->n);
	CHECK_OK(oa_close(f));
	return 0;
}

/* Everyone but W sees exactly BUF; R is an older handle. */
static void all_see(const char *path, oa_file *r, const unsigned char *buf,
		    size_t n)
{
	struct expect e = { path, buf, n };
	oa_file *g;

	CHECK_FILE(path, buf, n, (off_t)n);
	CHECK_OA_VIEW(r, buf, n);
	g = tu_oa_open(path, O_RDONLY, 0);
	CHECK_OA_VIEW(g, buf, n);
	CHECK_OK(oa_close(g));
	CHECK_CHILD_OK(tu_run_child(child_sees, &e));
}

static void test_invisible(int shrink)
{
	const char *path = tu_path("vis%d", shrink);
	const size_t base = 64 << 10;
	const size_t grown = base + 100000;
	unsigned char *old = tu_malloc(base), *neu = tu_zalloc(grown);
	size_t neu_n;
	oa_file *w, *r;

	tu_fill(old, base, 1, 0);
	tu_write_file(path, old, base, 0644);
	r = tu_oa_open(path, O_RDONLY, 0);        /* open before the writes */
	w = tu_oa_open(path, O_RDWR, 0);

	memcpy(neu, old, base);
	if (!shrink) {
		/* Writes in three places and growth with a hole. */
		tu_fill(neu + 0, 4096, 2, 0);
		tu_fill(neu + 30000, 5000, 2, 30000);
		tu_fill(neu + base + 50000, grown - base - 50000, 2,
			base + 50000);
		tu_oa_pwrite(w, neu, 4096, 0);
		tu_oa_pwrite(w, neu + 30000, 5000, 30000);
		tu_oa_pwrite(w, neu + base + 50000, grown - base - 50000,
			     (off_t)(base + 50000));
		neu_n = grown;
	} else {
		/* A write, then a shrink below the old size. */
		tu_fill(neu + 100, 200, 3, 100);
		tu_oa_pwrite(w, neu + 100, 200, 100);
		CHECK_OK(oa_ftruncate(w, 20000));
		neu_n = 20000;
	}
	CHECK_OA_VIEW(w, neu, neu_n);              /* the writer sees them */

	all_see(path, r, old, base);               /* nobody else does */
	/* Still nothing after fsync/sync by others. */
	{
		int fd = open(path, O_RDWR);

		CHECK(fd >= 0);
		CHECK_OK(fsync(fd));
		close(fd);
		sync();
	}
	all_see(path, r, old, base);

	CHECK_OK(oa_commit(w));
	all_see(path, r, neu, neu_n);              /* now everybody does */
	CHECK_OA_VIEW(w, neu, neu_n);
	CHECK_OK(oa_close(w));
	all_see(path, r, neu, neu_n);
	CHECK_OK(oa_close(r));
	free(old);
	free(neu);
}

/* A new file (O_CREAT) that only has pending data is empty to others. */
static void test_new_file(void)
{
	const char *path = tu_path("newfile");
	unsigned char b[5000];
	oa_file *w, *r;

	w = tu_oa_open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
	tu_fill(b, sizeof(b), 4, 0);
	tu_oa_pwrite(w, b, sizeof(b), 0);
	CHECK_EQ(tu_file_size(path), 0);
	r = tu_oa_open(path, O_RDONLY, 0);
	all_see(path, r, b, 0);
	CHECK_OK(oa_commit(w));
	all_see(path, r, b, sizeof(b));
	CHECK_OK(oa_close(w));
	CHECK_OK(oa_close(r));
}

/* ---- 2. no torn reads ------------------------------------------------------ */

#define NRANGES    8
#define RANGE_LEN  4096
#define RANGE_GAP  (64 << 10)
#define FILE_LEN   (NRANGES * RANGE_GAP)
#define NTHREADS   2
#define NPROCS     2
#define NREADERS   (NTHREADS + NPROCS)
#define STAMP(k)   (0x5354414d00000000ull | (uint64_t)(k))

struct shared {
	volatile int stop;
	volatile int started[NREADERS];
	volatile uint64_t reads[NREADERS];
	volatile uint64_t distinct[NREADERS];   /* stamps seen */
	volatile int failed;
	char why[256];
};

static struct shared *sh;
static const char *torn_path;

/* One read over ranges [FIRST, LAST]: all must carry one stamp. Returns it. */
static uint64_t read_ranges(oa_file *f, unsigned char *buf, int first,
			    int last, int id)
{
	size_t off = (size_t)first * RANGE_GAP;
	size_t len = (size_t)(last - first) * RANGE_GAP + RANGE_LEN;
	uint64_t stamp;
	int i;

	tu_oa_pread(f, buf, len, (off_t)off);
	stamp = tu_get_stamp(buf);
	for (i = 0; i <= last - first; i++) {
		const unsigned char *p = buf + (size_t)i * RANGE_GAP;

		if (!tu_is_stamp(p, RANGE_LEN, stamp)) {
			snprintf(sh->why, sizeof(sh->why),
				 "reader %d: torn read: range %d has stamp "
				 "%#llx, range %d has %#llx", id, first,
				 (unsigned long long)stamp, first + i,
				 (unsigned long long)tu_get_stamp(p));
			sh->failed = 1;
			return stamp;
		}
		/* The ground between the ranges is never written. */
		if (i < last - first &&
		    !tu_is_stamp(p + RANGE_LEN, RANGE_GAP - RANGE_LEN, STAMP(0))) {
			snprintf(sh->why, sizeof(sh->why),
				 "reader %d: bytes between ranges changed", id);
			sh->failed = 1;
			return stamp;
		}
	}
	return stamp;
}

static void reader_loop(int id)
{
	unsigned char *buf = tu_malloc(FILE_LEN);
	uint64_t last = STAMP(0), rs = 0x9e3779b9u + (uint64_t)id;
	oa_file *f = tu_oa_open(torn_path, O_RDONLY, 0);

	sh->started[id] = 1;
	while (!sh->stop && !sh->failed) {
		int first = 0, lastr = NRANGES - 1;
		uint64_t s;

		/* Mostly all ranges in one read, sometimes a slice. */
		if (tu_rand(&rs) % 3 == 0) {
			first = (int)(tu_rand(&rs) % NRANGES);
			lastr = first + (int)(tu_rand(&rs) % (NRANGES - first));
		}
		s = read_ranges(f, buf, first, lastr, id);
		if (sh->failed)
			break;
		if (s < last) {
			snprintf(sh->why, sizeof(sh->why),
				 "reader %d went back in time: saw %#llx "
				 "after %#llx", id, (unsigned long long)s,
				 (unsigned long long)last);
			sh->failed = 1;
			break;
		}
		if (s != last)
			sh->distinct[id]++;
		last = s;
		sh->reads[id]++;
	}
	CHECK_OK(oa_close(f));
	free(buf);
}

static void *reader_thread(void *arg)
{
	reader_loop((int)(intptr_t)arg);
	return NULL;
}

static pid_t g_parent;

static int reader_proc(void *arg)
{
	tu_die_with_parent(g_parent);
	reader_loop((int)(intptr_t)arg);
	return 0;
}

static void test_torn_reads(const char *path)
{
	unsigned char *buf = tu_malloc(FILE_LEN);
	pthread_t th[NTHREADS];
	pid_t pid[NPROCS];
	uint64_t k = 0, total = 0, distinct = 0;
	double t0;
	oa_file *w;
	int i;

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED);
	memset(sh, 0, sizeof(*sh));
	torn_path = path;
	tu_fill_stamp(buf, FILE_LEN, STAMP(0));
	tu_write_file(torn_path, buf, FILE_LEN, 0644);

	/* The processes first, then the threads (tu_fork's rule). */
	g_parent = getpid();
	for (i = 0; i < NPROCS; i++)
		pid[i] = tu_fork(reader_proc, (void *)(intptr_t)(NTHREADS + i));
	for (i = 0; i < NTHREADS; i++)
		CHECK_OK(pthread_create(&th[i], NULL, reader_thread,
					(void *)(intptr_t)i));
	for (i = 0; i < NREADERS; i++)
		while (!sh->started[i] && !sh->failed)
			usleep(1000);

	w = tu_oa_open(torn_path, O_RDWR, 0);
	t0 = tu_now();
	while (!sh->failed && (tu_now() - t0 < 4.0 || k < 100) && k < 100000) {
		k++;
		tu_fill_stamp(buf, RANGE_LEN, STAMP(k));
		/* Last range first: a reader racing the apply in order of the
		 * writes would see the mix. */
		for (i = NRANGES - 1; i >= 0; i--)
			tu_oa_pwrite(w, buf, RANGE_LEN,
				     (off_t)i * RANGE_GAP);
		CHECK_OK(oa_commit(w));
	}
	sh->stop = 1;
	for (i = 0; i < NTHREADS; i++)
		CHECK_OK(pthread_join(th[i], NULL));
	for (i = 0; i < NPROCS; i++)
		CHECK_CHILD_OK(tu_wait(pid[i]));
	CHECK_OK(oa_close(w));
	CHECKF(!sh->failed, "%s", sh->why);

	for (i = 0; i < NREADERS; i++) {
		total += sh->reads[i];
		distinct += sh->distinct[i];
		CHECKF(sh->reads[i] > 0, "reader %d never read", i);
	}
	tu_note("%llu commits, %llu reads, %llu changes of stamp seen",
		(unsigned long long)k, (unsigned long long)total,
		(unsigned long long)distinct);
	/* The readers really raced the commits. */
	CHECKF(distinct >= 2, "readers saw only %llu changes in %llu commits",
	       (unsigned long long)distinct, (unsigned long long)k);

	/* And the final file is the last transaction. */
	{
		size_t n;
		unsigned char *got = tu_read_file(torn_path, &n);

		CHECK_EQ(n, FILE_LEN);
		for (i = 0; i < NRANGES; i++)
			CHECK(tu_is_stamp(got + (size_t)i * RANGE_GAP, RANGE_LEN,
					  STAMP(k)));
		free(got);
	}
	munmap(sh, sizeof(*sh));
	free(buf);
}

int main(void)
{
	tu_alarm(240);
	test_invisible(0);
	test_invisible(1);
	test_new_file();
	test_torn_reads(tu_path("torn"));
	/* Again on a tmpfs, where a commit's flush takes no time: a whole
	 * commit, its apply included, can fall inside one read, so a reader
	 * that reads without the APPLY lock (FORMAT.md, I17) must notice the
	 * apply generation move, or it shows the mix.  On a disk the flush
	 * alone outlasts a read, and the window is rarely hit. */
	const char *mnt = tu_tmpfs("vis-tmpfs", "8m");
	if (mnt) {
		/* A tmpfs has the journal only (fsmatrix forces the other
		 * methods on the file systems that have them). */
		const char *m = getenv("OATOMIC_METHOD");
		char *was = m ? strdup(m) : NULL;
		char p[4096];
		setenv("OATOMIC_METHOD", "journal", 1);
		snprintf(p, sizeof(p), "%s/torn", mnt);
		test_torn_reads(p);
		if (was)
			setenv("OATOMIC_METHOD", was, 1);
		else
			unsetenv("OATOMIC_METHOD");
		free(was);
		tu_tmpfs_done(mnt);
	}
	return 0;
}
