/*
 * method.c - the out-of-place methods on top of the journal: which one a
 * handle uses, the clone apply, and the kernel's untorn writes.
 *
 * Every method keeps the journal's commit protocol and its invariants
 * (docs/FORMAT.md); each only changes where bytes travel:
 *
 *  journal  pending data is logged in the journal; the commit record is the
 *           commit point; the apply copies each op into the file.
 *  clone    the same records and the same commit record, but a big data
 *           record (>= f->clone_min: OA_CLONE_MIN forced, OA_CLONE_AUTO
 *           under AUTO) is placed with its payload
 *           block-congruent to its file offset, beyond the journal's
 *           pre-zeroed ring; the apply clones its whole blocks into the file
 *           (FICLONERANGE) and copies only the unaligned edges.  The data is
 *           written once; the file shares the journal's blocks.
 *           Why it is safe: recovery replays a commit by the same apply, and
 *           a clone is a redo from the journal's bytes, which I4 keeps intact
 *           until a checkpoint covers the commit; a clone that the crash cut
 *           half-way (XFS remaps extent by extent) is simply done again.  The
 *           file's later in-place writes cannot reach the journal's copy
 *           (reflink is copy-on-write on both sides).  I5 holds as before:
 *           the checkpoint's fdatasync of the file makes the remaps durable
 *           (they are metadata of the file).  Placed records lie beyond
 *           the ring and only they are cloned (oa_clone_span), so the ring
 *           is never shared and a small commit never copies on write; the
 *           shared blocks beyond it are never written again by the
 *           journal: the generation's recycle cuts them off (I12), since
 *           the disk may map them into the file until the file system's
 *           log is flushed (Btrfs, which never writes them in place, keeps
 *           them).
 *  kernel   a transaction that is one aligned power-of-two write within
 *           the file's atomic write unit is held in memory (one bounded
 *           buffer per handle, not per byte written) and goes down at commit
 *           as one O_DIRECT pwritev2(RWF_ATOMIC | RWF_DSYNC): the kernel
 *           makes it untorn and durable, without the journal.
 *           Why it is safe: it bypasses the journal, so recovery must never
 *           replay an older journal commit over it.  Recovery replays only
 *           commits newer than the durable checkpoint; so the kernel write
 *           is issued only when every journal commit is checkpointed
 *           (last_seq == ckpt_seq under COMMIT), forced by a checkpoint when
 *           the method is forced, else (AUTO) the transaction goes through
 *           the journal (I11).  Readers using the library are kept out by APPLY,
 *           as for an in-place apply.  A failed RWF_ATOMIC write leaves
 *           either state (it is untorn): EIO latches the handle (I9).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/statfs.h>

#include "internal.h"

static const struct {
	const char *name;
	int method;
} names[] = {
	{ "auto", OA_METHOD_AUTO },       { "journal", OA_METHOD_JOURNAL },
	{ "clone", OA_METHOD_CLONE },     { "exchange", OA_METHOD_EXCHANGE },
	{ "kernel", OA_METHOD_KERNEL },
};

/* OATOMIC_METHOD=NAME makes AUTO handles behave as if NAME were forced: the
 * test suite runs the same tests under every method this way. */
static int env_method(void)
{
	const char *e = getenv("OATOMIC_METHOD");
	if (!e || !*e)
		return OA_METHOD_AUTO;
	int m = oa__method_parse(e);
	return m < 0 ? OA_METHOD_AUTO : m;
}

const char *oa__method_name(int method)
{
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].method == method)
			return names[i].name;
	return NULL;
}

int oa__method_parse(const char *name)
{
	for (size_t i = 0; name && i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(name, names[i].name) == 0)
			return names[i].method;
	return -1;
}

static bool pow2(uint64_t v)
{
	return v && (v & (v - 1)) == 0;
}

static bool kernel_ok(const struct oa_caps *c)
{
	return c->rwf_atomic && pow2(c->awu_min) && pow2(c->awu_max) &&
	       c->awu_min <= c->awu_max;
}

int oa_method_auto(const struct oa_file *f, const struct oa_caps *c)
{
	(void)f;
	if (c->exchange && c->blk)
		return OA_METHOD_EXCHANGE;
	return c->reflink ? OA_METHOD_CLONE : OA_METHOD_JOURNAL;
}

