/*
 * conf_group.c - GUARANTEES.md §16: oa_commit_group commits the pending
 * changes of several files as one unit, and recovery through any one of
 * them settles the group.
 *
 *  - semantics: three files in three directories change together; nothing
 *    is visible before the commit; handles with nothing pending take no
 *    part; one pending handle is oa_commit; a failed group keeps every
 *    transaction pending;
 *  - bad input: n == 0, NULL, a handle twice, two handles of one file, a
 *    read-only handle, an unlinked member, an inherited handle;
 *  - oatomic check names a group's coordinator and commit point;
 *  - a file of the group moved away before recovery: refused (EUCLEAN)
 *    from either side, settled once it is back, dropped by --discard;
 *  - the kill torture over a group: a writer rewrites the three files with
 *    the round's stamp (and a size of the round's own) and commits them as
 *    a group, again and again; it is SIGKILLed at random instants and at
 *    the group's kill points (a member's record durable, the commit point,
 *    a member checkpointed) and the commit's own.  Then ONE file, chosen at
 *    random, is recovered (oa_recover), and the three files are read with
 *    plain read(2): all three must carry one stamp, that of the last
 *    acknowledged group or of the next.  Then all are recovered and read
 *    through the library: the same.
 *
 *   conf_group [--kills N]          the tests (N: $GROUP_KILLS, else 1000;
 *                                   200 under the sanitizers)
 *   conf_group writer A B C ACKFILE [--killpoint P [--kill-after J]]
 *       the torture's writer on files A B C: acknowledges each group by
 *       a line in ACKFILE, fdatasync'd (the power cuts put it on a file
 *       system they do not cut)
 *   conf_group check A B C ACKFILE [--first I]
 *       recover file I (random: -1; 3: all three), read the three, check as
 *       above; exit 1 on a violation
 *
 * timeout: 900
 *
 * SPDX-License-Identifier: MIT
 */
#include "testutil.h"

#include <limits.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "oatomic-private.h"
#include "torture.h"

#define NF 3

/* The size of file I at stamp K: each file changes size with the rounds,
 * growing and shrinking (C: up to 264 KiB, enough for the clone and
 * exchange methods' big runs under AUTO). */
static size_t gsize(int i, uint64_t k)
{
	switch (i) {
	case 0: return 4096 + (k % 3) * 4096 + (k % 2) * 100;
	case 1: return 65536 + (k % 5) * 1000;
	default: return 270336 - (k % 7) * 4096;
	}
}

/* The stamp all three files carry, or a violation (-1, said). */
static int64_t group_stamp(const char *const paths[NF], int verbose)
{
	int64_t s = -1;
	for (int i = 0; i < NF; i++) {
		size_t n;
		unsigned char *b = tu_read_file(paths[i], &n);
		uint64_t k = n >= 8 ? tu_get_stamp(b) : UINT64_MAX;
		if (n < 8 || n != gsize(i, k) || !tu_is_stamp(b, n, k)) {
			if (verbose)
				fprintf(stderr, "%s: %zu bytes, not one stamp "
					"of the right size (first %llu)\n",
					paths[i], n, (unsigned long long)k);
			free(b);
			return -1;
		}
		free(b);
		if (s >= 0 && (uint64_t)s != k) {
			if (verbose)
				fprintf(stderr, "%s has stamp %llu, %s %lld: "
					"the group is split\n", paths[i],
					(unsigned long long)k, paths[0],
					(long long)s);
			return -1;
		}
		s = (int64_t)k;
	}
	return s;
}

/* The last acknowledged group (torture.c reads the lines). */
static uint64_t read_ack(const char *ackfile)
{
	uint64_t *v, last;
	long n = tort_read_ackfile(ackfile, &v);
	last = n > 0 ? v[n - 1] : 0;
	free(v);
	return last;
}

/* A durable acknowledgement of group K, only while every file's file
 * system is up: after an FS_IOC_SHUTDOWN cut some calls still return 0
 * without reaching the disk (torture.c), and nothing runs after a real
 * cut. */
static void ack(struct tort_acker *a, const char *const paths[NF], uint64_t k)
{
	for (int i = 1; i < NF; i++)
		tort_check_alive(paths[i]);
	tort_ack_send(a, k);
}

