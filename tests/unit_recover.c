/*
 * unit_recover.c - the recovery rule of docs/FORMAT.md, case by case, on
 * journals left by a child killed inside the commit protocol and then
 * damaged on purpose:
 *   - a commit durable but not applied is finished (and only once);
 *   - the newest commit with damaged data, after a power cut (the live
 *     area's seal from another boot), is a torn flush: dropped; in the boot
 *     that acknowledged it (the seal says so, I13) it is damage: EUCLEAN;
 *   - an older commit with damaged data while a newer one exists: EUCLEAN,
 *     nothing applied;
 *   - a damaged commit record header: after a power cut that commit is
 *     simply not there; in the same boot an acknowledged commit that is
 *     nowhere is damage;
 *   - garbage left by a failed journal write is skipped: a later commit in
 *     the same generation is still found;
 *   - a journal of another inode with committed work, beside a control
 *     file of that inode (name reused, or a copy), is refused (EUCLEAN)
 *     until discarded (OA__RECOVER_DISCARD); one of another inode with
 *     nothing pending is ignored;
 *   - a committer that dies half-way through its apply is healed by the
 *     next reader of a handle that stayed open (no reopen, no oa_recover);
 *   - a failing commit flush is reported (EIO) and latches the handle; the
 *     file keeps its old contents;
 *   - the seq such a failed commit took is not required of the journals
 *     (the seal's gap_seq): a later acknowledged commit is recovered.
 */
#include <signal.h>
#include <sys/wait.h>

#include "testutil.h"
#include "internal.h"
#include "crc32c.h"
#include "oatomic-private.h"

#define BLK 4096

static const char *path;

static void fill(char *b, int stamp)
{
	memset(b, 'A' + stamp, BLK);
}

/* Child: commit tx 1..n-1 normally, die at KP inside commit n. */
static int child(void *arg)
{
	int *a = arg, n = a[0], kp = a[1];
	char b[BLK];
	oa_file *f = oa_open(path, O_RDWR | O_CREAT, 0644);
	if (!f)
		return 2;
	for (int t = 1; t <= n; t++) {
		fill(b, t);
		if (oa_pwrite(f, b, BLK, (off_t)(t % 2) * BLK) != BLK ||
		    oa_pwrite(f, b, 10, 5 * BLK) != 10)
			return 3;
		if (t == n)
			oa__set_killpoint(kp);
		if (oa_commit(f))
			return 4;
	}
	return 0;
}

static void run(int n, int kp)
{
	int a[2] = { n, kp };
	pid_t pid = tu_fork(child, a);
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECKF(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
	       "child should die at kill point %d, status %d", kp, st);
}

static void reset(void)
{
	unlink(path);
	tu_remove_journals(path);
	char z[6 * BLK] = { 0 };
	tu_write_file(path, z, sizeof(z), 0644);
}

/* Offset in journal 0 of the first payload byte of transaction T's first
 * data record (its writes are packed into one), found by walking the
 * records as FORMAT.md lays them out; transactions are numbered from 1 in
 * a generation. */
static off_t payload_of(int t)
{
	int fd = open(tu_journal_path(path, 0), O_RDONLY);
	unsigned char h[OA_REC_HDR];
	struct oa_slot s;
	CHECK(fd >= 0);
	CHECK_EQ(oa_slots_read(fd, OA_J0_SLOT, OA_JNL_MAGIC, &s), 0);
	for (off_t p = OA_J0_DATA;; p += OA_REC_ALIGN) {
		struct oa_rec r;
		CHECK(pread(fd, h, sizeof(h), p) == (ssize_t)sizeof(h));
		if (oa_rec_decode(h, &r) || r.gen != s.a || r.lsn != (uint64_t)p)
			continue;
		if (r.type == OA_REC_DATA && r.tx == (uint64_t)t) {
			close(fd);
			return p + OA_REC_HDR;
		}
		p = (off_t)oa_align_up((uint64_t)p + OA_REC_HDR + r.len,
				       OA_REC_ALIGN) - OA_REC_ALIGN;
	}
}

static void smash(off_t at, int n)
{
	int fd = open(tu_journal_path(path, 0), O_RDWR);
	char junk[64];
	memset(junk, 0x5a, sizeof(junk));
	CHECK(fd >= 0 && pwrite(fd, junk, (size_t)n, at) == n);
	close(fd);
}

/* A "reboot": the live area's seal stamped with another boot id, as the
 * page cache holds it after a power cut (or a valid seal of an older boot). */
