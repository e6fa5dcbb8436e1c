/*
 * conf_concurrency.c - many handles, threads and processes on one file.
 *
 *  1. Threads (each with its own handle) and forked processes commit
 *     concurrently; every transaction writes its stamp into several ranges.
 *     No deadlock (the test has its own alarm), each writer reads its own
 *     writes before committing, every read shows one transaction throughout,
 *     and the final file is the last transaction's stamp everywhere.
 *  2. A process stopped (SIGSTOP) or killed (SIGKILL) while it holds pending
 *     data never blocks the others: they keep committing, and its pending
 *     data never shows.
 *  3. A process killed in the middle of its commit (kill points 1-4) while
 *     other handles are open: those handles still see one transaction
 *     throughout, their next commits work, and a commit that was durable
 *     (points 2-4) is not lost by later commits of others.
 *  4. 70 handles with pending data at once (more journals than the live
 *     area has slots), committed in turn, the last one killed after its
 *     commit point: recovery keeps every commit, in commit order.
 *  5. 8 threads opening a fresh file at once make one extra journal each,
 *     none thrown away, no number skipped (JMAKE: FORMAT.md, "Locks");
 *     also where O_TMPFILE is refused (a temporary name instead), which
 *     leaves no temporary behind.  When they close together, one of them
 *     is the last and nothing is left beside the file.
 *  6. Two handles that close at the same moment, each asking to be the
 *     last while the other still holds OPEN (the lock seam makes them ask
 *     at once): one of them finishes after all, and only the clean
 *     control file is left.
 *
 * SPDX-License-Identifier: MIT
 */
#include "testutil.h"
#include "oatomic-private.h"
#include "format.h"
#include "sys.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#define NRANGES    6
#define RANGE_LEN  4096
#define RANGE_GAP  (32 << 10)
#define FILE_LEN   (NRANGES * RANGE_GAP)
#define NTHREADS   4
#define NPROCS     3
#define NTX        60
#define STAMP(id, seq) (0x43430000000000ull | ((uint64_t)(id) << 24) | \
			(uint64_t)(seq))
#define STAMP_ID(s)    ((int)(((s) >> 24) & 0xff))
#define STAMP_SEQ(s)   ((int)((s) & 0xffffff))

static const char *path;

/* One read of all ranges through F: all one stamp.  Returns it. */
static uint64_t read_all_ranges(oa_file *f, unsigned char *buf)
{
	uint64_t s;
	int i;

	tu_oa_pread(f, buf, FILE_LEN, 0);
	s = tu_get_stamp(buf);
	for (i = 0; i < NRANGES; i++)
		CHECKF(tu_is_stamp(buf + (size_t)i * RANGE_GAP, RANGE_LEN, s),
		       "torn: range 0 has %#llx, range %d has %#llx",
		       (unsigned long long)s, i,
		       (unsigned long long)tu_get_stamp(buf + (size_t)i * RANGE_GAP));
	return s;
}

static void write_ranges(oa_file *f, uint64_t stamp, int reverse)
{
	unsigned char b[RANGE_LEN];
	int i;

	tu_fill_stamp(b, sizeof(b), stamp);
	for (i = 0; i < NRANGES; i++) {
		int r = reverse ? NRANGES - 1 - i : i;

		tu_oa_pwrite(f, b, sizeof(b), (off_t)r * RANGE_GAP);
	}
}

/* ---- 1. concurrent committers -------------------------------------------- */

static void writer(int id)
{
	unsigned char *buf = tu_malloc(FILE_LEN);
	oa_file *f = tu_oa_open(path, O_RDWR, 0);
	int seq;

	for (seq = 1; seq <= NTX; seq++) {
		uint64_t s = STAMP(id, seq), seen;

		write_ranges(f, s, (seq + id) & 1);
		CHECK_EQ(read_all_ranges(f, buf), s);   /* read own writes */
		CHECK_OK(oa_commit(f));
		/* After the commit: ours, or a later one of somebody else. */
		seen = read_all_ranges(f, buf);
		CHECK(STAMP_ID(seen) < NTHREADS + NPROCS);
		if (seq % 10 == 0) {
			/* Reopen now and then: recovery and open race too. */
			CHECK_OK(oa_close(f));
			f = tu_oa_open(path, O_RDWR, 0);
		}
	}
	CHECK_OK(oa_close(f));
	free(buf);
}

