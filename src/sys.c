/*
 * sys.c - the I/O seam: the real Linux table and the counting wrappers the
 * rest of the library calls.  Nothing outside this file calls the kernel for
 * file-system work.
 */
#include <errno.h>
#include <linux/fs.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/ioctl.h>
#include <sys/sysmacros.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "oatomic-private.h"
#include "sys.h"

static int linux_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	return openat(dirfd, path, flags, mode);
}

static int linux_lock(int fd, int cmd, struct flock *fl)
{
	return fcntl(fd, cmd, fl);
}

static int linux_ioctl(int fd, unsigned long req, void *arg)
{
	return ioctl(fd, req, arg);
}

static int linux_statx(int dirfd, const char *path, int flags, unsigned mask,
		       void *buf)
{
	return (int)syscall(SYS_statx, dirfd, path, flags, mask, buf);
}

static int linux_fstatat(int dirfd, const char *path, struct stat *st, int fl)
{
	return fstatat(dirfd, path, st, fl);
}

static ssize_t linux_getdents64(int fd, void *buf, size_t n)
{
	return syscall(SYS_getdents64, fd, buf, n);
}

static int linux_writeback(int fd, off_t off, off_t len)
{
	return sync_file_range(fd, off, len, SYNC_FILE_RANGE_WRITE);
}

static int linux_drop(int fd, off_t off, off_t len)
{
	return posix_fadvise(fd, off, len, POSIX_FADV_DONTNEED);
}

static int linux_prefetch(int fd, off_t off, off_t len)
{
	return posix_fadvise(fd, off, len, POSIX_FADV_WILLNEED);
}

const struct oa_sysops oa_sys_linux = {
	.openat = linux_openat,
	.close = close,
	.pread = pread,
	.pwrite = pwrite,
	.pwritev = pwritev,
	.fsync = fsync,
	.fdatasync = fdatasync,
	.ftruncate = ftruncate,
	.lseek = lseek,
	.fallocate = fallocate,
	.fstat = fstat,
	.fstatat = linux_fstatat,
	.fstatfs = fstatfs,
	.fchown = fchown,
	.fchmod = fchmod,
	.unlinkat = unlinkat,
	.linkat = linkat,
	.readlinkat = readlinkat,
	.getdents64 = linux_getdents64,
	.lock = linux_lock,
	.ioctl = linux_ioctl,
	.statx = linux_statx,
	.pwritev2 = pwritev2,
	.mmap = mmap,
	.munmap = munmap,
	.writeback = linux_writeback,
	.drop = linux_drop,
	.prefetch = linux_prefetch,
	.fgetxattr = fgetxattr,
	.fsetxattr = fsetxattr,
	.fremovexattr = fremovexattr,
};

const struct oa_sysops *oa_sys = &oa_sys_linux;

static _Atomic uint64_t st_flushes, st_bytes_written, st_writes, st_bytes_read,
	st_xp_batches, st_xp_members;

const struct oa_sysops *oa__set_sysops(const struct oa_sysops *ops)
{
	const struct oa_sysops *old = oa_sys;
	oa_sys = ops ? ops : &oa_sys_linux;
	return old;
}

void oa__stats_get(struct oa_stats *out)
{
	out->flushes = st_flushes;
	out->bytes_written = st_bytes_written;
	out->writes = st_writes;
	out->bytes_read = st_bytes_read;
	out->xp_batches = st_xp_batches;
	out->xp_members = st_xp_members;
}

void oa__stats_reset(void)
{
	st_flushes = st_bytes_written = st_writes = st_bytes_read = 0;
	st_xp_batches = st_xp_members = 0;
}

/*
 * fork: a child shares the parent's open file descriptions, and with them
 * the parent's OFD locks.  Whatever a child did with them (take, convert or
 * drop a lock) would act on the parent's behalf, so handles are marked with
 * the generation they were opened in and the child's handlers count one up.
 */
static unsigned fork_gen;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void fork_child(void)
{
	fork_gen++;
}

static void fork_register(void)
{
	pthread_atfork(NULL, NULL, fork_child);
}

unsigned oa_fork_gen(void)
{
	pthread_once(&fork_once, fork_register);
	return fork_gen;
}

