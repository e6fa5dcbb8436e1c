/*
 * conf_xcommit.c - commits of several processes to one file share a flush
 * (src/xcommit.c, invariants X1-X6).
 *
 *  1. 6 processes, each with its own handle, commit stamps into two pages
 *     of their own (150 commits each); at the end each process's pages
 *     hold its last stamp, other processes' commits rode in batches
 *     (xp_members > 0) and the processes together made fewer flushes than
 *     commits; with OATOMIC_GROUP_COMMIT=0, a flush per commit and no
 *     batch.  The control file is clean after the last close.
 *  2. A leader dies: the test holds COMMIT (the control file's lock byte
 *     0) while a follower F publishes its commit and a leader L (a
 *     transaction of more extents than a slot holds: it cannot follow)
 *     waits for COMMIT; the test lets go, L takes F's slot and is killed
 *     at a kill point: after it merged F (nothing written), after its
 *     dirty marker, after its commit record, after its flush, after its
 *     apply.  F's oa_commit must return 0 and F's page hold F's stamp;
 *     L's pages hold L's stamps if and only if its commit record was
 *     written (recovery completes it), else what they held.  Planted:
 *     mutant 59 (a dead leader's members settled OK whatever recovery
 *     found: F acknowledged without its bytes) and 60 (a slot found taken
 *     by a dead leader taken for committed).
 *  3. A follower dies while it waits in its slot: another process's commit
 *     after it goes through, and the dead one's page holds its old stamp
 *     or its new one, never another's.
 *
 * SPDX-License-Identifier: MIT
 */
#include "testutil.h"
#include "oatomic-private.h"
#include "format.h"
#include "sys.h"

#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define NP      6
#define PG      4096
#define NCOMMIT 150
#define STAMP(p, k) (0x5843000000000000ull | ((uint64_t)(p) << 32) | \
		     (uint64_t)(k))

static const char *path;

/* Process P's two pages: P and NP + P. */
static off_t page_a(int p) { return (off_t)p * PG; }
static off_t page_b(int p) { return (off_t)(NP + p) * PG; }
/* The leader's pages of part 2: 12 scattered 256-byte pieces. */
#define LPAGE0 (4 * NP)
#define LPIECES 12

static void prepare(void)
{
	void *z = tu_zalloc((LPAGE0 + 2 * LPIECES) * PG);
	tu_write_file(path, z, (LPAGE0 + 2 * LPIECES) * PG, 0644);
	free(z);
}

static uint64_t read_stamp(int fd, off_t off)
{
	unsigned char b[PG];
	tu_pread_full(fd, b, PG, off);
	uint64_t s = tu_get_stamp(b);
	return tu_is_stamp(b, PG, s) ? s : ~0ull;
}

/* ---- 1. batches ---- */

struct shared {
	_Atomic uint64_t flushes, members, batches;
	_Atomic int go;
};

static void put_pair(oa_file *f, int p, uint64_t s)
{
	unsigned char b[PG];
	tu_fill_stamp(b, PG, s);
	tu_oa_pwrite(f, b, PG, page_a(p));
	tu_oa_pwrite(f, b, PG, page_b(p));
}

static int committer(struct shared *sh, int p)
{
	struct oa_stats st;
	oa_file *f = oa_open(path, O_RDWR, 0);
	if (!f)
		return 10;
	while (!atomic_load(&sh->go))
		;
	oa__stats_reset();
	for (int k = 1; k <= NCOMMIT; k++) {
		put_pair(f, p, STAMP(p, k));
		if (oa_commit(f) != 0)
			return 11;
	}
	oa__stats_get(&st);
	atomic_fetch_add(&sh->flushes, st.flushes);
	atomic_fetch_add(&sh->members, st.xp_members);
	atomic_fetch_add(&sh->batches, st.xp_batches);
	return oa_close(f) ? 12 : 0;
}

static void run_batches(bool off, uint64_t *flushes, uint64_t *members)
{
	struct shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t pid[NP];
	CHECK(sh != MAP_FAILED);
	if (off)
		setenv("OATOMIC_GROUP_COMMIT", "0", 1);
	for (int p = 0; p < NP; p++) {
		pid[p] = fork();
		CHECK(pid[p] >= 0);
		if (pid[p] == 0)
			_exit(committer(sh, p));
	}
	unsetenv("OATOMIC_GROUP_COMMIT");
	usleep(100000);   /* every one open */
	atomic_store(&sh->go, 1);
	for (int p = 0; p < NP; p++)
		CHECK_CHILD_OK(tu_wait(pid[p]));
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	for (int p = 0; p < NP; p++) {
		CHECK_EQ(read_stamp(fd, page_a(p)), STAMP(p, NCOMMIT));
		CHECK_EQ(read_stamp(fd, page_b(p)), STAMP(p, NCOMMIT));
	}
	close(fd);
	CHECK_EQ(tu_file_size(tu_control_path(path)), OA_CLEAN_SIZE);
	*flushes = sh->flushes;
	*members = sh->members;
	tu_note("%s: %d processes x %d commits: %llu flushes, %llu batches "
		"carried %llu other processes' commits", off ? "off" : "on",
		NP, NCOMMIT, (unsigned long long)sh->flushes,
		(unsigned long long)sh->batches,
		(unsigned long long)sh->members);
	munmap(sh, sizeof(*sh));
}

