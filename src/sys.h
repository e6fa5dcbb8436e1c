/*
 * sys.h - the one seam between oatomic and the kernel.
 *
 * Every file-system call the library makes goes through the table `oa_sys`
 * points at.  Tests put a simulated disk or a fault injector underneath by
 * installing another table (oa__set_sysops); the library's logic never calls
 * the kernel directly.  Each operation returns what the system call returns
 * (-1 and errno on failure).
 *
 * The default table also counts flushes and bytes written, which the
 * benchmark reports (oa__stats).
 */
#ifndef OA_SYS_H
#define OA_SYS_H

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <linux/ioctl.h>
#include <linux/types.h>

struct statfs;

/* Kernel constants newer than glibc's headers (support is detected at run
 * time, never assumed): pwritev2's untorn write (Linux 6.11) and the one
 * file system whose magic the library acts on. */
#ifndef RWF_ATOMIC
#define RWF_ATOMIC 0x00000040
#endif
#define OA_BTRFS_MAGIC 0x9123683EUL

/* ---- XFS range exchange (fs/xfs/libxfs/xfs_fs.h, Linux 6.10+) ---- */

struct oa_xfs_exchange_range {
	__s32 file1_fd;
	__u32 pad;             /* must be zero */
	__u64 file1_offset;
	__u64 file2_offset;
	__u64 length;
	__u64 flags;           /* XFS_EXCHANGE_RANGE_* */
};

_Static_assert(offsetof(struct oa_xfs_exchange_range, file1_offset) == 8,
	      "file1_offset");
_Static_assert(offsetof(struct oa_xfs_exchange_range, flags) == 32, "flags");
_Static_assert(sizeof(struct oa_xfs_exchange_range) == 40,
	      "struct xfs_exchange_range");

/* _IOW, not _IOWR: changed before 6.10 final (the kernel only reads it). */
#define OA_XFS_IOC_EXCHANGE_RANGE \
	_IOW('X', 129, struct oa_xfs_exchange_range)

#define OA_XFS_EXCHANGE_TO_EOF        (1ull << 0)
#define OA_XFS_EXCHANGE_DSYNC         (1ull << 1)
#define OA_XFS_EXCHANGE_DRY_RUN       (1ull << 2)
#define OA_XFS_EXCHANGE_FILE1_WRITTEN (1ull << 3)

/* statx(2) as the kernel lays it out (include/uapi/linux/stat.h): glibc's
 * struct statx predates the fields we need, so our own copy. */
#define OA_STATX_SIZE 0x00000200U   /* STATX_SIZE */
#define OA_STATX_TYPE 0x00000001U   /* STATX_TYPE */
#define OA_STATX_MODE 0x00000002U   /* STATX_MODE */
#define OA_STATX_UID  0x00000008U   /* STATX_UID */
#define OA_STATX_GID  0x00000010U   /* STATX_GID */
#define OA_STATX_INO  0x00000100U   /* STATX_INO */
#define OA_STATX_NLINK  0x00000004U /* STATX_NLINK */
#define OA_STATX_BLOCKS 0x00000400U /* STATX_BLOCKS */
#define OA_STATX_MNT_ID_UNIQUE 0x00004000U   /* Linux 6.8 */
/* type, mode and owner: what a file's identity and the clean mark need,
 * no timestamps (sys.c, oa_xstatx: asking for them costs the next write) */
#define OA_STATX_OWNER (OA_STATX_TYPE | OA_STATX_MODE | OA_STATX_UID | \
			OA_STATX_GID)
#ifndef AT_EMPTY_PATH
#define AT_EMPTY_PATH 0x1000
#endif

struct oa_statx_ts {
	int64_t tv_sec;
	uint32_t tv_nsec;
	int32_t reserved;
};

