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

/* The next hole of the file at or after OFF, below SIZE; SIZE where there
 * is none, or where the file system cannot tell (no SEEK_HOLE: the apply
 * then takes its chances, as where fallocate is not supported). */
static uint64_t next_hole(struct oa_file *f, uint64_t off, uint64_t size)
{
	off_t h;
	if (off >= size)
		return size;
	h = oa_sys->lseek(f->tfd, (off_t)off, SEEK_HOLE);
	return h < 0 || (uint64_t)h > size ? size : (uint64_t)h;
}

/* A write into a hole takes new blocks as growth does (a sparse file, a
 * file on tmpfs): the holes the ops cover inside the file are allocated
 * too.
 *
 * SEEK_HOLE walks the file's extents from the offset to the first hole,
 * to the end in a file without one: on XFS, for a 64 MiB SQLite database
 * whose blocks the exchange of its first load left in 1 MiB extents, 13 %
 * of the CPU of a one-row transaction.  So the handle remembers how far
 * from the start the file is known to have no hole (hole_free) and for
 * which commit (hole_seq: the live area's last_seq then, read under
 * COMMIT).  Holes below an offset come only from a cut below it followed
 * by growth, or from a punch; the library punches none, and its cuts are
 * commits, which move last_seq: while last_seq is the one remembered, or
 * this handle's own commit that followed (finish: its cut and final size
 * lower hole_free), the knowledge stands.  The kernel and exchange methods
 * write without a commit seq but replace existing blocks only, and a
 * healing replay repeats a commit whose seq last_seq already holds.  A
 * program writing the file directly bypasses this, as all the rest (a
 * hole it makes and a full disk: the apply's EIO after the commit point
 * instead of ENOSPC before it; nothing is lost). */
static uint64_t hole_from(struct oa_file *f, uint64_t a, uint64_t size,
			  uint64_t seq)
{
	if (!f->hole_known || (f->hole_seq != seq && !MUTANT(64))) {
		f->hole_free = next_hole(f, 0, size);
		f->hole_seq = seq;
		f->hole_known = true;
	}
	if (a < f->hole_free)
		a = f->hole_free;
	return a >= size ? size : next_hole(f, a, size);
}

static int reserve_holes(struct oa_file *f, const struct oa_commit_hdr *ch,
			 const unsigned char *body, uint64_t size, uint64_t seq)
{
	uint64_t hole = UINT64_MAX;
	for (uint64_t i = 0; i < ch->nops && !MUTANT(35); i++) {
		struct oa_op op;
		oa_op_get(body, i, &op);
		uint64_t a = op.off, b = op.off + op.len;
		if (a >= size)
			break;   /* growth: reserve() */
		if (b > size)
			b = size;
		if (hole == UINT64_MAX || hole < a)
			hole = hole_from(f, a, size, seq);
		while (hole < b) {
			off_t d = oa_sys->lseek(f->tfd, (off_t)hole, SEEK_DATA);
			uint64_t end = d < 0 || (uint64_t)d > b ? b : (uint64_t)d;
			if (end <= hole)
				break;   /* (a file changing under us) */
			if (oa_sys->fallocate(f->tfd, FALLOC_FL_KEEP_SIZE,
					      (off_t)hole,
					      (off_t)(end - hole)) < 0 &&
			    errno != EOPNOTSUPP && errno != ENOSYS)
				return -1;
			hole = next_hole(f, end, size);
		}
	}
	return 0;
}

