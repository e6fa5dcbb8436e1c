/*
 * conf_gcommit.c - group commit: concurrent commits of one file by threads
 * of one process share a flush (src/gcommit.c, invariants B1-B5).
 *
 *  1. 8 threads, each with its own handle, commit stamps into two pages of
 *     their own (one transaction: both pages); a reader thread checks that
 *     every pair it reads is one commit; at the end each thread's pages
 *     hold its last stamp, and the library made fewer flushes than commits
 *     (batches ran).  With OATOMIC_GROUP_COMMIT=0: a flush per commit.
 *     Again with a third of the threads storing through oa_mmap and a
 *     third truncating in every transaction (never batched).
 *  2. A process of 8 such threads, SIGKILLed at random moments (200
 *     rounds; GC_KILLS): after recovery each thread's pages hold the stamp
 *     the thread last saw acknowledged, or the next one, and both the same
 *     (B1: nothing acknowledged before its batch is durable).
 *  3. A full file system (a 40 MiB tmpfs): threads grow the file until
 *     ENOSPC; after a reopen every commit that returned 0 is in the file,
 *     and nothing of one that failed (B3: a batch that fails before its
 *     commit point leaves each transaction to commit, or fail, alone).
 *  4. A file its writers may not read (mode 0200: the combiner cannot be
 *     opened): the commits still succeed, one at a time.
 *  5. fork while threads commit: the child opens the file and commits
 *     (no lock of the parent's held in it), and the parent goes on.
 *
 * SPDX-License-Identifier: MIT
 */
#include "testutil.h"
#include "oatomic-private.h"
#include "torture.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define NT      8
#define PG      4096
#define NCOMMIT 150
#define STAMP(t, k) (0x4743000000000000ull | ((uint64_t)(t) << 32) | \
		     (uint64_t)(k))

static const char *path;
static int wr_flags = O_RDWR;   /* the writers' open */
static _Atomic int stop_reader;

/* Thread T's two pages: T and NT + T. */
static off_t page_a(int t) { return (off_t)t * PG; }
static off_t page_b(int t) { return (off_t)(NT + t) * PG; }

static void prepare(const char *p)
{
	void *z = tu_zalloc(2 * NT * PG);
	tu_write_file(p, z, 2 * NT * PG, 0644);
	free(z);
}

struct wr {
	int t;
	int n;
	_Atomic uint64_t *ack;   /* last stamp acknowledged, or NULL */
	int how;                 /* W_* */
};
enum { W_WRITE, W_MAP, W_TRUNC };
static int mixed;                /* threads write W_WRITE, W_MAP, W_TRUNC by
				  * turns (test_mixed) */
static uint64_t stamp_base;      /* the round, in the writer mode */
static bool ack_alive;           /* ack only while the file system is up */

static void *writer(void *arg)
{
	struct wr *w = arg;
	unsigned char *buf = tu_malloc(PG);
	oa_file *f = tu_oa_open_at(__FILE__, __LINE__, path, wr_flags, 0);
	unsigned char *m = NULL;
	if (w->how == W_MAP) {
		m = oa_mmap(f, 2 * NT * PG, PROT_READ | PROT_WRITE, 0);
		CHECK(m != MAP_FAILED);
	}
	for (int k = 1; k <= w->n; k++) {
		uint64_t s = STAMP(w->t, stamp_base + (uint64_t)k);
		tu_fill_stamp(buf, PG, s);
		if (m) {
			/* stores: pending like writes, committed with them */
			memcpy(m + page_a(w->t), buf, PG);
			memcpy(m + page_b(w->t), buf, PG);
		} else {
			tu_oa_pwrite_at(__FILE__, __LINE__, f, buf, PG,
					page_a(w->t));
			tu_oa_pwrite_at(__FILE__, __LINE__, f, buf, PG,
					page_b(w->t));
		}
		if (w->how == W_TRUNC)   /* never batched: commits alone */
			CHECK_OK(oa_ftruncate(f, 2 * NT * PG));
		CHECK_OK(oa_commit(f));
		if (ack_alive)
			tort_check_alive(path);   /* (a cut: calls may return 0
						   * and reach no disk) */
		if (w->ack)
			atomic_store(&w->ack[w->t], s);
	}
	if (m)
		CHECK_OK(oa_munmap(f, m, 2 * NT * PG));
	CHECK_OK(oa_close(f));
	free(buf);
	return NULL;
}

