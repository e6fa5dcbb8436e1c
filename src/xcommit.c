/*
 * xcommit.c - commits of several processes to one file share one flush.
 *
 * gcommit.c batches the threads of one process.  Processes meet here, in
 * the slots of the control file's live area (format.h, OA_XP_*): a
 * committer that finds COMMIT taken publishes its transaction - its
 * journal's number and its extents, {file offset, length, journal offset}
 * - in a slot and sleeps on it (a futex in the shared page).  Whoever
 * holds COMMIT next leads: it takes every published slot, copies the
 * members' bytes out of their journals into its own transaction, after
 * its own writes, and commits that - one commit record, one flush, one
 * apply - then writes each slot's outcome and wakes its owner.  A member
 * woken to lead (the one woken when COMMIT is let go) takes COMMIT
 * itself, finds its slot not taken, and leads the next batch.
 *
 * Why no new format and no new recovery rule: a batch is the leader's
 * ordinary transaction, committed by the journal method's protocol
 * (commit.c, FORMAT.md I1-I17); the members' copies in their own
 * journals never get a commit record and are ignored, as an aborted
 * transaction's are (I1).
 *
 * Invariants (the slot of member M, s; its owner holds the control
 * file's byte OA_LOCK_XP0 + i while the slot is its own):
 *   X1  A slot is taken (PUB -> TAKEN) and settled (TAKEN -> OK, SELF,
 *       EIO) only by the holder of COMMIT; so at any moment at most one
 *       live leader has slots TAKEN, and a holder of COMMIT that finds a
 *       slot TAKEN knows its leader is dead.
 *   X2  M's owner returns 0 only on OK, which the leader writes after
 *       its batch's flush returned 0 and its acknowledgement and apply
 *       (ack_apply) were done: M's bytes are durable and in the file, as
 *       its own commit would have left them (B1 of gcommit.c).
 *   X3  Bytes are copied only from a member whose owner is alive after
 *       the copy: its lock byte held then means held throughout (a dead
 *       process's locks are gone for good), and a live owner keeps its
 *       journal (OWNER) and the bytes it published unchanged while it
 *       waits.  A member found dead drops the merge: the leader's own
 *       transaction is restored as it was, every member gets SELF.
 *   X4  The leader writes the batch's seq into every taken slot before
 *       the commit's dirty marker (I10): a leader that dies after the
 *       marker leaves it for the next holder of COMMIT, whose recovery
 *       says whether that commit is complete - then it is in the file,
 *       durable (recovery flushes), and its members get OK; else SELF.
 *   X5  A slot TAKEN with no marker left (the leader died before it) or
 *       with another seq is SELF: nothing of it was committed.  SELF
 *       leaves the member's transaction pending: it commits on its own.
 *   X6  A flush that failed (I9) settles its members EIO, before any
 *       revoking: a leader that dies in between leaves EIO, never SELF
 *       for bytes that may be durable.
 * Members are copied in slot order after the leader's own writes: an
 * order the callers could have seen, every one of them being in
 * oa_commit at once (B2 of gcommit.c).
 *
 * Who may follow: the journal method, writes only, nothing staged or
 * shadowed, at most OA_XP_OPS extents and OA_GC_MAX bytes (the slot holds
 * the extents; bigger transactions gain little from a shared flush).  No
 * mapping of the live area (the simulator, a read-only control file): no
 * slots, commits as before.  OATOMIC_GROUP_COMMIT=0 turns it off.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

static bool g_off;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void xp_init(void)
{
	const char *e = getenv("OATOMIC_GROUP_COMMIT");
	g_off = e && e[0] == '0';
}

bool oa_xp_on(void)
{
	pthread_once(&g_once, xp_init);
	return !g_off;
}

/* Is slot I's lock byte held, by another descriptor than F's?  A failure
 * to ask says no: the slot is then left out, never copied from. */
static bool owner_alive(struct oa_file *f, int i)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
			    .l_start = OA_LOCK_XP0 + i, .l_len = 1 };
	if (oa_sys->lock(f->cfd, F_OFD_GETLK, &fl) < 0)
		return false;
	return fl.l_type != F_UNLCK;
}

static bool can_follow(const struct oa_file *f)
{
	return !g_off && f->live && f->cfd_rw && f->pending && !f->has_trunc &&
	       !f->staged && !f->shadowed && !f->blkdev && f->jfd >= 0 &&
	       !f->rec_open && f->txn_bytes <= OA_GC_MAX &&
	       oa_index_count(f->ix) <= OA_XP_OPS;
}

static bool can_lead(const struct oa_file *f)
{
	return !g_off && f->live && f->cfd_rw && f->pending && !f->has_trunc &&
	       !f->blkdev && f->jfd >= 0 && f->dfd >= 0;
}