static void *writer_thread(void *arg)
{
	writer((int)(intptr_t)arg);
	return NULL;
}

static int writer_proc(void *arg)
{
	writer((int)(intptr_t)arg);
	return 0;
}

static void test_concurrent_commits(void)
{
	unsigned char *buf = tu_malloc(FILE_LEN);
	pthread_t th[NTHREADS];
	pid_t pid[NPROCS];
	size_t n;
	uint64_t s;
	double t0 = tu_now();
	int i;

	path = tu_path("conc");
	tu_fill_stamp(buf, FILE_LEN, STAMP(0xff, 0));
	tu_write_file(path, buf, FILE_LEN, 0644);

	for (i = 0; i < NPROCS; i++)
		pid[i] = tu_fork(writer_proc, (void *)(intptr_t)(NTHREADS + i));
	for (i = 0; i < NTHREADS; i++)
		CHECK_OK(pthread_create(&th[i], NULL, writer_thread,
					(void *)(intptr_t)i));
	for (i = 0; i < NTHREADS; i++)
		CHECK_OK(pthread_join(th[i], NULL));
	for (i = 0; i < NPROCS; i++)
		CHECK_CHILD_OK(tu_wait(pid[i]));
	tu_note("%d commits by %d threads and %d processes in %.1fs",
		(NTHREADS + NPROCS) * NTX, NTHREADS, NPROCS, tu_now() - t0);

	/* The file is one writer's last transaction throughout. */
	free(buf);
	buf = tu_read_file(path, &n);
	CHECK_EQ(n, FILE_LEN);
	s = tu_get_stamp(buf);
	for (i = 0; i < NRANGES; i++)
		CHECKF(tu_is_stamp(buf + (size_t)i * RANGE_GAP, RANGE_LEN, s),
		       "final file torn at range %d", i);
	CHECKF(STAMP_ID(s) < NTHREADS + NPROCS && STAMP_SEQ(s) == NTX,
	       "final stamp %#llx is not a last transaction",
	       (unsigned long long)s);
	free(buf);
}

/* ---- 2. stopped and killed holders of pending data --------------------------- */

static int ready_pipe[2];

static int hold_pending(void *arg)
{
	oa_file *f = tu_oa_open(path, O_RDWR, 0);
	unsigned char *big = tu_malloc(4 << 20);
	char c = 'r';

	(void)arg;
	/* A big pending transaction and the stamp everywhere. */
	tu_fill(big, 4 << 20, 99, 0);
	tu_oa_pwrite(f, big, 4 << 20, FILE_LEN);
	write_ranges(f, STAMP(0x77, 1), 0);
	CHECK_EQ(write(ready_pipe[1], &c, 1), 1);
	for (;;)
		pause();
}

static void commit_n(oa_file *f, int id, int n, unsigned char *buf)
{
	int i;

	for (i = 1; i <= n; i++) {
		write_ranges(f, STAMP(id, i), i & 1);
		CHECK_OK(oa_commit(f));
		CHECK_EQ(read_all_ranges(f, buf), STAMP(id, i));
	}
}

