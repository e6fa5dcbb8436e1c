/*
 * sim.c - a power-loss simulator beneath oatomic's I/O seam.
 *
 * THE MODEL (what the simulator keeps, and what a power cut may leave)
 *
 * The simulated file system is a tree of directories and regular files
 * (inode numbers from 2; the root is 1).  Every regular file has two images:
 *   - the page cache ("volatile"): what every read, fstat and mmap-less
 *     reader sees now;
 *   - the durable image: what the disk holds;
 * and a log of the operations that changed the page cache since they were
 * last flushed: writes (with their bytes), truncates, and untorn writes
 * (RWF_ATOMIC, a clone range, one side of a range exchange).  Images are
 * arrays of 4 KiB copy-on-write pages (NULL: zeros), so snapshots are cheap.
 *
 * Every directory has its durable entries and its current entries; the
 * directory operations since its last flush (create, link, unlink, rename,
 * O_TMPFILE link) are in a global log, each naming the directories it
 * touches.
 *
 * Flushes:
 *   - fsync / fdatasync of a file (also a write with RWF_DSYNC, an exchange
 *     with its DSYNC flag): its logged operations are applied to its durable
 *     image, in order; an exchange is applied on both of its files.  It does
 *     NOT make its directory entry durable.
 *   - fsync of a directory: the logged operations touching it become
 *     durable.  Files created since a directory's last flush may vanish.
 *   - O_DIRECT opens are treated like buffered ones: nothing is durable
 *     before a flush (or RWF_DSYNC).
 *   - Metadata (mode, owner) is durable at once (the library sets it before
 *     the flush that matters).
 *
 * A power cut (sim_crash) builds a new file system from a snapshot: each
 * durable image plus ANY SUBSET of the logged operations, applied in log
 * order (the page cache writes back pages independently, in any order, but
 * a page written back holds all earlier writes to it, so order within a
 * page is kept).  Each logged operation is split into units decided
 * independently (sim_units):
 *   - a write: one unit per sector it touches (512 B or 4 KiB, configured):
 *     lost, persisted, or (non-powersafe mode) the whole sector garbage;
 *     and, when it grew the file, a separate size unit, so the size may
 *     persist before the data (the gap reads zeros, or garbage);
 *   - a truncate: lost, done, or (shrinking a file of more than 4 MiB)
 *     half done: the size cut only part of the way.  ext4 and XFS log the
 *     new size in the first transaction of a shrink (with an orphan entry
 *     or an intent that finishes freeing the blocks after a crash), so
 *     the size is all or nothing whatever the length; Btrfs may commit a
 *     shrink in steps, each freeing up to 32 MiB.  The library relies on
 *     a shrink of at most 4 MiB being whole (docs/FORMAT.md, I14) and
 *     not on more;
 *   - a write after a lost shrink: lost wherever it lies beyond the
 *     shrink's new size (rounded up to the 4 KiB block), and so is a
 *     growth beyond it.  A shrink frees the blocks beyond, and the file
 *     systems reuse a freed block only once the freeing is durable (ext4's
 *     mballoc and XFS's busy extents hold them until the transaction
 *     commits; Btrfs pins them): writes there went to blocks allocated
 *     afterwards, which the file maps only in a later transaction, so a
 *     crash that loses the shrink finds the old blocks untouched;
 *   - an untorn write, clone or exchange: one unit, all or nothing (the two
 *     sides of an exchange are one unit);
 *   - a directory operation: one unit; a rename is atomic, or in strict
 *     mode (as ALICE) two halves: the new name may appear with the old one
 *     still there, or the old target may be gone before the new name is.
 * After the cut nothing is open, no lock is held, and an inode without a
 * durable name is gone.
 *
 * Flush errors are modelled as Linux behaves since 4.13 (fsyncgate): a
 * failed fsync has lost its writes (the simulator takes the adversarial
 * choice: none reached the disk), the pages stay in the cache with the new
 * bytes but clean, and the next fsync returns 0 without writing them.
 *
 * Locks are OFD locks (per open file description: every openat makes one).
 * A blocking lock that would wait fails with EDEADLK: in one process nobody
 * could ever release it.
 *
 * An exchange moves the two ranges (one unit, both sides); with
 * FILE1_WRITTEN only the blocks file1 has written (a page a write touched,
 * even with zeros; a hole or a page a truncate dropped is not written)
 * move and file2 keeps its bytes over file1's holes; with TO_EOF each file
 * from its offset to its end, whatever the two lengths, and each takes the
 * other's size (from offset 0: a whole file's contents and size).
 *
 * Simplifications: RWF_DSYNC and an exchange's DSYNC flag flush the whole
 * file's log (as fdatasync) rather than only that range; timestamps are not
 * kept; permissions are not checked; fallocate reserves nothing (ENOSPC
 * comes only from fault injection).  A clone copies the bytes: no block is
 * shared between files, so what a reflink file system's log does with
 * sharing (docs/FORMAT.md, I12) is for tests/powercut_shared.sh.
 *
 * SPDX-License-Identifier: MIT
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "oatomic-private.h"
#include "sim.h"

#define PG 4096u
#define SIM_FD_BASE 1000
#define SIM_MAX_FD 512
#define SIM_MAXSIZE (1ull << 40)
#define SIM_CUT_ATOMIC (4ull << 20)   /* shrinks from up to this: whole */

/* XFS_IOC_EXCHANGE_RANGE: the library's definition (sys.h) of the
 * kernel's interface. */

/* ---- pages and images ---- */

struct page {
	int ref;
	unsigned char b[PG];
};

struct img {
	uint64_t size;
	size_t np;           /* pages allocated in pg[] */
	struct page **pg;
};

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p) {
		fprintf(stderr, "sim: out of memory\n");
		abort();
	}
	return p;
}

static void *xcalloc(size_t n, size_t m)
{
	void *p = calloc(n ? n : 1, m ? m : 1);
	if (!p) {
		fprintf(stderr, "sim: out of memory\n");
		abort();
	}
	return p;
}

static void page_put(struct page *p)
{
	if (p && --p->ref == 0)
		free(p);
}

static void img_free(struct img *m)
{
	for (size_t i = 0; i < m->np; i++)
		page_put(m->pg[i]);
	free(m->pg);
	memset(m, 0, sizeof(*m));
}

static void img_clone(struct img *dst, const struct img *src)
{
	dst->size = src->size;
	dst->np = src->np;
	dst->pg = xmalloc(sizeof(*dst->pg) * (src->np ? src->np : 1));
	for (size_t i = 0; i < src->np; i++) {
		dst->pg[i] = src->pg[i];
		if (dst->pg[i])
			dst->pg[i]->ref++;
	}
}

static void img_reserve(struct img *m, size_t np)
{
	if (np <= m->np)
		return;
	size_t n = m->np ? m->np : 4;
	while (n < np)
		n *= 2;
	m->pg = realloc(m->pg, sizeof(*m->pg) * n);
	if (!m->pg)
		abort();
	memset(m->pg + m->np, 0, sizeof(*m->pg) * (n - m->np));
	m->np = n;
}

/* A page of M that may be written (copied if shared, made if zero). */
static struct page *img_wpage(struct img *m, size_t i)
{
	img_reserve(m, i + 1);
	struct page *p = m->pg[i];
	if (!p) {
		p = xcalloc(1, sizeof(*p));
		p->ref = 1;
		m->pg[i] = p;
	} else if (p->ref > 1) {
		struct page *q = xmalloc(sizeof(*q));
		memcpy(q->b, p->b, PG);
		q->ref = 1;
		p->ref--;
		m->pg[i] = q;
	}
	return m->pg[i];
}

static bool all_zero(const unsigned char *b, size_t n)
{
	static const unsigned char z[256];
	while (n >= sizeof(z)) {
		if (memcmp(b, z, sizeof(z)))
			return false;
		b += sizeof(z);
		n -= sizeof(z);
	}
	return memcmp(b, z, n) == 0;
}

/* Put bytes (DATA NULL: zeros) at OFF; does not change the size. */
static void img_put(struct img *m, uint64_t off, const unsigned char *data,
		    uint64_t len)
{
	while (len > 0) {
		size_t i = (size_t)(off / PG), o = (size_t)(off % PG);
		size_t n = PG - o < len ? PG - o : (size_t)len;
		bool z = !data || all_zero(data, n);
		if (z && (i >= m->np || !m->pg[i])) {
			/* zeros over zeros */
		} else {
			struct page *p = img_wpage(m, i);
			if (z)
				memset(p->b + o, 0, n);
			else
				memcpy(p->b + o, data, n);
		}
		off += n;
		len -= n;
		if (data)
			data += n;
	}
}

static void img_get(const struct img *m, uint64_t off, unsigned char *out,
		    uint64_t len)
{
	while (len > 0) {
		size_t i = (size_t)(off / PG), o = (size_t)(off % PG);
		size_t n = PG - o < len ? PG - o : (size_t)len;
		if (i < m->np && m->pg[i])
			memcpy(out, m->pg[i]->b + o, n);
		else
			memset(out, 0, n);
		off += n;
		out += n;
		len -= n;
	}
}

/* Set the size; bytes beyond a shrunk end are zeroed (they read as zeros
 * if the file grows again). */