/* Every pair read through another handle is one commit. */
static void *reader(void *arg)
{
	/* one read of both pages of a thread: B follows A by NT pages */
	size_t len = (size_t)(NT + 1) * PG;
	unsigned char *both = tu_malloc(len);
	oa_file *f = tu_oa_open_at(__FILE__, __LINE__, path, O_RDONLY, 0);
	(void)arg;
	while (!atomic_load(&stop_reader)) {
		for (int t = 0; t < NT; t++) {
			unsigned char *b = both + (size_t)NT * PG;
			tu_oa_pread_at(__FILE__, __LINE__, f, both, len,
				       page_a(t));
			uint64_t s = tu_get_stamp(both);
			CHECKF(tu_is_stamp(both, PG, s) && tu_is_stamp(b, PG, s),
			       "thread %d: pages of two commits read at once "
			       "(%#llx, %#llx)", t, (unsigned long long)s,
			       (unsigned long long)tu_get_stamp(b));
		}
	}
	CHECK_OK(oa_close(f));
	free(both);
	return NULL;
}

static void run_threads(int n, _Atomic uint64_t *ack, bool with_reader)
{
	pthread_t th[NT], rd;
	struct wr w[NT];
	atomic_store(&stop_reader, 0);
	if (with_reader)
		CHECK(pthread_create(&rd, NULL, reader, NULL) == 0);
	for (int t = 0; t < NT; t++) {
		w[t] = (struct wr){ .t = t, .n = n, .ack = ack,
				    .how = mixed ? t % 3 : W_WRITE };
		CHECK(pthread_create(&th[t], NULL, writer, &w[t]) == 0);
	}
	for (int t = 0; t < NT; t++)
		pthread_join(th[t], NULL);
	atomic_store(&stop_reader, 1);
	if (with_reader)
		pthread_join(rd, NULL);
}

static void check_final(int n)
{
	size_t len;
	unsigned char *d = tu_read_file(path, &len);
	CHECK_EQ(len, (size_t)(2 * NT * PG));
	for (int t = 0; t < NT; t++) {
		CHECKF(tu_is_stamp(d + page_a(t), PG, STAMP(t, n)) &&
		       tu_is_stamp(d + page_b(t), PG, STAMP(t, n)),
		       "thread %d: its last commit is not in the file", t);
	}
	free(d);
}

static void test_batches(void)
{
	struct oa_stats st;
	path = tu_path("batches");
	prepare(path);
	oa__stats_reset();
	run_threads(NCOMMIT, NULL, true);
	oa__stats_get(&st);
	check_final(NCOMMIT);
	tu_note("%d commits by %d threads: %llu flushes", NT * NCOMMIT, NT,
		(unsigned long long)st.flushes);
	const char *off = getenv("OATOMIC_GROUP_COMMIT");
	CHECKF((off && off[0] == '0') ||
	       st.flushes < (uint64_t)NT * NCOMMIT * 3 / 4,
	       "%llu flushes for %d commits: no batches",
	       (unsigned long long)st.flushes, NT * NCOMMIT);
	/* the last close left the control file clean, and no journal: the
	 * combiner's went with the rest */
	CHECK_EQ(tu_file_size(tu_control_path(path)), 512);
	CHECK_EQ(tu_count_journals(path), 1);
}

/* Stores through mappings and transactions that truncate (which commit
 * alone) among the batched ones. */
static void test_mixed(void)
{
	path = tu_path("mixed");
	prepare(path);
	mixed = 1;
	run_threads(NCOMMIT, NULL, true);
	mixed = 0;
	check_final(NCOMMIT);
}

/* ---- 2: kills ---- */

static _Atomic uint64_t *acks;   /* shared with the child */