static void test_batches(void)
{
	uint64_t fl, mem;
	prepare();
	run_batches(true, &fl, &mem);
	CHECK_EQ(mem, 0);
	CHECK(fl >= (uint64_t)NP * NCOMMIT);
	/* Whether commits meet depends on the machine; over three tries
	 * they must, and then save flushes. */
	for (int t = 0; t < 3; t++) {
		prepare();
		run_batches(false, &fl, &mem);
		if (mem > 0 && fl < (uint64_t)NP * NCOMMIT)
			return;
	}
	CHECKF(0, "no batch saved a flush in three runs (members %llu, "
	       "flushes %llu)", (unsigned long long)mem,
	       (unsigned long long)fl);
}

/* ---- 2, 3: orchestrated ---- */

/* A child with its handle open: it commits a warm-up, says 'r', then
 * takes commands from IN: 'f' commit stamp S into its page pair (a
 * follower), 'l' commit 12 scattered pieces (a leader) with the kill
 * point armed, 'q' close and exit.  Results go to OUT as an int. */
struct kid {
	pid_t pid;
	int in, out;
};

static int kid_main(int p, int kp, int in, int out)
{
	oa_file *f = oa_open(path, O_RDWR, 0);
	char c;
	if (!f)
		return 20;
	put_pair(f, p, STAMP(p, 1));
	if (oa_commit(f) != 0)
		return 21;
	if (write(out, "r", 1) != 1)
		return 22;
	while (read(in, &c, 1) == 1) {
		int r = 0;
		if (c == 'f') {
			put_pair(f, p, STAMP(p, 2));
			r = oa_commit(f) ? errno : 0;
		} else if (c == 'l') {
			unsigned char b[256];
			for (int i = 0; i < LPIECES; i++) {
				tu_fill_stamp(b, sizeof(b), STAMP(p, 2));
				tu_oa_pwrite(f, b, sizeof(b),
					     (off_t)(LPAGE0 + 2 * i) * PG);
			}
			oa__set_killpoint(kp);
			r = oa_commit(f) ? errno : 0;
			oa__set_killpoint(0);
		} else if (c == 'q') {
			return oa_close(f) ? 23 : 0;
		}
		if (write(out, &r, sizeof(r)) != sizeof(r))
			return 24;
	}
	return 25;
}

static struct kid kid_start(int p, int kp)
{
	int a[2], b[2];
	struct kid k;
	char c;
	CHECK_OK(pipe(a));
	CHECK_OK(pipe(b));
	k.pid = fork();
	CHECK(k.pid >= 0);
	if (k.pid == 0) {
		close(a[1]);
		close(b[0]);
		_exit(kid_main(p, kp, a[0], b[1]));
	}
	close(a[0]);
	close(b[1]);
	k.in = a[1];
	k.out = b[0];
	CHECK_EQ(read(k.out, &c, 1), 1);
	return k;
}

static void kid_say(struct kid *k, char c)
{
	CHECK_EQ(write(k->in, &c, 1), 1);
}

static int kid_result(struct kid *k)
{
	int r;
	CHECK_EQ(read(k->out, &r, sizeof(r)), (ssize_t)sizeof(r));
	return r;
}

static void kid_end(struct kid *k)
{
	kid_say(k, 'q');
	CHECK_CHILD_OK(tu_wait(k->pid));
	close(k->in);
	close(k->out);
}

/* The slots' states, through a mapping of the live area's page. */
static volatile uint32_t *slot_state(volatile unsigned char *live, int i)
{
	return (volatile uint32_t *)(live + OA_XP_OFF + (size_t)i * OA_XP_SLOT);
}

static int wait_state(volatile unsigned char *live, uint32_t st, double secs)
{
	double end = tu_now() + secs;
	do {
		for (int i = 0; i < OA_XP_SLOTS; i++)
			if (*slot_state(live, i) == st)
				return i;
		usleep(200);
	} while (tu_now() < end);
	return -1;
}

static int hold_commit(int cfd, short type)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET,
			    .l_start = OA_LOCK_COMMIT, .l_len = 1 };
	return fcntl(cfd, F_OFD_SETLKW, &fl);
}

/* The control file (*CFD), its live area's page mapped, COMMIT held; the
 * first of two children says 'f' and must publish. */
static volatile unsigned char *hold_and_publish(int *cfd, struct kid *f)
{
	*cfd = open(tu_control_path(path), O_RDWR);
	CHECK(*cfd >= 0);
	volatile unsigned char *live = mmap(NULL, 4096, PROT_READ, MAP_SHARED,
					    *cfd, OA_LIVE_OFF);
	CHECK(live != MAP_FAILED);
	CHECK_OK(hold_commit(*cfd, F_WRLCK));
	kid_say(f, 'f');
	CHECKF(wait_state(live, OA_XS_PUB, 5) >= 0, "follower never published");
	return live;
}

