/*
 * conf_clean.c - nothing left behind ("Everyday use", 1; GUARANTEES.md
 * §12; FORMAT.md I14, I15).
 *
 *  - after a one-shot update (open, 4 KiB write, commit, close), a whole
 *    replacement (write, truncate, commit, close), and two handles writing
 *    at once (an extra journal while they are open), the only file beside
 *    the data file is its control file, 512 bytes long;
 *  - a read-only open of a clean file leaves it so, and so does a writer's
 *    open that changes nothing;
 *  - oa_recover of a file a killed writer left leaves it clean too;
 *  - an extra journal of an earlier era put back beside a clean file (a
 *    removal a crash undid) is ignored: a later commit and a kill, then
 *    recovery, give that commit, not the old journal's contents
 *    (make crash-mutants: mutant 28 replays it);
 *  - a transaction that fills the disk (an 8 MiB tmpfs) and is dropped,
 *    by oa_abort or by oa_close: the abort and the close succeed and give
 *    the space back (the control file 512 bytes again), nothing committed
 *    is lost, and the next commit works.  Before the dropped bytes were
 *    given back first (checkpoint.c), the checkpoint record fell into a
 *    hole of the control file: ENOSPC from oa_abort and oa_close, 8 MiB
 *    of dropped bytes left beside the file, the disk kept full.
 *
 *  - a handle committing 4 KiB again and again on a 2 MiB tmpfs (2000
 *    commits) and under a 128 KiB file size limit (1000): every commit
 *    works, the journal starting over where its room ends (mutant 52:
 *    not at a transaction's first write); and 90 SIGKILLs of such a
 *    writer on the tmpfs, at random or at the checkpoint of a start-over:
 *    after recovery the last acknowledged commit or the next (mutant 21,
 *    a start-over without its checkpoint: EUCLEAN).
 *
 * Failed on main before format 2 (690dc6f..8f744a8): two files, 4 MiB.
 */
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "testutil.h"
#include "internal.h"
#include "oatomic-private.h"
#include "sys.h"

#define LEN (64 << 10)

static const char *path;

static void check_clean(const char *when)
{
	int n = tu_count_journals(path);
	off_t sz = tu_file_size(tu_control_path(path));
	CHECKF(n == 1, "%s: %d library files beside the file, not 1", when, n);
	CHECKF(sz == OA_CLEAN_SIZE, "%s: control file of %lld bytes, not %d",
	       when, (long long)sz, OA_CLEAN_SIZE);
}

static int killed_writer(void *arg)
{
	const unsigned char *b = arg;
	oa_file *f = tu_oa_open(path, O_RDWR, 0);
	tu_oa_pwrite(f, b, 4096, 8192);
	CHECK_OK(oa_commit(f));
	raise(SIGKILL);
	return 1;
}

/* Commit two small changes, then fill the 8 MiB disk with a transaction
 * that is dropped: by oa_abort (ABORT) or by the close. */
