/*
 * conf_commit.c - GUARANTEES.md §3 and §4: commit makes a handle's changes
 * the file's contents as one unit; nothing anybody else does commits them.
 *
 *  - commit, close, reopen: the data is there (plain read and a new handle);
 *  - another process's fsync()/fdatasync()/syncfs()/sync(), its own commits
 *    and its oa_recover(), and another handle's commit in the same process,
 *    never make a handle's pending bytes reach the file; closing the pending
 *    handle without commit leaves exactly what the others committed;
 *  - commit with nothing pending returns 0 and changes nothing;
 *  - many commits in a row, small and large (the journal fills and is
 *    checkpointed many times), always leave the file equal to the model;
 *  - two handles committing overlapping ranges: the later commit wins, for
 *    writes and for truncates, in both orders;
 *  - 2000 scattered 8-byte writes in one transaction are read back, committed
 *    whole, and packed into one journal record (control file < 256 KiB).
 *
 * SPDX-License-Identifier: MIT
 */
#include "testutil.h"

#include <signal.h>
#include <sys/wait.h>

/* ---- commit, close, reopen ------------------------------------------------ */

static void test_reopen(void)
{
	const char *path = tu_path("reopen");
	unsigned char b[100000];
	oa_file *f;

	tu_fill(b, sizeof(b), 1, 0);
	f = tu_oa_open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
	tu_oa_pwrite(f, b, sizeof(b), 0);
	CHECK_OK(oa_commit(f));
	CHECK_FILE(path, b, sizeof(b), sizeof(b));   /* visible at once */
	CHECK_OK(oa_close(f));
	CHECK_FILE(path, b, sizeof(b), sizeof(b));
	f = tu_oa_open(path, O_RDONLY, 0);
	CHECK_OA_VIEW(f, b, sizeof(b));
	CHECK_OK(oa_close(f));
	/* Recovery of a cleanly closed file changes nothing. */
	CHECK_OK(oa_recover(path));
	CHECK_FILE(path, b, sizeof(b), sizeof(b));
}

/* ---- only the owner commits --------------------------------------------------- */

struct others {
	const char *path;
	unsigned char *mine;    /* what the other process commits */
	size_t off, n;
};

static int other_process(void *arg)
{
	const struct others *o = arg;
	int fd = open(o->path, O_RDWR);
	oa_file *g;

	CHECK(fd >= 0);
	CHECK_OK(fsync(fd));
	CHECK_OK(fdatasync(fd));
	CHECK_OK(syncfs(fd));
	sync();
	close(fd);
	/* Its own handle, with nothing pending, commits. */
	g = tu_oa_open(o->path, O_RDWR, 0);
	CHECK_OK(oa_commit(g));
	/* Then with its own change. */
	tu_oa_pwrite(g, o->mine, o->n, (off_t)o->off);
	CHECK_OK(oa_commit(g));
	CHECK_OK(oa_close(g));
	/* And runs recovery, as a boot script would. */
	CHECK_OK(oa_recover(o->path));
	sync();
	return 0;
}

static void test_only_owner(void)
{
	const char *path = tu_path("owner");
	const size_t base = 64 << 10;
	unsigned char *old = tu_malloc(base), *want = tu_zalloc(base);
	unsigned char *pend = tu_malloc(8192), *theirs = tu_malloc(4096);
	unsigned char *ours = tu_malloc(1000), *view = tu_zalloc(100000);
	struct others o = { path, theirs, 32768, 4096 };
	oa_file *a, *c;

	tu_fill(old, base, 1, 0);
	tu_write_file(path, old, base, 0644);

	/* A: pending writes over the start and growth to 100000. */
	a = tu_oa_open(path, O_RDWR, 0);
	tu_fill(pend, 8192, 2, 0);
	tu_oa_pwrite(a, pend, 8192, 0);
	CHECK_OK(oa_ftruncate(a, 100000));

	/* Another process syncs, commits its own range, recovers. */
	tu_fill(theirs, 4096, 3, 32768);
	CHECK_CHILD_OK(tu_run_child(other_process, &o));
	/* Another handle of this process commits too. */
	c = tu_oa_open(path, O_RDWR, 0);
	tu_fill(ours, 1000, 4, 50000);
	tu_oa_pwrite(c, ours, 1000, 50000);
	CHECK_OK(oa_commit(c));
	CHECK_OK(oa_close(c));

	memcpy(want, old, base);
	memcpy(want + 32768, theirs, 4096);
	memcpy(want + 50000, ours, 1000);
	CHECK_FILE(path, want, base, (off_t)base);

	/* A still sees its own changes over the new committed contents. */
	memcpy(view, want, base);
	memcpy(view, pend, 8192);
	CHECK_OA_VIEW(a, view, 100000);

	/* Closed without commit: the file is what the others committed, now,
	 * after recovery and through a new handle. */
	CHECK_OK(oa_close(a));
	CHECK_FILE(path, want, base, (off_t)base);
	CHECK_OK(oa_recover(path));
	CHECK_FILE(path, want, base, (off_t)base);
	a = tu_oa_open(path, O_RDONLY, 0);
	CHECK_OA_VIEW(a, want, base);
	CHECK_OK(oa_close(a));

	free(old);
	free(want);
	free(pend);
	free(theirs);
	free(ours);
	free(view);
}