/* The writer: rounds K+1, K+2, ... until killed. */
static int writer(const char *const paths[NF], const char *ackfile, int kp,
		  int kill_after)
{
	oa_file *f[NF];
	struct tort_acker a = { .sync = 1, .file = paths[0] };
	a.fd = open(ackfile, O_WRONLY | O_APPEND | O_CREAT, 0644);
	if (a.fd < 0)
		return 2;
	for (int i = 0; i < NF; i++) {
		f[i] = oa_open(paths[i], O_RDWR, 0);
		if (!f[i]) {
			fprintf(stderr, "writer: oa_open %s: %s\n", paths[i],
				strerror(errno));
			return 2;
		}
	}
	unsigned char *b = malloc(gsize(2, 0) + 65536);
	uint64_t k;
	if (!b || oa_pread(f[0], b, 8, 0) != 8)
		return 2;
	k = tu_get_stamp(b);
	/* the state found (the previous writer's unacknowledged group, if it
	 * committed) is where the acknowledgements go on from */
	ack(&a, paths, k);
	for (int round = 0;; round++) {
		k++;
		for (int i = 0; i < NF; i++) {
			size_t n = gsize(i, k);
			tu_fill_stamp(b, n, k);
			if (oa_pwrite(f[i], b, n, 0) != (ssize_t)n ||
			    oa_ftruncate(f[i], (off_t)n) < 0)
				return 2;
		}
		if (kp && round == kill_after)
			oa__set_killpoint(kp);
		/* a different order of handles every round: the library
		 * orders them itself */
		oa_file *g[NF] = { f[k % 3], f[(k + 1) % 3], f[(k + 2) % 3] };
		if (k % 2)
			g[1] = f[(k + 2) % 3], g[2] = f[(k + 1) % 3];
		if (oa_commit_group(g, NF) < 0) {
			fprintf(stderr, "writer: oa_commit_group: %s\n",
				strerror(errno));
			return 2;
		}
		ack(&a, paths, k);
	}
}

/* After a crash: recover one file (FIRST, or one at random), then read
 * the three with read(2).  0, or 1 on a violation (said). */
static int check(const char *const paths[NF], const char *ackfile, int first,
		 uint64_t *seed)
{
	uint64_t ack = read_ack(ackfile);
	if (first < 0)
		first = (int)(tu_rand(seed) % NF);
	/* FIRST == NF: every file recovered before the first read */
	for (int i = first < NF ? first : 0; i < (first < NF ? first + 1 : NF);
	     i++)
		if (oa_recover(paths[i]) < 0) {
			fprintf(stderr, "oa_recover %s: %s\n", paths[i],
				strerror(errno));
			return 1;
		}
	int64_t s = group_stamp(paths, 1);
	if (s < 0 || (uint64_t)s < ack || (uint64_t)s > ack + 1) {
		fprintf(stderr, "after recovering %s: stamp %lld, last "
			"acknowledged %llu\n", first < NF ? paths[first] :
			"every file", (long long)s, (unsigned long long)ack);
		return 1;
	}
	/* every file recovered, read through the library: the same */
	for (int i = 0; i < NF; i++) {
		if (oa_recover(paths[i]) < 0) {
			fprintf(stderr, "oa_recover %s: %s\n", paths[i],
				strerror(errno));
			return 1;
		}
		oa_file *f = oa_open(paths[i], O_RDONLY, 0);
		size_t n;
		unsigned char *b;
		if (!f) {
			fprintf(stderr, "oa_open %s: %s\n", paths[i],
				strerror(errno));
			return 1;
		}
		b = tu_oa_read_all(f, &n);
		oa_close(f);
		if (n != gsize(i, (uint64_t)s) || !tu_is_stamp(b, n, (uint64_t)s)) {
			fprintf(stderr, "%s through the library: not stamp "
				"%lld\n", paths[i], (long long)s);
			free(b);
			return 1;
		}
		free(b);
	}
	if (group_stamp(paths, 1) != s)
		return 1;
	return 0;
}

static void init_files(const char *const paths[NF])
{
	for (int i = 0; i < NF; i++) {
		size_t n = gsize(i, 0);
		unsigned char *b = malloc(n);
		tu_fill_stamp(b, n, 0);
		tu_write_file(paths[i], b, n, 0644);
		free(b);
	}
}

