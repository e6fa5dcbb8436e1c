/*
 * vfs.c - the "oatomic" SQLite VFS: every SQLite transaction on the main
 * database file is one oatomic commit (liboatomic_sqlite(3)).
 *
 * Built twice: as the loadable extension liboatomic_sqlite.so
 * (OA_SQLITE_LOADABLE: SQLite's routines through the pointer table a
 * loading SQLite hands over, the library a private copy inside it), and as
 * liboatomic_sqlite.a for programs that link SQLite and oatomic themselves
 * (SQLITE_CORE: direct calls).
 *
 * What goes where.  The main database file of a connection is an oa_file
 * handle: xRead is oa_pread (the connection's own pending writes over the
 * last commit), xWrite and xTruncate are pending (oa_pwrite, oa_ftruncate),
 * xFileSize is the pending size.  Every other file SQLite opens - temporary
 * databases, a rollback journal or WAL the user still asks for, the super-
 * journal - is the default VFS's, untouched: our szOsFile is at least its
 * own, and xOpen hands those opens to it with our sqlite3_file, whose
 * methods are then its own.
 *
 * Invariants (the commit rule):
 *   Q1  Nothing a connection writes to the database reaches the file, or
 *       any other connection, before the transaction commits: writes are
 *       pending in the handle (spilled pages of a big transaction too: they
 *       go to the journal on disk, not to memory).
 *   Q2  A transaction commits where SQLite makes it durable: at
 *       SQLITE_FCNTL_SYNC, which the pager sends at the end of a
 *       transaction's first phase, after every page is written and the file
 *       truncated, whatever `synchronous` says (with synchronous=OFF it comes
 *       in place of xSync); at xSync; and at SQLITE_FCNTL_COMMIT_PHASETWO,
 *       sent before the pager drops its lock, for whatever is still pending
 *       then.  With journal_mode=MEMORY a committed transaction is therefore
 *       exactly one oa_commit, and every oa_commit flushes: `synchronous`
 *       cannot make it weaker.  The same signals end the pager's rollback
 *       of a hot journal (left by a unix-VFS process that crashed, or of a
 *       multi-database commit in a rollback-journal mode): its writes commit
 *       too, as SQLite means them to.
 *   Q3  A transaction that ends with none of these was rolled back before
 *       it wrote anything that had to last: what it left pending (pages
 *       spilled, restored by the pager's rollback) is dropped (oa_abort)
 *       when the connection's lock goes below RESERVED, and by xClose.
 *       In locking_mode=EXCLUSIVE the lock never drops: such writes ride
 *       along with the next commit, which is correct (they restore what the
 *       file holds), only not free.
 *   Q4  Writes outside a write transaction (a WAL checkpoint copying pages
 *       into the database, with the connection's lock at SHARED) commit at
 *       SQLITE_FCNTL_CKPT_DONE and at xSync: before the WAL is told they
 *       are in the database (SQLite's WAL stays the authority until then).
 *       With a BATCH_ATOMIC pager (SQLITE_ENABLE_BATCH_ATOMIC_WRITE builds)
 *       COMMIT_ATOMIC_WRITE commits and ROLLBACK_ATOMIC_WRITE aborts.
 *   Q5  Locks are SQLite's protocol (SHARED, RESERVED, PENDING,
 *       EXCLUSIVE), kept with OFD locks on a descriptor of the connection's
 *       own: a close of any other descriptor of the file in the process -
 *       the library's, SQLite's, the program's - cannot drop them (POSIX
 *       record locks would be dropped: the reason SQLite's unix VFS keeps an
 *       inode table).  They lie on bytes of their own (OA_LOCK_BASE), not on
 *       the unix VFS's.
 *   Q7  Writes are gathered in a window of the connection's: WB_CAP bytes
 *       of the file from the first write's offset (memory stays bounded),
 *       with a bit per WB_UNIT-byte unit written, and handed to oa_pwrite
 *       as the runs of written units, in file order: a big transaction's
 *       pages, which the pager writes in nearly ascending order (a B-tree
 *       leaf after its overflow pages, say), become 1 MiB runs instead of
 *       one call per page (65,536 calls for 256 MiB cost a second), and
 *       runs that big are placed for cloning or exchange by the library,
 *       so the data is written once.  A write beyond the window hands it
 *       over and starts the next; one below it (an interior page) goes to
 *       the handle at once: it overlaps nothing gathered, so the order
 *       does not matter.  The window is part of the pending state: handed
 *       over before anything that must see it - a read of its range (or of
 *       the hole below it), the size, a truncation, a commit - and dropped
 *       with the rest by an abort or xClose.  An error of the deferred
 *       oa_pwrite (ENOSPC) is returned by the call that handed it over,
 *       which fails the transaction: it can only be rolled back.
 *   Q6  A process using the unix VFS on the same file is refused: from its
 *       open (or, if a unix-VFS reader is in a transaction then, its first
 *       lock) until its close, each connection holds the FENCE, a lock
 *       on one byte of the range where the unix VFS takes SHARED (a write
 *       lock, each read-write connection on a byte of its own, never the
 *       first; the read-only connections a read lock on the first, which
 *       they share: it keeps unix-VFS writers out, and readers do no harm
 *       while no writer is here).  The unix VFS then gets SQLITE_BUSY on every
 *       transaction ("database is locked"); its writes, which recovery would
 *       write over, cannot happen.  Not covered: a unix-VFS process writing
 *       while no oatomic connection has the file open, after a crash left a
 *       commit to finish (the next oatomic open, or `oatomic recover`,
 *       finishes it over the newer data): open with the VFS, or run
 *       `oatomic recover`, first.
 *
 * SPDX-License-Identifier: MIT
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "oatomic.h"
#include "oatomic_sqlite.h"

#ifdef OA_SQLITE_LOADABLE
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT1
#define OA_EXPORT __attribute__((visibility("default")))
#define OA_REGISTER   /* hidden: needs the table the inits are given */
#else
#include <sqlite3.h>
#define OA_EXPORT
#define OA_REGISTER
#endif