static void img_trunc(struct img *m, uint64_t size)
{
	if (size < m->size) {
		uint64_t end = m->size;
		size_t first = (size_t)((size + PG - 1) / PG);
		if (size % PG)
			img_put(m, size, NULL, PG - size % PG);
		for (size_t i = first; i < m->np && (uint64_t)i * PG < end; i++) {
			page_put(m->pg[i]);
			m->pg[i] = NULL;
		}
	}
	m->size = size;
}

static uint64_t hmix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	h *= 0xff51afd7ed558ccdull;
	return h ^ (h >> 33);
}

static uint64_t img_hash(const struct img *m)
{
	uint64_t h = hmix(0x1234, m->size);
	size_t lim = (size_t)((m->size + PG - 1) / PG);
	for (size_t i = 0; i < lim && i < m->np; i++) {
		const struct page *p = m->pg[i];
		if (!p)
			continue;
		const unsigned char *b = p->b;
		if (all_zero(b, PG))
			continue;
		uint64_t x = i;
		for (size_t k = 0; k < PG; k += 8) {
			uint64_t w;
			memcpy(&w, b + k, 8);
			x = (x ^ w) * 0x100000001b3ull;
			x ^= x >> 29;
		}
		h = hmix(h, x);
	}
	return h;
}

/* ---- logged operations ---- */

#define OP_WRITE 1
#define OP_TRUNC 2

struct op {
	int ref;
	int kind;
	bool untorn;          /* one unit: RWF_ATOMIC, clone, exchange side */
	uint64_t off, len;    /* write */
	uint64_t size;        /* truncate: new size; write: size before it */
	unsigned char *data;  /* NULL: zeros */
	uint64_t group;       /* exchange: both sides share it (0: none) */
	uint64_t ino2;        /* exchange: the other file */
	uint64_t *runs;       /* exchange of written ranges: NRUNS pairs
			       * { offset, length }; only they change (DATA
			       * spans [off, off + len)) */
	size_t nruns;
	bool setsize;         /* exchange to EOF: the size becomes SIZE2 */
	uint64_t size2;
};

static struct op *op_new(int kind)
{
	struct op *o = xcalloc(1, sizeof(*o));
	o->ref = 1;
	o->kind = kind;
	return o;
}

static void op_put(struct op *o)
{
	if (o && --o->ref == 0) {
		free(o->data);
		free(o->runs);
		free(o);
	}
}

static void op_apply(struct img *m, const struct op *o)
{
	if (o->kind == OP_TRUNC) {
		img_trunc(m, o->size);
		return;
	}
	if (o->nruns) {
		for (size_t k = 0; k < o->nruns; k++) {
			uint64_t a = o->runs[2 * k], n = o->runs[2 * k + 1];
			img_put(m, a, o->data ? o->data + (a - o->off) : NULL, n);
			if (a + n > m->size)
				m->size = a + n;
		}
		return;
	}
	img_put(m, o->off, o->data, o->len);
	if (o->off + o->len > m->size)
		m->size = o->off + o->len;
	if (o->setsize)
		img_trunc(m, o->size2);
}

/* Written bytes of a page cache image are blocks of the file, even zeros:
 * a page is made for every page a write touches (an exchange of written
 * ranges, FILE1_WRITTEN, moves those and leaves holes alone). */
static void img_mark(struct img *m, uint64_t off, uint64_t len)
{
	for (uint64_t p = off / PG; len && p <= (off + len - 1) / PG; p++)
		if (p >= m->np || !m->pg[p])
			img_wpage(m, (size_t)p);
}

/* ---- inodes, directories ---- */

struct dent {
	char *name;
	uint64_t ino;
};

struct dents {
	struct dent *e;
	size_t n, cap;
};

struct inode {
	uint64_t ino;
	bool dir;
	bool linkable;        /* O_TMPFILE without O_EXCL */
	mode_t mode;
	uid_t uid;
	gid_t gid;
	uint32_t gen;
	/* file */
	struct img vol, dur;
	struct op **log;
	size_t nlog, logcap;
	/* directory */
	struct dents cur, durd;
	uint64_t parent;
};

#define DOP_LINK   1    /* name -> ino appears (create, link) */
#define DOP_UNLINK 2
#define DOP_RENAME 3

struct dop {
	int kind;
	uint64_t dir, dir2;   /* LINK/UNLINK: dir; RENAME: dir (from), dir2 (to) */
	char *name, *name2;
	uint64_t ino;
};

struct lockrec {
	struct ofd *ofd;
	uint64_t ino;
	uint64_t start, end;  /* [start, end) */
	short type;
};

struct ofd {
	int ref;
	uint64_t ino;
	int flags;
	uint64_t pos;         /* getdents position */
	char *path;           /* absolute, for /proc/self/fd readlink */
};

struct sim_fs {
	struct inode **in;    /* by ino */
	size_t nin, incap;
	struct dop *dops;
	size_t ndops, dcap;
	uint64_t next_group;
	struct ofd *fd[SIM_MAX_FD];
	struct lockrec *locks;
	size_t nlocks, lcap;
};

static struct sim_fs *cur;
long sim_ncalls;
void (*sim_hook)(void *arg, const char *call, bool mutating);
void *sim_hook_arg;
static long fault_at = -1;
static int fault_kind, fault_err;
bool sim_fault_fired;
const char *sim_fault_call;
const char *sim_fault_skip;
bool sim_fault_skip_dirsync;

static struct inode *ino_get(struct sim_fs *fs, uint64_t ino)
{
	return ino < fs->nin ? fs->in[ino] : NULL;
}

static struct inode *ino_new(struct sim_fs *fs, bool dir, mode_t mode)
{
	uint64_t n = fs->nin ? fs->nin : 1;
	if (n + 1 > fs->incap) {
		fs->incap = fs->incap ? fs->incap * 2 : 16;
		fs->in = realloc(fs->in, sizeof(*fs->in) * fs->incap);
		if (!fs->in)
			abort();
	}
	if (fs->nin == 0) {
		fs->in[0] = NULL;
		fs->nin = 1;
	}
	struct inode *i = xcalloc(1, sizeof(*i));
	i->ino = fs->nin;
	i->dir = dir;
	i->mode = mode & 07777;
	i->uid = geteuid();
	i->gid = getegid();
	i->gen = (uint32_t)(i->ino * 2654435761u);
	fs->in[fs->nin++] = i;
	return i;
}

static void dents_add(struct dents *d, const char *name, uint64_t ino)
{
	if (d->n == d->cap) {
		d->cap = d->cap ? d->cap * 2 : 8;
		d->e = realloc(d->e, sizeof(*d->e) * d->cap);
		if (!d->e)
			abort();
	}
	d->e[d->n].name = strdup(name);
	d->e[d->n].ino = ino;
	if (!d->e[d->n].name)
		abort();
	d->n++;
}

static ssize_t dents_find(const struct dents *d, const char *name)
{
	for (size_t i = 0; i < d->n; i++)
		if (!strcmp(d->e[i].name, name))
			return (ssize_t)i;
	return -1;
}

static void dents_del(struct dents *d, size_t i)
{
	free(d->e[i].name);
	memmove(d->e + i, d->e + i + 1, sizeof(*d->e) * (d->n - i - 1));
	d->n--;
}

static void dents_set(struct dents *d, const char *name, uint64_t ino)
{
	ssize_t k = dents_find(d, name);
	if (k >= 0)
		d->e[k].ino = ino;
	else
		dents_add(d, name, ino);
}

static void dents_free(struct dents *d)
{
	for (size_t i = 0; i < d->n; i++)
		free(d->e[i].name);
	free(d->e);
	memset(d, 0, sizeof(*d));
}

static void dents_copy(struct dents *dst, const struct dents *src)
{
	memset(dst, 0, sizeof(*dst));
	for (size_t i = 0; i < src->n; i++)
		dents_add(dst, src->e[i].name, src->e[i].ino);
}

static void inode_free(struct inode *i)
{
	if (!i)
		return;
	img_free(&i->vol);
	img_free(&i->dur);
	for (size_t k = 0; k < i->nlog; k++)
		op_put(i->log[k]);
	free(i->log);
	dents_free(&i->cur);
	dents_free(&i->durd);
	free(i);
}

static void log_add(struct inode *i, struct op *o)
{
	if (i->nlog == i->logcap) {
		i->logcap = i->logcap ? i->logcap * 2 : 8;
		i->log = realloc(i->log, sizeof(*i->log) * i->logcap);
		if (!i->log)
			abort();
	}
	i->log[i->nlog++] = o;
}

static void dop_add(struct sim_fs *fs, int kind, uint64_t dir, const char *name,
		    uint64_t dir2, const char *name2, uint64_t ino)
{
	if (fs->ndops == fs->dcap) {
		fs->dcap = fs->dcap ? fs->dcap * 2 : 8;
		fs->dops = realloc(fs->dops, sizeof(*fs->dops) * fs->dcap);
		if (!fs->dops)
			abort();
	}
	struct dop *d = &fs->dops[fs->ndops++];
	d->kind = kind;
	d->dir = dir;
	d->dir2 = dir2;
	d->name = strdup(name);
	d->name2 = name2 ? strdup(name2) : NULL;
	d->ino = ino;
}

static void dop_free(struct dop *d)
{
	free(d->name);
	free(d->name2);
}

/* Apply directory operation D (STATE: 1 whole, 2 rename's link half only,
 * 3 rename's unlink-of-target half only) to the durable entries. */