/* A process that exits (or dies) with pending data does not commit it. */
static const char *exit_path;

static int exit_with_pending(void *arg)
{
	oa_file *f = tu_oa_open(exit_path, O_RDWR, 0);
	unsigned char b[4096];

	tu_fill(b, sizeof(b), 5, 0);
	tu_oa_pwrite(f, b, sizeof(b), 0);
	CHECK_OK(oa_ftruncate(f, 1));
	if (arg)
		raise(SIGKILL);
	exit(0);    /* atexit handlers, stdio: no oa_close */
}

static void test_exit_pending(void)
{
	unsigned char b[10000];
	oa_file *f;
	int st;

	exit_path = tu_path("exitpending");
	tu_fill(b, sizeof(b), 6, 0);
	tu_write_file(exit_path, b, sizeof(b), 0644);
	CHECK_CHILD_OK(tu_run_child(exit_with_pending, NULL));
	CHECK_FILE(exit_path, b, sizeof(b), sizeof(b));
	st = tu_run_child(exit_with_pending, (void *)1);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	CHECK_FILE(exit_path, b, sizeof(b), sizeof(b));
	CHECK_OK(oa_recover(exit_path));
	CHECK_FILE(exit_path, b, sizeof(b), sizeof(b));
	f = tu_oa_open(exit_path, O_RDWR, 0);
	CHECK_OA_VIEW(f, b, sizeof(b));
	CHECK_OK(oa_close(f));
	CHECK_FILE(exit_path, b, sizeof(b), sizeof(b));
}

/* ---- nothing pending ------------------------------------------------------------ */

static void test_empty_commit(void)
{
	const char *path = tu_path("empty");
	unsigned char b[5000];
	struct stat st0, st1;
	oa_file *f;

	tu_fill(b, sizeof(b), 7, 0);
	tu_write_file(path, b, sizeof(b), 0644);
	CHECK_OK(stat(path, &st0));
	usleep(20000);

	f = tu_oa_open(path, O_RDWR, 0);
	CHECK_OK(oa_commit(f));
	CHECK_OK(oa_commit(f));
	CHECK_OK(oa_close(f));
	f = tu_oa_open(path, O_RDONLY, 0);
	CHECK_OK(oa_commit(f));
	CHECK_OK(oa_close(f));
	CHECK_FILE(path, b, sizeof(b), sizeof(b));
	CHECK_OK(stat(path, &st1));
	CHECKF(st0.st_mtim.tv_sec == st1.st_mtim.tv_sec &&
	       st0.st_mtim.tv_nsec == st1.st_mtim.tv_nsec,
	       "an empty commit changed the file's mtime");

	/* After a real commit, a second one has nothing left to do. */
	f = tu_oa_open(path, O_RDWR, 0);
	tu_fill(b, 100, 8, 0);
	tu_oa_pwrite(f, b, 100, 0);
	CHECK_OK(oa_commit(f));
	CHECK_OK(oa_commit(f));
	CHECK_OA_VIEW(f, b, sizeof(b));
	CHECK_OK(oa_close(f));
	CHECK_FILE(path, b, sizeof(b), sizeof(b));
}

/* ---- many commits ---------------------------------------------------------------- */