/* SQLite's lock bytes as its unix VFS places them (os.h). */
#define UNIX_PENDING      0x40000000LL
#define UNIX_SHARED_FIRST (UNIX_PENDING + 2)
#define SHARED_SIZE       510

/* Ours (Q5): the same layout 4 KiB higher, clear of the unix VFS's. */
#define OA_LOCK_BASE      (UNIX_PENDING + 4096)
#define OA_PENDING        OA_LOCK_BASE
#define OA_RESERVED       (OA_LOCK_BASE + 1)
#define OA_SHARED_FIRST   (OA_LOCK_BASE + 2)

#define SECTOR            4096
#define WB_CAP            (1 << 20)   /* Q7 */
#define WB_UNIT           512         /* Q7: the window's unit */
#define WB_UNITS          (WB_CAP / WB_UNIT)

#ifndef OA_MUTANT
#define OA_MUTANT 0   /* tests/mutants.sh plants bugs 43-44 here */
#endif

typedef struct ofile {
	sqlite3_file base;
	oa_file *f;
	int lfd;             /* our own descriptor: the OFD locks (Q5, Q6) */
	int lock;            /* SQLITE_LOCK_* held */
	int fence;           /* the byte of the fence held, -1: none */
	int rw;
	int pending;         /* writes or truncates since commit or abort */
	char *wb;            /* Q7: the window's bytes, not yet oa_pwrite */
	sqlite3_int64 wb_off;  /* where the window starts in the file */
	int wb_len;          /* 0: empty; else the end of its last unit */
	unsigned char wb_map[WB_UNITS / 8];   /* units written */
	const char *path;    /* SQLite's, valid until xClose */
	int oflags;          /* SQLite's open flags */
	sqlite3_file *shm;   /* the default VFS's file of the database, for
			      * its shared memory (WAL), opened at first use */
} ofile;

static sqlite3_vfs *root_vfs(sqlite3_vfs *v)
{
	return (sqlite3_vfs *)v->pAppData;
}

static int ofd(int fd, int cmd, short type, off_t start, off_t len)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET,
			    .l_start = start, .l_len = len };
	while (fcntl(fd, cmd, &fl) < 0)
		if (errno != EINTR)
			return -1;
	return cmd == F_OFD_GETLK ? fl.l_type : 0;
}

/* 0, or SQLITE_BUSY where another holds a conflicting lock, or ERR. */
static int setlk(ofile *o, short type, off_t start, off_t len, int err)
{
	if (ofd(o->lfd, F_OFD_SETLK, type, start, len) == 0)
		return SQLITE_OK;
	if (errno == EAGAIN || errno == EACCES)
		return SQLITE_BUSY;
	return err;
}

/* An errno as SQLite's result code, DEF where nothing closer fits. */
static int sqerr(int e, int def)
{
	switch (e) {
	case ENOSPC:
	case EDQUOT:
		return SQLITE_FULL;
	case ENOMEM:
		return SQLITE_IOERR_NOMEM;
	case EUCLEAN:
		return SQLITE_IOERR_CORRUPTFS;
	case EACCES:
	case EPERM:
		return def == SQLITE_CANTOPEN ? SQLITE_PERM : def;
	default:
		return def;
	}
}

