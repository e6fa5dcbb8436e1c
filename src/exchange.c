/*
 * exchange.c - the exchange method: XFS range exchange (Linux 6.10+).
 *
 * Pending whole blocks are written once, out of place, into a shadow file
 * (an O_TMPFILE beside the file, nameless, gone with the process) at their
 * own file offsets, so the shadow holds only the written ranges, as blocks
 * and holes.  The unaligned edges of writes, and small writes, go to the
 * journal as with any method.  The commit:
 *
 *   1. under COMMIT: if a journal commit is newer than the durable
 *      checkpoint, checkpoint first (I11: recovery must never replay an
 *      older journal commit over what the exchange put in the file);
 *   2. compose every block that journal bytes touch: the committed block of
 *      the file with all pending bytes over it, written into the shadow
 *      (under COMMIT, so no other commit can change the block meanwhile);
 *   3. under APPLY: one XFS_IOC_EXCHANGE_RANGE over the transaction's span
 *      with FILE1_WRITTEN (only the shadow's written blocks move; its holes
 *      leave the file alone) and DSYNC (durable on return).
 *
 * The exchange is the commit point: the kernel logs it as one intent chain
 * and its log recovery finishes it after a crash, so the file holds either
 * every exchanged block or none; the shadow's data was written back before
 * the exchange was logged, and the log write that carries it flushes the
 * device cache first.  Nothing of ours needs recovering, and a killed
 * process leaves either state.  The journal records of the edges never get
 * a commit record: recovery ignores them (I1).
 *
 * A transaction the exchange cannot take (it truncates or grows the file,
 * or the kernel refuses) has its shadow bytes moved into the journal and
 * commits there.  Under AUTO, which writes go to the shadow is decided as
 * they are written (oa_xchg_wants).
 *
 * The whole replace.  A transaction that keeps no byte of the file it
 * found - it truncated to 0 before writing, or its writes cover, from
 * offset 0 on, all that its truncate (or the file's end) leaves - and
 * does not make it longer (W3) is the new file entire: what a program that writes a temporary and renames it
 * over the old file means, keeping the inode.  Its writes go to the
 * shadow as they are, edges and small writes too, and the commit is one
 * exchange of the two files from offset 0 to their ends
 * (XFS_EXCHANGE_RANGE_TO_EOF | DSYNC): each file gets the other's blocks
 * and size, logged as one intent chain, so a truncation or a growth
 * commits with the bytes.  Only where every pending byte is in the shadow
 * and covers what the file keeps (W1); otherwise the shadow's unaligned
 * edges are composed into whole blocks at commit and the ranges are
 * exchanged as above, or, for a truncate or a growth, the journal takes
 * the transaction.
 *
 *   W1 The shadow, cut to the transaction's final size, holds exactly the
 *      file's next contents: every pending extent is in it, at its own
 *      offset, and the extents cover [0, K) without a gap, K being what
 *      the file keeps of its old bytes (the smallest truncation, or the
 *      committed size, whichever is less, clipped to the final size):
 *      checked under COMMIT against the committed size, before the
 *      exchange.  The rest of the shadow is holes, zeros, as a truncate
 *      or a write past the end leaves them: a truncate of the transaction
 *      cuts the shadow too (oa_shadow_cut), so that blocks written before
 *      it, dropped from the index, are not exchanged in (a shadow byte
 *      the index does not point at was either cut so, or is covered by a
 *      journal extent, and then the transaction is no whole replace).
 *   W2 As for the ranges: I11 first (no journal commit newer than the
 *      durable checkpoint, the control file's clean state durable), the
 *      exchange under APPLY, durable on return (DSYNC): nothing of ours
 *      to recover.
 *   W3 Only where the file does not grow: the final size is at most the
 *      committed one.  A growing exchange to EOF is not whole after a
 *      power cut on the XFS we run on (Linux 6.18): measured with plain
 *      system calls, a 33,333-byte file exchanged to EOF with a 70,000-
 *      byte O_TMPFILE (written, even fdatasync'd; DSYNC), the file system
 *      cut (FS_IOC_SHUTDOWN, no log flush) and mounted again: 3 of 12 cuts
 *      left the file 70,000 bytes long with every block past the old end
 *      reading zeros; shrinking and same-size exchanges, 16 cuts, none.
 *      A growth goes through the journal.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <linux/types.h>

#include "internal.h"

/* Under AUTO, small runs of whole blocks go to the journal: an open
 * handle's journal commit costs one flush of blocks the ring has already
 * allocated, and its apply and checkpoint are shared by many commits.  Not
 * a handle's first transaction while the control file is clean (no
 * journal in use, nothing to checkpoint): there the journal costs its
 * commit flush, which also allocates the ring (a file-system transaction),
 * then the file's flush and the cut at the last close (I14) - two flushes
 * of our own and three at the device, where the exchange costs one call
 * with its one flush and leaves nothing behind (the one-shot update: 4 KiB
 * on XFS, 930 us through the journal, 570 us exchanged).  A handle that
 * stays open pays it once; its later commits take the journal. */
