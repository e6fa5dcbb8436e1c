/*
 * home.c - where a file's control file and journals live: its *home*.
 *
 * The journal belongs to the inode, not to the name the file was opened by
 * (docs/FORMAT.md, "The home").  Hard links, a rename before recovery, a
 * bind mount of the file: every name must find the same control file and
 * journals, or a commit made through one name is rolled back by a recovery
 * through another.  So the home is recorded on the inode itself, in the
 * extended attribute "user.oatomic" (H1 below), and every opener reads it
 * first; only a file that has none (never written with oatomic, or a file
 * system without user extended attributes) is found by its name, beside it.
 *
 * Invariants:
 *   H1  The home attribute names the file (inode number and generation), the
 *       home directory (its inode number; it is on the file's file system)
 *       and the prefix of the sidecar names (".NAME" or ".NAME.<ino>"), and
 *       the directory's path when it was recorded, for openers through a
 *       name in another directory.
 *   H2  It is durable (fsync of the file) before the control file is
 *       created or used by a writer, hence before any commit relies on it:
 *       after a crash every name leads to the journals that hold commits.
 *   H3  A home is never shared with another inode that is alive or has
 *       something to recover: a control file of another inode found beside
 *       a name is left to it, unless nobody has it open and its journals
 *       hold nothing newer than its checkpoint (then it is a leftover of a
 *       file gone or moved, or a clean copy); a writer then makes its home
 *       under ".NAME.<ino>".  One with something to recover is the home,
 *       and recovery refuses it (a copy of a crashed directory).
 *   H4  A home attribute whose inode is not this file's was copied with the
 *       file (cp -a, tar --xattrs): it is not ours, but it says which
 *       prefix the copied sidecars beside the copy have.
 *
 * A home that the attribute names but no name reaches (the directory was
 * renamed and the file moved elsewhere, or it is not visible in this mount
 * namespace) is ESTALE: the library cannot tell whether commits wait there,
 * so it neither says "clean" nor starts a second home.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "crc32c.h"
#include "internal.h"

#define OA_HOME_XATTR	"user.oatomic"
#define OA_HOME_MAGIC	"OAHOME1"
#define OA_HOME_FIXED	40
/* Paths longer than this are not recorded (the value must fit in one
 * block of ext4's attribute space); such a home is found only through a
 * name in its own directory. */
#define OA_HOME_PATH_MAX 3000

struct home {
	uint64_t ino, igen, dino;
	char prefix[NAME_MAX + 1];
	char dir[OA_HOME_PATH_MAX + 1];
};

/*
 * The attribute's value (little-endian):
 *   0  8  magic "OAHOME1\0"
 *   8  8  inode number of the file
 *  16  8  inode generation (0 where the file system has none)
 *  24  8  inode number of the home directory
 *  32  2  prefix length P
 *  34  2  directory path length D (0: not recorded)
 *  36  4  CRC-32C of bytes 0-35 and of the P + D bytes that follow
 *  40  P  prefix, then D bytes of the directory's absolute path
 */
static size_t home_encode(unsigned char *b, const struct home *h)
{
	size_t p = strlen(h->prefix), d = strlen(h->dir);
	memcpy(b, OA_HOME_MAGIC, 8);
	oa_put64(b + 8, h->ino);
	oa_put64(b + 16, h->igen);
	oa_put64(b + 24, h->dino);
	oa_put16(b + 32, (uint16_t)p);
	oa_put16(b + 34, (uint16_t)d);
	memcpy(b + OA_HOME_FIXED, h->prefix, p);
	memcpy(b + OA_HOME_FIXED + p, h->dir, d);
	uint32_t crc = oa_crc32c(0, b, 36);
	crc = oa_crc32c(crc, b + OA_HOME_FIXED, p + d);
	oa_put32(b + 36, crc);
	return OA_HOME_FIXED + p + d;
}