static void test_many_commits(void)
{
	const char *path = tu_path("many");
	const size_t span = 1 << 20;
	unsigned char *model = tu_zalloc(span), *p = tu_malloc(65536);
	uint64_t rs = tu_seed();
	size_t size = 0;
	oa_file *f;
	int i;

	f = tu_oa_open(path, O_RDWR | O_CREAT, 0644);
	for (i = 0; i < 1700; i++) {
		/* 1500 small commits, then 200 of 64 KiB: the journal fills
		 * and is checkpointed many times. */
		size_t n = i < 1500 ? 1 + tu_rand(&rs) % 700 : 65536;
		size_t off = tu_rand(&rs) % (span - n);

		tu_fill(p, n, (uint64_t)i + 10, off);
		tu_oa_pwrite(f, p, n, (off_t)off);
		memcpy(model + off, p, n);
		if (off + n > size)
			size = off + n;
		if (i % 3 == 0) {
			/* Two writes in some transactions. */
			size_t o2 = tu_rand(&rs) % (span - 100);

			tu_fill(p, 100, (uint64_t)i + 5000, o2);
			tu_oa_pwrite(f, p, 100, (off_t)o2);
			memcpy(model + o2, p, 100);
			if (o2 + 100 > size)
				size = o2 + 100;
		}
		CHECK_OK(oa_commit(f));
		if (i % 250 == 0 || i == 1499) {
			CHECK_FILE(path, model, size, (off_t)size);
			CHECK_OA_VIEW(f, model, size);
		}
		if (i % 500 == 0) {
			/* Close and reopen now and then. */
			CHECK_OK(oa_close(f));
			f = tu_oa_open(path, O_RDWR, 0);
		}
	}
	CHECK_FILE(path, model, size, (off_t)size);
	CHECK_OK(oa_close(f));
	CHECK_FILE(path, model, size, (off_t)size);
	free(model);
	free(p);
}

/* ---- last commit wins ------------------------------------------------------------- */

static void test_last_wins(void)
{
	const char *path = tu_path("lastwins");
	unsigned char x[8192], y[8192], want[16384];
	oa_file *a, *b;

	memset(want, 0, sizeof(want));
	tu_write_file(path, want, 12288, 0644);
	a = tu_oa_open(path, O_RDWR, 0);
	b = tu_oa_open(path, O_RDWR, 0);

	/* A writes [0, 8K), B writes [4K, 12K); A commits first. */
	tu_fill(x, sizeof(x), 11, 0);
	tu_fill(y, sizeof(y), 12, 4096);
	tu_oa_pwrite(a, x, 8192, 0);
	tu_oa_pwrite(b, y, 8192, 4096);
	CHECK_OK(oa_commit(a));
	CHECK_OK(oa_commit(b));
	memcpy(want, x, 8192);
	memcpy(want + 4096, y, 8192);
	CHECK_FILE(path, want, 12288, 12288);
	CHECK_OA_VIEW(a, want, 12288);
	CHECK_OA_VIEW(b, want, 12288);

	/* Again, B commits first. */
	tu_fill(x, sizeof(x), 13, 0);
	tu_fill(y, sizeof(y), 14, 4096);
	tu_oa_pwrite(a, x, 8192, 0);
	tu_oa_pwrite(b, y, 8192, 4096);
	CHECK_OK(oa_commit(b));
	CHECK_OK(oa_commit(a));
	memcpy(want + 4096, y, 8192);
	memcpy(want, x, 8192);
	CHECK_FILE(path, want, 12288, 12288);

	/* A truncate committed after a write beyond it: the file is short. */
	CHECK_OK(oa_ftruncate(a, 2048));
	tu_fill(y, sizeof(y), 15, 4096);
	tu_oa_pwrite(b, y, 8192, 4096);
	CHECK_OK(oa_commit(b));
	CHECK_OK(oa_commit(a));
	CHECK_FILE(path, want, 2048, 2048);

	/* A write committed after a truncate: zeros between them. */
	CHECK_OK(oa_ftruncate(a, 1024));
	tu_oa_pwrite(b, y, 8192, 4096);
	CHECK_OK(oa_commit(a));
	CHECK_OK(oa_commit(b));
	memset(want + 1024, 0, sizeof(want) - 1024);
	memcpy(want + 4096, y, 8192);
	CHECK_FILE(path, want, 12288, 12288);

	CHECK_OK(oa_close(a));
	CHECK_OK(oa_close(b));
	CHECK_FILE(path, want, 12288, 12288);
}

/* ---- scattered small writes share a record --------------------------------- */

