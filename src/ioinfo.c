/*
 * ioinfo.c - oa_ioinfo(): what the file and its file system can do.
 *
 * Static facts come from fstatfs(2) and statx(2) of the file.  Whether
 * reflink, XFS range exchange and RWF_ATOMIC actually work is never guessed
 * from the kernel version: each is tried once per file system on scratch
 * O_TMPFILE files (nameless, gone when closed) and the answer is cached,
 * keyed by the file system's identity.  Every call goes through the seam.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>   /* major, minor */
#include <linux/fs.h>          /* struct file_clone_range, FICLONERANGE */
#include <linux/ioctl.h>
#include <linux/types.h>

#include "internal.h"

/* ---- statx masks newer than glibc (struct oa_statx, RWF_ATOMIC: sys.h) ---- */

#ifndef STATX_DIOALIGN
#define STATX_DIOALIGN 0x00002000U
#endif
#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x00001000U
#endif
#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x00004000U
#endif
#ifndef STATX_WRITE_ATOMIC
#define STATX_WRITE_ATOMIC 0x00010000U
#endif

/* ---- file system names ---- */

static const struct {
	uint32_t magic;
	const char *name;
} fs_names[] = {
	{ 0xEF53,     "ext4" },     /* ext2, ext3 and ext4 share it */
	{ 0x58465342, "xfs" },
	{ OA_BTRFS_MAGIC, "btrfs" },
	{ 0x01021994, "tmpfs" },
	{ 0x794c7630, "overlayfs" },
	{ 0x6969,     "nfs" },
	{ 0xF2F52010, "f2fs" },
	{ 0x2FC12FC1, "zfs" },
	{ 0x65735546, "fuse" },
	{ 0xca451a4e, "bcachefs" },
	{ 0x858458f6, "ramfs" },
	{ 0x4d44,     "vfat" },
	{ 0x2011BAB0, "exfat" },
	{ 0xFF534D42, "cifs" },
	{ 0xFE534D42, "smb2" },
	{ 0x01021997, "9p" },
	{ 0x00c36400, "ceph" },
	{ 0x01161970, "gfs2" },
	{ 0x7461636f, "ocfs2" },
	{ 0xE0F5E1E2, "erofs" },
	{ 0x73717368, "squashfs" },
};

const char *oa__fs_name(unsigned long magic)
{
	for (size_t i = 0; i < sizeof(fs_names) / sizeof(fs_names[0]); i++)
		if ((unsigned long)fs_names[i].magic == magic)
			return fs_names[i].name;
	return NULL;
}

/* ---- probes ---- */

/* A probe's outcome: it worked, it cannot work here, or it could not be
 * told (no scratch file, out of space...): then nothing is cached. */
enum { P_UNKNOWN = -1, P_NO = 0, P_YES = 1 };

struct probe {
	int reflink, exchange, rwf_atomic;      /* P_* */
	/* what the kernel reported for a scratch file opened O_DIRECT */
	uint32_t awu_min, awu_max, awu_segs;
	/* the device's own atomic write limit (dev_atomic_max), UINT32_MAX
	 * where it cannot be read */
	uint32_t awu_dev;
};

/* Errors that say something about this moment, not about the file system. */
static int transient(int e)
{
	switch (e) {
	case ENOSPC: case EDQUOT: case ENOMEM: case EIO: case EINTR:
	case EAGAIN: case EACCES: case EPERM: case EROFS: case EMFILE:
	case ENFILE: case EBUSY: case ETXTBSY:
		return 1;
	default:
		return 0;
	}
}

static int outcome(int ok)
{
	if (ok)
		return P_YES;
	return transient(errno) ? P_UNKNOWN : P_NO;
}

static int scratch_open(int dirfd, int extra)
{
	return oa_xopenat(dirfd, ".", O_TMPFILE | O_RDWR | O_EXCL | extra,
			  0600);
}

/* Write BLK bytes of BUF at 0; 0 or -1 (errno). */
static int write_block(int fd, const void *buf, size_t blk)
{
	ssize_t r;
	do
		r = oa_sys->pwrite(fd, buf, blk, 0);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -1;
	if ((size_t)r != blk) {
		errno = ENOSPC;
		return -1;
	}
	return 0;
}

/*
 * reflink: clone one block of A into B.  exchange: swap that block of the
 * two (B holding the clone, as the exchange method would use it, or its own
 * copy if cloning does not work here).
 */
