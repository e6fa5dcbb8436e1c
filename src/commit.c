/*
 * commit.c - the commit protocol: the precondition the methods that
 * bypass the journal share (oa_commit_bypass_ready), and the journal
 * method's commit: the commit record, its one flush, the apply.  Every
 * commit opens with oa_commit_begin and ends with oa_commit_end
 * (recover.c, beside the healing they do).
 *
 * The invariants I1-I15 are stated once, in docs/FORMAT.md
 * ("Invariants"); the code cites them where a flush or an order keeps one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>

#include "crc32c.h"
#include "internal.h"
#include "oatomic-private.h"

int oa_commit_bypass_ready(struct oa_file *f, struct oa_live *l)
{
	OA_ASSERT(oa_holds_excl(f, OA_LOCK_COMMIT));
	/* I11: no journal commit newer than the checkpoint, which recovery
	 * would replay over what the method writes. */
	if (l->last_seq > l->ckpt_seq && oa_checkpoint_locked(f) < 0)
		goto fail;
	/* ... nor one that a clean close gave up without a flush (I14): the
	 * control file's clean state, or its initialisation, is durable. */
	if (oa_ctl_sync_locked(f) < 0)
		goto fail;
	return 0;
fail:
	f->latched = errno == EIO;
	return -1;
}

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
		   const unsigned char *body, uint64_t size)
{
	for (uint64_t i = ch->nops; i-- > 0;) {
		struct oa_op op;
		oa_op_get(body, i, &op);
		uint64_t off = op.off, len = op.len, ca, cb;
		if (off + len <= size)
			break;   /* ops are sorted: the rest lie inside */
		/* Cloned blocks take no new data blocks; their edges do (a
		 * failed clone falls back to copying, which then takes its
		 * chances, as where fallocate is not supported). */
		if (oa_clone_span(f, off, len, op.joff, &ca, &cb)) {
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

/* The transaction's extents, in file order, as the commit body's ops. */
static void build_ops(struct oa_file *f, unsigned char *body)
{
	struct oa_ext e;
	uint64_t i = 0;
	for (void *c = oa_index_seek(f->ix, 0); c; c = oa_index_next(f->ix, c)) {
		oa_index_get(c, &e);
		oa_op_put(body, i++,
			  &(struct oa_op){ .off = e.off, .len = e.len,
					   .joff = e.joff });
	}
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
	body = oa_commit_body_len(nops);
	rec = malloc(OA_REC_HDR + body);
	if (!rec) {
		errno = ENOMEM;
		return -1;
	}
	if (oa_commit_begin(f, &l, &fsize) < 0)
		goto fail_free;

	/* The size the transaction leaves, against the size committed now:
	 * without a truncate the file keeps whatever other commits made it. */
	end = oa_index_end(f->ix);
	ch.tx_start = f->tx_start;
	ch.trunc_min = f->has_trunc ? f->t_min : OA_NO_TRUNC;
	ch.final_size = f->has_trunc ? f->t_last : fsize;
	if (end > ch.final_size)
		ch.final_size = end;
	ch.nops = nops;
	oa_commit_encode(rec + OA_REC_HDR, &ch);
	build_ops(f, rec + OA_REC_HDR);

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
	    oa_apply(f, f->jfd, &ch, rec + OA_REC_HDR) < 0)
		goto fail_unlock;
	/* Space for the apply is taken before the commit point, so that a full
	 * file system fails the commit (file unchanged) rather than the apply
	 * after it.  Growth beyond the end is what needs new blocks; where
	 * fallocate is not supported the apply takes its chances. */
	if (reserve(f, &ch, rec + OA_REC_HDR,
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
	if (oa_apply(f, f->jfd, &ch, rec + OA_REC_HDR) < 0) {
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
		oa_journal_grow(f);
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
		oa_commit_end(f);
		return -1;
	}
	oa_commit_end(f);
	return 0;

fail_unlock:
	oa_commit_end(f);
fail_free:
	free(rec);
	return -1;
}