static int report(ofile *o, int rc, const char *what, int e)
{
	sqlite3_log(rc, "oatomic: %s %s: %s", what, o->path ? o->path : "?",
		    strerror(e));
	return rc;
}

/* N bytes of BUF at OFF into the handle's transaction. */
static int put_all(ofile *o, const char *buf, sqlite3_int64 n,
		   sqlite3_int64 off)
{
	sqlite3_int64 put = 0;
	while (put < n) {
		ssize_t r = oa_pwrite(o->f, buf + put, (size_t)(n - put),
				      (off_t)(off + put));
		if (r < 0) {
			int e = errno;
			if (e == EINTR)
				continue;
			return report(o, sqerr(e, SQLITE_IOERR_WRITE),
				      "write of", e);
		}
		put += r;
	}
	return SQLITE_OK;
}

static int wb_has(const ofile *o, int u)
{
	return o->wb_map[u / 8] >> (u % 8) & 1;
}

/* Q7: the window's runs of written units into the handle's transaction,
 * in file order; the window is empty after, whatever happens. */
static int wb_flush(ofile *o)
{
	int units = (o->wb_len + WB_UNIT - 1) / WB_UNIT, rc = SQLITE_OK;
	for (int u = 0; u < units && rc == SQLITE_OK;) {
		if (!wb_has(o, u)) {
			u++;
			continue;
		}
		int v = u;
		while (v < units && wb_has(o, v))
			v++;
		int end = v * WB_UNIT < o->wb_len ? v * WB_UNIT : o->wb_len;
		rc = put_all(o, o->wb + u * WB_UNIT, end - u * WB_UNIT,
			     o->wb_off + u * WB_UNIT);
		u = v;
	}
	o->wb_len = 0;
	memset(o->wb_map, 0, sizeof(o->wb_map));
	return rc;
}

/* Q2, Q4: everything pending, as one unit, durably. */
static int commit(ofile *o)
{
	int rc;
	if (!o->pending)
		return SQLITE_OK;
	if ((rc = wb_flush(o)) != SQLITE_OK)
		return rc;
	if (oa_commit(o->f) < 0) {
		int e = errno;
		return report(o, sqerr(e, SQLITE_IOERR_FSYNC), "commit of", e);
	}
	o->pending = 0;
	return SQLITE_OK;
}

/* Q3: a transaction that did not commit. */
static int abort_pending(ofile *o)
{
	o->wb_len = 0;
	memset(o->wb_map, 0, sizeof(o->wb_map));
	if (!o->pending)
		return SQLITE_OK;
	if (oa_abort(o->f) < 0) {
		int e = errno;
		return report(o, SQLITE_IOERR, "abort of", e);
	}
	o->pending = 0;
	return SQLITE_OK;
}

/* ---- the default VFS's file for the shared memory (WAL mode) ---- */

static int shm_file(ofile *o, sqlite3_vfs *root)
{
	int out = 0, rc;
	if (o->shm)
		return SQLITE_OK;
	o->shm = sqlite3_malloc(root->szOsFile);
	if (!o->shm)
		return SQLITE_NOMEM;
	memset(o->shm, 0, (size_t)root->szOsFile);
	rc = root->xOpen(root, o->path, o->shm,
			 (o->oflags & ~(SQLITE_OPEN_CREATE |
					SQLITE_OPEN_EXCLUSIVE |
					SQLITE_OPEN_DELETEONCLOSE)) |
			 SQLITE_OPEN_MAIN_DB, &out);
	if (rc != SQLITE_OK) {
		if (o->shm->pMethods)
			o->shm->pMethods->xClose(o->shm);
		sqlite3_free(o->shm);
		o->shm = NULL;
	}
	return rc;
}

/* ---- io methods ---- */

static sqlite3_vfs *g_root;

static int x_close(sqlite3_file *file)
{
	ofile *o = (ofile *)file;
	int rc = SQLITE_OK;
	if (o->shm) {
		o->shm->pMethods->xClose(o->shm);
		sqlite3_free(o->shm);
		o->shm = NULL;
	}
	/* Q3: what is still pending was not committed. */
	if (o->f && oa_close(o->f) < 0) {
		int e = errno;
		rc = report(o, SQLITE_IOERR_CLOSE, "close of", e);
	}
	o->f = NULL;
	free(o->wb);
	o->wb = NULL;
	o->wb_len = 0;
	if (o->lfd >= 0) {
		/* Released before the close: a child forked meanwhile shares
		 * the open file description, whose locks the close alone
		 * would leave held until the child closes or exits. */
		ofd(o->lfd, F_OFD_SETLK, F_UNLCK, 0, 0);
		close(o->lfd);   /* and with it the locks, the fence */
	}
	o->lfd = -1;
	return rc;
}