static int home_decode(const unsigned char *b, size_t n, struct home *h)
{
	if (n < OA_HOME_FIXED || memcmp(b, OA_HOME_MAGIC, 8) != 0)
		return -1;
	size_t p = oa_get16(b + 32), d = oa_get16(b + 34);
	if (p == 0 || p > NAME_MAX || d > OA_HOME_PATH_MAX ||
	    OA_HOME_FIXED + p + d != n)
		return -1;
	uint32_t crc = oa_crc32c(0, b, 36);
	crc = oa_crc32c(crc, b + OA_HOME_FIXED, p + d);
	if (crc != oa_get32(b + 36))
		return -1;
	h->ino = oa_get64(b + 8);
	h->igen = oa_get64(b + 16);
	h->dino = oa_get64(b + 24);
	memcpy(h->prefix, b + OA_HOME_FIXED, p);
	h->prefix[p] = 0;
	memcpy(h->dir, b + OA_HOME_FIXED + p, d);
	h->dir[d] = 0;
	if (strchr(h->prefix, '/') || memchr(h->prefix, 0, p) ||
	    memchr(h->dir, 0, d) || (d && h->dir[0] != '/'))
		return -1;
	return 0;
}

/* 1 and *H: the file carries a well-formed home attribute; 0: none (or one
 * we may not read, or a file system without them: *XATTRS false); -1 on a
 * real error. */
static int home_read(struct oa_file *f, struct home *h, bool *xattrs)
{
	unsigned char b[OA_HOME_FIXED + NAME_MAX + OA_HOME_PATH_MAX];
	ssize_t n = oa_xfgetxattr(f->tfd, OA_HOME_XATTR, b, sizeof(b));
	*xattrs = true;
	if (n < 0) {
		if (errno == ENOTSUP || errno == ENOSYS) {
			*xattrs = false;
			return 0;
		}
		/* ENODATA: none yet.  EACCES: a write-only file (user.*
		 * attributes need read permission): found by name.  ERANGE:
		 * not one of ours. */
		if (errno == ENODATA || errno == EACCES || errno == ERANGE)
			return 0;
		return -1;
	}
	return home_decode(b, (size_t)n, h) == 0 ? 1 : 0;
}

/* Record H on the file and make it durable (H1, H2). */
static int home_write(struct oa_file *f, const struct home *h)
{
	unsigned char b[OA_HOME_FIXED + NAME_MAX + OA_HOME_PATH_MAX];
	size_t n = home_encode(b, h);
	if (oa_xfsetxattr(f->tfd, OA_HOME_XATTR, b, n, 0) < 0)
		return -1;
	/* H2: an attribute is metadata, which fdatasync may leave behind. */
	return oa_xfsync(f->tfd);
}

/* The absolute path of directory DFD, or "" (not recorded) if unknown or
 * too long. */
static void dir_path(int dfd, char *out)
{
	char proc[64];
	ssize_t n;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", dfd);
	n = oa_sys->readlinkat(AT_FDCWD, proc, out, OA_HOME_PATH_MAX);
	if (n <= 0 || n >= OA_HOME_PATH_MAX || out[0] != '/' ||
	    memchr(out, 0, (size_t)n)) {
		out[0] = 0;
		return;
	}
	out[n] = 0;
	/* A directory removed meanwhile reads "/path (deleted)". */
	if (n > 10 && strcmp(out + n - 10, " (deleted)") == 0)
		out[0] = 0;
}

/* The recorded home directory: readable, or at least searchable (a 0711
 * directory still has names that can be opened). */
static int open_home_dir(const char *dir)
{
	int fd;
	if (!dir[0]) {
		errno = ENOENT;
		return -1;
	}
	fd = oa_xopenat(AT_FDCWD, dir, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0 && errno == EACCES)
		fd = oa_xopenat(AT_FDCWD, dir, O_PATH | O_DIRECTORY, 0);
	return fd;
}

/* Inode number of the control file PREFIX.oa in DFD: 1 and *INO, *IGEN;
 * 0 none; -1 error (EUCLEAN: damaged; the caller lets recovery say so). */
static int ctl_owner(struct oa_file *f, int dfd, const char *prefix,
		     uint64_t *ino, uint64_t *igen)
{
	char name[NAME_MAX + 1];
	struct oa_slot s;
	int fd, r;

	if (snprintf(name, sizeof(name), "%s.oa", prefix) >= (int)sizeof(name))
		return 0;
	fd = oa_xopenat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	r = oa_slot_read1(fd, OA_ID_OFF, OA_ID_MAGIC, &s);
	oa_xclose(fd);
	if (r != 0)
		return r < 0 ? -1 : 0;
	*ino = s.ino;
	*igen = s.igen;
	return 1;
}

/* H3: may F take the home PREFIX in F->dfd, whose control file belongs to
 * inode INO?  1: it is free (nobody has it open, nothing to recover); 0: it
 * is another file's; 2: it holds something to recover (the home stays
 * here, recovery reports it). */