static void test_stopped_and_killed(void)
{
	unsigned char *buf = tu_malloc(FILE_LEN);
	oa_file *f, *g;
	pid_t pid;
	char c;
	double t0;

	path = tu_path("holder");
	tu_fill_stamp(buf, FILE_LEN, STAMP(0, 0));
	tu_write_file(path, buf, FILE_LEN, 0644);
	CHECK_OK(pipe(ready_pipe));
	pid = tu_fork(hold_pending, NULL);
	CHECK_EQ(read(ready_pipe[0], &c, 1), 1);

	/* Stopped while holding pending data: the others go on. */
	CHECK_OK(kill(pid, SIGSTOP));
	t0 = tu_now();
	f = tu_oa_open(path, O_RDWR, 0);
	commit_n(f, 1, 20, buf);
	g = tu_oa_open(path, O_RDWR, 0);
	commit_n(g, 2, 5, buf);
	CHECK_OK(oa_close(g));
	CHECKF(tu_now() - t0 < 30, "commits took %.1fs next to a stopped "
	       "holder", tu_now() - t0);

	/* Killed: still nothing of it shows, the others go on. */
	CHECK_OK(kill(pid, SIGKILL));
	{
		int st = tu_wait(pid);

		CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	}
	CHECK_EQ(read_all_ranges(f, buf), STAMP(2, 5));
	commit_n(f, 3, 20, buf);
	g = tu_oa_open(path, O_RDWR, 0);
	commit_n(g, 4, 5, buf);
	CHECK_OK(oa_close(g));
	CHECK_OK(oa_close(f));
	CHECK_OK(oa_recover(path));
	CHECK_EQ(tu_file_size(path), FILE_LEN);
	free(buf);
	buf = tu_read_file(path, &(size_t){0});
	CHECK(tu_is_stamp(buf, RANGE_LEN, STAMP(4, 5)));
	CHECK(tu_is_stamp(buf + (NRANGES - 1) * RANGE_GAP, RANGE_LEN,
			  STAMP(4, 5)));
	free(buf);
	close(ready_pipe[0]);
	close(ready_pipe[1]);
}

/* ---- 3. killed in the middle of a commit, others open ---------------------------- */

static void write_child_stamp(oa_file *f, void *arg)
{
	write_ranges(f, *(uint64_t *)arg, 1);
}

static void test_killed_mid_commit(int point)
{
	unsigned char *buf = tu_malloc(FILE_LEN);
	uint64_t s_old = STAMP(0x10, point), s_child = STAMP(0x20, point);
	uint64_t s_mine = STAMP(0x30, point), seen, rest;
	oa_file *w, *r;
	size_t n;
	int i, hit;

	/* kill points belong to the journal's commit protocol */
	tu_pin_journal();
	path = tu_path("midcommit%d", point);
	tu_fill_stamp(buf, FILE_LEN, s_old);
	tu_write_file(path, buf, FILE_LEN, 0644);
	w = tu_oa_open(path, O_RDWR, 0);
	r = tu_oa_open(path, O_RDONLY, 0);

	hit = tu_crash_commit(path, point, write_child_stamp, &s_child);
	CHECKF(hit, "kill point %d was not hit", point);

	/* The open reader sees one of the two states, whole. */
	seen = read_all_ranges(r, buf);
	CHECKF(seen == s_old || seen == s_child,
	       "kill point %d: reader sees %#llx", point,
	       (unsigned long long)seen);
	if (point >= 2)
		tu_note("kill point %d: open reader sees the %s state", point,
			seen == s_child ? "new" : "old");

	/* Another handle commits range 0 only. */
	{
		unsigned char b[RANGE_LEN];

		tu_fill_stamp(b, sizeof(b), s_mine);
		tu_oa_pwrite(w, b, sizeof(b), 0);
		CHECK_OK(oa_commit(w));
	}
	tu_oa_pread(r, buf, FILE_LEN, 0);
	CHECK(tu_is_stamp(buf, RANGE_LEN, s_mine));
	rest = tu_get_stamp(buf + RANGE_GAP);
	for (i = 1; i < NRANGES; i++)
		CHECKF(tu_is_stamp(buf + (size_t)i * RANGE_GAP, RANGE_LEN, rest),
		       "kill point %d: after another commit, range %d differs "
		       "from range 1", point, i);
	if (point >= 2)
		CHECKF(rest == s_child, "kill point %d: the dead process's "
		       "durable commit was lost (ranges show %#llx)", point,
		       (unsigned long long)rest);
	else
		CHECK(rest == s_old || rest == s_child);

	CHECK_OK(oa_close(r));
	CHECK_OK(oa_close(w));
	CHECK_OK(oa_recover(path));
	free(buf);
	buf = tu_read_file(path, &n);
	CHECK_EQ(n, FILE_LEN);
	CHECK(tu_is_stamp(buf, RANGE_LEN, s_mine));
	for (i = 1; i < NRANGES; i++)
		CHECKF(tu_is_stamp(buf + (size_t)i * RANGE_GAP, RANGE_LEN, rest),
		       "kill point %d: the file's range %d is not %#llx", point,
		       i, (unsigned long long)rest);
	free(buf);
	tu_unpin_journal();
}