/* ---- semantics ---- */

static const char *P[NF];

static void test_basic(void)
{
	oa_file *f[NF];
	for (int i = 0; i < NF; i++)
		f[i] = tu_oa_open(P[i], O_RDWR, 0);
	for (int round = 1; round <= 4; round++) {
		for (int i = 0; i < NF; i++) {
			size_t n = gsize(i, (uint64_t)round);
			unsigned char *b = malloc(n);
			tu_fill_stamp(b, n, (uint64_t)round);
			tu_oa_pwrite(f[i], b, n, 0);
			CHECK_OK(oa_ftruncate(f[i], (off_t)n));
			free(b);
		}
		/* nothing visible before the commit */
		CHECK_EQ(group_stamp(P, 1), round - 1);
		CHECK_OK(oa_commit_group(f, NF));
		CHECK_EQ(group_stamp(P, 1), round);
	}
	/* handles with nothing pending take no part */
	CHECK_OK(oa_commit_group(f, NF));
	CHECK_EQ(group_stamp(P, 1), 4);
	/* one pending handle: an oa_commit */
	unsigned char x = 0xa5;
	tu_oa_pwrite(f[1], &x, 1, 70000);
	CHECK_OK(oa_commit_group(f, NF));
	CHECK_EQ(tu_file_size(P[1]), 70001);
	CHECK_OK(oa_ftruncate(f[1], (off_t)gsize(1, 4)));
	CHECK_OK(oa_commit(f[1]));
	for (int i = 0; i < NF; i++)
		CHECK_OK(oa_close(f[i]));
	/* the last close left the files clean, group or not */
	for (int i = 0; i < NF; i++)
		CHECK_EQ(oa__check(P[i], NULL, NULL), 0);
}

static void test_errors(void)
{
	oa_file *f[NF], *g[2];
	CHECK_OK(oa_commit_group(NULL, 0));
	CHECK_ERR(oa_commit_group(NULL, 2), EFAULT);
	for (int i = 0; i < NF; i++)
		f[i] = tu_oa_open(P[i], O_RDWR, 0);
	unsigned char x = 1;
	tu_oa_pwrite(f[0], &x, 1, 0);
	tu_oa_pwrite(f[1], &x, 1, 0);
	/* one handle twice, two handles of one file */
	g[0] = f[0];
	g[1] = f[0];
	CHECK_ERR(oa_commit_group(g, 2), EINVAL);
	oa_file *dup = tu_oa_open(P[0], O_RDWR, 0);
	g[1] = dup;
	CHECK_ERR(oa_commit_group(g, 2), EINVAL);
	CHECK_OK(oa_close(dup));
	/* a NULL handle */
	g[1] = NULL;
	CHECK_ERR(oa_commit_group(g, 2), EBADF);
	/* nothing was committed by the refusals, and nothing was lost */
	CHECK_EQ(group_stamp(P, 1), 4);
	/* a read-only handle with nothing pending takes no part */
	oa_file *ro = tu_oa_open(P[2], O_RDONLY, 0);
	oa_file *h[3] = { f[0], ro, f[1] };
	/* an unlinked member with changes has no name for recovery */
	const char *gone = tu_path("d1/gone");
	tu_write_file(gone, "abc", 3, 0644);
	oa_file *u = tu_oa_open(gone, O_RDWR, 0);
	tu_oa_pwrite(u, "x", 1, 0);
	CHECK(unlink(gone) == 0);
	oa_file *hu[2] = { f[0], u };
	CHECK_ERR(oa_commit_group(hu, 2), ENOENT);
	CHECK_OK(oa_close(u));
	CHECK_OK(oa_commit_group(h, 3));
	size_t n;
	unsigned char *b = tu_read_file(P[0], &n);
	CHECK_EQ(b[0], 1);
	free(b);
	b = tu_read_file(P[1], &n);
	CHECK_EQ(b[0], 1);
	free(b);
	/* an inherited handle is the parent's: EBADF in the child */
	tu_oa_pwrite(f[0], &x, 1, 1);
	pid_t pid = fork();
	if (pid == 0) {
		oa_file *c[2] = { f[0], f[1] };
		_exit(oa_commit_group(c, 2) == -1 && errno == EBADF ? 0 : 1);
	}
	CHECK_CHILD_OK(tu_wait(pid));
	CHECK_OK(oa_abort(f[0]));
	CHECK_OK(oa_close(ro));
	for (int i = 0; i < NF; i++)
		CHECK_OK(oa_close(f[i]));
	init_files(P);
}