static void probe_clone_exchange(int dirfd, size_t blk, struct probe *p)
{
	struct file_clone_range fcr = { .src_length = blk };
	struct oa_xfs_exchange_range xr = { .length = blk };
	unsigned char *buf;
	int a, b;

	p->reflink = p->exchange = P_UNKNOWN;
	buf = malloc(blk);
	if (!buf)
		return;
	memset(buf, 0x5a, blk);

	a = scratch_open(dirfd, 0);
	if (a < 0) {
		/* no O_TMPFILE here: neither can be tried, report 0 */
		if (!transient(errno))
			p->reflink = p->exchange = P_NO;
		free(buf);
		return;
	}
	b = scratch_open(dirfd, 0);
	if (b < 0 || write_block(a, buf, blk) < 0)
		goto out;

	fcr.src_fd = a;
	p->reflink = outcome(oa_xioctl(b, FICLONERANGE, &fcr) == 0);

	if (p->reflink != P_YES) {
		memset(buf, 0xa5, blk);
		if (write_block(b, buf, blk) < 0)
			goto out;
	}
	xr.file1_fd = a;
	p->exchange = outcome(oa_xioctl(b, OA_XFS_IOC_EXCHANGE_RANGE, &xr) == 0);
out:
	oa_xclose(b);
	oa_xclose(a);
	free(buf);
}

/*
 * rwf_atomic: one RWF_ATOMIC direct write of the smallest atomic unit at 0
 * of a scratch file.  UNIT is the file's unit (0: use what the kernel
 * reports for the scratch file).
 */
static void probe_rwf_atomic(int dirfd, uint32_t unit, uint32_t mem_align,
			     struct probe *p)
{
	struct oa_statx sx;
	struct iovec iov;
	void *buf = NULL;
	ssize_t r;
	int fd;

	p->rwf_atomic = P_UNKNOWN;
	fd = scratch_open(dirfd, O_DIRECT);
	if (fd < 0) {
		if (!transient(errno))
			p->rwf_atomic = P_NO;  /* no O_TMPFILE or no O_DIRECT */
		return;
	}
	if (oa_xstatx(fd, STATX_DIOALIGN | STATX_WRITE_ATOMIC, &sx) == 0) {
		if (sx.stx_mask & STATX_WRITE_ATOMIC) {
			p->awu_min = sx.stx_atomic_write_unit_min;
			p->awu_max = sx.stx_atomic_write_unit_max;
			p->awu_segs = sx.stx_atomic_write_segments_max;
		}
		if ((sx.stx_mask & STATX_DIOALIGN) &&
		    sx.stx_dio_mem_align > mem_align)
			mem_align = sx.stx_dio_mem_align;
	}
	if (unit == 0)
		unit = p->awu_min;
	/* the kernel takes only a power of two; nothing to try without one */
	if (unit == 0 || (unit & (unit - 1)) != 0 || unit > (1u << 30)) {
		p->rwf_atomic = P_NO;
		goto out;
	}
	if (mem_align < 4096)
		mem_align = 4096;
	if (posix_memalign(&buf, mem_align, unit) != 0) {
		buf = NULL;
		goto out;
	}
	memset(buf, 0x3c, unit);

	iov.iov_base = buf;
	iov.iov_len = unit;
	if (!oa_sys->pwritev2) {
		errno = ENOSYS;
		r = -1;
	} else {
		do
			r = oa_sys->pwritev2(fd, &iov, 1, 0, RWF_ATOMIC);
		while (r < 0 && errno == EINTR);
	}
	if (r >= 0)
		p->rwf_atomic = (size_t)r == unit ? P_YES : P_NO;
	else
		p->rwf_atomic = outcome(0);
out:
	oa_xclose(fd);
	free(buf);
}

/*
 * How far the device itself writes atomically.  XFS (6.16+) takes RWF_ATOMIC
 * writes that the device cannot do untorn by writing them out of place
 * (copy-on-write, then a remap transaction and a log force): correct, but
 * dearer than a journal commit, which costs one buffered write and one
 * flush (measured on a loop device: 1.4x a pwrite+fdatasync for a 4 KiB
 * RWF_ATOMIC write, 0.8x for the journal).  statx's
 * stx_atomic_write_unit_max_opt names the boundary where the device does
 * part of the range; where it is 0 ("no boundary") the block device's queue
 * limit in sysfs says whether the device does any (0: none, every atomic
 * write is the file system's).  UINT32_MAX: not known (no such device in
 * sysfs, e.g. an anonymous device or no /sys): trust the kernel's unit.
 */
