/*
 * file.c - the public calls: open, read, write, truncate, stat, commit,
 * abort, close, recover.
 *
 * Locks (OFD locks, so they belong to the handle, work between threads of a
 * process, and vanish with a dead process):
 *   control byte OPEN    every handle holds it shared; exclusive means
 *                        "alone": the opener recovers fully, the closer
 *                        checkpoints.
 *   control byte COMMIT  exclusive while committing, recovering or
 *                        checkpointing: commits are serialised.
 *   control byte APPLY   shared while reading committed bytes, exclusive
 *                        while writing them in place: readers never see half
 *                        a commit.
 *   journal byte OWNER   exclusive: the journal's one writer.
 * Order: OPEN, then COMMIT, then APPLY; OWNER is only ever tried without
 * waiting, so no cycle can form.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "internal.h"
#include "oatomic-private.h"

#define OA_OFF_MAX ((uint64_t)INT64_MAX)

enum { P_WORK = 0, P_CHECK = 1, P_RECOVER = 2 };

static int group_decided(struct oa_file *f, const struct oa_gref *r,
			 uint64_t gid);
static int group_settle(struct oa_file *f, const struct oa_gref *r,
			uint64_t gid);

/* Does the longest journal name fit in NAME_MAX for PATH's last component:
 * ".NAME.oaj-4095", or with a journal directory (JDIR), where the names
 * carry the inode number in hex (set_prefix), ".NAME.<16 hex>.oaj-4095"? */
static bool journal_name_fits(const char *path, bool jdir)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	return strlen(b) + sizeof(".oaj-4095") +
	       (jdir ? sizeof(".ffffffffffffffff") - 1 : 0) <= NAME_MAX;
}

/* Does O (not yet checked) give a journal directory? */
static bool opts_jdir(const struct oa_options *o)
{
	return o && o->size >= offsetof(struct oa_options, journal_dir) +
			       sizeof(o->journal_dir) && o->journal_dir;
}

/* Drop the handle's OFD locks by hand before closing: a forked child may
 * still hold the descriptions, and with them the locks, long after this
 * handle is gone.  Never in such a child: they are the parent's. */
static void unlock_all(struct oa_file *f)
{
	if (f->forkgen != oa_fork_gen())
		return;
	if (f->jfd >= 0)
		oa_lock(f->jfd, f->jlock, F_UNLCK, 0);
	if (f->cfd >= 0)
		oa_ctl_lock(f, OA_LOCK_OPEN, F_UNLCK, 0);
}

static void oa_handle_free(struct oa_file *f)
{
	if (!f)
		return;
	unlock_all(f);
	oa_xclose(f->jfd);
	oa_xclose(f->dio_fd);
	oa_xclose(f->sfd);
	free(f->st_buf);
	oa_ctl_unmap(f);
	oa_xclose(f->cfd);
	if (f->dfd != f->tdirfd)
		oa_xclose(f->dfd);
	oa_xclose(f->tdirfd);
	oa_xclose(f->tfd);
	oa_map_free(f);
	oa_index_free(f->ix);
	free(f->buf);
	free(f->prefix);
	free(f->fast_path);
	for (size_t i = 0; i < f->ngco; i++) {
		free((char *)f->gco[i].path);
		free((char *)f->gco[i].jdir);
	}
	free(f->gco);
	free(f);
}

/* A directory we may search but not read (mode 0711) still works: names in
 * it can be opened, journals are then found by probing their names. */
static int open_dir(int dirfd, const char *dir)
{
	int fd = oa_xopenat(dirfd, dir, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0 && errno == EACCES)
		fd = oa_xopenat(dirfd, dir, O_PATH | O_DIRECTORY, 0);
	return fd;
}

/* Split PATH into its directory (opened) and its last component. */
static int open_parent(int dirfd, const char *path, char **base)
{
	const char *slash = strrchr(path, '/');
	char *dir;
	int fd;

	if (!slash) {
		*base = strdup(path);
		if (!*base) {
			errno = ENOMEM;
			return -1;
		}
		return open_dir(dirfd, ".");
	}
	*base = strdup(slash + 1);
	dir = slash == path ? strdup("/") : strndup(path, (size_t)(slash - path));
	if (!*base || !dir) {
		free(*base);
		free(dir);
		errno = ENOMEM;
		return -1;
	}
	fd = open_dir(dirfd, dir);
	free(dir);
	if (fd < 0) {
		free(*base);
		*base = NULL;
	}
	return fd;
}

/*
 * PATH (relative to DIRFD) is a symbolic link: the path of the file it
 * names, relative to DIRFD too (a relative target is relative to the link's
 * directory), malloc'd.  NULL with errno (EINVAL: not a link).
 */
static char *link_target(int dirfd, const char *path)
{
	const char *slash = strrchr(path, '/');
	char *t = malloc(PATH_MAX), *out;
	ssize_t n;

	if (!t) {
		errno = ENOMEM;
		return NULL;
	}
	n = oa_sys->readlinkat(dirfd, path, t, PATH_MAX);
	if (n < 0 || n >= PATH_MAX) {
		if (n >= PATH_MAX)
			errno = ENAMETOOLONG;
		free(t);
		return NULL;
	}
	t[n] = 0;
	if (t[0] == '/' || !slash)
		return t;
	if (asprintf(&out, "%.*s%s", (int)(slash - path + 1), path, t) < 0) {
		free(t);
		errno = ENOMEM;
		return NULL;
	}
	free(t);
	return out;
}

/* Open the existing file PATH with BASE flags, read-write unless ACC is
 * O_RDONLY; a write-only caller who may not read gets O_WRONLY.  Sets
 * f->tfd_rw. */
static int open_existing(struct oa_file *f, int dirfd, const char *path,
			 int base, int acc)
{
	int am = acc == O_RDONLY ? O_RDONLY : O_RDWR;
	int fd = oa_xopenat(dirfd, path, base | am, 0);
	if (fd < 0 && errno == EACCES && acc == O_WRONLY) {
		am = O_WRONLY;
		fd = oa_xopenat(dirfd, path, base | am, 0);
	}
	if (fd >= 0)
		f->tfd_rw = am != O_RDONLY;
	return fd;
}

static int open_target(struct oa_file *f, int dirfd, const char *path,
		       int flags, mode_t mode, bool *created, bool *direct)
{
	/* O_NONBLOCK: a FIFO or device in the file's place must not block the
	 * open; identify() then refuses it.  Regular files ignore the flag. */
	int base = O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (flags & O_NOFOLLOW);
	int acc = flags & O_ACCMODE;
	char *link = NULL;   /* the path followed from a dangling link */
	int fd = -1;

	*created = false;
	*direct = false;
	if (!(flags & (O_CREAT | O_NOFOLLOW))) {
		/* The common case first: PATH names the file itself, not a
		 * symbolic link, so its directory is PATH's (*DIRECT) and
		 * need not be asked of /proc.  ELOOP: a link; the loop
		 * below follows it. */
		fd = open_existing(f, dirfd, path, base | O_NOFOLLOW, acc);
		if (fd >= 0) {
			*direct = true;
			return fd;
		}
		if (errno != ELOOP)
			return -1;
	}
	for (int tries = 0; tries < 16; tries++) {
		int am = acc == O_RDONLY ? O_RDONLY : O_RDWR;
		if (flags & O_CREAT) {
			fd = oa_xopenat(dirfd, path, base | am | O_CREAT | O_EXCL,
					mode);
			if (fd < 0 && errno == EACCES && acc == O_WRONLY)
				fd = oa_xopenat(dirfd, path, base | O_WRONLY |
						O_CREAT | O_EXCL, mode);
			if (fd >= 0) {
				*created = true;
				f->tfd_rw = am != O_RDONLY;
				goto out;
			}
			if (errno != EEXIST || (flags & O_EXCL))
				goto out;
		}
		fd = open_existing(f, dirfd, path, base, acc);
		if (fd >= 0)
			goto out;
		if (errno != ENOENT || !(flags & O_CREAT))
			goto out;
		/* EEXIST, then ENOENT: a dangling symbolic link (O_EXCL made
		 * no exception for it), which open(2) follows to create the
		 * file it names; or the file was deleted between our two
		 * tries: create again. */
		char *next = link_target(dirfd, path);
		if (next) {
			free(link);
			path = link = next;
		} else if (errno != EINVAL && errno != ENOENT) {
			goto out;
		}
	}
	if (link)
		errno = ELOOP;   /* links to links, as open(2) gives up */
out:
	if (link) {
		int e = errno;
		free(link);
		errno = e;
	}
	return fd;
}