int oa_xopenat(int dirfd, const char *path, int flags, mode_t mode)
{
	int fd;
	do
		fd = oa_sys->openat(dirfd, path, flags | O_CLOEXEC, mode);
	while (fd < 0 && errno == EINTR);
	/* Never a standard descriptor: a program started with 0, 1 or 2
	 * closed (cron, a daemon, `2>&-`) would print into the file, or
	 * into the control file, whatever it meant for its output. */
	if (fd >= 0 && fd <= 2) {
		int nfd = fcntl(fd, F_DUPFD_CLOEXEC, 3), e = errno;
		oa_sys->close(fd);
		errno = e;
		fd = nfd;
	}
	return fd;
}

int oa_xclose(int fd)
{
	int e = errno, r = 0;
	if (fd >= 0)
		r = oa_sys->close(fd);
	errno = e;
	return r;
}

ssize_t oa_xpread(int fd, void *buf, size_t n, off_t off)
{
	ssize_t r = oa_sys->pread(fd, buf, n, off);
	if (r > 0)
		st_bytes_read += (uint64_t)r;
	return r;
}

ssize_t oa_xpwrite(int fd, const void *buf, size_t n, off_t off)
{
	ssize_t r = oa_sys->pwrite(fd, buf, n, off);
	st_writes++;
	if (r > 0)
		st_bytes_written += (uint64_t)r;
	return r;
}

void oa_stats_flush(void)
{
	st_flushes++;
}

void oa_stats_xp(uint64_t members)
{
	st_xp_batches++;
	st_xp_members += members;
}

ssize_t oa_xpwritev2(int fd, const struct iovec *iov, int cnt, off_t off,
		     int flags, bool flush)
{
	ssize_t r;
	if (!oa_sys->pwritev2) {
		errno = EOPNOTSUPP;
		return -1;
	}
	st_writes++;
	if (flush)
		st_flushes++;
	r = oa_sys->pwritev2(fd, iov, cnt, off, flags);
	if (r > 0)
		st_bytes_written += (uint64_t)r;
	return r;
}

ssize_t oa_xpwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
	ssize_t r = oa_sys->pwritev(fd, iov, cnt, off);
	st_writes++;
	if (r > 0)
		st_bytes_written += (uint64_t)r;
	return r;
}