/* ---- a member out of reach ---- */

static int crash_decided(void *arg)
{
	(void)arg;
	oa_file *f[NF];
	for (int i = 0; i < NF; i++) {
		size_t n = gsize(i, 7);
		unsigned char *b = malloc(n);
		f[i] = oa_open(P[i], O_RDWR, 0);
		if (!f[i] || !b)
			return 2;
		tu_fill_stamp(b, n, 7);
		if (oa_pwrite(f[i], b, n, 0) != (ssize_t)n ||
		    oa_ftruncate(f[i], (off_t)n) < 0)
			return 2;
	}
	/* dies at the commit point: decided, nothing applied */
	oa__set_killpoint(OA_KP_GROUP_DECIDED);
	oa_commit_group(f, NF);
	return 3;
}

/* The coordinator: the member first in file-system and inode order. */
static int coordinator(void)
{
	struct stat st;
	int c = 0;
	dev_t dev = 0;
	ino_t ino = 0;
	for (int i = 0; i < NF; i++) {
		CHECK(stat(P[i], &st) == 0);
		if (i == 0 || st.st_dev < dev ||
		    (st.st_dev == dev && st.st_ino < ino)) {
			dev = st.st_dev;
			ino = st.st_ino;
			c = i;
		}
	}
	return c;
}

static void crash_at_decision(void)
{
	init_files(P);
	int st = tu_run_child(crash_decided, NULL);
	CHECKF(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
	       "the writer did not die at the commit point: %s",
	       tu_status_str(st));
}

/* Recovery finds the other files by the paths they had at the commit: one
 * moved away is refused (EUCLEAN), never guessed, from either side; back
 * in place, recovery through one file settles the group; --discard drops
 * the part of a member whose coordinator is out of reach. */
static void test_unreachable(void)
{
	char moved[PATH_MAX];
	int c = coordinator(), m = (c + 1) % NF;

	/* oatomic check says which file decides a member's record */
	crash_at_decision();
	for (int i = 0; i < NF; i++) {
		char *say = NULL;
		size_t slen = 0;
		FILE *out = open_memstream(&say, &slen);
		CHECK_EQ(oa__check(P[i], NULL, out), 1);
		fclose(out);
		CHECKF(strstr(say, i == c ? "the commit point of group"
					  : "is part of group"),
		       "oatomic check on %s said: %s", P[i], say);
		free(say);
	}
	for (int i = 0; i < NF; i++)
		CHECK_OK(oa_recover(P[i]));

	/* the coordinator moved: its member is refused */
	crash_at_decision();
	snprintf(moved, sizeof(moved), "%s.moved", P[c]);
	CHECK(rename(P[c], moved) == 0);
	CHECK_ERR(oa_recover(P[m]), EUCLEAN);
	CHECK_NULL_ERR(oa_open(P[m], O_RDWR, 0), EUCLEAN);
	CHECK(rename(moved, P[c]) == 0);
	CHECK_OK(oa_recover(P[m]));
	CHECK_EQ(group_stamp(P, 1), 7);   /* the whole group, through m */

	/* a member moved: the coordinator is refused */
	crash_at_decision();
	snprintf(moved, sizeof(moved), "%s.moved", P[m]);
	CHECK(rename(P[m], moved) == 0);
	CHECK_ERR(oa_recover(P[c]), EUCLEAN);
	CHECK(rename(moved, P[m]) == 0);
	CHECK_OK(oa_recover(P[c]));
	CHECK_EQ(group_stamp(P, 1), 7);

	/* --discard drops the part of the member that cannot ask */
	crash_at_decision();
	snprintf(moved, sizeof(moved), "%s.moved", P[c]);
	CHECK(rename(P[c], moved) == 0);
	char *say = NULL;
	size_t slen = 0;
	FILE *out = open_memstream(&say, &slen);
	CHECK_OK(oa__recover_ex(P[m], NULL, OA__RECOVER_DISCARD, out));
	fclose(out);
	CHECKF(say && strstr(say, "dropped"), "recover --discard said: %s",
	       say ? say : "(nothing)");
	free(say);
	size_t n;
	unsigned char *b = tu_read_file(P[m], &n);
	CHECK(n == gsize(m, 0) && tu_is_stamp(b, n, 0));
	free(b);
	CHECK(rename(moved, P[c]) == 0);
	for (int i = 0; i < NF; i++)
		CHECK_OK(oa_recover(P[i]));
	init_files(P);
}