static void dop_apply_dur(struct sim_fs *fs, const struct dop *d, int state)
{
	struct inode *a = ino_get(fs, d->dir), *b;
	if (!a)
		return;
	switch (d->kind) {
	case DOP_LINK:
		dents_set(&a->durd, d->name, d->ino);
		break;
	case DOP_UNLINK: {
		ssize_t k = dents_find(&a->durd, d->name);
		if (k >= 0)
			dents_del(&a->durd, (size_t)k);
		break;
	}
	case DOP_RENAME: {
		b = ino_get(fs, d->dir2);
		if (!b)
			return;
		ssize_t k = dents_find(&a->durd, d->name);
		if (state == 3) {
			ssize_t t = dents_find(&b->durd, d->name2);
			if (t >= 0)
				dents_del(&b->durd, (size_t)t);
			break;
		}
		if (k < 0)
			break;
		uint64_t ino = a->durd.e[k].ino;
		if (state == 1)
			dents_del(&a->durd, (size_t)k);
		dents_set(&b->durd, d->name2, ino);
		break;
	}
	}
}

struct sim_fs *sim_fs_new(void)
{
	struct sim_fs *fs = xcalloc(1, sizeof(*fs));
	struct inode *root = ino_new(fs, true, 0755);
	root->parent = root->ino;
	return fs;
}

void sim_fs_free(struct sim_fs *fs)
{
	if (!fs)
		return;
	for (int i = 0; i < SIM_MAX_FD; i++)
		if (fs->fd[i] && --fs->fd[i]->ref == 0) {
			free(fs->fd[i]->path);
			free(fs->fd[i]);
		}
	for (size_t i = 0; i < fs->nin; i++)
		inode_free(fs->in[i]);
	free(fs->in);
	for (size_t i = 0; i < fs->ndops; i++)
		dop_free(&fs->dops[i]);
	free(fs->dops);
	free(fs->locks);
	if (cur == fs)
		cur = NULL;
	free(fs);
}

void sim_use(struct sim_fs *fs)
{
	cur = fs;
}

struct sim_fs *sim_current(void)
{
	return cur;
}

/* ---- flushes ---- */

static void flush_file(struct sim_fs *fs, struct inode *i)
{
	for (size_t k = 0; k < i->nlog; k++) {
		struct op *o = i->log[k];
		op_apply(&i->dur, o);
		if (o->group) {
			/* The other side of an exchange is durable too. */
			struct inode *j = ino_get(fs, o->ino2);
			for (size_t m = 0; j && m < j->nlog; m++)
				if (j->log[m]->group == o->group) {
					op_apply(&j->dur, j->log[m]);
					op_put(j->log[m]);
					memmove(j->log + m, j->log + m + 1,
						sizeof(*j->log) * (j->nlog - m - 1));
					j->nlog--;
					break;
				}
		}
		op_put(o);
	}
	i->nlog = 0;
}

static void drop_log(struct inode *i)
{
	for (size_t k = 0; k < i->nlog; k++)
		op_put(i->log[k]);
	i->nlog = 0;
}

static void flush_dir(struct sim_fs *fs, uint64_t dir)
{
	size_t w = 0;
	for (size_t k = 0; k < fs->ndops; k++) {
		struct dop *d = &fs->dops[k];
		if (d->dir == dir || d->dir2 == dir) {
			dop_apply_dur(fs, d, 1);
			dop_free(d);
		} else {
			fs->dops[w++] = *d;
		}
	}
	fs->ndops = w;
}

/* ---- descriptors and paths ---- */

static struct ofd *fd_get(int fd)
{
	if (!cur || fd < SIM_FD_BASE || fd >= SIM_FD_BASE + SIM_MAX_FD)
		return NULL;
	return cur->fd[fd - SIM_FD_BASE];
}

static int fd_new(uint64_t ino, int flags, const char *path)
{
	for (int i = 0; i < SIM_MAX_FD; i++)
		if (!cur->fd[i]) {
			struct ofd *o = xcalloc(1, sizeof(*o));
			o->ref = 1;
			o->ino = ino;
			o->flags = flags;
			o->path = strdup(path);
			cur->fd[i] = o;
			return SIM_FD_BASE + i;
		}
	errno = EMFILE;
	return -1;
}

int sim_open_fds(void)
{
	int n = 0;
	for (int i = 0; cur && i < SIM_MAX_FD; i++)
		n += cur->fd[i] != NULL;
	return n;
}

static struct inode *fd_inode(int fd, struct ofd **op)
{
	struct ofd *o = fd_get(fd);
	if (!o) {
		errno = EBADF;
		return NULL;
	}
	if (op)
		*op = o;
	return ino_get(cur, o->ino);
}

/* Resolve PATH relative to DIRFD: the directory holding the last component
 * (*DIR), that component (NAME, "" for the directory itself) and the path
 * of the directory (for readlink).  0 or -1 (ENOENT, ENOTDIR, EBADF). */
static int resolve(int dirfd, const char *path, struct inode **dir,
		   char *name, char *dpath)
{
	struct inode *d;
	char buf[PATH_MAX], dp[PATH_MAX];
	if (!cur) {
		errno = EIO;
		return -1;
	}
	if (strlen(path) >= sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (path[0] == '/' || dirfd == AT_FDCWD) {
		d = ino_get(cur, 1);
		strcpy(dp, "");
	} else {
		struct ofd *o = fd_get(dirfd);
		if (!o) {
			errno = EBADF;
			return -1;
		}
		d = ino_get(cur, o->ino);
		if (!d || !d->dir) {
			errno = ENOTDIR;
			return -1;
		}
		snprintf(dp, sizeof(dp), "%s", strcmp(o->path, "/") ? o->path : "");
	}
	strcpy(buf, path);
	char *save = NULL, *tok = strtok_r(buf, "/", &save);
	name[0] = 0;
	while (tok) {
		char *next = strtok_r(NULL, "/", &save);
		if (!next) {
			if (!strcmp(tok, ".")) {
				name[0] = 0;
			} else if (!strcmp(tok, "..")) {
				d = ino_get(cur, d->parent);
				char *s = strrchr(dp, '/');
				if (s)
					*s = 0;
				name[0] = 0;
			} else {
				snprintf(name, NAME_MAX + 1, "%s", tok);
			}
			break;
		}
		if (!strcmp(tok, ".")) {
		} else if (!strcmp(tok, "..")) {
			d = ino_get(cur, d->parent);
			char *s = strrchr(dp, '/');
			if (s)
				*s = 0;
		} else {
			ssize_t k = dents_find(&d->cur, tok);
			if (k < 0) {
				errno = ENOENT;
				return -1;
			}
			d = ino_get(cur, d->cur.e[k].ino);
			if (!d || !d->dir) {
				errno = ENOTDIR;
				return -1;
			}
			size_t l = strlen(dp);
			snprintf(dp + l, sizeof(dp) - l, "/%s", tok);
		}
		tok = next;
	}
	*dir = d;
	if (dpath)
		snprintf(dpath, PATH_MAX, "%s", dp[0] ? dp : "/");
	return 0;
}

/* "/proc/self/fd/N" of a simulated descriptor: its open file description. */
static struct ofd *proc_fd(const char *path)
{
	const char *p = "/proc/self/fd/";
	if (strncmp(path, p, strlen(p)))
		return NULL;
	return fd_get(atoi(path + strlen(p)));
}

#define FULLMAX (PATH_MAX + NAME_MAX + 32)
static void join(char *out, const char *dpath, const char *name)
{
	if (!name[0])
		snprintf(out, FULLMAX, "%s", dpath);
	else
		snprintf(out, FULLMAX, "%s/%s", strcmp(dpath, "/") ? dpath : "",
			 name);
}

/* ---- fault injection and the hook ---- */

void sim_set_fault(long at, int kind, int err)
{
	fault_at = at;
	fault_kind = kind;
	fault_err = err;
	sim_fault_fired = false;
	sim_fault_call = NULL;
}

/* Start of seam call CALL: count it, tell the hook, and return the fault to
 * inject (0 none). */
static bool paused;

void sim_pause(bool on)
{
	paused = on;
}

static int enter(const char *call, bool mutating)
{
	if (paused)
		return 0;
	long n = sim_ncalls++;
	if (sim_hook)
		sim_hook(sim_hook_arg, call, mutating);
	if (n == fault_at) {
		/* a short write only for writes, a failing flush only for
		 * flushes (elsewhere the fault does not fire) */
		bool w = !strncmp(call, "pwrite", 6);
		bool fl = !strcmp(call, "fsync") || !strcmp(call, "fdatasync") ||
			  !strcmp(call, "pwritev2");
		if ((fault_kind == SIM_F_SHORT && !w) ||
		    (fault_kind == SIM_F_FLUSH && !fl) ||
		    (sim_fault_skip && !strcmp(call, sim_fault_skip)))
			return 0;
		sim_fault_fired = true;
		sim_fault_call = call;
		return fault_kind;
	}
	return 0;
}

/* Any fault makes a call that is neither a write nor a flush fail. */
#define FAIL_IF(f) do { if (f) { errno = fault_err; return -1; } } while (0)

/* ---- the seam ---- */

static int s_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	int f = enter("openat", (flags & O_CREAT) || (flags & O_TRUNC) ||
			  (flags & O_TMPFILE) == O_TMPFILE);
	struct inode *d, *i;
	char name[NAME_MAX + 1], dpath[PATH_MAX], full[FULLMAX];
	FAIL_IF(f);
	struct ofd *po = proc_fd(path);
	if (po) {
		i = ino_get(cur, po->ino);
		if (!i) {
			errno = ENOENT;
			return -1;
		}
		return fd_new(i->ino, flags, po->path);
	}
	if (resolve(dirfd, path, &d, name, dpath) < 0)
		return -1;
	if ((flags & O_TMPFILE) == O_TMPFILE) {
		if (name[0]) {
			ssize_t k = dents_find(&d->cur, name);
			if (k < 0) {
				errno = ENOENT;
				return -1;
			}
			d = ino_get(cur, d->cur.e[k].ino);
			if (!d->dir) {
				errno = ENOTDIR;
				return -1;
			}
		}
		i = ino_new(cur, false, mode);
		i->linkable = !(flags & O_EXCL);
		snprintf(full, sizeof(full), "%s/#%llu (deleted)",
			 strcmp(dpath, "/") ? dpath : "", (unsigned long long)i->ino);
		return fd_new(i->ino, flags, full);
	}
	if (!name[0]) {
		i = d;
	} else {
		ssize_t k = dents_find(&d->cur, name);
		if (k < 0) {
			if (!(flags & O_CREAT)) {
				errno = ENOENT;
				return -1;
			}
			i = ino_new(cur, false, mode);
			dents_add(&d->cur, name, i->ino);
			dop_add(cur, DOP_LINK, d->ino, name, 0, NULL, i->ino);
		} else {
			if ((flags & O_CREAT) && (flags & O_EXCL)) {
				errno = EEXIST;
				return -1;
			}
			i = ino_get(cur, d->cur.e[k].ino);
		}
	}
	join(full, dpath, name);
	if (i->dir) {
		if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC)) {
			errno = EISDIR;
			return -1;
		}
	} else {
		if (flags & O_DIRECTORY) {
			errno = ENOTDIR;
			return -1;
		}
		if ((flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY &&
		    i->vol.size) {
			struct op *o = op_new(OP_TRUNC);
			o->size = 0;
			img_trunc(&i->vol, 0);
			log_add(i, o);
		}
	}
	return fd_new(i->ino, flags, full);
}