static struct oa_file *handle_new(void)
{
	struct oa_file *f = calloc(1, sizeof(*f));
	if (!f) {
		errno = ENOMEM;
		return NULL;
	}
	f->tfd = f->dfd = f->tdirfd = f->cfd = f->jfd = f->dio_fd = -1;
	f->jcommit_end = UINT64_MAX;
	f->sfd = -1;
	f->forkgen = oa_fork_gen();
	f->may_clone = true;   /* recovery handles try; open resolves */
	f->xchg_first = true;
	f->clone_min = OA_CLONE_MIN;
	f->group_decided = group_decided;
	f->group_settle = group_settle;
	f->ix = oa_index_new();
	if (!f->ix) {
		oa_handle_free(f);
		errno = ENOMEM;
		return NULL;
	}
	return f;
}

/* The inode generation tells a reused inode number from the file the
 * journal was written for.  Not every file system has it: only "not
 * supported" means 0.  Any other failure (EIO, ENOMEM, ...) fails the open:
 * taking it for 0 would make the file's own journals look foreign, and
 * their commits be ignored. */
static int get_igen(struct oa_file *f)
{
	int gen = 0;
	if (oa_sys->ioctl(f->tfd, FS_IOC_GETVERSION, &gen) == 0) {
		f->igen = (uint32_t)gen;
	} else if (errno != ENOTTY && errno != EOPNOTSUPP && errno != EINVAL &&
		   errno != ENOSYS) {
		return -1;
	}
	return 0;
}

static int identify(struct oa_file *f)
{
	struct stat st;
	if (oa_xfstat(f->tfd, &st) < 0)
		return -1;
	if (S_ISDIR(st.st_mode)) {
		errno = EISDIR;
		return -1;
	}
	if (S_ISBLK(st.st_mode) && (f->opt.journal_dir || f->acc == O_RDONLY)) {
		/* A block device: its journal in the directory the caller
		 * names, under its stable identity (home.c). */
		f->blkdev = true;
		f->dev = st.st_rdev;
		f->uid = st.st_uid;
		f->gid = st.st_gid;
		f->mode = st.st_mode & 07777;
		/* read-only without a journal directory: no journal to find
		 * (nor an identity needed) */
		return f->opt.journal_dir ? oa_blkdev_identity(st.st_rdev, &f->ino)
					  : 0;
	}
	if (!S_ISREG(st.st_mode)) {
		/* (a block device without a journal directory: EINVAL) */
		errno = EINVAL;
		return -1;
	}
	f->ino = st.st_ino;
	f->dev = st.st_dev;
	f->uid = st.st_uid;
	f->gid = st.st_gid;
	f->mode = st.st_mode & 07777;
	return get_igen(f);
}

