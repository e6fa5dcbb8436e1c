/*
 * oatomic.h - failure-atomic file updates for Linux (O_ATOMIC in user space).
 *
 * Open a file in atomic mode, change it as much as you like, then commit:
 * after a crash or power cut at any instant the file holds either the state of
 * its last successful commit or, once oa_commit() has returned 0, the state
 * that commit made. Never a mix.
 *
 * Every function mirrors the POSIX call it is named after: on failure it
 * returns -1 (or NULL) and sets errno.  Besides the errno values of the POSIX
 * call, every function that may read a journal can fail with EUCLEAN: a
 * journal of the file is damaged (it was not written by a crash, which
 * oatomic survives, but by corruption); nothing was applied from it.  Run
 * `oatomic check PATH` to see which file and why.
 *
 * A handle (oa_file) is used by one thread at a time.  Any number of handles,
 * in any number of threads and processes, may be open on the same file; their
 * commits are serialised, and a handle never sees another's pending changes.
 * A handle belongs to the process that opened it: in a child made by fork()
 * every call on an inherited handle but oa_close() fails with EBADF, and that
 * oa_close() frees the child's copy without touching the file, its journals
 * or anyone's locks.  The library's descriptors are close-on-exec.
 *
 * Files the library keeps next to PATH (or in oa_options.journal_dir):
 *   .NAME.oa        control file: checkpoint record and the locks
 *   .NAME.oaj-K     journal files, one per handle writing at the same time
 * They belong to the inode, not to the name: where they live is recorded on
 * the file (extended attribute user.oatomic), and every name of the file -
 * hard links, a later rename, a bind mount - finds them (ESTALE where that
 * place can no longer be reached, EXDEV for a writer through a bind mount of
 * a file that has none yet).  A name reused by another file gets
 * .NAME.INO.oa*.  They are created with the owner of PATH and no wider
 * permissions.  Do not
 * delete them while a journal may hold committed data: `oatomic check` tells.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef OATOMIC_H
#define OATOMIC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/stat.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OATOMIC_VERSION_MAJOR 0
#define OATOMIC_VERSION_MINOR 1
#define OATOMIC_VERSION_PATCH 0

/* An open file in atomic mode.  Opaque. */
typedef struct oa_file oa_file;

/*
 * Commit methods.  OA_METHOD_AUTO (0) lets the library pick, per file and per
 * transaction, the fastest method that is correct there: exchange for runs of
 * 256 KiB or more of whole blocks where XFS range exchange works, clone for
 * writes of 1 MiB or more where reflink works, the journal for the rest, and
 * the kernel's untorn write for a transaction that is one aligned
 * power-of-two write no larger than the device writes untorn itself
 * (atomic_write_unit_hw_max of oa_ioinfo).  Below those sizes the journal
 * was measured to cost less.  The others force one (for
 * testing, or to compare); a forced method still sends what it cannot take
 * (say, a multi-write transaction under OA_METHOD_KERNEL) through the
 * journal.  Forcing a method the file system cannot do fails with EOPNOTSUPP
 * at open.  Every method gives the same guarantees; the environment
 * variable OATOMIC_METHOD=journal|clone|exchange|kernel makes handles opened
 * with OA_METHOD_AUTO behave as if that method were forced (the test suite
 * runs its tests under each method that way).
 */