static uint32_t dev_atomic_max(dev_t dev)
{
	static const char *const fmt[] = {
		"/sys/dev/block/%u:%u/queue/atomic_write_unit_max_bytes",
		/* a partition: its disk's queue */
		"/sys/dev/block/%u:%u/../queue/atomic_write_unit_max_bytes",
	};
	char path[96], buf[32];

	for (size_t i = 0; i < sizeof(fmt) / sizeof(fmt[0]); i++) {
		snprintf(path, sizeof(path), fmt[i], major(dev), minor(dev));
		int fd = oa_xopenat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
		if (fd < 0)
			continue;
		ssize_t n = oa_xpread(fd, buf, sizeof(buf) - 1, 0);
		oa_xclose(fd);
		if (n <= 0)
			continue;
		buf[n] = 0;
		char *end;
		errno = 0;
		unsigned long long v = strtoull(buf, &end, 10);
		if (errno || end == buf || (*end && *end != '\n'))
			continue;
		return v < UINT32_MAX ? (uint32_t)v : UINT32_MAX - 1;
	}
	return UINT32_MAX;
}

/* ---- the cache: one entry per file system seen ---- */

/*
 * A file system is known by its device number; a device number can be
 * reused by the next file system mounted (loop devices, anonymous devices
 * of tmpfs), so the key also holds its f_fsid and, where statx tells, the
 * mount's ID (STATX_MNT_ID_UNIQUE is never reused, Linux 6.8+).
 */
struct fs_key {
	dev_t dev;
	unsigned long type;
	fsid_t fsid;
	uint32_t mnt_mask;   /* STATX_MNT_ID, STATX_MNT_ID_UNIQUE or 0 */
	uint64_t mnt_id;
};

#define CACHE_SLOTS 16

static struct {
	bool used;
	struct fs_key key;
	struct probe p;
} cache[CACHE_SLOTS];
static unsigned cache_next;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

/* fork: the cache's lock is taken around it, so that a child forked while
 * another thread probed never finds it held (its only thread is the one
 * that forked). */
static void cache_prepare(void)
{
	pthread_mutex_lock(&cache_lock);
}

static void cache_release(void)
{
	pthread_mutex_unlock(&cache_lock);
}

static void cache_init(void)
{
	pthread_atfork(cache_prepare, cache_release, cache_release);
}

static bool key_eq(const struct fs_key *a, const struct fs_key *b)
{
	return a->dev == b->dev && a->type == b->type &&
	       memcmp(&a->fsid, &b->fsid, sizeof(a->fsid)) == 0 &&
	       a->mnt_mask == b->mnt_mask && a->mnt_id == b->mnt_id;
}

static bool cache_get(const struct fs_key *k, struct probe *p)
{
	bool hit = false;
	pthread_once(&cache_once, cache_init);
	pthread_mutex_lock(&cache_lock);
	for (unsigned i = 0; i < CACHE_SLOTS; i++)
		if (cache[i].used && key_eq(&cache[i].key, k)) {
			*p = cache[i].p;
			hit = true;
			break;
		}
	pthread_mutex_unlock(&cache_lock);
	return hit;
}

static void cache_put(const struct fs_key *k, const struct probe *p)
{
	pthread_once(&cache_once, cache_init);
	pthread_mutex_lock(&cache_lock);
	for (unsigned i = 0; i < CACHE_SLOTS; i++)
		if (cache[i].used && key_eq(&cache[i].key, k)) {
			pthread_mutex_unlock(&cache_lock);
			return;        /* another thread probed meanwhile */
		}
	unsigned i = cache_next++ % CACHE_SLOTS;
	cache[i].used = true;
	cache[i].key = *k;
	cache[i].p = *p;
	pthread_mutex_unlock(&cache_lock);
}

/*
 * The probes for the file system of the file.  Scratch files go in the
 * journal directory when it is on that file system, else in the file's own
 * directory; a probe that cannot be run reports 0 and is not cached.
 */
static void probes(struct oa_file *f, const struct fs_key *k, size_t blk,
		   uint32_t awu_min, uint32_t mem_align, struct probe *p)
{
	struct stat st;
	int dirfd = -1;

	if (cache_get(k, p))
		return;

	memset(p, 0, sizeof(*p));
	p->reflink = p->exchange = p->rwf_atomic = P_UNKNOWN;
	p->awu_dev = dev_atomic_max(k->dev);
	if (f->dfd >= 0 && oa_xfstat(f->dfd, &st) == 0 && st.st_dev == k->dev)
		dirfd = f->dfd;
	else if (f->tdirfd >= 0 && oa_xfstat(f->tdirfd, &st) == 0 &&
		 st.st_dev == k->dev)
		dirfd = f->tdirfd;
	if (dirfd >= 0) {
		probe_clone_exchange(dirfd, blk, p);
		probe_rwf_atomic(dirfd, awu_min, mem_align, p);
	}
	if (p->reflink != P_UNKNOWN && p->exchange != P_UNKNOWN &&
	    p->rwf_atomic != P_UNKNOWN)
		cache_put(k, p);
}

/* ---- what the file system can do ---- */