static int x_read(sqlite3_file *file, void *buf, int amt, sqlite3_int64 off)
{
	ofile *o = (ofile *)file;
	char *p = buf;
	int got = 0, rc;
	/* Q7: a read of the gathered writes hands them over first.  One
	 * past them sees what it would see after (the size they make ends
	 * below it); one before them that comes back short may be reading
	 * the hole their size makes: handed over, read again. */
	if (o->wb_len && off < o->wb_off + o->wb_len && off + amt > o->wb_off &&
	    (rc = wb_flush(o)) != SQLITE_OK)
		return rc;
again:
	while (got < amt) {
		ssize_t n = oa_pread(o->f, p + got, (size_t)(amt - got),
				     (off_t)off + got);
		if (n < 0) {
			int e = errno;
			if (e == EINTR)
				continue;
			return report(o, sqerr(e, SQLITE_IOERR_READ), "read of",
				      e);
		}
		if (n == 0)
			break;
		got += (int)n;
	}
	if (got < amt && o->wb_len && off < o->wb_off) {
		if ((rc = wb_flush(o)) != SQLITE_OK)
			return rc;
		got = 0;
		goto again;
	}
	if (got < amt) {
		memset(p + got, 0, (size_t)(amt - got));
		return SQLITE_IOERR_SHORT_READ;
	}
	return SQLITE_OK;
}

static int x_write(sqlite3_file *file, const void *buf, int amt,
		   sqlite3_int64 off)
{
	ofile *o = (ofile *)file;
	int rc;
	o->pending = 1;
	if (amt <= 0)
		goto out;
	/* Q7: whole units only (SQLite writes whole pages); anything else
	 * hands the window over and goes at once. */
	if (off % WB_UNIT || amt % WB_UNIT || amt > WB_CAP) {
		if (o->wb_len && (rc = wb_flush(o)) != SQLITE_OK)
			return rc;
		if ((rc = put_all(o, buf, amt, off)) != SQLITE_OK)
			return rc;
		goto out;
	}
	/* Below the window (an interior page): apart from it, at once. */
	if (o->wb_len && off + amt <= o->wb_off) {
		if ((rc = put_all(o, buf, amt, off)) != SQLITE_OK)
			return rc;
		goto out;
	}
	/* Straddling its start, or beyond its end: the window goes first,
	 * and the next one starts here. */
	if (o->wb_len && (off < o->wb_off || off + amt > o->wb_off + WB_CAP) &&
	    (rc = wb_flush(o)) != SQLITE_OK)
		return rc;
	if (!o->wb && !(o->wb = malloc(WB_CAP)))
		return SQLITE_IOERR_NOMEM;
	if (!o->wb_len)
		o->wb_off = off;
	memcpy(o->wb + (off - o->wb_off), buf, (size_t)amt);
	for (int u = (int)((off - o->wb_off) / WB_UNIT),
		 e = u + amt / WB_UNIT; u < e; u++)
		o->wb_map[u / 8] |= (unsigned char)(1u << (u % 8));
	if (off + amt > o->wb_off + o->wb_len)
		o->wb_len = (int)(off + amt - o->wb_off);
out:
#if OA_MUTANT == 43   /* planted: every write commits at once (Q1, Q2) */
	if (commit(o) != SQLITE_OK)
		return SQLITE_IOERR_WRITE;
#endif
	return SQLITE_OK;
}

static int x_truncate(sqlite3_file *file, sqlite3_int64 size)
{
	ofile *o = (ofile *)file;
	int rc;
	o->pending = 1;
	if (o->wb_len && (rc = wb_flush(o)) != SQLITE_OK)
		return rc;
	if (oa_ftruncate(o->f, (off_t)size) < 0) {
		int e = errno;
		return report(o, sqerr(e, SQLITE_IOERR_TRUNCATE),
			      "truncate of", e);
	}
	return SQLITE_OK;
}

static int x_sync(sqlite3_file *file, int flags)
{
	/* Q2, Q4 */
	return commit((ofile *)file);
}

static int x_file_size(sqlite3_file *file, sqlite3_int64 *size)
{
	ofile *o = (ofile *)file;
	off_t n;
	int rc;
	if (o->wb_len && (rc = wb_flush(o)) != SQLITE_OK)
		return rc;
	/* The size alone: SQLite asks at the start of every transaction,
	 * and a full fstat would make the next commit's apply stamp the
	 * file with a fine-grained time (oa_fsize(3)). */
	if (oa_fsize(o->f, &n) < 0) {
		int e = errno;
		return report(o, sqerr(e, SQLITE_IOERR_FSTAT), "size of", e);
	}
	*size = n;
	return SQLITE_OK;
}