/* A slot of our own: its lock byte taken.  Free slots first; then one a
 * dead owner left (its byte free, whatever its state says). */
static int claim(struct oa_file *f)
{
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < OA_XP_SLOTS; i++) {
			struct oa_xslot *s = oa_xp_slot(f, i);
			bool free_ = atomic_load(&s->state) == OA_XS_FREE;
			if (free_ != (pass == 0))
				continue;
			if (oa_lock(f->cfd, OA_LOCK_XP0 + i, F_WRLCK, 0) == 0)
				return i;
		}
	return -1;
}

static void unclaim(struct oa_file *f, int i)
{
	atomic_store(&oa_xp_slot(f, i)->state, OA_XS_FREE);
	oa_lock(f->cfd, OA_LOCK_XP0 + i, F_UNLCK, 0);
}

static void publish(struct oa_file *f, int i)
{
	struct oa_xslot *s = oa_xp_slot(f, i);
	struct oa_ext e;
	uint32_t n = 0;
	for (void *c = oa_index_seek(f->ix, 0); c; c = oa_index_next(f->ix, c)) {
		oa_index_get(c, &e);
		s->op[n].off = e.off;
		s->op[n].len = e.len;
		s->op[n].joff = e.joff;
		n++;
	}
	struct stat st;
	s->nops = (uint16_t)n;
	s->jidx = (uint16_t)f->jidx;
	s->jino = f->jidx == 0 || oa_xfstat(f->jfd, &st) < 0
			  ? 0 : (uint64_t)st.st_ino;
	atomic_store(&s->seq, 0);
	atomic_store(&s->state, OA_XS_PUB);   /* (seq_cst: after the fields) */
	struct oa_xhdr *h = oa_xp_hdr(f);
	atomic_fetch_add(&h->arrivals, 1);
	if (atomic_load(&h->gathering))
		oa_futex_wake(&h->arrivals);
}

/* A member's outcome: OK (1: committed by a batch; the transaction is
 * dropped as gcommit's members' are) or EIO (-1, latched). */
static int outcome(struct oa_file *f, uint32_t st)
{
	if (st != OA_XS_OK) {
		f->latched = true;   /* X6, I9 */
		errno = EIO;
		return -1;
	}
	oa_txn_drop(f);
	/* Its journal's space: what the copy left behind passes the
	 * checkpoint mark now and then, as a committer's own records do. */
	if (f->pos > oa_jrnl_ckpt(f) && oa_commit_begin(f, NULL, NULL) == 0) {
		if (oa_journal_recycle_locked(f, OA_JRNL_RETAIN) < 0 &&
		    errno == EIO)
			f->latched = true;
		oa_commit_end(f);
	}
	return 1;
}

static void restore(struct oa_file *f, struct oa_xp_batch *b)
{
	if (!b->saved)
		return;
	struct oa_index *cur = f->ix;
	f->ix = b->saved;
	f->txn_bytes = b->saved_bytes;
	b->saved = NULL;
	oa_index_free(cur);
}

static void settle(struct oa_file *f, struct oa_xp_batch *b, uint32_t st)
{
	for (int k = 0; k < b->n; k++) {
		struct oa_xslot *s = oa_xp_slot(f, b->slot[k]);
		atomic_store(&s->state, st);
		oa_xp_wake(s);
	}
	b->n = 0;
}

#define XP_BUF (1u << 16)

/* A descriptor of slot S's journal: journal 0 is the control file; an
 * extra journal is opened by its name, and must be the inode its owner
 * published.  Opened for each batch and closed after: keeping them open
 * measured no faster (8 processes, ext4: 8,312-9,684 commits/s kept,
 * 9,090-9,299 not) and would hold up to eight descriptors per handle of
 * the program's own. */
static int journal_fd(struct oa_file *f, const struct oa_xslot *s)
{
	char name[NAME_MAX + 1];
	struct stat st;
	int fd;
	if (s->jidx == 0)
		return f->cfd;
	if (oa_name(f, name, sizeof(name), OA_NAME_JNL, (int)s->jidx) < 0 ||
	    (fd = oa_xopenat(f->dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC,
			     0)) < 0)
		return -1;
	if (oa_xfstat(fd, &st) < 0 || (uint64_t)st.st_ino != s->jino) {
		oa_xclose(fd);
		errno = ESTALE;
		return -1;
	}
	return fd;
}