/* ---- 4. more writers at once than the library has live slots -------------------- */

#define NMANY 70

static int many_writers(void *arg)
{
	oa_file *h[NMANY];
	unsigned char b[4096];
	int i;

	for (i = 0; i < NMANY; i++) {
		h[i] = tu_oa_open(path, O_RDWR, 0);
		tu_fill_stamp(b, sizeof(b), STAMP(i, 1));
		tu_oa_pwrite(h[i], b, sizeof(b), 0);          /* all: range 0 */
		tu_oa_pwrite(h[i], b, sizeof(b), (off_t)(i + 1) * 4096);
	}
	for (i = 0; i < NMANY; i++) {
		if (arg && i == NMANY - 1)
			oa__set_killpoint(2);   /* the last one dies, durable */
		CHECK_OK(oa_commit(h[i]));
	}
	for (i = 0; i < NMANY; i++)
		CHECK_OK(oa_close(h[i]));
	return 0;
}

static void test_many_writers(int crash)
{
	size_t n;
	unsigned char *b;
	int st, i;

	path = tu_path("many%d", crash);
	tu_write_file(path, "", 0, 0644);
	st = tu_run_child(many_writers, crash ? (void *)1 : NULL);
	if (crash)
		CHECKF(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
		       "kill point 2 not hit: %s", tu_status_str(st));
	else
		CHECK_CHILD_OK(st);
	CHECK_OK(oa_recover(path));
	b = tu_read_file(path, &n);
	CHECK_EQ(n, (NMANY + 1) * 4096);
	/* Commit order wins on the shared range, whichever journal held it. */
	CHECKF(tu_is_stamp(b, 4096, STAMP(NMANY - 1, 1)),
	       "range 0 has %#llx, want the last commit's",
	       (unsigned long long)tu_get_stamp(b));
	for (i = 0; i < NMANY; i++)
		CHECKF(tu_is_stamp(b + (size_t)(i + 1) * 4096, 4096, STAMP(i, 1)),
		       "writer %d's own range lost", i);
	free(b);
}

/* 5. Writers that start together on a fresh file each make one extra
 * journal, not several: before JMAKE each filled a 4 MiB journal per name
 * it tried and threw it away when another's link took the name (8 writers:
 * about 10 MiB each, and growing with their number).  Since journals are
 * made before JMAKE and named under it (several at once), a journal made
 * is never thrown away either, nor a number skipped: NSTART - 1 extra
 * journals numbered from 1, or NSTART where the commits met in a group
 * commit batch (its combiner has one of its own), and no temporary left. */
#define NSTART 8
static pthread_barrier_t start_bar;
static int start_journals, start_top, start_others;

/* The library's files beside the file: extra journals numbered 1 to
 * NSTART counted in start_journals (their highest number in start_top),
 * anything else but the control file in start_others. */