static void reboot(void)
{
	unsigned char b[OA_SEAL_BYTES];
	int fd = open(tu_control_path(path), O_RDWR);
	CHECK(fd >= 0);
	CHECK(pread(fd, b, sizeof(b), OA_LIVE_OFF + OA_SEAL_OFF) ==
	      (ssize_t)sizeof(b));
	CHECK_EQ(oa_get64(b), OA_SEAL_MAGIC);
	b[8] ^= 0xff;                       /* another boot id */
	oa_put32(b + 44, oa_crc32c(0, b, 44));
	CHECK(pwrite(fd, b, sizeof(b), OA_LIVE_OFF + OA_SEAL_OFF) ==
	      (ssize_t)sizeof(b));
	CHECK(pwrite(fd, b, sizeof(b), OA_LIVE_OFF + OA_SEAL2_OFF) ==
	      (ssize_t)sizeof(b));
	close(fd);
}

static char blk_at(off_t off)
{
	char c;
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0 && pread(fd, &c, 1, off) == 1);
	close(fd);
	return c;
}

/* Failing pwritev for the fault-injection case. */
static int fail_next;
static ssize_t bad_pwritev(int fd, const struct iovec *v, int n, off_t off)
{
	if (fail_next) {
		fail_next = 0;
		/* half of it lands, then the error */
		struct iovec h = { v[0].iov_base, v[0].iov_len / 2 };
		oa_sys_linux.pwritev(fd, &h, 1, off);
		errno = EIO;
		return -1;
	}
	return oa_sys_linux.pwritev(fd, v, n, off);
}

static int failing_fdatasync(int fd)
{
	errno = EIO;
	return -1;
}

static int child_garbage(void *arg)
{
	static struct oa_sysops ops;
	char b[BLK];
	ops = oa_sys_linux;
	ops.pwritev = bad_pwritev;
	oa__set_sysops(&ops);
	oa_file *f = oa_open(path, O_RDWR, 0);
	if (!f)
		return 2;
	fill(b, 1);
	if (oa_pwrite(f, b, BLK, 0) != BLK || oa_commit(f))
		return 3;
	fill(b, 2);
	fail_next = 1;
	if (oa_pwrite(f, b, BLK, 0) != -1 || errno != EIO)
		return 4;
	/* the transaction is unchanged: retry, commit, die before apply */
	if (oa_pwrite(f, b, BLK, 0) != BLK)
		return 5;
	oa__set_killpoint(OA_KP_FLUSHED);
	oa_commit(f);
	return 6;
}

