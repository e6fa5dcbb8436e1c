/*
 * commit.c - the journal method: pending data into the handle's journal,
 * the commit protocol, apply in place, checkpoint.
 *
 * The invariants (docs/FORMAT.md, "Invariants"), cited where a flush or an
 * order upholds them:
 *
 *  I1  A transaction is committed iff its commit record and every record of
 *      the transaction before it (from tx_start) are intact: right magic,
 *      generation, LSN and CRC-32C.  Checksums, not write order, tell a
 *      complete flush from a torn one.
 *  I2  oa_commit returns 0 only after one fdatasync of the journal, issued
 *      after the data records, the commit record and the journal's header
 *      slot were written, returned 0.
 *  I3  No byte of a transaction reaches the file before I2.
 *  I4  Every committed transaction newer than the durable checkpoint keeps
 *      its records intact until a checkpoint covers it.
 *  I5  A checkpoint record (ckpt_seq = S) is written only after an
 *      fdatasync of the file that followed the apply of every transaction
 *      with seq <= S returned 0.
 *  I6  A journal is reset (new generation, records overwritten) only when
 *      every commit in it has seq <= the durable checkpoint.
 *  I7  Commits are totally ordered by seq, assigned under the COMMIT lock;
 *      recovery replays every committed transaction newer than the
 *      checkpoint, from every journal, in seq order, so the result is the
 *      state after the newest one whatever the file held (idempotent).
 *  I8  A journal or control file is durable, contents and name, before any
 *      commit relies on it.
 *  I9  A failed flush is never retried as if it had worked: after a failed
 *      commit flush the handle is latched (EIO) and the commit is revoked if
 *      possible; after a failed file flush the checkpoint is not advanced and
 *      every commit is replayed from the journals before the next one.
 *  I10 The live area's dirty marker is set before a commit record is
 *      written and cleared after its apply; a committer or opener that finds
 *      it set while holding COMMIT knows the previous committer died, and
 *      replays.
 *  I13 The live area's seal (boot id, ack_seq, gap_seq) records a commit
 *      as acknowledged after its flush returned and before its apply
 *      begins, and a seq a failed commit consumed when it fails; recovery
 *      in the same boot takes an acknowledged commit it cannot find
 *      complete (ack_seq, and every seq after max(checkpoint, gap_seq) up
 *      to it) for damage (EUCLEAN), never for a torn flush.
 *  I12 The journal never writes again a block that a clone may have shared
 *      with the file: a generation that placed a record for cloning ends
 *      by cutting the journal back to its ring (recycle), and the next
 *      generation's records beyond the ring go to blocks allocated anew.
 *      The file unshares a block (copy on write when its pages are written
 *      back, a later clone over it) in the file system's log; until that
 *      is durable the disk still maps the block into the file, and a write
 *      the journal made in place, once the file system counted it the only
 *      owner, would show in the file after a crash, holding bytes no
 *      commit wrote (XFS; tests/powercut_shared.sh).  A cut cannot expose
 *      a block of the file: a block freed is reused only once its freeing
 *      is durable, and the truncation is ordered after the unsharing.
 *      Not needed where the journal's blocks are never written in place
 *      (Btrfs, datacow: oa_journal_cow), which keeps them.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <unistd.h>

#include "crc32c.h"
#include "internal.h"
#include "oatomic-private.h"

static int killpoint = -1;

void oa__set_killpoint(int point)
{
	killpoint = point;
}

void oa_killpoint(int point)
{
	if (killpoint < 0) {
		const char *e = getenv("OATOMIC_KILLPOINT");
		killpoint = e ? atoi(e) : 0;
	}
	if (killpoint == point)
		raise(SIGKILL);
}

/* ---- journal files ---- */

static int fill_jnl(struct oa_file *f, int fd, void *arg)
{
	struct rlimit rl;
	/* A file size limit below the ring: fail as pwrite(2) would, but
	 * before writing, and without the SIGXFSZ the kernel would send. */
	if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < OA_JRNL_INITIAL) {
		errno = EFBIG;
		return -1;
	}
	struct oa_slot s = { .slot_seq = 0, .a = oa_random64(), .ino = f->ino,
			     .igen = f->igen, .era = f->era };
	(void)arg;
	if (oa_need_buf(f) < 0)
		return -1;
	if (oa_slot_write(fd, 0, OA_JNL_MAGIC, &s) < 0)
		return -1;
	/* Zero-filled, not fallocated: the commit flush then overwrites
	 * written blocks and never has to allocate, convert unwritten extents
	 * or change the size (one flush, no file-system transaction). */
	memset(f->buf, 0, OA_BUF_BYTES);
	for (uint64_t off = OA_DATA_START; off < OA_JRNL_INITIAL;) {
		size_t n = OA_BUF_BYTES;
		if (off + n > OA_JRNL_INITIAL)
			n = OA_JRNL_INITIAL - off;
		if (oa_pwrite_full(fd, f->buf, n, (off_t)off) < 0)
			return -1;
		off += n;
	}
	return 0;
}