/*
 * Is F's journal directory on another file system than the file (ST)?
 * Then the handle may neither clone nor exchange: no block can be cloned
 * from the journal into the file (EXDEV), and the exchange method would
 * make its shadow in the file's directory, the place a journal directory
 * keeps the library's files out of (it may not even be writable).
 */
static bool journal_elsewhere(struct oa_file *f, const struct stat *st)
{
	struct stat d;

	return f->dfd >= 0 && f->dfd != f->tdirfd &&
	       oa_xfstat(f->dfd, &d) == 0 && d.st_dev != st->st_dev;
}

/* A block device: no file system to probe (nothing may be created in
 * /dev), no reflink or exchange; its atomic write unit is the device's own
 * (statx on the device reports the queue's limits), its block the logical
 * sector. */
/* The direct I/O alignment and atomic write units statx reported. */
static void statx_caps(const struct oa_statx *sx, struct oa_caps *c)
{
	if (sx->stx_mask & STATX_DIOALIGN) {
		c->dio_mem = sx->stx_dio_mem_align;
		c->dio_off = sx->stx_dio_offset_align;
	}
	if (sx->stx_mask & STATX_WRITE_ATOMIC) {
		c->awu_min = sx->stx_atomic_write_unit_min;
		c->awu_max = sx->stx_atomic_write_unit_max;
		c->awu_segs = sx->stx_atomic_write_segments_max;
	}
}

static int blkdev_caps(struct oa_file *f, struct oa_caps *c)
{
	struct oa_statx sx;
	int ssz = 0;
	if (oa_sys->ioctl(f->tfd, BLKSSZGET, &ssz) == 0 && ssz > 0)
		c->blk = (uint32_t)ssz;
	if (oa_xstatx(f->tfd, STATX_DIOALIGN | STATX_WRITE_ATOMIC, &sx) == 0)
		statx_caps(&sx, c);
	c->awu_hw = c->awu_max;
	c->rwf_atomic = c->awu_max > 0;
	return 0;
}

int oa_caps_get(struct oa_file *f, struct oa_caps *c)
{
	struct statfs sfs;
	struct oa_statx sx;
	struct stat st;
	struct fs_key key;
	struct probe p;
	uint32_t max_opt = 0;

	memset(c, 0, sizeof(*c));
	if (f->blkdev)
		return blkdev_caps(f, c);
	if (oa_sys->fstatfs(f->tfd, &sfs) < 0 || oa_xfstat(f->tfd, &st) < 0)
		return -1;
	c->fs_magic = (unsigned long)sfs.f_type;
	c->blk = sfs.f_bsize > 0 && (uint64_t)sfs.f_bsize <= UINT32_MAX
		 ? (uint32_t)sfs.f_bsize : 0;

	/* direct I/O alignment and atomic write units of the file */
	memset(&key, 0, sizeof(key));
	if (oa_xstatx(f->tfd, STATX_DIOALIGN | STATX_WRITE_ATOMIC |
			STATX_MNT_ID | STATX_MNT_ID_UNIQUE, &sx) == 0) {
		statx_caps(&sx, c);
		if (sx.stx_mask & STATX_WRITE_ATOMIC)
			max_opt = sx.stx_atomic_write_unit_max_opt;
		key.mnt_mask = sx.stx_mask & (STATX_MNT_ID | STATX_MNT_ID_UNIQUE);
		if (key.mnt_mask)
			key.mnt_id = sx.stx_mnt_id;
	} else {
		int e = errno;
		/* no statx (old kernel, seccomp): report what we cannot see
		 * as 0; anything else is a real failure */
		if (e != ENOSYS && e != EINVAL && e != EOPNOTSUPP && e != EPERM)
			return -1;
	}

	/* what was seen to work */
	key.dev = st.st_dev;
	key.type = c->fs_magic;
	key.fsid = sfs.f_fsid;
	size_t blk = c->blk;
	if (blk < 512 || blk > (1u << 20) || (blk & (blk - 1)) != 0)
		blk = 4096;
	probes(f, &key, blk, c->awu_min, c->dio_mem, &p);
	c->reflink = p.reflink == P_YES;
	c->exchange = p.exchange == P_YES;
	if (journal_elsewhere(f, &st) && (c->reflink || c->exchange)) {
		c->reflink = c->exchange = false;
		c->xdev = true;
	}
	c->rwf_atomic = p.rwf_atomic == P_YES;
	/* the part of the unit the device does itself (dev_atomic_max) */
	c->awu_hw = c->awu_max;
	if (max_opt && max_opt < c->awu_hw)
		c->awu_hw = max_opt;
	else if (!max_opt && p.awu_dev < c->awu_hw)
		c->awu_hw = p.awu_dev;
	if (c->awu_hw < c->awu_min)
		c->awu_hw = 0;
	return 0;
}

/* ---- oa_ioinfo ---- */
