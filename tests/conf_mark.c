/*
 * conf_mark.c - the clean mark (docs/FORMAT.md, "The clean mark"; src/control.c
 * M1-M3): a reader of a file that carries a valid mark opens and reads it
 * without its control file or a lock, and still never sees half a commit.
 *
 * 1. Who sets and removes it: the last close after a commit sets it; a
 *    handle opened on it is fast (oa__fast) until it needs more than reads;
 *    a commit removes it before its commit point; an open that only read
 *    leaves it as it was.
 * 2. What voids it (M3): a mark with another mount id, boot id, inode
 *    number, mode or a bad checksum (forged from the real one) opens the
 *    long way; so does a chmod after the close, an open through another
 *    mount of the file system (a bind mount, as root) and a copy with its
 *    attributes (cp -a); the forged copy of the real mark, checksum
 *    recomputed, opens fast (the forging is right).
 * 3. No torn reads through it: readers (threads and processes) that open
 *    and close around each read, and readers that keep a handle opened on
 *    the mark, read several ranges in one call while a writer replaces all
 *    the ranges in one-shot transactions (open, write, commit, close, so
 *    that the mark comes and goes); every read shows one transaction's
 *    stamp throughout and never goes back in time, and the fast opens
 *    really happened.  Planted bugs 55 (a commit leaves the mark) and 56
 *    (a read does not look at the mark again) are caught here.
 *
 * SPDX-License-Identifier: MIT
 */
#include "testutil.h"
#include "crc32c.h"
#include "oatomic-private.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/xattr.h>

#define MARK "user.oatomic.clean"
#define MARK_LEN 72

static int get_mark(const char *path, unsigned char *v)
{
	ssize_t n = getxattr(path, MARK, v, MARK_LEN + 1);
	if (n < 0) {
		CHECK(errno == ENODATA);
		return 0;
	}
	CHECK_EQ(n, MARK_LEN);
	return 1;
}

static int opens_fast(const char *path, int flags)
{
	oa_file *f = tu_oa_open(path, flags, 0);
	int fast = oa__fast(f);
	CHECK_OK(oa_close(f));
	return fast;
}

static void put32(unsigned char *b, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		b[i] = (unsigned char)(v >> (8 * i));
}

/* ---- 1. set, kept, removed ------------------------------------------------- */