int oa_journal_reset(struct oa_file *f)
{
	struct oa_slot s = { .slot_seq = f->jslot_seq + 1,
			     .a = oa_random64(), .ino = f->ino,
			     .igen = f->igen, .era = f->era };
	/* No flush: records of the old generation are all checkpointed (I6),
	 * so losing this write loses nothing; records of the new generation
	 * only count once a commit flush has made this slot durable too. */
	if (oa_slot_write(f->jfd, f->jbase, OA_JNL_MAGIC, &s) < 0)
		return -1;
	f->jslot_seq = s.slot_seq;
	f->gen = s.a;
	f->pos = f->jdata;
	if (f->jidx == 0) {
		/* A new generation's records are all written after any flush
		 * of the control file that failed before: they are not lost
		 * behind clean pages (OA_LIVE_J0ERR). */
		struct oa_live l;
		if (oa_live_read(f, &l) == 0 && (l.flags & OA_LIVE_J0ERR)) {
			l.flags &= ~OA_LIVE_J0ERR;
			oa_live_write(f, &l);
		}
	}
	f->tx_id = 1;
	f->tx_start = f->pos;
	f->rec_open = false;
	f->jplaced = false;
	return 0;
}

static uint64_t live_jmax(const struct oa_live *l, int k)
{
	return k < OA_LIVE_JMAX ? l->jmax[k] : l->last_seq;
}

/*
 * Start this handle's journal over.  I6: every commit it holds must be
 * checkpointed first, so checkpoint when the live area says it holds one
 * newer than the checkpoint.  A journal grown beyond KEEP bytes, or one
 * whose generation placed records for cloning (I12), is cut back to its
 * initial size; then a new generation.  Caller holds COMMIT and has healed
 * (the live area is current).
 */
int oa_journal_recycle_locked(struct oa_file *f, uint64_t keep)
{
	struct oa_live l;
	uint64_t jsize;

	if (oa_live_read(f, &l) < 0)
		return -1;
	if (live_jmax(&l, f->jidx) > l.ckpt_seq && !MUTANT(21) &&
	    oa_checkpoint_locked(f) < 0)
		return -1;
	/* I12: a generation that placed records for cloning leaves none of
	 * its blocks to the next (unless the file system never writes them in
	 * place: Btrfs), nor does a journal taken over (KEEP is then the
	 * initial size), whose last owner may have placed some.  All its
	 * commits are checkpointed (I6), so the cut loses nothing; where it
	 * is needed and fails, no new generation starts. */
	if (f->jplaced && !f->jcow && !MUTANT(24))
		keep = OA_JRNL_INITIAL;
	if (oa_xfsize(f->jfd, &jsize) < 0) {
		if (keep == OA_JRNL_INITIAL)
			return -1;
		jsize = 0;
	}
	if (jsize > keep && oa_xftruncate(f->jfd, OA_JRNL_INITIAL) < 0 &&
	    keep == OA_JRNL_INITIAL)
		return -1;
	return oa_journal_reset(f);
}

static int name_durable(struct oa_file *f, int k, bool fresh)
{
	struct oa_live l;
	uint64_t bit = k < 64 ? 1ull << k : 0;
	if (oa_live_read(f, &l) < 0)
		return -1;
	if (bit && (l.jnamed & bit))
		return 0;
	if (!fresh && !MUTANT(23) && oa_xfsync(f->dfd) < 0)
		return -1;
	if (!bit) {
		/* No jmax slot for it: the last close checkpoints durably
		 * before it removes the extra journals (I14). */
		if (l.flags & OA_LIVE_XHIGH)
			return 0;
		l.flags |= OA_LIVE_XHIGH;
		return oa_live_write(f, &l);
	}
	l.jnamed |= bit;
	return oa_live_write(f, &l);
}

/* Take journal 0, in the control file, if no other handle has it: a
 * second descriptor of the control file, whose own lock byte says who owns
 * it.  1 taken, 0 another handle's, -1 error. */