static int kill_child(void *arg)
{
	(void)arg;
	run_threads(1 << 20, acks, false);   /* until killed */
	return 0;
}

static void test_kills(void)
{
	int rounds = getenv("GC_KILLS") ? atoi(getenv("GC_KILLS")) : 200;
	uint64_t seed = tu_seed();
	path = tu_path("kills");
	prepare(path);
	acks = mmap(NULL, NT * sizeof(*acks), PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(acks != MAP_FAILED);
	for (int r = 0; r < rounds; r++) {
		uint64_t last[NT];
		unsigned char *d;
		size_t len;
		/* what the file holds now is what the child starts from:
		 * its stamps count on from 1 again, so the acks start at 0 */
		for (int t = 0; t < NT; t++)
			atomic_store(&acks[t], 0);
		pid_t pid = tu_fork(kill_child, NULL);
		usleep((useconds_t)(2000 + tu_rand(&seed) % 40000));
		kill(pid, SIGKILL);
		int st = tu_wait(pid);
		CHECKF(WIFSIGNALED(st), "round %d: the writers ended: %s", r,
		       tu_status_str(st));
		for (int t = 0; t < NT; t++)
			last[t] = atomic_load(&acks[t]);
		CHECK_OK(oa_recover(path));
		d = tu_read_file(path, &len);
		CHECK_EQ(len, (size_t)(2 * NT * PG));
		for (int t = 0; t < NT; t++) {
			uint64_t s = tu_get_stamp(d + page_a(t));
			CHECKF(tu_is_stamp(d + page_a(t), PG, s) &&
			       tu_is_stamp(d + page_b(t), PG, s),
			       "round %d, thread %d: the pages hold two "
			       "commits (%#llx, %#llx)", r, t,
			       (unsigned long long)s,
			       (unsigned long long)tu_get_stamp(d + page_b(t)));
			if (last[t] == 0)
				continue;   /* nothing acknowledged this round */
			CHECKF(s == last[t] || s == last[t] + 1,
			       "round %d, thread %d: commit %#llx was "
			       "acknowledged, the file holds %#llx", r, t,
			       (unsigned long long)last[t],
			       (unsigned long long)s);
		}
		free(d);
	}
	munmap(acks, NT * sizeof(*acks));
}

/* ---- 3: a full file system ---- */

#define CHUNK (256 << 10)
#define SPAN  (64 << 20)   /* each thread's region of the file */

struct fw {
	int t;
	int ok;              /* chunks committed */
};

static void *filler(void *arg)
{
	struct fw *w = arg;
	unsigned char *buf = tu_malloc(CHUNK);
	oa_file *f = tu_oa_open_at(__FILE__, __LINE__, path, O_RDWR, 0);
	for (int k = 0;; k++) {
		tu_fill_stamp(buf, CHUNK, STAMP(w->t, k + 1));
		if (oa_pwrite(f, buf, CHUNK, (off_t)w->t * SPAN +
			      (off_t)k * CHUNK) != CHUNK) {
			CHECKF(errno == ENOSPC || errno == EFBIG,
			       "write: %s", tu_errname(errno));
			CHECK_OK(oa_abort(f));
			break;
		}
		if (oa_commit(f) < 0) {
			CHECKF(errno == ENOSPC, "commit: %s",
			       tu_errname(errno));
			CHECK_OK(oa_abort(f));
			break;
		}
		w->ok = k + 1;
	}
	CHECK_OK(oa_close(f));
	free(buf);
	return NULL;
}

static void test_full(void)
{
	const char *mnt = tu_tmpfs("full", "40m");
	pthread_t th[4];
	struct fw w[4];
	char p[4096];
	if (!mnt)
		return;
	snprintf(p, sizeof(p), "%s/f", mnt);
	path = p;
	tu_write_file(path, "", 0, 0644);
	for (int t = 0; t < 4; t++) {
		w[t] = (struct fw){ .t = t };
		CHECK(pthread_create(&th[t], NULL, filler, &w[t]) == 0);
	}
	for (int t = 0; t < 4; t++)
		pthread_join(th[t], NULL);
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	unsigned char *buf = tu_malloc(CHUNK);
	int total = 0;
	for (int t = 0; t < 4; t++) {
		/* every chunk committed is there; the next is not */
		for (int k = 0; k <= w[t].ok; k++) {
			off_t at = (off_t)t * SPAN + (off_t)k * CHUNK;
			ssize_t n = pread(fd, buf, CHUNK, at);
			if (k < w[t].ok)
				CHECKF(n == CHUNK &&
				       tu_is_stamp(buf, CHUNK, STAMP(t, k + 1)),
				       "thread %d: chunk %d committed, not in "
				       "the file", t, k);
			else
				CHECKF(n <= 0 || !tu_is_stamp(buf, CHUNK,
							      STAMP(t, k + 1)),
				       "thread %d: chunk %d failed, and is in "
				       "the file", t, k);
		}
		total += w[t].ok;
	}
	close(fd);
	free(buf);
	tu_note("full: %d chunks of 256 KiB committed before ENOSPC", total);
	CHECK(total > 0);
	tu_tmpfs_done(mnt);
}

/* ---- 4: a write-only file ---- */

static int write_only_child(void *arg)
{
	(void)arg;
	if (tu_is_root() && (setgid(65534) < 0 || setuid(65534) < 0)) {
		tu_note("write-only: cannot become nobody");
		return 0;
	}
	prepare(path);
	CHECK_OK(chmod(path, 0200));
	wr_flags = O_WRONLY;
	run_threads(20, NULL, false);
	CHECK_OK(chmod(path, 0600));
	check_final(20);
	return 0;
}

static void test_write_only(void)
{
	/* root reads every file: the writers run as nobody, in a directory
	 * of their own */
	const char *d = tu_path("wo");
	CHECK_OK(chmod(tu_dir(), 0711));   /* (the scratch directory) */
	CHECK_OK(mkdir(d, 0777));
	CHECK_OK(chmod(d, 0777));
	path = tu_path("wo/f");
	CHECK_CHILD_OK(tu_run_child(write_only_child, NULL));
}

/* ---- 5: fork ---- */

static int fork_child(void *arg)
{
	(void)arg;
	const char *p = tu_path("forked");
	prepare(p);
	path = p;
	run_threads(10, NULL, false);
	check_final(10);
	return 0;
}

static void *fork_loop(void *arg)
{
	(void)arg;
	for (int i = 0; i < 5; i++) {
		usleep(3000);
		CHECK_CHILD_OK(tu_run_child(fork_child, NULL));
	}
	return NULL;
}

static void test_fork(void)
{
	pthread_t fl;
	if (TU_ASAN) {
		/* the sanitizers' allocator is not fork-safe: a child that
		 * allocates after a fork taken while another thread held its
		 * lock waits for ever (seen: gcc 12's libasan) */
		tu_note("fork while threads commit: not under the sanitizers");
		return;
	}
	path = tu_path("parent");
	prepare(path);
	CHECK(pthread_create(&fl, NULL, fork_loop, NULL) == 0);
	run_threads(NCOMMIT, NULL, false);
	pthread_join(fl, NULL);
	path = tu_path("parent");
	check_final(NCOMMIT);
}

/* ---- the writer and the check of powercut_gcommit.sh ---- */

/* The acknowledgements: NT stamps in a file outside the mounts that are
 * cut, mapped shared (the writer is killed, the machine is not). */
static _Atomic uint64_t *ack_file(const char *p)
{
	int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	CHECK(fd >= 0);
	/* the stamps, then (the processes' writer) each writer's pid */
	CHECK_OK(ftruncate(fd, 2 * NT * sizeof(uint64_t)));
	void *m = mmap(NULL, 2 * NT * sizeof(uint64_t),
		       PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(m != MAP_FAILED);
	close(fd);
	return m;
}

/* The writer as NT processes, each one writer with its own handle (their
 * commits share flushes through src/xcommit.c): they die with this one,
 * which the power-cut script kills. */
static void run_processes(_Atomic uint64_t *ack)
{
	pid_t me = getpid();
	for (int t = 0; t < NT; t++) {
		pid_t p = fork();
		CHECK(p >= 0);
		if (p == 0) {
			tu_die_with_parent(me);
			struct wr w = { .t = t, .n = 1 << 23, .ack = ack,
					.how = W_WRITE };
			writer(&w);
			_exit(0);
		}
		atomic_store(&ack[NT + t], (uint64_t)p);
	}
	for (int t = 0; t < NT; t++) {
		int st;
		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
			_exit(1);
	}
}

/* The processes of a killed writer go with it, each at its own pace:
 * wait until none is left (a zombie is gone enough: its handle closed). */
static void wait_gone(_Atomic uint64_t *a)
{
	for (int t = 0; t < NT; t++) {
		pid_t p = (pid_t)atomic_load(&a[NT + t]);
		for (int n = 0; p > 0 && n < 500; n++) {
			char path_[64], st = 0;
			snprintf(path_, sizeof(path_), "/proc/%d/stat", (int)p);
			FILE *fp = fopen(path_, "r");
			if (!fp)
				break;
			int r = fscanf(fp, "%*d %*s %c", &st);
			fclose(fp);
			if (r != 1 || st == 'Z' || st == 'X')
				break;
			usleep(10000);
		}
	}
}

/* Recover FILE and check it against the acknowledgements: 0, or 1 with
 * what is wrong on standard error. */
static int check_mode(const char *file, const char *ackp)
{
	_Atomic uint64_t *a = ack_file(ackp);
	unsigned char *d;
	size_t len;
	int bad = 0;
	wait_gone(a);
	if (oa_recover(file) < 0) {
		fprintf(stderr, "recover %s: %s\n", file, strerror(errno));
		return 1;
	}
	d = tu_read_file(file, &len);
	if (len != (size_t)(2 * NT * PG)) {
		fprintf(stderr, "%s: %zu bytes\n", file, len);
		return 1;
	}
	for (int t = 0; t < NT; t++) {
		uint64_t s = tu_get_stamp(d + page_a(t)), k = atomic_load(&a[t]);
		if (!tu_is_stamp(d + page_a(t), PG, s) ||
		    !tu_is_stamp(d + page_b(t), PG, s)) {
			fprintf(stderr, "thread %d: two commits in its pages "
				"(%#llx, %#llx)\n", t, (unsigned long long)s,
				(unsigned long long)tu_get_stamp(d + page_b(t)));
			bad = 1;
		} else if (k && s != k && s != k + 1) {
			fprintf(stderr, "thread %d: %#llx acknowledged, the "
				"file holds %#llx\n", t, (unsigned long long)k,
				(unsigned long long)s);
			bad = 1;
		}
	}
	free(d);
	int acked = 0;
	for (int t = 0; t < NT; t++)
		acked += atomic_load(&a[t]) != 0;
	printf("%d\n", acked);   /* threads with a commit acknowledged */
	return bad;
}

int main(int argc, char **argv)
{
	/* helper modes: init FILE | writer FILE ACKFILE ROUND [processes] |
	 * check FILE ACKFILE */
	if (argc == 3 && !strcmp(argv[1], "init")) {
		prepare(argv[2]);
		return 0;
	}
	if ((argc == 5 || argc == 6) && !strcmp(argv[1], "writer")) {
		path = argv[2];
		acks = ack_file(argv[3]);
		for (int t = 0; t < 2 * NT; t++)
			atomic_store(&acks[t], 0);
		stamp_base = strtoull(argv[4], NULL, 10) << 24;
		ack_alive = true;
		tu_pin_journal();
		if (argc == 6 && !strcmp(argv[5], "processes"))
			run_processes(acks);   /* until killed */
		else
			run_threads(1 << 23, acks, false);   /* until killed */
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "check"))
		return check_mode(argv[2], argv[3]);

	tu_alarm(240);
	tu_pin_journal();
	test_batches();
	test_mixed();
	test_kills();
	test_full();
	test_write_only();
	test_fork();
	return 0;
}