static void unlock_ofd(struct ofd *o)
{
	size_t w = 0;
	for (size_t k = 0; k < cur->nlocks; k++)
		if (cur->locks[k].ofd != o)
			cur->locks[w++] = cur->locks[k];
	cur->nlocks = w;
}

static int s_close(int fd)
{
	/* A failing close (EIO of a deferred write error on NFS, say) still
	 * releases the descriptor, as on Linux. */
	int f = enter("close", false);
	struct ofd *o = fd_get(fd);
	if (!o) {
		errno = EBADF;
		return -1;
	}
	cur->fd[fd - SIM_FD_BASE] = NULL;
	if (--o->ref == 0) {
		unlock_ofd(o);
		free(o->path);
		free(o);
	}
	if (f) {
		errno = fault_err;
		return -1;
	}
	return 0;
}

static ssize_t s_pread(int fd, void *buf, size_t n, off_t off)
{
	int f = enter("pread", false);
	struct ofd *o;
	struct inode *i = fd_inode(fd, &o);
	if (f && f != SIM_F_SHORT) {
		errno = fault_err;
		return -1;
	}
	if (!i)
		return -1;
	if (i->dir) {
		errno = EISDIR;
		return -1;
	}
	if ((o->flags & O_ACCMODE) == O_WRONLY || (o->flags & O_PATH)) {
		errno = EBADF;
		return -1;
	}
	if (off < 0) {
		errno = EINVAL;
		return -1;
	}
	if ((uint64_t)off >= i->vol.size)
		return 0;
	if (n > i->vol.size - (uint64_t)off)
		n = (size_t)(i->vol.size - (uint64_t)off);
	if (f == SIM_F_SHORT && n > 1)
		n /= 2;
	img_get(&i->vol, (uint64_t)off, buf, n);
	return (ssize_t)n;
}

static int do_fdatasync(struct inode *i, int f)
{
	if (f == SIM_F_ERR) {
		errno = fault_err;   /* nothing written; still dirty */
		return -1;
	}
	if (f) {
		drop_log(i);     /* lost; pages clean */
		errno = fault_err;
		return -1;
	}
	if (i->dir)
		flush_dir(cur, i->ino);
	else
		flush_file(cur, i);
	return 0;
}

/* A write of N bytes from BUF at OFF (BUF already gathered). */
static ssize_t do_write(int fd, const unsigned char *buf, size_t n, off_t off,
			int f, int rwf)
{
	struct ofd *o;
	struct inode *i = fd_inode(fd, &o);
	if (!i)
		return -1;
	if (f && f != SIM_F_SHORT) {
		errno = fault_err;
		return -1;
	}
	if ((o->flags & O_ACCMODE) == O_RDONLY || (o->flags & O_PATH)) {
		errno = EBADF;
		return -1;
	}
	if (i->dir) {
		errno = EISDIR;
		return -1;
	}
	if (off < 0) {
		errno = EINVAL;
		return -1;
	}
	if ((uint64_t)off + n > SIM_MAXSIZE) {
		errno = EFBIG;
		return -1;
	}
	if (n == 0)
		return 0;
	if (f == SIM_F_SHORT && n > 1)
		n /= 2;
	struct op *w = op_new(OP_WRITE);
	w->off = (uint64_t)off;
	w->len = n;
	w->size = i->vol.size;
	w->untorn = (rwf & RWF_ATOMIC) != 0;
	if (!all_zero(buf, n)) {
		w->data = xmalloc(n);
		memcpy(w->data, buf, n);
	}
	op_apply(&i->vol, w);
	img_mark(&i->vol, w->off, w->len);
	log_add(i, w);
	if (rwf & (RWF_DSYNC | RWF_SYNC))
		flush_file(cur, i);
	return (ssize_t)n;
}

static ssize_t s_pwrite(int fd, const void *buf, size_t n, off_t off)
{
	int f = enter("pwrite", true);
	return do_write(fd, buf, n, off, f, 0);
}

static ssize_t gather_write(int fd, const struct iovec *iov, int cnt, off_t off,
			    int f, int rwf)
{
	size_t total = 0;
	if (cnt < 0 || cnt > IOV_MAX) {
		errno = EINVAL;
		return -1;
	}
	for (int k = 0; k < cnt; k++)
		total += iov[k].iov_len;
	unsigned char *b = xmalloc(total);
	size_t p = 0;
	for (int k = 0; k < cnt; k++) {
		memcpy(b + p, iov[k].iov_base, iov[k].iov_len);
		p += iov[k].iov_len;
	}
	ssize_t r = do_write(fd, b, total, off, f, rwf);
	free(b);
	return r;
}

static ssize_t s_pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
	int f = enter("pwritev", true);
	return gather_write(fd, iov, cnt, off, f, 0);
}

static ssize_t s_pwritev2(int fd, const struct iovec *iov, int cnt, off_t off,
			  int flags)
{
	int f = enter("pwritev2", true);
	if (flags & ~(RWF_DSYNC | RWF_SYNC | RWF_ATOMIC | RWF_HIPRI | RWF_NOWAIT)) {
		errno = EOPNOTSUPP;
		return -1;
	}
	if (off < 0) {
		errno = EOPNOTSUPP;   /* pwritev2 with -1: current position */
		return -1;
	}
	if (flags & RWF_ATOMIC) {
		/* One power-of-two, aligned segment of at most 64 KiB. */
		size_t total = 0;
		for (int k = 0; k < cnt; k++)
			total += iov[k].iov_len;
		if (cnt != 1 || total == 0 || (total & (total - 1)) ||
		    total > 65536 || total < 512 || (uint64_t)off % total) {
			errno = EINVAL;
			return -1;
		}
	}
	ssize_t r = gather_write(fd, iov, cnt, off, f == SIM_F_FLUSH ? 0 : f,
				 flags);
	if (r >= 0 && f == SIM_F_FLUSH) {
		/* The write's data flush failed: lost. */
		struct inode *i = fd_inode(fd, NULL);
		drop_log(i);
		errno = fault_err;
		return -1;
	}
	return r;
}

static int s_fsync(int fd)
{
	int f = enter("fsync", true);
	struct inode *i = fd_inode(fd, NULL);
	if (!i)
		return -1;
	if (f && i->dir && sim_fault_skip_dirsync) {
		f = 0;
		sim_fault_fired = false;
		sim_fault_call = NULL;
	}
	return do_fdatasync(i, f);
}

static int s_fdatasync(int fd)
{
	int f = enter("fdatasync", true);
	struct inode *i = fd_inode(fd, NULL);
	if (!i)
		return -1;
	return do_fdatasync(i, f);
}

static int s_ftruncate(int fd, off_t len)
{
	int f = enter("ftruncate", true);
	struct ofd *o;
	struct inode *i = fd_inode(fd, &o);
	if (!i)
		return -1;
	FAIL_IF(f);
	if (i->dir) {
		errno = EISDIR;
		return -1;
	}
	if ((o->flags & O_ACCMODE) == O_RDONLY) {
		errno = EINVAL;
		return -1;
	}
	if (len < 0) {
		errno = EINVAL;
		return -1;
	}
	if ((uint64_t)len > SIM_MAXSIZE) {
		errno = EFBIG;
		return -1;
	}
	struct op *t = op_new(OP_TRUNC);
	t->size = (uint64_t)len;
	t->off = i->vol.size;     /* the size before */
	op_apply(&i->vol, t);
	log_add(i, t);
	return 0;
}