static int take_j0(struct oa_file *f)
{
	char name[NAME_MAX + 1];
	int fd;
	if (oa_name(f, name, sizeof(name), OA_NAME_CTL, 0) < 0)
		return -1;
	fd = oa_xopenat(f->dfd, name, O_RDWR | O_NOFOLLOW, 0);
	if (fd < 0)
		return -1;
	if (oa_lock(fd, OA_LOCK_J0, F_WRLCK, 0) < 0) {
		oa_xclose(fd);
		return errno == EAGAIN ? 0 : -1;
	}
	f->jfd = fd;
	f->jidx = 0;
	f->jbase = OA_J0_SLOT;
	f->jdata = OA_J0_DATA;
	f->jlock = OA_LOCK_J0;
	return 1;
}

/* Take an extra journal file, .NAME.oaj-K (K >= 1), making one if none is
 * free.  0 or -1. */
static int take_extra(struct oa_file *f, bool *fresh_out)
{
	char name[NAME_MAX + 1];
	int fd;

	for (int k = 1; k < 4096; k++) {
		bool fresh = false;
		if (oa_name(f, name, sizeof(name), OA_NAME_JNL, k) < 0)
			return -1;
		fd = oa_xopenat(f->dfd, name, O_RDWR | O_NOFOLLOW, 0);
		if (fd < 0 && errno == ENOENT) {
			fd = oa_create_atomic(f, name, fill_jnl, NULL);
			fresh = fd >= 0;   /* its name is durable (I8) */
			if (fd < 0 && errno == EEXIST) {
				k--;   /* someone else created it: look again */
				continue;
			}
		} else if (fd >= 0 && oa_check_safe(f, fd) < 0 &&
			   (errno != EPERM || oa_narrow(f, fd) < 0)) {
			/* Someone else's: skipped.  Ours, wider than the file
			 * now (the file was chmod-ed), is narrowed: whatever
			 * it holds is checkpointed before reuse. */
			oa_xclose(fd);
			continue;
		}
		if (fd < 0)
			return -1;
		if (oa_lock(fd, OA_LOCK_OWNER, F_WRLCK, 0) < 0) {
			oa_xclose(fd);
			if (errno == EAGAIN)
				continue;   /* another handle's journal */
			return -1;
		}
		f->jfd = fd;
		f->jidx = k;
		f->jbase = 0;
		f->jdata = OA_DATA_START;
		f->jlock = OA_LOCK_OWNER;
		*fresh_out = fresh;
		return 0;
	}
	errno = EMFILE;
	return -1;
}

int oa_journal_acquire(struct oa_file *f)
{
	struct oa_slot s;
	struct rlimit rl;
	bool fresh = false;
	int r;

	if (!f->cfd_rw) {
		errno = EBADF;
		return -1;
	}
	oa_home_refresh(f);
	r = take_j0(f);
	if (r < 0)
		return -1;
	if (r == 0 && take_extra(f, &fresh) < 0)
		return -1;
	f->jcow = oa_journal_cow(f, f->jfd);
	f->ncommit = 0;
	f->fsize_max = getrlimit(RLIMIT_FSIZE, &rl) == 0 &&
		       rl.rlim_cur != RLIM_INFINITY ? rl.rlim_cur : UINT64_MAX;
	r = oa_slots_read(f->jfd, f->jbase, OA_JNL_MAGIC, &s);
	f->jslot_seq = r == 0 ? s.slot_seq : 0;
	if (oa_lock(f->cfd, OA_LOCK_COMMIT, F_WRLCK, 1) < 0)
		goto fail;
	/* A journal left by a dead handle may hold commits newer than the
	 * checkpoint: recycling checkpoints them first. */
	r = oa_heal_locked(f, NULL);
	/* The control file leaves its clean state (a new era: I15). */
	if (r == 0)
		r = oa_ctl_init_locked(f);
	if (r == 0 && f->jidx > 0) {
		/* An extra journal's commits are flushed without the control
		 * file: its era (I15) must be durable first, and I8: found by
		 * its name, the journal may be one whose creator died, or whose
		 * directory flush failed, between its link and that flush:
		 * make the name durable before a commit relies on it, once
		 * (the live area remembers). */
		r = oa_ctl_sync_locked(f);
		if (r == 0)
			r = name_durable(f, f->jidx, fresh);
	}
	if (r == 0)
		r = oa_journal_recycle_locked(f, OA_JRNL_INITIAL);
	oa_lock(f->cfd, OA_LOCK_COMMIT, F_UNLCK, 0);
	if (r < 0)
		goto fail;
	return 0;
fail:
	oa_lock(f->jfd, f->jlock, F_UNLCK, 0);
	oa_xclose(f->jfd);
	f->jfd = -1;
	return -1;
}