static void full_disk_round(const char *fp, bool abort)
{
	static unsigned char mb[1 << 20];
	struct oa_options jo = { .size = sizeof(jo),
				 .method = OA_METHOD_JOURNAL };
	oa_file *f;
	int i;

	unlink(fp);
	f = oa_open_opts(fp, O_RDWR | O_CREAT, 0644, &jo);
	CHECK(f != NULL);
	tu_oa_pwrite(f, "hello", 5, 0);
	CHECK_OK(oa_commit(f));
	tu_oa_pwrite(f, "world", 5, 5);
	CHECK_OK(oa_commit(f));
	memset(mb, 'a', sizeof(mb));
	for (i = 0; i < 16; i++)
		if (oa_pwrite(f, mb, sizeof(mb), (off_t)i << 20) < 0)
			break;
	CHECKF(i < 16 && (errno == ENOSPC || errno == EFBIG),
	       "16 MiB into an 8 MiB tmpfs: %d writes, then %s", i,
	       strerror(errno));
	if (abort) {
		CHECKF(oa_abort(f) == 0, "oa_abort after a transaction that "
		       "filled the disk: %s", strerror(errno));
		CHECK_FILE(fp, "helloworld", 10, 10);
	}
	CHECKF(oa_close(f) == 0, "oa_close after a transaction that filled "
	       "the disk (%s): %s", abort ? "aborted" : "dropped by the close",
	       strerror(errno));
	CHECK_FILE(fp, "helloworld", 10, 10);
	off_t sz = tu_file_size(tu_control_path(fp));
	CHECKF(sz == OA_CLEAN_SIZE, "after a transaction that filled the disk "
	       "and was dropped (%s): control file of %lld bytes, not %d",
	       abort ? "oa_abort" : "oa_close", (long long)sz, OA_CLEAN_SIZE);
	/* the space is back: a 2 MiB commit (journal and file: 4 MiB) */
	f = oa_open_opts(fp, O_RDWR, 0, &jo);
	CHECK(f != NULL);
	for (i = 0; i < 2; i++)
		tu_oa_pwrite(f, mb, sizeof(mb), (off_t)i << 20);
	CHECK_OK(oa_commit(f));
	CHECK_OK(oa_close(f));
	CHECK(tu_file_size(fp) == 2 << 20);
	CHECK(tu_file_size(tu_control_path(fp)) == OA_CLEAN_SIZE);
}

static uint64_t *g_room_ack;   /* shared with the writer */

/* The N of the string "commit N" that starts page K of FD (-1: none). */
static long page_stamp(int fd, int k)
{
	char got[32];
	long v = -1;
	int end = 0;
	CHECK(pread(fd, got, sizeof(got), k * 4096) == sizeof(got));
	got[31] = 0;
	if (sscanf(got, "commit %ld%n", &v, &end) != 1 || got[end] != 0)
		return -1;
	return v;
}

/* A handle that keeps committing small transactions where the journal's
 * room is short - a 2 MiB tmpfs, a 128 KiB file size limit - commits them
 * all: the journal starts over after a checkpoint instead of running into
 * the end (ENOSPC after ~250 commits on the tmpfs, EFBIG after ~20 under
 * the limit, before 2026-12-06). */
static void many_commits(const char *fp, int n, int nh)
{
	struct oa_options jo = { .size = sizeof(jo),
				 .method = OA_METHOD_JOURNAL };
	unsigned char b[4096], init[8192];
	oa_file *f[3];
	CHECK(nh >= 1 && nh <= 3);
	unlink(fp);
	memset(init, 'i', sizeof(init));
	tu_write_file(fp, init, sizeof(init), 0644);
	for (int h = 0; h < nh; h++)
		CHECK((f[h] = oa_open_opts(fp, O_RDWR, 0, &jo)) != NULL);
	/* Commit I by handle I % NH: the second and third write through
	 * extra journals, made small and grown like journal 0 (4 MiB each
	 * up front before 2026-12-06: ENOSPC/EFBIG at their first write). */
	for (int i = 0; i < n; i++) {
		oa_file *h = f[i % nh];
		snprintf((char *)b, sizeof(b), "commit %d", i);
		CHECKF(oa_pwrite(h, b, sizeof(b), (off_t)(i % 2) * 4096) ==
		       (ssize_t)sizeof(b), "%s: write %d of %d (%d handles): "
		       "%s", fp, i, n, nh, strerror(errno));
		CHECKF(oa_commit(h) == 0, "%s: commit %d of %d (%d handles): "
		       "%s", fp, i, n, nh, strerror(errno));
	}
	for (int h = 0; h < nh; h++)
		CHECK_OK(oa_close(f[h]));
	int fd = open(fp, O_RDONLY);
	CHECK(fd >= 0);
	for (int k = 0; k < 2; k++) {
		long last = (n - 1) % 2 == k ? n - 1 : n - 2, got;
		CHECKF((got = page_stamp(fd, k)) == last, "%s: page %d holds "
		       "commit %ld, not %ld", fp, k, got, last);
	}
	close(fd);
	CHECK(tu_file_size(tu_control_path(fp)) == OA_CLEAN_SIZE);
}