struct oa_statx {
	uint32_t stx_mask;                       /* 0x00 */
	uint32_t stx_blksize;
	uint64_t stx_attributes;
	uint32_t stx_nlink;                      /* 0x10 */
	uint32_t stx_uid;
	uint32_t stx_gid;
	uint16_t stx_mode;
	uint16_t spare0;
	uint64_t stx_ino;                        /* 0x20 */
	uint64_t stx_size;
	uint64_t stx_blocks;
	uint64_t stx_attributes_mask;
	struct oa_statx_ts stx_atime;            /* 0x40 */
	struct oa_statx_ts stx_btime;
	struct oa_statx_ts stx_ctime;
	struct oa_statx_ts stx_mtime;
	uint32_t stx_rdev_major;                 /* 0x80 */
	uint32_t stx_rdev_minor;
	uint32_t stx_dev_major;
	uint32_t stx_dev_minor;
	uint64_t stx_mnt_id;                     /* 0x90 */
	uint32_t stx_dio_mem_align;
	uint32_t stx_dio_offset_align;
	uint64_t stx_subvol;                     /* 0xa0 */
	uint32_t stx_atomic_write_unit_min;
	uint32_t stx_atomic_write_unit_max;
	uint32_t stx_atomic_write_segments_max;  /* 0xb0 */
	uint32_t stx_dio_read_offset_align;
	uint32_t stx_atomic_write_unit_max_opt;
	uint32_t spare2;
	uint64_t spare3[8];                      /* 0xc0 */
};                                               /* 0x100 */

_Static_assert(sizeof(struct oa_statx_ts) == 16, "statx_timestamp");
_Static_assert(offsetof(struct oa_statx, stx_mode) == 0x1c, "stx_mode");
_Static_assert(offsetof(struct oa_statx, stx_atime) == 0x40, "stx_atime");
_Static_assert(offsetof(struct oa_statx, stx_rdev_major) == 0x80, "stx_rdev");
_Static_assert(offsetof(struct oa_statx, stx_mnt_id) == 0x90, "stx_mnt_id");
_Static_assert(offsetof(struct oa_statx, stx_dio_mem_align) == 0x98,
	      "stx_dio_mem_align");
_Static_assert(offsetof(struct oa_statx, stx_dio_offset_align) == 0x9c,
	      "stx_dio_offset_align");
_Static_assert(offsetof(struct oa_statx, stx_subvol) == 0xa0, "stx_subvol");
_Static_assert(offsetof(struct oa_statx, stx_atomic_write_unit_min) == 0xa8,
	      "stx_atomic_write_unit_min");
_Static_assert(offsetof(struct oa_statx, stx_atomic_write_unit_max) == 0xac,
	      "stx_atomic_write_unit_max");
_Static_assert(offsetof(struct oa_statx, stx_atomic_write_segments_max) == 0xb0,
	      "stx_atomic_write_segments_max");
_Static_assert(sizeof(struct oa_statx) == 0x100, "struct statx");

struct oa_sysops {
	int (*openat)(int dirfd, const char *path, int flags, mode_t mode);
	int (*close)(int fd);
	ssize_t (*pread)(int fd, void *buf, size_t n, off_t off);
	ssize_t (*pwrite)(int fd, const void *buf, size_t n, off_t off);
	ssize_t (*pwritev)(int fd, const struct iovec *iov, int cnt, off_t off);
	int (*fsync)(int fd);       /* data and metadata (directories too) */
	int (*fdatasync)(int fd);   /* data and the size */
	int (*ftruncate)(int fd, off_t len);
	off_t (*lseek)(int fd, off_t off, int whence);
	int (*fallocate)(int fd, int mode, off_t off, off_t len);
	int (*fstat)(int fd, struct stat *st);
	int (*fstatat)(int dirfd, const char *path, struct stat *st, int flags);
	int (*fstatfs)(int fd, struct statfs *st);
	int (*fchown)(int fd, uid_t uid, gid_t gid);
	int (*fchmod)(int fd, mode_t mode);
	int (*unlinkat)(int dirfd, const char *path, int flags);
	int (*linkat)(int olddirfd, const char *old, int newdirfd,
		      const char *new_, int flags);
	ssize_t (*readlinkat)(int dirfd, const char *path, char *buf, size_t n);
	/* getdents64(2): list a directory (recovery finds journals this way) */
	ssize_t (*getdents64)(int fd, void *buf, size_t n);
	/* fcntl(fd, F_OFD_SETLK / F_OFD_SETLKW / F_OFD_GETLK, fl) */
	int (*lock)(int fd, int cmd, struct flock *fl);
	int (*ioctl)(int fd, unsigned long req, void *arg);
	/* statx(2) through the raw system call (glibc may be older). */
	int (*statx)(int dirfd, const char *path, int flags, unsigned mask,
		     void *statxbuf);
	ssize_t (*pwritev2)(int fd, const struct iovec *iov, int cnt, off_t off,
			    int flags);
	/* Shared mappings, for the control file's live area only (volatile
	 * state: a simulator may leave these NULL; the library then uses
	 * pread/pwrite). */
	void *(*mmap)(void *addr, size_t len, int prot, int flags, int fd,
		      off_t off);
	int (*munmap)(void *addr, size_t len);
	/* Start writing back [off, off + len) of a file, and wait for nothing:
	 * sync_file_range(SYNC_FILE_RANGE_WRITE).  A hint about timing only,
	 * it makes nothing durable (the flushes do, and every invariant counts
	 * only them): a simulator leaves it NULL and the library skips it. */
	int (*writeback)(int fd, off_t off, off_t len);
	/* Drop [off, off + len) of a file from the page cache where it is
	 * clean: posix_fadvise(POSIX_FADV_DONTNEED).  A hint about memory only
	 * (the bytes stay in the file); a simulator leaves it NULL. */
	int (*drop)(int fd, off_t off, off_t len);
	/* Start reading [off, off + len) of a file into the page cache and
	 * wait for nothing: posix_fadvise(POSIX_FADV_WILLNEED).  A hint about
	 * timing only; a simulator leaves it NULL. */
	int (*prefetch)(int fd, off_t off, off_t len);
	/* fgetxattr(2) / fsetxattr(2): where a file's journals live is
	 * recorded on the file itself (home.c).  A simulator may leave them
	 * NULL: the library then finds journals by the file's name. */
	ssize_t (*fgetxattr)(int fd, const char *name, void *buf, size_t n);
	int (*fsetxattr)(int fd, const char *name, const void *buf, size_t n,
			 int flags);
	/* fremovexattr(2): the file's clean mark (control.c).  NULL: no
	 * attributes, hence no mark to remove. */
	int (*fremovexattr)(int fd, const char *name);
};

