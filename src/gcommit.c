/*
 * gcommit.c - group commit: concurrent commits of handles of one file in
 * one process share one flush.
 *
 * Threads that commit small transactions to the same file at the same
 * moment queue here.  While one of them commits, the others wait; the
 * next to lead takes every transaction queued meanwhile and commits them
 * as ONE transaction of a handle of its own on the file (the combiner,
 * opened at the first such batch and kept while the process has handles
 * on the file): their bytes are copied, in the order they queued, out of
 * their journals into the combiner's journal, and the combiner commits
 * with the journal method - one commit record, one flush - then applies.
 * A commit that finds nobody committing goes straight through, as it
 * always did: a lone writer pays one mutex and nothing else.
 *
 * Why it needs no new format and no new recovery rule: a batch is an
 * ordinary transaction of an ordinary handle.  Its commit is the commit
 * protocol every other commit uses (commit.c, FORMAT.md I1-I15), and the
 * copies left behind in the members' own journals never get a commit
 * record: recovery ignores them (I1), exactly as an aborted transaction's.
 *
 * Invariants:
 *   B1  A member's oa_commit returns 0 only after the batch holding its
 *       bytes returned 0 from its commit: its changes are durable and
 *       applied, as its own commit would have made them.
 *   B2  Bytes are copied in the order the members queued, and each
 *       member's extents as its index holds them (the latest write to a
 *       byte wins): applying the batch is applying the members' commits
 *       one after the other, in that order - an order their callers could
 *       have seen, since every one of them was in oa_commit at once.  A
 *       member's commit is atomic because the batch is.
 *   B3  A batch that fails before its commit point leaves every member's
 *       transaction untouched and pending in its own handle: each commits
 *       on its own, and gets its own result (ENOSPC, say).  A batch whose
 *       flush failed, or that failed after its commit point (EIO: the
 *       combiner latched), may or may not be durable: every member
 *       latches too, as its own failed flush would have made it (I9).
 *   B4  Only transactions a batch reproduces exactly are taken: journal
 *       method (AUTO or JOURNAL), writes only (no truncate: a truncate
 *       between two members' writes would need ordering the ops cannot
 *       say), nothing staged for the kernel method or shadowed for the
 *       exchange method, at most OA_GC_MAX bytes.  Others commit alone.
 *   B5  A member's handle is read by the leader only while the member's
 *       thread waits in oa_commit (a handle is used by one thread at a
 *       time, oatomic(3)); the combiner only by the leader, and only one
 *       thread leads at a time (busy).
 *
 * The combiner is opened, written, committed and closed through file.c's
 * public calls, handed down in struct oa_gc_ops (this file lies below
 * file.c: tests/layers.sh).
 *
 * Processes do not batch with each other (a batch is copied out of the
 * members' memory-held indexes); their commits stay serialised by the
 * COMMIT lock, as before.  OATOMIC_GROUP_COMMIT=0 in the environment turns
 * batching off (the benchmark's comparison).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "internal.h"

enum { RQ_WAIT = 0 };

struct gc_req {
	struct oa_file *f;
	int state;               /* RQ_WAIT, then OA_GC_* */
	bool lead;               /* first in line with nobody committing: it
				  * gathers, then leads */
	pthread_cond_t cv;       /* its thread waits here, woken alone (a
				  * broadcast to every waiter on each change
				  * cost more than the flushes it saved) */
	struct gc_req *next;
};

struct oa_gc {
	dev_t dev, jdev;
	uint64_t ino, jino;      /* the file and its journal directory */
	pthread_mutex_t mu;
	pthread_condattr_t ca;   /* CLOCK_MONOTONIC, for the requests' cv */
	bool busy;               /* a commit of the file is under way here */
	struct gc_req *head, **tail;
	unsigned nq;             /* requests queued */
	unsigned want;           /* commits a would-be leader waits for: one
				  * more than the last batch took when that
				  * many came in time, as many as came when
				  * not (1: commit alone at once) */
	struct gc_req *gatherer; /* the leader-to-be waiting for more */
	struct timespec arrived; /* when the last request was queued */
	struct oa_file *comb;    /* the combiner, NULL until a batch */
	char *buf;               /* GC_BUF bytes: copies into it */
	const struct oa_gc_ops *ops;   /* file.c's calls, for the combiner */
	_Atomic bool broken;     /* it could not be opened (a write-only file,
				  * no descriptors, no space): no batches */
	_Atomic unsigned users; /* handles that registered */
	struct oa_gc *next;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct oa_gc *g_list;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* fork: the list lock is taken around it, so that the child (whose other
 * threads are gone) never finds it held; the child starts with no entries
 * (the parent's, their locks in whatever state the fork caught them, and
 * their combiners, are not its own: left, not freed). */
static void fork_prepare(void)
{
	pthread_mutex_lock(&g_lock);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&g_lock);
}

static void fork_child(void)
{
	g_list = NULL;
	pthread_mutex_unlock(&g_lock);
}

static bool g_off;                /* OATOMIC_GROUP_COMMIT=0 */

