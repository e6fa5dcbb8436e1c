/*
 * checkpoint.c - the file made durable before the journals that hold its
 * commits are given back: the checkpoint record (I5), and the last close's
 * return to the clean state (I14).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/* The file's flush of a checkpoint or of the last close (I5, I14).  On
 * failure, I9: the failed range is lost from the file but its pages are
 * now clean; the dirty marker forces a replay from the journals before any
 * checkpoint can be written or any journal given back. */
static int flush_target(struct oa_file *f, struct oa_live *l)
{
	if (oa_xfdatasync(f->tfd) < 0 && !MUTANT(10)) {
		int e = errno;
		l->dirty_seq = l->last_seq;
		oa_live_write(f, l);
		errno = e;
		return -1;
	}
	oa_killpoint(OA_KP_CKPT_TARGET);
	return 0;
}

/*
 * For a checkpoint record that got no block (-2 from oa_ctl_write_ckpt: its
 * header slot is a hole of the control file, made by a cut - FORMAT.md
 * "Clean" - on a disk that a transaction filled before it was dropped;
 * giving that transaction's space back, in oa_abort and oa_close, begins
 * with this checkpoint): the dropped bytes go first.  With no transaction
 * pending, beyond the newest commit record written or tried in this
 * generation (jcommit_end) the handle's journal holds only data records of
 * transactions that have no commit record and never will, which no
 * recovery applies (I1), whatever part of the cut a crash keeps; the cut
 * is not flushed and needs none.  Never while a transaction is pending:
 * its data records lie there, and its commit (the exchange method
 * checkpoints before it) would read them back as a hole.  1 cut, 0 nothing
 * to give back, -1 error.
 */
static int give_back_dropped(struct oa_file *f)
{
	uint64_t size;
	if ((f->pending && !MUTANT(34)) || f->jfd < 0 ||
	    f->jcommit_end == UINT64_MAX || oa_xfsize(f->jfd, &size) < 0 ||
	    size <= f->jcommit_end)
		return 0;
	return oa_xftruncate(f->jfd, f->jcommit_end) < 0 ? -1 : 1;
}

/* The checkpoint record for every commit up to the live area's last_seq,
 * whose apply a flush of the file that returned 0 made durable (I5).  A
 * slot that got no block is written again once the dropped bytes are given
 * back; the flush before it is not repeated (I9: a failed one has lost its
 * pages, and the next returns 0 without them). */
static int ckpt_record(struct oa_file *f, struct oa_live *l)
{
	int r = oa_ctl_write_ckpt(f, l->last_seq);
	if (r == -2) {
		int e = errno;
		if (give_back_dropped(f) != 1) {
			errno = e;
			return -1;
		}
		r = oa_ctl_write_ckpt(f, l->last_seq);
	}
	if (r < 0)
		return -1;
	l->ckpt_seq = l->last_seq;
	for (int i = 0; i < OA_LIVE_JMAX; i++)
		l->jmax[i] = 0;
	return oa_live_write(f, l);
}

int oa_checkpoint_locked(struct oa_file *f)
{
	struct oa_live l;

	OA_ASSERT(oa_holds_excl(f, OA_LOCK_COMMIT));
	if (oa_live_read(f, &l) < 0)
		return -1;
	if (l.last_seq <= l.ckpt_seq)
		return 0;
	/* I5: every applied commit is durable in the file before the
	 * checkpoint record says so. */
	if (MUTANT(5) && oa_ctl_write_ckpt(f, l.last_seq) < 0)
		return -1;
	if (flush_target(f, &l) < 0) {
		/* (planted bug 33: a flush that failed for space retried
		 * after the cut, as if nothing were lost: I9) */
		if (!MUTANT(33) || (errno != ENOSPC && errno != EDQUOT) ||
		    give_back_dropped(f) < 0 || flush_target(f, &l) < 0)
			return -1;
	}
	return ckpt_record(f, &l);
}

int oa_flush_target_locked(struct oa_file *f)
{
	struct oa_live l;
	OA_ASSERT(oa_holds_excl(f, OA_LOCK_COMMIT));
	if (oa_live_read(f, &l) < 0)
		return -1;
	return flush_target(f, &l);
}