/* The table in use.  Never NULL. */
extern const struct oa_sysops *oa_sys;
/* The real Linux table. */
extern const struct oa_sysops oa_sys_linux;

/* Counters kept by every call through the seam (whatever the table). */
struct oa_stats {
	uint64_t flushes;        /* fsync + fdatasync calls */
	uint64_t bytes_written;  /* bytes passed to pwrite/pwritev */
	uint64_t writes;         /* pwrite/pwritev calls */
	uint64_t bytes_read;
	uint64_t xp_batches;     /* batches this process led with other
				  * processes' commits in them (xcommit.c) */
	uint64_t xp_members;     /* other processes' commits they carried */
};

/* The process's fork generation: a handle opened in another generation
 * was inherited through fork(2) (sys.c).  The first call registers the
 * pthread_atfork handler that counts. */
unsigned oa_fork_gen(void);

/* Wrappers the library calls: count, then go through oa_sys. */
int oa_xopenat(int dirfd, const char *path, int flags, mode_t mode);
int oa_xclose(int fd);                      /* keeps errno */
ssize_t oa_xpread(int fd, void *buf, size_t n, off_t off);
ssize_t oa_xpwrite(int fd, const void *buf, size_t n, off_t off);
ssize_t oa_xpwritev(int fd, const struct iovec *iov, int cnt, off_t off);
/* pwritev2(2); FLUSH: the flags make it a flush too (RWF_DSYNC), counted as
 * one.  EOPNOTSUPP where the table has no pwritev2. */
ssize_t oa_xpwritev2(int fd, const struct iovec *iov, int cnt, off_t off,
		     int flags, bool flush);
/* Count a flush that a call with a sync flag makes (an exchange with
 * DSYNC). */
void oa_stats_flush(void);
void oa_stats_xp(uint64_t members);
/* Whole-buffer loops: return 0, or -1 with errno (EIO for an unexpected
 * end of file on read). */
int oa_pread_full(int fd, void *buf, size_t n, off_t off);
/* The most a library write passes to one pwrite(2): the page cache gives
 * a buffered write folios as large as the write (up to 2 MiB), and ext4
 * walks every block of a folio for each later write into it and at its
 * writeback: a 4 KiB pwrite into a file written in 1 MiB writes measured
 * 12-15 us against 3 into one written in 4 KiB writes (4.5-5 at 64 KiB,
 * 9 at 256 KiB; XFS: no difference).  The apply of a big transaction and
 * a journal's zeros would otherwise tax every small commit after them. */
#define OA_WRITE_MAX (64u << 10)