/* Q6: one byte of the unix VFS's SHARED range, ours alone (or, the first,
 * shared by the read-only connections: a read-write connection never takes
 * that one, or a read-only open would find it locked until it closed). */
static int fence(ofile *o)
{
	if (o->fence >= 0)
		return SQLITE_OK;
	if (!o->rw) {
		int rc = setlk(o, F_RDLCK, UNIX_SHARED_FIRST, 1,
			       SQLITE_IOERR_LOCK);
		if (rc == SQLITE_OK)
			o->fence = 0;
		return rc;
	}
	unsigned start = 0;
	sqlite3_randomness(sizeof(start), &start);
	int busy = 0;
	for (int i = 0; i < SHARED_SIZE - 1; i++) {
		int b = 1 + (int)((start + (unsigned)i) % (SHARED_SIZE - 1));
		int rc = setlk(o, F_WRLCK, UNIX_SHARED_FIRST + b, 1,
			       SQLITE_IOERR_LOCK);
		if (rc == SQLITE_OK) {
			o->fence = b;
			return SQLITE_OK;
		}
		if (rc != SQLITE_BUSY)
			return rc;
		busy++;
		/* A unix-VFS reader holds the whole range: every byte is
		 * busy, no use trying them all. */
		if (busy == 8 && ofd(o->lfd, F_OFD_GETLK, F_WRLCK,
				     UNIX_SHARED_FIRST, SHARED_SIZE) ==
				 F_RDLCK)
			return SQLITE_BUSY;
	}
	return SQLITE_BUSY;   /* 509 connections have it open */
}

/* SQLite's lock ladder, as its unix VFS climbs it, with OFD locks. */
static int x_lock(sqlite3_file *file, int level)
{
	ofile *o = (ofile *)file;
	int rc;

	if (o->lock >= level)
		return SQLITE_OK;
	if (o->lock == SQLITE_LOCK_NONE) {
		/* SHARED: the fence, then a read lock on PENDING (no writer
		 * is waiting for EXCLUSIVE), the range, PENDING let go. */
		if ((rc = fence(o)) != SQLITE_OK)
			return rc;
		if ((rc = setlk(o, F_RDLCK, OA_PENDING, 1,
				SQLITE_IOERR_RDLOCK)) != SQLITE_OK)
			return rc;
		rc = setlk(o, F_RDLCK, OA_SHARED_FIRST, SHARED_SIZE,
			   SQLITE_IOERR_RDLOCK);
		ofd(o->lfd, F_OFD_SETLK, F_UNLCK, OA_PENDING, 1);
		if (rc != SQLITE_OK)
			return rc;
		o->lock = SQLITE_LOCK_SHARED;
		if (level == SQLITE_LOCK_SHARED)
			return SQLITE_OK;
	}
	if (level == SQLITE_LOCK_RESERVED) {
		if ((rc = setlk(o, F_WRLCK, OA_RESERVED, 1,
				SQLITE_IOERR_LOCK)) != SQLITE_OK)
			return rc;
		o->lock = SQLITE_LOCK_RESERVED;
		return SQLITE_OK;
	}
	/* EXCLUSIVE (SQLite never asks for PENDING itself): PENDING keeps
	 * new readers out, then the whole shared range, once the readers
	 * are gone; busy there, we stay PENDING and SQLite asks again. */
	if (o->lock < SQLITE_LOCK_PENDING) {
		if ((rc = setlk(o, F_WRLCK, OA_PENDING, 1,
				SQLITE_IOERR_LOCK)) != SQLITE_OK)
			return rc;
		o->lock = SQLITE_LOCK_PENDING;
	}
	if ((rc = setlk(o, F_WRLCK, OA_SHARED_FIRST, SHARED_SIZE,
			SQLITE_IOERR_LOCK)) != SQLITE_OK)
		return rc;
	o->lock = SQLITE_LOCK_EXCLUSIVE;
	return SQLITE_OK;
}

