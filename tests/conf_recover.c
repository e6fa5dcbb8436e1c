/*
 * conf_recover.c - GUARANTEES.md §7: recovery is automatic, exact and
 * idempotent.
 *
 * A child commits T1 (cleanly), then T2 (writes, a shrink and a growth with a
 * hole) and dies by SIGKILL at kill point N of T2's commit (the private hook
 * oa__set_killpoint; 5 and 6 are in the checkpoint of the last close):
 *   1 commit record written, not flushed   2 flushed, not applied
 *   3 half applied                         4 applied, dirty marker set
 *   5 checkpoint: target flushed           6 checkpoint control not flushed
 * Then, for each N:
 *   - oa_recover makes the file exactly base+T1 (allowed at point 1 only)
 *     or base+T1+T2, a second oa_recover changes nothing, and the next
 *     transaction works;
 *   - oa_open (read-write, and read-only) recovers by itself: the handle and
 *     a plain read() both show the recovered state at once;
 *   - a second crash on top of an unrecovered one is recovered too;
 *   - a crash during oa_recover itself is recovered by the next one.
 * oa_recover of a file without a journal returns 0 and creates nothing.
 *
 * SPDX-License-Identifier: MIT
 */
#include "testutil.h"

#include <signal.h>
#include <sys/wait.h>

#define BASE_LEN  (200 << 10)
#define T2_TRUNC  (150 << 10)
#define T2_END    (260 << 10)

/* The three states, built once. */
static unsigned char *st_base, *st_t1, *st_t2, *st_t3;
static const size_t len_base = BASE_LEN, len_t1 = BASE_LEN, len_t2 = T2_END;

static void build_states(void)
{
	st_base = tu_malloc(BASE_LEN);
	tu_fill(st_base, BASE_LEN, 1, 0);
	st_t1 = tu_malloc(BASE_LEN);
	memcpy(st_t1, st_base, BASE_LEN);
	tu_fill(st_t1, 64 << 10, 2, 0);                 /* T1: [0, 64K) */
	st_t2 = tu_zalloc(T2_END);
	memcpy(st_t2, st_t1, T2_TRUNC);                 /* T2: shrink to 150K */
	tu_fill(st_t2 + (32 << 10), 64 << 10, 3, 32 << 10); /* [32K, 96K) */
	tu_fill(st_t2 + (250 << 10), 10 << 10, 4, 250 << 10); /* [250K, 260K) */
	st_t3 = tu_malloc(T2_END);                      /* T3 over T2 */
	memcpy(st_t3, st_t2, T2_END);
	tu_fill(st_t3 + 1000, 3000, 5, 1000);
}

static void do_t1(oa_file *f)
{
	tu_oa_pwrite(f, st_t1, 64 << 10, 0);
}

static void do_t2(oa_file *f)
{
	CHECK_OK(oa_ftruncate(f, T2_TRUNC));
	tu_oa_pwrite(f, st_t2 + (32 << 10), 64 << 10, 32 << 10);
	tu_oa_pwrite(f, st_t2 + (250 << 10), 10 << 10, 250 << 10);
}

static void do_t3(oa_file *f)
{
	tu_oa_pwrite(f, st_t3 + 1000, 3000, 1000);
}

/* The child's transaction: T1 committed, then T2 (whose commit dies). */
static void t1_then_t2(oa_file *f, void *arg)
{
	(void)arg;
	do_t1(f);
	CHECK_OK(oa_commit(f));
	do_t2(f);
}

static void t3_only(oa_file *f, void *arg)
{
	(void)arg;
	do_t3(f);
}

/* A fresh file holding the base, crashed at POINT in T2 after T1. */
static const char *crashed(const char *name, int point)
{
	const char *path = tu_path("%s-kp%d", name, point);

	tu_write_file(path, st_base, len_base, 0644);
	CHECKF(tu_crash_commit(path, point, t1_then_t2, NULL) == 1,
	       "kill point %d was not hit (the child committed and closed "
	       "without dying)", point);
	return path;
}

/* Which state is PATH in: 1 (T1), 2 (T2), or fail.  Only point 1 may be
 * in state 1. */
static int file_state(const char *path, int point, const char *when)
{
	size_t n;
	unsigned char *b = tu_read_file(path, &n);
	int s = 0;

	if (n == len_t2 && !memcmp(b, st_t2, n))
		s = 2;
	else if (n == len_t1 && !memcmp(b, st_t1, n))
		s = 1;
	if (!s) {
		fprintf(stderr, "kill point %d, %s: the file is neither the old "
			"nor the new state (size %zu)\n", point, when, n);
		if (n == len_t2)
			CHECK_MEM(b, st_t2, n);
		else if (n == len_t1)
			CHECK_MEM(b, st_t1, n);
		tu_fail(__FILE__, __LINE__, 0, "mixed state");
	}
	CHECKF(s == 2 || point == 1, "kill point %d, %s: a durable commit was "
	       "lost (the file is the old state)", point, when);
	free(b);
	return s;
}