static void count_beside(void)
{
	const char *dir = tu_path(".");
	char name[64];
	DIR *d = opendir(dir);
	struct dirent *e;
	const char *base = strrchr(path, '/') + 1;
	start_journals = start_top = start_others = 0;
	CHECK(d != NULL);
	while ((e = readdir(d))) {
		int k;
		if (e->d_name[0] != '.' || !strcmp(e->d_name, ".") ||
		    !strcmp(e->d_name, ".."))
			continue;
		snprintf(name, sizeof(name), ".%s.oa", base);
		if (!strcmp(e->d_name, name))
			continue;
		snprintf(name, sizeof(name), ".%s.oaj-", base);
		if (!strncmp(e->d_name, name, strlen(name))) {
			k = atoi(e->d_name + strlen(name));
			if (k >= 1 && k <= NSTART) {
				start_journals++;
				if (k > start_top)
					start_top = k;
				continue;
			}
		}
		if (strstr(e->d_name, base) || !strncmp(e->d_name, ".oatmp", 6))
			start_others++;
	}
	closedir(d);
}

static void *start_writer(void *arg)
{
	unsigned char b[4096];
	oa_file *f;
	tu_fill(b, sizeof(b), (uint64_t)(uintptr_t)arg, 0);
	pthread_barrier_wait(&start_bar);
	f = oa_open(path, O_RDWR, 0);
	if (!f || oa_pwrite(f, b, sizeof(b), (off_t)(uintptr_t)arg * 4096) !=
			  (ssize_t)sizeof(b) ||
	    oa_commit(f) < 0) {
		perror("start_writer");
		exit(1);
	}
	pthread_barrier_wait(&start_bar);   /* all open: NSTART journals */
	if (arg == 0)
		count_beside();
	pthread_barrier_wait(&start_bar);
	oa_close(f);
	return NULL;
}

/* Whether a 4 KiB aligned commit goes through a journal: not with the
 * kernel method (one untorn write) nor the exchange method (a shadow file)
 * forced, as fsmatrix.sh does. */
static bool journals_used(void)
{
	const char *m = getenv("OATOMIC_METHOD");
	return !m || (strcmp(m, "kernel") && strcmp(m, "exchange"));
}

/* A file system without O_TMPFILE (some FUSE and network ones). */
static int no_tmpfile_openat(int dirfd, const char *p, int flags, mode_t mode)
{
	if ((flags & O_TMPFILE) == O_TMPFILE) {
		errno = EOPNOTSUPP;
		return -1;
	}
	return oa_sys_linux.openat(dirfd, p, flags, mode);
}

static void test_start_together(void)
{
	static struct oa_sysops ops;
	pthread_t t[NSTART];
	struct oa_stats st;

	/* rounds 5 and 6 without O_TMPFILE, where the journals are what it
	 * is about (the exchange method's shadow needs O_TMPFILE: forced,
	 * it refuses to open there) */
	for (int round = 0; round < (journals_used() ? 7 : 5); round++) {
		if (round == 5) {
			ops = oa_sys_linux;
			ops.openat = no_tmpfile_openat;
			oa__set_sysops(&ops);
		}
		path = tu_path("start%d", round);
		tu_write_file(path, "", 0, 0644);
		pthread_barrier_init(&start_bar, NULL, NSTART);
		oa__stats_reset();
		for (uintptr_t i = 0; i < NSTART; i++)
			CHECK(pthread_create(&t[i], NULL, start_writer,
					     (void *)i) == 0);
		for (int i = 0; i < NSTART; i++)
			pthread_join(t[i], NULL);
		pthread_barrier_destroy(&start_bar);
		oa__stats_get(&st);
		/* Up to NSTART extra journals of 64 KiB, journal 0, the
		 * records and the applies, the combiner's copies and the
		 * room ahead it makes if it commits twice (256 KiB): about
		 * 1 MiB, where journals made and thrown away by writers that
		 * race would be 64 KiB each, up to NSTART x (NSTART - 1) / 2
		 * of them */
		CHECKF(st.bytes_written < (uint64_t)NSTART * 65536 +
					  (512u << 10) + NSTART * 24576,
		       "round %d: %d writers starting together wrote %llu "
		       "bytes (journals made and thrown away?)", round,
		       NSTART, (unsigned long long)st.bytes_written);
		CHECKF((start_journals >= NSTART - 1 || !journals_used()) &&
		       start_top == start_journals && start_others == 0,
		       "round %d: %d writers open together: %d extra "
		       "journals numbered 1 to %d (want %d, or %d with a "
		       "batch's), %d other files beside", round, NSTART,
		       start_journals, start_top, NSTART - 1, NSTART,
		       start_others);
		/* the writers closed at about the same moment: one of them
		 * was the last, and left nothing but the control file */
		count_beside();
		CHECKF(start_journals == 0 && start_others == 0,
		       "round %d: after the last close, %d extra journals "
		       "and %d other files beside the file", round,
		       start_journals, start_others);
		if (round >= 5) {
			unsigned char r[4096], want[4096];
			int fd = open(path, O_RDONLY);
			CHECK(fd >= 0);
			for (int i = 0; i < NSTART; i++) {
				tu_fill(want, sizeof(want), (uint64_t)i, 0);
				CHECK(pread(fd, r, sizeof(r), (off_t)i * 4096) ==
				      (ssize_t)sizeof(r));
				CHECKF(!memcmp(r, want, sizeof(r)),
				       "round %d: writer %d's commit lost",
				       round, i);
			}
			close(fd);
		}
	}
	oa__set_sysops(NULL);
}