bool oa_method_deferred(const struct oa_file *f)
{
	return f->opt.method == OA_METHOD_AUTO && env_method() == OA_METHOD_AUTO;
}

int oa_method_of(const struct oa_file *f, const struct oa_caps *c)
{
	int m = f->method ? f->method : f->opt.method;
	if (m == OA_METHOD_AUTO)
		m = env_method();
	return m == OA_METHOD_AUTO ? oa_method_auto(f, c) : m;
}

int oa_method_resolve(struct oa_file *f)
{
	struct oa_caps c;
	int m = f->opt.method;

	if (m == OA_METHOD_AUTO)
		m = env_method();
	f->may_clone = f->may_kernel = f->may_exchange = f->xchg_all = false;
	f->fs_cow = false;
	f->clone_min = OA_CLONE_MIN;
	f->method = OA_METHOD_JOURNAL;
	if (m == OA_METHOD_JOURNAL)
		return 0;             /* no probing needed */
	if (oa_caps_get(f, &c) < 0) {
		if (m != OA_METHOD_AUTO)
			return -1;
		return 0;             /* AUTO: the journal works anywhere */
	}
	f->blk = pow2(c.blk) && c.blk >= 512 && c.blk <= OA_PAD_MAX / 2
		 ? c.blk : 0;
	f->fs_cow = c.fs_magic == OA_BTRFS_MAGIC;
	f->awu_min = c.awu_min;
	f->awu_max = c.awu_max;
	switch (m) {
	case OA_METHOD_AUTO:
		f->may_clone = c.reflink && f->blk;
		f->clone_min = OA_CLONE_AUTO;
		/* Only what the device writes untorn itself: an atomic
		 * write the file system emulates out of place costs more than
		 * the journal (oa_caps.awu_hw). */
		while (c.awu_hw & (c.awu_hw - 1))
			c.awu_hw &= c.awu_hw - 1;
		f->may_kernel = kernel_ok(&c) && c.awu_hw >= c.awu_min;
		if (f->may_kernel)
			f->awu_max = c.awu_hw;
		f->may_exchange = c.exchange && f->blk;
		f->method = oa_method_auto(f, &c);
		return 0;
	case OA_METHOD_CLONE:
		if (!c.reflink || !f->blk)
			break;
		f->may_clone = true;
		f->method = m;
		return 0;
	case OA_METHOD_KERNEL:
		if (!kernel_ok(&c))
			break;
		f->may_kernel = true;
		f->method = m;
		return 0;
	case OA_METHOD_EXCHANGE:
		if (!c.exchange || !f->blk)
			break;
		f->may_exchange = f->xchg_all = true;
		/* what the exchange cannot take goes through the journal,
		 * cloned where it can be */
		f->may_clone = c.reflink;
		f->method = m;
		return 0;
	default:
		break;
	}
	/* A forced clone or exchange that only the journal directory's being
	 * on another file system prevents: say that, not "unsupported". */
	errno = c.xdev && (m == OA_METHOD_CLONE || m == OA_METHOD_EXCHANGE)
		? EXDEV : EOPNOTSUPP;
	return -1;
}

void oa_method_recovery(struct oa_file *f)
{
	f->method = OA_METHOD_AUTO;   /* never commits; oa_ioinfo tells what a
				       * writer would use */
	f->may_kernel = false;
	f->blk = 0;
	f->may_clone = false;
	f->blk_lazy = true;           /* oa_method_replay, if it replays */
}

void oa_method_replay(struct oa_file *f)
{
	struct statfs sfs;
	if (!f->blk_lazy)
		return;
	f->blk_lazy = false;
	if (oa_sys->fstatfs(f->tfd, &sfs) == 0 && pow2((uint64_t)sfs.f_bsize) &&
	    sfs.f_bsize >= 512 && (uint64_t)sfs.f_bsize <= OA_PAD_MAX / 2)
		f->blk = (uint32_t)sfs.f_bsize;
	f->may_clone = f->blk != 0;
}

/* ---- clone ---- */