static const unsigned char *state_buf(int s)
{
	return s == 2 ? st_t2 : st_t1;
}

static size_t state_len(int s)
{
	return s == 2 ? len_t2 : len_t1;
}

/* ---- oa_recover -------------------------------------------------------------- */

static void test_recover(int point)
{
	const char *path = crashed("rec", point);
	struct stat a, b;
	int s, s2;
	oa_file *f;

	CHECK_OK(oa_recover(path));
	s = file_state(path, point, "after oa_recover");
	CHECK_OK(stat(path, &a));
	CHECK_OK(oa_recover(path));
	s2 = file_state(path, point, "after a second oa_recover");
	CHECKF(s == s2, "kill point %d: the second oa_recover changed the "
	       "state %d -> %d", point, s, s2);
	CHECK_OK(stat(path, &b));
	if (a.st_mtim.tv_sec != b.st_mtim.tv_sec ||
	    a.st_mtim.tv_nsec != b.st_mtim.tv_nsec)
		tu_note("kill point %d: the second oa_recover rewrote the file "
			"(mtime changed)", point);

	/* The next transaction works and sees the recovered state. */
	f = tu_oa_open(path, O_RDWR, 0);
	CHECK_OA_VIEW(f, state_buf(s), state_len(s));
	if (s == 2) {
		do_t3(f);
		CHECK_OK(oa_commit(f));
		CHECK_OK(oa_close(f));
		CHECK_FILE(path, st_t3, len_t2, (off_t)len_t2);
	} else {
		CHECK_OK(oa_close(f));
	}
	CHECK_OK(oa_recover(path));
	if (s == 2)
		CHECK_FILE(path, st_t3, len_t2, (off_t)len_t2);
	else
		CHECK_FILE(path, st_t1, len_t1, (off_t)len_t1);
}

/* ---- oa_open recovers ------------------------------------------------------------ */

static void test_open_recovers(int point, int flags)
{
	const char *path = crashed(flags == O_RDONLY ? "ro" : "rw", point);
	size_t n;
	unsigned char *view;
	int s, s_plain;
	oa_file *f;

	f = tu_oa_open(path, flags, 0);
	view = tu_oa_read_all(f, &n);
	if (n == len_t2 && !memcmp(view, st_t2, n))
		s = 2;
	else if (n == len_t1 && !memcmp(view, st_t1, n))
		s = 1;
	else
		tu_fail(__FILE__, __LINE__, 0, "kill point %d: oa_open(%s) "
			"shows neither state (size %zu)", point,
			flags == O_RDONLY ? "O_RDONLY" : "O_RDWR", n);
	CHECKF(s == 2 || point == 1, "kill point %d: oa_open shows the old "
	       "state: a durable commit was lost", point);
	free(view);
	/* The file itself is recovered already, for plain readers. */
	s_plain = file_state(path, point, "after oa_open, plain read");
	CHECKF(s_plain == s, "kill point %d: the handle shows state %d, the "
	       "file %d", point, s, s_plain);
	CHECK_OK(oa_close(f));
	CHECK_EQ(file_state(path, point, "after oa_close"), s);
	CHECK_OK(oa_recover(path));
	CHECK_EQ(file_state(path, point, "after oa_recover"), s);
}

/* ---- a reader that may not write the file ---------------------------------------- */

static int reader_point;

/* It cannot finish the crashed commit, but what it reads must still be one
 * state whole; failing (open or read) is honest too.  Never a torn view. */
static int unprivileged_reader(void *arg)
{
	const char *path = arg;
	size_t n;
	unsigned char *view;
	oa_file *f;

	CHECK_OK(setgid(65534));
	CHECK_OK(setuid(65534));
	errno = 0;
	f = oa_open(path, O_RDONLY, 0);
	if (!f) {
		tu_note("unprivileged reader after a crash: oa_open %s",
			tu_errname(errno));
		return 0;
	}
	{
		struct stat st;

		CHECK_OK(oa_fstat(f, &st));
		view = tu_malloc((size_t)st.st_size + 1);
		errno = 0;
		ssize_t r = oa_pread(f, view, (size_t)st.st_size, 0);

		if (r < 0) {
			tu_note("unprivileged reader after a crash: oa_pread "
				"%s", tu_errname(errno));
			free(view);
			oa_close(f);
			return 0;
		}
		n = (size_t)r;
	}
	CHECKF((n == len_t2 && !memcmp(view, st_t2, n)) ||
	       (n == len_t1 && !memcmp(view, st_t1, n)),
	       "kill point %d: a reader without write permission sees a torn "
	       "file (size %zu): neither the old nor the new state",
	       reader_point, n);
	free(view);
	CHECK_OK(oa_close(f));
	return 0;
}