/* Writers at the same time where the room is short: NT threads of this
 * process (group commit: a combiner's journal too) or NT processes, each
 * with its own handle, commit 4 KiB "commit K" into page T of the file, K
 * = 0 .. N-1.  Every commit must work (journals made small and grown by at
 * most a quarter of the free space: before 2026-12-06 each extra journal
 * took 4 MiB, and journal 0's room ahead and records took a 2 MiB tmpfs
 * whole, so the next writer's journal could not be made: ENOSPC). */
#define NW_MAX 8
static const char *g_cw_path;
static int g_cw_n;

static int cw_commits(long t)
{
	unsigned char b[4096];
	oa_file *f = oa_open(g_cw_path, O_RDWR, 0);
	if (!f) {
		fprintf(stderr, "writer %ld: open: %s\n", t, strerror(errno));
		return 1;
	}
	for (int k = 0; k < g_cw_n; k++) {
		memset(b, 'a' + (int)t, sizeof(b));
		snprintf((char *)b, sizeof(b), "commit %d", k);
		if (oa_pwrite(f, b, sizeof(b), (off_t)t * 4096) !=
		    (ssize_t)sizeof(b) || oa_commit(f) < 0) {
			fprintf(stderr, "writer %ld: commit %d of %d: %s\n", t,
				k, g_cw_n, strerror(errno));
			oa_close(f);
			return 1;
		}
	}
	return oa_close(f) < 0;
}

static void *cw_thread(void *arg)
{
	return (void *)(intptr_t)cw_commits((long)(intptr_t)arg);
}

static void concurrent_writers(const char *fp, int nt, int n, bool procs)
{
	unsigned char init[NW_MAX * 4096];
	pthread_t th[NW_MAX];
	pid_t pid[NW_MAX];
	CHECK(nt <= NW_MAX);
	unlink(fp);
	memset(init, 'i', sizeof(init));
	tu_write_file(fp, init, (size_t)nt * 4096, 0644);
	g_cw_path = fp;
	g_cw_n = n;
	for (long t = 0; t < nt; t++) {
		if (procs) {
			CHECK((pid[t] = fork()) >= 0);
			if (pid[t] == 0)
				_exit(cw_commits(t));
		} else {
			CHECK(pthread_create(&th[t], NULL, cw_thread,
					     (void *)(intptr_t)t) == 0);
		}
	}
	for (int t = 0; t < nt; t++) {
		if (procs) {
			int st;
			CHECK(waitpid(pid[t], &st, 0) == pid[t]);
			CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: "
			       "process %d of %d failed", fp, t, nt);
		} else {
			void *r;
			CHECK(pthread_join(th[t], &r) == 0);
			CHECKF(r == NULL, "%s: thread %d of %d failed", fp, t,
			       nt);
		}
	}
	int fd = open(fp, O_RDONLY);
	CHECK(fd >= 0);
	for (int t = 0; t < nt; t++) {
		long got = page_stamp(fd, t);
		CHECKF(got == n - 1, "%s: page %d holds commit %ld, not %d",
		       fp, t, got, n - 1);
	}
	close(fd);
	CHECK(tu_file_size(tu_control_path(fp)) == OA_CLEAN_SIZE);
}

/* A handle that commits a few times writes zeros for the room it uses,
 * not a 4 MiB ring: two handles of FP, ten 4 KiB commits each, taking
 * turns; journal 0 (in the control file) and the extra journal stay
 * under 512 KiB (both 4 MiB before 2026-12-06: the ring was made whole at
 * a handle's fifth commit, and an extra journal at its first write). */
static void few_commits(const char *fp)
{
	unsigned char b[4096];
	oa_file *f[2];
	unlink(fp);
	memset(b, 'i', sizeof(b));
	tu_write_file(fp, b, sizeof(b), 0644);
	for (int h = 0; h < 2; h++)
		CHECK((f[h] = oa_open(fp, O_RDWR, 0)) != NULL);
	for (int i = 0; i < 20; i++) {
		snprintf((char *)b, sizeof(b), "commit %d", i);
		CHECK(oa_pwrite(f[i % 2], b, sizeof(b), 0) == sizeof(b));
		CHECK_OK(oa_commit(f[i % 2]));
	}
	off_t c = tu_file_size(tu_control_path(fp)),
	      j = tu_file_size(tu_journal_path(fp, 1));
	CHECKF(c > OA_CLEAN_SIZE && c <= (512 << 10) && j > 0 &&
	       j <= (512 << 10), "ten commits per handle: control file %lld "
	       "bytes, extra journal %lld", (long long)c, (long long)j);
	for (int h = 0; h < 2; h++)
		CHECK_OK(oa_close(f[h]));
	int fd = open(fp, O_RDONLY);
	CHECK(fd >= 0);
	CHECK(page_stamp(fd, 0) == 19);
	close(fd);
}