int oa_pwrite_full(int fd, const void *buf, size_t n, off_t off);
/* All of IOV[0..CNT) at OFF (any CNT), through pwritev: 0 or -1. */
int oa_pwritev_full(int fd, const struct iovec *iov, int cnt, off_t off);
/* ioctl(2) through the seam; ENOTTY where the table has none (a simulator
 * may leave it out). */
int oa_xioctl(int fd, unsigned long req, void *arg);
int oa_xfsync(int fd);
int oa_xfdatasync(int fd);
/* The writeback hint; errors ignored (it promises nothing). */
void oa_xwriteback(int fd, uint64_t off, uint64_t len);
/* The page-cache drop hint; errors ignored. */
void oa_xdrop(int fd, uint64_t off, uint64_t len);
/* Start reading [OFF, OFF + LEN) of FD into the page cache (a hint; errno
 * kept). */
void oa_xprefetch(int fd, uint64_t off, uint64_t len);
/* Big writes in flight: oa_wb_note() records that [OFF, OFF + LEN) of FD was
 * written and, once OA_WB_CHUNK bytes have gathered, starts their writeback,
 * so that the disk works while the caller copies the next bytes and the
 * commit's flush waits for the tail only. */
#define OA_WB_CHUNK (8u << 20)
struct oa_wb {
	uint64_t lo, hi;
};
void oa_wb_note(struct oa_wb *w, int fd, uint64_t off, uint64_t len);
int oa_xftruncate(int fd, off_t len);
/* Extended attributes through the seam; ENOTSUP where the table has none. */
ssize_t oa_xfgetxattr(int fd, const char *name, void *buf, size_t n);
int oa_xfremovexattr(int fd, const char *name);
int oa_xfsetxattr(int fd, const char *name, const void *buf, size_t n,
		  int flags);
/* fstat(2) of FD without the timestamps (zero in *ST): see sys.c, why
 * not fstat.  oa_xfstat_all: with them, for oa_fstat(3) alone. */
int oa_xfstat(int fd, struct stat *st);
int oa_xfstat_all(int fd, struct stat *st);
/* statx(2) of FD itself through the seam into SX (zeroed first); ENOSYS
 * where the table has none (a simulator may leave it out). */
int oa_xstatx(int fd, unsigned mask, struct oa_statx *sx);
/* The size of FD's file in *SIZE, without asking for its timestamps (see
 * sys.c): every size the library needs on a hot path comes from here. */
int oa_xfsize(int fd, uint64_t *size);
/* OFD byte-range lock of one byte at BYTE: TYPE F_RDLCK, F_WRLCK, F_UNLCK.
 * WAIT: block.  Returns 0, or -1 (EAGAIN when !WAIT and held elsewhere).
 * F_UNLCK always returns 0 and leaves errno as it was. */
int oa_lock(int fd, off_t byte, short type, int wait);
/* Would a lock of TYPE on BYTE conflict with another handle's?  1 yes, 0 no,
 * -1 error.  (Works on a read-only descriptor, for F_WRLCK too.) */
int oa_lock_held(int fd, off_t byte, short type);

/* A failed OA_ASSERT (internal.h, debug builds): report and abort. */
__attribute__((noreturn)) void oa_assert_fail(const char *what,
					      const char *file, int line,
					      const char *func);

/* ---- kill points (tests) ---- */
/* Stop the process (SIGKILL) if the test hook asks for POINT. */
void oa_killpoint(int point);
#define OA_KP_RECORD_WRITTEN   1  /* commit record written, not flushed */
#define OA_KP_FLUSHED          2  /* commit durable, nothing applied */
#define OA_KP_HALF_APPLIED     3  /* first op applied in place */
#define OA_KP_APPLIED          4  /* applied, dirty marker still set */
#define OA_KP_CKPT_TARGET      5  /* checkpoint or last close: file flushed */
#define OA_KP_CKPT_WRITTEN     6  /* checkpoint record written, not flushed;
				   * last close: control file cut back to
				   * clean, not flushed */
#define OA_KP_GROUP_MEMBER     7  /* group: a member's record durable */
#define OA_KP_GROUP_DECIDED    8  /* group: the coordinator's record
				   * durable (the commit point), nothing
				   * applied */
#define OA_KP_GROUP_SETTLED    9  /* group: a member checkpointed */
#define OA_KP_XP_TAKEN        10  /* a leader merged other processes'
				   * commits, nothing written (xcommit.c) */
#define OA_KP_MARKED          11  /* dirty marker set, no commit record */

#endif /* OA_SYS_H */