static void test_unprivileged_reader(int point)
{
	const char *path;

	if (!tu_is_root())
		return;
	CHECK_OK(chmod(tu_dir(), 0755));
	path = crashed("nobody", point);
	reader_point = point;
	CHECK_CHILD_OK(tu_run_child(unprivileged_reader, (void *)path));
	CHECK_OK(chmod(tu_dir(), 0700));
	/* The owner recovers it afterwards. */
	CHECK_OK(oa_recover(path));
	file_state(path, point, "after the unprivileged reader");
}

/* ---- a crash on top of a crash ----------------------------------------------------- */

static void test_double_crash(int point)
{
	const char *path = crashed("double", point);
	int s;

	/* The second child's oa_open recovers T2, then its T3 commit dies at
	 * the same point. */
	CHECKF(tu_crash_commit(path, point == 1 ? 2 : point, t3_only, NULL),
	       "kill point %d not hit the second time", point);
	CHECK_OK(oa_recover(path));
	{
		size_t n;
		unsigned char *b = tu_read_file(path, &n);

		s = (n == len_t2 && !memcmp(b, st_t3, n)) ? 3 : 0;
		if (!s && point == 1) {
			/* T2 discarded: T3 lands on T1 */
			unsigned char *t13 = tu_malloc(len_t1);

			memcpy(t13, st_t1, len_t1);
			memcpy(t13 + 1000, st_t3 + 1000, 3000);
			if (n == len_t1 && !memcmp(b, t13, n))
				s = 3;
			free(t13);
		}
		CHECKF(s == 3, "kill point %d twice: the file is not T3 on top "
		       "of T2 (size %zu)", point, n);
		free(b);
	}
}

/* ---- a crash during recovery --------------------------------------------------------- */

static int recover_dies(void *arg)
{
	oa__set_killpoint((int)(intptr_t)arg);
	CHECK_OK(oa_recover(tu_path("inrec-kp2")));
	return 0;
}

static void test_crash_in_recovery(void)
{
	const char *path = crashed("inrec", 2);
	int p, st, hits = 0;

	for (p = 3; p <= 6; p++) {
		st = tu_run_child(recover_dies, (void *)(intptr_t)p);
		if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
			hits++;
		else
			CHECK_CHILD_OK(st);
		CHECK_OK(oa_recover(path));
		CHECK_EQ(file_state(path, 2, "after a crashed recovery"), 2);
		/* And crash again for the next point. */
		tu_write_file(path, st_base, len_base, 0644);
		tu_remove_journals(path);
		CHECK(tu_crash_commit(path, 2, t1_then_t2, NULL));
	}
	tu_note("oa_recover stopped at %d of kill points 3-6", hits);
}

/* ---- no journal ---------------------------------------------------------------------- */

static void test_no_journal(void)
{
	const char *path = tu_path("plain");

	tu_write_file(path, st_base, len_base, 0644);
	CHECK_OK(oa_recover(path));
	CHECK_OK(oa_recover(path));
	CHECK_FILE(path, st_base, len_base, (off_t)len_base);
	CHECK_EQ(tu_count_journals(path), 0);
	CHECK_ERR(oa_recover(tu_path("missing")), ENOENT);
	CHECK_EQ(tu_count_journals(tu_path("missing")), 0);

	/* A clean journal (closed after commits): nothing to do. */
	{
		oa_file *f = tu_oa_open(path, O_RDWR, 0);

		do_t1(f);
		CHECK_OK(oa_commit(f));
		CHECK_OK(oa_close(f));
		CHECK_OK(oa_recover(path));
		CHECK_FILE(path, st_t1, len_t1, (off_t)len_t1);
	}
}

int main(void)
{
	int p;

	tu_alarm(280);
	build_states();
	test_no_journal();
	for (p = 1; p <= 6; p++) {
		test_recover(p);
		test_open_recovers(p, O_RDWR);
		test_open_recovers(p, O_RDONLY);
		test_double_crash(p);
		test_unprivileged_reader(p);
	}
	test_crash_in_recovery();
	free(st_base);
	free(st_t1);
	free(st_t2);
	free(st_t3);
	return 0;
}