enum oa_method {
	OA_METHOD_AUTO = 0,
	/* Portable: data logged out of place in a journal, one checksummed commit
	 * record is the commit point, then applied in place.  Any file system. */
	OA_METHOD_JOURNAL = 1,
	/* Reflink (XFS, Btrfs, any file system with FICLONERANGE): a big write
	 * is written once, into the journal, as a record placed so that its
	 * bytes are block-aligned as in the file; after the commit record its
	 * whole blocks are cloned into the file instead of copied.  Unaligned
	 * edges and small writes are copied, as in the journal method. */
	OA_METHOD_CLONE = 2,
	/* XFS range exchange (Linux 6.10+, XFS_IOC_EXCHANGE_RANGE): whole
	 * blocks are written once into a shadow file at their own offsets and
	 * the commit is one exchange of the transaction's span (FILE1_WRITTEN,
	 * DSYNC), logged and recovered by the kernel; unaligned edges are
	 * composed into the shadow at commit.  A transaction that truncates or
	 * grows the file goes through the journal. */
	OA_METHOD_EXCHANGE = 3,
	/* The kernel's untorn writes (RWF_ATOMIC, Linux 6.11+): a transaction
	 * that is one aligned power-of-two write within the file's atomic write
	 * unit goes down as a single direct RWF_ATOMIC|RWF_DSYNC write, without
	 * the journal; any other transaction uses the journal. */
	OA_METHOD_KERNEL = 4,
};

/*
 * Options for oa_open_opts().  Set .size to sizeof(struct oa_options) and
 * zero what you do not use; a zero field means the default.
 */
struct oa_options {
	size_t size;
	/* enum oa_method; 0 = OA_METHOD_AUTO. */
	int method;
	/* Directory for the control and journal files.  NULL: the directory of
	 * the file itself (the default, and the only place oa_recover() and
	 * `oatomic recover` look unless told otherwise).  It must be on a file
	 * system that survives what the file survives. */
	const char *journal_dir;
	/* Largest transaction, in bytes of pending data; a write that would
	 * exceed it fails with EFBIG and leaves the transaction as it was.
	 * 0: bounded only by free space. */
	uint64_t max_txn_bytes;
};

/* What oa_ioinfo() reports.  Set .size to sizeof(struct oa_ioinfo). */
struct oa_ioinfo {
	size_t size;
	/* enum oa_method the handle uses for its commits (AUTO resolved:
	 * exchange, clone or journal; single aligned writes may still go by the
	 * kernel method, see rwf_atomic and atomic_write_unit_hw_max).  For a
	 * read-only handle: what a writer would use. */
	int method;
	/* File system: its statfs(2) f_type and a short name ("ext4", "xfs",
	 * "btrfs", "tmpfs", ... or "0x%lx" for one we do not know). */
	unsigned long fs_magic;
	char fs_name[16];
	/* Fundamental block size (statfs f_bsize). */
	uint32_t block_size;
	/* Direct I/O alignment of memory and of file offsets (statx
	 * STATX_DIOALIGN); 0 where direct I/O is not supported. */
	uint32_t dio_mem_align;
	uint32_t dio_offset_align;
	/* The kernel's untorn write unit (statx STATX_WRITE_ATOMIC): smallest and
	 * largest RWF_ATOMIC write, and the largest number of iovec segments; 0
	 * where the file cannot take atomic writes. */
	uint32_t atomic_write_unit_min;
	uint32_t atomic_write_unit_max;
	uint32_t atomic_write_segments_max;
	/* 1 where the feature was seen to work on this file system (probed with
	 * real calls on a scratch file, cached per file system), else 0. */
	int rwf_atomic;     /* an RWF_ATOMIC direct write succeeded */
	int reflink;        /* FICLONERANGE succeeded */
	int exchange;       /* XFS_IOC_EXCHANGE_RANGE succeeded */
	/* Largest transaction this handle can take now, in bytes: free space of
	 * the journal's file system (less a reserve), capped by max_txn_bytes. */
	uint64_t max_txn_bytes;
	/* The part of the atomic write unit the device writes untorn itself,
	 * up to this size (statx stx_atomic_write_unit_max_opt, else the block
	 * device's queue limit).  Larger atomic writes, and all of them where
	 * this is 0, the file system does out of place (XFS copy-on-write),
	 * which costs more than a journal commit: AUTO uses the kernel method
	 * only up to here.  Equal to atomic_write_unit_max where the device is
	 * not known. */
	uint32_t atomic_write_unit_hw_max;
	/* How oa_mmap finds the pages a program stored to ("fault": a write
	 * fault per page and transaction, oa_mmap(3)). */
	char map_tracking[16];
};