static void test_lifecycle(void)
{
	const char *path = tu_path("life");
	unsigned char a[MARK_LEN], b[MARK_LEN], buf[8192], got[8192];
	oa_file *f, *w;

	tu_fill(buf, sizeof(buf), 1, 0);
	tu_write_file(path, buf, sizeof(buf), 0644);
	/* Written plainly: no mark, the long way. */
	CHECK(!get_mark(path, a));
	CHECK(!opens_fast(path, O_RDONLY));
	tu_oa_update(path, "one", 3, 0);
	memcpy(buf, "one", 3);
	if (!get_mark(path, a)) {
		/* no user attributes here, or a kernel without unique mount
		 * ids (Linux < 6.8): nothing to test */
		tu_skip("no clean mark on %s (%s)", path, tu_fs_name(path));
	}
	/* Reads through a handle opened on it. */
	f = tu_oa_open(path, O_RDONLY, 0);
	CHECK(oa__fast(f));
	tu_oa_pread(f, got, sizeof(got), 0);
	CHECK(memcmp(got, buf, sizeof(buf)) == 0);
	CHECK(oa__fast(f));
	/* oa_fstat too stays fast; oa_ioinfo needs the rest of the open:
	 * done, the same answers after. */
	struct stat st;
	CHECK_OK(oa_fstat(f, &st));
	CHECK(oa__fast(f));
	CHECK_EQ(st.st_size, (off_t)sizeof(buf));
	off_t sz;
	CHECK_OK(oa_fsize(f, &sz));
	CHECK(oa__fast(f));
	CHECK_EQ(sz, (off_t)sizeof(buf));
	struct oa_ioinfo io = { .size = sizeof(io) };
	CHECK_OK(oa_ioinfo(f, &io));
	CHECK(!oa__fast(f));
	CHECK_OK(oa_fstat(f, &st));
	CHECK_EQ(st.st_size, (off_t)sizeof(buf));
	tu_oa_pread(f, got, sizeof(got), 0);
	CHECK(memcmp(got, buf, sizeof(buf)) == 0);
	CHECK_OK(oa_close(f));
	/* Opens that only read leave it exactly as it was. */
	CHECK(opens_fast(path, O_RDWR));
	CHECK(opens_fast(path, O_RDONLY));
	CHECK(get_mark(path, b) && memcmp(a, b, MARK_LEN) == 0);

	/* A writer on the mark: fast until its first write. */
	w = tu_oa_open(path, O_RDWR, 0);
	CHECK(oa__fast(w));
	tu_oa_pwrite(w, "two", 3, 0);
	CHECK(!oa__fast(w));
	CHECK(get_mark(path, b));          /* nothing changed the file yet */
	/* A reader opened on the mark before the commit ... */
	f = tu_oa_open(path, O_RDONLY, 0);
	CHECK(oa__fast(f));
	CHECK_OK(oa_commit(w));
	/* ... the commit removed it before changing the file. */
	CHECK(!get_mark(path, b));
	memcpy(buf, "two", 3);
	tu_oa_pread(f, got, sizeof(got), 0);   /* finds it gone */
	CHECK(!oa__fast(f));
	CHECK(memcmp(got, buf, sizeof(buf)) == 0);
	/* While it is away, openers take the long way; a close with no
	 * commit in flight puts it back, with a new nonce (M1), even with
	 * a writer open. */
	CHECK(!opens_fast(path, O_RDONLY));
	CHECK(get_mark(path, b) && memcmp(a, b, MARK_LEN) != 0);
	memcpy(a, b, MARK_LEN);
	CHECK(opens_fast(path, O_RDONLY));
	/* The writer that kept its handle commits again: the commit takes
	 * away the mark that close put back (in a later hold of COMMIT
	 * than its first removal). */
	tu_oa_pwrite(w, "TWO", 3, 0);
	CHECK_OK(oa_commit(w));
	CHECK(!get_mark(path, b));
	memcpy(buf, "TWO", 3);
	CHECK(!opens_fast(path, O_RDONLY));
	CHECK(get_mark(path, b) && memcmp(a, b, MARK_LEN) != 0);
	memcpy(a, b, MARK_LEN);
	CHECK_OK(oa_close(w));
	CHECK_OK(oa_close(f));
	/* Nothing changed since: left as it was. */
	CHECK(get_mark(path, b) && memcmp(a, b, MARK_LEN) == 0);
	/* The next writer: its commit takes it away, its close puts it
	 * back. */
	tu_oa_update(path, "three", 5, 0);
	CHECK(get_mark(path, b) && memcmp(a, b, MARK_LEN) != 0);
	CHECK(opens_fast(path, O_RDONLY));
	memcpy(buf, "three", 5);
	CHECK_FILE(path, buf, sizeof(buf), (off_t)sizeof(buf));
}

/* ---- 2. what voids it ------------------------------------------------------ */

/* The mark REAL with bytes [OFF, OFF+N) replaced by V and its checksum made
 * right again (CRC false: left wrong), put on PATH: does it open fast? */
static int forged_fast(const char *path, const unsigned char *real, int off,
		       const void *v, int n, int crc)
{
	unsigned char m[MARK_LEN];
	memcpy(m, real, MARK_LEN);
	if (n)
		memcpy(m + off, v, (size_t)n);
	if (crc)
		put32(m + 68, oa_crc32c(0, m, 68));
	else
		m[68] ^= 1;
	CHECK_OK(setxattr(path, MARK, m, MARK_LEN, 0));
	return opens_fast(path, O_RDONLY);
}