static off_t s_lseek(int fd, off_t off, int whence)
{
	int f = enter("lseek", false);
	struct inode *i = fd_inode(fd, NULL);
	FAIL_IF(f);
	if (!i)
		return -1;
	int64_t base = whence == SEEK_SET ? 0 : whence == SEEK_END
			? (int64_t)i->vol.size : 0;
	if (whence != SEEK_SET && whence != SEEK_END && whence != SEEK_CUR) {
		errno = EINVAL;
		return -1;
	}
	if (base + off < 0 || (uint64_t)(base + off) > SIM_MAXSIZE) {
		errno = EINVAL;
		return -1;
	}
	return base + off;
}

static int s_fallocate(int fd, int mode, off_t off, off_t len)
{
	int f = enter("fallocate", true);
	struct inode *i = fd_inode(fd, NULL);
	if (!i)
		return -1;
	FAIL_IF(f);
	if (off < 0 || len <= 0) {
		errno = EINVAL;
		return -1;
	}
	if (mode & ~FALLOC_FL_KEEP_SIZE) {
		errno = EOPNOTSUPP;
		return -1;
	}
	if (!(mode & FALLOC_FL_KEEP_SIZE) &&
	    (uint64_t)(off + len) > i->vol.size) {
		struct op *t = op_new(OP_TRUNC);
		t->size = (uint64_t)(off + len);
		t->off = i->vol.size;
		op_apply(&i->vol, t);
		log_add(i, t);
	}
	return 0;
}

static void fill_stat(const struct inode *i, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_dev = 0x5157;
	st->st_ino = i->ino;
	st->st_mode = (i->dir ? S_IFDIR : S_IFREG) | i->mode;
	st->st_nlink = 1;
	st->st_uid = i->uid;
	st->st_gid = i->gid;
	st->st_size = i->dir ? 4096 : (off_t)i->vol.size;
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)((st->st_size + 511) / 512);
}

static int s_fstat(int fd, struct stat *st)
{
	int f = enter("fstat", false);
	struct inode *i = fd_inode(fd, NULL);
	FAIL_IF(f);
	if (!i)
		return -1;
	fill_stat(i, st);
	return 0;
}

static struct inode *lookup(int dirfd, const char *path)
{
	struct inode *d;
	char name[NAME_MAX + 1];
	struct ofd *po = proc_fd(path);
	if (po)
		return ino_get(cur, po->ino);
	if (resolve(dirfd, path, &d, name, NULL) < 0)
		return NULL;
	if (!name[0])
		return d;
	ssize_t k = dents_find(&d->cur, name);
	if (k < 0) {
		errno = ENOENT;
		return NULL;
	}
	return ino_get(cur, d->cur.e[k].ino);
}

static int s_fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	int f = enter("fstatat", false);
	FAIL_IF(f);
	struct inode *i;
	if ((flags & AT_EMPTY_PATH) && !path[0])
		i = fd_inode(dirfd, NULL);
	else
		i = lookup(dirfd, path);
	if (!i)
		return -1;
	fill_stat(i, st);
	return 0;
}

static int s_fstatfs(int fd, struct statfs *st)
{
	int f = enter("fstatfs", false);
	FAIL_IF(f);
	if (!fd_get(fd)) {
		errno = EBADF;
		return -1;
	}
	memset(st, 0, sizeof(*st));
	st->f_type = 0x5157u;
	st->f_bsize = 4096;
	st->f_frsize = 4096;
	st->f_blocks = 1u << 22;
	st->f_bfree = st->f_bavail = 1u << 21;
	st->f_files = 1u << 16;
	st->f_ffree = 1u << 15;
	st->f_namelen = NAME_MAX;
	return 0;
}

static int s_fchown(int fd, uid_t uid, gid_t gid)
{
	int f = enter("fchown", false);
	struct inode *i = fd_inode(fd, NULL);
	FAIL_IF(f);
	if (!i)
		return -1;
	if (uid != (uid_t)-1)
		i->uid = uid;
	if (gid != (gid_t)-1)
		i->gid = gid;
	return 0;
}

static int s_fchmod(int fd, mode_t mode)
{
	int f = enter("fchmod", false);
	struct inode *i = fd_inode(fd, NULL);
	FAIL_IF(f);
	if (!i)
		return -1;
	i->mode = mode & 07777;
	return 0;
}

static int s_unlinkat(int dirfd, const char *path, int flags)
{
	int f = enter("unlinkat", true);
	struct inode *d;
	char name[NAME_MAX + 1];
	FAIL_IF(f);
	if (resolve(dirfd, path, &d, name, NULL) < 0)
		return -1;
	ssize_t k = name[0] ? dents_find(&d->cur, name) : -1;
	if (k < 0) {
		errno = ENOENT;
		return -1;
	}
	struct inode *i = ino_get(cur, d->cur.e[k].ino);
	if (i->dir && !(flags & AT_REMOVEDIR)) {
		errno = EISDIR;
		return -1;
	}
	if (!i->dir && (flags & AT_REMOVEDIR)) {
		errno = ENOTDIR;
		return -1;
	}
	if (i->dir && i->cur.n) {
		errno = ENOTEMPTY;
		return -1;
	}
	dents_del(&d->cur, (size_t)k);
	dop_add(cur, DOP_UNLINK, d->ino, name, 0, NULL, 0);
	return 0;
}

static int s_linkat(int od, const char *old, int nd, const char *new_,
		   int flags)
{
	int f = enter("linkat", true);
	struct inode *i, *d;
	char name[NAME_MAX + 1];
	FAIL_IF(f);
	struct ofd *po = proc_fd(old);
	if (po) {
		if (!(flags & AT_SYMLINK_FOLLOW)) {
			errno = EXDEV;   /* as linking the magic link itself */
			return -1;
		}
		i = ino_get(cur, po->ino);
	} else {
		i = lookup(od, old);
	}
	if (!i)
		return -1;
	if (i->dir) {
		errno = EPERM;
		return -1;
	}
	if (resolve(nd, new_, &d, name, NULL) < 0)
		return -1;
	if (!name[0]) {
		errno = EEXIST;
		return -1;
	}
	if (dents_find(&d->cur, name) >= 0) {
		errno = EEXIST;
		return -1;
	}
	dents_add(&d->cur, name, i->ino);
	dop_add(cur, DOP_LINK, d->ino, name, 0, NULL, i->ino);
	return 0;
}

static ssize_t s_readlinkat(int dirfd, const char *path, char *buf, size_t n)
{
	int f = enter("readlinkat", false);
	FAIL_IF(f);
	struct ofd *po = proc_fd(path);
	if (!po) {
		errno = EINVAL;
		return -1;
	}
	size_t l = strlen(po->path);
	if (l > n)
		l = n;
	memcpy(buf, po->path, l);
	return (ssize_t)l;
}

static ssize_t s_getdents64(int fd, void *buf, size_t n)
{
	int f = enter("getdents64", false);
	struct ofd *o;
	struct inode *d = fd_inode(fd, &o);
	FAIL_IF(f);
	if (!d)
		return -1;
	if (!d->dir) {
		errno = ENOTDIR;
		return -1;
	}
	size_t w = 0;
	char *out = buf;
	while (o->pos < d->cur.n + 2) {
		const char *name;
		uint64_t ino;
		unsigned char type;
		if (o->pos == 0) {
			name = ".";
			ino = d->ino;
			type = DT_DIR;
		} else if (o->pos == 1) {
			name = "..";
			ino = d->parent;
			type = DT_DIR;
		} else {
			const struct dent *e = &d->cur.e[o->pos - 2];
			struct inode *x = ino_get(cur, e->ino);
			name = e->name;
			ino = e->ino;
			type = x && x->dir ? DT_DIR : DT_REG;
		}
		size_t len = strlen(name);
		unsigned short rl = (unsigned short)((19 + len + 1 + 7) & ~7u);
		if (w + rl > n) {
			if (w == 0) {
				errno = EINVAL;
				return -1;
			}
			break;
		}
		int64_t next = (int64_t)o->pos + 1;
		memset(out + w, 0, rl);
		memcpy(out + w, &ino, 8);
		memcpy(out + w + 8, &next, 8);
		memcpy(out + w + 16, &rl, 2);
		out[w + 18] = (char)type;
		memcpy(out + w + 19, name, len);
		w += rl;
		o->pos++;
	}
	return (ssize_t)w;
}

