/*
 * kernel.c - the kernel method: untorn writes by the kernel (RWF_ATOMIC).
 *
 * A transaction that is one aligned power-of-two write within the file's
 * atomic write unit is held in memory (one bounded buffer per handle, not
 * per byte written) and goes down at commit as one O_DIRECT
 * pwritev2(RWF_ATOMIC | RWF_DSYNC): the kernel makes it untorn and
 * durable, without the journal.
 *
 * Why it is safe: it bypasses the journal, so recovery must never replay an
 * older journal commit over it.  Recovery replays only commits newer than
 * the durable checkpoint; so the kernel write is issued only when every
 * journal commit is checkpointed (last_seq == ckpt_seq under COMMIT),
 * forced by a checkpoint when the method is forced, else (AUTO) the
 * transaction goes through the journal (I11; oa_commit_bypass_ready).
 * Readers using the library are kept out by APPLY, as for an in-place
 * apply.  A failed RWF_ATOMIC write leaves either state (it is untorn): EIO
 * latches the handle (I9).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

bool oa_stage_fits(struct oa_file *f, uint64_t off, uint64_t len)
{
	if (!f->may_kernel || f->pending || f->staged)
		return false;
	if (!oa_pow2(len) || len < f->awu_min || len > f->awu_max ||
	    len > OA_STAGE_MAX || off % len != 0)
		return false;
	return !(f->opt.max_txn_bytes && len > f->opt.max_txn_bytes);
}

int oa_stage(struct oa_file *f, const struct iovec *iov, int cnt,
	     uint64_t off, uint64_t len)
{
	OA_ASSERT(oa_txn_state(f) == OA_TXN_EMPTY);
	if (!f->st_buf) {
		void *p;
		size_t cap = f->awu_max < OA_STAGE_MAX ? f->awu_max
						       : OA_STAGE_MAX;
		if (posix_memalign(&p, 4096, cap) != 0) {
			errno = ENOMEM;
			return -1;
		}
		f->st_buf = p;
	}
	char *q = f->st_buf;
	for (int i = 0; i < cnt; i++) {
		memcpy(q, iov[i].iov_base, iov[i].iov_len);
		q += iov[i].iov_len;
	}
	f->staged = true;
	f->st_off = off;
	f->st_len = len;
	f->pending = true;
	f->txn_bytes = len;
	return 0;
}

int oa_unstage(struct oa_file *f)
{
	struct iovec v;
	if (!f->staged)
		return 0;
	v = (struct iovec){ f->st_buf, f->st_len };
	f->staged = false;
	f->txn_bytes = 0;
	if (oa_journal_append(f, &v, 1, f->st_len, f->st_off) < 0) {
		f->staged = true;
		f->txn_bytes = f->st_len;
		f->pending = true;
		return -1;
	}
	return 0;
}

static int dio_open(struct oa_file *f)
{
	char proc[64];
	if (f->dio_fd >= 0)
		return 0;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", f->tfd);
	f->dio_fd = oa_xopenat(AT_FDCWD, proc,
			       O_RDWR | O_DIRECT | O_CLOEXEC, 0);
	return f->dio_fd < 0 ? -1 : 0;
}

int oa_commit_kernel(struct oa_file *f)
{
	struct oa_live l;
	uint64_t fsize;
	struct iovec v = { f->st_buf, f->st_len };
	ssize_t w;
	int r = 1;

	OA_ASSERT(oa_txn_state(f) == OA_TXN_STAGED);
	if (dio_open(f) < 0) {
		f->may_kernel = false;
		return 1;
	}
	/* Under AUTO, a commit that finds COMMIT taken goes to the journal,
	 * where commits waiting together share one flush (xcommit.c); this
	 * method's write is a flush of its own, one commit after the other. */
	if (f->method != OA_METHOD_KERNEL && oa_xp_on()) {
		if (oa_ctl_lock(f, OA_LOCK_COMMIT, F_WRLCK, 0) < 0)
			return errno == EAGAIN ? 1 : -1;
		if (oa_commit_begin_locked(f, &l, &fsize) < 0)
			return -1;
	} else if (oa_commit_begin(f, &l, &fsize) < 0) {
		return -1;
	}
	if (oa_unmark(f) < 0) {   /* M2 (control.c), under COMMIT */
		r = -1;
		goto out;
	}
	/* Growing the file is left to the journal: the write must replace
	 * committed bytes only. */
	if (f->st_off + f->st_len > fsize)
		goto out;
	/* Under AUTO, a journal commit newer than the checkpoint makes the
	 * journal cheaper than the checkpoint oa_commit_bypass_ready would
	 * need; forced, the checkpoint is done. */
	if (!MUTANT(20)) {
		if (l.last_seq > l.ckpt_seq && f->method != OA_METHOD_KERNEL)
			goto out;
		if (oa_commit_bypass_ready(f, &l) < 0) {
			r = -1;
			goto out;
		}
	}
	if (oa_apply_lock(f) < 0) {
		r = -1;
		goto out;
	}
	w = oa_xpwritev2(f->dio_fd, &v, 1, (off_t)f->st_off,
			 RWF_ATOMIC | RWF_DSYNC, true);
	int e = errno;
	oa_apply_unlock(f);
	if (w == (ssize_t)f->st_len) {
		oa_txn_drop(f);   /* committed */
		r = 0;
		goto out;
	}
	if (w < 0 && (e == EINVAL || e == EOPNOTSUPP || e == ENOSYS)) {
		/* Refused before anything was written (alignment, a unit this
		 * file does not take now): the journal takes it.  Only a
		 * kernel without the call stops the method for the handle. */
		if (e != EINVAL)
			f->may_kernel = false;
		goto out;
	}
	if (w < 0 && (e == ENOSPC || e == EDQUOT)) {
		/* Untorn: nothing was written.  The transaction stays. */
		errno = e;
		r = -1;
		goto out;
	}
	/* EIO or a short write: which state is durable cannot be told. */
	f->latched = true;
	errno = EIO;
	r = -1;
out:
	oa_commit_end(f);
	return r;
}