/*
 * oa_open - open (and possibly create) PATH in atomic mode.
 *
 * FLAGS are open(2) flags: O_RDONLY, O_WRONLY or O_RDWR, plus O_CREAT,
 * O_EXCL, O_TRUNC, O_NOFOLLOW, O_CLOEXEC (always set internally).  O_TRUNC
 * is pending like any change: the file is emptied at the first commit.  A
 * file created by O_CREAT is durable (data and directory entry) when
 * oa_open() returns.  Before returning, oa_open() recovers whatever a crash
 * left behind for the file (finishes committed transactions, drops the rest).
 *
 * Returns a handle, or NULL with errno:
 *   the errors of open(2) for PATH (ENOENT, EEXIST, EACCES, ELOOP, EISDIR,
 *   EROFS, ENAMETOOLONG, ...);
 *   ENAMETOOLONG  also when NAME leaves no room for ".NAME.oaj-K" within
 *            NAME_MAX (names longer than about NAME_MAX - 12 bytes);
 *   EINVAL   flags has O_APPEND, O_DIRECT, O_PATH, O_TMPFILE or O_DIRECTORY,
 *            or PATH is not a regular file;
 *   EUCLEAN  a journal of the file is damaged (see `oatomic check`);
 *   EPERM    a journal of the file is owned by another user, or writable by
 *            others: it is not replayed;
 *   ENOMEM, EIO, ENOSPC, EDQUOT  from creating the control file or recovery.
 */
oa_file *oa_open(const char *path, int flags, mode_t mode);

/* oa_openat - oa_open() relative to the directory DIRFD (or AT_FDCWD), as
 * openat(2). */
oa_file *oa_openat(int dirfd, const char *path, int flags, mode_t mode);

/* oa_open_opts - oa_open() with options; OPTS may be NULL.  Extra errors:
 * EINVAL for a bad opts->size or unknown method, EOPNOTSUPP for a method the
 * file system cannot do, the errors of open(2) for opts->journal_dir. */
oa_file *oa_open_opts(const char *path, int flags, mode_t mode,
		      const struct oa_options *opts);

/*
 * oa_pread - read up to N bytes at OFF, as pread(2), seeing the handle's own
 * pending changes over the last committed contents.  Never sees half of
 * another handle's commit.  Returns the number of bytes read (0 at the end of
 * the file as the handle sees it), or -1: EBADF (handle not open for
 * reading), EINVAL (OFF negative), EFAULT, EIO, EUCLEAN.
 */
ssize_t oa_pread(oa_file *f, void *buf, size_t n, off_t off);

/*
 * oa_pwrite - write N bytes at OFF into the pending transaction, as pwrite(2).
 * Nothing reaches the file before oa_commit().  The bytes go to the journal
 * (on disk, not in memory) before the call returns.  Returns N, or -1:
 *   EBADF   handle not open for writing;
 *   EINVAL  OFF negative;
 *   EFBIG   OFF + N beyond the largest file offset, or the transaction
 *           would exceed oa_options.max_txn_bytes;
 *   ENOSPC, EDQUOT, EIO  from writing the journal;
 *   EIO     the handle is latched after a failed flush (see oa_commit).
 * A failed write leaves the transaction as it was before the call, except
 * that a write taken in pieces (pieces of 64 MiB; under the exchange method
 * an unaligned head, then whole blocks) whose later piece fails returns the
 * bytes taken before it (a short write, as pwrite(2) may): those stay in
 * the transaction.
 */
ssize_t oa_pwrite(oa_file *f, const void *buf, size_t n, off_t off);

/* oa_pwritev - oa_pwrite() of IOVCNT buffers, as pwritev(2); EINVAL also for
 * IOVCNT < 0 or > IOV_MAX or a total length that overflows ssize_t. */