static bool clean_first(const struct oa_file *f)
{
	uint64_t csize;
	return f->xchg_first && f->jfd < 0 && f->cfd >= 0 &&
	       oa_xfsize(f->cfd, &csize) == 0 && csize == OA_CLEAN_SIZE;
}

static bool first_clean(const struct oa_file *f)
{
	return oa_index_count(f->ix) < OA_XCHG_FIRST && clean_first(f);
}

/* The exchange's cost grows with the runs it moves (the transaction's
 * journal bytes are composed into the shadow at commit, so it moves them
 * all): a first transaction of many scattered blocks commits through the
 * journal, its first runs moved back out of the shadow (oa_unshadow).
 * Measured on XFS, one-shot updates of N scattered 4 KiB blocks of a
 * 64 MiB file, journal against exchange: N = 1 1.2-1.5 ms against 0.73,
 * N = 16 2.2-2.3 against 2.1-2.4, N = 256 11 against 20, N = 2048 52-57
 * against 141-149. */
bool oa_xchg_scattered(const struct oa_file *f)
{
	return f->shadowed && !f->xchg_all && !f->shadow_big &&
	       !(f->has_trunc && f->t_min == 0) &&
	       oa_index_count(f->ix) > OA_XCHG_FIRST;
}

/* Walk the pending extents: false if one is not in the shadow (or there
 * are too many to look at per write); else *COVER is how far from 0 they
 * run without a gap. */
static bool all_shadow(const struct oa_file *f, uint64_t *cover)
{
	struct oa_ext e;
	size_t n = 0;
	*cover = 0;
	for (void *c = oa_index_seek(f->ix, 0); c; c = oa_index_next(f->ix, c)) {
		oa_index_get(c, &e);
		if (!(e.joff & OA_SHADOW) || ++n > OA_XCHG_WHOLE_EXT)
			return false;
		if (e.off <= *cover && e.off + e.len > *cover)
			*cover = e.off + e.len;
	}
	return true;
}

/* May a write at OFF go to the shadow whole, as part of a whole replace?
 * Under AUTO only in a handle's first transaction while the control file
 * is clean (the journal costs less on a handle that keeps committing);
 * forced, in any transaction. */
static bool whole_wants(const struct oa_file *f, uint64_t off)
{
	uint64_t cover;
	if (!f->may_exchange || !f->blk || f->staged || f->shadow_bad)
		return false;
	if (!f->xchg_all && !clean_first(f))
		return false;
	if (!all_shadow(f, &cover))
		return false;
	return (f->has_trunc && f->t_min == 0) || off <= cover;
}

int oa_xchg_wants(const struct oa_file *f, uint64_t off, uint64_t total)
{
	uint64_t bs = f->blk, a, b;
	uint64_t fsize;
	if (whole_wants(f, off))
		return OA_XCHG_WHOLE;
	/* A transaction that truncates or grows the file commits through the
	 * journal: its bytes go there at once rather than be moved later. */
	if (!f->may_exchange || !bs || f->has_trunc)
		return OA_XCHG_NO;
	a = oa_align_up(off, bs);
	b = (off + total) & ~(bs - 1);
	if (b <= a || !(f->xchg_all || b - a >= OA_XCHG_AUTO || first_clean(f)))
		return OA_XCHG_NO;
	return oa_xfsize(f->tfd, &fsize) == 0 && off + total <= fsize
	       ? OA_XCHG_BLOCKS : OA_XCHG_NO;
}

/* The bytes [SKIP, SKIP+LEN) of IOV[0..CNT) as iovecs in OUT (room for
 * CNT).  Returns their number. */