/* A full disk and a handle with room ahead: the commit gives its own room
 * back to make the blocks its apply needs.  On the 2 MiB tmpfs a handle
 * commits three times (its journal takes room ahead), another file fills
 * the disk, then the handle commits 4 KiB that grow the file: the commit
 * works (ENOSPC before 2026-12-06, with ~400 KiB of its own zeros on the
 * disk; mutant 54). */
static void full_then_grow(const char *fp, const char *filler)
{
	unsigned char b[4096];
	unlink(fp);
	unlink(filler);
	memset(b, 'i', sizeof(b));
	tu_write_file(fp, b, sizeof(b), 0644);
	oa_file *f = oa_open(fp, O_RDWR, 0);
	CHECK(f != NULL);
	/* Three commits: the second takes room ahead.  (Twenty passed the
	 * journal's start-over point, which then hid mutant 52 below.) */
	for (int i = 0; i < 3; i++) {
		snprintf((char *)b, sizeof(b), "commit %d", i);
		CHECK(oa_pwrite(f, b, sizeof(b), 0) == sizeof(b));
		CHECK_OK(oa_commit(f));
	}
	/* room ahead: up to an eighth of the free space (FORMAT.md, "Files"),
	 * about 240 KiB here */
	CHECKF(tu_file_size(tu_control_path(fp)) > (128 << 10), "no room "
	       "ahead: %lld bytes", (long long)tu_file_size(tu_control_path(fp)));
	int fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	memset(b, 'z', sizeof(b));
	while (write(fd, b, sizeof(b)) == sizeof(b))
		;
	CHECK(errno == ENOSPC);
	close(fd);
	snprintf((char *)b, sizeof(b), "commit 20");
	CHECKF(oa_pwrite(f, b, sizeof(b), 4096) == sizeof(b), "a full disk: "
	       "write: %s", strerror(errno));
	CHECKF(oa_commit(f) == 0, "a full disk, 4 KiB growing the file, with "
	       "room ahead of its own: commit: %s", strerror(errno));
	/* The disk full again (the room given back taken by the other file):
	 * the next transaction's first write finds the journal out of room,
	 * and it starts over in the space its own checkpointed commits held
	 * (mutant 52; the bound on room ahead, FORMAT.md "Files", keeps a
	 * journal from reaching its end otherwise). */
	fd = open(filler, O_WRONLY | O_APPEND);
	CHECK(fd >= 0);
	memset(b, 'z', sizeof(b));
	while (write(fd, b, sizeof(b)) == sizeof(b))
		;
	CHECK(errno == ENOSPC);
	close(fd);
	for (int i = 21; i < 30; i++) {
		snprintf((char *)b, sizeof(b), "commit %d", i);
		CHECKF(oa_pwrite(f, b, sizeof(b), 0) == sizeof(b), "a full "
		       "disk, commit %d: write: %s", i, strerror(errno));
		CHECKF(oa_commit(f) == 0, "a full disk, commit %d: %s", i,
		       strerror(errno));
	}
	CHECK_OK(oa_close(f));
	fd = open(fp, O_RDONLY);
	CHECK(fd >= 0);
	CHECK(page_stamp(fd, 0) == 29 && page_stamp(fd, 1) == 20);
	close(fd);
	unlink(filler);
}

static int limited_writer(void *arg)
{
	struct rlimit rl = { 128 << 10, 128 << 10 };
	CHECK_OK(setrlimit(RLIMIT_FSIZE, &rl));
	many_commits(arg, 1000, 1);
	many_commits(arg, 1000, 2);
	concurrent_writers(arg, 4, 300, false);
	concurrent_writers(arg, 4, 300, true);
	return 0;
}