/* Names in a journal directory: ".NAME.<ino>" (many files share it). */
static int set_prefix(struct oa_file *f, const char *base)
{
	/* a block device's /dev name may change: its identity only */
	if (f->blkdev ? asprintf(&f->prefix, ".blkdev.%016llx",
				 (unsigned long long)f->ino) < 0
		      : asprintf(&f->prefix, ".%s.%llx", base,
				 (unsigned long long)f->ino) < 0) {
		f->prefix = NULL;
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

/* Is the control file clean (OA_CLEAN_SIZE bytes: the last handle closed
 * cleanly, nothing to recover)?  1 yes, 0 no, -1 error.  Once the opener
 * holds OPEN, nobody can make it clean (only the last handle cuts it back),
 * so a control file found in use stays in use. */
static int ctl_clean_map(struct oa_file *f, bool map)
{
	uint64_t size;
	if (oa_xfsize(f->cfd, &size) < 0)
		return -1;
	if (size == OA_CLEAN_SIZE)
		return 1;
	if (map)
		oa_ctl_map(f);   /* in use, and this handle holds OPEN */
	return 0;
}

static int ctl_clean(struct oa_file *f)
{
	return ctl_clean_map(f, true);
}

/* Recover as the open of F requires.  Alone (OPEN exclusive): full
 * recovery; otherwise only what a dead committer left (dirty marker).  A
 * clean control file needs neither: its length says so (FORMAT.md, I14). */
static int open_recover(struct oa_file *f)
{
	int r;
	if (!f->cfd_rw) {
		/* A reader that may not write cannot finish what a crash
		 * left; it may only go on when there is nothing to finish.
		 * Alone, that is when no commit is newer than the checkpoint;
		 * with others open, when no dead committer left its marker
		 * (read_lock checks that at every read). */
		if (oa_ctl_lock(f, OA_LOCK_OPEN, F_RDLCK, 1) < 0)
			return -1;
		r = ctl_clean(f);
		if (r != 0)
			return r < 0 ? -1 : 0;
		r = oa_lock_held(f->cfd, OA_LOCK_OPEN, F_WRLCK);
		if (r == 0) {
			if (oa_ctl_lock(f, OA_LOCK_COMMIT, F_RDLCK, 1) < 0)
				return -1;
			r = oa_needs_recovery(f);
			oa_ctl_lock(f, OA_LOCK_COMMIT, F_UNLCK, 0);
			if (r > 0) {
				errno = EACCES;  /* recovery needs write access */
				return -1;
			}
		}
		return r < 0 ? -1 : 0;
	}
	/* The common case, a clean file, with one lock call: shared, and
	 * clean stays clean while we hold it (only the last handle's close
	 * makes it clean; a writer that takes it out of the clean state needs
	 * no recovery by anyone).  Otherwise let go and take the way below. */
	if (oa_ctl_lock(f, OA_LOCK_OPEN, F_RDLCK, 1) < 0)
		return -1;
	r = ctl_clean_map(f, false);
	if (r != 0)
		return r < 0 ? -1 : 0;
	if (oa_ctl_lock(f, OA_LOCK_OPEN, F_UNLCK, 0) < 0)
		return -1;
	/* Exclusive first, not shared then an upgrade: of two openers that
	 * both hold OPEN shared neither could upgrade, and after a reboot
	 * neither would recover (the live area is stale then).  Alone: a clean
	 * file needs nothing; otherwise full recovery, then a downgrade. */
	if (oa_ctl_lock(f, OA_LOCK_OPEN, F_WRLCK, 0) == 0) {
		r = ctl_clean(f);
		if (r != 0)
			return r < 0 ? -1 : oa_ctl_lock(f, OA_LOCK_OPEN, F_RDLCK, 0);
		if (oa_ctl_lock(f, OA_LOCK_COMMIT, F_WRLCK, 1) < 0)
			return -1;
		r = oa_recover_locked(f);
		oa_ctl_lock(f, OA_LOCK_COMMIT, F_UNLCK, 0);
		if (r < 0) {
			oa_ctl_lock(f, OA_LOCK_OPEN, F_UNLCK, 0);
			return -1;
		}
		/* Downgrade: converting our own lock is atomic. */
		return oa_ctl_lock(f, OA_LOCK_OPEN, F_RDLCK, 0);
	}
	if (errno != EAGAIN)
		return -1;
	/* Others are open (one may be recovering: wait for it): only what a
	 * dead committer left. */
	if (oa_ctl_lock(f, OA_LOCK_OPEN, F_RDLCK, 1) < 0)
		return -1;
	r = ctl_clean(f);
	if (r != 0)
		return r < 0 ? -1 : 0;
	if (oa_commit_begin(f, NULL, NULL) < 0)
		return -1;
	oa_commit_end(f);
	return 0;
}

/* oa_recover: finish what a crash left.  Nothing to finish is success,
 * also for a caller who could not write (a read-only mount, a file it may
 * only read); with something to finish, that caller fails with the error
 * that kept it from writing. */
static int recover_only(struct oa_file *f)
{
	int r;
	if (!f->cfd_rw) {
		if (oa_ctl_lock(f, OA_LOCK_COMMIT, F_RDLCK, 1) < 0)
			return -1;
		r = oa_needs_recovery(f);
		oa_ctl_lock(f, OA_LOCK_COMMIT, F_UNLCK, 0);
		if (r > 0)
			errno = f->cfd_err;
		return r == 0 ? 0 : -1;
	}
	/* Alone, a recovered file is left clean, as a last close leaves it:
	 * a boot script that recovers every file leaves no journal behind. */
	bool alone = oa_ctl_lock(f, OA_LOCK_OPEN, F_WRLCK, 0) == 0;
	if (oa_ctl_lock(f, OA_LOCK_COMMIT, F_WRLCK, 1) < 0)
		return -1;
	r = oa_recover_locked(f);
	if (r == 0 && alone)
		r = oa_clean_locked(f);
	oa_ctl_lock(f, OA_LOCK_COMMIT, F_UNLCK, 0);
	if (alone)
		oa_ctl_lock(f, OA_LOCK_OPEN, F_UNLCK, 0);
	return r;
}

/* Recovery through a member settles the whole group: the coordinators
 * its recovery found decided are recovered now, with no lock of F held
 * (the coordinator's recovery settles every member, F's file included).
 * Best effort: a coordinator that cannot be recovered now is by its next
 * opener or committer (G4). */
static struct oa_file *group_open(const struct oa_gref *r, int purpose);
/* > 0 while this thread opens a group's member or coordinator: that open
 * settles nothing further (a coordinator's recovery is already settling
 * the member, and recovering the coordinator again from there would wait
 * for its own COMMIT). */
static __thread int group_depth;
static void settle_groups(struct oa_file *f)
{
	int e = errno;
	for (size_t i = 0; group_depth == 0 && i < f->ngco; i++) {
		struct oa_file *c = group_open(&f->gco[i], P_RECOVER);
		oa_handle_free(c);
	}
	for (size_t i = 0; i < f->ngco; i++) {
		free((char *)f->gco[i].path);
		free((char *)f->gco[i].jdir);
	}
	free(f->gco);
	f->gco = NULL;
	f->ngco = 0;
	errno = e;
}

/* Undo what a failed attach() set up, for the handle to try again. */
static void detach(struct oa_file *f)
{
	unlock_all(f);
	oa_ctl_unmap(f);
	oa_xclose(f->cfd);
	oa_xclose(f->jfd);
	oa_xclose(f->dio_fd);
	oa_xclose(f->sfd);
	if (f->dfd != f->tdirfd)
		oa_xclose(f->dfd);
	oa_xclose(f->tdirfd);
	f->cfd = f->jfd = f->dio_fd = f->sfd = f->dfd = f->tdirfd = -1;
	free(f->prefix);
	f->prefix = NULL;
}

/* The rest of an open, once the file is open and identified: its
 * directory, its home, the method, the control file, and the recovery the
 * open needs.  DIRECT: PATH names the file itself, not a link to it, so
 * its directory is PATH's.  On -1 what was set up is the caller's to free
 * or undo (detach). */
static int attach(struct oa_file *f, int dirfd, const char *path, int flags,
		  int purpose, bool direct, bool created)
{
	char *base = NULL;
	int acc = flags & O_ACCMODE;

	/* The journals belong to the file, not to the name it was opened by:
	 * through a symbolic link they are kept beside the file it points to,
	 * so every opener and every recovery finds the same ones; home.c
	 * then finds them through the inode, whatever its name. */
	if (direct) {
		f->tdirfd = open_parent(dirfd, path, &base);
	} else {
		char proc[64], *real = malloc(PATH_MAX);
		ssize_t n = -1;
		if (!real) {
			errno = ENOMEM;
			goto fail;
		}
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", f->tfd);
		n = oa_sys->readlinkat(AT_FDCWD, proc, real, PATH_MAX - 1);
		if (n > 0 && real[0] == '/') {
			real[n] = 0;
			f->tdirfd = open_parent(AT_FDCWD, real, &base);
		} else {
			f->tdirfd = open_parent(dirfd, path, &base);
		}
		free(real);
	}
	if (f->tdirfd < 0)
		goto fail;
	if (created) {
		/* A created file is durable, name included, at open: a commit
		 * into it must not vanish with its directory entry. */
		if (oa_xfsync(f->tfd) < 0 || oa_xfsync(f->tdirfd) < 0)
			goto fail;
	}
	bool journal_dir = f->opt.journal_dir != NULL;
	f->jdir = journal_dir;
	if (journal_dir) {
		/* The caller names the directory every time; the names there
		 * carry the inode number. */
		f->dfd = oa_xopenat(dirfd, f->opt.journal_dir,
				    O_RDONLY | O_DIRECTORY, 0);
		if (f->dfd < 0 || set_prefix(f, base) < 0)
			goto fail;
	} else if (f->blkdev) {
		f->dfd = -1;   /* a device read without a journal: none */
	} else if (oa_home_find(f, base, purpose == P_WORK && f->tfd_rw) < 0) {
		goto fail;
	}
	f->opt.journal_dir = NULL;   /* not ours to keep */

	/* The method, before recovery: a work handle recovers with the
	 * method it will use (only the clone method's apply differs). */
	if (purpose == P_WORK && acc != O_RDONLY && !oa_method_deferred(f)) {
		if (oa_method_resolve(f) < 0)
			goto fail;
	} else if (purpose == P_WORK && acc != O_RDONLY) {
		oa_method_recovery(f);   /* AUTO: resolved at the first change */
		f->method_lazy = true;
	} else {
		oa_method_recovery(f);
	}
	if (f->dfd < 0) {
		f->cfd = -1;   /* no journal directory: no control file */
	} else if (oa_ctl_open(f, purpose == P_WORK && f->tfd_rw) < 0) {
		/* Another user's control file that the file's owner (or
		 * root) may not trust (the file was chown-ed since, or made
		 * by a user who may no longer write it): rather than be
		 * locked out, the owner moves to a home of its own. */
		if (errno == EPERM && purpose == P_WORK && f->tfd_rw &&
		    !journal_dir && (geteuid() == f->uid || geteuid() == 0) &&
		    oa_home_leave(f, base) == 0 && oa_ctl_open(f, true) == 0)
			goto opened;
		if (errno != ENOENT)
			goto fail;
		f->cfd = -1;  /* never used with oatomic: nothing to recover */
	}
opened:
	free(base);
	base = NULL;
	if (f->cfd >= 0 && purpose == P_WORK && open_recover(f) < 0)
		goto fail;
	if (f->cfd >= 0 && purpose == P_RECOVER && recover_only(f) < 0)
		goto fail;
	settle_groups(f);
	/* Only this call's recovery reports or takes liberties. */
	f->rflags = 0;
	f->rout = NULL;
	f->rpath = NULL;
	return 0;
fail:
	free(base);
	return -1;
}

/*
 * The open of a file that carries a valid clean mark (control.c, M1-M3) ends
 * here: no directory, home, control file or lock, and reads check the mark
 * instead of taking APPLY (oa_pread).  The first call that needs more
 * (anything but oa_pread, oa_fstat and oa_close), or a read that finds the mark
 * changed, does the rest of the open (upgrade), and reports what it
 * finds wrong (ESTALE, EPERM, ...) where the open would have.  Only for
 * oa_open and oa_open_opts of an existing file by its own name (no
 * O_CREAT, O_TRUNC, O_NOFOLLOW, journal directory, or a writer's forced
 * method), where the rest can be found again from the descriptor.
 * 1: opened so; 2: not (identify() then does what it always did: the
 * fields set here are only for the fast handle); -1: error.
 */
static int fast_open(struct oa_file *f, const char *path, int flags)
{
	struct oa_statx sx;
	unsigned mask = OA_STATX_OWNER | OA_STATX_INO;   /* no timestamps */

	/* and the unique mount id (oa_mount_id's, in the same call) */
	if (oa_xstatx(f->tfd, mask | OA_STATX_MNT_ID_UNIQUE, &sx) < 0 ||
	    (sx.stx_mask & mask) != mask || !S_ISREG(sx.stx_mode))
		return 2;
	f->ino = sx.stx_ino;
	f->dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
	f->uid = sx.stx_uid;
	f->gid = sx.stx_gid;
	f->mode = sx.stx_mode & 07777;
	if (get_igen(f) < 0)
		return -1;
	if (!(sx.stx_mask & OA_STATX_MNT_ID_UNIQUE) ||
	    oa_mark_get(f, sx.stx_mnt_id, f->mark) != 1)
		return 2;
	f->fast_path = strdup(path);
	if (!f->fast_path)
		return 2;
	f->fast_flags = flags;
	f->fast = true;
	return 1;
}

int oa__fast(const oa_file *f)
{
	return f && f->fast;
}

/* The rest of a fast open (fast_open), done now. */
static int upgrade(struct oa_file *f)
{
	f->fast = false;
	/* Its directory as the descriptor says now (renamed since?), else
	 * the path as given. */
	if (attach(f, AT_FDCWD, f->fast_path, f->fast_flags, P_WORK, false,
		   false) == 0) {
		free(f->fast_path);
		f->fast_path = NULL;
		return 0;
	}
	int e = errno;
	detach(f);
	f->fast = true;
	errno = e;
	return -1;
}

static struct oa_file *handle_open_ex(int dirfd, const char *path,
				      int flags, mode_t mode,
				      const struct oa_options *o, int purpose,
				      unsigned rflags, FILE *rout)
{
	struct oa_file *f;
	bool created;
	int acc = flags & O_ACCMODE;

	if (!path) {
		errno = EFAULT;
		return NULL;
	}
	if (acc == O_ACCMODE || (flags & (O_APPEND | O_PATH)) ||
	    (flags & O_TMPFILE) == O_TMPFILE || (flags & O_DIRECTORY)) {
		errno = EINVAL;
		return NULL;
	}
	if (purpose == P_WORK && acc != O_RDONLY &&
	    !journal_name_fits(path, opts_jdir(o))) {
		errno = ENAMETOOLONG;   /* before O_CREAT makes anything */
		return NULL;
	}
	f = handle_new();
	if (!f)
		return NULL;
	f->acc = acc;
	f->rflags = rflags;
	f->rout = rout;
	f->rpath = path;
	if (o) {
		if (o->size < offsetof(struct oa_options, method) + sizeof(int) ||
		    o->size > 4096) {
			errno = EINVAL;
			goto fail;
		}
		memcpy(&f->opt, o, o->size < sizeof(f->opt) ? o->size
							     : sizeof(f->opt));
		if (f->opt.method < OA_METHOD_AUTO ||
		    f->opt.method > OA_METHOD_KERNEL) {
			errno = EINVAL;
			goto fail;
		}
	}
	f->opt.size = sizeof(f->opt);
	bool direct;
	f->tfd = open_target(f, dirfd, path, flags, mode, &created, &direct);
	if (f->tfd < 0)
		goto fail;
	if (purpose == P_WORK && dirfd == AT_FDCWD && direct && !created &&
	    !(flags & (O_CREAT | O_TRUNC | O_DIRECT | O_NOFOLLOW)) &&
	    !f->opt.journal_dir &&
	    (f->opt.method == OA_METHOD_AUTO || acc == O_RDONLY)) {
		/* (a writer's forced method is checked at open: EOPNOTSUPP) */
		int fr = fast_open(f, path, flags);
		if (fr < 0)
			goto fail;
		if (fr == 1)
			return f;
	}
	if (identify(f) < 0)
		goto fail;
	/* O_DIRECT (and O_DSYNC) ask for a block device's atomic writes
	 * (RWF_ATOMIC needs direct I/O): the library does its own I/O, so
	 * they change nothing; on a file, O_DIRECT is refused as before. */
	if ((flags & O_DIRECT) && !f->blkdev) {
		errno = EINVAL;
		goto fail;
	}
	if (attach(f, dirfd, path, flags, purpose, direct, created) < 0)
		goto fail;
	if (purpose == P_WORK && (flags & O_TRUNC) && acc != O_RDONLY &&
	    oa_ftruncate(f, 0) < 0)
		goto fail;
	return f;
fail:
	oa_handle_free(f);
	return NULL;
}

static struct oa_file *handle_open(int dirfd, const char *path, int flags,
				   mode_t mode, const struct oa_options *o,
				   int purpose)
{
	return handle_open_ex(dirfd, path, flags, mode, o, purpose, 0, NULL);
}

static struct oa_file *oa_handle_for(int dirfd, const char *path, int purpose,
			      const char *jdir)
{
	struct oa_options o = { .size = sizeof(o), .journal_dir = jdir };
	return handle_open(dirfd, path, O_RDONLY,
			   0, &o, purpose);
}

oa_file *oa_open_opts(const char *path, int flags, mode_t mode,
		      const struct oa_options *opts)
{
	return handle_open(AT_FDCWD, path, flags, mode, opts, P_WORK);
}

oa_file *oa_open(const char *path, int flags, mode_t mode)
{
	return handle_open(AT_FDCWD, path, flags, mode, NULL, P_WORK);
}

oa_file *oa_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	return handle_open(dirfd, path, flags, mode, NULL, P_WORK);
}

int oa__recover_ex(const char *path, const char *jdir, unsigned flags,
		   FILE *out)
{
	struct oa_options o = { .size = sizeof(o), .journal_dir = jdir };
	/* Read-only: the file is reopened for writing only if recovery has
	 * something to write (oa_recover_locked), so that a clean file on a
	 * read-only mount, or one the caller may only read, is recovered by
	 * doing nothing. */
	struct oa_file *f = handle_open_ex(AT_FDCWD, path, O_RDONLY, 0, &o,
					   P_RECOVER, flags, out);
	if (!f)
		return -1;
	oa_handle_free(f);
	return 0;
}

int oa__ctl_path(const char *path, const char *jdir, char *out, size_t n)
{
	struct oa_file *f = oa_handle_for(AT_FDCWD, path, P_CHECK, jdir);
	char proc[64], dir[PATH_MAX];
	ssize_t len;
	int r;

	if (!f)
		return -1;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", f->dfd);
	len = oa_sys->readlinkat(AT_FDCWD, proc, dir, sizeof(dir) - 1);
	if (len <= 0) {
		oa_handle_free(f);
		return -1;
	}
	dir[len] = 0;
	r = snprintf(out, n, "%s/%s.oa", strcmp(dir, "/") ? dir : "",
		     f->prefix);
	oa_handle_free(f);
	if (r < 0 || (size_t)r >= n) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

int oa__check(const char *path, const char *jdir, FILE *out)
{
	struct oa_file *f = oa_handle_for(AT_FDCWD, path, P_CHECK, jdir);
	int r;

	if (!f) {
		if (errno != EPERM)
			return -1;
		/* oa_ctl_open refused the control file (GUARANTEES.md §10). */
		if (out)
			fprintf(out, "%s: control file is not a regular file owned "
				"by the file's owner, root or you, or is writable "
				"by others: not trusted\n", path);
		return 2;
	}
	r = oa_check_handle(f, path, out);
	int e = errno;
	oa_handle_free(f);
	errno = e;
	return r;
}

int oa__recover_opts(const char *path, const char *jdir)
{
	return oa__recover_ex(path, jdir, 0, NULL);
}

int oa_recover(const char *path)
{
	return oa__recover_opts(path, NULL);
}

/* ---- reading ---- */

static int usable(struct oa_file *f)
{
	/* A handle inherited through fork belongs to the parent: the child
	 * may only close it (oatomic(3), FORK AND EXEC). */
	if (!f || f->forkgen != oa_fork_gen()) {
		errno = EBADF;
		return -1;
	}
	if (f->latched) {
		errno = EIO;
		return -1;
	}
	if (f->fast && upgrade(f) < 0)
		return -1;
	return 0;
}

/* A handle opened before the file was ever used with oatomic has no
 * control file; look again, one may exist now. */
static void find_ctl(struct oa_file *f)
{
	if (f->cfd >= 0 || f->dfd < 0 || f->forkgen != oa_fork_gen())
		return;
	if (oa_ctl_open(f, false) < 0) {
		f->cfd = -1;
		return;
	}
	/* Open, as every handle that has the control file is: the last
	 * handle cuts it back to its clean length. */
	if (oa_ctl_lock(f, OA_LOCK_OPEN, F_RDLCK, 1) < 0) {
		oa_xclose(f->cfd);
		f->cfd = -1;
		return;
	}
	ctl_clean(f);    /* maps the live area of one in use */
}

/* Take APPLY shared, first finishing a commit whose committer died; or,
 * where *OPT is set and I17 allows it (control.c, oa_agen_peek), take
 * nothing: *OPT stays set, and read_done says whether the read stands. */
static int read_lock(struct oa_file *f, bool *opt, uint64_t *gen)
{
	struct oa_live l;
	find_ctl(f);
	if (f->cfd < 0) {
		*opt = false;
		return 0;
	}
	if (*opt && oa_agen_peek(f, gen))
		return 0;
	*opt = false;
	for (;;) {
		if (oa_ctl_lock(f, OA_LOCK_APPLY, F_RDLCK, 1) < 0)
			return -1;
		if (oa_live_read(f, &l) < 0)
			return 0;
		/* A handle that opened the control file clean has no mapping
		 * of the live area; once a writer has put it in use (a commit
		 * was numbered), map it, once: later reads can then go
		 * without the lock (I17).  It stays in use while this handle
		 * holds OPEN. */
		if (!f->live && !f->live_tried && l.last_seq) {
			f->live_tried = true;
			oa_ctl_map(f);
		}
		if (l.dirty_seq == 0)
			return 0;
		if (!f->cfd_rw) {
			/* Holding APPLY, a live committer is not half-way
			 * through its apply; a dead one may be, and this reader
			 * cannot finish it. */
			int held = oa_lock_held(f->cfd, OA_LOCK_COMMIT, F_WRLCK);
			if (held != 0) {
				if (held < 0)
					return -1;
				return 0;
			}
			oa_ctl_lock(f, OA_LOCK_APPLY, F_UNLCK, 0);
			errno = EACCES;
			return -1;
		}
		/* A commit is in flight, or its committer died: wait for the
		 * commit lock, which tells the two apart. */
		oa_ctl_lock(f, OA_LOCK_APPLY, F_UNLCK, 0);
		if (oa_commit_begin(f, NULL, NULL) < 0)
			return -1;
		oa_commit_end(f);
	}
}

static void read_unlock(struct oa_file *f)
{
	if (f->cfd >= 0)
		oa_ctl_lock(f, OA_LOCK_APPLY, F_UNLCK, 0);
}

/* The end of a read read_lock began: false where it took no lock and a
 * change of the file may have crossed it (read again, locked). */
static bool read_done(struct oa_file *f, bool opt, uint64_t gen)
{
	if (opt)
		return oa_agen_same(f, gen);
	read_unlock(f);
	return true;
}

/* The file's bytes [OFF, OFF+N) as the kernel has them, short at its end. */
static ssize_t read_file(struct oa_file *f, char *p, size_t n, off_t off)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = oa_xpread(f->tfd, p + got, n - got,
				      off + (off_t)got);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

/* A handle opened on the clean mark, used by the process that opened it
 * and not latched: oa_pread and oa_fstat can take the fast way. */
static bool fast_ok(const struct oa_file *f)
{
	return f && f->fast && f->forkgen == oa_fork_gen() && !f->latched;
}

/* Committed bytes [a, b) into P: the file below the truncation point and
 * its committed size, zeros elsewhere. */
static int read_committed(struct oa_file *f, char *p, uint64_t a, uint64_t b,
			  uint64_t sc)
{
	uint64_t lim = sc;
	if (f->has_trunc && f->t_min < lim)
		lim = f->t_min;
	if (a < b && a < lim) {
		ssize_t r = read_file(f, p, (size_t)((b < lim ? b : lim) - a),
				      (off_t)a);
		if (r < 0)
			return -1;
		p += r;
		a += (uint64_t)r;
	}
	if (a < b)
		memset(p, 0, (size_t)(b - a));
	return 0;
}

ssize_t oa_pread(oa_file *f, void *buf, size_t n, off_t off)
{
	uint64_t end, pos, sc, v;
	char *p = buf;
	ssize_t ret = -1;

	if (fast_ok(f) && f->acc != O_WRONLY && off >= 0) {
		/* Opened on a valid clean mark: read, then look at the mark
		 * again.  The same mark: no change of the file began before
		 * the read ended (control.c, M2).  Otherwise the open is done in
		 * full and the read done again the usual way. */
		ssize_t got = read_file(f, p, n > SSIZE_MAX ? SSIZE_MAX : n,
					off);
		if (got < 0)
			return -1;
		if (MUTANT(56) || oa_mark_same(f, f->mark))
			return got;
		if (upgrade(f) < 0)
			return -1;
	}
	if (usable(f) < 0)
		return -1;
	if (f->acc == O_WRONLY) {
		errno = EBADF;
		return -1;
	}
	if (off < 0) {
		errno = EINVAL;
		return -1;
	}
	if (n > SSIZE_MAX)
		n = SSIZE_MAX;
	/* Stores waiting in mapped pages of the range are pending bytes. */
	if (f->map && oa_map_flush(f, (uint64_t)off,
				   (uint64_t)off + n < (uint64_t)off ? UINT64_MAX
				   : (uint64_t)off + n) < 0)
		return -1;
	/* A staged write is read through the journal like any other. */
	if (oa_unstage(f) < 0)
		return -1;
	bool opt = true;
	uint64_t gen = 0;
again:
	if (read_lock(f, &opt, &gen) < 0)
		return -1;
	bool unlocked = f->cfd < 0;
	if (!f->pending) {
		/* Nothing pending: the committed bytes are the file's, and
		 * the kernel knows where it ends. */
		ret = read_file(f, p, n, off);
		goto out;
	}
	if (oa_xfsize(f->tfd, &sc) < 0)
		goto out;
	v = oa_view_size(f, sc);   /* pending: the fast path above took the rest */
	if ((uint64_t)off >= v || n == 0) {
		ret = 0;
		goto out;
	}
	end = (uint64_t)off + n;
	if (end > v)
		end = v;
	pos = (uint64_t)off;
	for (void *c = oa_index_seek(f->ix, pos); pos < end;) {
		struct oa_ext e;
		uint64_t stop = end;
		if (c) {
			oa_index_get(c, &e);
			if (e.off < stop && e.off > pos)
				stop = e.off;
		}
		if (!c || e.off >= end || e.off > pos) {
			if (read_committed(f, p + (pos - (uint64_t)off), pos,
					   stop, sc) < 0)
				goto out;
			pos = stop;
			continue;
		}
		uint64_t from = pos, to = e.off + e.len < end ? e.off + e.len : end;
		uint64_t jo;
		int sfd = oa_ext_fd(f, &e, &jo);
		if (oa_pread_full(sfd, p + (from - (uint64_t)off),
				  (size_t)(to - from),
				  (off_t)(jo + (from - e.off))) < 0)
			goto out;
		pos = to;
		c = oa_index_next(f->ix, c);
	}
	ret = (ssize_t)(end - (uint64_t)off);
out:
	if (!read_done(f, opt, gen) && ret >= 0) {
		opt = false;   /* a change crossed it: again, under APPLY */
		goto again;
	}
	/* Read without a lock because no writer had ever come: if one has
	 * come meanwhile (its control file exists before its first apply), the
	 * read may have crossed a commit.  Read again, locked. */
	if (unlocked && ret >= 0) {
		find_ctl(f);
		if (f->cfd >= 0)
			goto again;
	}
	return ret;
}

/* What the file system says of the file, as the handle sees it: the
 * whole stat (ST), or only the size (SIZE; ST NULL).  The size alone is
 * asked for without the timestamps: on Linux 6.13 and later a program that
 * reads a file's ctime makes the file system stamp the file's next change
 * with a fine-grained time, which moves the clock every other file's
 * changes are stamped with; a file on a loop device then changes its
 * backing file's mtime at each flush, and the backing file system commits
 * its log for it.  The SQLite VFS asks for the size at the start of every
 * transaction: its commits flushed 30 % slower on these disks through
 * oa_fstat. */
static int stat_seen(oa_file *f, struct stat *st, uint64_t *size)
{
	int r;
	uint64_t sz = 0;
	if (fast_ok(f)) {
		/* As a fast read (oa_pread): the file's, if the mark is the
		 * same after (a program's open, fstat, read stays fast). */
		r = st ? oa_xfstat_all(f->tfd, st) : oa_xfsize(f->tfd, size);
		if (r == 0 && oa_mark_same(f, f->mark))
			return 0;
		if (upgrade(f) < 0)
			return -1;
	}
	if (usable(f) < 0)
		return -1;
	if (oa_unstage(f) < 0)
		return -1;
	bool opt = true;
	uint64_t gen = 0;
	do {
		if (read_lock(f, &opt, &gen) < 0)
			return -1;
		if (st) {
			r = oa_xfstat_all(f->tfd, st);
			uint64_t cap;
			if (r == 0 && f->blkdev && oa_xfsize(f->tfd, &cap) == 0)
				st->st_size = (off_t)cap;   /* the size the handle sees */
			sz = r == 0 ? (uint64_t)st->st_size : 0;
		} else {
			r = oa_xfsize(f->tfd, &sz);   /* a device's size too */
		}
		if (r == 0 && f->pending)
			sz = oa_view_size(f, sz);
		if (!read_done(f, opt, gen) && r == 0)
			opt = false;   /* again, under APPLY */
		else
			break;
	} while (1);
	if (r == 0 && st)
		st->st_size = (off_t)sz;
	else if (r == 0)
		*size = sz;
	return r;
}

int oa_fstat(oa_file *f, struct stat *st)
{
	if (!st && usable(f) == 0)
		errno = EFAULT;
	if (!st)
		return -1;
	return stat_seen(f, st, NULL);
}

int oa_fsize(oa_file *f, off_t *size)
{
	uint64_t sz;
	if (!size && usable(f) == 0)
		errno = EFAULT;
	if (!size || stat_seen(f, NULL, &sz) < 0)
		return -1;
	*size = (off_t)sz;
	return 0;
}

/* ---- writing ---- */

/* Would a file of size END be too big, as pwrite(2) and ftruncate(2) would
 * find at apply time?  The file system's limit is what lseek(2) refuses
 * (s_maxbytes); the process's is RLIMIT_FSIZE (refused here with EFBIG,
 * without the SIGXFSZ the kernel would send). */
static bool too_big(struct oa_file *f, uint64_t end)
{
	struct rlimit rl;
	if (end > OA_OFF_MAX)
		return true;
	/* Sizes up to the largest one already seen to fit need no asking. */
	if (end <= f->size_ok)
		return false;
	if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    end > rl.rlim_cur)
		return true;
	if (oa_sys->lseek(f->tfd, (off_t)end, SEEK_SET) < 0 && errno == EINVAL)
		return true;
	/* Ask again past a limit later lowered: only while under 1 GiB. */
	f->size_ok = end < (1ull << 30) ? end : (1ull << 30);
	return false;
}

static int writable(struct oa_file *f)
{
	if (usable(f) < 0)
		return -1;
	if (f->acc == O_RDONLY || !f->cfd_rw) {
		errno = EBADF;
		return -1;
	}
	/* AUTO's choice waits for the first change: an open that only reads
	 * does not probe the file system. */
	if (f->method_lazy) {
		if (oa_method_resolve(f) < 0)
			return -1;
		f->method_lazy = false;
	}
	return 0;
}

ssize_t oa_pwritev(oa_file *f, const struct iovec *iov, int iovcnt, off_t off)
{
	uint64_t total = 0;

	if (writable(f) < 0)
		return -1;
	if (off < 0 || iovcnt < 0 || iovcnt > IOV_MAX) {
		errno = EINVAL;
		return -1;
	}
	for (int k = 0; k < iovcnt; k++) {
		if (iov[k].iov_len > SSIZE_MAX - total) {
			errno = EINVAL;
			return -1;
		}
		total += iov[k].iov_len;
	}
	if (total == 0)
		return 0;
	if (f->blkdev && total <= OA_OFF_MAX - (uint64_t)off) {
		/* a device does not grow: past its end, pwrite(2)'s ENOSPC */
		uint64_t cap;
		if (oa_xfsize(f->tfd, &cap) < 0)
			return -1;
		if ((uint64_t)off + total > cap) {
			errno = ENOSPC;
			return -1;
		}
	}
	if (total > OA_OFF_MAX - (uint64_t)off ||
	    too_big(f, (uint64_t)off + total)) {
		errno = EFBIG;
		return -1;
	}
	if (f->opt.max_txn_bytes && f->txn_bytes + total > f->opt.max_txn_bytes) {
		errno = EFBIG;
		return -1;
	}
	/* Stores waiting in mapped pages of the range come first. */
	if (oa_map_flush(f, (uint64_t)off, (uint64_t)off + total) < 0)
		return -1;
	ssize_t r = oa_txn_write(f, iov, iovcnt, total, (uint64_t)off);
	if (r > 0 && f->map) {
		/* ... and the handle's mappings show the write */
		struct iovec cut[IOV_MAX];
		uint64_t left = (uint64_t)r;
		int n = 0;
		for (int k = 0; k < iovcnt && left; k++, n++) {
			cut[n] = iov[k];
			if (cut[n].iov_len > left)
				cut[n].iov_len = (size_t)left;
			left -= cut[n].iov_len;
		}
		if (oa_map_wrote(f, cut, n, (uint64_t)off) < 0) {
			/* pending, but not shown: the handle cannot go on */
			f->latched = true;
			return -1;
		}
	}
	return r;
}

ssize_t oa_pwrite(oa_file *f, const void *buf, size_t n, off_t off)
{
	struct iovec v = { .iov_base = (void *)buf, .iov_len = n };
	return oa_pwritev(f, &v, 1, off);
}

int oa_ftruncate(oa_file *f, off_t length)
{
	if (writable(f) < 0)
		return -1;
	if (length < 0 || f->blkdev) {
		errno = EINVAL;   /* ftruncate(2) of a device, too */
		return -1;
	}
	if (too_big(f, (uint64_t)length)) {
		errno = EFBIG;
		return -1;
	}
	if (oa_unstage(f) < 0)
		return -1;
	uint64_t oldv = 0;
	if (f->map) {
		/* stores beyond the new end (or the old: discarded) came
		 * before the truncate */
		uint64_t sc;
		if (oa_xfsize(f->tfd, &sc) < 0)
			return -1;
		oldv = oa_view_size(f, sc);
		uint64_t from = (uint64_t)length < oldv ? (uint64_t)length : oldv;
		if (oa_map_flush(f, from, UINT64_MAX) < 0)
			return -1;
	}
	/* The shadow keeps nothing past the cut either: a whole replace
	 * exchanges all of it (exchange.c W1). */
	if (oa_shadow_cut(f, (uint64_t)length) < 0)
		return -1;
	oa_index_truncate(f->ix, (uint64_t)length);
	if (!f->has_trunc || (uint64_t)length < f->t_min)
		f->t_min = (uint64_t)length;
	f->t_last = (uint64_t)length;
	f->has_trunc = true;
	f->pending = true;
	/* A write continuing the stream would land beyond a new end. */
	f->rec_next_off = UINT64_MAX;
	if (f->map && oa_map_truncated(f, (uint64_t)length, oldv) < 0) {
		f->latched = true;
		return -1;
	}
	return 0;
}

/* ---- mappings (map.c) ---- */

void *oa_mmap(oa_file *f, size_t length, int prot, off_t offset)
{
	if (usable(f) < 0)
		return NULL;
	/* as mmap(2) of a descriptor: reading needs it open for reading,
	 * a writable mapping for writing too */
	if (f->acc == O_WRONLY) {
		errno = EACCES;
		return NULL;
	}
	if (offset < 0) {
		errno = EINVAL;
		return NULL;
	}
	if ((prot & PROT_WRITE) && (f->acc != O_RDWR || writable(f) < 0)) {
		errno = EACCES;
		return NULL;
	}
	if (oa_unstage(f) < 0)
		return NULL;
	return oa_map_add(f, length, prot, (uint64_t)offset);
}

int oa_munmap(oa_file *f, void *addr, size_t length)
{
	if (usable(f) < 0)
		return -1;
	return oa_map_remove(f, addr, length);
}

/* ---- commit, abort, close ---- */

static int reclaim(struct oa_file *f);
static struct oa_file *handle_sibling(struct oa_file *f);
static const struct oa_gc_ops gc_ops = {
	.open_sibling = handle_sibling,
	.pwrite = oa_pwrite,
	.commit = oa_commit,
	.abort = oa_abort,
	.close = oa_close,
};

static int commit_txn(struct oa_file *f)
{
	if (!f->pending)
		return 0;
	if (f->staged) {
		int r = oa_commit_kernel(f);
		if (r <= 0)
			return r;
		if (oa_unstage(f) < 0)   /* not possible now: the journal */
			return -1;
	}
	/* (a first transaction that grew scattered: the journal) */
	if (oa_xchg_scattered(f) && oa_unshadow(f) < 0)
		return -1;
	if (f->shadowed) {
		int r = oa_commit_exchange(f);
		if (r <= 0)
			return r;
		if (oa_unshadow(f) < 0)  /* not possible: the journal */
			return -1;
	}
	/* Concurrent commits of the file in this process share a flush
	 * (gcommit.c, B1-B5). */
	int r;
	switch (oa_gc_enter(f, &gc_ops)) {
	case OA_GC_MERGED:
		/* Committed by a batch: what this handle's journal holds of
		 * it never gets a commit record (I1), as if aborted. */
		oa_txn_drop(f);
		if (reclaim(f) < 0 && errno == EIO) {
			f->latched = true;
			return -1;
		}
		return 0;
	case OA_GC_EIO:
		f->latched = true;   /* B3, I9 */
		errno = EIO;
		return -1;
	case OA_GC_ALONE:
		r = oa_commit_journal(f);
		oa_gc_done(f);
		return r;
	default:
		return oa_commit_journal(f);
	}
}

int oa_commit(oa_file *f)
{
	if (usable(f) < 0)
		return -1;
	OA_ASSERT(oa_txn_state(f) <= OA_TXN_SHADOW);
	/* the stores in mapped pages join the transaction; the pages stay
	 * frozen until it is over (map.c) */
	if (MUTANT(31)) {
		int r0 = commit_txn(f);
		if (oa_map_begin(f, true) < 0)
			return -1;
		oa_map_end(f, r0 == 0);
		return r0;
	}
	if (oa_map_begin(f, true) < 0)
		return -1;
	int r = commit_txn(f);
	oa_map_end(f, r == 0 || !f->pending);
	return r;
}

/* ---- several files in one commit ---- */

/* The absolute path of descriptor FD (a file or a directory): malloc'd, or
 * NULL with errno (ENOENT: the file has no name any more). */
static char *fd_path(int fd)
{
	char proc[64], *p = malloc(PATH_MAX);
	ssize_t n;
	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	n = oa_sys->readlinkat(AT_FDCWD, proc, p, PATH_MAX - 1);
	if (n <= 0 || p[0] != '/') {
		free(p);
		errno = n < 0 ? errno : ENOENT;
		return NULL;
	}
	p[n] = 0;
	return p;
}

/* The combiner of F's file (gcommit.c, struct oa_gc_ops). */
static struct oa_file *handle_sibling(struct oa_file *f)
{
	char *path = fd_path(f->tfd), *jdir = NULL;
	struct oa_file *c = NULL;
	if (!path)
		return NULL;
	if (!f->jdir || (jdir = fd_path(f->dfd))) {
		struct oa_options o = { .size = sizeof(o),
					.method = OA_METHOD_JOURNAL,
					.journal_dir = jdir };
		c = handle_open(AT_FDCWD, path, O_RDWR, 0, &o, P_WORK);
	}
	free(path);
	free(jdir);
	/* the name may lead to another file by now */
	if (c && (c->dev != f->dev || c->ino != f->ino)) {
		oa_close(c);
		errno = ESTALE;
		return NULL;
	}
	if (c)
		c->gc_off = true;   /* its own commits are the batches */
	return c;
}

/* How recovery finds member F again: the path it has now (checked to name
 * its inode: an unlinked file, or one whose name another file took, has
 * none recovery could use: ENOENT) and its journal directory, if it was
 * given one.  REF's strings are malloc'd. */
static int group_ref(struct oa_file *f, struct oa_gref *ref)
{
	struct stat st;
	char *path = fd_path(f->tfd), *jdir = NULL;
	if (!path)
		return -1;
	if (oa_sys->fstatat(AT_FDCWD, path, &st, 0) < 0 ||
	    st.st_dev != f->dev || (uint64_t)st.st_ino != f->ino) {
		free(path);
		errno = ENOENT;
		return -1;
	}
	if (f->jdir && !(jdir = fd_path(f->dfd))) {
		free(path);
		return -1;
	}
	if (strlen(path) > UINT16_MAX || (jdir && strlen(jdir) > UINT16_MAX)) {
		free(path);
		free(jdir);
		errno = ENAMETOOLONG;
		return -1;
	}
	*ref = (struct oa_gref){ .ino = f->ino, .igen = f->igen, .path = path,
				 .jdir = jdir, .plen = (uint16_t)strlen(path),
				 .dlen = jdir ? (uint16_t)strlen(jdir) : 0 };
	return 0;
}

/* A handle, opened for PURPOSE, on the file a group's reference R names;
 * NULL with ESTALE where the path names another inode now. */
static struct oa_file *group_open(const struct oa_gref *r, int purpose)
{
	char *path = strndup(r->path, r->plen);
	char *jdir = r->dlen ? strndup(r->jdir, r->dlen) : NULL;
	struct oa_file *g = NULL;
	if (!path || (r->dlen && !jdir)) {
		errno = ENOMEM;
		goto out;
	}
	struct oa_options o = { .size = sizeof(o), .journal_dir = jdir };
	group_depth++;
	g = handle_open_ex(AT_FDCWD, path, O_RDONLY, 0, &o, P_CHECK, 0, NULL);
	if (g && (g->ino != r->ino || g->igen != r->igen)) {
		oa_handle_free(g);
		g = NULL;
		errno = ESTALE;
	}
	if (g && purpose == P_RECOVER) {
		oa_handle_free(g);
		g = handle_open_ex(AT_FDCWD, path, O_RDONLY, 0, &o, P_RECOVER,
				   0, NULL);
	}
	group_depth--;
out:
	free(path);
	free(jdir);
	return g;
}

/* Recovery of a member asks its coordinator (recover.c, resolve_members).
 * No lock of the coordinator is taken, and none is needed: the caller
 * holds the member's COMMIT, which the group's committer held from before
 * the member's record until it was settled (G1), so that committer is
 * gone; no one writes the group's decision now, and the coordinator's
 * record cannot go before the member is settled (G5), which needs the
 * member's COMMIT.  Taking the coordinator's lock here could wait for
 * ourselves: a coordinator's recovery settles its members (below). */
static int group_decided(struct oa_file *f, const struct oa_gref *r,
			 uint64_t gid)
{
	(void)f;
	struct oa_file *c = group_open(r, P_CHECK);
	int d;
	if (!c)
		return -1;
	d = c->cfd < 0 ? 0 : oa_group_find(c, gid);
	int e = errno;
	oa_handle_free(c);
	errno = e;
	return d;
}

/* Recovery of a coordinator settles each member: the member's own
 * recovery, which asks the coordinator (group_decided) and replays. */
static int group_settle(struct oa_file *f, const struct oa_gref *r,
			uint64_t gid)
{
	(void)f;
	(void)gid;
	struct oa_file *m = group_open(r, P_RECOVER);
	if (!m)
		return -1;
	oa_handle_free(m);
	return 0;
}

static int dev_ino_cmp(const void *a, const void *b)
{
	const struct oa_file *x = *(struct oa_file *const *)a;
	const struct oa_file *y = *(struct oa_file *const *)b;
	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

int oa_commit_group(oa_file *const files[], size_t n)
{
	struct oa_file **fs = NULL, **p = NULL;
	struct oa_gref *refs = NULL;
	size_t np = 0, i, nmap = 0;
	int r = -1, e = 0;

	if (n == 0)
		return 0;
	if (!files) {
		errno = EFAULT;
		return -1;
	}
	fs = calloc(n, sizeof(*fs));
	p = calloc(n, sizeof(*p));
	refs = calloc(n, sizeof(*refs));
	if (!fs || !p || !refs) {
		e = ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i++) {
		if (usable(files[i]) < 0) {
			e = errno;
			goto out;
		}
		/* not yet in a group: recovery finds members by a path
		 * checked by inode, which a device's /dev name is not */
		if (files[i]->blkdev) {
			e = EINVAL;
			goto out;
		}
		fs[i] = files[i];
	}
	/* One handle per file: two handles of one inode (or one handle
	 * twice) would be two transactions of one file in one unit. */
	qsort(fs, n, sizeof(*fs), dev_ino_cmp);
	for (i = 1; i < n; i++)
		if (dev_ino_cmp(&fs[i - 1], &fs[i]) == 0) {
			e = EINVAL;
			goto out;
		}
	/* The mappings' stores join their transactions, as in oa_commit. */
	for (nmap = 0; nmap < n; nmap++)
		if (oa_map_begin(fs[nmap], true) < 0) {
			e = errno;
			goto out;
		}
	for (i = 0; i < n; i++)
		if (fs[i]->pending)
			p[np++] = fs[i];
	if (np <= 1) {
		/* Nothing to tie together: one file's commit is atomic. */
		r = np ? commit_txn(p[0]) : 0;
		e = errno;
		goto out;
	}
	/* In a group every member commits through its journal (G2 needs a
	 * record in each): the kernel method's staged write and the
	 * exchange method's shadow go back to the journal. */
	for (i = 0; i < np; i++) {
		if ((p[i]->staged && oa_unstage(p[i]) < 0) ||
		    (p[i]->shadowed && oa_unshadow(p[i]) < 0) ||
		    group_ref(p[i], &refs[i]) < 0) {
			e = errno;
			goto out;
		}
	}
	r = oa_commit_group_journal(p, np, refs);
	e = errno;
out:
	for (i = 0; i < nmap; i++)
		oa_map_end(fs[i], r == 0 || !fs[i]->pending);
	for (i = 0; refs && i < n; i++) {
		free((char *)refs[i].path);
		free((char *)refs[i].jdir);
	}
	free(refs);
	free(p);
	free(fs);
	errno = e;
	return r;
}

/* Reclaim journal space when aborted data alone has filled it. */
static int reclaim(struct oa_file *f)
{
	int r;
	if (f->jfd < 0 || f->pos <= oa_jrnl_ckpt(f))
		return 0;
	/* (reached when aborted data alone passed the checkpoint mark, or a
	 * failed big transaction grew the journal) */
	if (oa_ctl_lock(f, OA_LOCK_COMMIT, F_WRLCK, 1) < 0)
		return -1;
	/* Give back all an aborted transaction grew the journal by: it may
	 * be why the disk is full. */
	r = oa_journal_recycle_locked(f, OA_JRNL_INITIAL);
	oa_ctl_lock(f, OA_LOCK_COMMIT, F_UNLCK, 0);
	return r;
}

int oa_abort(oa_file *f)
{
	if (usable(f) < 0)
		return -1;
	OA_ASSERT(oa_txn_state(f) <= OA_TXN_SHADOW);
	if (!MUTANT(32) && oa_map_begin(f, false) < 0)
		return -1;
	oa_txn_drop(f);
	if (!MUTANT(32))
		oa_map_end(f, true);   /* the mappings show the committed file */
	/* Dropped.  Giving the journal's space back is the rest: where it
	 * fails for want of space (or a lock), the handle goes on and the
	 * next recycle or the last close tries again; a failed flush (EIO)
	 * latches the handle (I9), and that is reported. */
	if (reclaim(f) < 0 && errno == EIO) {
		f->latched = true;
		return -1;
	}
	return 0;
}

/* Closing a handle whose journal grew (a big transaction's bytes):
 * checkpoint, start a new generation and cut the journal back to its ring,
 * so that the space comes back now and a later recovery does not read
 * through it.  Best effort: a failure leaves a journal that the next
 * acquire recycles. */
static void trim_journal(struct oa_file *f)
{
	uint64_t jsize;
	if (f->jfd < 0 || oa_xfsize(f->jfd, &jsize) < 0 ||
	    jsize <= OA_JRNL_INITIAL)
		return;
	if (oa_commit_begin(f, NULL, NULL) < 0)
		return;
	oa_journal_recycle_locked(f, OA_JRNL_INITIAL);
	oa_commit_end(f);
}

/* The file carries no clean mark valid here, and could (a close that finds
 * one valid takes no lock). */
static bool mark_missing(struct oa_file *f)
{
	unsigned char m[OA_MARK_LEN];
	uint64_t mnt;
	return oa_sys->fsetxattr && oa_mount_id(f->tfd, &mnt) &&
	       oa_mark_get(f, mnt, m) != 1;
}

/* No commit in flight (COMMIT held): the control file is clean, or its live
 * area's dirty marker is clear (I10). */
static bool quiet(struct oa_file *f)
{
	struct oa_live l;
	int r = ctl_clean_map(f, false);
	if (r != 0)
		return r == 1;
	return oa_live_read(f, &l) == 0 && l.dirty_seq == 0;
}

/* The last handle's close (OPEN exclusive): every commit durably in the
 * file, the control file clean, the clean mark set.  0 or -1. */
static int close_last(struct oa_file *f)
{
	int r = 0;
	oa_journal_release(f);
	if (oa_ctl_lock(f, OA_LOCK_COMMIT, F_WRLCK, 1) == 0) {
		r = oa_heal_locked(f, NULL);
		if (r == 0)
			r = oa_clean_locked(f);
		/* M1: the last handle leaves the clean mark, for readers to
		 * open the file cheaply. */
		if (r == 0)
			oa_mark_clean(f);
		oa_ctl_lock(f, OA_LOCK_COMMIT, F_UNLCK, 0);
	}
	return r;
}

int oa_close(oa_file *f)
{
	int r = 0;
	if (!f) {
		errno = EBADF;
		return -1;
	}
	if (f->forkgen != oa_fork_gen()) {
		/* Inherited: free this process's copy, touch nothing shared
		 * (no lock, no checkpoint, nothing committed). */
		oa_handle_free(f);
		return 0;
	}
	if (f->fast) {
		/* Opened on a clean mark and only read: nothing to give
		 * back, no lock held. */
		oa_handle_free(f);
		return 0;
	}
	oa_gc_leave(f);   /* before the last close: its combiner goes */
	oa_map_free(f);   /* mappings go: their stores with the rest */
	oa_txn_drop(f);   /* what was pending is discarded */
	if (!f->latched && f->cfd >= 0 && f->cfd_rw)
		trim_journal(f);
	/* The last handle makes the file hold every commit durably and the
	 * control file clean again (oa_clean_locked), so that the next open
	 * has nothing to do and nothing is left beside the file.  A clean
	 * control file (a handle that only read) needs nothing. */
	bool can = !f->latched && f->cfd >= 0 && f->cfd_rw;
	int clean = can ? ctl_clean(f) : 1;
	if (clean == 0 && oa_ctl_lock(f, OA_LOCK_OPEN, F_WRLCK, 0) == 0) {
		r = close_last(f);
	} else {
		if (can && mark_missing(f) &&
		    oa_ctl_lock(f, OA_LOCK_COMMIT, F_WRLCK, 0) == 0) {
			/* Not the last, or nothing to give back: a close puts
			 * a missing clean mark back when no commit is in
			 * flight (M1), so that the readers that open
			 * meanwhile, which hold OPEN and take the long way,
			 * do not keep it away for good. */
			if (quiet(f))
				oa_mark_clean(f);
			oa_ctl_lock(f, OA_LOCK_COMMIT, F_UNLCK, 0);
		}
		/* Handles that close at the same moment each find the
		 * others' OPEN and none would be the last: the journals and
		 * the control file in use were left beside the file (8
		 * threads closing together: 7 extra journals).  So let OPEN
		 * go - this handle's journal and mapping first, which the
		 * last one removes and cuts away - and ask again: of the
		 * closers that end together, the one that lets go last finds
		 * nobody and finishes for all. */
		if (clean == 0) {
			oa_journal_release(f);
			oa_ctl_unmap(f);
			oa_ctl_lock(f, OA_LOCK_OPEN, F_UNLCK, 0);
			if (oa_ctl_lock(f, OA_LOCK_OPEN, F_WRLCK, 0) == 0 &&
			    ctl_clean(f) == 0)
				r = close_last(f);
		}
	}
	int e = errno;
	oa_handle_free(f);
	errno = e;
	return r;
}


/* ---- oa_ioinfo ---- */

int oa_ioinfo(oa_file *f, struct oa_ioinfo *info)
{
	struct oa_ioinfo io;
	struct oa_caps c;
	struct statfs sfs;
	size_t given, n;

	if (!f) {
		errno = EBADF;
		return -1;
	}
	if (!info || info->size < offsetof(struct oa_ioinfo, method) +
				  sizeof(int)) {
		errno = EINVAL;
		return -1;
	}
	if (f->latched) {
		errno = EIO;
		return -1;
	}
	if (f->fast && upgrade(f) < 0)
		return -1;
	given = info->size;
	if (oa_caps_get(f, &c) < 0)
		return -1;

	memset(&io, 0, sizeof(io));
	io.size = given;
	/* A read-only handle never commits: report what a writer would use. */
	io.method = oa_method_of(f, &c);
	io.fs_magic = c.fs_magic;
	const char *fsn = f->blkdev ? "blockdev" : oa__fs_name(io.fs_magic);
	if (fsn)
		snprintf(io.fs_name, sizeof(io.fs_name), "%s", fsn);
	else
		snprintf(io.fs_name, sizeof(io.fs_name), "0x%lx", io.fs_magic);
	io.block_size = c.blk;
	io.dio_mem_align = c.dio_mem;
	io.dio_offset_align = c.dio_off;
	io.atomic_write_unit_min = c.awu_min;
	io.atomic_write_unit_max = c.awu_max;
	io.atomic_write_segments_max = c.awu_segs;
	io.atomic_write_unit_hw_max = c.awu_hw;
	io.reflink = c.reflink;
	io.exchange = c.exchange;
	io.rwf_atomic = c.rwf_atomic;
	snprintf(io.map_tracking, sizeof(io.map_tracking), "%s",
		 oa_map_tracking());

	/* largest transaction: free space of the journal's file system less
	 * a reserve of 1/64, capped by the handle's option */
	memset(&sfs, 0, sizeof(sfs));   /* no journal (a device read
					 * without one): 0 */
	if (f->dfd >= 0 && oa_sys->fstatfs(f->dfd, &sfs) < 0)
		return -1;
	uint64_t bsize = sfs.f_bsize > 0 ? (uint64_t)sfs.f_bsize : 0;
	uint64_t avail = (uint64_t)sfs.f_bavail;
	uint64_t bytes = bsize && avail > UINT64_MAX / bsize ? UINT64_MAX
							     : avail * bsize;
	bytes -= bytes / 64;
	if (f->opt.max_txn_bytes && bytes > f->opt.max_txn_bytes)
		bytes = f->opt.max_txn_bytes;
	io.max_txn_bytes = bytes;

	n = given < sizeof(io) ? given : sizeof(io);
	memcpy(info, &io, n);
	return 0;
}