/* 2000 writes of 8 bytes, each in a page of its own, in one transaction:
 * read back before the commit, durable after it; and the journal holds
 * them packed (one record), not a 512-byte slot each (FORMAT.md,
 * "Records"): the control file, which holds journal 0, stays far below the
 * 1 MB that 2000 slots take. */
static void test_scattered(void)
{
	const char *path = tu_path("scattered");
	enum { N = 2000 };
	static unsigned char model[N * 4096];
	char b[16];
	struct stat st;
	oa_file *f;

	memset(model, 'x', sizeof(model));
	tu_write_file(path, model, sizeof(model), 0644);
	f = tu_oa_open(path, O_RDWR, 0);
	for (int i = 0; i < N; i++) {
		/* every seventh page backwards: no write continues another */
		off_t o = (off_t)((uint64_t)(N - 1 - (i * 7) % N) * 4096 + 17);
		snprintf(b, sizeof(b), "%07d", i % 10000000);   /* 8 bytes */
		tu_oa_pwrite(f, b, 8, o);
		memcpy(model + o, b, 8);
	}
	CHECK_OA_VIEW(f, model, sizeof(model));
	{	/* the file itself does not have them yet */
		size_t n;
		unsigned char *now = tu_read_file(path, &n);
		CHECK(n == sizeof(model) && memcmp(now, model, n) != 0);
		free(now);
	}
	CHECK_OK(oa_commit(f));
	CHECK(stat(tu_control_path(path), &st) == 0);
	CHECKF(st.st_size < 256 * 1024,
	       "2000 scattered 8-byte writes: control file %lld bytes "
	       "(a record each?)", (long long)st.st_size);
	CHECK_FILE(path, model, sizeof(model), sizeof(model));
	CHECK_OK(oa_close(f));
	CHECK_FILE(path, model, sizeof(model), sizeof(model));
}

/* Many small writes scattered over a 60 MiB file, in an order that is not
 * the file's: 30,720 ops in 3 MiB of packed journal records; committed,
 * then the committer killed after the first op is applied and recovery
 * replaying them.  Both must give every byte. */
enum { SB_PAGES = 15360, SB_LEN = 100 };

static void scattered_big_writes(oa_file *f, unsigned char *model)
{
	unsigned char b[SB_LEN];
	for (int i = 0; i < 2 * SB_PAGES; i++) {
		/* every seventh page backwards, twice per page */
		uint64_t pg = SB_PAGES - 1 - ((uint64_t)i * 7) % SB_PAGES;
		off_t o = (off_t)(pg * 4096 + (i < SB_PAGES ? 40 : 2000));
		tu_fill_stamp(b, sizeof(b), (uint64_t)i + 1);
		tu_oa_pwrite(f, b, sizeof(b), o);
		memcpy(model + o, b, sizeof(b));
	}
}

static int scattered_big_child(void *arg)
{
	static unsigned char model[SB_PAGES * 4096];
	oa_file *f = tu_oa_open(arg, O_RDWR, 0);
	scattered_big_writes(f, model);
	oa__set_killpoint(OA_KP_HALF_APPLIED);
	oa_commit(f);
	return 3;
}

static void test_scattered_big(void)
{
	const char *path = tu_path("scattered-big");
	static unsigned char model[SB_PAGES * 4096];
	oa_file *f;

	memset(model, 'x', sizeof(model));
	tu_write_file(path, model, sizeof(model), 0644);
	f = tu_oa_open(path, O_RDWR, 0);
	scattered_big_writes(f, model);
	CHECK_OK(oa_commit(f));
	CHECK_FILE(path, model, sizeof(model), sizeof(model));
	CHECK_OK(oa_close(f));
	CHECK_FILE(path, model, sizeof(model), sizeof(model));
	/* again from the committed file, killed half-way through the apply */
	tu_pin_journal();
	int st = tu_run_child(scattered_big_child, (void *)path);
	tu_unpin_journal();
	CHECKF(WIFSIGNALED(st), "the committer did not die: %s",
	       tu_status_str(st));
	CHECK_OK(oa_recover(path));
	/* the child wrote the same stamps again: the model stands */
	CHECK_FILE(path, model, sizeof(model), sizeof(model));
}

int main(void)
{
	tu_alarm(280);
	test_reopen();
	test_only_owner();
	test_exit_pending();
	test_empty_commit();
	test_many_commits();
	test_last_wins();
	test_scattered();
	test_scattered_big();
	return 0;
}