static void gc_init(void)
{
	const char *e = getenv("OATOMIC_GROUP_COMMIT");
	g_off = e && e[0] == '0';
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* B4 */
static bool eligible(const struct oa_file *f)
{
	return !f->gc_off && f->pending && !f->staged && !f->shadowed &&
	       !f->has_trunc && !f->blkdev && f->jfd >= 0 && f->cfd >= 0 &&
	       f->dfd >= 0 && f->txn_bytes <= OA_GC_MAX &&
	       (f->opt.method == OA_METHOD_AUTO ||
		f->opt.method == OA_METHOD_JOURNAL);
}

/* The file's entry, F registered in it (once per handle).  NULL: batching
 * is not for F. */
static struct oa_gc *join(struct oa_file *f, const struct oa_gc_ops *ops)
{
	struct stat d;
	struct oa_gc *g;

	if (f->gc)
		return f->gc;
	if (oa_xfstat(f->dfd, &d) < 0)
		return NULL;
	pthread_mutex_lock(&g_lock);
	for (g = g_list; g; g = g->next)
		if (g->dev == f->dev && g->ino == f->ino &&
		    g->jdev == d.st_dev && g->jino == (uint64_t)d.st_ino)
			break;
	if (!g) {
		g = calloc(1, sizeof(*g));
		if (!g) {
			pthread_mutex_unlock(&g_lock);
			return NULL;
		}
		g->dev = f->dev;
		g->ino = f->ino;
		g->ops = ops;
		g->jdev = d.st_dev;
		g->jino = (uint64_t)d.st_ino;
		pthread_condattr_init(&g->ca);
		pthread_condattr_setclock(&g->ca, CLOCK_MONOTONIC);
		pthread_mutex_init(&g->mu, NULL);
		g->want = 1;
		g->tail = &g->head;
		g->next = g_list;
		g_list = g;
	}
	g->users++;
	f->gc = g;
	pthread_mutex_unlock(&g_lock);
	return g;
}

void oa_gc_leave(struct oa_file *f)
{
	struct oa_gc *g = f->gc, **p;
	struct oa_file *comb = NULL;

	if (!g)
		return;
	f->gc = NULL;
	/* (a handle inherited through fork never gets here: oa_close only
	 * frees it, and the child's list starts empty) */
	pthread_mutex_lock(&g_lock);
	if (--g->users == 0) {
		for (p = &g_list; *p && *p != g; p = &(*p)->next)
			;
		if (*p)
			*p = g->next;
		comb = g->comb;
	} else {
		g = NULL;
	}
	pthread_mutex_unlock(&g_lock);
	if (g) {
		/* The last handle of the file in this process: nobody can be
		 * committing through the entry now. */
		if (comb)
			g->ops->close(comb);
		free(g->buf);
		pthread_condattr_destroy(&g->ca);
		pthread_mutex_destroy(&g->mu);
		free(g);
	}
}

#define GC_BUF (1u << 16)

/* Copy member F's pending bytes into the combiner C, through BUF (B2). */
static int copy_in(const struct oa_gc_ops *ops, struct oa_file *c,
		   struct oa_file *f, char *buf)
{
	struct oa_ext e;
	for (void *k = oa_index_seek(f->ix, 0); k; k = oa_index_next(f->ix, k)) {
		oa_index_get(k, &e);
		uint64_t jo, done = 0;
		int fd = oa_ext_fd(f, &e, &jo);
		while (done < e.len) {
			size_t n = e.len - done < GC_BUF
					   ? (size_t)(e.len - done) : GC_BUF;
			if (oa_pread_full(fd, buf, n, (off_t)(jo + done)) < 0)
				return -1;
			if (ops->pwrite(c, buf, n, (off_t)(e.off + done)) !=
			    (ssize_t)n)
				return -1;
			done += n;
		}
	}
	return 0;
}

/* Commit the batch R[0..N) as one transaction of the combiner: the
 * members' result (B1, B3), or -1 when they have it already. */
static int run_batch(struct oa_gc *g, struct gc_req **r, size_t n)
{
	const struct oa_gc_ops *ops = g->ops;
	struct oa_file *c = g->comb;
	int res = OA_GC_SELF;

	if (!c && !(c = g->comb = ops->open_sibling(r[0]->f)))
		g->broken = true;
	if (!c || (!g->buf && !(g->buf = malloc(GC_BUF))))
		return res;
	for (size_t i = 0; i < n; i++)
		if (copy_in(ops, c, r[i]->f, g->buf) < 0)
			goto drop;
	if (MUTANT(49)) {
		/* the members acknowledged before the batch is durable */
		pthread_mutex_lock(&g->mu);
		for (size_t i = 0; i < n; i++) {
			r[i]->state = OA_GC_MERGED;
			pthread_cond_signal(&r[i]->cv);
		}
		pthread_mutex_unlock(&g->mu);
		if (ops->commit(c) < 0 && ops->abort(c) < 0) {
			ops->close(c);
			g->comb = NULL;
		}
		return -1;
	}
	if (ops->commit(c) == 0)
		return OA_GC_MERGED;
	if (c->latched) {
		res = OA_GC_EIO;   /* B3: durable or not, nobody can tell */
		goto gone;
	}
drop:
	/* B3: before the commit point; the members' transactions are theirs
	 * still.  The combiner drops its copy (a failure there: a new
	 * combiner next time). */
	if (MUTANT(50))
		res = OA_GC_MERGED;   /* a failed batch reported as committed */
	if (!c->latched && ops->abort(c) == 0)
		return res;
gone:
	ops->close(c);
	g->comb = NULL;
	return res;
}

/* How long a would-be leader waits for g->want committers before it
 * commits what it has: the members of a batch come back within
 * microseconds with their next commit, and the first back would otherwise
 * lead alone and flush for one (and 8 writers settle into two batches of
 * 4 that take turns, where one of 8 flushes half as often). */
#define GATHER_GAP_NS 60000   /* ... while they come this often */

static bool ts_before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec ||
	       (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* Nobody commits now: the first in line, if any, gathers and leads.
 * Caller holds g->mu. */
static void wake_next(struct oa_gc *g)
{
	if (g->head) {
		g->head->lead = true;
		pthread_cond_signal(&g->head->cv);
	}
}

int oa_gc_enter(struct oa_file *f, const struct oa_gc_ops *ops)
{
	struct oa_gc *g;
	struct gc_req me = { .f = f, .state = RQ_WAIT };
	struct timespec until;
	bool waited = false;

	pthread_once(&g_once, gc_init);
	if (g_off || !eligible(f) || !(g = join(f, ops)))
		return OA_GC_ALONE_FREE;
	pthread_mutex_lock(&g->mu);
	if (g->broken) {
		pthread_mutex_unlock(&g->mu);
		return OA_GC_ALONE_FREE;
	}
	if (!g->busy && !g->head && g->want <= 1) {
		g->busy = true;
		pthread_mutex_unlock(&g->mu);
		return OA_GC_ALONE;
	}
	pthread_cond_init(&me.cv, &g->ca);
	me.lead = !g->busy && !g->head;
	*g->tail = &me;
	g->tail = &me.next;
	g->nq++;
	clock_gettime(CLOCK_MONOTONIC, &g->arrived);
	if (g->gatherer)
		pthread_cond_signal(&g->gatherer->cv);
	while (me.state == RQ_WAIT) {
		if (!me.lead) {
			pthread_cond_wait(&me.cv, &g->mu);
			continue;
		}
		if (g->nq < g->want && !waited) {
			/* gather: the last batch's committers are coming,
			 * while they keep coming */
			until = g->arrived;
			until.tv_nsec += GATHER_GAP_NS;
			if (until.tv_nsec >= 1000000000) {
				until.tv_sec++;
				until.tv_nsec -= 1000000000;
			}
			struct timespec seen = g->arrived;
			g->gatherer = &me;
			if (pthread_cond_timedwait(&me.cv, &g->mu, &until) ==
			    ETIMEDOUT && !ts_before(&seen, &g->arrived))
				waited = true;   /* nobody came meanwhile */
			g->gatherer = NULL;
			continue;
		}
		/* Lead: everything queued, this thread's own among it. */
		size_t n = g->nq, i = 0;
		struct gc_req *one[1], **r = n > 1 ? malloc(n * sizeof(*r))
						    : one;
		if (!r) {
			/* No memory for the list: everyone on their own. */
			for (struct gc_req *q = g->head; q; q = q->next) {
				q->state = OA_GC_SELF;
				pthread_cond_signal(&q->cv);
			}
			g->head = NULL;
			g->tail = &g->head;
			g->nq = 0;
			break;
		}
		for (struct gc_req *q = g->head; q; q = q->next)
			r[i++] = q;
		g->head = NULL;
		g->tail = &g->head;
		g->nq = 0;
		g->busy = true;
		/* the next batch waits for one more (up to the handles on the
		 * file here), or for as many as came before the time ran out */
		g->want = waited ? (unsigned)n
				 : n < g->users ? (unsigned)n + 1 : g->users;
		if (n == 1) {
			/* Alone after all: commits itself, busy held. */
			pthread_mutex_unlock(&g->mu);
			pthread_cond_destroy(&me.cv);
			return OA_GC_ALONE;
		}
		pthread_mutex_unlock(&g->mu);
		int res = run_batch(g, r, n);
		pthread_mutex_lock(&g->mu);
		/* (under the lock: a member returns, and its request on its
		 * stack is gone, once it sees its state) */
		for (i = 0; res >= 0 && i < n; i++) {
			r[i]->state = res;
			if (r[i] != &me)
				pthread_cond_signal(&r[i]->cv);
		}
		free(r);
		g->busy = false;
		wake_next(g);
	}
	pthread_mutex_unlock(&g->mu);
	pthread_cond_destroy(&me.cv);
	return me.state;
}

void oa_gc_done(struct oa_file *f)
{
	struct oa_gc *g = f->gc;
	pthread_mutex_lock(&g->mu);
	g->busy = false;
	wake_next(g);
	pthread_mutex_unlock(&g->mu);
}