static int foreign_home_state(struct oa_file *f, uint64_t ino, uint64_t igen)
{
	uint64_t mino = f->ino, migen = f->igen;
	int r;

	if (oa_ctl_open(f, false) < 0)
		return errno == ENOENT ? 1 : -1;
	r = oa_lock_held(f->cfd, OA_LOCK_OPEN, F_WRLCK);
	if (r == 0) {
		/* Look at it as its own file would. */
		f->ino = ino;
		f->igen = igen;
		r = oa_needs_recovery(f);
		f->ino = mino;
		f->igen = migen;
		if (r < 0 && errno != EUCLEAN && errno != EPERM)
			goto out;
		/* Damaged or unsafe counts as "something to recover": the
		 * home stays, and recovery reports it. */
		r = r == 0 ? 1 : 2;
	} else if (r > 0) {
		r = 0;
	}
out:
	oa_ctl_unmap(f);
	oa_xclose(f->cfd);
	f->cfd = -1;
	return r;
}

static int set_prefix(struct oa_file *f, const char *fmt, const char *base,
		      uint64_t ino)
{
	free(f->prefix);
	if (asprintf(&f->prefix, fmt, base, (unsigned long long)ino) < 0) {
		f->prefix = NULL;
		errno = ENOMEM;
		return -1;
	}
	if (strlen(f->prefix) + sizeof(".oaj-4095") > NAME_MAX + 1) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

/* A home beside the name, for a file that has none of its own yet.
 * Returns 0 (a home to record as the file's), 1 (the home for this open
 * only: another inode's with something to recover, which recovery then
 * reports, or a damaged one, whose owner is unknown; never recorded, H3),
 * or -1. */
static int home_by_name(struct oa_file *f, const char *base, bool xattrs)
{
	uint64_t ino, igen;
	int r;

	if (set_prefix(f, ".%s", base, 0) < 0)
		return -1;
	r = ctl_owner(f, f->dfd, f->prefix, &ino, &igen);
	if (r < 0)
		return errno == EUCLEAN ? 1 : -1;
	if (r == 0 || (ino == f->ino && igen == f->igen))
		return 0;
	/* Another inode's control file under this name (H3). */
	r = foreign_home_state(f, ino, igen);
	if (r < 0)
		return -1;
	if (r == 2)
		return 1;
	if (!xattrs)
		/* Without the attribute nobody could find a second home:
		 * the name's, as before homes were recorded. */
		return 0;
	/* Ours is another (for a reader: none, nothing to recover). */
	return set_prefix(f, ".%s.%llx", base, f->ino);
}

/* 0: F's home is set; 2: F has none of its own and RECORD is false (the
 * caller takes the home lock and asks again); -1: error. */
static int home_find(struct oa_file *f, const char *base, bool writer,
		     bool record)
{
	struct home h;
	struct stat dst;
	bool xattrs;
	int r;

	f->dfd = f->tdirfd;
	if (oa_xfstat(f->tdirfd, &dst) < 0)
		return -1;
	r = home_read(f, &h, &xattrs);
	if (r < 0)
		return -1;
	if (r == 1 && h.ino == f->ino && h.igen == f->igen) {
		/* H1: the file's own home.  Through a name in it (the usual
		 * case: no extra call), else by its recorded path. */
		if (dst.st_dev != f->dev || dst.st_ino != h.dino) {
			struct stat st;
			int fd = open_home_dir(h.dir);
			if (fd < 0 || oa_xfstat(fd, &st) < 0 ||
			    st.st_dev != f->dev || st.st_ino != h.dino) {
				oa_xclose(fd);
				errno = ESTALE;
				return -1;
			}
			f->dfd = fd;
		}
		free(f->prefix);
		f->prefix = strdup(h.prefix);
		if (!f->prefix) {
			errno = ENOMEM;
			return -1;
		}
		/* The recorded path is kept current at the first change
		 * (oa_home_refresh), not at every open. */
		f->home_refresh = writer && f->dfd == f->tdirfd;
		return 0;
	}
	/* No home of our own yet.  Sidecars live on the file's own file
	 * system: beside a bind-mounted file they would not. */
	if (dst.st_dev != f->dev) {
		if (!writer)
			return set_prefix(f, ".%s", base, 0);
		errno = EXDEV;
		return -1;
	}
	if (r == 1 && h.dino != dst.st_ino) {
		/* H4: copied with the file into another directory (in the
		 * same one, the recorded home is the original's own).  The
		 * copied sidecars, if they came along, are beside it under
		 * the recorded prefix: with something to recover, recovery
		 * reports them; clean and unused, they become ours. */
		uint64_t ino, igen;
		if (set_prefix(f, "%s", h.prefix, 0) < 0)
			return -1;
		r = ctl_owner(f, f->dfd, f->prefix, &ino, &igen);
		if (r < 0 && errno != EUCLEAN)
			return -1;
		if (r == 1 && ino == h.ino && igen == h.igen) {
			r = foreign_home_state(f, ino, igen);
			if (r < 0)
				return -1;
			if (r == 2 || (r == 1 && !writer))
				return 0;
			if (r == 1)
				goto record;
		}
	}
	r = home_by_name(f, base, xattrs);
	if (r < 0)
		return -1;
	if (r == 1 || !writer || !xattrs)
		return 0;
record:
	if (!record)
		return 2;
	/* H2: recorded and durable before the control file is made or a
	 * commit relies on it. */
	h.ino = f->ino;
	h.igen = f->igen;
	h.dino = dst.st_ino;
	snprintf(h.prefix, sizeof(h.prefix), "%s", f->prefix);
	dir_path(f->dfd, h.dir);
	if (home_write(f, &h) < 0) {
		/* A file system or file that takes no attribute after all:
		 * found by name. */
		if (errno == ENOTSUP || errno == EPERM || errno == EACCES)
			return 0;
		return -1;
	}
	return 0;
}

/* Two writers that find no home at once, through two names, must not make
 * two: the second records over the first, and the first's commits are
 * found by no name after a crash.  So a home is made under an OFD lock on
 * the file itself, far beyond any byte a program locks (SQLite's lock
 * bytes are at 1 GiB), and looked for again under it. */
#define OA_HOME_LOCK ((off_t)1 << 62)

void oa_home_refresh(struct oa_file *f)
{
	struct home h;
	bool xattrs;
	char now[OA_HOME_PATH_MAX + 1];

	if (!f->home_refresh)
		return;
	f->home_refresh = false;
	/* Keep the recorded path current (a renamed directory), so that
	 * names elsewhere still find it.  Best effort: the home itself is
	 * right either way. */
	if (home_read(f, &h, &xattrs) != 1 || h.ino != f->ino ||
	    h.igen != f->igen)
		return;
	dir_path(f->dfd, now);
	if (now[0] && strcmp(now, h.dir) != 0) {
		strcpy(h.dir, now);
		home_write(f, &h);
	}
}

int oa_home_find(struct oa_file *f, const char *base, bool writer)
{
	int r = home_find(f, base, writer, false);
	if (r != 2)
		return r;
	if (oa_lock(f->tfd, OA_HOME_LOCK, F_WRLCK, 1) < 0)
		return -1;
	r = home_find(f, base, writer, true);
	oa_lock(f->tfd, OA_HOME_LOCK, F_UNLCK, 0);
	return r;
}

int oa_home_leave(struct oa_file *f, const char *base)
{
	char leaving[NAME_MAX + 1];
	struct home h;
	struct stat dst;
	bool xattrs;
	int r;

	if (oa_xfstat(f->tdirfd, &dst) < 0)
		return -1;
	if (dst.st_dev != f->dev) {
		errno = EXDEV;
		return -1;
	}
	snprintf(leaving, sizeof(leaving), "%s", f->prefix);
	if (oa_lock(f->tfd, OA_HOME_LOCK, F_WRLCK, 1) < 0)
		return -1;
	r = home_read(f, &h, &xattrs);
	if (r < 0)
		goto out;
	if (!xattrs) {
		errno = EPERM;   /* nowhere to record a second home */
		r = -1;
		goto out;
	}
	if (f->dfd != f->tdirfd)
		oa_xclose(f->dfd);
	f->dfd = f->tdirfd;
	if (r == 1 && h.ino == f->ino && h.igen == f->igen &&
	    h.dino == dst.st_ino && strcmp(h.prefix, leaving) != 0) {
		/* Another opener moved first: go where it went. */
		r = set_prefix(f, "%s", h.prefix, 0);
		goto out;
	}
	/* ".NAME.<ino>", unless that is the home being left: then a name
	 * nobody can have planted in advance. */
	r = set_prefix(f, ".%s.%llx", base, f->ino);
	if (r == 0 && strcmp(f->prefix, leaving) == 0) {
		char tail[NAME_MAX + 1];
		snprintf(tail, sizeof(tail), "%s", leaving);
		r = set_prefix(f, "%s.%08llx", tail,
			       oa_random64() & 0xffffffff);
	}
	if (r < 0)
		goto out;
	h.ino = f->ino;
	h.igen = f->igen;
	h.dino = dst.st_ino;
	snprintf(h.prefix, sizeof(h.prefix), "%s", f->prefix);
	dir_path(f->dfd, h.dir);
	r = home_write(f, &h);
out:
	oa_lock(f->tfd, OA_HOME_LOCK, F_UNLCK, 0);
	return r;
}

/*
 * Block devices: a device has no inode of its own to hold a home, and its
 * /dev name (loop3, sdb) can change across reboots or go to another disk.
 * The caller names the journal directory; the sidecars' names there, and
 * the "inode" their header slots record, come from the device's stable
 * identity (FNV-1a, 64 bits, of the string below), so a journal is found
 * again under another /dev name and never replayed onto another disk:
 *   loop device   "loop:" its backing file's path and inode number
 *   device mapper "dm:" its UUID
 *   a disk        "wwid:" or "serial:" as sysfs reports it, and its size
 *   a partition   its disk's identity, ":part" its number and start sector
 * A device with none of these (a ram disk, an emulated one without a
 * serial number) is refused (ENODEV): nothing would tell it from another.
 */
static int sys_read(const char *path, char *buf, size_t n)
{
	int fd = oa_xopenat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
	ssize_t r;
	if (fd < 0)
		return -1;
	r = oa_xpread(fd, buf, n - 1, 0);
	oa_xclose(fd);
	if (r <= 0)
		return -1;
	while (r > 0 && (buf[r - 1] == '\n' || buf[r - 1] == ' '))
		r--;
	buf[r] = 0;
	return r > 0 ? 0 : -1;
}

static int disk_identity(const char *sys, char *out, size_t n)
{
	char p[PATH_MAX], v[PATH_MAX];
	struct stat st;
	snprintf(p, sizeof(p), "%s/loop/backing_file", sys);
	if (sys_read(p, v, sizeof(v)) == 0) {
		/* the file a loop device shows: its path and inode number */
		if (oa_sys->fstatat(AT_FDCWD, v, &st, 0) < 0)
			return -1;
		snprintf(out, n, "loop:%s:%llu", v, (unsigned long long)st.st_ino);
		return 0;
	}
	snprintf(p, sizeof(p), "%s/dm/uuid", sys);
	if (sys_read(p, v, sizeof(v)) == 0) {
		snprintf(out, n, "dm:%s", v);
		return 0;
	}
	static const char *const ids[] = { "wwid", "device/wwid", "device/serial",
					   "serial" };
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		char sz[32];
		snprintf(p, sizeof(p), "%s/%s", sys, ids[i]);
		if (sys_read(p, v, sizeof(v)) < 0)
			continue;
		snprintf(p, sizeof(p), "%s/size", sys);
		if (sys_read(p, sz, sizeof(sz)) < 0)
			sz[0] = 0;
		snprintf(out, n, "%s:%s:%s", ids[i], v, sz);
		return 0;
	}
	return -1;
}

int oa_blkdev_identity(dev_t rdev, uint64_t *id)
{
	char sys[96], p[PATH_MAX], ident[2 * PATH_MAX], part[32], start[32];
	snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u", major(rdev),
		 minor(rdev));
	snprintf(p, sizeof(p), "%s/partition", sys);
	if (sys_read(p, part, sizeof(part)) == 0) {
		char disk[PATH_MAX];
		snprintf(p, sizeof(p), "%s/start", sys);
		snprintf(disk, sizeof(disk), "%s/..", sys);
		if (sys_read(p, start, sizeof(start)) < 0 ||
		    disk_identity(disk, ident, sizeof(ident) - 64) < 0) {
			errno = ENODEV;
			return -1;
		}
		size_t l = strlen(ident);
		snprintf(ident + l, sizeof(ident) - l, ":part%s:%s", part, start);
	} else if (disk_identity(sys, ident, sizeof(ident)) < 0) {
		errno = ENODEV;
		return -1;
	}
	uint64_t h = 0xcbf29ce484222325ull;
	for (const unsigned char *c = (const unsigned char *)ident; *c; c++)
		h = (h ^ *c) * 0x100000001b3ull;
	*id = h ? h : 1;
	return 0;
}