static int reserve(struct oa_file *f, const struct oa_commit_hdr *ch,
		   const unsigned char *body, uint64_t size, uint64_t seq)
{
	if (reserve_holes(f, ch, body, size, seq) < 0)
		return -1;
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

/*
 * One handle's journal commit, in the steps a group shares (oa_commit_group
 * runs them for several handles; oa_commit_journal for one):
 *   stage_rec  the commit record built, its journal taken (no lock)
 *   write_rec  under COMMIT: the dirty marker (I10), the record written
 *   flush_rec  the one flush (I2); on failure revoked (I9)
 *   ack_apply  the acknowledgement (I13), the apply (I3)
 *   finish     bookkeeping, the dirty marker cleared, recycling
 */
struct cstate {
	struct oa_file *f;
	struct oa_live l;
	struct oa_commit_hdr ch;
	unsigned char *rec;
	uint64_t body, seq, lsn, fsize;
	struct oa_xp_batch *xp;   /* other processes' commits merged in */
};

static int stage_rec(struct cstate *c, uint64_t glen)
{
	struct oa_file *f = c->f;
	if (oa_rec_close(f) < 0)
		return -1;
	if (f->jfd < 0 && oa_journal_acquire(f) < 0)
		return -1;
	c->ch.nops = oa_index_count(f->ix);
	c->ch.glen = glen;
	c->body = oa_commit_body_len(c->ch.nops) + glen;
	c->rec = malloc(OA_REC_HDR + c->body);
	if (!c->rec) {
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

/* The file system is full (ENOSPC, EDQUOT from reserving the apply's
 * blocks): give back this handle's room ahead - the zeros past where its
 * commit record goes, which hold no record of any commit - so that the
 * space can be asked again, once.  No more room ahead while this handle
 * holds the journal.  Writers of one file that are open at once each keep
 * the room their journal took while the disk was emptier; the committer
 * needing it is the one who can give its own back.  0, or -1 with the
 * original errno. */
static int give_back_room(struct cstate *c)
{
	struct oa_file *f = c->f;
	int e = errno;
	uint64_t size, keep = oa_align_up(c->lsn + OA_REC_HDR + c->body,
					  OA_TX_ALIGN);
	if (f->jidx > 0 && keep < OA_XJ_INITIAL)
		keep = OA_XJ_INITIAL;   /* recovery's smallest extra journal */
	if ((e != ENOSPC && e != EDQUOT) || oa_xfsize(f->jfd, &size) < 0 ||
	    size <= keep || oa_xftruncate(f->jfd, (off_t)keep) < 0) {
		errno = e;
		return -1;
	}
	f->jgrow_fail = true;
	return 0;
}

/* Under COMMIT (oa_commit_begin done: c->l, c->fsize): build the record
 * (its group tail, if any, already at its place) and write it, marked in
 * flight first (I10).  On failure the transaction stays pending. */
static int write_rec(struct cstate *c)
{
	struct oa_file *f = c->f;
	struct oa_commit_hdr *ch = &c->ch;
	unsigned char *rec = c->rec;
	struct oa_rec r;
	uint64_t end;
	int e;

	/* The size the transaction leaves, against the size committed now:
	 * without a truncate the file keeps whatever other commits made it. */
	end = oa_index_end(f->ix);
	ch->tx_start = f->tx_start;
	ch->trunc_min = f->has_trunc ? f->t_min : OA_NO_TRUNC;
	ch->final_size = f->has_trunc ? f->t_last : c->fsize;
	if (end > ch->final_size)
		ch->final_size = end;
	oa_commit_encode(rec + OA_REC_HDR, ch);
	build_ops(f, rec + OA_REC_HDR);

	c->seq = c->l.last_seq + 1;
	c->lsn = f->pos;
	if (c->lsn + OA_REC_HDR + c->body > f->fsize_max) {
		errno = EFBIG;   /* as pwrite(2) would, without SIGXFSZ */
		return -1;
	}
	r = (struct oa_rec){ .type = OA_REC_COMMIT, .gen = f->gen,
			     .lsn = c->lsn, .tx = f->tx_id, .len = c->body,
			     .seq = c->seq,
			     .body_crc = oa_crc32c(0, rec + OA_REC_HDR,
						   c->body) };
	oa_rec_encode(rec, &r);

	if (MUTANT(2) &&
	    oa_apply(f, f->jfd, ch, rec + OA_REC_HDR) < 0)
		return -1;
	/* Space for the apply is taken before the commit point, so that a full
	 * file system fails the commit (file unchanged) rather than the apply
	 * after it.  Growth beyond the end and holes inside the file are what
	 * need new blocks; where fallocate is not supported the apply takes
	 * its chances. */
	if (reserve(f, ch, rec + OA_REC_HDR, c->fsize, c->l.last_seq) < 0 &&
	    (MUTANT(54) || give_back_room(c) < 0 ||
	     reserve(f, ch, rec + OA_REC_HDR, c->fsize, c->l.last_seq) < 0))
		return -1;
	/* Beyond the newest commit record, tried or written, the journal
	 * holds no commit (checkpoint.c give_back_dropped); positions only
	 * grow within a generation. */
	f->jcommit_end = oa_align_up(c->lsn + OA_REC_HDR + c->body,
				     OA_REC_ALIGN);
	/* X4 (xcommit.c): the members know the batch's seq first. */
	if (c->xp)
		oa_xp_seq(f, c->xp, c->seq);
	/* I10: mark the commit in flight before its record exists. */
	c->l.last_seq = c->seq;
	c->l.dirty_seq = c->seq;
	if (oa_live_write(f, &c->l) < 0)
		return -1;
	oa_killpoint(OA_KP_MARKED);
	if (oa_pwrite_full(f->jfd, rec, OA_REC_HDR + c->body,
			   (off_t)c->lsn) < 0) {
		/* Not flushed: a partial record fails its CRC (I1), and a
		 * whole one is zeroed again if the disk lets us.  The
		 * transaction stays pending: its data records are intact and a
		 * retry's commit record points back at them.  Never reuse the
		 * range in this generation (recovery skips it as garbage). */
		unsigned char zero[OA_REC_HDR] = { 0 };
		e = errno;
		oa_pwrite_full(f->jfd, zero, sizeof(zero), (off_t)c->lsn);
		f->pos = oa_align_up(c->lsn + OA_REC_HDR + c->body,
				     OA_REC_ALIGN);
		c->l.dirty_seq = 0;
		c->l.gap_seq = c->seq;   /* I13: no commit will carry this seq */
		oa_live_write(f, &c->l);
		errno = e;
		return -1;
	}
	oa_killpoint(OA_KP_RECORD_WRITTEN);
	return 0;
}

/* A record written and not acknowledged is taken back: zeroed and the
 * zeros flushed (a failed flush latches, I9); its seq is a gap (I13).
 * The transaction stays pending unless the handle latched. */
static void revoke_rec(struct cstate *c)
{
	struct oa_file *f = c->f;
	unsigned char zero[OA_REC_HDR] = { 0 };
	if (oa_pwrite_full(f->jfd, zero, sizeof(zero), (off_t)c->lsn) < 0 ||
	    oa_xfdatasync(f->jfd) < 0) {
		f->latched = true;
		if (f->jidx == 0)
			c->l.flags |= OA_LIVE_CTLERR | OA_LIVE_J0ERR;
	}
	f->pos = oa_align_up(c->lsn + OA_REC_HDR + c->body, OA_REC_ALIGN);
	c->l.dirty_seq = 0;
	c->l.gap_seq = c->seq;
	oa_live_write(f, &c->l);
}

/* I2: the one flush of a commit.  It makes the data records, this commit
 * record and the generation's header slot durable together; their
 * checksums tell recovery whether all of it arrived (I1), so no flush is
 * needed between data and commit record.  On failure the record is
 * revoked if the disk lets us and the handle latched: -1 with EIO, and
 * *REVOKED tells whether the zeros' flush returned 0 (the record is surely
 * not durable). */
static int flush_rec(struct cstate *c, bool *revoked)
{
	struct oa_file *f = c->f;
	int fr = MUTANT(1) ? 0 : oa_xfdatasync(f->jfd);
	/* I9: another handle's failed flush of the control file may have
	 * dropped this transaction's records of journal 0 from the disk while
	 * their pages look clean: this flush proves nothing then. */
	if (fr == 0 && f->jidx == 0 && (c->l.flags & OA_LIVE_J0ERR))
		fr = -1;
	else if (fr < 0 && f->jidx == 0)
		c->l.flags |= OA_LIVE_CTLERR | OA_LIVE_J0ERR;
	if (revoked)
		*revoked = false;
	if (fr < 0 && !MUTANT(7)) {
		unsigned char zero[OA_REC_HDR] = { 0 };
		/* X6: members merged in latch before anything is revoked */
		if (c->xp)
			oa_xp_end(f, c->xp, OA_XS_EIO);
		/* I9: cannot tell whether the record is durable.  Revoke it if
		 * the disk lets us; latch the handle either way. */
		f->latched = true;
		if (oa_pwrite_full(f->jfd, zero, sizeof(zero),
				   (off_t)c->lsn) == 0 &&
		    oa_xfdatasync(f->jfd) == 0 && revoked)
			*revoked = true;
		c->l.dirty_seq = 0;
		c->l.gap_seq = c->seq;   /* I13: this seq may be missing */
		oa_live_write(f, &c->l);
		errno = EIO;
		return -1;
	}
	return 0;
}

/* After the commit point: the acknowledgement, then the apply.  A failure
 * latches the handle and leaves the dirty marker: the next committer or
 * opener replays (I10). */
static int ack_apply(struct cstate *c)
{
	struct oa_file *f = c->f;
	/* I13: the live area records the acknowledgement before the apply
	 * touches the file: a file a commit's apply has begun to change has
	 * that commit in the seal's ack_seq, so recovery in this boot never
	 * drops it as a torn flush.  A store in the shared page (or a pwrite
	 * into the page cache), no flush: a SIGKILL keeps it, and after a
	 * power cut the boot id in the seal no longer matches. */
	c->l.ack_seq = c->seq;
	/* Journal 0's flush was the control file's: its state since it
	 * left the clean one is durable. */
	if (f->jidx == 0)
		oa_ctl_mark_synced(f, &c->l);
	if (oa_live_write(f, &c->l) < 0) {
		f->latched = true;
		errno = EIO;
		return -1;
	}
	oa_killpoint(OA_KP_FLUSHED);
	/* I3: only now does the file change. */
	if (oa_apply(f, f->jfd, &c->ch, c->rec + OA_REC_HDR) < 0) {
		f->latched = true;
		errno = EIO;
		return -1;
	}
	oa_killpoint(OA_KP_APPLIED);
	return 0;
}

/* The commit is in the file: clear the dirty marker, drop the transaction,
 * grow or recycle the journal.  Caller still holds COMMIT. */
static int finish(struct cstate *c)
{
	struct oa_file *f = c->f;
	/* What this handle knew of holes stands after its own commit, up to
	 * the shortest size it left the file at (its cut, then its final
	 * size: what a cut then growth leaves unwritten is a hole;
	 * reserve_holes). */
	if (f->hole_known && f->hole_seq == c->seq - 1) {
		f->hole_seq = c->seq;
		if (MUTANT(63))
			;   /* its own cut forgotten */
		else if (c->ch.trunc_min < f->hole_free)
			f->hole_free = c->ch.trunc_min;
		if (c->ch.final_size < f->hole_free)
			f->hole_free = c->ch.final_size;
	}
	c->l.dirty_seq = 0;
	if (f->jidx < OA_LIVE_JMAX)
		c->l.jmax[f->jidx] = c->seq;
	if (oa_live_write(f, &c->l) < 0) {
		f->latched = true;
		return -1;
	}
	f->pos = oa_align_up(c->lsn + OA_REC_HDR + c->body, OA_REC_ALIGN);
	f->rec_open = false;
	oa_txn_drop(f);
	/* A handle that commits again keeps committing: its journal gets room
	 * ahead, zero-filled, so that its commit flushes overwrite written
	 * blocks (no allocation, no size change) as in a ring made up front.
	 * Journal 0 starts as long as one transaction, an extra journal at
	 * OA_XJ_INITIAL. */
	if (++f->ncommit >= 2)
		oa_journal_grow(f);
	/* This commit is newer than the checkpoint, so recycling the full
	 * journal checkpoints; a failure there latches (I9).  A journal a big
	 * transaction grew keeps its size while the handle is open (up to
	 * OA_JRNL_RETAIN): the next big transaction overwrites blocks and
	 * page cache that exist instead of allocating them again; closing
	 * the handle cuts it back.  A generation that placed records for
	 * cloning is cut back here already (I12). */
	if (f->pos > oa_jrnl_ckpt(f) &&
	    oa_journal_recycle_locked(f, OA_JRNL_RETAIN) < 0) {
		f->latched = true;
		return -1;
	}
	return 0;
}

int oa_commit_journal(struct oa_file *f)
{
	struct cstate c = { .f = f };
	struct oa_xp_batch b;
	bool applied = false;
	int r = -1, x;

	if (stage_rec(&c, 0) < 0)
		goto out;
	/* COMMIT; or, where another process holds it, a place in its next
	 * batch (xcommit.c) */
	x = oa_xp_begin(f, &c.l, &c.fsize, &b);
	if (x != 0) {
		r = x > 0 ? 0 : -1;
		goto out;
	}
	if (b.n) {
		/* other processes' commits joined: the record covers them */
		free(c.rec);
		c.rec = NULL;
		c.xp = &b;
		if (stage_rec(&c, 0) < 0)
			goto end;
	}
	/* M2 (control.c): no clean mark from here on, before the commit
	 * point, under COMMIT (which a close that sets one must hold). */
	if (oa_unmark(f) == 0 && write_rec(&c) == 0 &&
	    flush_rec(&c, NULL) == 0 && ack_apply(&c) == 0) {
		/* X2: durable and applied; the members learn it while the
		 * dirty marker still stands (X4) */
		applied = true;
		oa_xp_end(f, &b, OA_XS_OK);
		r = finish(&c);
	}
end:
	if (!applied)
		oa_xp_end(f, &b, f->latched ? OA_XS_EIO : OA_XS_SELF);
	oa_commit_end(f);
out:
	free(c.rec);
	return r;
}

/*
 * oa_commit_group: the pending changes of several files as one unit, by a
 * two-phase commit over their journals (FORMAT.md, "Several files in one
 * commit"; invariants G1-G5 there):
 *
 *  G1 Every member's COMMIT is held from before its record is written
 *     until it is settled, taken in one order (file system, inode) by
 *     every group committer, so two groups never wait for each other in a
 *     circle; the first in that order is the coordinator.
 *  G2 Each other member's record (its commit record with a group tail,
 *     naming the coordinator) is durable before the coordinator's record
 *     is written; the coordinator's record, flushed, is the group's commit
 *     point.  A member's record without it is never committed.
 *  G3 No member is acknowledged or applied before the commit point.
 *  G4 Every member's dirty marker stays set from its record until it is
 *     settled; the coordinator's until every member is: whoever heals any
 *     of them recovers, and recovery settles the group (recover.c).
 *  G5 The coordinator's record is needed until every file holds the group
 *     durably: every file of the group is flushed, then the members are
 *     checkpointed, before the coordinator's marker is cleared; a recovery
 *     of the coordinator settles every member before its checkpoint passes
 *     it, and one of a member that finds the group decided recovers the
 *     coordinator next (file.c), so recovery through any one file settles
 *     the group.
 *
 * FILES are sorted into COMMIT order by the caller, the coordinator first;
 * every one has a pending transaction in the journal.  REFS[i] names
 * member i (its path, journal directory, inode).  0, or -1 with errno:
 * before the commit point nothing is committed and every transaction
 * stays pending (a member whose flush failed latched, I9); after it, EIO
 * with the group committed and its files latched where a step failed:
 * recovery finishes it.
 */
int oa_commit_group_journal(struct oa_file *const *fs, size_t n,
			    const struct oa_gref *refs)
{
	struct cstate *c = calloc(n, sizeof(*c));
	uint64_t gid = oa_random64();
	size_t begun = 0, ok = 1, i;
	int e = 0;
	bool decided = false, revoked;

	if (!c) {
		errno = ENOMEM;
		return -1;
	}
	/* The records, each with its group tail: a member's names the
	 * coordinator, the coordinator's every member. */
	uint64_t clen = OA_GRP_FIXED, mlen = OA_GRP_FIXED + oa_gref_len(&refs[0]);
	for (i = 1; i < n; i++)
		clen += oa_gref_len(&refs[i]);
	for (i = 0; i < n; i++) {
		c[i].f = fs[i];
		/* MUTANT(45): members commit on their own, before the
		 * group's commit point */
		uint64_t glen = i == 0 ? clen : MUTANT(45) ? 0 : mlen;
		if (stage_rec(&c[i], glen) < 0)
			goto abort;
		unsigned char *tail = c[i].rec + OA_REC_HDR + c[i].body - glen;
		if (i == 0)
			oa_group_encode(tail, gid, OA_GRP_COORD, refs + 1,
					(uint32_t)(n - 1));
		else if (glen)
			oa_group_encode(tail, gid, OA_GRP_MEMBER, refs, 1);
	}
	/* G1 */
	for (begun = 0; begun < n; begun++)
		if (oa_commit_begin(fs[begun], &c[begun].l,
				    &c[begun].fsize) < 0)
			goto abort;
	for (i = 0; i < n; i++)
		if (oa_unmark(fs[i]) < 0)   /* M2 */
			goto abort;
	/* G2: the members' records, durable; then the coordinator's.  A
	 * record whose write or flush fails is taken back by that step. */
	for (i = 1; i < n; i++) {
		if (write_rec(&c[i]) < 0 || flush_rec(&c[i], NULL) < 0)
			goto abort;
		ok = i + 1;
		oa_killpoint(OA_KP_GROUP_MEMBER);
	}
	if (write_rec(&c[0]) < 0)
		goto abort;
	if (flush_rec(&c[0], &revoked) < 0) {
		if (revoked)
			goto abort;
		/* The commit point may or may not be on the disk: the members
		 * keep their records and markers (G4), so that recovery
		 * decides them all as the coordinator's journal says; every
		 * handle latches. */
		for (i = 0; i < n; i++)
			fs[i]->latched = true;
		e = EIO;
		goto unlock;
	}
	decided = true;
	oa_killpoint(OA_KP_GROUP_DECIDED);
	/* G3: acknowledged and applied only now, the coordinator first. */
	for (i = 0; i < n; i++)
		if (ack_apply(&c[i]) < 0)
			e = EIO;
	/* G5: every file of the group durable, the coordinator's included;
	 * only then the members' checkpoints, so that a member found
	 * checkpointed after a crash means every file holds the group, and
	 * until then every member's record sends its recovery to the
	 * coordinator's, which settles them all.  Then the markers, the
	 * coordinator's last (G4). */
	for (i = 0; i < n; i++)
		if (!fs[i]->latched && !MUTANT(48) &&
		    oa_flush_target_locked(fs[i]) < 0) {
			fs[i]->latched = true;
			e = EIO;
		}
	for (i = 1; i < n && !e; i++) {
		if (oa_checkpoint_flushed_locked(fs[i]) < 0 ||
		    oa_live_read(fs[i], &c[i].l) < 0) {
			fs[i]->latched = true;
			e = EIO;
			break;
		}
		oa_killpoint(OA_KP_GROUP_SETTLED);
	}
	for (i = 1; i < n && !e; i++)
		if (finish(&c[i]) < 0)
			e = EIO;
	if (!e && finish(&c[0]) < 0)
		e = EIO;
	if (e) {
		/* Committed: what failed is recovery's (G4).  The handles whose
		 * part is not in their file latch. */
		for (i = 0; i < n; i++)
			if (fs[i]->pending)
				fs[i]->latched = true;
	}
	goto unlock;

abort:
	/* Before the commit point: nothing is committed; the members'
	 * records already durable are taken back (G2). */
	e = errno;
	for (i = 1; i < ok; i++)
		revoke_rec(&c[i]);
unlock:
	for (i = begun; i-- > 0;)
		oa_commit_end(fs[i]);
	for (i = 0; i < n; i++)
		free(c[i].rec);
	free(c);
	if (decided && !e)
		return 0;
	errno = e ? e : EIO;
	return -1;
}