int main(void)
{
	tu_pin_journal();
	path = tu_path("f");

	/* 1. durable, not applied: recovery finishes it, idempotently. */
	reset();
	run(2, OA_KP_FLUSHED);
	CHECK_EQ(blk_at(0), 0);             /* tx 2 wrote block 0: not yet */
	CHECK_OK(oa_recover(path));
	CHECK_EQ(blk_at(0), 'A' + 2);
	CHECK_EQ(blk_at(BLK), 'A' + 1);
	CHECK_OK(oa_recover(path));
	CHECK_EQ(blk_at(0), 'A' + 2);

	/* 2. newest commit's data damaged: in the boot that acknowledged it,
	 * damage (I13); after a power cut, a torn flush, dropped. */
	reset();
	run(2, OA_KP_FLUSHED);
	smash(payload_of(2) + 100, 20);
	CHECK_ERR(oa_recover(path), EUCLEAN);
	CHECK_EQ(oa__check(path, NULL, stdout), 2);
	CHECK_EQ(blk_at(0), 0);
	reboot();
	CHECK_OK(oa_recover(path));
	CHECK_EQ(blk_at(0), 0);
	CHECK_EQ(blk_at(BLK), 'A' + 1);

	/* 3. older commit damaged, newer intact: EUCLEAN, nothing applied. */
	reset();
	run(2, OA_KP_FLUSHED);
	smash(payload_of(1) + 100, 20);
	errno = 0;
	CHECK_ERR(oa_recover(path), EUCLEAN);
	CHECK_EQ(blk_at(0), 0);
	CHECK_NULL_ERR(oa_open(path, O_RDWR, 0), EUCLEAN);
	CHECK_EQ(oa__check(path, NULL, stdout), 2);
	CHECK_EQ(blk_at(0), 0);

	/* 4. newest commit record's header damaged: that commit is absent. */
	reset();
	run(2, OA_KP_FLUSHED);
	{
		/* commit record of tx 2 follows its data record (both writes
		 * packed in it) */
		off_t p2 = payload_of(2) - OA_REC_HDR;
		int fd = open(tu_journal_path(path, 0), O_RDONLY);
		unsigned char h[OA_REC_HDR];
		struct oa_rec r;
		off_t p = p2;
		int data = 0;
		for (;; p += OA_REC_ALIGN) {
			CHECK(pread(fd, h, sizeof(h), p) == OA_REC_HDR);
			if (oa_rec_decode(h, &r) || r.lsn != (uint64_t)p)
				continue;
			if (r.type == OA_REC_COMMIT)
				break;
			data++;
			p = (off_t)oa_align_up((uint64_t)p + OA_REC_HDR + r.len,
					       OA_REC_ALIGN) - OA_REC_ALIGN;
		}
		close(fd);
		CHECK_EQ(data, 1);
		smash(p + 20, 4);
	}
	CHECK_ERR(oa_recover(path), EUCLEAN);        /* acknowledged: lost */
	reboot();
	CHECK_EQ(oa__check(path, NULL, stdout), 1);  /* tx 1 waits */
	CHECK_OK(oa_recover(path));
	CHECK_EQ(blk_at(0), 0);
	CHECK_EQ(blk_at(BLK), 'A' + 1);

	/* 5. garbage of a failed write is skipped. */
	reset();
	{
		int st = tu_run_child(child_garbage, NULL);
		CHECKF(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "%s",
		       tu_status_str(st));
	}
	CHECK_EQ(oa__check(path, NULL, stdout), 1);
	CHECK_OK(oa_recover(path));
	CHECK_EQ(blk_at(0), 'A' + 2);
	CHECK_EQ(oa__check(path, NULL, stdout), 0);

	/* 6. a journal of another inode, with a commit its control file has
	 * not checkpointed: refused until discarded on request; then
	 * ignored, reset before reuse. */
	reset();
	run(2, OA_KP_FLUSHED);
	{
		size_t n;
		void *d = tu_read_file(path, &n);
		unlink(path);
		tu_write_file(path, d, n, 0644);   /* same name, new inode */
		free(d);
	}
	CHECK_EQ(oa__check(path, NULL, stdout), 2);
	CHECK_ERR(oa_recover(path), EUCLEAN);
	CHECK_NULL_ERR(oa_open(path, O_RDWR, 0), EUCLEAN);
	CHECK_OK(oa__recover_ex(path, NULL, OA__RECOVER_DISCARD, stdout));
	CHECK_EQ(oa__check(path, NULL, stdout), 0);
	CHECK_OK(oa_recover(path));
	CHECK_EQ(blk_at(0), 0);
	oa_file *f = oa_open(path, O_RDWR, 0);
	CHECK(f);
	char b[BLK];
	fill(b, 9);
	tu_oa_pwrite(f, b, BLK, 0);
	CHECK_OK(oa_commit(f));
	CHECK_OK(oa_close(f));
	CHECK_EQ(blk_at(0), 'A' + 9);
	CHECK_EQ(oa__check(path, NULL, stdout), 0);
	/* 7. healing by a live handle. */
	reset();
	{
		oa_file *r = oa_open(path, O_RDONLY, 0);
		CHECK(r);
		run(2, OA_KP_HALF_APPLIED);
		char got[BLK];
		tu_oa_pread(r, got, BLK, 0);
		CHECK_EQ(got[0], 'A' + 2);
		CHECK_EQ(got[BLK - 1], 'A' + 2);
		tu_oa_pread(r, got, BLK, 5 * BLK);
		CHECK_EQ(got[0], 'A' + 2);  /* the second op of tx 2 */
		CHECK_OK(oa_close(r));
	}

	/* 8. a failing commit flush is never success. */
	reset();
	{
		static struct oa_sysops ops;
		ops = oa_sys_linux;
		ops.fdatasync = failing_fdatasync;
		oa_file *w = oa_open(path, O_RDWR, 0);
		CHECK(w);
		fill(b, 3);
		tu_oa_pwrite(w, b, BLK, 0);
		oa__set_sysops(&ops);
		CHECK_ERR(oa_commit(w), EIO);
		oa__set_sysops(NULL);
		CHECK_ERR(oa_pwrite(w, b, 1, 0), EIO);   /* latched */
		CHECK_ERR(oa_commit(w), EIO);
		CHECK_EQ(blk_at(0), 0);
		CHECK_OK(oa_close(w));
		CHECK_EQ(blk_at(0), 0);
	}
	/* 9. a seq a failed commit took is no acknowledged commit (the
	 * seal's gap_seq): a later commit, acknowledged and killed before its
	 * apply, is still recovered, not refused for the missing seq. */
	reset();
	{
		static struct oa_sysops ops;
		ops = oa_sys_linux;
		ops.fdatasync = failing_fdatasync;
		oa_file *w = oa_open(path, O_RDWR, 0);
		CHECK(w);
		fill(b, 3);
		tu_oa_pwrite(w, b, BLK, 0);
		oa__set_sysops(&ops);
		CHECK_ERR(oa_commit(w), EIO);   /* seq 1: revoked */
		oa__set_sysops(NULL);
		run(1, OA_KP_FLUSHED);          /* seq 2, in journal 1 */
		CHECK_EQ(blk_at(BLK), 0);
		CHECK_OK(oa_recover(path));
		CHECK_EQ(blk_at(BLK), 'A' + 1);
		CHECK_EQ(blk_at(0), 0);
		CHECK_OK(oa_close(w));
	}
	printf("recover: 9 cases hold\n");
	return 0;
}
