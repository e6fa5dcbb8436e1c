/*
 * journal.c - a handle's journal and its pending transaction.
 *
 * Journal 0 lives in the control file (from OA_J0_SLOT); further concurrent
 * writers take extra journals, .NAME.oaj-K (docs/FORMAT.md).  Here: taking
 * one (acquire: the owner lock, healing, the control file leaving its
 * clean state, I8 and I15 for extra journals), starting a new generation
 * (reset, recycle: I6, I12), appending the pending data as records
 * (clone-placed ones included), growing journal 0 for a handle that keeps
 * committing, and dropping a transaction (its index, stage and shadow).
 * The commit record itself is commit.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "crc32c.h"
#include "internal.h"

static int fill_jnl(struct oa_file *f, int fd, void *arg)
{
	struct rlimit rl;
	/* A file size limit below the ring: fail as pwrite(2) would, but
	 * before writing, and without the SIGXFSZ the kernel would send. */
	if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < OA_XJ_INITIAL) {
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
	 * or change the size (one flush, no file-system transaction); the
	 * handle grows it the same way as it commits (oa_journal_grow).  Slot
	 * B's page too: a new generation's slot write must not need a block
	 * of a disk the journals have filled. */
	memset(f->buf, 0, OA_BUF_BYTES);
	for (uint64_t off = OA_SLOT_BYTES; off < OA_XJ_INITIAL;) {
		size_t n = OA_BUF_BYTES;
		if (off + n > OA_XJ_INITIAL)
			n = OA_XJ_INITIAL - off;
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
	f->jcommit_end = f->pos;
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

	OA_ASSERT(oa_holds_excl(f, OA_LOCK_COMMIT));
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

/* A journal found by name may be written: ours or root's, and no wider
 * than the file (one wider, ours, is narrowed: whatever it holds is
 * checkpointed before reuse), and under one name only (oa_multi_linked). */
static bool usable(struct oa_file *f, int fd)
{
	if (oa_check_safe(f, fd) < 0 &&
	    (errno != EPERM || oa_narrow(f, fd) < 0))
		return false;
	return !oa_multi_linked(fd);
}

/* Take an extra journal file, .NAME.oaj-K (K >= 1), making one if none is
 * free.  0 or -1.
 *
 * A new journal is made (filled and flushed, unnamed) before JMAKE and
 * named under it at the first free K: writers that start together make
 * theirs at the same time, and their flushes overlap (one file-system
 * commit for several on ext4), where making them one after another under
 * the lock cost a fill and two flushes each in turn (8 writers: the last
 * waited some 20 ms for its journal).  Nothing made is thrown away: a
 * number taken meanwhile only sends it to the next.  It is owned (OWNER)
 * before it has a name, so nobody else can take it; its name is made
 * durable after JMAKE is let go, before this handle's first commit relies
 * on it (I8), and anyone who finds it by name meanwhile cannot own it. */
static int take_extra(struct oa_file *f, bool *fresh_out)
{
	char name[NAME_MAX + 1], tmp[OA_TMP_NAME];
	int fd, made = -1;   /* made ahead, not yet named */

	for (int k = 1; k < 4096; k++) {
		bool fresh = false;
		if (oa_name(f, name, sizeof(name), OA_NAME_JNL, k) < 0)
			goto fail;
		fd = oa_xopenat(f->dfd, name, O_RDWR | O_NOFOLLOW, 0);
		if (fd < 0 && errno == ENOENT) {
			if (made < 0) {
				made = oa_create_prep(f, fill_jnl, NULL, tmp);
				if (made < 0)
					return -1;
				if (oa_lock(made, OA_LOCK_OWNER, F_WRLCK, 0) < 0)
					goto fail;
			}
			/* One namer at a time (JMAKE), who looks again
			 * first. */
			if (oa_ctl_lock(f, OA_LOCK_JMAKE, F_WRLCK, 1) < 0)
				goto fail;
			fd = oa_xopenat(f->dfd, name, O_RDWR | O_NOFOLLOW, 0);
			if (fd < 0 && errno == ENOENT &&
			    oa_create_link(f, made, tmp, name) == 0) {
				fd = made;
				made = -1;
				fresh = true;
			}
			int e = errno;
			oa_ctl_lock(f, OA_LOCK_JMAKE, F_UNLCK, 0);
			errno = e;
			if (fresh) {
				/* I8: the name is durable before anything
				 * relies on it; a failure leaves a journal
				 * nobody owns, found by name later and made
				 * durable then. */
				if (!MUTANT(8) && oa_xfsync(f->dfd) < 0) {
					oa_xclose(fd);
					return -1;
				}
				goto got;
			}
			if (fd < 0 && errno == EEXIST) {
				k--;   /* made without the lock (an older
					* library): look again */
				continue;
			}
			if (fd >= 0 && !usable(f, fd)) {
				oa_xclose(fd);
				continue;
			}
		} else if (fd >= 0 && !usable(f, fd)) {
			/* Someone else's, or another file's under a second
			 * name (a hard link planted here): skipped.  Ours,
			 * wider than the file now (the file was chmod-ed), is
			 * narrowed: whatever it holds is checkpointed before
			 * reuse. */
			oa_xclose(fd);
			continue;
		}
		if (fd < 0)
			goto fail;
		if (oa_lock(fd, OA_LOCK_OWNER, F_WRLCK, 0) < 0) {
			oa_xclose(fd);
			if (errno == EAGAIN)
				continue;   /* another handle's journal */
			goto fail;
		}
got:
		if (made >= 0)   /* a free journal was found after all */
			oa_create_drop(f, made, tmp);
		f->jfd = fd;
		f->jidx = k;
		f->jbase = 0;
		f->jdata = OA_DATA_START;
		f->jlock = OA_LOCK_OWNER;
		*fresh_out = fresh;
		return 0;
	}
	errno = EMFILE;
fail:
	if (made >= 0)
		oa_create_drop(f, made, tmp);
	return -1;
}

/* *CAP: 1/DIV of SIZE (the journal's) plus the free space of its file
 * system, in whole transaction alignments: what a journal may take
 * (oa_journal_acquire, oa_journal_grow).  False where statfs fails. */
static bool free_share(struct oa_file *f, uint64_t size, unsigned div,
		       uint64_t *cap)
{
	struct statfs sfs;
	if (oa_sys->fstatfs(f->jfd, &sfs) < 0)
		return false;
	*cap = ((uint64_t)sfs.f_bavail * (uint64_t)sfs.f_bsize + size) / div &
	       ~(uint64_t)(OA_TX_ALIGN - 1);
	return true;
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
	/* Whatever the journal taken holds is its last owner's until the
	 * reset (recycle below): nothing of it is known to be dropped. */
	f->jcommit_end = UINT64_MAX;
	r = take_j0(f);
	if (r < 0)
		return -1;
	if (r == 0 && take_extra(f, &fresh) < 0)
		return -1;
	f->jcow = oa_journal_cow(f, f->jfd);
	f->ncommit = 0;
	f->jhdr = f->jgrow_fail = false;
	f->jroom_max = UINT64_MAX;
	/* The journal is started over (checkpointed, reused from its first
	 * record) before it passes three quarters of an eighth of its size
	 * plus the free space, and its room ahead stays within that eighth
	 * (oa_journal_grow): a handle whose transactions other handles
	 * commit for it (a group commit's member, which never commits on its
	 * own, see reclaim in file.c) would otherwise append until the disk
	 * is full - 8 such journals filled a 2 MiB tmpfs, and the next
	 * writer's first commit failed with ENOSPC (conf_clean, under load).
	 * On a disk with room, this is far above OA_JRNL_CKPT and changes
	 * nothing. */
	uint64_t jsz;
	if (!MUTANT(53) && oa_xfsize(f->jfd, &jsz) == 0)
		free_share(f, jsz, 8, &f->jroom_max);
	f->fsize_max = getrlimit(RLIMIT_FSIZE, &rl) == 0 &&
		       rl.rlim_cur != RLIM_INFINITY ? rl.rlim_cur : UINT64_MAX;
	r = oa_slots_read(f->jfd, f->jbase, OA_JNL_MAGIC, &s);
	f->jslot_seq = r == 0 ? s.slot_seq : 0;
	/* A journal left by a dead handle may hold commits newer than the
	 * checkpoint (healed here): recycling checkpoints them first. */
	if (oa_commit_begin(f, NULL, NULL) < 0)
		goto fail;
	/* The control file leaves its clean state (a new era: I15). */
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
	oa_commit_end(f);
	if (r < 0)
		goto fail;
	return 0;
fail:
	oa_journal_release(f);
	return -1;
}

void oa_journal_release(struct oa_file *f)
{
	if (f->jfd >= 0)
		oa_lock(f->jfd, f->jlock, F_UNLCK, 0);
	oa_xclose(f->jfd);
	f->jfd = -1;
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

static int append1(struct oa_file *f, const struct iovec *iov, int cnt,
		   size_t total, uint64_t off)
{
	uint64_t payload;
	uint32_t crc;

	if (f->jfd < 0 && oa_journal_acquire(f) < 0)
		return -1;
	/* Clone method: a big write, or a stream that has grown big, goes
	 * into a record whose payload the apply can clone (method.c). */
	bool cont = f->rec_open && !f->rec_shut && off == f->rec_next_off;
	uint64_t stream = cont ? f->rec_stream : 0;
	bool big = f->may_clone && f->blk &&
		   (total >= f->clone_min ||
		    (cont && stream + total >= f->clone_min));
	/* A write that continues the previous one extends its record, so a
	 * sequential stream is one record and one extent.  So does any other
	 * write smaller than a clone (OA_CLONE_MIN) into a record not placed
	 * for cloning: scattered small writes (a mapping's stores, a
	 * database's pages) share one record instead of taking a 512-byte
	 * slot and a header each; the commit's ops say where each one's bytes
	 * are (FORMAT.md, "Records").  Never into a placed record, whose
	 * payload must stay congruent to its file offsets. */
	bool joins = f->rec_open && !f->rec_shut &&
		     f->rec_len + total <= OA_REC_MAX &&
		     (f->rec_big ? cont
				 : !big && (cont || total < OA_CLONE_MIN));
	if (f->rec_open && !joins && oa_rec_close(f) < 0)
		return -1;
	if (!f->rec_open) {
		f->rec_open = true;
		f->rec_shut = false;
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
		stream = 0;
	}
	payload = f->rec_lsn + OA_REC_HDR + f->rec_pad + f->rec_len;
	/* I12: whoever applies clones an op of 64 KiB or more whose journal
	 * bytes lie beyond the ring and happen to be congruent to its file
	 * offset (oa_clone_span cannot tell a placed record from one that
	 * only looks placed): such a generation is cut back too. */
	if (payload + total > OA_JRNL_INITIAL && stream + total >= OA_CLONE_MIN)
		f->jplaced = true;
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
		f->rec_shut = true;  /* no more extension */
		f->pos = oa_align_up(payload + total, OA_REC_ALIGN);
		oa_rec_close(f);  /* if it fails, the commit retries it */
		errno = e;
		return -1;
	}
	if (oa_index_insert(f->ix, off, total, payload) < 0) {
		f->rec_shut = true;  /* the record holds dead bytes */
		f->rec_len += total;
		f->rec_crc = crc;
		return -1;
	}
	f->rec_len += total;
	f->rec_crc = crc;
	f->rec_next_off = off + total;
	f->rec_stream = stream + total;
	f->pos = oa_align_up(payload + total, OA_REC_ALIGN);
	f->txn_bytes += total;
	f->pending = true;
	return 0;
}

/*
 * Append a write to the journal.  A journal that ran out of room (a full
 * file system, a quota, the file size limit) at the first write of a
 * transaction, with committed transactions before it, is started over -
 * checkpointed (I6) and reset to its first record - and the write tried
 * once more: the space those commits took is the journal's own, and a
 * handle that keeps committing small transactions on a nearly full disk
 * (or under `ulimit -f`) must not fail for want of it.  Not within a
 * transaction (its earlier records stay where they are), nor where this
 * handle holds COMMIT already (a commit moving its mappings' stores in).
 */
int oa_journal_append(struct oa_file *f, const struct iovec *iov, int cnt,
		      size_t total, uint64_t off)
{
	bool first = f->jfd >= 0 && !f->pending && !f->rec_open &&
		     f->tx_start > f->jdata && !oa_holds_excl(f, OA_LOCK_COMMIT);
	if (append1(f, iov, cnt, total, off) == 0)
		return 0;
	int e = errno;
	if (!first || (e != ENOSPC && e != EDQUOT && e != EFBIG) || MUTANT(52))
		return -1;
	if (oa_commit_begin(f, NULL, NULL) < 0) {
		errno = e;
		return -1;
	}
	int r = oa_journal_recycle_locked(f, OA_JRNL_INITIAL);
	oa_commit_end(f);
	if (r < 0) {
		errno = e;
		return -1;
	}
	return append1(f, iov, cnt, total, off);
}

void oa_txn_drop(struct oa_file *f)
{
	oa_index_clear(f->ix);
	f->pending = false;
	f->staged = false;
	f->shadowed = false;
	f->shadow_bad = false;
	oa_shadow_reset(f);
	f->has_trunc = false;
	f->txn_bytes = 0;
	f->xchg_first = false;
	f->shadow_big = false;
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

#define OA_ROOM_LOW (128u << 10)

/* Journal 0 starts as long as its first transaction needs: the clean
 * control file is OA_CLEAN_SIZE bytes, and a one-shot update should not
 * write a 4 MiB ring; an extra journal starts at OA_XJ_INITIAL.  A handle
 * that keeps committing gets room ahead whenever less than OA_ROOM_LOW is
 * left past its tail: twice the journal, at least 256 KiB past its tail,
 * up to the ring's OA_JRNL_INITIAL, zero-filled and not flushed (the next
 * commit flush carries it).  Best effort: where it fails (a full disk, the
 * file size limit) commits go on growing the journal as they write. */
void oa_journal_grow(struct oa_file *f)
{
	uint64_t orig, size, want;
	/* The control file's header pages were made by ftruncate (holes):
	 * a slot written there later (a checkpoint, a new generation) would
	 * need a block then, which a disk the journal has filled cannot give
	 * - and a journal that cannot start over cannot give its space back
	 * (oa_journal_append).  A handle that keeps committing allocates them
	 * now (KEEP_SIZE allocates only the holes; nothing is written); a
	 * one-shot update never gets here. */
	if (f->jidx == 0 && !f->jhdr) {
		f->jhdr = true;
		(void)!oa_sys->fallocate(f->jfd, FALLOC_FL_KEEP_SIZE, OA_CSLOT,
					 OA_J0_DATA - OA_CSLOT);
	}
	if (f->jgrow_fail || oa_xfsize(f->jfd, &orig) < 0 ||
	    orig >= OA_JRNL_INITIAL || oa_need_buf(f) < 0)
		return;
	/* From the next block on: never a write into a sector that holds an
	 * acknowledged commit (the tail of the last one), which a disk that
	 * is not power safe could garble (I4).  The rest of that block is
	 * allocated already. */
	size = oa_align_up(orig, OA_TX_ALIGN);
	/* Room ahead follows use: made when less than 128 KiB is left past
	 * the tail, so that a handle that commits ten times writes a few
	 * hundred KiB of zeros, not the whole 4 MiB ring (it did, from its
	 * fifth commit on, before 2026-12-06); the sizes it steps through
	 * are the same as before (doubling), so a handle that keeps
	 * committing pays as many growth flushes as it did. */
	if (size >= f->pos + OA_ROOM_LOW)
		return;
	want = size * 2;
	if (want < f->pos + (256u << 10))
		want = f->pos + (256u << 10);
	if (want > OA_JRNL_INITIAL)
		want = OA_JRNL_INITIAL;
	if (want > f->fsize_max)
		want = f->fsize_max & ~(uint64_t)4095;
	if (want > f->jroom_max && !MUTANT(53))
		want = f->jroom_max;   /* as acquire found the space */
	/* Room ahead saves the commit flushes an allocation; it is not
	 * needed.  A journal grows to at most a quarter of its own size plus
	 * the file system's free space, so that a handle that keeps
	 * committing never takes the room the other writers' journals (or
	 * other files) need: on a 2 MiB tmpfs journal 0 took it all and the
	 * next writer could not make its journal.  N journals grown so leave
	 * about 3/(N+3) of the space free.  Where the space is too short,
	 * no more room ahead while this handle holds the journal: its
	 * commits grow it as they go (and it starts over where they fail). */
	uint64_t cap;
	if (want > size && !MUTANT(53) && free_share(f, orig, 4, &cap) &&
	    want > cap)
		want = f->jroom_max = cap;
	if (want <= size) {
		f->jgrow_fail = true;
		return;
	}
	memset(f->buf, 0, OA_BUF_BYTES);
	for (uint64_t off = size; off < want;) {
		size_t n = want - off < OA_BUF_BYTES ? (size_t)(want - off)
						     : OA_BUF_BYTES;
		if (oa_pwrite_full(f->jfd, f->buf, n, (off_t)off) < 0) {
			/* What it wrote is given back (zeros beyond every
			 * record: nothing of a commit is cut). */
			int e = errno;
			(void)!oa_xftruncate(f->jfd, (off_t)orig);
			errno = e;
			f->jgrow_fail = true;
			return;
		}
		off += n;
	}
}

void oa_shadow_reset(struct oa_file *f)
{
	/* Its blocks are dead (old data after an exchange, or bytes of a
	 * dropped transaction): give the space back.  They must go: the next
	 * exchange moves every written block of its span.  If the truncate
	 * fails, the shadow is dropped and the next transaction makes a new
	 * one. */
	if (f->sfd < 0 || !f->shadow_dirty)
		return;
	if (oa_xftruncate(f->sfd, 0) < 0) {
		oa_xclose(f->sfd);
		f->sfd = -1;
	}
	f->shadow_dirty = false;
}