static void test_void(void)
{
	const char *path = tu_path("void"), *copy = tu_path("void-copy");
	unsigned char real[MARK_LEN], m[MARK_LEN];
	unsigned char other[16];
	char cmd[3 * PATH_MAX];

	tu_write_file(path, "00000000", 8, 0644);
	tu_oa_update(path, "11111111", 8, 0);
	CHECK(get_mark(path, real));
	memset(other, 0x5a, sizeof(other));
	CHECK(forged_fast(path, real, 0, NULL, 0, 1));       /* the forging */
	CHECK(!forged_fast(path, real, 0, NULL, 0, 0));      /* checksum */
	CHECK(!forged_fast(path, real, 8, other, 8, 1));     /* inode */
	CHECK(!forged_fast(path, real, 16, other, 8, 1));    /* generation */
	CHECK(!forged_fast(path, real, 24, other, 8, 1));    /* mount */
	CHECK(!forged_fast(path, real, 32, other, 16, 1));   /* boot */
	CHECK(!forged_fast(path, real, 56, other, 4, 1));    /* mode */
	CHECK(!forged_fast(path, real, 60, other, 4, 1));    /* owner */
	CHECK(forged_fast(path, real, 48, other, 8, 1));     /* any nonce */
	CHECK_OK(setxattr(path, MARK, real, MARK_LEN, 0));
	CHECK(opens_fast(path, O_RDONLY));
	/* Short or long values are not marks. */
	CHECK_OK(setxattr(path, MARK, real, MARK_LEN - 1, 0));
	CHECK(!opens_fast(path, O_RDONLY));
	CHECK_OK(setxattr(path, MARK, real, MARK_LEN, 0));
	/* chmod after the close: the long way (which narrows the
	 * sidecars, conf_owners), whose last close marks the file again
	 * with its new mode. */
	CHECK_OK(chmod(path, 0600));
	CHECK(!opens_fast(path, O_RDONLY));
	CHECK(opens_fast(path, O_RDONLY));
	CHECK_OK(chmod(path, 0644));
	CHECK(!opens_fast(path, O_RDONLY));
	CHECK(opens_fast(path, O_RDONLY));
	/* Another mount of the same file system (a bind mount: a mount id
	 * of its own, as a mount again after a cut would have) does not
	 * trust it: the long way, whose close marks the file for that mount
	 * (and the first mount then takes the long way once). */
	if (tu_is_root()) {
		const char *bp = tu_path("bind");
		char via[PATH_MAX];
		CHECK_OK(mkdir(bp, 0755));
		if (mount(tu_dir(), bp, NULL, MS_BIND, NULL) == 0) {
			snprintf(via, sizeof(via), "%s/void", bp);
			CHECK(!opens_fast(via, O_RDONLY));
			CHECK(opens_fast(via, O_RDONLY));
			CHECK(!opens_fast(path, O_RDONLY));
			CHECK(opens_fast(path, O_RDONLY));
			CHECK_OK(umount2(bp, MNT_DETACH));
		} else {
			tu_note("no bind mount (%s): not tried",
				strerror(errno));
		}
	}
	/* A copy with its attributes is another inode. */
	CHECK(get_mark(path, real));
	snprintf(cmd, sizeof(cmd), "cp -a '%s' '%s'", path, copy);
	CHECK_EQ(system(cmd), 0);
	CHECK(get_mark(copy, m) && memcmp(m, real, MARK_LEN) == 0);
	CHECK(!opens_fast(copy, O_RDONLY));
	CHECK_FILE(copy, "11111111", 8, 8);
	/* Its first writer's last close makes it its own. */
	tu_oa_update(copy, "22222222", 8, 0);
	CHECK(opens_fast(copy, O_RDONLY));
	CHECK_FILE(copy, "22222222", 8, 8);
	CHECK_FILE(path, "11111111", 8, 8);
}

/* ---- 3. no torn reads through it ------------------------------------------- */

#define NRANGES    8
#define RANGE_LEN  4096
#define RANGE_GAP  (256 << 10)
#define FILE_LEN   (NRANGES * RANGE_GAP)
#define NTHREADS   2
#define NPROCS     2
#define NREADERS   (NTHREADS + NPROCS)
#define STAMP(k)   (0x4d41524b00000000ull | (uint64_t)(k))

struct shared {
	volatile int stop;
	volatile int started[NREADERS];
	volatile uint64_t reads[NREADERS], fast_reads[NREADERS];
	volatile int failed;
	char why[256];
};

static struct shared *sh;
static const char *torn_path;

/* One read of every range, on F: all must carry one stamp, not older than
 * *LAST. */
static void read_all(oa_file *f, unsigned char *buf, uint64_t *last, int id)
{
	bool fast = oa__fast(f);
	tu_oa_pread(f, buf, FILE_LEN, 0);
	uint64_t s = tu_get_stamp(buf);
	for (int i = 0; i < NRANGES; i++)
		if (!tu_is_stamp(buf + (size_t)i * RANGE_GAP, RANGE_LEN, s)) {
			snprintf(sh->why, sizeof(sh->why),
				 "reader %d%s: torn read: range 0 has %#llx, "
				 "range %d %#llx", id, fast ? " (fast)" : "",
				 (unsigned long long)s, i,
				 (unsigned long long)tu_get_stamp(
					 buf + (size_t)i * RANGE_GAP));
			sh->failed = 1;
			return;
		}
	if (s < *last) {
		snprintf(sh->why, sizeof(sh->why), "reader %d went back in "
			 "time: %#llx after %#llx", id, (unsigned long long)s,
			 (unsigned long long)*last);
		sh->failed = 1;
		return;
	}
	*last = s;
	sh->reads[id]++;
	if (fast && oa__fast(f))
		sh->fast_reads[id]++;   /* read and checked without a lock */
}