/* The journal's start-over on a full disk, killed: a child commits "commit
 * K" into page K % 2 of an 8 KiB file on the 2 MiB tmpfs, K = 2, 3, ...,
 * storing each acknowledged K in shared memory, and is SIGKILLed at a
 * random moment or at a checkpoint's kill point (on this disk the journal
 * is checkpointed only where it starts over for want of room).  After
 * oa_recover, page A % 2 holds the last acknowledged A, the other page A-1
 * or A+1. */
static int room_writer(void *arg)
{
	const char *fp = arg;
	struct oa_options jo = { .size = sizeof(jo),
				 .method = OA_METHOD_JOURNAL };
	unsigned char b[4096];
	oa_file *f = oa_open_opts(fp, O_RDWR, 0, &jo);
	if (!f)
		return 2;
	for (long k = (long)*g_room_ack + 1;; k++) {
		memset(b, 'k', sizeof(b));
		snprintf((char *)b, sizeof(b), "commit %ld", k);
		if (oa_pwrite(f, b, sizeof(b), (off_t)(k % 2) * 4096) !=
		    (ssize_t)sizeof(b) || oa_commit(f) < 0) {
			fprintf(stderr, "room writer: commit %ld: %s\n", k,
				strerror(errno));
			return 2;
		}
		__atomic_store_n(g_room_ack, (uint64_t)k, __ATOMIC_SEQ_CST);
	}
}

static void short_room_kills(const char *fp, int rounds)
{
	unsigned char b[8192];
	uint64_t seed = 4242;
	unlink(fp);
	memset(b, 'k', sizeof(b));
	snprintf((char *)b, 4096, "commit 0");
	snprintf((char *)b + 4096, 4096, "commit 1");
	tu_write_file(fp, b, sizeof(b), 0644);
	*g_room_ack = 1;
	for (int r = 0; r < rounds; r++) {
		int kp = r % 3 == 1 ? OA_KP_CKPT_TARGET :
			 r % 3 == 2 ? OA_KP_CKPT_WRITTEN : 0;
		pid_t pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			if (kp)
				oa__set_killpoint(kp);
			_exit(room_writer((void *)fp));
		}
		int st;
		pid_t w = 0;
		if (kp) {
			/* killed at the checkpoint; a backstop in case */
			for (int t = 0; t < 3000 &&
			     (w = waitpid(pid, &st, WNOHANG)) == 0; t++)
				usleep(1000);
		} else {
			usleep((useconds_t)(1000 + tu_rand(&seed) % 20000));
		}
		if (w == 0) {
			kill(pid, SIGKILL);
			w = waitpid(pid, &st, 0);
		}
		CHECK(w == pid);
		CHECKF(WIFSIGNALED(st), "round %d: the writer exited (%d), "
		       "not killed", r, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		CHECK_OK(oa_recover(fp));
		long a = (long)*g_room_ack;
		int fd = open(fp, O_RDONLY);
		CHECK(fd >= 0);
		long p = page_stamp(fd, (int)(a % 2)),
		     q = page_stamp(fd, (int)((a + 1) % 2));
		close(fd);
		CHECKF(p == a && (q == a - 1 || q == a + 1), "round %d (kill "
		       "point %d): acknowledged %ld, pages hold %ld and %ld",
		       r, kp, a, p, q);
		*g_room_ack = (uint64_t)(q == a + 1 ? a + 1 : a);
	}
}

static void test_short_room(void)
{
	few_commits(tu_path("few"));
	CHECK_CHILD_OK(tu_run_child(limited_writer, (void *)tu_path("lim")));
	const char *mnt = tu_tmpfs("two", "2m");
	if (!mnt)
		return;
	full_then_grow(tu_path("two/f"), tu_path("two/filler"));
	many_commits(tu_path("two/f"), 2000, 1);
	many_commits(tu_path("two/f"), 2000, 2);
	many_commits(tu_path("two/f"), 2000, 3);
	concurrent_writers(tu_path("two/f"), 8, 300, false);
	concurrent_writers(tu_path("two/f"), 8, 300, true);
	g_room_ack = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(g_room_ack != MAP_FAILED);
	short_room_kills(tu_path("two/k"), 90);
	munmap(g_room_ack, 4096);
	tu_tmpfs_done(mnt);
}