ssize_t oa_pwritev(oa_file *f, const struct iovec *iov, int iovcnt, off_t off);

/*
 * oa_ftruncate - set the file's size to LENGTH in the pending transaction, as
 * ftruncate(2): shrinking drops pending and committed bytes beyond LENGTH
 * (they read as zeros if the file grows again), growing adds zeros.  Returns 0
 * or -1: EBADF (not open for writing), EINVAL (LENGTH negative), EFBIG, EIO.
 */
int oa_ftruncate(oa_file *f, off_t length);

/* oa_fstat - fstat(2) of the file, with st_size as the handle sees it
 * (pending changes included).  Returns 0 or -1: EIO, EUCLEAN. */
int oa_fstat(oa_file *f, struct stat *st);

/* oa_fsize - the file's size as the handle sees it (pending changes
 * included), oa_fstat's st_size, into *SIZE, without asking for the
 * timestamps (which, on Linux 6.13 and later, makes the file's next change
 * take a fine-grained time: see oa_fstat(3)).  Returns 0 or -1: EFAULT,
 * EIO, EUCLEAN. */
int oa_fsize(oa_file *f, off_t *size);

/*
 * oa_mmap - map LENGTH bytes of the file from OFFSET (a multiple of the page
 * size) into memory, as mmap(2) with MAP_SHARED would, except that stores
 * through the mapping are pending changes of the handle like oa_pwrite's:
 * invisible to every other handle, process and reader until oa_commit, which
 * commits them with the handle's writes and truncates as one unit; oa_abort,
 * oa_close and a crash discard them (the mapping shows the committed contents
 * again).  The mapping shows the handle's pending changes, and oa_pread sees
 * its stores.  A commit carries exactly the bytes the stores changed (another
 * handle's commit to the same page is kept), found without scanning the
 * mapping: each page stored to costs one fault per transaction.  PROT is
 * PROT_READ, optionally with PROT_WRITE (the handle must be open O_RDWR).
 * All mappings of one handle lie in one window of address space, so that a
 * file offset has one address: mapping a range already mapped returns the
 * same address.  oatomic installs a SIGSEGV handler at the first call (see
 * oa_mmap(3) for what programs with their own must do), and a system call
 * asked to write into a page not yet stored to since the last commit fails
 * with EFAULT, as for a read-only page: store to it first.  Returns the
 * address, or NULL: EBADF, EACCES (handle not open for reading, or
 * PROT_WRITE without O_RDWR), EINVAL (LENGTH 0, OFFSET unaligned or
 * negative, PROT has other bits), ENOMEM (beyond the window reserved at the
 * handle's first mapping, see oa_mmap(3)), EIO.
 */
void *oa_mmap(oa_file *f, size_t length, int prot, off_t offset);

/* oa_munmap - remove a mapping made by oa_mmap (ADDR a page boundary it
 * returned, LENGTH as given).  Stores through it stay pending.  Returns 0 or
 * -1: EINVAL (not mapped by this handle), EBADF, EIO. */
int oa_munmap(oa_file *f, void *addr, size_t length);

/*
 * oa_commit - make every pending change of the handle durable and visible as
 * one unit: the fsync() of O_ATOMIC.  When it returns 0 the changes are on
 * stable storage and every reader sees them; a crash before that leaves the
 * previous contents.  A handle with nothing pending returns 0 at once.
 * Returns 0, or -1 with errno:
 *   ENOSPC, EDQUOT, EIO  the commit did not happen: the file keeps its
 *            previous contents, now and after any crash, and the pending
 *            changes are kept (the caller may oa_abort() or retry).  Space
 *            the file needs to grow is reserved before the commit point, so
 *            a full disk fails here and not half-way;
 *   EIO      (latched) the flush of the commit record failed: which of the
 *            two states is durable cannot be told; or the commit is durable
 *            but writing it into the file failed (say, a disk error): the
 *            next oa_open or oa_recover finishes it.  The handle is latched:
 *            every later call but oa_close() fails with EIO.  Recovery
 *            settles the file on exactly one of the two states.  Tell this
 *            EIO from the first kind by any further call (EIO again);
 *   EUCLEAN  a damaged journal was found while finishing a crashed commit.
 * Journal method: one flush (fdatasync of the journal) per commit; the
 * changes are then written in place, and made durable there by a checkpoint
 * (two more flushes) when the journal fills, at the last close, or at the
 * next oa_open() after a crash.  Clone method: the same, but the blocks of
 * big writes are cloned into the file rather than written a second time; a
 * commit that held one is checkpointed at once (three flushes in all).
 * Kernel method: one RWF_ATOMIC|RWF_DSYNC write, nothing else.  Exchange
 * method: one XFS_IOC_EXCHANGE_RANGE with DSYNC, nothing else.  (Both first
 * checkpoint if a journal commit awaits its checkpoint.)
 */