int oa_checkpoint_flushed_locked(struct oa_file *f)
{
	struct oa_live l;

	OA_ASSERT(oa_holds_excl(f, OA_LOCK_COMMIT));
	if (oa_live_read(f, &l) < 0)
		return -1;
	return l.last_seq <= l.ckpt_seq ? 0 : ckpt_record(f, &l);
}

/* Remove the extra journals (.NAME.oaj-K, K >= 1) once no handle is left:
 * they hold only checkpointed records, or records of an earlier era.
 * Journals are numbered from 1 and removed from the top, so the first
 * missing number ends them.  Not flushed (I14). */
static void drop_extra_journals(struct oa_file *f)
{
	char name[NAME_MAX + 1];
	for (int k = 1; k < 4096; k++) {
		if (oa_name(f, name, sizeof(name), OA_NAME_JNL, k) < 0)
			return;
		if (oa_sys->unlinkat(f->dfd, name, 0) < 0 && errno == ENOENT)
			return;
	}
}

int oa_clean_locked(struct oa_file *f)
{
	struct oa_live l;
	uint64_t size;

	OA_ASSERT(oa_holds_excl(f, OA_LOCK_COMMIT));
	OA_ASSERT(oa_holds_excl(f, OA_LOCK_OPEN));
	if (oa_xfsize(f->cfd, &size) < 0)
		return -1;
	if (size <= OA_CLEAN_SIZE)
		return 0;   /* clean (shorter: damage, recovery's to report) */
	if (oa_live_read(f, &l) < 0)
		return -1;
	/* I14: every commit is durable in the file before the journals that
	 * hold it are given back.  Journal 0 goes with the cut; its commits
	 * need no checkpoint record: if the cut is lost in a crash they are
	 * all still there, complete, and replaying them is harmless (I7).
	 * Extra journals are removed by name, each on its own: one removal
	 * may survive a crash and another not, and a cut control file with a
	 * journal left is clean (I15), so a commit that only an extra journal
	 * holds must be under a durable checkpoint first.  So must a journal
	 * 0 grown beyond the ring: a cut of a file that big may be done in
	 * steps (Btrfs), and a step that leaves older commits without the
	 * newer ones must find them checkpointed. */
	bool need_ckpt = size > OA_JRNL_INITIAL || (l.flags & OA_LIVE_XHIGH);
	for (int k = 1; k < OA_LIVE_JMAX; k++)
		if (l.jmax[k] > l.ckpt_seq)
			need_ckpt = true;
	if (MUTANT(27))
		need_ckpt = false;
	if (MUTANT(26)) {
		drop_extra_journals(f);
		oa_ctl_unmap(f);
		if (oa_xftruncate(f->cfd, OA_CLEAN_SIZE) < 0)
			return -1;
		return oa_xfdatasync(f->tfd);
	}
	if (l.last_seq > l.ckpt_seq) {
		if (flush_target(f, &l) < 0)
			return -1;
		if (need_ckpt && oa_ctl_write_ckpt(f, l.last_seq) < 0)
			return -1;
	}
	drop_extra_journals(f);
	/* A big one in two cuts: the first may stop anywhere above the
	 * initialised length, where the checkpoint just written covers every
	 * commit left; the second is within the ring, which the file systems
	 * cut at once (FORMAT.md, I14). */
	if (size > OA_JRNL_INITIAL && oa_xftruncate(f->cfd, OA_CTL_INIT) < 0)
		return -1;
	/* No longer "in use since this boot" (recover.c), before the cut: a
	 * kill between the two leaves a control file in use without that
	 * evidence, never a clean one with it. */
	if (oa_ctl_identity(f, false) < 0)
		return -1;
	oa_ctl_unmap(f);
	if (oa_xftruncate(f->cfd, OA_CLEAN_SIZE) < 0)
		return -1;
	oa_killpoint(OA_KP_CKPT_WRITTEN);   /* clean, nothing flushed */
	return 0;
}