static int iov_sub(const struct iovec *iov, int cnt, size_t skip, size_t len,
		   struct iovec *out)
{
	int n = 0;
	for (int i = 0; i < cnt && len > 0; i++) {
		if (skip >= iov[i].iov_len) {
			skip -= iov[i].iov_len;
			continue;
		}
		size_t take = iov[i].iov_len - skip;
		if (take > len)
			take = len;
		out[n++] = (struct iovec){ (char *)iov[i].iov_base + skip, take };
		len -= take;
		skip = 0;
	}
	return n;
}

static int shadow_open(struct oa_file *f)
{
	if (f->sfd >= 0)
		return 0;
	/* Beside the file: the exchange needs both on one file system. */
	f->sfd = oa_xopenat(f->tdirfd, ".", O_TMPFILE | O_RDWR | O_EXCL, 0600);
	return f->sfd < 0 ? -1 : 0;
}

int oa_shadow_cut(struct oa_file *f, uint64_t len)
{
	uint64_t size;
	if (f->sfd < 0 || !f->shadow_dirty || MUTANT(67))
		return 0;
	if (oa_xfsize(f->sfd, &size) < 0)
		return -1;
	return size > len ? oa_xftruncate(f->sfd, (off_t)len) : 0;
}

ssize_t oa_xchg_put(struct oa_file *f, const struct iovec *iov, int cnt,
		    size_t total, uint64_t off, int how)
{
	struct iovec v[64 + 1];
	uint64_t bs = f->blk;
	uint64_t a = oa_align_up(off, bs), b = (off + total) & ~(bs - 1);
	int n;

	if (cnt > 64) {
		errno = EINVAL;
		return -1;
	}
	bool whole = how == OA_XCHG_WHOLE;
	if (shadow_open(f) < 0) {
		/* The shadow is where the method writes, not where the data
		 * must go: a directory this user may not create in (the
		 * probe that found the exchange working ran in another of
		 * the file system), no inode left, too many descriptors -
		 * the handle writes through the journal from now on, as
		 * where the file system has no exchange. */
		f->may_exchange = false;
		return oa_journal_append(f, iov, cnt, total, off) < 0
		       ? -1 : (ssize_t)total;
	}
	if (whole) {
		/* A whole replace (W1): every byte to the shadow, edges too. */
		f->shadow_dirty = true;
		if (total >= OA_XCHG_AUTO)
			f->shadow_big = true;
		if (oa_pwritev_full(f->sfd, iov, cnt, (off_t)off) < 0 ||
		    oa_index_insert(f->ix, off, total, off | OA_SHADOW) < 0) {
			f->shadow_bad = true;
			return -1;
		}
		oa_wb_note(&f->swb, f->sfd, off, total);
		f->shadowed = true;
		f->pending = true;
		f->txn_bytes += total;
		return (ssize_t)total;
	}
	/* In file order, so that a failure leaves a prefix pending: the
	 * caller reports a short write, as pwrite(2) would. */
	if (a > off) {
		n = iov_sub(iov, cnt, 0, a - off, v);
		if (oa_journal_append(f, v, n, a - off, off) < 0)
			return -1;
	}
	n = iov_sub(iov, cnt, a - off, b - a, v);
	f->shadow_dirty = true;
	if (b - a >= OA_XCHG_AUTO)
		f->shadow_big = true;
	if (oa_pwritev_full(f->sfd, v, n, (off_t)a) < 0 ||
	    oa_index_insert(f->ix, a, b - a, a | OA_SHADOW) < 0) {
		f->shadow_bad = true;
		return a > off ? (ssize_t)(a - off) : -1;
	}
	oa_wb_note(&f->swb, f->sfd, a, b - a);
	f->shadowed = true;
	f->pending = true;
	f->txn_bytes += b - a;
	if (off + total > b) {
		n = iov_sub(iov, cnt, b - off, off + total - b, v);
		if (oa_journal_append(f, v, n, off + total - b, b) < 0)
			return (ssize_t)(b - off);
	}
	return (ssize_t)total;
}