/* ---- the kill torture ---- */

struct wargs {
	int kp, after;
	const char *ack;
};

static int run_writer(void *arg)
{
	struct wargs *w = arg;
	return writer(P, w->ack, w->kp, w->after);
}

static void torture(int kills)
{
	static const int kps[] = { 0, 0, 0, OA_KP_RECORD_WRITTEN,
				   OA_KP_FLUSHED, OA_KP_APPLIED,
				   OA_KP_GROUP_MEMBER, OA_KP_GROUP_DECIDED,
				   OA_KP_GROUP_SETTLED };
	uint64_t seed = tu_seed();
	const char *ack = tu_path("ack");
	int bad = 0;
	unlink(ack);
	init_files(P);
	for (int r = 0; r < kills && !bad; r++) {
		struct wargs w = {
			.kp = kps[tu_rand(&seed) % (sizeof(kps) / sizeof(*kps))],
			.after = (int)(tu_rand(&seed) % 3),
			.ack = ack,
		};
		pid_t pid = tu_fork(run_writer, &w);
		int st;
		if (w.kp == 0) {
			struct timespec ts = { 0, (long)(tu_rand(&seed) % 20000000) };
			nanosleep(&ts, NULL);
			kill(pid, SIGKILL);
		}
		st = tu_wait(pid);
		if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
			fprintf(stderr, "round %d: the writer ended %s\n", r,
				tu_status_str(st));
			bad = 1;
			break;
		}
		if (check(P, ack, -1, &seed)) {
			fprintf(stderr, "round %d (kill point %d after %d): "
				"VIOLATION\n", r, w.kp, w.after);
			bad = 1;
		}
	}
	CHECKF(!bad, "the group torture found a violation (seed above)");
	tu_note("group kill torture: %d kills, 0 violations, last "
		"acknowledged group %llu", kills,
		(unsigned long long)read_ack(ack));
}

int main(int argc, char **argv)
{
	if (argc >= 6 && !strcmp(argv[1], "writer")) {
		int kp = 0, after = 0;
		for (int i = 6; i + 1 < argc; i += 2) {
			if (!strcmp(argv[i], "--killpoint"))
				kp = atoi(argv[i + 1]);
			else if (!strcmp(argv[i], "--kill-after"))
				after = atoi(argv[i + 1]);
		}
		const char *p[NF] = { argv[2], argv[3], argv[4] };
		return writer(p, argv[5], kp, after);
	}
	if (argc >= 6 && !strcmp(argv[1], "check")) {
		const char *p[NF] = { argv[2], argv[3], argv[4] };
		int first = argc >= 8 && !strcmp(argv[6], "--first")
				    ? atoi(argv[7]) : -1;
		uint64_t seed = tu_seed();
		return check(p, argv[5], first, &seed);
	}
	if (argc >= 3 && !strcmp(argv[1], "init")) {
		const char *p[NF] = { argv[2], argv[3], argv[4] };
		init_files(p);
		return 0;
	}
	int kills = TU_ASAN ? 200 : 1000;
	if (getenv("GROUP_KILLS"))
		kills = atoi(getenv("GROUP_KILLS"));
	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "--kills"))
			kills = atoi(argv[i + 1]);
	CHECK(mkdir(tu_path("d1"), 0755) == 0);
	CHECK(mkdir(tu_path("d2"), 0755) == 0);
	CHECK(mkdir(tu_path("d3"), 0755) == 0);
	P[0] = strdup(tu_path("d1/alpha"));
	P[1] = strdup(tu_path("d2/beta"));
	P[2] = strdup(tu_path("d3/gamma"));
	init_files(P);
	test_basic();
	test_errors();
	test_unreachable();
	torture(kills);
	for (int i = 0; i < NF; i++)
		free((char *)P[i]);
	tu_note("conf_group: PASS");
	return 0;
}