/* Copy slot S's bytes, out of its owner's journal, into F's transaction. */
static int copy_member(struct oa_file *f, const struct oa_xslot *s, char *buf)
{
	uint32_t nops = s->nops;
	int fd;
	if (nops > OA_XP_OPS) {
		errno = EINVAL;
		return -1;
	}
	if ((fd = journal_fd(f, s)) < 0)
		return -1;
	int r = -1;
	for (uint32_t k = 0; k < nops; k++) {
		uint64_t off = s->op[k].off, len = s->op[k].len,
			 jo = s->op[k].joff, done = 0;
		while (done < len) {
			size_t n = len - done < XP_BUF ? (size_t)(len - done)
						      : XP_BUF;
			struct iovec v = { buf, n };
			if (oa_pread_full(fd, buf, n, (off_t)(jo + done)) < 0 ||
			    oa_journal_append(f, &v, 1, n, off + done) < 0)
				goto out;
			done += n;
		}
	}
	r = 0;
out:
	if (fd != f->cfd) {
		int e = errno;
		oa_xclose(fd);
		errno = e;
	}
	return r;
}

/* The taken members into F's transaction (X3), or none of them. */
static int merge(struct oa_file *f, struct oa_xp_batch *b)
{
	struct oa_index *save = oa_index_new();
	char *buf = malloc(XP_BUF);
	struct oa_ext e;
	int k;
	if (!save || !buf)
		goto fail;
	for (void *c = oa_index_seek(f->ix, 0); c; c = oa_index_next(f->ix, c)) {
		oa_index_get(c, &e);
		if (oa_index_insert(save, e.off, e.len, e.joff) < 0)
			goto fail;
	}
	b->saved = save;
	b->saved_bytes = f->txn_bytes;
	save = NULL;
	for (k = 0; k < b->n; k++)
		if (copy_member(f, oa_xp_slot(f, b->slot[k]), buf) < 0)
			goto fail;
	for (k = 0; k < b->n; k++)
		if (!owner_alive(f, b->slot[k]))
			goto fail;
	free(buf);
	return 0;
fail:
	if (save)
		oa_index_free(save);
	free(buf);
	restore(f, b);
	return -1;
}

static int published(struct oa_file *f)
{
	int n = 0;
	for (int i = 0; i < OA_XP_SLOTS; i++)
		n += atomic_load(&oa_xp_slot(f, i)->state) == OA_XS_PUB;
	return n;
}

/* How long a leader waits for the commits of the last batch to come back
 * (each gap between arrivals), and at most in all: they return from
 * oa_commit, write their next transaction and publish it within tens of
 * microseconds, and without the wait the leader takes the few that
 * published during the last flush, and the rest take turns with them in
 * batches half as big (gcommit.c, GATHER_GAP_NS). */
#define XP_GAP_NS  60000
#define XP_WAIT_NS 400000

static uint64_t mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Wait while published commits keep coming, up to as many as the last
 * batch had.  The number the next leader waits for: as many as came (a
 * lone writer never waits); every eighth batch that got all it waited
 * for, one more (more writers may have come: a wait for one that is not
 * there costs a gap). */
static void gather_wait(struct oa_file *f)
{
	struct oa_xhdr *h = oa_xp_hdr(f);
	uint32_t want = atomic_load(&h->last);
	int n = published(f);
	uint64_t end = mono_ns() + XP_WAIT_NS;
	bool late = false;

	if (want > OA_XP_SLOTS + 1)
		want = OA_XP_SLOTS + 1;
	while ((uint32_t)n + 1 < want) {
		uint32_t a = atomic_load(&h->arrivals);
		atomic_store(&h->gathering, 1);
		if (published(f) == n)
			oa_futex_wait(&h->arrivals, a, XP_GAP_NS);
		atomic_store(&h->gathering, 0);
		int m = published(f);
		if (m == n || mono_ns() >= end) {
			n = m;
			late = true;
			break;
		}
		n = m;
	}
	bool probe = !late && n > 0 &&
		     (atomic_fetch_add(&h->batches, 1) & 7) == 0;
	atomic_store(&h->last, (uint32_t)n + 1 + (probe ? 1 : 0));
}

/* Under COMMIT: take every published slot of a live owner and merge it;
 * settle what a dead leader left (X5). */
static void gather(struct oa_file *f, struct oa_xp_batch *b)
{
	bool lead = can_lead(f);
	if (lead)
		gather_wait(f);
	for (int i = 0; i < OA_XP_SLOTS; i++) {
		struct oa_xslot *s = oa_xp_slot(f, i);
		if (!s)
			return;
		uint32_t st = atomic_load(&s->state);
		if (st == OA_XS_TAKEN) {
			atomic_store(&s->state, OA_XS_SELF);   /* X1, X5 */
			oa_xp_wake(s);
			continue;
		}
		if (st != OA_XS_PUB || !lead)
			continue;
		if (!owner_alive(f, i)) {
			/* its owner died: nobody's (a new owner publishes
			 * again, or finds it FREE and commits alone) */
			atomic_store(&s->state, OA_XS_FREE);
			continue;
		}
		atomic_store(&s->state, OA_XS_TAKEN);
		b->slot[b->n++] = (unsigned char)i;
	}
	if (b->n && merge(f, b) < 0)
		settle(f, b, OA_XS_SELF);
	if (b->n)
		oa_killpoint(OA_KP_XP_TAKEN);
}