int oa_unshadow(struct oa_file *f)
{
	struct oa_ext *list = NULL, e;
	size_t n = 0, cap = 0;
	int r = -1;

	if (f->shadowed && oa_need_buf(f) < 0)
		return -1;
	if (!f->shadowed)
		return 0;
	/* Acquiring a journal zero-fills it through f->buf: first. */
	if (f->jfd < 0 && oa_journal_acquire(f) < 0)
		return -1;
	for (void *c = oa_index_seek(f->ix, 0); c; c = oa_index_next(f->ix, c)) {
		oa_index_get(c, &e);
		if (!(e.joff & OA_SHADOW))
			continue;
		if (n == cap) {
			size_t nc = cap ? 2 * cap : 16;
			struct oa_ext *p = realloc(list, nc * sizeof(*p));
			if (!p) {
				errno = ENOMEM;
				goto out;
			}
			list = p;
			cap = nc;
		}
		list[n++] = e;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t off = list[i].off, len = list[i].len,
			 so = list[i].joff & ~OA_SHADOW;
		while (len > 0) {
			size_t k = len < OA_BUF_BYTES ? (size_t)len : OA_BUF_BYTES;
			struct iovec v = { f->buf, k };
			if (oa_pread_full(f->sfd, f->buf, k, (off_t)so) < 0)
				goto out;
			/* re-inserted over itself: the index now points into
			 * the journal */
			f->txn_bytes -= k;
			if (oa_journal_append(f, &v, 1, k, off) < 0) {
				f->txn_bytes += k;
				goto out;
			}
			off += k;
			so += k;
			len -= k;
		}
	}
	f->shadowed = false;
	oa_shadow_reset(f);
	r = 0;
out:
	free(list);
	return r;
}

/* Compose block [K, K+BS) (clipped to SIZE) in the shadow: the committed
 * bytes with every pending extent over them. */
static int compose(struct oa_file *f, uint64_t k, uint64_t size)
{
	uint64_t end = k + f->blk < size ? k + f->blk : size;
	unsigned char *p;
	struct oa_ext e;

	if (oa_need_buf(f) < 0)
		return -1;
	p = f->buf;
	if (oa_pread_full(f->tfd, p, (size_t)(end - k), (off_t)k) < 0)
		return -1;
	for (void *c = oa_index_seek(f->ix, k); c; c = oa_index_next(f->ix, c)) {
		uint64_t jo, a, b;
		int fd;
		oa_index_get(c, &e);
		if (e.off >= end)
			break;
		a = e.off > k ? e.off : k;
		b = e.off + e.len < end ? e.off + e.len : end;
		fd = oa_ext_fd(f, &e, &jo);
		if (oa_pread_full(fd, p + (a - k), (size_t)(b - a),
				  (off_t)(jo + (a - e.off))) < 0)
			return -1;
	}
	f->shadow_dirty = true;
	return oa_pwrite_full(f->sfd, p, (size_t)(end - k), (off_t)k);
}

/* The exchange's result: 0 done, 1 refused before anything changed (the
 * journal takes the transaction), -1 failed (errno). */
static int exchanged(struct oa_file *f, int xr, int e2, uint64_t lo,
		     uint64_t hi)
{
	if (xr == 0) {
		oa_refill(f->tfd, lo, hi - lo);
		/* The shadow now holds the old blocks: oa_txn_drop gives them
		 * back. */
		oa_txn_drop(f);
		return 0;
	}
	switch (e2) {
	case EINVAL: case EOPNOTSUPP: case ENOTTY: case EXDEV: case ENOSYS:
		/* Refused before anything changed: the journal takes it. */
		f->may_exchange = false;
		return 1;
	case ENOSPC: case EDQUOT: case EINTR: case ENOMEM:
		/* Nothing exchanged; the transaction stays. */
		errno = e2;
		return -1;
	default:
		/* EIO: which state is durable cannot be told (I9). */
		f->latched = true;
		errno = EIO;
		return -1;
	}
}

/* W1 under COMMIT, FSIZE the committed size: the whole replace's final
 * size in *FINAL, or false. */
static bool whole_fits(struct oa_file *f, uint64_t fsize, uint64_t *final)
{
	uint64_t end = oa_index_end(f->ix), cover, keep;
	uint64_t fin = f->has_trunc ? f->t_last : fsize;
	if (end > fin)
		fin = end;
	keep = f->has_trunc && f->t_min < fsize ? f->t_min : fsize;
	if (keep > fin)
		keep = fin;
	if (!all_shadow(f, &cover) || (!MUTANT(66) && cover < keep))
		return false;
	/* W3: not a growth (the journal takes it) */
	if (fin > fsize && !MUTANT(68))
		return false;
	*final = fin;
	return true;
}