static void reader_loop(int id)
{
	unsigned char *buf = tu_malloc(FILE_LEN);
	uint64_t last = 0, rs = 0x6a09e667u + (uint64_t)id;
	/* opened on the mark before the writer starts, kept */
	oa_file *kept = tu_oa_open(torn_path, O_RDONLY, 0);

	if (!oa__fast(kept)) {
		snprintf(sh->why, sizeof(sh->why), "reader %d: no fast open "
			 "before the writer started", id);
		sh->failed = 1;
	}
	sh->started[id] = 1;
	while (!sh->stop && !sh->failed) {
		if (kept && tu_rand(&rs) % 2 == 0) {
			read_all(kept, buf, &last, id);
			/* Once a read found the mark gone, the handle holds
			 * OPEN like any other, and while one does, no close
			 * is the last, which puts the mark back: let go. */
			if (!oa__fast(kept)) {
				CHECK_OK(oa_close(kept));
				kept = NULL;
			}
		} else {
			oa_file *f = tu_oa_open(torn_path, O_RDONLY, 0);
			read_all(f, buf, &last, id);
			if (!kept && oa__fast(f))
				kept = f;   /* opened on the mark: kept */
			else
				CHECK_OK(oa_close(f));
		}
	}
	if (kept)
		CHECK_OK(oa_close(kept));
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

static void test_torn(void)
{
	unsigned char *buf = tu_malloc(FILE_LEN);
	pthread_t th[NTHREADS];
	pid_t pid[NPROCS];
	uint64_t k = 1, reads = 0, fast = 0;
	int i;

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED);
	memset(sh, 0, sizeof(*sh));
	torn_path = tu_path("torn");
	tu_fill_stamp(buf, FILE_LEN, STAMP(0));
	tu_write_file(torn_path, buf, FILE_LEN, 0644);
	tu_fill_stamp(buf, FILE_LEN, STAMP(1));
	tu_oa_update(torn_path, buf, FILE_LEN, 0);   /* marked */

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

	double t0 = tu_now();
	while (!sh->failed && (tu_now() - t0 < 4.0 || k < 200) && k < 100000) {
		k++;
		tu_fill_stamp(buf, RANGE_LEN, STAMP(k));
		/* One-shot updates: each open finds the mark the last close
		 * left, each commit takes it away.  Last range first: a
		 * reader racing the apply in the order of the writes would
		 * see the mix. */
		oa_file *w = tu_oa_open(torn_path, O_RDWR, 0);
		for (i = NRANGES - 1; i >= 0; i--)
			tu_oa_pwrite(w, buf, RANGE_LEN, (off_t)i * RANGE_GAP);
		CHECK_OK(oa_commit(w));
		CHECK_OK(oa_close(w));
		/* Bursts of 16 commits, then a pause: the readers' slow
		 * handles (opened while the mark was away) close, the last
		 * close puts the mark back, and the readers open on it, fast,
		 * for the next burst to race. */
		if (k % 16 == 0)
			usleep(20000);
	}
	sh->stop = 1;
	for (i = 0; i < NTHREADS; i++)
		CHECK_OK(pthread_join(th[i], NULL));
	for (i = 0; i < NPROCS; i++)
		CHECK_CHILD_OK(tu_wait(pid[i]));
	CHECKF(!sh->failed, "%s", sh->why);
	for (i = 0; i < NREADERS; i++) {
		reads += sh->reads[i];
		fast += sh->fast_reads[i];
	}
	tu_note("%llu one-shot commits, %llu reads, %llu of them fast",
		(unsigned long long)k - 1, (unsigned long long)reads,
		(unsigned long long)fast);
	/* The fast path was taken while the commits ran. */
	CHECKF(fast >= 1000, "only %llu fast reads of %llu",
	       (unsigned long long)fast, (unsigned long long)reads);
	tu_fill_stamp(buf, RANGE_LEN, STAMP(k));
	for (i = 0; i < NRANGES; i++) {
		unsigned char got[RANGE_LEN];
		int fd = open(torn_path, O_RDONLY);
		CHECK(fd >= 0);
		tu_pread_full(fd, got, RANGE_LEN, (off_t)i * RANGE_GAP);
		close(fd);
		CHECK(tu_is_stamp(got, RANGE_LEN, STAMP(k)));
	}
	munmap(sh, sizeof(*sh));
	free(buf);
}

int main(void)
{
	tu_alarm(240);
	/* CONF_MARK_TORN=1: part 3 alone (to see a planted bug caught by
	 * what it does to readers, not only by the state checks) */
	if (!getenv("CONF_MARK_TORN")) {
		test_lifecycle();
		test_void();
	}
	test_torn();
	return 0;
}