/* A hole made by a cut and a growth, then a write into it on a full disk:
 * the commit takes the hole's space before its commit point (giving back
 * its journal's room ahead for it, or failing with ENOSPC, the file as it
 * was and the handle usable), never EIO from an apply that found no space
 * after it.  A handle remembers how far the file has no
 * hole (commit.c, reserve_holes): its own cut lowers that (BY_OTHER false),
 * another handle's commit makes it look again (true). */
static void hole_after_cut(const char *fp, const char *filler, bool by_other)
{
	static unsigned char mb[1 << 20];
	struct oa_options jo = { .size = sizeof(jo),
				 .method = OA_METHOD_JOURNAL };
	unsigned char b[4096];
	const char *how = by_other ? "another handle's" : "its own";

	unlink(fp);
	unlink(filler);
	memset(mb, 'a', sizeof(mb));
	tu_write_file(fp, mb, sizeof(mb), 0644);
	oa_file *f = oa_open_opts(fp, O_RDWR, 0, &jo);
	CHECK(f != NULL);
	for (int i = 0; i < 3; i++) {   /* no hole: known, and room ahead */
		memset(b, 'b' + i, sizeof(b));
		tu_oa_pwrite(f, b, sizeof(b), 0);
		CHECK_OK(oa_commit(f));
	}
	oa_file *g = by_other ? oa_open_opts(fp, O_RDWR, 0, &jo) : f;
	CHECK(g != NULL);
	CHECK_OK(oa_ftruncate(g, 4096));
	CHECK_OK(oa_ftruncate(g, sizeof(mb)));   /* [4096, 1 MiB) a hole */
	CHECK_OK(oa_commit(g));
	if (g != f)
		CHECK_OK(oa_close(g));
	int fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	while (write(fd, mb, sizeof(b)) == (ssize_t)sizeof(b))
		;
	CHECK(errno == ENOSPC);
	close(fd);
	memset(b, 'z', sizeof(b));
	CHECKF(oa_pwrite(f, b, sizeof(b), 512 << 10) == (ssize_t)sizeof(b),
	       "after %s cut: write: %s", how, strerror(errno));
	/* The hole's block is taken before the commit point: the journal's
	 * room ahead given back for it (commit.c give_back_room), or ENOSPC;
	 * never EIO from an apply that finds no block after it. */
	int r = oa_commit(f);
	CHECKF(r == 0 || errno == ENOSPC, "a write into a hole %s cut made, "
	       "on a full disk: commit: %s", how, strerror(errno));
	unlink(filler);
	if (r < 0) {
		CHECK_OK(oa_abort(f));
		tu_oa_pwrite(f, b, sizeof(b), 512 << 10);
		CHECKF(oa_commit(f) == 0, "after %s cut, the disk freed: "
		       "commit: %s", how, strerror(errno));
	}
	CHECK_OK(oa_close(f));
	fd = open(fp, O_RDONLY);
	CHECK(fd >= 0);
	CHECK(pread(fd, mb, sizeof(b), 512 << 10) == (ssize_t)sizeof(b));
	CHECK_MEM(mb, b, sizeof(b));
	close(fd);
	unlink(fp);
}

static void test_full_disk(void)
{
	const char *mnt = tu_tmpfs("full", "8m");
	if (!mnt)
		return;
	full_disk_round(tu_path("full/f"), true);
	full_disk_round(tu_path("full/f"), false);
	hole_after_cut(tu_path("full/h"), tu_path("full/filler"), false);
	hole_after_cut(tu_path("full/h"), tu_path("full/filler"), true);
	tu_tmpfs_done(mnt);
}