static int commit_whole(struct oa_file *f, struct oa_live *l, uint64_t fin)
{
	struct oa_xfs_exchange_range x;
	/* W2 */
	if (!MUTANT(22) && oa_commit_bypass_ready(f, l) < 0)
		return -1;
	if (oa_xftruncate(f->sfd, (off_t)fin) < 0)
		return -1;
	x = (struct oa_xfs_exchange_range){ .file1_fd = f->sfd,
		.flags = OA_XFS_EXCHANGE_TO_EOF | OA_XFS_EXCHANGE_DSYNC };
	if (oa_apply_lock(f) < 0)
		return -1;
	oa_stats_flush();   /* DSYNC: the exchange is this commit's flush */
	int xr = oa_xioctl(f->tfd, OA_XFS_IOC_EXCHANGE_RANGE, &x);
	int e2 = errno;
	oa_apply_unlock(f);
	return exchanged(f, xr, e2, 0, fin);
}

int oa_commit_exchange(struct oa_file *f)
{
	struct oa_xfs_exchange_range x;
	struct oa_live l;
	uint64_t fsize, fin;
	struct oa_ext e;
	uint64_t bs = f->blk, lo = UINT64_MAX, hi = 0, done = 0;
	int r = 1;

	OA_ASSERT(oa_txn_state(f) == OA_TXN_SHADOW);
	/* (a shadow that may hold bytes no extent names: the exchange would
	 * move them in; the journal copies only the extents) */
	if (!bs || f->sfd < 0 || f->shadow_bad ||
	    (f->has_trunc && !all_shadow(f, &fin)))
		return 1;
	if (oa_commit_begin(f, &l, &fsize) < 0)
		return -1;
	if (oa_unmark(f) < 0)   /* M2 (control.c), under COMMIT */
		goto fail;
	if (whole_fits(f, fsize, &fin)) {
		r = commit_whole(f, &l, fin);
		goto out;
	}
	if (f->has_trunc || oa_index_end(f->ix) > fsize)
		goto out;    /* a truncate, growth: the journal's job */
	if (!MUTANT(22) && oa_commit_bypass_ready(f, &l) < 0)
		goto fail;
	/* Compose the blocks journal bytes touch, and the partial edge blocks
	 * of what a whole replace that did not fit put in the shadow; find
	 * the span. */
	for (void *c = oa_index_seek(f->ix, 0); c; c = oa_index_next(f->ix, c)) {
		oa_index_get(c, &e);
		uint64_t a = e.off & ~(bs - 1), b = oa_align_up(e.off + e.len, bs);
		if (a < lo)
			lo = a;
		if (b > hi)
			hi = b;
		if (e.joff & OA_SHADOW) {
			bool head = e.off % bs != 0 && a >= done;
			bool tail = (e.off + e.len) % bs != 0 &&
				    e.off + e.len < fsize && b - bs >= done &&
				    !(head && b - bs == a);
			if ((head && compose(f, a, fsize) < 0) ||
			    (tail && compose(f, b - bs, fsize) < 0)) {
				if (errno != EBADF)
					goto fail;
				f->may_exchange = false;
				goto out;
			}
			if ((head || tail) && b > done)
				done = b;
			continue;
		}
		for (uint64_t k = a > done ? a : done; k < b; k += bs)
			if (compose(f, k, fsize) < 0) {
				if (errno != EBADF)
					goto fail;
				/* a write-only handle cannot read the
				 * committed edges: the journal takes it */
				f->may_exchange = false;
				goto out;
			}
		if (b > done)
			done = b;
	}
	if (hi > fsize)
		hi = fsize;   /* a partial last block: both files end there */
	if (lo >= hi)
		goto out;
	if (oa_xftruncate(f->sfd, (off_t)fsize) < 0)
		goto fail;
	x = (struct oa_xfs_exchange_range){ .file1_fd = f->sfd, .file1_offset = lo,
				  .file2_offset = lo, .length = hi - lo,
				  .flags = OA_XFS_EXCHANGE_FILE1_WRITTEN |
					   OA_XFS_EXCHANGE_DSYNC };
	if (oa_apply_lock(f) < 0)
		goto fail;
	oa_stats_flush();   /* DSYNC: the exchange is this commit's flush */
	int xr = oa_xioctl(f->tfd, OA_XFS_IOC_EXCHANGE_RANGE, &x);
	int e2 = errno;
	oa_apply_unlock(f);
	r = exchanged(f, xr, e2, lo, hi);
	goto out;
fail:
	r = -1;
out:
	oa_commit_end(f);
	return r;
}