int oa_commit(oa_file *f);

/*
 * oa_commit_group - commit the pending changes of FILES[0..N) as one unit:
 * when it returns 0 every file shows its new contents, durably; a crash at
 * any instant before leaves every file with its old ones, and after any
 * crash either all the files have their new contents or none has.  The
 * files may lie in different directories and on different file systems.
 * Handles with nothing pending take no part; with one left it is
 * oa_commit().  Otherwise every member commits through its journal (the
 * kernel and exchange methods give way to it in a group): one flush per
 * member for its record, one more for the commit point (the first member
 * in file-system and inode order, the coordinator), then each other
 * member's checkpoint (two flushes).  Recovery of any one of the files
 * settles the whole group; it finds the others by the paths they had at the
 * commit, so a member renamed or removed before recovery is reported
 * (EUCLEAN), never half-applied.  Returns 0, or -1 with errno:
 *   EBADF, EIO  as oa_commit, for any handle (nothing is committed);
 *   EINVAL   two handles of one file, or one handle twice;
 *   ENOENT   a member that has changes has no name (unlinked);
 *   ENOSPC, EDQUOT, EIO  before the commit point: nothing is committed,
 *            every handle keeps its pending changes (one whose flush failed
 *            is latched);
 *   EIO      (latched handles) after the commit point, or where it cannot
 *            be told whether the commit point is durable: recovery settles
 *            every file on the same state.
 */
int oa_commit_group(oa_file *const files[], size_t n);

/* oa_abort - drop every pending change and keep the handle open.  Returns 0,
 * or -1: EIO for a latched handle (also one latched by a flush that failed
 * while the dropped transaction's journal space was given back: dropped
 * all the same), ENOMEM where mappings could not be frozen (nothing
 * dropped), EBADF. */
int oa_abort(oa_file *f);

/*
 * oa_close - drop every pending change (exactly as a crash would) and free
 * the handle, even when it fails.  The last handle on a file checkpoints
 * committed changes into the file and makes them durable there.  Returns 0,
 * or -1: EIO (a checkpoint flush failed; the commits stay in the journal and
 * are applied by the next recovery).
 */
int oa_close(oa_file *f);

/* oa_ioinfo - what the file and its file system can do; see struct
 * oa_ioinfo.  Returns 0, or -1: EINVAL (INFO NULL or info->size too small),
 * EIO. */
int oa_ioinfo(oa_file *f, struct oa_ioinfo *info);

/*
 * oa_recover - finish or discard whatever a crash left behind for PATH, with
 * the journal beside it, without opening it for work: committed transactions
 * are applied and made durable in PATH, the rest dropped.  Idempotent; a
 * file with no journal is left alone.  Safe while other processes have PATH
 * open with oatomic.  Returns 0, or -1: the errors of open(2) for PATH,
 * EUCLEAN (a damaged journal; nothing applied), EPERM (a journal owned by
 * another user or writable by others), EIO.
 */
int oa_recover(const char *path);

#ifdef __cplusplus
}
#endif

#endif /* OATOMIC_H */