static int x_unlock(sqlite3_file *file, int level)
{
	ofile *o = (ofile *)file;
	int rc = SQLITE_OK, rc2;

	if (o->lock <= level)
		return SQLITE_OK;
	/* Q3: the write transaction ends without its PHASETWO. */
	if (o->lock >= SQLITE_LOCK_RESERVED && level <= SQLITE_LOCK_SHARED)
		rc = abort_pending(o);
	if (level == SQLITE_LOCK_SHARED) {
		if (o->lock == SQLITE_LOCK_EXCLUSIVE &&
		    ofd(o->lfd, F_OFD_SETLK, F_RDLCK, OA_SHARED_FIRST,
			SHARED_SIZE) < 0)
			return SQLITE_IOERR_RDLOCK;
		if (ofd(o->lfd, F_OFD_SETLK, F_UNLCK, OA_PENDING, 2) < 0)
			return SQLITE_IOERR_UNLOCK;
		o->lock = SQLITE_LOCK_SHARED;
		return rc;
	}
	/* NONE: everything but the fence. */
	rc2 = ofd(o->lfd, F_OFD_SETLK, F_UNLCK, OA_LOCK_BASE,
		  2 + SHARED_SIZE) < 0 ? SQLITE_IOERR_UNLOCK : SQLITE_OK;
	o->lock = SQLITE_LOCK_NONE;
	return rc != SQLITE_OK ? rc : rc2;
}

static int x_check_reserved(sqlite3_file *file, int *out)
{
	ofile *o = (ofile *)file;
	if (o->lock >= SQLITE_LOCK_RESERVED) {
		*out = 1;
		return SQLITE_OK;
	}
	int t = ofd(o->lfd, F_OFD_GETLK, F_WRLCK, OA_RESERVED, 1);
	if (t < 0)
		return SQLITE_IOERR_CHECKRESERVEDLOCK;
	*out = t != F_UNLCK;
	return SQLITE_OK;
}

static int x_file_control(sqlite3_file *file, int op, void *arg)
{
	ofile *o = (ofile *)file;
	switch (op) {
#if OA_MUTANT != 44   /* planted: only xSync commits (Q2) */
	case SQLITE_FCNTL_SYNC:                  /* Q2 */
	case SQLITE_FCNTL_COMMIT_PHASETWO:       /* Q2 */
#endif
	case SQLITE_FCNTL_CKPT_DONE:             /* Q4 */
		return commit(o);
	case SQLITE_FCNTL_BEGIN_ATOMIC_WRITE:
		return SQLITE_OK;
	case SQLITE_FCNTL_COMMIT_ATOMIC_WRITE: {
		int rc = commit(o);
		return rc == SQLITE_OK ? rc : SQLITE_IOERR_COMMIT_ATOMIC;
	}
	case SQLITE_FCNTL_ROLLBACK_ATOMIC_WRITE:
		return abort_pending(o) == SQLITE_OK ?
		       SQLITE_OK : SQLITE_IOERR_ROLLBACK_ATOMIC;
	case SQLITE_FCNTL_LOCKSTATE:
		*(int *)arg = o->lock;
		return SQLITE_OK;
	case SQLITE_FCNTL_VFSNAME:
		*(char **)arg = sqlite3_mprintf("%s", OATOMIC_SQLITE_VFS);
		return SQLITE_OK;
	case SQLITE_FCNTL_HAS_MOVED: {
		struct stat a, b;
		*(int *)arg = fstat(o->lfd, &a) < 0 || stat(o->path, &b) < 0 ||
			      a.st_dev != b.st_dev || a.st_ino != b.st_ino;
		return SQLITE_OK;
	}
	default:
		/* SIZE_HINT, CHUNK_SIZE, MMAP_SIZE (no mapping: reads go
		 * through oa_pread), PERSIST_WAL ... : not ours. */
		return SQLITE_NOTFOUND;
	}
}

static int x_sector_size(sqlite3_file *file)
{
	return SECTOR;
}

/* Only what holds.  SQLite reads these flags off the database file but
 * applies some of them to its journal too, which is the default VFS's file,
 * not ours: SAFE_APPEND (the journal's record count written without a sync
 * before it) and SEQUENTIAL (the journal's sync skipped, trusting the disk
 * to write the journal before the database) hold for our file alone, and
 * in a rollback-journal mode would let a journal that is not on disk roll
 * back a committed transaction: not claimed.  What holds: a crash leaves
 * the last transaction or the one before, never part of a write (ATOMIC);
 * a write damages no byte it did not write (POWERSAFE_OVERWRITE: SQLite
 * then journals pages, not whole sectors); the batch file controls are
 * kept (BATCH_ATOMIC, for SQLite builds that use them). */
static int x_device_characteristics(sqlite3_file *file)
{
	return SQLITE_IOCAP_ATOMIC | SQLITE_IOCAP_POWERSAFE_OVERWRITE |
	       SQLITE_IOCAP_BATCH_ATOMIC;
}

static int x_shm_map(sqlite3_file *file, int pg, int pgsz, int extend,
		     void volatile **pp)
{
	ofile *o = (ofile *)file;
	int rc = shm_file(o, g_root);
	if (rc != SQLITE_OK)
		return rc;
	return o->shm->pMethods->xShmMap(o->shm, pg, pgsz, extend, pp);
}