int oa_xp_begin(struct oa_file *f, struct oa_live *l, uint64_t *fsize,
		struct oa_xp_batch *b)
{
	struct oa_xslot *s;
	uint32_t st;
	int i;

	pthread_once(&g_once, xp_init);
	memset(b, 0, sizeof(*b));
	/* A handle that opened the control file clean has not mapped the
	 * live area; it is in use now (this handle has a journal) and stays
	 * so while the handle holds OPEN. */
	if (!f->live && !g_off)
		oa_ctl_map(f);
	if (!oa_xp_slot(f, 0))
		goto block;   /* no slots: as before */
	if (oa_ctl_lock(f, OA_LOCK_COMMIT, F_WRLCK, 0) == 0) {
		if (oa_commit_begin_locked(f, l, fsize) < 0)
			return -1;
		goto lead;
	}
	if (errno != EAGAIN)
		return -1;
	if (!can_follow(f) || (i = claim(f)) < 0)
		goto block;
	publish(f, i);
	s = oa_xp_slot(f, i);
	for (;;) {
		if (oa_ctl_lock(f, OA_LOCK_COMMIT, F_WRLCK, 0) == 0) {
			if (oa_commit_begin_locked(f, l, fsize) < 0) {
				int e = errno;
				st = atomic_load(&s->state);
				if (st == OA_XS_OK)
					return unclaim(f, i), outcome(f, st);
				/* a dead leader's batch, undecided */
				if (st == OA_XS_TAKEN && atomic_load(&s->seq))
					f->latched = true;
				unclaim(f, i);
				errno = e;
				return -1;
			}
			/* (its healing settled what a dead leader left: X4) */
			st = atomic_load(&s->state);
			if (MUTANT(60) && st == OA_XS_TAKEN)
				st = OA_XS_OK;   /* a dead leader's slot as done */
			if (st == OA_XS_OK || st == OA_XS_EIO) {
				oa_commit_end(f);
				unclaim(f, i);
				return outcome(f, st);
			}
			/* not taken, or given back (SELF), or left by a dead
			 * leader before its marker (TAKEN, X5): lead */
			unclaim(f, i);
			goto lead;
		}
		int e = errno;
		st = atomic_load(&s->state);
		if (e != EAGAIN && st == OA_XS_PUB) {
			/* the lock cannot be asked for (not taken: no leader
			 * has the slot) */
			unclaim(f, i);
			errno = e;
			return -1;
		}
		if (st == OA_XS_PUB || st == OA_XS_TAKEN) {
			/* woken by the leader's outcome, or to lead next (at
			 * a COMMIT let go); the timeout finds a dead leader */
			oa_futex_wait(&s->state, st, st == OA_XS_PUB
							   ? 2000000 : 20000000);
			st = atomic_load(&s->state);
		}
		if (st == OA_XS_OK || st == OA_XS_EIO) {
			unclaim(f, i);
			return outcome(f, st);
		}
		if (st != OA_XS_PUB && st != OA_XS_TAKEN) {
			/* SELF (or FREE): on its own, waiting its turn */
			unclaim(f, i);
			goto block;
		}
	}
block:
	if (oa_commit_begin(f, l, fsize) < 0)
		return -1;
lead:
	gather(f, b);
	return 0;
}

void oa_xp_seq(struct oa_file *f, struct oa_xp_batch *b, uint64_t seq)
{
	for (int k = 0; k < b->n; k++)
		atomic_store(&oa_xp_slot(f, b->slot[k])->seq, seq);
	if (MUTANT(61)) {
		/* the members acknowledged before the batch is durable */
		for (int k = 0; k < b->n; k++) {
			struct oa_xslot *s = oa_xp_slot(f, b->slot[k]);
			atomic_store(&s->state, OA_XS_OK);
			oa_xp_wake(s);
		}
	}
}

void oa_xp_end(struct oa_file *f, struct oa_xp_batch *b, uint32_t st)
{
	if (st == OA_XS_OK && b->n)
		oa_stats_xp((uint64_t)b->n);
	if (st != OA_XS_OK)
		restore(f, b);
	else if (b->saved) {
		oa_index_free(b->saved);
		b->saved = NULL;
	}
	settle(f, b, st);
}