static int s_lock(int fd, int cmd, struct flock *fl)
{
	int f = enter("lock", false);
	struct ofd *o;
	struct inode *i = fd_inode(fd, &o);
	/* (unlocking does not fail on Linux) */
	if (f && fl->l_type != F_UNLCK) {
		errno = fault_err;
		return -1;
	}
	if (!i)
		return -1;
	if (cmd != F_OFD_SETLK && cmd != F_OFD_SETLKW && cmd != F_OFD_GETLK) {
		errno = EINVAL;
		return -1;
	}
	if (fl->l_whence != SEEK_SET || fl->l_start < 0 || fl->l_len < 0) {
		errno = EINVAL;
		return -1;
	}
	uint64_t s = (uint64_t)fl->l_start;
	uint64_t e = fl->l_len ? s + (uint64_t)fl->l_len : UINT64_MAX;
	int acc = o->flags & O_ACCMODE;
	if (cmd != F_OFD_GETLK &&
	    ((fl->l_type == F_WRLCK && acc == O_RDONLY) ||
	     (fl->l_type == F_RDLCK && acc == O_WRONLY))) {
		errno = EBADF;
		return -1;
	}
	/* conflicts with another description's lock? */
	for (size_t k = 0; fl->l_type != F_UNLCK && k < cur->nlocks; k++) {
		struct lockrec *L = &cur->locks[k];
		if (L->ino != i->ino || L->ofd == o || L->end <= s || L->start >= e)
			continue;
		if (L->type == F_WRLCK || fl->l_type == F_WRLCK) {
			if (cmd == F_OFD_GETLK) {
				fl->l_type = L->type;
				fl->l_start = (off_t)L->start;
				fl->l_len = L->end == UINT64_MAX ? 0
					    : (off_t)(L->end - L->start);
				fl->l_pid = -1;
				return 0;
			}
			errno = cmd == F_OFD_SETLKW ? EDEADLK : EAGAIN;
			return -1;
		}
	}
	if (cmd == F_OFD_GETLK) {
		fl->l_type = F_UNLCK;
		return 0;
	}
	/* Remove our own locks in [s, e) (whole records only: the library
	 * locks single bytes), then add the new one. */
	size_t w = 0;
	for (size_t k = 0; k < cur->nlocks; k++) {
		struct lockrec *L = &cur->locks[k];
		if (L->ofd == o && L->ino == i->ino && L->start >= s && L->end <= e)
			continue;
		cur->locks[w++] = *L;
	}
	cur->nlocks = w;
	if (fl->l_type == F_UNLCK)
		return 0;
	if (cur->nlocks == cur->lcap) {
		cur->lcap = cur->lcap ? cur->lcap * 2 : 16;
		cur->locks = realloc(cur->locks, sizeof(*cur->locks) * cur->lcap);
		if (!cur->locks)
			abort();
	}
	cur->locks[cur->nlocks++] = (struct lockrec){ o, i->ino, s, e, fl->l_type };
	return 0;
}

/* Clone LEN bytes of SRC at SOFF over DST at DOFF: one untorn operation in
 * DST's log (durable after DST's flush).  Returns 0 or -1. */
static int do_clone(struct inode *src, uint64_t soff, struct inode *dst,
		    struct ofd *dofd, uint64_t doff, uint64_t len)
{
	if (src->dir || dst->dir) {
		errno = EISDIR;
		return -1;
	}
	if ((dofd->flags & O_ACCMODE) == O_RDONLY) {
		errno = EBADF;
		return -1;
	}
	if (len == 0) {
		if (soff > src->vol.size) {
			errno = EINVAL;
			return -1;
		}
		len = src->vol.size - soff;
	}
	if (soff % PG || doff % PG || soff + len > src->vol.size ||
	    (len % PG && soff + len != src->vol.size)) {
		errno = EINVAL;
		return -1;
	}
	if (src == dst && soff < doff + len && doff < soff + len) {
		errno = EINVAL;
		return -1;
	}
	struct op *w = op_new(OP_WRITE);
	w->off = doff;
	w->len = len;
	w->size = dst->vol.size;
	w->untorn = true;
	w->data = xmalloc(len);
	img_get(&src->vol, soff, w->data, len);
	op_apply(&dst->vol, w);
	log_add(dst, w);
	return 0;
}

static int do_exchange(struct oa_xfs_exchange_range *x, int fd2)
{
	struct ofd *o1, *o2;
	struct inode *a = fd_inode(x->file1_fd, &o1), *b = fd_inode(fd2, &o2);
	if (!a || !b)
		return -1;
	if (a->dir || b->dir) {
		errno = EISDIR;
		return -1;
	}
	if ((o1->flags & O_ACCMODE) == O_RDONLY ||
	    (o2->flags & O_ACCMODE) == O_RDONLY) {
		errno = EBADF;
		return -1;
	}
	bool to_eof = x->flags & OA_XFS_EXCHANGE_TO_EOF;
	bool written = x->flags & OA_XFS_EXCHANGE_FILE1_WRITTEN;
	if ((x->flags & ~(OA_XFS_EXCHANGE_TO_EOF | OA_XFS_EXCHANGE_DSYNC |
			  OA_XFS_EXCHANGE_DRY_RUN |
			  OA_XFS_EXCHANGE_FILE1_WRITTEN)) ||
	    (to_eof && written)) {   /* the two together: not modelled */
		errno = EINVAL;
		return -1;
	}
	uint64_t o1o = x->file1_offset, o2o = x->file2_offset;
	uint64_t len = x->length, lena, lenb;
	if (to_eof) {
		/* Each file from its offset to its end, whatever the two
		 * lengths: each gets the other's bytes and size (a whole
		 * file's contents and size, from offset 0). */
		if (o1o % PG || o2o % PG || o1o > a->vol.size ||
		    o2o > b->vol.size) {
			errno = EINVAL;
			return -1;
		}
		lena = a->vol.size - o1o;
		lenb = b->vol.size - o2o;
	} else if (o1o % PG || o2o % PG || o1o + len > a->vol.size ||
		   o2o + len > b->vol.size ||
		   (len % PG && (o1o + len != a->vol.size ||
				 o2o + len != b->vol.size))) {
		errno = EINVAL;
		return -1;
	} else
		lena = lenb = len;
	if (a == b) {
		errno = EINVAL;
		return -1;
	}
	if (x->flags & OA_XFS_EXCHANGE_DRY_RUN)
		return 0;
	/* FILE1_WRITTEN: only the blocks file1 has written move; its holes
	 * leave file2 alone. */
	uint64_t *runs = NULL;
	size_t nruns = 0;
	if (written) {
		runs = xmalloc(sizeof(*runs) * 2 * (len / PG + 2));
		for (uint64_t p = o1o / PG; p * PG < o1o + len; p++) {
			if (p >= a->vol.np || !a->vol.pg[p])
				continue;
			uint64_t s0 = p * PG, e0 = s0 + PG < o1o + len
				? s0 + PG : o1o + len;
			if (nruns && runs[2 * nruns - 2] + runs[2 * nruns - 1] == s0)
				runs[2 * nruns - 1] += e0 - s0;
			else {
				runs[2 * nruns] = s0;
				runs[2 * nruns + 1] = e0 - s0;
				nruns++;
			}
		}
		if (!nruns) {
			free(runs);
			if (x->flags & OA_XFS_EXCHANGE_DSYNC)
				flush_file(cur, b);
			return 0;
		}
	}
	uint64_t g = ++cur->next_group;
	struct op *wa = op_new(OP_WRITE), *wb = op_new(OP_WRITE);
	wa->off = o1o;
	wb->off = o2o;
	wa->len = lenb;
	wb->len = lena;
	wa->size = a->vol.size;
	wb->size = b->vol.size;
	wa->untorn = wb->untorn = true;
	wa->data = xmalloc(lenb ? lenb : 1);
	wb->data = xmalloc(lena ? lena : 1);
	img_get(&b->vol, o2o, wa->data, lenb);
	img_get(&a->vol, o1o, wb->data, lena);
	if (to_eof) {
		wa->setsize = wb->setsize = true;
		wa->size2 = o1o + lenb;
		wb->size2 = o2o + lena;
	}
	if (nruns) {
		wa->runs = runs;
		wa->nruns = nruns;
		wb->runs = xmalloc(sizeof(*runs) * 2 * nruns);
		wb->nruns = nruns;
		for (size_t k = 0; k < nruns; k++) {
			wb->runs[2 * k] = runs[2 * k] - o1o + o2o;
			wb->runs[2 * k + 1] = runs[2 * k + 1];
		}
	}
	wa->group = wb->group = g;
	wa->ino2 = b->ino;
	wb->ino2 = a->ino;
	op_apply(&a->vol, wa);
	op_apply(&b->vol, wb);
	for (size_t k = 0; k < nruns; k++)
		img_mark(&b->vol, wb->runs[2 * k], wb->runs[2 * k + 1]);
	if (to_eof) {
		img_mark(&a->vol, o1o, lenb);
		img_mark(&b->vol, o2o, lena);
	}
	log_add(a, wa);
	log_add(b, wb);
	if (x->flags & OA_XFS_EXCHANGE_DSYNC)
		flush_file(cur, a);
	return 0;
}

static int s_ioctl(int fd, unsigned long req, void *arg)
{
	bool mut = req == FICLONE || req == FICLONERANGE ||
		   req == OA_XFS_IOC_EXCHANGE_RANGE;
	int f = enter("ioctl", mut);
	struct ofd *o;
	struct inode *i = fd_inode(fd, &o);
	FAIL_IF(f);
	if (!i)
		return -1;
	switch (req) {
	case FS_IOC_GETVERSION:
		*(int *)arg = (int)i->gen;
		return 0;
	case FICLONE: {
		struct inode *s = fd_inode((int)(intptr_t)arg, NULL);
		if (!s)
			return -1;
		if (do_clone(s, 0, i, o, 0, 0) < 0)
			return -1;
		if (i->vol.size > s->vol.size) {
			struct op *t = op_new(OP_TRUNC);
			t->size = s->vol.size;
			op_apply(&i->vol, t);
			log_add(i, t);
		}
		return 0;
	}
	case FICLONERANGE: {
		struct file_clone_range *r = arg;
		struct inode *s = fd_inode((int)r->src_fd, NULL);
		if (!s)
			return -1;
		return do_clone(s, r->src_offset, i, o, r->dest_offset,
				r->src_length);
	}
	case OA_XFS_IOC_EXCHANGE_RANGE:
		return do_exchange(arg, fd);
	default:
		errno = ENOTTY;
		return -1;
	}
}