static int x_shm_lock(sqlite3_file *file, int off, int n, int flags)
{
	ofile *o = (ofile *)file;
	int rc = shm_file(o, g_root);
	if (rc != SQLITE_OK)
		return rc;
	return o->shm->pMethods->xShmLock(o->shm, off, n, flags);
}

static void x_shm_barrier(sqlite3_file *file)
{
	ofile *o = (ofile *)file;
	if (o->shm)
		o->shm->pMethods->xShmBarrier(o->shm);
	else
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static int x_shm_unmap(sqlite3_file *file, int del)
{
	ofile *o = (ofile *)file;
	if (!o->shm)
		return SQLITE_OK;
	return o->shm->pMethods->xShmUnmap(o->shm, del);
}

static const sqlite3_io_methods io_methods = {
	.iVersion = 2,      /* shared memory; no xFetch: reads see pending */
	.xClose = x_close,
	.xRead = x_read,
	.xWrite = x_write,
	.xTruncate = x_truncate,
	.xSync = x_sync,
	.xFileSize = x_file_size,
	.xLock = x_lock,
	.xUnlock = x_unlock,
	.xCheckReservedLock = x_check_reserved,
	.xFileControl = x_file_control,
	.xSectorSize = x_sector_size,
	.xDeviceCharacteristics = x_device_characteristics,
	.xShmMap = x_shm_map,
	.xShmLock = x_shm_lock,
	.xShmBarrier = x_shm_barrier,
	.xShmUnmap = x_shm_unmap,
};

/* ---- the VFS ---- */

static int v_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *file,
		  int flags, int *out)
{
	sqlite3_vfs *root = root_vfs(vfs);
	ofile *o = (ofile *)file;
	struct stat a, b;
	int of, e;

	if (!(flags & SQLITE_OPEN_MAIN_DB) || !name ||
	    (flags & (SQLITE_OPEN_MEMORY | SQLITE_OPEN_DELETEONCLOSE)))
		return root->xOpen(root, name, file, flags, out);

	memset(o, 0, sizeof(*o));
	o->lfd = -1;
	o->fence = -1;
	o->path = name;
	o->rw = !!(flags & SQLITE_OPEN_READWRITE);
	of = o->rw ? O_RDWR : O_RDONLY;
	if (o->rw && (flags & SQLITE_OPEN_CREATE))
		of |= O_CREAT;
	if (o->rw && (flags & SQLITE_OPEN_EXCLUSIVE))
		of |= O_EXCL;
	o->f = oa_open(name, of, 0644);
	if (!o->f && o->rw &&
	    (errno == EACCES || errno == EROFS || errno == EPERM)) {
		/* As the unix VFS: a database that cannot be written is
		 * opened read-only, and SQLite is told. */
		o->rw = 0;
		o->f = oa_open(name, O_RDONLY, 0);
		if (o->f)
			flags = (flags & ~(SQLITE_OPEN_READWRITE |
					   SQLITE_OPEN_CREATE)) |
				SQLITE_OPEN_READONLY;
	}
	if (!o->f) {
		e = errno;
		report(o, SQLITE_CANTOPEN, "open of", e);
		return e == EUCLEAN ? SQLITE_IOERR_CORRUPTFS :
		       e == EISDIR ? SQLITE_CANTOPEN_ISDIR : SQLITE_CANTOPEN;
	}
	o->lfd = open(name, (o->rw ? O_RDWR : O_RDONLY) | O_CLOEXEC);
	if (o->lfd >= 0 && o->lfd <= 2) {
		/* never a standard descriptor (closed at the start: cron, a
		 * daemon, `2>&-`): the program's output would land in the
		 * database */
		int nfd = fcntl(o->lfd, F_DUPFD_CLOEXEC, 3);
		close(o->lfd);
		o->lfd = nfd;
	}
	if (o->lfd < 0 || fstat(o->lfd, &a) < 0 || oa_fstat(o->f, &b) < 0 ||
	    a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
		/* Renamed over between the two opens. */
		e = o->lfd < 0 ? errno : ESTALE;
		report(o, SQLITE_CANTOPEN, "open of", e);
		if (o->lfd >= 0)
			close(o->lfd);
		oa_close(o->f);
		o->f = NULL;
		o->lfd = -1;
		return SQLITE_CANTOPEN;
	}
	o->oflags = flags;
	o->base.pMethods = &io_methods;
	/* Q6 from the open on, where it can be had now (a unix-VFS reader in
	 * a transaction holds the range: then at the first lock). */
	fence(o);
	if (out)
		*out = flags;
	return SQLITE_OK;
}