int main(void)
{
	unsigned char *model = tu_malloc(LEN), *b = tu_malloc(LEN);
	oa_file *f, *g;

	path = tu_path("f");
	tu_fill(model, LEN, 1, 0);
	tu_write_file(path, model, LEN, 0644);

	/* One-shot update. */
	f = tu_oa_open(path, O_RDWR, 0);
	tu_fill(b, 4096, 2, 0);
	tu_oa_pwrite(f, b, 4096, 4096);
	memcpy(model + 4096, b, 4096);
	CHECK_OK(oa_commit(f));
	CHECK(tu_file_size(tu_control_path(path)) > OA_CLEAN_SIZE);
	CHECK_OK(oa_close(f));
	check_clean("one-shot update");
	CHECK_FILE(path, model, LEN, LEN);

	/* Opens that change nothing. */
	f = tu_oa_open(path, O_RDONLY, 0);
	CHECK_OA_VIEW(f, model, LEN);
	CHECK_OK(oa_close(f));
	f = tu_oa_open(path, O_RDWR, 0);
	CHECK_OA_VIEW(f, model, LEN);
	CHECK_OK(oa_close(f));
	check_clean("opens that only read");

	/* Replacement of the whole content. */
	f = tu_oa_open(path, O_RDWR, 0);
	tu_oa_pwrite(f, "{\"a\":1}\n", 8, 0);
	CHECK_OK(oa_ftruncate(f, 8));
	CHECK_OK(oa_commit(f));
	CHECK_OK(oa_close(f));
	check_clean("replacement");
	CHECK_FILE(path, "{\"a\":1}\n", 8, 8);

	/* Two handles at once: the second gets an extra journal. */
	tu_write_file(path, model, LEN, 0644);
	f = tu_oa_open(path, O_RDWR, 0);
	g = tu_oa_open(path, O_RDWR, 0);
	tu_fill(b, LEN, 3, 0);
	tu_oa_pwrite(f, b, 4096, 0);
	tu_oa_pwrite(g, b + 4096, 4096, 4096);
	CHECK_OK(oa_commit(f));
	CHECK_OK(oa_commit(g));
	memcpy(model, b, 8192);
	CHECK(access(tu_journal_path(path, 1), F_OK) == 0);
	/* Keep a copy of the extra journal with its commit in it. */
	size_t jn;
	void *old = tu_read_file(tu_journal_path(path, 1), &jn);
	CHECK_OK(oa_close(g));
	CHECK_OK(oa_close(f));
	check_clean("two writers");
	CHECK_FILE(path, model, LEN, LEN);
	/* What the old journal wrote is overwritten since. */
	tu_fill(b, 4096, 7, 0);
	tu_oa_update(path, b, 4096, 4096);
	memcpy(model + 4096, b, 4096);

	/* A killed writer, then oa_recover. */
	tu_fill(b, 4096, 4, 0);
	CHECK(tu_run_child(killed_writer, b) != 0);
	memcpy(model + 8192, b, 4096);
	CHECK(tu_file_size(tu_control_path(path)) > OA_CLEAN_SIZE);
	CHECK_OK(oa_recover(path));
	check_clean("oa_recover alone");
	CHECK_FILE(path, model, LEN, LEN);

	/* I15: the old extra journal comes back (a crash undid its removal),
	 * then a new commit, a kill, and recovery.  Its commit must not be
	 * replayed over the new one (its seq is reused in the new era). */
	tu_write_file(tu_journal_path(path, 1), old, jn, 0644);
	tu_fill(b, 4096, 5, 0);
	CHECK(tu_run_child(killed_writer, b) != 0);
	memcpy(model + 8192, b, 4096);
	tu_fill(b, 4096, 6, 0);
	CHECK(tu_run_child(killed_writer, b) != 0);
	memcpy(model + 8192, b, 4096);
	CHECK_OK(oa_recover(path));
	CHECK_FILE(path, model, LEN, LEN);
	f = tu_oa_open(path, O_RDONLY, 0);
	CHECK_OA_VIEW(f, model, LEN);
	CHECK_OK(oa_close(f));
	check_clean("an old journal put back");
	free(old);
	free(model);
	free(b);
	test_full_disk();
	test_short_room();
	return 0;
}