static int s_statx(int dirfd, const char *path, int flags, unsigned mask,
		   void *sxbuf)
{
	int f = enter("statx", false);
	struct inode *i;
	struct statx *sx = sxbuf;
	FAIL_IF(f);
	if ((flags & AT_EMPTY_PATH) && !path[0])
		i = fd_inode(dirfd, NULL);
	else
		i = lookup(dirfd, path);
	if (!i)
		return -1;
	memset(sx, 0, sizeof(*sx));
	sx->stx_mask = STATX_BASIC_STATS;
	sx->stx_blksize = 4096;
	sx->stx_nlink = 1;
	sx->stx_dev_major = major(0x5157);   /* fill_stat's st_dev */
	sx->stx_dev_minor = minor(0x5157);
	sx->stx_uid = i->uid;
	sx->stx_gid = i->gid;
	sx->stx_mode = (uint16_t)((i->dir ? S_IFDIR : S_IFREG) | i->mode);
	sx->stx_ino = i->ino;
	sx->stx_size = i->dir ? 4096 : i->vol.size;
	sx->stx_blocks = (sx->stx_size + 511) / 512;
	if (!i->dir) {
		/* Direct I/O alignment and an atomic write unit of 4-64 KiB,
		 * so that the kernel method runs here too.  glibc's struct
		 * statx predates these fields: the kernel's offsets. */
		unsigned char *raw = sxbuf;
		uint32_t v;
		sx->stx_mask |= 0x00002000U | 0x00010000U;  /* DIOALIGN, WRITE_ATOMIC */
		v = 512;
		memcpy(raw + 0x98, &v, 4);        /* stx_dio_mem_align */
		memcpy(raw + 0x9c, &v, 4);        /* stx_dio_offset_align */
		v = 4096;
		memcpy(raw + 0xa8, &v, 4);        /* stx_atomic_write_unit_min */
		v = 65536;
		memcpy(raw + 0xac, &v, 4);        /* stx_atomic_write_unit_max */
		v = 1;
		memcpy(raw + 0xb0, &v, 4);        /* stx_atomic_write_segments_max */
	}
	return 0;
}

const struct oa_sysops sim_ops = {
	.openat = s_openat,
	.close = s_close,
	.pread = s_pread,
	.pwrite = s_pwrite,
	.pwritev = s_pwritev,
	.fsync = s_fsync,
	.fdatasync = s_fdatasync,
	.ftruncate = s_ftruncate,
	.lseek = s_lseek,
	.fallocate = s_fallocate,
	.fstat = s_fstat,
	.fstatat = s_fstatat,
	.fstatfs = s_fstatfs,
	.fchown = s_fchown,
	.fchmod = s_fchmod,
	.unlinkat = s_unlinkat,
	.linkat = s_linkat,
	.readlinkat = s_readlinkat,
	.getdents64 = s_getdents64,
	.lock = s_lock,
	.ioctl = s_ioctl,
	.statx = s_statx,
	.pwritev2 = s_pwritev2,
	.mmap = NULL,
	.munmap = NULL,
};

void sim_install(void)
{
	oa__set_sysops(&sim_ops);
}

void sim_uninstall(void)
{
	oa__set_sysops(NULL);
}

/* ---- set-up helpers ---- */

int sim_mkdir(const char *path)
{
	struct inode *d;
	char name[NAME_MAX + 1];
	if (resolve(AT_FDCWD, path, &d, name, NULL) < 0)
		return -1;
	if (!name[0] || dents_find(&d->cur, name) >= 0) {
		errno = EEXIST;
		return -1;
	}
	struct inode *n = ino_new(cur, true, 0755);
	n->parent = d->ino;
	dents_add(&d->cur, name, n->ino);
	dents_add(&d->durd, name, n->ino);
	return 0;
}

int sim_put_file(const char *path, const void *data, size_t n)
{
	struct inode *d;
	char name[NAME_MAX + 1];
	if (resolve(AT_FDCWD, path, &d, name, NULL) < 0)
		return -1;
	if (!name[0]) {
		errno = EISDIR;
		return -1;
	}
	struct inode *i = ino_new(cur, false, 0644);
	img_put(&i->vol, 0, data, n);
	i->vol.size = n;
	img_free(&i->dur);
	img_clone(&i->dur, &i->vol);
	dents_set(&d->cur, name, i->ino);
	dents_set(&d->durd, name, i->ino);
	return 0;
}

int sim_get_file(const char *path, unsigned char **data, size_t *n)
{
	struct inode *i = lookup(AT_FDCWD, path);
	if (!i || i->dir)
		return -1;
	*n = (size_t)i->vol.size;
	*data = xmalloc(*n);
	img_get(&i->vol, 0, *data, *n);
	return 0;
}

int sim_poke(const char *path, uint64_t off, const void *data, size_t n)
{
	struct inode *i = lookup(AT_FDCWD, path);
	if (!i || i->dir)
		return -1;
	img_put(&i->vol, off, data, n);
	if (off + n > i->vol.size)
		i->vol.size = off + n;
	img_put(&i->dur, off, data, n);
	if (off + n > i->dur.size)
		i->dur.size = off + n;
	return 0;
}

/* ---- snapshots and cuts ---- */

struct sim_fs *sim_snapshot(struct sim_fs *fs)
{
	struct sim_fs *s = xcalloc(1, sizeof(*s));
	s->nin = s->incap = fs->nin;
	s->in = xcalloc(fs->nin, sizeof(*s->in));
	for (size_t k = 0; k < fs->nin; k++) {
		const struct inode *i = fs->in[k];
		if (!i)
			continue;
		struct inode *n = xcalloc(1, sizeof(*n));
		*n = *i;
		img_clone(&n->vol, &i->vol);
		img_clone(&n->dur, &i->dur);
		n->log = xmalloc(sizeof(*n->log) * (i->nlog ? i->nlog : 1));
		n->logcap = i->nlog ? i->nlog : 1;
		for (size_t m = 0; m < i->nlog; m++) {
			n->log[m] = i->log[m];
			n->log[m]->ref++;
		}
		dents_copy(&n->cur, &i->cur);
		dents_copy(&n->durd, &i->durd);
		s->in[k] = n;
	}
	for (size_t k = 0; k < fs->ndops; k++) {
		const struct dop *d = &fs->dops[k];
		dop_add(s, d->kind, d->dir, d->name, d->dir2, d->name2, d->ino);
	}
	s->next_group = fs->next_group;
	return s;
}

size_t sim_pending(struct sim_fs *fs)
{
	size_t n = fs->ndops;
	for (size_t k = 0; k < fs->nin; k++)
		if (fs->in[k])
			n += fs->in[k]->nlog;
	return n;
}

static unsigned sec_of(const struct sim_cfg *c)
{
	return c && c->sector ? c->sector : 512;
}

/* Units of one operation; with OUT NULL only counts.  The order here is the
 * order sim_crash reads the choices in. */
static size_t op_units(const struct op *o, const struct sim_cfg *cfg,
		       uint64_t ino, uint32_t opi, struct sim_unit *out)
{
	size_t n = 0;
	unsigned sec = sec_of(cfg);
#define ADD(k, ns) do { if (out) out[n] = (struct sim_unit){ (ns), (k), opi, ino }; n++; } while (0)
	if (o->kind == OP_TRUNC) {
		/* A shrink of a file up to 4 MiB is all or nothing; only a
		 * bigger one may be found half done (see the model above). */
		ADD(SIM_U_TRUNC, o->size < o->off && o->off > SIM_CUT_ATOMIC
				 ? 3 : 2);
		return n;
	}
	if (o->untorn) {
		ADD(SIM_U_WHOLE, 2);
		return n;
	}
	if (o->off + o->len > o->size)
		ADD(SIM_U_SIZE, 2);
	uint64_t a = o->off / sec, b = (o->off + o->len + sec - 1) / sec;
	for (uint64_t s = a; s < b; s++)
		ADD(SIM_U_SECTOR, cfg && cfg->nonpowersafe ? 3 : 2);
#undef ADD
	return n;
}

/* Does some name of INO start with '.'? */
static bool dotfile(struct sim_fs *fs, uint64_t ino)
{
	for (size_t k = 0; k < fs->nin; k++) {
		const struct inode *d = fs->in[k];
		if (!d || !d->dir)
			continue;
		for (size_t e = 0; e < d->cur.n; e++)
			if (d->cur.e[e].ino == ino && d->cur.e[e].name[0] == '.')
				return true;
	}
	return false;
}