/* Write the header of the open data record (its payload is already out). */
int oa_rec_close(struct oa_file *f)
{
	unsigned char h[OA_REC_HDR];
	struct oa_rec r;
	uint64_t end;

	if (!f->rec_open)
		return 0;
	if (f->rec_len == 0) {
		f->rec_open = false;
		return 0;
	}
	if (f->rec_hdr_ok)
		goto closed;
	r = (struct oa_rec){ .type = OA_REC_DATA, .gen = f->gen,
			     .lsn = f->rec_lsn, .tx = f->tx_id,
			     .len = f->rec_len, .body_crc = f->rec_crc,
			     .pad = f->rec_pad };
	oa_rec_encode(h, &r);
	if (oa_pwrite_full(f->jfd, h, sizeof(h), (off_t)f->rec_lsn) < 0)
		return -1;
closed:
	f->rec_open = false;
	end = oa_align_up(f->rec_lsn + OA_REC_HDR + f->rec_pad + f->rec_len,
			  OA_REC_ALIGN);
	if (end > f->pos)
		f->pos = end;
	return 0;
}

int oa_journal_append(struct oa_file *f, const struct iovec *iov, int cnt,
		      size_t total, uint64_t off)
{
	uint64_t payload;
	uint32_t crc;

	if (f->jfd < 0 && oa_journal_acquire(f) < 0)
		return -1;
	/* Clone method: a big write, or a stream that has grown big, goes
	 * into a record whose payload the apply can clone (method.c). */
	bool cont = f->rec_open && off == f->rec_next_off;
	bool big = f->may_clone && f->blk &&
		   (total >= f->clone_min ||
		    (cont && f->rec_len + total >= f->clone_min));
	/* A write that continues the previous one extends its record, so a
	 * sequential stream is one record and one extent. */
	if (f->rec_open &&
	    (!cont || f->rec_len + total > OA_REC_MAX ||
	     (big && !f->rec_big)) &&
	    oa_rec_close(f) < 0)
		return -1;
	if (!f->rec_open) {
		f->rec_open = true;
		f->rec_lsn = f->pos;
		f->rec_pad = 0;
		f->rec_big = big;
		if (big) {
			f->jplaced = true;
			/* Beyond the ring (the ring is never shared with the
			 * file), payload congruent to OFF modulo the block. */
			uint64_t bs = f->blk;
			if (f->rec_lsn < OA_JRNL_INITIAL)
				f->rec_lsn = OA_JRNL_INITIAL;
			f->rec_pad = (uint32_t)((off % bs + bs -
				     (f->rec_lsn + OA_REC_HDR) % bs) % bs);
		}
		f->rec_len = 0;
		f->rec_crc = 0;
		f->rec_next_off = off;
	}
	payload = f->rec_lsn + OA_REC_HDR + f->rec_pad + f->rec_len;
	if (payload + total + OA_TX_ALIGN > f->fsize_max) {
		/* The journal would pass the file size limit: fail as
		 * pwrite(2) would, without the SIGXFSZ that kills. */
		if (f->rec_len == 0)
			f->rec_open = false;
		errno = EFBIG;
		return -1;
	}
	crc = f->rec_crc;
	for (int i = 0; i < cnt; i++)
		crc = oa_crc32c(crc, iov[i].iov_base, iov[i].iov_len);
	/* A new record goes out with its header, written as if this were all
	 * of it: one call for the common one-write record; a record that
	 * grows gets its header rewritten when it is closed. */
	int r;
	bool fresh = f->rec_len == 0 && cnt < 64 && f->rec_pad == 0;
	if (fresh) {
		unsigned char h[OA_REC_HDR];
		struct iovec v[64];
		struct oa_rec rh = { .type = OA_REC_DATA, .gen = f->gen,
				     .lsn = f->rec_lsn, .tx = f->tx_id,
				     .len = total, .body_crc = crc };
		oa_rec_encode(h, &rh);
		v[0] = (struct iovec){ h, sizeof(h) };
		memcpy(v + 1, iov, sizeof(*iov) * (size_t)cnt);
		r = oa_pwritev_full(f->jfd, v, cnt + 1, (off_t)f->rec_lsn);
	} else {
		r = oa_pwritev_full(f->jfd, iov, cnt, (off_t)payload);
	}
	f->rec_hdr_ok = fresh && r == 0;
	if (r == 0)
		oa_wb_note(&f->jwb, f->jfd, payload, total);
	if (r < 0) {
		/* Part of it may be in the journal.  Never write this range of
		 * the journal again in this generation: close what the record
		 * had and move past the failed bytes. */
		int e = errno;
		f->rec_next_off = UINT64_MAX;  /* no more extension */
		f->pos = oa_align_up(payload + total, OA_REC_ALIGN);
		oa_rec_close(f);  /* if it fails, the commit retries it */
		errno = e;
		return -1;
	}
	if (oa_index_insert(f->ix, off, total, payload) < 0) {
		f->rec_next_off = UINT64_MAX;  /* the record holds dead bytes */
		f->rec_len += total;
		f->rec_crc = crc;
		return -1;
	}
	f->rec_len += total;
	f->rec_crc = crc;
	f->rec_next_off = off + total;
	f->pos = oa_align_up(payload + total, OA_REC_ALIGN);
	f->txn_bytes += total;
	f->pending = true;
	return 0;
}