/* 6 */
static pthread_barrier_t close_bar;
static __thread int close_asked;

static int closing_lock(int fd, int cmd, struct flock *fl)
{
	/* each closer's first try for OPEN exclusive waits for the other's:
	 * both ask while both still hold it shared */
	if (cmd == F_OFD_SETLK && fl->l_type == F_WRLCK &&
	    fl->l_start == OA_LOCK_OPEN && !close_asked++)
		pthread_barrier_wait(&close_bar);
	return oa_sys_linux.lock(fd, cmd, fl);
}

static void *closer(void *arg)
{
	CHECK_OK(oa_close(arg));
	return NULL;
}

static void test_close_together(void)
{
	static struct oa_sysops ops;
	unsigned char b[4096];
	oa_file *f[2];
	pthread_t t[2];
	struct stat st;

	for (int round = 0; round < 3; round++) {
		path = tu_path("close%d", round);
		tu_write_file(path, "", 0, 0644);
		for (int i = 0; i < 2; i++) {
			f[i] = tu_oa_open(path, O_RDWR, 0);
			tu_fill(b, sizeof(b), (uint64_t)i, 0);
			tu_oa_pwrite(f[i], b, sizeof(b), (off_t)i * 4096);
		}
		for (int i = 0; i < 2; i++)
			CHECK_OK(oa_commit(f[i]));   /* journal 0 and 1 */
		pthread_barrier_init(&close_bar, NULL, 2);
		ops = oa_sys_linux;
		ops.lock = closing_lock;
		oa__set_sysops(&ops);
		for (int i = 0; i < 2; i++)
			CHECK(pthread_create(&t[i], NULL, closer, f[i]) == 0);
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
		oa__set_sysops(NULL);
		pthread_barrier_destroy(&close_bar);
		count_beside();
		CHECK_OK(stat(tu_control_path(path), &st));
		CHECKF(start_journals == 0 && start_others == 0 &&
		       st.st_size == 512,
		       "round %d: two handles closed together left %d extra "
		       "journals, %d other files and a control file of %lld "
		       "bytes (512: clean)", round, start_journals,
		       start_others, (long long)st.st_size);
	}
}

int main(void)
{
	int p;

	tu_alarm(150);
	test_concurrent_commits();
	test_stopped_and_killed();
	for (p = 1; p <= 4; p++)
		test_killed_mid_commit(p);
	test_many_writers(0);
	test_many_writers(1);
	test_start_together();
	test_close_together();
	return 0;
}