/* The configuration for the operations of file INO. */
static const struct sim_cfg *cfg_for(struct sim_fs *fs, const struct sim_cfg *cfg,
				     uint64_t ino, struct sim_cfg *tmp)
{
	if (!cfg || !cfg->nonpowersafe || !cfg->garbage_dotfiles_only ||
	    dotfile(fs, ino))
		return cfg;
	*tmp = *cfg;
	tmp->nonpowersafe = false;
	return tmp;
}

size_t sim_units(struct sim_fs *snap, const struct sim_cfg *cfg0,
		 struct sim_unit **out)
{
	struct sim_cfg tmp;
	const struct sim_cfg *cfg = cfg0;
	size_t n = 0;
	uint32_t opi = 0;
	for (size_t k = 0; k < snap->nin; k++) {
		struct inode *i = snap->in[k];
		if (!i)
			continue;
		if (i->nlog)
			cfg = cfg_for(snap, cfg0, i->ino, &tmp);
		for (size_t m = 0; m < i->nlog; m++) {
			const struct op *o = i->log[m];
			/* An exchange's second side shares the first's unit. */
			if (o->group && o->ino2 < i->ino)
				continue;
			n += op_units(o, cfg, i->ino, opi++, NULL);
		}
	}
	n += snap->ndops;
	*out = xcalloc(n, sizeof(**out));
	size_t w = 0;
	opi = 0;
	for (size_t k = 0; k < snap->nin; k++) {
		struct inode *i = snap->in[k];
		if (!i)
			continue;
		if (i->nlog)
			cfg = cfg_for(snap, cfg0, i->ino, &tmp);
		for (size_t m = 0; m < i->nlog; m++) {
			const struct op *o = i->log[m];
			if (o->group && o->ino2 < i->ino)
				continue;
			w += op_units(o, cfg, i->ino, opi++, *out + w);
		}
	}
	for (size_t k = 0; k < snap->ndops; k++) {
		const struct dop *d = &snap->dops[k];
		(*out)[w++] = (struct sim_unit){
			d->kind == DOP_RENAME && cfg0 && cfg0->strict_rename ? 4 : 2,
			SIM_U_DIR, opi++, d->dir };
	}
	return n;
}

/* Garbage that a torn sector may hold (deterministic per sector). */
static void garbage(unsigned char *b, size_t n, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	for (size_t k = 0; k < n; k++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b[k] = (unsigned char)x;
	}
}

/* Apply op O to durable image M as the choices C (its units) say. */
static void op_cut(struct img *m, const struct op *o, const struct sim_cfg *cfg,
		   const unsigned char *c, uint64_t seed)
{
	unsigned sec = sec_of(cfg);
	if (o->kind == OP_TRUNC) {
		if (c[0] == 1)
			img_trunc(m, o->size);
		else if (c[0] == 2) {
			/* half done: cut part of the way (sector aligned) */
			uint64_t mid = o->size + (m->size > o->size ? (m->size - o->size) / 2 : 0);
			mid = (mid + sec - 1) / sec * sec;
			if (mid < m->size)
				img_trunc(m, mid);
		}
		return;
	}
	if (o->untorn) {
		if (c[0])
			op_apply(m, o);
		return;
	}
	size_t u = 0;
	if (o->off + o->len > o->size) {
		if (c[u++] && o->off + o->len > m->size) {
			/* size first: the gap reads zeros unless data lands */
			uint64_t old = m->size;
			img_put(m, old, NULL, o->off + o->len - old);
			m->size = o->off + o->len;
		}
	}
	uint64_t a = o->off / sec, b = (o->off + o->len + sec - 1) / sec;
	unsigned char *g = NULL;
	for (uint64_t s = a; s < b; s++, u++) {
		if (!c[u])
			continue;
		uint64_t lo = s * sec, hi = lo + sec;
		if (c[u] == 2) {
			/* non-powersafe: the whole sector is garbage */
			if (!g)
				g = xmalloc(sec);
			garbage(g, sec, seed ^ (s * 7919));
			uint64_t e = hi < m->size ? hi : m->size;
			if (e > lo)
				img_put(m, lo, g, e - lo);
			continue;
		}
		if (lo < o->off)
			lo = o->off;
		if (hi > o->off + o->len)
			hi = o->off + o->len;
		if (hi > m->size)
			hi = m->size;   /* beyond a size that did not persist */
		if (hi > lo)
			img_put(m, lo, o->data ? o->data + (lo - o->off) : NULL,
				hi - lo);
	}
	free(g);
}

struct sim_fs *sim_crash(struct sim_fs *snap, const struct sim_cfg *cfg0,
			 const unsigned char *choice)
{
	struct sim_cfg tmp;
	const struct sim_cfg *cfg = cfg0;
	struct sim_fs *s = xcalloc(1, sizeof(*s));
	size_t u = 0;
	uint64_t seed = 1;
	s->nin = s->incap = snap->nin;
	s->in = xcalloc(snap->nin, sizeof(*s->in));
	for (size_t k = 0; k < snap->nin; k++) {
		const struct inode *i = snap->in[k];
		if (!i)
			continue;
		struct inode *n = xcalloc(1, sizeof(*n));
		n->ino = i->ino;
		n->dir = i->dir;
		n->mode = i->mode;
		n->uid = i->uid;
		n->gid = i->gid;
		n->gen = i->gen;
		n->parent = i->parent;
		img_clone(&n->dur, &i->dur);
		dents_copy(&n->durd, &i->durd);
		s->in[k] = n;
	}
	/* File operations, inode by inode, in log order. */
	for (size_t k = 0; k < snap->nin; k++) {
		const struct inode *i = snap->in[k];
		if (!i)
			continue;
		if (i->nlog)
			cfg = cfg_for(snap, cfg0, i->ino, &tmp);
		uint64_t floor = UINT64_MAX;   /* see "a write after a lost
						* shrink" in the model */
		for (size_t m = 0; m < i->nlog; m++) {
			const struct op *o = i->log[m];
			if (o->group && o->ino2 < i->ino)
				continue;
			size_t nu = op_units(o, cfg, i->ino, 0, NULL);
			static const unsigned char zeros[1];
			unsigned char *c = xcalloc(nu, 1);
			if (choice)
				memcpy(c, choice + u, nu);
			(void)zeros;
			if (o->kind == OP_TRUNC && o->size < o->off && c[0] == 0) {
				uint64_t f = (o->size + PG - 1) / PG * PG;
				if (f < floor)
					floor = f;
			} else if (o->kind == OP_TRUNC && o->size > floor) {
				c[0] = 0;   /* a growth after it: later */
			} else if (floor != UINT64_MAX && !o->untorn &&
				   o->kind != OP_TRUNC) {
				unsigned sec = sec_of(cfg);
				size_t uu = 0;
				if (o->off + o->len > o->size) {
					if (o->off + o->len > floor)
						c[0] = 0;
					uu = 1;
				}
				uint64_t a = o->off / sec,
					 b = (o->off + o->len + sec - 1) / sec;
				for (uint64_t q = a; q < b; q++)
					if (q * sec >= floor)
						c[uu + (q - a)] = 0;
			}
			op_cut(&s->in[k]->dur, o, cfg, c, seed++);
			if (o->group && c[0]) {
				/* the other side, all or nothing with this one */
				const struct inode *j = snap->in[o->ino2];
				for (size_t q = 0; j && q < j->nlog; q++)
					if (j->log[q]->group == o->group)
						op_apply(&s->in[o->ino2]->dur,
							 j->log[q]);
			}
			free(c);
			u += nu;
		}
	}
	/* Directory operations, in log order. */
	for (size_t k = 0; k < snap->ndops; k++, u++) {
		int c = choice ? choice[u] : 0;
		if (c)
			dop_apply_dur(s, &snap->dops[k], c);
	}
	/* Reboot: page caches are the disk; unnamed inodes are gone. */
	bool *reach = xcalloc(s->nin, sizeof(bool));
	uint64_t *stack = xmalloc(sizeof(uint64_t) * (s->nin + 1));
	size_t sp = 0;
	reach[1] = true;
	stack[sp++] = 1;
	while (sp) {
		struct inode *d = s->in[stack[--sp]];
		if (!d || !d->dir)
			continue;
		for (size_t e = 0; e < d->durd.n; e++) {
			uint64_t x = d->durd.e[e].ino;
			if (x < s->nin && !reach[x]) {
				reach[x] = true;
				stack[sp++] = x;
			}
		}
	}
	for (size_t k = 1; k < s->nin; k++) {
		struct inode *n = s->in[k];
		if (!n)
			continue;
		if (!reach[k]) {
			inode_free(n);
			s->in[k] = NULL;
			continue;
		}
		img_clone(&n->vol, &n->dur);
		dents_copy(&n->cur, &n->durd);
	}
	free(reach);
	free(stack);
	s->next_group = snap->next_group;
	return s;
}

uint64_t sim_fs_hash(struct sim_fs *fs)
{
	uint64_t h = 77;
	for (size_t k = 1; k < fs->nin; k++) {
		const struct inode *i = fs->in[k];
		if (!i)
			continue;
		h = hmix(h, k);
		if (i->dir) {
			for (size_t e = 0; e < i->cur.n; e++) {
				const char *p = i->cur.e[e].name;
				uint64_t x = 5381;
				while (*p)
					x = x * 33 + (unsigned char)*p++;
				h = hmix(h, x ^ i->cur.e[e].ino);
			}
		} else {
			h = hmix(h, img_hash(&i->vol));
		}
	}
	return h;
}