void oa_txn_drop(struct oa_file *f)
{
	oa_index_clear(f->ix);
	f->pending = false;
	f->staged = false;
	f->shadowed = false;
	oa_shadow_reset(f);
	f->has_trunc = false;
	f->txn_bytes = 0;
	/* Close the record without its header: its bytes are dead.  The next
	 * transaction starts after it (no journal range is written twice in a
	 * generation), under a new transaction number. */
	if (f->rec_open) {
		uint64_t end = oa_align_up(f->rec_lsn + OA_REC_HDR +
					   f->rec_pad + f->rec_len,
					   OA_REC_ALIGN);
		if (end > f->pos)
			f->pos = end;
		f->rec_open = false;
	}
	f->tx_id++;
	/* A transaction starts in a sector no earlier one touched: on a disk
	 * whose cut can garble the whole sector being written (not "power
	 * safe"), writing the next transaction can then never damage the
	 * commit record of an acknowledged one (I4). */
	f->pos = oa_align_up(f->pos, OA_TX_ALIGN);
	f->tx_start = f->pos;
}

/* ---- apply ---- */

/* Copy LEN bytes at JOFF of the journal JFD to OFF of the file. */
static int copy_range(struct oa_file *f, int jfd, uint64_t off, uint64_t len,
		      uint64_t joff)
{
	while (len > 0) {
		size_t n = len < OA_BUF_BYTES ? (size_t)len : OA_BUF_BYTES;
		if (oa_pread_full(jfd, f->buf, n, (off_t)joff) < 0)
			return -1;
		/* Beyond the ring the journal's pages are not read again:
		 * give them back now, for the file's pages the next line
		 * needs.  A hint: after the commit flush they are clean and
		 * go; a dirty one (recovery's) is only queued for writeback;
		 * the ring's stay, as the next small commit rewrites them. */
		if (joff >= OA_JRNL_INITIAL)
			oa_xdrop(jfd, joff, n);
		if (oa_pwrite_full(f->tfd, f->buf, n, (off_t)off) < 0)
			return -1;
		oa_wb_note(&f->twb, f->tfd, off, n);
		off += n;
		joff += n;
		len -= n;
	}
	return 0;
}

int oa_apply(struct oa_file *f, int jfd, const struct oa_commit_hdr *ch,
	     const unsigned char *ops)
{
	uint64_t size;
	int r = -1;

	if (oa_need_buf(f) < 0 || oa_lock(f->cfd, OA_LOCK_APPLY, F_WRLCK, 1) < 0)
		return -1;
	if (oa_xfsize(f->tfd, &size) < 0)
		goto out;
	if (ch->trunc_min != OA_NO_TRUNC && size > ch->trunc_min &&
	    oa_xftruncate(f->tfd, (off_t)ch->trunc_min) < 0)
		goto out;
	for (uint64_t i = 0; i < ch->nops; i++) {
		const unsigned char *op = ops + i * OA_OP_BYTES;
		uint64_t off = oa_get64(op), len = oa_get64(op + 8),
			 joff = oa_get64(op + 16), ca, cb;
		if (oa_clone_span(f, off, len, joff, &ca, &cb)) {
			/* The whole blocks by reference, the edges by copy. */
			int c = oa_clone_in(f, jfd, ca, cb, joff + (ca - off));
			if (c < 0)
				goto out;
			if (c == 0) {
				uint64_t tail = off + len - cb;
				if (copy_range(f, jfd, cb, tail,
					       joff + (cb - off)) < 0)
					goto out;
				len = ca - off;
			}
		}
		if (copy_range(f, jfd, off, len, joff) < 0)
			goto out;
		if (i == 0)
			oa_killpoint(OA_KP_HALF_APPLIED);
	}
	/* Truncated to trunc_min (or not), then written up to the end of the
	 * last op: the size is known without asking. */
	if (ch->trunc_min != OA_NO_TRUNC && size > ch->trunc_min)
		size = ch->trunc_min;
	if (ch->nops) {
		const unsigned char *last = ops + (ch->nops - 1) * OA_OP_BYTES;
		uint64_t e = oa_get64(last) + oa_get64(last + 8);
		if (e > size)
			size = e;
	}
	if (size != ch->final_size &&
	    oa_xftruncate(f->tfd, (off_t)ch->final_size) < 0)
		goto out;
	r = 0;
out:
	oa_lock(f->cfd, OA_LOCK_APPLY, F_UNLCK, 0);
	return r;
}