bool oa_clone_span(const struct oa_file *f, uint64_t off, uint64_t len,
		   uint64_t joff, uint64_t *a, uint64_t *b)
{
	uint64_t bs = f->blk;
	if (!f->may_clone || !bs || joff % bs != off % bs)
		return false;
	*a = oa_align_up(off, bs);
	*b = (off + len) & ~(bs - 1);
	/* Placed records only (beyond the ring, which is never shared):
	 * whoever applies, a record a writer placed is cloned. */
	return joff >= OA_JRNL_INITIAL && *b > *a && *b - *a >= OA_CLONE_MIN;
}

/* Btrfs writes every block of a datacow file out of place and reuses a
 * freed extent only after the transaction that freed it has committed, so
 * no write of the journal can reach a block the file maps on disk; a
 * nodatacow file (chattr +C) may be overwritten in place once unshared.
 * Unknown (the flags cannot be read, any other file system): no. */
bool oa_journal_cow(const struct oa_file *f, int jfd)
{
	int flags = 0;
	if (!f->fs_cow || oa_xioctl(jfd, FS_IOC_GETFLAGS, &flags) < 0)
		return false;
	return !(flags & FS_NOCOW_FL);
}

int oa_clone_in(struct oa_file *f, int jfd, uint64_t a, uint64_t b,
		uint64_t joff)
{
	struct file_clone_range fcr = {
		.src_fd = jfd,
		.src_offset = joff,
		.src_length = b - a,
		.dest_offset = a,
	};
	if (oa_xioctl(f->tfd, FICLONERANGE, &fcr) == 0)
		return 0;
	switch (errno) {
	case EOPNOTSUPP: case ENOTTY: case EXDEV: case EINVAL: case ENOSYS:
	case EBADF: case EPERM: case ETXTBSY:
		/* Checked before anything is remapped: this file system, this
		 * pair of files, cannot clone.  Copy instead, from now on. */
		f->may_clone = false;
		return 1;
	default:
		return -1;
	}
}

/* ---- kernel ---- */

bool oa_stage_fits(struct oa_file *f, uint64_t off, uint64_t len)
{
	if (!f->may_kernel || f->pending || f->staged)
		return false;
	if (!pow2(len) || len < f->awu_min || len > f->awu_max ||
	    len > OA_STAGE_MAX || off % len != 0)
		return false;
	return !(f->opt.max_txn_bytes && len > f->opt.max_txn_bytes);
}

int oa_stage(struct oa_file *f, const struct iovec *iov, int cnt,
	     uint64_t off, uint64_t len)
{
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

	if (dio_open(f) < 0) {
		f->may_kernel = false;
		return 1;
	}
	if (oa_lock(f->cfd, OA_LOCK_COMMIT, F_WRLCK, 1) < 0)
		return -1;
	if (oa_heal_locked(f, &l) < 0 || oa_xfsize(f->tfd, &fsize) < 0) {
		r = -1;
		goto out;
	}
	/* Growing the file is left to the journal: the write must replace
	 * committed bytes only. */
	if (f->st_off + f->st_len > fsize)
		goto out;
	/* No journal commit may be replayed over this write (top of file). */
	if (l.last_seq > l.ckpt_seq && !MUTANT(20)) {
		if (f->method != OA_METHOD_KERNEL)
			goto out;   /* AUTO: the journal is cheaper than a
				     * checkpoint now */
		if (oa_checkpoint_locked(f) < 0) {
			f->latched = errno == EIO;
			r = -1;
			goto out;
		}
	}
	/* ... nor one that a clean close gave up without a flush (I14): the
	 * control file's clean state, or its initialisation, is durable. */
	if (!MUTANT(20) && oa_ctl_sync_locked(f) < 0) {
		f->latched = errno == EIO;
		r = -1;
		goto out;
	}
	if (oa_lock(f->cfd, OA_LOCK_APPLY, F_WRLCK, 1) < 0) {
		r = -1;
		goto out;
	}
	w = oa_xpwritev2(f->dio_fd, &v, 1, (off_t)f->st_off,
			 RWF_ATOMIC | RWF_DSYNC, true);
	int e = errno;
	oa_lock(f->cfd, OA_LOCK_APPLY, F_UNLCK, 0);
	if (w == (ssize_t)f->st_len) {
		f->staged = false;
		f->pending = false;
		f->txn_bytes = 0;
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
	oa_lock(f->cfd, OA_LOCK_COMMIT, F_UNLCK, 0);
	return r;
}