/* One round of part 2: 1 if the leader took the follower's slot and died
 * at KP (checked), 0 if the round did not come out that way. */
static int leader_round(int kp)
{
	prepare();
	struct kid fk = kid_start(0, 0), lk = kid_start(1, kp);
	int cfd;
	volatile unsigned char *live = hold_and_publish(&cfd, &fk);
	kid_say(&lk, 'l');
	usleep(100000);   /* the leader waits for COMMIT */
	CHECK_OK(hold_commit(cfd, F_UNLCK));
	bool taken = wait_state(live, OA_XS_TAKEN, 2) >= 0;
	/* The leader answers (it lived: the follower took COMMIT first and
	 * led alone, or came late) or dies at KP (its pipe reads EOF).  Its
	 * answer is read before it is waited for: a live one waits for 'q'. */
	int lr = -1;
	ssize_t got = read(lk.out, &lr, sizeof(lr));
	bool died = got != (ssize_t)sizeof(lr);
	if (died) {
		int st = tu_wait(lk.pid);
		CHECKF(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
		       "kill point %d: leader: %s", kp, tu_status_str(st));
		close(lk.in);
		close(lk.out);
	} else {
		CHECKF(lr == 0, "kill point %d: the leader's commit failed: %s",
		       kp, tu_errname(lr));
		kid_end(&lk);
	}
	int fr = kid_result(&fk);
	CHECKF(fr == 0, "kill point %d: the follower's commit failed: %s", kp,
	       tu_errname(fr));
	kid_end(&fk);
	munmap((void *)live, 4096);
	close(cfd);

	/* recovery through a new handle, then the file as it is */
	oa_file *f = tu_oa_open(path, O_RDWR, 0);
	CHECK_OK(oa_close(f));
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	CHECK_EQ(read_stamp(fd, page_a(0)), STAMP(0, 2));
	CHECK_EQ(read_stamp(fd, page_b(0)), STAMP(0, 2));
	bool lin = kp >= OA_KP_RECORD_WRITTEN && kp <= OA_KP_APPLIED;
	for (int i = 0; i < LPIECES; i++) {
		unsigned char b[256], want[256];
		tu_pread_full(fd, b, sizeof(b), (off_t)(LPAGE0 + 2 * i) * PG);
		if (lin || !died)
			tu_fill_stamp(want, sizeof(want), STAMP(1, 2));
		else
			memset(want, 0, sizeof(want));
		CHECK_MEM(b, want, sizeof(want));
	}
	close(fd);
	CHECK_EQ(tu_file_size(tu_control_path(path)), OA_CLEAN_SIZE);
	return taken && died;
}

static void test_leader_dies(void)
{
	static const int kps[] = { OA_KP_XP_TAKEN, OA_KP_MARKED,
				   OA_KP_RECORD_WRITTEN, OA_KP_FLUSHED,
				   OA_KP_APPLIED };
	for (size_t i = 0; i < sizeof(kps) / sizeof(kps[0]); i++) {
		int hit = 0, tries = 0;
		while (hit < 2 && tries < 8) {
			hit += leader_round(kps[i]);
			tries++;
		}
		CHECKF(hit >= 1, "kill point %d: the leader never took the "
		       "follower's slot in %d tries", kps[i], tries);
		tu_note("kill point %d: %d of %d rounds as planned", kps[i],
			hit, tries);
	}
}

/* ---- 3. a follower dies ---- */

static void test_member_dies(void)
{
	prepare();
	struct kid a = kid_start(0, 0), b = kid_start(1, 0);
	int cfd;
	volatile unsigned char *live = hold_and_publish(&cfd, &a);
	kill(a.pid, SIGKILL);
	int st = tu_wait(a.pid);
	CHECK(WIFSIGNALED(st));
	close(a.in);
	close(a.out);
	kid_say(&b, 'f');
	usleep(50000);
	CHECK_OK(hold_commit(cfd, F_UNLCK));
	CHECK_EQ(kid_result(&b), 0);
	kid_end(&b);
	munmap((void *)live, 4096);
	close(cfd);
	oa_file *f = tu_oa_open(path, O_RDWR, 0);
	CHECK_OK(oa_close(f));
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	CHECK_EQ(read_stamp(fd, page_a(1)), STAMP(1, 2));
	uint64_t s0 = read_stamp(fd, page_a(0));
	CHECKF(s0 == STAMP(0, 1) || s0 == STAMP(0, 2),
	       "the dead follower's page holds %llx",
	       (unsigned long long)s0);
	CHECK_EQ(read_stamp(fd, page_b(0)), s0);
	close(fd);
}

int main(void)
{
	tu_alarm(240);
	tu_pin_journal();
	path = tu_path("xc");
	test_batches();
	test_leader_dies();
	test_member_dies();
	return 0;
}