int oa_pread_full(int fd, void *buf, size_t n, off_t off)
{
	char *p = buf;
	while (n > 0) {
		ssize_t r = oa_xpread(fd, p, n, off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (r == 0) {
			errno = EIO;
			return -1;
		}
		p += r;
		n -= (size_t)r;
		off += r;
	}
	return 0;
}

int oa_pwrite_full(int fd, const void *buf, size_t n, off_t off)
{
	const char *p = buf;
	while (n > 0) {
		ssize_t r = oa_xpwrite(fd, p, n < OA_WRITE_MAX ? n : OA_WRITE_MAX,
				       off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (r == 0) {
			errno = ENOSPC;
			return -1;
		}
		p += r;
		n -= (size_t)r;
		off += r;
	}
	return 0;
}

int oa_pwritev_full(int fd, const struct iovec *iov, int cnt, off_t off)
{
	struct iovec local[64];
	while (cnt > 0) {
		int n = cnt < 64 ? cnt : 64;
		memcpy(local, iov, sizeof(*iov) * (size_t)n);
		struct iovec *v = local;
		int vn = n;
		while (vn > 0) {
			/* At most OA_WRITE_MAX bytes a call: the first iovecs,
			 * the last of them cut short for the call. */
			struct iovec cut;
			size_t sum = 0;
			int k = 0;
			while (k < vn && sum + v[k].iov_len <= OA_WRITE_MAX)
				sum += v[k++].iov_len;
			ssize_t w;
			if (k == vn) {
				w = oa_xpwritev(fd, v, k, off);
			} else if (k > 0) {
				cut = v[k];
				v[k].iov_len = OA_WRITE_MAX - sum;
				w = oa_xpwritev(fd, v, k + 1, off);
				v[k] = cut;
			} else {
				cut = (struct iovec){ v->iov_base, OA_WRITE_MAX };
				w = oa_xpwritev(fd, &cut, 1, off);
			}
			if (w < 0) {
				if (errno == EINTR)
					continue;
				return -1;
			}
			if (w == 0) {
				errno = ENOSPC;
				return -1;
			}
			off += w;
			while (vn > 0 && (size_t)w >= v->iov_len) {
				w -= (ssize_t)v->iov_len;
				v++;
				vn--;
			}
			if (vn > 0) {
				v->iov_base = (char *)v->iov_base + w;
				v->iov_len -= (size_t)w;
			}
		}
		iov += n;
		cnt -= n;
	}
	return 0;
}

ssize_t oa_xfgetxattr(int fd, const char *name, void *buf, size_t n)
{
	if (!oa_sys->fgetxattr) {
		errno = ENOTSUP;
		return -1;
	}
	return oa_sys->fgetxattr(fd, name, buf, n);
}

int oa_xfremovexattr(int fd, const char *name)
{
	if (!oa_sys->fremovexattr) {
		errno = ENOTSUP;
		return -1;
	}
	return oa_sys->fremovexattr(fd, name);
}

int oa_xfsetxattr(int fd, const char *name, const void *buf, size_t n,
		  int flags)
{
	if (!oa_sys->fsetxattr) {
		errno = ENOTSUP;
		return -1;
	}
	return oa_sys->fsetxattr(fd, name, buf, n, flags);
}

int oa_xioctl(int fd, unsigned long req, void *arg)
{
	if (!oa_sys->ioctl) {
		errno = ENOTTY;
		return -1;
	}
	return oa_sys->ioctl(fd, req, arg);
}

/*
 * Flushes are never retried: after a failed fsync Linux marks the pages
 * clean, so a second call would return 0 for data that never reached the
 * disk (the fsyncgate lesson).  EINTR is not returned by fsync on Linux file
 * systems; if a table returns it, it is passed up like any failure.
 */
int oa_xfsync(int fd)
{
	st_flushes++;
	return oa_sys->fsync(fd);
}

int oa_xfdatasync(int fd)
{
	st_flushes++;
	return oa_sys->fdatasync(fd);
}

void oa_xwriteback(int fd, uint64_t off, uint64_t len)
{
	int e = errno;
	if (oa_sys->writeback)
		oa_sys->writeback(fd, (off_t)off, (off_t)len);
	errno = e;
}

void oa_xdrop(int fd, uint64_t off, uint64_t len)
{
	int e = errno;
	if (oa_sys->drop)
		oa_sys->drop(fd, (off_t)off, (off_t)len);
	errno = e;
}

void oa_xprefetch(int fd, uint64_t off, uint64_t len)
{
	int e = errno;
	/* In steps of 2 MiB: the kernel reads at most the device's
	 * readahead window (read_ahead_kb, here 2.5 MiB) per call. */
	for (uint64_t d = 0; oa_sys->prefetch && d < len; d += 2u << 20)
		oa_sys->prefetch(fd, (off_t)(off + d),
				 (off_t)(len - d < (2u << 20) ? len - d
							     : 2u << 20));
	errno = e;
}

void oa_wb_note(struct oa_wb *w, int fd, uint64_t off, uint64_t len)
{
	if (w->hi == 0 || off < w->lo || off > w->hi) {
		/* not contiguous with what gathered: start afresh */
		w->lo = off;
		w->hi = off + len;
	} else if (off + len > w->hi) {
		w->hi = off + len;
	}
	if (w->hi - w->lo >= OA_WB_CHUNK) {
		oa_xwriteback(fd, w->lo, w->hi - w->lo);
		w->lo = w->hi;
	}
}

int oa_xftruncate(int fd, off_t len)
{
	struct rlimit rl;
	uint64_t size;
	int r;
	/* Growth past the file size limit (RLIMIT_FSIZE): EFBIG, as
	 * ftruncate(2) gives, but without the SIGXFSZ it sends first, which
	 * kills a program that never asked for the library's files (the
	 * control file's first growth, a journal's). */
	if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    (uint64_t)len > (uint64_t)rl.rlim_cur &&
	    (oa_xfsize(fd, &size) < 0 || size < (uint64_t)len)) {
		errno = EFBIG;
		return -1;
	}
	do
		r = oa_sys->ftruncate(fd, len);
	while (r < 0 && errno == EINTR);
	return r;
}

int oa_xfstat_all(int fd, struct stat *st)
{
	return oa_sys->fstat(fd, st);
}

/* What fstat gives but the timestamps (zero), for the reasons said at
 * oa_xstatx: the library asks its files' identity, type, owner, mode,
 * links and size at every open and at several places of a commit. */
int oa_xfstat(int fd, struct stat *st)
{
	const unsigned want = OA_STATX_TYPE | OA_STATX_MODE | OA_STATX_NLINK |
			      OA_STATX_UID | OA_STATX_GID | OA_STATX_INO |
			      OA_STATX_SIZE | OA_STATX_BLOCKS;
	struct oa_statx sx;
	if (oa_xstatx(fd, want, &sx) == 0) {
		if ((sx.stx_mask & want) == want) {
			memset(st, 0, sizeof(*st));
			st->st_dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
			st->st_ino = (ino_t)sx.stx_ino;
			st->st_mode = sx.stx_mode;
			st->st_nlink = sx.stx_nlink;
			st->st_uid = sx.stx_uid;
			st->st_gid = sx.stx_gid;
			st->st_rdev = makedev(sx.stx_rdev_major,
					      sx.stx_rdev_minor);
			st->st_size = (off_t)sx.stx_size;
			st->st_blksize = (blksize_t)sx.stx_blksize;
			st->st_blocks = (blkcnt_t)sx.stx_blocks;
			return 0;
		}
	} else if (errno != ENOSYS && errno != EPERM) {
		return -1;
	}
	return oa_sys->fstat(fd, st);
}

/* Why not fstat: since Linux 6.13 (multigrain timestamps, ext4, XFS, Btrfs,
 * tmpfs) a stat that reports ctime or mtime marks the inode "queried", and
 * the next write to it must then take a fine-grained timestamp, which
 * dirties the inode and logs it.  A commit asked the file's size twice and
 * then wrote into it: on ext4 that cost 45 us of a 210 us 4 KiB commit
 * (measured 2026-12-04, /tmp/perf/jw5.c, interleaved blocks).  statx with
 * STATX_SIZE only leaves the mark alone.  fstat where statx is missing
 * (old kernel, seccomp) or does not give the size. */
int oa_xstatx(int fd, unsigned mask, struct oa_statx *sx)
{
	memset(sx, 0, sizeof(*sx));
	if (!oa_sys->statx) {
		errno = ENOSYS;
		return -1;
	}
	return oa_sys->statx(fd, "", AT_EMPTY_PATH, mask, sx);
}

/* A block device's size is its capacity (its st_size is 0). */
static int blk_size(int fd, uint64_t *size)
{
	uint64_t v = 0;
	if (oa_sys->ioctl(fd, BLKGETSIZE64, &v) < 0)
		return -1;
	*size = v;
	return 0;
}

int oa_xfsize(int fd, uint64_t *size)
{
	struct oa_statx sx;
	struct stat st;
	if (oa_xstatx(fd, OA_STATX_SIZE | OA_STATX_TYPE, &sx) == 0) {
		if ((sx.stx_mask & OA_STATX_TYPE) && S_ISBLK(sx.stx_mode))
			return blk_size(fd, size);
		if (sx.stx_mask & OA_STATX_SIZE) {
			*size = sx.stx_size;
			return 0;
		}
	} else if (errno != ENOSYS && errno != EPERM) {
		return -1;
	}
	if (oa_sys->fstat(fd, &st) < 0)
		return -1;
	if (S_ISBLK(st.st_mode))
		return blk_size(fd, size);
	*size = (uint64_t)st.st_size;
	return 0;
}

int oa_lock_held(int fd, off_t byte, short type)
{
	struct flock fl = {
		.l_type = type,
		.l_whence = SEEK_SET,
		.l_start = byte,
		.l_len = 1,
		.l_pid = 0,
	};
	if (oa_sys->lock(fd, F_OFD_GETLK, &fl) < 0)
		return -1;
	return fl.l_type != F_UNLCK;
}

int oa_lock(int fd, off_t byte, short type, int wait)
{
	struct flock fl = {
		.l_type = type,
		.l_whence = SEEK_SET,
		.l_start = byte,
		.l_len = 1,
		.l_pid = 0,     /* required for OFD locks */
	};
	int r, e = errno;
	do
		r = oa_sys->lock(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl);
	while (r < 0 && errno == EINTR && wait);
	/* Unlocking is what failure paths do on their way out: it keeps the
	 * errno they are returning (nothing can be done about a failed
	 * unlock; the descriptor's close releases the lock anyway). */
	if (type == F_UNLCK) {
		errno = e;
		return 0;
	}
	if (r < 0 && errno == EACCES)
		errno = EAGAIN;
	return r;
}


/* ---- kill points (tests) ---- */

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

void oa_assert_fail(const char *what, const char *file, int line,
		    const char *func)
{
	fprintf(stderr, "oatomic: %s:%d: %s: assertion failed: %s\n", file,
		line, func, what);
	abort();
}