/* ---- checkpoint ---- */

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

int oa_checkpoint_locked(struct oa_file *f)
{
	struct oa_live l;

	if (oa_live_read(f, &l) < 0)
		return -1;
	if (l.last_seq <= l.ckpt_seq)
		return 0;
	/* I5: every applied commit is durable in the file before the
	 * checkpoint record says so. */
	if (MUTANT(5) && oa_ctl_write_ckpt(f, l.last_seq) < 0)
		return -1;
	if (flush_target(f, &l) < 0)
		return -1;
	if (oa_ctl_write_ckpt(f, l.last_seq) < 0)
		return -1;
	l.ckpt_seq = l.last_seq;
	for (int i = 0; i < OA_LIVE_JMAX; i++)
		l.jmax[i] = 0;
	return oa_live_write(f, &l);
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

/* Journal 0 starts as long as its first transaction needs: the clean
 * control file is OA_CLEAN_SIZE bytes, and a one-shot update should not
 * write a 4 MiB ring.  A handle that commits a second time gets room ahead:
 * twice the journal, at least 256 KiB past its tail, up to the ring's
 * OA_JRNL_INITIAL, zero-filled and not flushed (the next commit flush
 * carries it).  Best effort: where it fails (a full disk, the file size
 * limit) commits go on growing the journal as they write. */
static void grow_ring(struct oa_file *f)
{
	uint64_t size, want;
	if (oa_xfsize(f->jfd, &size) < 0 || size >= OA_JRNL_INITIAL ||
	    oa_need_buf(f) < 0)
		return;
	/* From the next block on: never a write into a sector that holds an
	 * acknowledged commit (the tail of the last one), which a disk that
	 * is not power safe could garble (I4).  The rest of that block is
	 * allocated already. */
	size = oa_align_up(size, OA_TX_ALIGN);
	want = size * 2;
	if (want < f->pos + (256u << 10))
		want = f->pos + (256u << 10);
	if (want > OA_JRNL_INITIAL)
		want = OA_JRNL_INITIAL;
	if (want > f->fsize_max)
		want = f->fsize_max & ~(uint64_t)4095;
	if (want <= size)
		return;
	memset(f->buf, 0, OA_BUF_BYTES);
	for (uint64_t off = size; off < want;) {
		size_t n = want - off < OA_BUF_BYTES ? (size_t)(want - off)
						     : OA_BUF_BYTES;
		if (oa_pwrite_full(f->jfd, f->buf, n, (off_t)off) < 0)
			return;
		off += n;
	}
}

/* ---- commit ---- */

/* Allocate [OFF, OFF+LEN) beyond SIZE without changing the size. */
static int reserve_range(struct oa_file *f, uint64_t off, uint64_t len,
			 uint64_t size)
{
	if (off + len <= size)
		return 0;
	if (off < size) {
		len -= size - off;
		off = size;
	}
	if (len && oa_sys->fallocate(f->tfd, FALLOC_FL_KEEP_SIZE, (off_t)off,
				     (off_t)len) < 0 &&
	    errno != EOPNOTSUPP && errno != ENOSYS)
		return -1;
	return 0;
}

static int reserve(struct oa_file *f, const struct oa_commit_hdr *ch,
		   const unsigned char *ops, uint64_t size)
{
	for (uint64_t i = ch->nops; i-- > 0;) {
		const unsigned char *op = ops + i * OA_OP_BYTES;
		uint64_t off = oa_get64(op), len = oa_get64(op + 8), ca, cb;
		if (off + len <= size)
			break;   /* ops are sorted: the rest lie inside */
		/* Cloned blocks take no new data blocks; their edges do (a
		 * failed clone falls back to copying, which then takes its
		 * chances, as where fallocate is not supported). */
		if (oa_clone_span(f, off, len, oa_get64(op + 16), &ca, &cb)) {
			if (reserve_range(f, off, ca - off, size) < 0 ||
			    reserve_range(f, cb, off + len - cb, size) < 0)
				return -1;
			continue;
		}
		if (reserve_range(f, off, len, size) < 0)
			return -1;
	}
	return 0;
}

static int build_ops(struct oa_file *f, unsigned char *ops)
{
	struct oa_ext e;
	size_t i = 0;
	for (void *c = oa_index_seek(f->ix, 0); c; c = oa_index_next(f->ix, c)) {
		oa_index_get(c, &e);
		oa_put64(ops + i * OA_OP_BYTES, e.off);
		oa_put64(ops + i * OA_OP_BYTES + 8, e.len);
		oa_put64(ops + i * OA_OP_BYTES + 16, e.joff);
		i++;
	}
	return (int)i;
}

int oa_commit_journal(struct oa_file *f)
{
	struct oa_commit_hdr ch;
	struct oa_live l;
	struct oa_rec r;
	uint64_t fsize;
	unsigned char *rec;
	uint64_t body, seq, lsn, end;
	size_t nops = oa_index_count(f->ix);
	int e;

	if (oa_rec_close(f) < 0)
		return -1;
	if (f->jfd < 0 && oa_journal_acquire(f) < 0)
		return -1;
	body = OA_COMMIT_FIXED + (uint64_t)nops * OA_OP_BYTES;
	rec = malloc(OA_REC_HDR + body);
	if (!rec) {
		errno = ENOMEM;
		return -1;
	}
	if (oa_lock(f->cfd, OA_LOCK_COMMIT, F_WRLCK, 1) < 0)
		goto fail_free;
	if (oa_heal_locked(f, &l) < 0 || oa_xfsize(f->tfd, &fsize) < 0)
		goto fail_unlock;

	/* The size the transaction leaves, against the size committed now:
	 * without a truncate the file keeps whatever other commits made it. */
	end = oa_index_end(f->ix);
	ch.tx_start = f->tx_start;
	ch.trunc_min = f->has_trunc ? f->t_min : OA_NO_TRUNC;
	ch.final_size = f->has_trunc ? f->t_last : fsize;
	if (end > ch.final_size)
		ch.final_size = end;
	ch.nops = nops;
	oa_put64(rec + OA_REC_HDR, ch.tx_start);
	oa_put64(rec + OA_REC_HDR + 8, ch.trunc_min);
	oa_put64(rec + OA_REC_HDR + 16, ch.final_size);
	oa_put64(rec + OA_REC_HDR + 24, ch.nops);
	build_ops(f, rec + OA_REC_HDR + OA_COMMIT_FIXED);

	seq = l.last_seq + 1;
	lsn = f->pos;
	if (lsn + OA_REC_HDR + body > f->fsize_max) {
		errno = EFBIG;   /* as pwrite(2) would, without SIGXFSZ */
		goto fail_unlock;
	}
	r = (struct oa_rec){ .type = OA_REC_COMMIT, .gen = f->gen, .lsn = lsn,
			     .tx = f->tx_id, .len = body, .seq = seq,
			     .body_crc = oa_crc32c(0, rec + OA_REC_HDR, body) };
	oa_rec_encode(rec, &r);

	if (MUTANT(2) &&
	    oa_apply(f, f->jfd, &ch, rec + OA_REC_HDR + OA_COMMIT_FIXED) < 0)
		goto fail_unlock;
	/* Space for the apply is taken before the commit point, so that a full
	 * file system fails the commit (file unchanged) rather than the apply
	 * after it.  Growth beyond the end is what needs new blocks; where
	 * fallocate is not supported the apply takes its chances. */
	if (reserve(f, &ch, rec + OA_REC_HDR + OA_COMMIT_FIXED,
		    fsize) < 0)
		goto fail_unlock;
	/* I10: mark the commit in flight before its record exists. */
	l.last_seq = seq;
	l.dirty_seq = seq;
	if (oa_live_write(f, &l) < 0)
		goto fail_unlock;
	if (oa_pwrite_full(f->jfd, rec, OA_REC_HDR + body, (off_t)lsn) < 0) {
		/* Not flushed: a partial record fails its CRC (I1), and a
		 * whole one is zeroed again if the disk lets us.  The
		 * transaction stays pending: its data records are intact and a
		 * retry's commit record points back at them.  Never reuse the
		 * range in this generation (recovery skips it as garbage). */
		unsigned char zero[OA_REC_HDR] = { 0 };
		e = errno;
		oa_pwrite_full(f->jfd, zero, sizeof(zero), (off_t)lsn);
		f->pos = oa_align_up(lsn + OA_REC_HDR + body, OA_REC_ALIGN);
		l.dirty_seq = 0;
		l.gap_seq = seq;   /* I13: no commit will carry this seq */
		oa_live_write(f, &l);
		errno = e;
		goto fail_unlock;
	}
	oa_killpoint(OA_KP_RECORD_WRITTEN);
	/* I2: the one flush of a commit.  It makes the data records, this
	 * commit record and the generation's header slot durable together;
	 * their checksums tell recovery whether all of it arrived (I1), so no
	 * flush is needed between data and commit record. */
	int fr = MUTANT(1) ? 0 : oa_xfdatasync(f->jfd);
	/* I9: another handle's failed flush of the control file may have
	 * dropped this transaction's records of journal 0 from the disk while
	 * their pages look clean: this flush proves nothing then. */
	if (fr == 0 && f->jidx == 0 && (l.flags & OA_LIVE_J0ERR))
		fr = -1;
	else if (fr < 0 && f->jidx == 0)
		l.flags |= OA_LIVE_CTLERR | OA_LIVE_J0ERR;
	if (fr < 0 && !MUTANT(7)) {
		unsigned char zero[OA_REC_HDR] = { 0 };
		/* I9: cannot tell whether the record is durable.  Revoke it if
		 * the disk lets us; latch the handle either way. */
		f->latched = true;
		if (oa_pwrite_full(f->jfd, zero, sizeof(zero), (off_t)lsn) == 0)
			oa_xfdatasync(f->jfd);
		l.dirty_seq = 0;
		l.gap_seq = seq;   /* I13: this seq may be missing */
		oa_live_write(f, &l);
		errno = EIO;
		goto fail_unlock;
	}
	/* I13: the live area records the acknowledgement before the apply
	 * touches the file: a file a commit's apply has begun to change has
	 * that commit in the seal's ack_seq, so recovery in this boot never
	 * drops it as a torn flush.  A store in the shared page (or a pwrite
	 * into the page cache), no flush: a SIGKILL keeps it, and after a
	 * power cut the boot id in the seal no longer matches. */
	l.ack_seq = seq;
	/* Journal 0's flush was the control file's: its state since it
	 * left the clean one is durable. */
	if (f->jidx == 0)
		oa_ctl_mark_synced(f, &l);
	if (oa_live_write(f, &l) < 0) {
		/* Committed, not applied, dirty marker set: the next committer
		 * or opener replays it (I10). */
		f->latched = true;
		errno = EIO;
		goto fail_unlock;
	}
	oa_killpoint(OA_KP_FLUSHED);
	/* I3: only now does the file change. */
	if (oa_apply(f, f->jfd, &ch, rec + OA_REC_HDR + OA_COMMIT_FIXED) < 0) {
		/* Committed but not applied: leave the dirty marker so that
		 * the next committer or opener replays it (I10). */
		f->latched = true;
		errno = EIO;
		goto fail_unlock;
	}
	oa_killpoint(OA_KP_APPLIED);
	l.dirty_seq = 0;
	if (f->jidx < OA_LIVE_JMAX)
		l.jmax[f->jidx] = seq;
	if (oa_live_write(f, &l) < 0) {
		f->latched = true;
		goto fail_unlock;
	}
	free(rec);
	f->pos = oa_align_up(lsn + OA_REC_HDR + body, OA_REC_ALIGN);
	f->rec_open = false;
	oa_txn_drop(f);
	/* A handle that commits again keeps committing: journal 0 gets room
	 * ahead, zero-filled, so that its commit flushes overwrite written
	 * blocks (no allocation, no size change) as in a ring made up front. */
	if (f->jidx == 0 && ++f->ncommit >= 2)
		grow_ring(f);
	/* This commit is newer than the checkpoint, so recycling the full
	 * journal checkpoints; a failure there latches (I9).  A journal a big
	 * transaction grew keeps its size while the handle is open (up to
	 * OA_JRNL_RETAIN): the next big transaction overwrites blocks and
	 * page cache that exist instead of allocating them again; closing
	 * the handle cuts it back.  A generation that placed records for
	 * cloning is cut back here already (I12). */
	if (f->pos > OA_JRNL_CKPT &&
	    oa_journal_recycle_locked(f, OA_JRNL_RETAIN) < 0) {
		f->latched = true;
		oa_lock(f->cfd, OA_LOCK_COMMIT, F_UNLCK, 0);
		return -1;
	}
	oa_lock(f->cfd, OA_LOCK_COMMIT, F_UNLCK, 0);
	return 0;

fail_unlock:
	oa_lock(f->cfd, OA_LOCK_COMMIT, F_UNLCK, 0);
fail_free:
	free(rec);
	return -1;
}