static int v_delete(sqlite3_vfs *v, const char *n, int sync)
{
	return root_vfs(v)->xDelete(root_vfs(v), n, sync);
}
static int v_access(sqlite3_vfs *v, const char *n, int flags, int *out)
{
	return root_vfs(v)->xAccess(root_vfs(v), n, flags, out);
}
static int v_full(sqlite3_vfs *v, const char *n, int len, char *out)
{
	return root_vfs(v)->xFullPathname(root_vfs(v), n, len, out);
}
static void *v_dlopen(sqlite3_vfs *v, const char *n)
{
	return root_vfs(v)->xDlOpen(root_vfs(v), n);
}
static void v_dlerror(sqlite3_vfs *v, int n, char *msg)
{
	root_vfs(v)->xDlError(root_vfs(v), n, msg);
}
static void (*v_dlsym(sqlite3_vfs *v, void *h, const char *s))(void)
{
	return root_vfs(v)->xDlSym(root_vfs(v), h, s);
}
static void v_dlclose(sqlite3_vfs *v, void *h)
{
	root_vfs(v)->xDlClose(root_vfs(v), h);
}
static int v_random(sqlite3_vfs *v, int n, char *out)
{
	return root_vfs(v)->xRandomness(root_vfs(v), n, out);
}
static int v_sleep(sqlite3_vfs *v, int us)
{
	return root_vfs(v)->xSleep(root_vfs(v), us);
}
static int v_time(sqlite3_vfs *v, double *t)
{
	return root_vfs(v)->xCurrentTime(root_vfs(v), t);
}
static int v_lasterr(sqlite3_vfs *v, int n, char *msg)
{
	return root_vfs(v)->xGetLastError ?
	       root_vfs(v)->xGetLastError(root_vfs(v), n, msg) : 0;
}
static int v_time64(sqlite3_vfs *v, sqlite3_int64 *t)
{
	return root_vfs(v)->xCurrentTimeInt64(root_vfs(v), t);
}

static sqlite3_vfs oa_vfs = {
	.iVersion = 2,
	.zName = OATOMIC_SQLITE_VFS,
	.xOpen = v_open,
	.xDelete = v_delete,
	.xAccess = v_access,
	.xFullPathname = v_full,
	.xDlOpen = v_dlopen,
	.xDlError = v_dlerror,
	.xDlSym = v_dlsym,
	.xDlClose = v_dlclose,
	.xRandomness = v_random,
	.xSleep = v_sleep,
	.xCurrentTime = v_time,
	.xGetLastError = v_lasterr,
	.xCurrentTimeInt64 = v_time64,
};

OA_REGISTER int oatomic_sqlite_register(int make_default)
{
	sqlite3_vfs *root;

	if (oa_vfs.pAppData)
		return sqlite3_vfs_register(&oa_vfs, make_default);
	root = sqlite3_vfs_find(NULL);
	if (!root)
		return SQLITE_ERROR;
	if (root == &oa_vfs)
		return SQLITE_OK;
	if (root->iVersion < 2 || !root->xCurrentTimeInt64)
		return SQLITE_ERROR;
	g_root = root;
	oa_vfs.pAppData = root;
	oa_vfs.mxPathname = root->mxPathname;
	oa_vfs.szOsFile = root->szOsFile > (int)sizeof(ofile) ?
			  root->szOsFile : (int)sizeof(ofile);
	return sqlite3_vfs_register(&oa_vfs, make_default);
}

#ifdef OA_SQLITE_LOADABLE
OA_EXPORT int sqlite3_oatomicsqlite_init(sqlite3 *db, char **err,
					 const sqlite3_api_routines *api);
OA_EXPORT int sqlite3_oatomicsqlite_default_init(
	sqlite3 *db, char **err, const sqlite3_api_routines *api);

static int load_init(char **err, int make_default)
{
	int rc = oatomic_sqlite_register(make_default);
	if (rc != SQLITE_OK) {
		if (err)
			*err = sqlite3_mprintf("oatomic: cannot register the "
					       "VFS over the default one");
		return rc;
	}
	return SQLITE_OK_LOAD_PERMANENTLY;
}

/* `.load liboatomic_sqlite` (SQLite derives this name from the file's):
 * registers the VFS for the life of the process. */
OA_EXPORT int sqlite3_oatomicsqlite_init(sqlite3 *db, char **err,
					 const sqlite3_api_routines *api)
{
	SQLITE_EXTENSION_INIT2(api);
	return load_init(err, 0);
}

/* The same, and the default VFS from then on (connections opened later). */
OA_EXPORT int sqlite3_oatomicsqlite_default_init(
	sqlite3 *db, char **err, const sqlite3_api_routines *api)
{
	SQLITE_EXTENSION_INIT2(api);
	return load_init(err, 1);
}
#endif
