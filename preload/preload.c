/*
 * preload.c - liboatomic-preload.so: O_ATOMIC for programs that were never
 * written for it (`oatomic run`, or LD_PRELOAD directly).
 *
 * A regular file that the program opens for writing and that the policy
 * matches (policy_wants) becomes an ATOMIC OPEN FILE DESCRIPTION (struct
 * aofd).  Its pending contents live in a private temporary file S (O_TMPFILE
 * beside the file, else a memfd): the descriptor the program gets IS S, so
 * the kernel itself keeps the file offset, O_APPEND, the size, dup, fork and
 * exec sharing, stdio and mappings - and nothing the program writes can
 * reach the real file F before a commit.  S holds only what was written
 * since the last commit; its holes stand for F's committed bytes below the
 * FLOOR (the lowest size the file had since that commit: O_TRUNC makes it
 * 0) and for zeros above it.
 *
 * Invariants (every operation below keeps them, under the aofd's lock):
 *  P1  pending image = S's data where S has data; else F's committed bytes
 *      below floor; else zeros; its size = S's size.  floor <= size.
 *  P2  a block of S below floor that holds data holds the WHOLE block's
 *      pending bytes (copy-up before a partial write: a hole next to written
 *      bytes would otherwise read as zeros at the commit).
 *  P3  a descriptor the preload cannot see writes through (a stdio FILE, a
 *      mapping, the standard descriptors a program starts with) has every
 *      block below floor filled (materialized): raw writes then keep P2.
 *  P4  the commit writes S's data extents (and the floor's truncation, and
 *      the size) into F through one oatomic transaction, and only after
 *      oa_commit returned 0 does it empty S: a crash or a failed commit
 *      leaves F as it was and S still pending.
 *  P6  in direct mode (one process, no raw path) S holds no data and the
 *      transaction of the process's handle H is the pending image; the
 *      written ranges are known (DIRTY, or an envelope of them), and
 *      spill() copies them from H's view into S, whole blocks, with the
 *      floor, before anything could reach S another way (fork, exec,
 *      spawn, stdio - also a standard descriptor 0-2, which the C
 *      library's own streams write raw -, mmap); then S mode, for good.
 *  P5  every process that holds the description holds a read lock on byte
 *      HOLD of its own open file description of S (its TOKEN); the process
 *      whose last reference goes away finds, under the MUTEX byte, whether
 *      any other holds it: only the last commits (or discards).  The kernel
 *      drops a killed process's lock, so a kill commits nothing.
 *
 * The shared facts (F's identity and path, the floor) are extended
 * attributes of S, so a program exec'd with the descriptor finds them.
 *
 * SPDX-License-Identifier: MIT
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <linux/close_range.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "oatomic.h"
#include "progcheck.h"

#define EXPORT __attribute__((visibility("default")))

#define X_TARGET "user.oatomic.target"   /* "DEV INO PATH" of F */
#define X_FLOOR  "user.oatomic.floor"    /* decimal */
#define L_MUTEX  ((off_t)1 << 40)        /* lock bytes on S (P5) */
#define L_HOLD   (L_MUTEX + 1)
#define ENV_FDS  "OATOMIC_PRELOAD_FDS"   /* S_ino:token:anchor,... across exec */

/* The C library's entry points that its headers do not declare (fortified
 * and pre-2.33 ones), and posix_spawn's without <spawn.h>'s types. */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t bl);
ssize_t __pread64_chk(int fd, void *buf, size_t n, off_t off, size_t bl);
int __fxstat(int ver, int fd, struct stat *st);
int __fxstat64(int ver, int fd, struct stat64 *st);
int __xstat(int ver, const char *path, struct stat *st);
int __xstat64(int ver, const char *path, struct stat64 *st);
int __lxstat(int ver, const char *path, struct stat *st);
int __lxstat64(int ver, const char *path, struct stat64 *st);
int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int fl);
int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st,
		 int fl);
int flock(int fd, int op);
int posix_spawn(pid_t *pid, const char *path, const void *fa, const void *at,
		char *const argv[], char *const envp[]);
int posix_spawnp(pid_t *pid, const char *file, const void *fa, const void *at,
		 char *const argv[], char *const envp[]);

/* ---- the real functions --------------------------------------------- */

#define REAL(name) \
	((__typeof__(&name))real_sym(&r_##name, #name))
static void *real_sym(void **slot, const char *name)
{
	void *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	if (!p) {
		p = dlsym(RTLD_NEXT, name);
		if (!p) {
			static const char m[] = "oatomic preload: missing libc symbol\n";
			(void)!syscall(SYS_write, 2, m, sizeof(m) - 1);
			abort();
		}
		__atomic_store_n(slot, p, __ATOMIC_RELEASE);
	}
	return p;
}
#define DECL(name) static void *r_##name
DECL(openat); DECL(close); DECL(read); DECL(write);
DECL(pread); DECL(pwrite); DECL(readv); DECL(writev); DECL(preadv);
DECL(pwritev); DECL(preadv2); DECL(pwritev2); DECL(lseek); DECL(ftruncate);
DECL(fstat); DECL(fstatat); DECL(statx); DECL(dup); DECL(dup2); DECL(dup3);
DECL(fcntl); DECL(fsync); DECL(fdatasync); DECL(mmap); DECL(munmap);
DECL(msync); DECL(fopen); DECL(fdopen); DECL(fclose); DECL(execve);
DECL(posix_spawn); DECL(posix_spawnp); DECL(copy_file_range);
DECL(sendfile); DECL(splice); DECL(fallocate); DECL(ioctl); DECL(flock);
DECL(fchmod); DECL(fchown); DECL(futimens); DECL(fsetxattr);
DECL(fgetxattr); DECL(fremovexattr); DECL(flistxattr); DECL(fstatfs);
DECL(close_range); DECL(truncate); DECL(freopen); DECL(posix_fallocate);

/* The preload's own work (and the library's, which calls libc's open, pwrite
 * and friends) passes straight through the interposers. */
static __thread int t_in;
#define IN()  (t_in++)
#define OUT() (t_in--)

/* ---- settings ---------------------------------------------------------- */

static char *g_match;        /* OATOMIC_MATCH: globs separated by ':' */
static bool g_discard;       /* OATOMIC_ON_CLOSE=discard */
static char g_self[PATH_MAX];/* this library's path (for children) */
static bool g_ready;
static pid_t g_pid;          /* this process (a vfork child is another) */

/* ---- the descriptions ------------------------------------------------- */

struct aofd {
	pthread_mutex_t mu;       /* threads of this process */
	struct aofd *next;        /* g_list */
	int refs;                 /* program descriptors here */
	int maps;                 /* shared mappings here */
	int tok;                  /* our open file description of S (P5) */
	pid_t tok_pid;            /* the process TOK's lock was taken for */
	int fork_tok;             /* the child's token, between fork handlers */
	int anchor;               /* F itself (locks, attributes), or -1 */
	int acc;                  /* O_RDONLY/O_WRONLY/O_RDWR as opened */
	dev_t dev, sdev;
	ino_t ino, sino;
	char *path;               /* F's absolute path when opened */
	oa_file *h;               /* handle on F (committed view; commits) */
	pid_t hpid;               /* process H belongs to */
	bool raw;                 /* P3 holds: never emptied by commits */
	bool solo;                /* no other process can have S: the OFD
				   * mutex is not needed (cleared for good at
				   * a fork, an exec or a spawn) */
	/* DIRECT mode (P6): while only this process can reach the
	 * description and nothing writes it raw, the pending changes are
	 * H's transaction itself, not S: a write is an oa_pwrite, a commit
	 * an oa_commit.  The offset and the size are then here, S holds no
	 * data, and spill() moves everything into S (S mode) the moment
	 * that stops being true: a fork, an exec, a spawn, stdio, mmap. */
	bool direct;
	bool append;              /* O_APPEND (direct mode keeps it) */
	bool dsync;               /* O_SYNC, O_DSYNC: each write commits */
	int64_t pos;              /* the offset (direct mode) */
	int64_t psize;            /* the pending size (direct mode) */
	int64_t dfloor;           /* the lowest size since the last commit */
	int64_t base;             /* the committed size then */
	struct rng { int64_t lo, hi; } *dirty;   /* written since (sorted) */
	int ndirty, cdirty;
	/* times the program set (futimens) while changes were pending: the
	 * commit that writes them would move the times on, so they are set
	 * again after it (cp -a, tar, rsync set them last) */
	struct timespec times[2];
	bool times_set;
	unsigned blk;             /* S's block size */
};

struct amap {
	struct amap *next;
	char *addr;
	size_t len;
	off_t off;
	struct aofd *a;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct aofd *g_list;
static struct amap *g_maps;
static struct aofd **g_tab;     /* program descriptor -> description */
static unsigned char *g_hid;    /* our own descriptors (tokens, anchors) */
static int g_cap;
static int g_base;              /* where hidden descriptors go */
static int g_hi;                /* 1 + the highest program descriptor set */

static void tab_init(void)
{
	if (g_tab)
		return;
	struct rlimit rl;
	long cap = 1 << 16;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY &&
	    (long)rl.rlim_max > cap)
		cap = (long)rl.rlim_max;
	if (cap > (1 << 22))
		cap = 1 << 22;
	void *t = mmap(NULL, (size_t)cap * (sizeof(*g_tab) + 1),
		       PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS |
		       MAP_NORESERVE, -1, 0);
	if (t == MAP_FAILED)
		abort();
	g_hid = (unsigned char *)((struct aofd **)t + cap);
	g_cap = (int)cap;
	__atomic_store_n(&g_tab, (struct aofd **)t, __ATOMIC_RELEASE);
	long cur = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? (long)rl.rlim_cur : 1024;
	g_base = cur > 64 ? (int)(cur / 2) : 10;
}

/* A vfork(2) child (posix_spawn, Python's subprocess) shares our memory
 * with the parent until it execs: it must change nothing here. */
static inline bool vforked(void)
{
	return g_pid && getpid() != g_pid;
}

static inline struct aofd *lookup(int fd)
{
	struct aofd **t = __atomic_load_n(&g_tab, __ATOMIC_ACQUIRE);
	if (!t || fd < 0 || fd >= g_cap)
		return NULL;
	return __atomic_load_n(&t[fd], __ATOMIC_ACQUIRE);
}

static void tab_set(int fd, struct aofd *a)
{
	if (fd >= 0 && fd < g_cap) {
		__atomic_store_n(&g_tab[fd], a, __ATOMIC_RELEASE);
		if (a && fd >= g_hi)
			g_hi = fd + 1;
	}
}

static bool hidden(int fd)
{
	return g_hid && fd >= 0 && fd < g_cap && g_hid[fd];
}

/* Move FD to a high number for ourselves (close-on-exec). */
static int hide(int fd)
{
	if (fd < 0)
		return fd;
	int h = REAL(fcntl)(fd, F_DUPFD_CLOEXEC, g_base);
	if (h < 0)
		h = REAL(fcntl)(fd, F_DUPFD_CLOEXEC, 3);
	int e = errno;
	REAL(close)(fd);
	errno = e;
	if (h >= 0 && h < g_cap)
		g_hid[h] = 1;
	return h;
}

static void unhide_close(int fd)
{
	if (fd < 0)
		return;
	if (fd < g_cap)
		g_hid[fd] = 0;
	REAL(close)(fd);
}

/* ---- small helpers ----------------------------------------------------- */

static int ofd_lock(int fd, short type, off_t at, bool wait)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET,
			    .l_start = at, .l_len = 1 };
	int r;
	do
		r = REAL(fcntl)(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl);
	while (r < 0 && errno == EINTR);
	return r;
}

/* Does any other open file description hold a lock on byte AT? */
static int ofd_others(int fd, off_t at)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
			    .l_start = at, .l_len = 1 };
	if (REAL(fcntl)(fd, F_OFD_GETLK, &fl) < 0)
		return -1;
	return fl.l_type != F_UNLCK;
}

static void say(const char *path, const char *what, int err)
{
	char b[PATH_MAX + 256];
	int n = snprintf(b, sizeof(b), "oatomic: %s: %s%s%s\n", path ? path : "?",
			 what, err ? ": " : "", err ? strerror(err) : "");
	if (n > 0)
		(void)!syscall(SYS_write, 2, b, (size_t)n < sizeof(b) ? (size_t)n : sizeof(b));
}

/* The size of FD's file, without asking for its timestamps: a stat that
 * reads them makes the next write log the inode (multigrain timestamps),
 * one more block per commit. */
static int64_t fd_size(int fd)
{
	struct statx sx;
	if (REAL(statx)(fd, "", AT_EMPTY_PATH, STATX_SIZE, &sx) < 0)
		return -1;
	return (int64_t)sx.stx_size;
}

static int64_t s_size(struct aofd *a)
{
	return fd_size(a->tok);
}

/* X_FLOOR holds "FLOOR BASE": the floor, and the file's committed size when
 * S was last emptied (at the open, or the last commit). */
static int get_fb(struct aofd *a, int64_t *floor, int64_t *base)
{
	char b[64];
	ssize_t n = REAL(fgetxattr)(a->tok, X_FLOOR, b, sizeof(b) - 1);
	long long f = 0, c = 0;
	if (n < 0)
		return -1;
	b[n] = 0;
	if (sscanf(b, "%lld %lld", &f, &c) != 2 || f < 0 || c < f) {
		errno = EIO;
		return -1;
	}
	*floor = f;
	*base = c;
	return 0;
}

static int64_t get_floor(struct aofd *a)
{
	int64_t f, c;
	return get_fb(a, &f, &c) < 0 ? -1 : f;
}

static int set_fb(struct aofd *a, int64_t floor, int64_t base)
{
	char b[64];
	int n = snprintf(b, sizeof(b), "%lld %lld", (long long)floor,
			 (long long)base);
	return REAL(fsetxattr)(a->tok, X_FLOOR, b, (size_t)n, 0);
}

/* A lower floor (a truncation), the base kept. */
static int set_floor(struct aofd *a, int64_t fl)
{
	int64_t f, c;
	if (get_fb(a, &f, &c) < 0)
		return -1;
	return set_fb(a, fl, c);
}

/* The handle on F, opened in this process (a forked child opens its own:
 * the parent's refuses every call there). */
static int need_handle(struct aofd *a)
{
	pid_t me = getpid();
	if (a->h && a->hpid == me)
		return 0;
	if (a->h) {
		oa_close(a->h);    /* the child's copy: frees memory only */
		a->h = NULL;
	}
	char path[PATH_MAX];
	const char *p = a->path;
	if (a->anchor >= 0) {
		char l[64];
		snprintf(l, sizeof(l), "/proc/self/fd/%d", a->anchor);
		ssize_t n = readlink(l, path, sizeof(path) - 1);
		if (n > 0 && path[0] == '/') {
			path[n] = 0;
			p = path;
		}
	}
	oa_file *h = oa_open(p, O_RDWR, 0);
	if (!h)
		return -1;
	struct stat st;
	if (oa_fstat(h, &st) < 0 || st.st_dev != a->dev || st.st_ino != a->ino) {
		oa_close(h);
		errno = ESTALE;
		return -1;
	}
	a->h = h;
	a->hpid = me;
	return 0;
}

/* F's committed bytes [off, off + n) into BUF, zeros past its end. */
static int read_f(struct aofd *a, char *buf, size_t n, off_t off)
{
	if (need_handle(a) < 0)
		return -1;
	size_t done = 0;
	while (done < n) {
		ssize_t r = oa_pread(a->h, buf + done, n - done, off + (off_t)done);
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		done += (size_t)r;
	}
	memset(buf + done, 0, n - done);
	return 0;
}

/* P2/P3: fill the hole blocks of S within [lo, hi) (below FLOOR) from F. */
static int fill_holes(struct aofd *a, int64_t lo, int64_t hi, int64_t floor)
{
	int64_t B = a->blk;
	lo -= lo % B;          /* whole blocks (P2) */
	if (hi % B)
		hi += B - hi % B;
	if (hi > floor)
		hi = floor;
	if (lo >= hi)
		return 0;
	char *buf = NULL;
	size_t cap = 0;
	int rc = 0;
	for (int64_t pos = lo; pos < hi;) {
		off_t d = REAL(lseek)(a->tok, pos, SEEK_DATA);
		if (d < 0 && errno != ENXIO) {
			rc = -1;
			break;
		}
		int64_t hend = d < 0 ? hi : (d < hi ? d : hi);
		while (pos < hend) {    /* the hole [pos, hend) */
			int64_t end = hend - pos > (1 << 20) ? pos + (1 << 20) : hend;
			if (end > floor)
				end = floor;
			size_t len = (size_t)(end - pos);
			if (len > cap) {
				free(buf);
				cap = len;
				buf = malloc(cap);
				if (!buf) {
					errno = ENOMEM;
					return -1;
				}
			}
			if (read_f(a, buf, len, pos) < 0 ||
			    REAL(pwrite)(a->tok, buf, len, pos) != (ssize_t)len) {
				if (errno == 0)
					errno = EIO;
				rc = -1;
				goto out;
			}
			pos = end;
		}
		if (d < 0 || d >= hi)
			break;
		off_t h = REAL(lseek)(a->tok, d, SEEK_HOLE);
		if (h < 0) {
			rc = -1;
			break;
		}
		pos = h;
	}
out:
	free(buf);
	return rc;
}

/* Before a write of [off, off + n): P2 for its first and last blocks. */
static int copy_up(struct aofd *a, int64_t off, size_t n)
{
	if (n == 0)
		return 0;
	int64_t B = a->blk, end = off + (int64_t)n;
	int64_t hb = off - off % B, tb = (end - 1) - (end - 1) % B;
	if (off == hb && end % B == 0)
		return 0;   /* whole blocks: nothing to complete */
	int64_t floor = get_floor(a);
	if (floor < 0)
		return -1;
	if (off >= floor)
		return 0;
	if (off != hb || end < hb + B)
		if (fill_holes(a, hb, hb + 1, floor) < 0)
			return -1;
	if (tb != hb && end % B)
		if (fill_holes(a, tb, tb + 1, floor) < 0)
			return -1;
	return 0;
}

/* The pending image [off, off + n) into BUF (P1).  Returns bytes read. */
static ssize_t image_read(struct aofd *a, char *buf, size_t n, int64_t off)
{
	int64_t size = s_size(a), floor = get_floor(a);
	if (size < 0 || floor < 0)
		return -1;
	if (off >= size || n == 0)
		return 0;
	if ((int64_t)n > size - off)
		n = (size_t)(size - off);
	size_t done = 0;
	while (done < n) {
		ssize_t r = REAL(pread)(a->tok, buf + done, n - done, off + (off_t)done);
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		done += (size_t)r;
	}
	memset(buf + done, 0, n - done);
	int64_t hi = off + (int64_t)n < floor ? off + (int64_t)n : floor;
	for (int64_t pos = off; pos < hi;) {
		off_t d = REAL(lseek)(a->tok, pos, SEEK_DATA);
		if (d < 0 && errno != ENXIO)
			return -1;
		int64_t hend = d < 0 || d > hi ? hi : d;
		if (hend > pos &&
		    read_f(a, buf + (pos - off), (size_t)(hend - pos), pos) < 0)
			return -1;
		if (d < 0 || d >= hi)
			break;
		off_t h = REAL(lseek)(a->tok, d, SEEK_HOLE);
		if (h < 0)
			return -1;
		pos = h;
	}
	return (ssize_t)n;
}

/* The description's lock: its threads here, and (once S may be shared)
 * its other processes.  A fork takes every A->mu first (fork_prepare), so
 * SOLO cannot change inside a locked section. */
static void lock_a(struct aofd *a)
{
	pthread_mutex_lock(&a->mu);
	if (!a->solo)
		ofd_lock(a->tok, F_WRLCK, L_MUTEX, true);
}

static void unlock_a(struct aofd *a)
{
	if (!a->solo)
		ofd_lock(a->tok, F_UNLCK, L_MUTEX, false);
	pthread_mutex_unlock(&a->mu);
}

/* [LO, HI) was written in direct mode.  Kept sorted and merged; past 1024
 * ranges, one envelope (spill copies more of the image: harmless, P1). */
static void dirty_add(struct aofd *a, int64_t lo, int64_t hi)
{
	if (lo >= hi)
		return;
	int i = 0;
	while (i < a->ndirty && a->dirty[i].hi < lo)
		i++;
	int j = i;
	while (j < a->ndirty && a->dirty[j].lo <= hi) {
		if (a->dirty[j].lo < lo)
			lo = a->dirty[j].lo;
		if (a->dirty[j].hi > hi)
			hi = a->dirty[j].hi;
		j++;
	}
	if (j == i) {   /* a new range at I */
		if (a->ndirty == a->cdirty) {
			int nc = a->cdirty ? a->cdirty * 2 : 16;
			struct rng *d = nc <= 1024 ?
				realloc(a->dirty, sizeof(*d) * (size_t)nc) : NULL;
			if (!d) {   /* the envelope */
				int64_t l = a->dirty[0].lo < lo ? a->dirty[0].lo : lo;
				int64_t h = a->dirty[a->ndirty - 1].hi > hi ?
					    a->dirty[a->ndirty - 1].hi : hi;
				a->dirty[0] = (struct rng){ l, h };
				a->ndirty = 1;
				return;
			}
			a->dirty = d;
			a->cdirty = nc;
		}
		memmove(a->dirty + i + 1, a->dirty + i,
			sizeof(struct rng) * (size_t)(a->ndirty - i));
		a->ndirty++;
	} else if (j > i + 1) {
		memmove(a->dirty + i + 1, a->dirty + j,
			sizeof(struct rng) * (size_t)(a->ndirty - j));
		a->ndirty -= j - i - 1;
	}
	a->dirty[i] = (struct rng){ lo, hi };
}

/* P6: direct mode to S mode.  Locked. */
static int spill_locked(struct aofd *a)
{
	if (!a->direct)
		return 0;
	int64_t B = a->blk, size = a->psize;
	if (REAL(ftruncate)(a->tok, size) < 0)
		return -1;
	char *buf = NULL;
	for (int i = 0; i < a->ndirty; i++) {
#if OA_MUTANT == 42   /* planted: only the bytes written, not whole blocks (P2) */
		int64_t lo = a->dirty[i].lo, hi = a->dirty[i].hi;
		(void)B;
#else
		int64_t lo = a->dirty[i].lo - a->dirty[i].lo % B;
		int64_t hi = a->dirty[i].hi + (B - a->dirty[i].hi % B) % B;
#endif
		if (hi > size)
			hi = size;
		for (int64_t p = lo; p < hi;) {
			size_t len = hi - p > (1 << 20) ? (1 << 20) : (size_t)(hi - p);
			if (!buf && !(buf = malloc(1 << 20))) {
				errno = ENOMEM;
				return -1;
			}
			ssize_t r = oa_pread(a->h, buf, len, p);
			if (r < 0) {
				free(buf);
				return -1;
			}
			memset(buf + r, 0, len - (size_t)r);
			if (REAL(pwrite)(a->tok, buf, len, p) != (ssize_t)len) {
				free(buf);
				if (errno == 0)
					errno = EIO;
				return -1;
			}
			p += (int64_t)len;
		}
	}
	free(buf);
	if (set_fb(a, a->dfloor, a->base) < 0)
		return -1;
	for (int fd = 0; fd < g_hi; fd++)
		if (g_tab[fd] == a) {   /* the offset, into the kernel's */
			REAL(lseek)(fd, a->pos, SEEK_SET);
			break;
		}
	if (oa_abort(a->h) < 0)
		return -1;
	a->ndirty = 0;
	a->direct = false;
	return 0;
}

/* S may reach another process from now on: every description in S mode,
 * locking across processes. */
static void share_all(void)
{
	pthread_mutex_lock(&g_mu);
	for (struct aofd *a = g_list; a; a = a->next)
		if (a->solo || a->direct) {
			pthread_mutex_lock(&a->mu);
			IN();
			if (spill_locked(a) < 0)
				say(a->path, "cannot hand the pending changes over", errno);
			OUT();
			a->solo = false;
			pthread_mutex_unlock(&a->mu);
		}
	pthread_mutex_unlock(&g_mu);
}

/* The pending size, for stat. */
static int64_t pend_size(struct aofd *a)
{
	return a->direct ? a->psize : s_size(a);
}

static bool mapped_range(struct aofd *a, int64_t *lo, int64_t *hi)
{
	bool any = false;
	for (struct amap *m = g_maps; m; m = m->next)
		if (m->a == a) {
			int64_t l = m->off, h = m->off + (int64_t)m->len;
			if (!any || l < *lo)
				*lo = l;
			if (!any || h > *hi)
				*hi = h;
			any = true;
		}
	return any;
}

static int commit_locked2(struct aofd *a, bool discard);

/* P4: commit (or, DISCARD, drop) the pending image.  Locked. */
static int commit_locked(struct aofd *a, bool discard)
{
	int r = commit_locked2(a, discard);
	if (r == 0 && a->times_set && a->anchor >= 0) {
		REAL(futimens)(a->anchor, a->times);
		a->times_set = false;
	}
	return r;
}

static int commit_locked2(struct aofd *a, bool discard)
{
	if (a->direct) {
		if (discard ? oa_abort(a->h) < 0 : oa_commit(a->h) < 0)
			return -1;
		a->ndirty = 0;
		a->dfloor = a->base = a->psize;
		return 0;
	}
	int64_t size = s_size(a), floor, base;
	if (size < 0 || get_fb(a, &floor, &base) < 0)
		return -1;
	int64_t mlo = 0, mhi = 0;
	bool mapped = mapped_range(a, &mlo, &mhi);
	if (discard)   /* only at the last close: S goes with it */
		return 0;
	{
		if (need_handle(a) < 0)
			return -1;
		/* the file's size as of the last reset: another handle's
		 * commit since then is its own business */
		int64_t csize = base;
		bool change = false;
		if (floor < csize) {
			if (oa_ftruncate(a->h, floor) < 0)
				goto fail;
			change = true;
		}
		char *buf = NULL;
		for (int64_t pos = 0; pos < size;) {
			off_t d = REAL(lseek)(a->tok, pos, SEEK_DATA);
			if (d < 0) {
				if (errno == ENXIO)
					break;
				free(buf);
				goto fail;
			}
			off_t h = REAL(lseek)(a->tok, d, SEEK_HOLE);
			if (h < 0) {
				free(buf);
				goto fail;
			}
			if (!buf && !(buf = malloc(1 << 20))) {
				errno = ENOMEM;
				goto fail;
			}
			for (int64_t p = d; p < h;) {
				size_t len = h - p > (1 << 20) ? (1 << 20) : (size_t)(h - p);
#if OA_MUTANT == 40   /* planted: each extent's first half commits alone */
				if (p == d && h - d >= 2)
					len = (size_t)(h - d) / 2;
				if (p != d && p == d + (h - d) / 2 && oa_commit(a->h) < 0) {
					free(buf);
					goto fail;
				}
#endif
				ssize_t r = REAL(pread)(a->tok, buf, len, p);
				if (r <= 0 || oa_pwrite(a->h, buf, (size_t)r, p) != r) {
					if (r == 0)
						errno = EIO;
					free(buf);
					goto fail;
				}
				p += r;
			}
			change = true;
			pos = h;
		}
		free(buf);
		if (size != (floor < csize ? floor : csize)) {
			if (oa_ftruncate(a->h, size) < 0)
				goto fail;
			change = true;
		}
		/* nothing changed: every earlier commit is durable already */
		if (change && oa_commit(a->h) < 0)
			goto fail;
	}
	/* P4: empty S only now (keep what a mapping or stdio shows, P3).
	 * Without a mapping, by truncating it to 0 and back: ext4 and XFS
	 * write dirty pages back before they punch a hole (an extra device
	 * write and wait per commit), never before a truncation drops them. */
	if (!a->raw && !mapped) {
		if (REAL(ftruncate)(a->tok, 0) < 0 || REAL(ftruncate)(a->tok, size) < 0)
			return -1;   /* committed, but S is not reset: the
				      * call reports it (not seen: S grew to
				      * SIZE before, without a limit) */
	} else if (!a->raw) {
		/* whole blocks: a partial punch leaves the block data */
		int64_t B = a->blk, end = size + (B - size % B) % B;
		int64_t lo = mapped ? mlo - mlo % B : end, hi = mapped ? mhi + (B - mhi % B) % B : end;
		if (lo > 0)
			REAL(fallocate)(a->tok, FALLOC_FL_PUNCH_HOLE |
					FALLOC_FL_KEEP_SIZE, 0, lo);
		if (hi < end)
			REAL(fallocate)(a->tok, FALLOC_FL_PUNCH_HOLE |
					FALLOC_FL_KEEP_SIZE, hi, end - hi);
	}
	if ((size != floor || size != base) && set_fb(a, size, size) < 0)
		return -1;
	return 0;
fail:;
	int e = errno;
	if (a->h)
		oa_abort(a->h);
	errno = e;
	return -1;
}

static int commit(struct aofd *a)
{
	IN();
	lock_a(a);
	int r = commit_locked(a, false);
	int e = errno;
	unlock_a(a);
	OUT();
	errno = e;
	return r;
}

static void free_aofd(struct aofd *a)
{
	for (struct aofd **p = &g_list; *p; p = &(*p)->next)
		if (*p == a) {
			*p = a->next;
			break;
		}
	if (a->h)
		oa_close(a->h);
	unhide_close(a->tok);
	unhide_close(a->anchor);
	free(a->path);
	free(a->dirty);
	pthread_mutex_destroy(&a->mu);
	free(a);
}

/* This process lets go of A (its last descriptor and mapping are gone):
 * P5, then the commit or the discard if it was the last holder anywhere.
 * Called with g_mu held.  Returns 0 or -1 with errno (the commit's). */
static int let_go(struct aofd *a)
{
	int rc = 0, e = 0;
	IN();
	if (a->tok_pid == getpid()) {
		lock_a(a);
		ofd_lock(a->tok, F_UNLCK, L_HOLD, false);
		int others = ofd_others(a->tok, L_HOLD);
#if OA_MUTANT == 41   /* planted: every process's last close commits (P5) */
		others = 0;
#endif
		if (others == 0) {
			rc = commit_locked(a, g_discard);
			e = errno;
		}
		unlock_a(a);
	}
	free_aofd(a);
	OUT();
	errno = e;
	return rc;
}

static int materialize(struct aofd *a);

/* ---- the policy ---------------------------------------------------------- */

static bool ends_with(const char *s, const char *t)
{
	size_t a = strlen(s), b = strlen(t);
	return a >= b && strcmp(s + a - b, t) == 0;
}

/* Absolute form of PATH relative to DIRFD (no symlink resolution). */
static int abs_path(int dirfd, const char *path, char *out, size_t n)
{
	if (path[0] == '/') {
		if (strlen(path) >= n)
			return -1;
		strcpy(out, path);
		return 0;
	}
	char base[PATH_MAX];
	if (dirfd == AT_FDCWD) {
		if (!getcwd(base, sizeof(base)))
			return -1;
	} else {
		char l[64];
		snprintf(l, sizeof(l), "/proc/self/fd/%d", dirfd);
		ssize_t r = readlink(l, base, sizeof(base) - 1);
		if (r <= 0)
			return -1;
		base[r] = 0;
	}
	const char *p = path;
	while (p[0] == '.' && p[1] == '/')
		p += 2;
	if ((size_t)snprintf(out, n, "%s/%s", strcmp(base, "/") ? base : "", p) >= n)
		return -1;
	return 0;
}

/* Whether an open of ABS with FLAGS is to be atomic. */
static bool policy_wants(const char *abs, int flags)
{
	if ((flags & O_ACCMODE) == O_RDONLY)
		return false;
	if (flags & (O_PATH | O_DIRECTORY | __O_TMPFILE))
		return false;
	const char *base = strrchr(abs, '/');
	base = base ? base + 1 : abs;
	/* oatomic's own files (.NAME.oa, .NAME.oaj-K, homes) */
	if (base[0] == '.' && (ends_with(base, ".oa") || strstr(base, ".oaj-")))
		return false;
	if (g_match && *g_match) {
		char pats[4096];
		snprintf(pats, sizeof(pats), "%s", g_match);
		char *save = NULL;
		for (char *p = strtok_r(pats, ":", &save); p;
		     p = strtok_r(NULL, ":", &save))
			if (fnmatch(p, strchr(p, '/') ? abs : base, 0) == 0)
				return true;
		return false;
	}
	if (flags & O_APPEND)
		return false;
	static const char *const sys[] = { "/dev/", "/proc/", "/sys/", "/run/" };
	for (size_t i = 0; i < sizeof(sys) / sizeof(sys[0]); i++)
		if (strncmp(abs, sys[i], strlen(sys[i])) == 0)
			return false;
	if (ends_with(base, ".lock") || ends_with(base, ".lck") ||
	    ends_with(base, ".pid") || strcmp(base, "LOCK") == 0)
		return false;
	return true;
}

/* ---- opening ------------------------------------------------------------- */

static int make_s(const char *abs)
{
	char dir[PATH_MAX];
	const char *pd = getenv("OATOMIC_PENDING_DIR");
	snprintf(dir, sizeof(dir), "%s", pd && *pd ? pd : abs);
	char *sl = strrchr(dir, '/');
	if (pd && *pd)
		;
	else if (sl == dir)
		dir[1] = 0;
	else if (sl)
		*sl = 0;
	int s = REAL(openat)(AT_FDCWD, dir, __O_TMPFILE | O_DIRECTORY | O_RDWR, 0600);
	if (s >= 0 && REAL(fsetxattr)(s, X_FLOOR, "0 0", 3, 0) < 0) {
		REAL(close)(s);
		s = -1;
	}
	if (s < 0)   /* no O_TMPFILE or no xattrs there, or no write access */
		s = (int)syscall(SYS_memfd_create, "oatomic-pending", 0);
	return s;
}

static struct aofd *aofd_new(void)
{
	struct aofd *a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	pthread_mutex_init(&a->mu, NULL);
	a->tok = a->anchor = a->fork_tok = -1;
	a->blk = 4096;
	return a;
}

/* A token: a description of S of its own, at a high number, holding
 * HOLD.  CLOEXEC: this process's (also closed by an exec); else one for the
 * program about to be exec'd.  Writes no memory: in a vfork child that is
 * the parent's. */
static int token_fd(int sfd, bool cloexec)
{
	char l[64];
	snprintf(l, sizeof(l), "/proc/self/fd/%d", sfd);
	int t = REAL(openat)(AT_FDCWD, l, O_RDWR | O_CLOEXEC, 0);
	if (t < 0)
		return -1;
	int cmd = cloexec ? F_DUPFD_CLOEXEC : F_DUPFD;
	int h = REAL(fcntl)(t, cmd, g_base);
	if (h < 0)
		h = REAL(fcntl)(t, cmd, 3);
	REAL(close)(t);
	if (h >= 0 && ofd_lock(h, F_RDLCK, L_HOLD, true) < 0) {
		REAL(close)(h);
		h = -1;
	}
	return h;
}

/* A token for this process (close-on-exec, one of our own descriptors). */
static int new_token(int sfd)
{
	int t = token_fd(sfd, true);
	if (t >= 0 && t < g_cap)
		g_hid[t] = 1;
	return t;
}

/* open(2) of a file the policy wants atomic.  Returns the descriptor. */
static int atomic_open(int dirfd, const char *path, const char *abs, int flags,
		       mode_t mode)
{
	int ff = (flags & (O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY)) |
		 O_RDWR | O_CLOEXEC;
	int f = REAL(openat)(dirfd, path, ff, mode);
	if (f < 0 && errno == EACCES && (flags & O_ACCMODE) == O_WRONLY) {
		say(abs, "atomic mode needs read access to the file", EACCES);
		errno = EACCES;
	}
	if (f < 0)
		return -1;
	struct stat st;
	if (REAL(fstat)(f, &st) < 0 || !S_ISREG(st.st_mode)) {
		/* not a regular file: the plain open, as asked */
		REAL(close)(f);
		return REAL(openat)(dirfd, path, flags & ~O_CREAT, mode);
	}
	struct aofd *a = aofd_new();
	int s = -1, e;
	if (!a)
		goto fail_errno;
	a->dev = st.st_dev;
	a->ino = st.st_ino;
	a->acc = flags & O_ACCMODE;
	a->path = strdup(abs);
	a->anchor = hide(f);
	f = -1;
	if (!a->path || a->anchor < 0)
		goto fail_errno;
	/* the program's descriptor: S, at the number open(2) would give */
	s = make_s(abs);
	if (s < 0)
		goto fail_errno;
	if (need_handle(a) < 0) {
		e = errno;
		say(abs, "cannot open it in atomic mode", e);
		errno = e;
		goto fail_errno;
	}
	int64_t csize = fd_size(a->anchor);   /* recovered by oa_open */
	if (csize < 0)
		goto fail_errno;
	a->tok = new_token(s);
	a->tok_pid = getpid();
	if (a->tok < 0)
		goto fail_errno;
	struct stat sst;
	if (REAL(fstat)(s, &sst) < 0)
		goto fail_errno;
	a->sdev = sst.st_dev;
	a->sino = sst.st_ino;
	if (sst.st_blksize >= 512 && sst.st_blksize <= (1 << 20))
		a->blk = (unsigned)sst.st_blksize;
	int64_t size = (flags & O_TRUNC) ? 0 : csize;
	char tg[PATH_MAX + 64];
	int tn = snprintf(tg, sizeof(tg), "%llu %llu %s",
			  (unsigned long long)a->dev, (unsigned long long)a->ino,
			  abs);
	if (REAL(ftruncate)(s, size) < 0 ||
	    REAL(fsetxattr)(s, X_TARGET, tg, (size_t)tn, 0) < 0 ||
	    set_fb(a, size, csize) < 0)
		goto fail_errno;
	int fl = (flags & (O_APPEND | O_NONBLOCK));
	if (fl && REAL(fcntl)(s, F_SETFL, fl) < 0)
		goto fail_errno;
	if (!(flags & O_CLOEXEC) && REAL(fcntl)(s, F_SETFD, 0) < 0)
		goto fail_errno;
	else if (flags & O_CLOEXEC)
		REAL(fcntl)(s, F_SETFD, FD_CLOEXEC);
	/* P6: direct mode from the start */
	if ((flags & O_TRUNC) && csize > 0 && oa_ftruncate(a->h, 0) < 0)
		goto fail_errno;
	a->direct = true;
	a->append = flags & O_APPEND;
	a->dsync = (flags & (O_SYNC | O_DSYNC)) != 0;
	a->pos = 0;
	a->psize = a->dfloor = size;
	a->base = csize;
	a->refs = 1;
	a->solo = true;
	pthread_mutex_lock(&g_mu);
	a->next = g_list;
	g_list = a;
	tab_set(s, a);
	pthread_mutex_unlock(&g_mu);
	if (s <= 2)
		materialize(a);   /* P3: a standard stream writes it raw */
	return s;
fail_errno:
	e = errno ? errno : EIO;
	if (s >= 0)
		REAL(close)(s);
	if (f >= 0)
		REAL(close)(f);
	if (a) {
		if (a->h)
			oa_close(a->h);
		unhide_close(a->tok);
		unhide_close(a->anchor);
		free(a->path);
		free(a);
	}
	errno = e;
	return -1;
}

static int do_open(int dirfd, const char *path, int flags, mode_t mode)
{
	if (t_in) {
		/* the library's own descriptor: out of the program's way, or
		 * it could close or dup2 over it (a shell's `exec 3>FILE`) */
		int r = REAL(openat)(dirfd, path, flags, mode);
		return r >= 0 && g_hid ? hide(r) : r;
	}
	if (!g_ready || !path || vforked())
		return REAL(openat)(dirfd, path, flags, mode);
	if ((flags & O_ACCMODE) == O_RDONLY || (flags & (O_PATH | __O_TMPFILE)))
		return REAL(openat)(dirfd, path, flags, mode);
	char abs[PATH_MAX];
	IN();
	int r;
	if (abs_path(dirfd, path, abs, sizeof(abs)) < 0 ||
	    !policy_wants(abs, flags))
		r = REAL(openat)(dirfd, path, flags, mode);
	else {
		tab_init();
		r = atomic_open(dirfd, path, abs, flags, mode);
	}
	int e = errno;
	OUT();
	errno = e;
	return r;
}

#define MODE_ARG(flags, mode) \
	mode_t mode = 0; \
	if ((flags) & (O_CREAT | __O_TMPFILE)) { \
		va_list ap; \
		va_start(ap, flags); \
		mode = (mode_t)va_arg(ap, int); \
		va_end(ap); \
	}

EXPORT int open(const char *path, int flags, ...)
{
	MODE_ARG(flags, mode);
	return do_open(AT_FDCWD, path, flags, mode);
}
EXPORT int open64(const char *path, int flags, ...)
{
	MODE_ARG(flags, mode);
	return do_open(AT_FDCWD, path, flags, mode);
}
EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	MODE_ARG(flags, mode);
	return do_open(dirfd, path, flags, mode);
}
EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
	MODE_ARG(flags, mode);
	return do_open(dirfd, path, flags, mode);
}
EXPORT int __open_2(const char *path, int flags)
{
	return do_open(AT_FDCWD, path, flags, 0);
}
EXPORT int __open64_2(const char *path, int flags)
{
	return do_open(AT_FDCWD, path, flags, 0);
}
EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
	return do_open(dirfd, path, flags, 0);
}
EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
	return do_open(dirfd, path, flags, 0);
}
EXPORT int creat(const char *path, mode_t mode)
{
	return do_open(AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC, mode);
}
EXPORT int creat64(const char *path, mode_t mode)
{
	return do_open(AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC, mode);
}

/* ---- reading and writing ---------------------------------------------- */

static ssize_t a_pread(struct aofd *a, void *buf, size_t n, int64_t off)
{
	if (a->acc == O_WRONLY) {
		errno = EBADF;
		return -1;
	}
	IN();
	lock_a(a);
	ssize_t r = a->direct ? oa_pread(a->h, buf, n, off)
			      : image_read(a, buf, n, off);
	int e = errno;
	unlock_a(a);
	OUT();
	errno = e;
	return r;
}

/* The offset of FD's description (direct mode: ours), and setting it. */
static int64_t cur_off(int fd, struct aofd *a)
{
	return a->direct ? a->pos : REAL(lseek)(fd, 0, SEEK_CUR);
}

static void set_off(int fd, struct aofd *a, int64_t off)
{
	if (a->direct)
		a->pos = off;
	else
		REAL(lseek)(fd, off, SEEK_SET);
}

/* read(2) at the shared offset of FD */
static ssize_t a_read(int fd, struct aofd *a, void *buf, size_t n)
{
	if (a->acc == O_WRONLY) {
		errno = EBADF;
		return -1;
	}
	IN();
	lock_a(a);
	ssize_t r = -1;
	int64_t off = cur_off(fd, a);
	if (off >= 0) {
		r = a->direct ? oa_pread(a->h, buf, n, off)
			      : image_read(a, buf, n, off);
		if (r > 0)
			set_off(fd, a, off + r);
	}
	int e = errno;
	unlock_a(a);
	OUT();
	errno = e;
	return r;
}

static size_t iov_total(const struct iovec *iov, int cnt)
{
	size_t t = 0;
	for (int i = 0; i < cnt; i++)
		t += iov[i].iov_len;
	return t;
}

/* Write IOV at OFF (POS true) or at FD's offset / end (O_APPEND). */
static ssize_t a_writev(int fd, struct aofd *a, const struct iovec *iov,
			int cnt, int64_t off, bool pos, int rwf)
{
	if (a->acc == O_RDONLY) {
		errno = EBADF;
		return -1;
	}
	if (cnt < 0 || cnt > IOV_MAX) {
		errno = EINVAL;
		return -1;
	}
	size_t n = iov_total(iov, cnt);
	IN();
	lock_a(a);
	ssize_t r = -1;
	if (a->direct) {
		/* P6: into the handle's transaction */
		if (!pos)
			off = a->append ? a->psize : a->pos;
		r = oa_pwritev(a->h, iov, cnt, off);
		if (r > 0) {
			dirty_add(a, off, off + r);
			if (off + r > a->psize)
				a->psize = off + r;
			if (!pos)
				a->pos = off + r;
		}
	} else {
		/* at FD's offset (or its end, O_APPEND: then the copy-up
		 * at the offset is needless and harmless, P1) through FD
		 * itself, so that the kernel moves the offset; at OFF
		 * through our description */
		if (!pos)
			off = REAL(lseek)(fd, 0, SEEK_CUR);
		if (off >= 0 && copy_up(a, off, n) == 0)
			r = pos ? REAL(pwritev)(a->tok, iov, cnt, off)
				: REAL(writev)(fd, iov, cnt);
	}
	int e = errno;
	unlock_a(a);
	OUT();
	if (r >= 0 && ((rwf & (RWF_DSYNC | RWF_SYNC)) || a->dsync) && commit(a) < 0)
		return -1;
	errno = e;
	return r;
}

EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	struct aofd *a = lookup(fd);
	return a ? a_read(fd, a, buf, n) : REAL(read)(fd, buf, n);
}
EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	if (n > buflen)
		abort();
	return read(fd, buf, n);
}
EXPORT ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
	struct aofd *a = lookup(fd);
	if (!a)
		return REAL(pread)(fd, buf, n, off);
	if (off < 0) {
		errno = EINVAL;
		return -1;
	}
	return a_pread(a, buf, n, off);
}
EXPORT ssize_t pread64(int fd, void *buf, size_t n, off_t off)
	__attribute__((alias("pread")));
EXPORT ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t bl)
{
	if (n > bl)
		abort();
	return pread(fd, buf, n, off);
}
EXPORT ssize_t __pread64_chk(int fd, void *buf, size_t n, off_t off, size_t bl)
	__attribute__((alias("__pread_chk")));

static ssize_t a_readv(int fd, struct aofd *a, const struct iovec *iov, int cnt,
		       int64_t off, bool pos)
{
	ssize_t tot = 0;
	if (!pos) {
		IN();
		off = cur_off(fd, a);
		OUT();
		if (off < 0)
			return -1;
	}
	for (int i = 0; i < cnt; i++) {
		ssize_t r = a_pread(a, iov[i].iov_base, iov[i].iov_len, off + tot);
		if (r < 0)
			return tot ? tot : -1;
		tot += r;
		if ((size_t)r < iov[i].iov_len)
			break;
	}
	if (!pos && tot > 0)
		set_off(fd, a, off + tot);
	return tot;
}

EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
	struct aofd *a = lookup(fd);
	return a ? a_readv(fd, a, iov, cnt, 0, false) : REAL(readv)(fd, iov, cnt);
}
EXPORT ssize_t preadv(int fd, const struct iovec *iov, int cnt, off_t off)
{
	struct aofd *a = lookup(fd);
	return a ? a_readv(fd, a, iov, cnt, off, true) : REAL(preadv)(fd, iov, cnt, off);
}
EXPORT ssize_t preadv64(int fd, const struct iovec *iov, int cnt, off_t off)
	__attribute__((alias("preadv")));
EXPORT ssize_t preadv2(int fd, const struct iovec *iov, int cnt, off_t off,
		       int flags)
{
	struct aofd *a = lookup(fd);
	if (!a)
		return REAL(preadv2)(fd, iov, cnt, off, flags);
	return a_readv(fd, a, iov, cnt, off, off != -1);
}
EXPORT ssize_t preadv64v2(int fd, const struct iovec *iov, int cnt, off_t off,
			  int flags) __attribute__((alias("preadv2")));

EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	struct aofd *a = lookup(fd);
	if (!a)
		return REAL(write)(fd, buf, n);
	struct iovec v = { (void *)buf, n };
	return a_writev(fd, a, &v, 1, 0, false, 0);
}
EXPORT ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	struct aofd *a = lookup(fd);
	if (!a)
		return REAL(pwrite)(fd, buf, n, off);
	if (off < 0) {
		errno = EINVAL;
		return -1;
	}
	struct iovec v = { (void *)buf, n };
	return a_writev(fd, a, &v, 1, off, true, 0);
}
EXPORT ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
	__attribute__((alias("pwrite")));
EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	struct aofd *a = lookup(fd);
	return a ? a_writev(fd, a, iov, cnt, 0, false, 0) : REAL(writev)(fd, iov, cnt);
}
EXPORT ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
	struct aofd *a = lookup(fd);
	if (!a)
		return REAL(pwritev)(fd, iov, cnt, off);
	if (off < 0) {
		errno = EINVAL;
		return -1;
	}
	return a_writev(fd, a, iov, cnt, off, true, 0);
}
EXPORT ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off_t off)
	__attribute__((alias("pwritev")));
EXPORT ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off,
			int flags)
{
	struct aofd *a = lookup(fd);
	if (!a)
		return REAL(pwritev2)(fd, iov, cnt, off, flags);
	return a_writev(fd, a, iov, cnt, off, off != -1, flags);
}
EXPORT ssize_t pwritev64v2(int fd, const struct iovec *iov, int cnt, off_t off,
			   int flags) __attribute__((alias("pwritev2")));

EXPORT off_t lseek(int fd, off_t off, int whence)
{
	struct aofd *a = lookup(fd);
	if (!a)
		return REAL(lseek)(fd, off, whence);
	if (a->direct) {
		pthread_mutex_lock(&a->mu);
		if (a->direct) {
			int64_t n = -1;
			int e = 0;
			switch (whence) {
			case SEEK_SET: n = off; break;
			case SEEK_CUR: n = a->pos + off; break;
			case SEEK_END: n = a->psize + off; break;
			case SEEK_DATA:
			case SEEK_HOLE:
				if (off < 0)
					e = EINVAL;
				else if (off >= a->psize)
					e = ENXIO;
				else
					n = whence == SEEK_DATA ? off : a->psize;
				break;
			default: e = EINVAL;
			}
			if (!e && n < 0)
				e = EINVAL;
			if (!e)
				a->pos = n;
			pthread_mutex_unlock(&a->mu);
			if (e) {
				errno = e;
				return -1;
			}
			return n;
		}
		pthread_mutex_unlock(&a->mu);
	}
	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return REAL(lseek)(fd, off, whence);
	/* the pending image has no holes the program could see */
	IN();
	int64_t size = s_size(a);
	OUT();
	if (size < 0)
		return -1;
	if (off < 0 || off >= size) {
		errno = off < 0 ? EINVAL : ENXIO;
		return -1;
	}
	return REAL(lseek)(fd, whence == SEEK_DATA ? off : size, SEEK_SET);
}
EXPORT off_t lseek64(int fd, off_t off, int whence) __attribute__((alias("lseek")));

static int a_truncate(struct aofd *a, int64_t len)
{
	if (len < 0) {
		errno = EINVAL;
		return -1;
	}
	IN();
	lock_a(a);
	int r = -1;
	if (a->direct) {
		r = oa_ftruncate(a->h, len);
		if (r == 0) {
			a->psize = len;
			if (len < a->dfloor)
				a->dfloor = len;
		}
		goto out;
	}
	int64_t floor = get_floor(a);
	if (floor >= 0) {
		/* the block that straddles LEN keeps its bytes below it (P2) */
		if (len < floor && len % a->blk &&
		    fill_holes(a, len, len + 1, floor) < 0)
			goto out;
		r = REAL(ftruncate)(a->tok, len);
		if (r == 0 && len < floor)
			r = set_floor(a, len);
	}
out:;
	int e = errno;
	unlock_a(a);
	OUT();
	errno = e;
	return r;
}

EXPORT int ftruncate(int fd, off_t len)
{
	struct aofd *a = lookup(fd);
	if (!a)
		return REAL(ftruncate)(fd, len);
	if (a->acc == O_RDONLY) {
		errno = EBADF;   /* EINVAL in ftruncate(2)'s words */
		return -1;
	}
	return a_truncate(a, len);
}
EXPORT int ftruncate64(int fd, off_t len) __attribute__((alias("ftruncate")));

/* The description of this process open on (DEV, INO), if any. */
static struct aofd *by_inode(dev_t dev, ino_t ino)
{
	for (struct aofd *a = g_list; a; a = a->next)
		if (a->dev == dev && a->ino == ino)
			return a;
	return NULL;
}

EXPORT int truncate(const char *path, off_t len)
{
	if (t_in || !g_ready)
		return REAL(truncate)(path, len);
	struct stat st;
	if (REAL(fstatat)(AT_FDCWD, path, &st, 0) == 0 && S_ISREG(st.st_mode)) {
		pthread_mutex_lock(&g_mu);
		struct aofd *a = by_inode(st.st_dev, st.st_ino);
		pthread_mutex_unlock(&g_mu);
		if (a)
			return a_truncate(a, len);
	}
	/* a file not open here: one atomic truncation, when it matches */
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		return -1;
	int r = ftruncate(fd, len);
	int e = errno;
	if (r == 0 && fsync(fd) < 0) {
		r = -1;
		e = errno;
	}
	if (close(fd) < 0 && r == 0) {
		r = -1;
		e = errno;
	}
	errno = e;
	return r;
}
EXPORT int truncate64(const char *path, off_t len) __attribute__((alias("truncate")));

EXPORT int fsync(int fd)
{
	struct aofd *a = lookup(fd);
	return a ? commit(a) : REAL(fsync)(fd);
}
EXPORT int fdatasync(int fd)
{
	struct aofd *a = lookup(fd);
	return a ? commit(a) : REAL(fdatasync)(fd);
}

/* ---- stat: the pending size ---------------------------------------------- */

static void fix_stat(struct stat *st)
{
	/* (no atomic file open here: the common case, without the lock) */
	if (!g_tab || !S_ISREG(st->st_mode) ||
	    !__atomic_load_n(&g_list, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&g_mu);
	struct aofd *a = by_inode(st->st_dev, st->st_ino);
	int64_t sz = a ? pend_size(a) : -1;
	pthread_mutex_unlock(&g_mu);
	if (sz >= 0)
		st->st_size = sz;
}

EXPORT int fstat(int fd, struct stat *st)
{
	struct aofd *a = lookup(fd);
	if (!a)
		return REAL(fstat)(fd, st);
	IN();
	int r = a->anchor >= 0 ? REAL(fstat)(a->anchor, st) :
		REAL(fstatat)(AT_FDCWD, a->path, st, 0);
	int64_t sz = r == 0 ? pend_size(a) : -1;
	OUT();
	if (r == 0 && sz >= 0)
		st->st_size = sz;
	return r;
}
EXPORT int fstat64(int fd, struct stat64 *st)
{
	return fstat(fd, (struct stat *)st);
}

EXPORT int fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	if ((flags & AT_EMPTY_PATH) && !*path && lookup(dirfd))
		return fstat(dirfd, st);
	int r = REAL(fstatat)(dirfd, path, st, flags);
	if (r == 0 && !t_in)
		fix_stat(st);
	return r;
}
EXPORT int fstatat64(int dirfd, const char *path, struct stat64 *st, int flags)
{
	return fstatat(dirfd, path, (struct stat *)st, flags);
}
EXPORT int stat(const char *path, struct stat *st)
{
	return fstatat(AT_FDCWD, path, st, 0);
}
EXPORT int stat64(const char *path, struct stat64 *st)
{
	return stat(path, (struct stat *)st);
}
EXPORT int lstat(const char *path, struct stat *st)
{
	return fstatat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW);
}
EXPORT int lstat64(const char *path, struct stat64 *st)
{
	return lstat(path, (struct stat *)st);
}
/* the pre-2.33 entry points of old binaries */
EXPORT int __fxstat(int ver, int fd, struct stat *st)
{
	return fstat(fd, st);
}
EXPORT int __fxstat64(int ver, int fd, struct stat64 *st)
{
	return fstat(fd, (struct stat *)st);
}
EXPORT int __xstat(int ver, const char *path, struct stat *st)
{
	return stat(path, st);
}
EXPORT int __xstat64(int ver, const char *path, struct stat64 *st)
{
	return stat(path, (struct stat *)st);
}
EXPORT int __lxstat(int ver, const char *path, struct stat *st)
{
	return lstat(path, st);
}
EXPORT int __lxstat64(int ver, const char *path, struct stat64 *st)
{
	return lstat(path, (struct stat *)st);
}
EXPORT int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int fl)
{
	return fstatat(dirfd, path, st, fl);
}
EXPORT int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st,
			int fl)
{
	return fstatat(dirfd, path, (struct stat *)st, fl);
}

EXPORT int statx(int dirfd, const char *path, int flags, unsigned mask,
		 struct statx *sx)
{
	struct aofd *a = (flags & AT_EMPTY_PATH) && !*path ?
		lookup(dirfd) : NULL;
	int r;
	if (a) {
		IN();
		r = a->anchor >= 0 ? REAL(statx)(a->anchor, "", flags, mask, sx) :
			REAL(statx)(AT_FDCWD, a->path, flags & ~AT_EMPTY_PATH, mask, sx);
		OUT();
	} else {
		r = REAL(statx)(dirfd, path, flags, mask, sx);
	}
	if (r != 0 || t_in || !g_tab || !S_ISREG(sx->stx_mode) ||
	    !__atomic_load_n(&g_list, __ATOMIC_ACQUIRE))
		return r;
	pthread_mutex_lock(&g_mu);
	struct aofd *b = by_inode(makedev(sx->stx_dev_major, sx->stx_dev_minor),
				  sx->stx_ino);
	int64_t sz = b ? pend_size(b) : -1;
	pthread_mutex_unlock(&g_mu);
	if (sz >= 0)
		sx->stx_size = (uint64_t)sz;
	return r;
}

/* ---- descriptors: dup, close, fcntl ------------------------------------- */

/* NEWFD now refers to A too.  RAW: a number the program chose (dup2,
 * dup3), where a stdio stream of its may already write raw. */
static int adopt(int newfd, struct aofd *a, bool raw)
{
	if (newfd < 0)
		return newfd;
	pthread_mutex_lock(&g_mu);
	a->refs++;
	tab_set(newfd, a);
	pthread_mutex_unlock(&g_mu);
	if (newfd <= 2 || raw) {
		int e = errno;
		materialize(a);   /* P3: a stream writes it raw */
		errno = e;
	}
	return newfd;
}

/* The program's descriptor FD is going away (closed by the caller). */
static int forget(int fd)
{
	int rc = 0;
	pthread_mutex_lock(&g_mu);
	struct aofd *a = lookup(fd);
	if (a) {
		tab_set(fd, NULL);
		if (--a->refs == 0 && a->maps == 0)
			rc = let_go(a);
	}
	pthread_mutex_unlock(&g_mu);
	return rc;
}

/* Our own descriptor at FD is in the way of the program's dup2/dup3:
 * move it. */
static void evict(int fd)
{
	pthread_mutex_lock(&g_mu);
	for (struct aofd *a = g_list; a; a = a->next) {
		int *slot = a->tok == fd ? &a->tok : a->anchor == fd ? &a->anchor : NULL;
		if (!slot)
			continue;
		int n = REAL(fcntl)(fd, F_DUPFD_CLOEXEC, g_base);
		if (n >= 0) {
			g_hid[n] = 1;
			*slot = n;
		}
	}
	g_hid[fd] = 0;
	pthread_mutex_unlock(&g_mu);
}

EXPORT int close(int fd)
{
	if (vforked())
		return REAL(close)(fd);
	if (hidden(fd)) {
		if (!t_in)
			return 0;   /* ours, not the program's: keep it */
		g_hid[fd] = 0;
		return REAL(close)(fd);
	}
	struct aofd *a = lookup(fd);
	if (!a)
		return REAL(close)(fd);
	int rc = forget(fd);
	int e = errno;
	int r = REAL(close)(fd);
	if (rc < 0) {
		errno = e;
		return -1;
	}
	return r;
}

EXPORT int close_range(unsigned lo, unsigned hi, int flags)
{
	if (!g_tab || lo > hi || vforked())
		return REAL(close_range)(lo, hi, flags);
	/* the program's descriptors, in runs between ours (kept) */
	unsigned top = (unsigned)g_cap - 1 < hi ? (unsigned)g_cap - 1 : hi;
	unsigned start = lo;
	int r = 0;
	for (unsigned fd = lo; fd <= top; fd++) {
		if (hidden((int)fd)) {
			if (fd > start && REAL(close_range)(start, fd - 1, flags) < 0)
				r = -1;
			start = fd + 1;
		} else if (!(flags & CLOSE_RANGE_CLOEXEC) && lookup((int)fd)) {
			forget((int)fd);
		}
		if (fd == UINT_MAX)
			break;
	}
	if (start <= hi && REAL(close_range)(start, hi, flags) < 0)
		r = -1;
	return r;
}

EXPORT int dup(int fd)
{
	struct aofd *a = vforked() ? NULL : lookup(fd);
	int r = REAL(dup)(fd);
	return a ? adopt(r, a, false) : r;
}

static int do_dup3(int fd, int nfd, int flags, bool two)
{
	if (fd == nfd || vforked())
		return two ? REAL(dup2)(fd, nfd) : REAL(dup3)(fd, nfd, flags);
	if (hidden(nfd))
		evict(nfd);
	int rc = 0, e = 0;
	struct aofd *old = lookup(nfd);
	if (old) {   /* dup2 closes NFD: a last close, maybe */
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s", old->path ? old->path : "?");
		rc = forget(nfd);
		e = errno;
		/* The program cannot learn it from dup2 (a shell restoring
		 * its standard output after `cmd > file` makes this the last
		 * close): said, as at exit. */
		if (rc < 0)
			say(path, "the commit at the close dup2 made failed", e);
	}
	struct aofd *a = lookup(fd);
	int r = two ? REAL(dup2)(fd, nfd) : REAL(dup3)(fd, nfd, flags);
	if (r >= 0 && a)
		adopt(r, a, true);
	if (rc < 0 && r >= 0)
		errno = e;   /* the old file's commit failed; NFD is the new one */
	return r;
}
EXPORT int dup2(int fd, int nfd)
{
	return do_dup3(fd, nfd, 0, true);
}
EXPORT int dup3(int fd, int nfd, int flags)
{
	return do_dup3(fd, nfd, flags, false);
}

static int redirect_fd(struct aofd *a)
{
	return a->anchor;
}

static int do_fcntl(int fd, int cmd, void *arg)
{
	struct aofd *a = lookup(fd);
	if (!a)
		return REAL(fcntl)(fd, cmd, arg);
	switch (cmd) {
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		if (vforked())
			return REAL(fcntl)(fd, cmd, arg);
		return adopt(REAL(fcntl)(fd, cmd, arg), a, false);
	case F_GETFL: {
		int r = REAL(fcntl)(fd, cmd);
		return r < 0 ? r : (r & ~O_ACCMODE) | a->acc;
	}
	case F_SETFL: {
		int r = REAL(fcntl)(fd, cmd, (int)(intptr_t)arg);
		if (r == 0)
			a->append = ((int)(intptr_t)arg & O_APPEND) != 0;
		return r;
	}
	case F_SETLK: case F_SETLKW: case F_GETLK:
	case F_OFD_SETLK: case F_OFD_SETLKW: case F_OFD_GETLK:
		/* locks are the real file's, as other processes see them */
		if (redirect_fd(a) < 0) {
			errno = EBADF;
			return -1;
		}
		return REAL(fcntl)(redirect_fd(a), cmd, arg);
	default:
		return REAL(fcntl)(fd, cmd, arg);
	}
}
EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return do_fcntl(fd, cmd, arg);
}
EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return do_fcntl(fd, cmd, arg);
}

/* Calls about the file rather than its contents go to the file itself. */
#define ON_FILE(ret, name, params, args) \
	EXPORT ret name params \
	{ \
		struct aofd *a = lookup(fd); \
		if (a && a->anchor >= 0) \
			fd = a->anchor; \
		return REAL(name) args; \
	}
ON_FILE(int, flock, (int fd, int op), (fd, op))
ON_FILE(int, fchmod, (int fd, mode_t m), (fd, m))
ON_FILE(int, fchown, (int fd, uid_t u, gid_t g), (fd, u, g))
ON_FILE(int, fsetxattr, (int fd, const char *n, const void *v, size_t s, int f),
	(fd, n, v, s, f))
ON_FILE(ssize_t, fgetxattr, (int fd, const char *n, void *v, size_t s),
	(fd, n, v, s))
ON_FILE(int, fremovexattr, (int fd, const char *n), (fd, n))
ON_FILE(ssize_t, flistxattr, (int fd, char *l, size_t s), (fd, l, s))
ON_FILE(int, fstatfs, (int fd, struct statfs *s), (fd, s))

EXPORT int futimens(int fd, const struct timespec t[2])
{
	struct aofd *a = lookup(fd);
	if (!a || a->anchor < 0)
		return REAL(futimens)(fd, t);
	int r = REAL(futimens)(a->anchor, t);
	if (r == 0) {
		/* kept for after the next commit, UTIME_NOW as of now */
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		pthread_mutex_lock(&a->mu);
		for (int i = 0; i < 2; i++) {
			a->times[i] = t ? t[i] : now;
			if (t && t[i].tv_nsec == UTIME_NOW)
				a->times[i] = now;
		}
		a->times_set = true;
		pthread_mutex_unlock(&a->mu);
	}
	return r;
}

EXPORT int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	struct aofd *a = lookup(fd);
	if (!a) {
		/* the source of a clone into an atomic file is fine; the
		 * destination is the file descriptor itself */
		return REAL(ioctl)(fd, req, arg);
	}
	if (req == FICLONE || req == FICLONERANGE || req == FIDEDUPERANGE) {
		errno = EOPNOTSUPP;   /* cp then copies through write(2) */
		return -1;
	}
	if (req == FIONREAD || req == FIOCLEX || req == FIONCLEX)
		return REAL(ioctl)(fd, req, arg);
	return REAL(ioctl)(a->anchor >= 0 ? a->anchor : fd, req, arg);
}

/* ---- copies the kernel would make behind our back ------------------------ */

static ssize_t copy_through(int in, off_t *inoff, int out, off_t *outoff,
			    size_t len)
{
	char buf[65536];
	ssize_t tot = 0;
	while ((size_t)tot < len) {
		size_t n = len - (size_t)tot < sizeof(buf) ? len - (size_t)tot : sizeof(buf);
		ssize_t r = inoff ? pread(in, buf, n, *inoff) : read(in, buf, n);
		if (r <= 0) {
			if (r < 0 && tot == 0)
				return -1;
			break;
		}
		ssize_t w = outoff ? pwrite(out, buf, (size_t)r, *outoff) :
			write(out, buf, (size_t)r);
		if (w < 0)
			return tot ? tot : -1;
		if (inoff)
			*inoff += w;
		else if (w < r)
			lseek(in, w - r, SEEK_CUR);
		if (outoff)
			*outoff += w;
		tot += w;
		if (w < r)
			break;
	}
	return tot;
}

EXPORT ssize_t copy_file_range(int in, off_t *inoff, int out, off_t *outoff,
			       size_t len, unsigned flags)
{
	if (!lookup(in) && !lookup(out))
		return REAL(copy_file_range)(in, inoff, out, outoff, len, flags);
	return copy_through(in, inoff, out, outoff, len);
}
EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t n)
{
	if (!lookup(in) && !lookup(out))
		return REAL(sendfile)(out, in, off, n);
	return copy_through(in, off, out, NULL, n);
}
EXPORT ssize_t sendfile64(int out, int in, off_t *off, size_t n)
	__attribute__((alias("sendfile")));
EXPORT ssize_t splice(int in, loff_t *inoff, int out, loff_t *outoff,
		      size_t len, unsigned flags)
{
	if (!lookup(in) && !lookup(out))
		return REAL(splice)(in, inoff, out, outoff, len, flags);
	return copy_through(in, (off_t *)inoff, out, (off_t *)outoff, len);
}

static int a_fallocate(struct aofd *a, int mode, int64_t off, int64_t len)
{
	if (off < 0 || len <= 0) {
		errno = EINVAL;
		return -1;
	}
	int64_t size;
	IN();
	size = pend_size(a);
	OUT();
	if (size < 0)
		return -1;
	if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) {
		/* zeros, written as the program's own bytes */
		int64_t end = off + len;
		if ((mode & FALLOC_FL_KEEP_SIZE) && end > size)
			end = size;
		static const char z[65536];
		for (int64_t p = off; p < end;) {
			size_t n = end - p > (int64_t)sizeof(z) ? sizeof(z) : (size_t)(end - p);
			struct iovec v = { (void *)z, n };
			ssize_t w = a_writev(-1, a, &v, 1, p, true, 0);
			if (w < 0)
				return -1;
			p += w;
		}
		return 0;
	}
	if (mode & ~FALLOC_FL_KEEP_SIZE) {
		errno = EOPNOTSUPP;
		return -1;
	}
	if (!(mode & FALLOC_FL_KEEP_SIZE) && off + len > size)
		return a_truncate(a, off + len);
	return 0;   /* space is the commit's to reserve */
}

EXPORT int fallocate(int fd, int mode, off_t off, off_t len)
{
	struct aofd *a = lookup(fd);
	return a ? a_fallocate(a, mode, off, len) : REAL(fallocate)(fd, mode, off, len);
}
EXPORT int fallocate64(int fd, int mode, off_t off, off_t len)
	__attribute__((alias("fallocate")));
EXPORT int posix_fallocate(int fd, off_t off, off_t len)
{
	struct aofd *a = lookup(fd);
	if (!a)
		return REAL(posix_fallocate)(fd, off, len);
	return a_fallocate(a, 0, off, len) < 0 ? errno : 0;
}
EXPORT int posix_fallocate64(int fd, off_t off, off_t len)
	__attribute__((alias("posix_fallocate")));

/* ---- mappings ------------------------------------------------------------- */

/* P3 for the whole file: a raw path (stdio, the standard descriptors a
 * program starts with) may write any block. */
static int materialize(struct aofd *a)
{
	IN();
	lock_a(a);
	int r = spill_locked(a);
	if (r == 0 && !a->raw) {
		int64_t floor = get_floor(a);
		r = floor < 0 ? -1 : fill_holes(a, 0, floor, floor);
		if (r == 0)
			a->raw = true;
	}
	int e = errno;
	unlock_a(a);
	OUT();
	errno = e;
	return r;
}

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	struct aofd *a = lookup(fd);
	if (!a)
		return REAL(mmap)(addr, len, prot, flags, fd, off);
	IN();
	lock_a(a);
	int64_t floor = spill_locked(a) < 0 ? -1 : get_floor(a);
	int r = floor < 0 ? -1 : fill_holes(a, off, off + (int64_t)len, floor);
	unlock_a(a);
	OUT();
	if (r < 0)
		return MAP_FAILED;
	void *p = REAL(mmap)(addr, len, prot, flags, fd, off);
	if (p == MAP_FAILED || !(flags & MAP_SHARED))
		return p;
	struct amap *m = malloc(sizeof(*m));
	if (!m) {
		REAL(munmap)(p, len);
		errno = ENOMEM;
		return MAP_FAILED;
	}
	pthread_mutex_lock(&g_mu);
	*m = (struct amap){ g_maps, p, len, off, a };
	g_maps = m;
	a->maps++;
	pthread_mutex_unlock(&g_mu);
	return p;
}
EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
	__attribute__((alias("mmap")));

EXPORT int munmap(void *addr, size_t len)
{
	int r = REAL(munmap)(addr, len);
	if (r < 0 || !g_maps)
		return r;
	int rc = 0, e = 0;
	pthread_mutex_lock(&g_mu);
	for (struct amap **pm = &g_maps; *pm;) {
		struct amap *m = *pm;
		if ((char *)addr <= m->addr &&
		    m->addr + m->len <= (char *)addr + len) {
			*pm = m->next;
			struct aofd *a = m->a;
			free(m);
			if (--a->maps == 0 && a->refs == 0) {
				rc = let_go(a);
				e = errno;
			}
			continue;
		}
		pm = &m->next;
	}
	pthread_mutex_unlock(&g_mu);
	if (rc < 0) {
		errno = e;
		return -1;
	}
	return r;
}

EXPORT int msync(void *addr, size_t len, int flags)
{
	int r = REAL(msync)(addr, len, flags);
	if (r < 0 || !(flags & MS_SYNC) || !g_maps)
		return r;
	struct aofd *hit[16];
	int n = 0;
	pthread_mutex_lock(&g_mu);
	for (struct amap *m = g_maps; m && n < 16; m = m->next)
		if (m->addr < (char *)addr + len && (char *)addr < m->addr + m->len) {
			bool dup = false;
			for (int i = 0; i < n; i++)
				dup |= hit[i] == m->a;
			if (!dup)
				hit[n++] = m->a;
		}
	pthread_mutex_unlock(&g_mu);
	for (int i = 0; i < n; i++)
		if (commit(hit[i]) < 0)
			return -1;
	return r;
}

/* ---- stdio ---------------------------------------------------------------- */

static int mode_flags(const char *m)
{
	int f;
	switch (m[0]) {
	case 'r': f = O_RDONLY; break;
	case 'w': f = O_WRONLY | O_CREAT | O_TRUNC; break;
	case 'a': f = O_WRONLY | O_CREAT | O_APPEND; break;
	default: return -1;
	}
	for (const char *p = m + 1; *p && *p != ','; p++)
		switch (*p) {
		case '+': f = (f & ~O_ACCMODE) | O_RDWR; break;
		case 'x': f |= O_EXCL; break;
		case 'e': f |= O_CLOEXEC; break;
		}
	return f;
}

static bool wants_path(const char *path, int flags)
{
	char abs[PATH_MAX];
	if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY)
		return false;
	IN();
	bool w = abs_path(AT_FDCWD, path, abs, sizeof(abs)) == 0 &&
		 policy_wants(abs, flags);
	OUT();
	return w;
}

EXPORT FILE *fopen(const char *path, const char *mode)
{
	int flags = mode ? mode_flags(mode) : -1;
	if (t_in || !g_ready || !path || !wants_path(path, flags))
		return REAL(fopen)(path, mode);
	int fd = open(path, flags, 0666);
	if (fd < 0)
		return NULL;
	return fdopen(fd, mode);
}
EXPORT FILE *fopen64(const char *path, const char *mode) __attribute__((alias("fopen")));

/* A stream on an atomic file is a stream of our own (fopencookie) whose
 * reads, writes, seeks and close are the wrappers above: the C library's
 * streams write with internal calls no wrapper sees, so that a stream of
 * its own would make every commit rewrite the whole file (P3).  fileno()
 * gives the descriptor (the stream's _fileno is set; the cookie functions
 * do not use it). */
static ssize_t ck_read(void *c, char *buf, size_t n)
{
	return read((int)(intptr_t)c, buf, n);
}

static ssize_t ck_write(void *c, const char *buf, size_t n)
{
	size_t done = 0;
	while (done < n) {   /* stdio wants all, or an error */
		ssize_t w = write((int)(intptr_t)c, buf + done, n - done);
		if (w <= 0)
			return done ? (ssize_t)done : -1;
		done += (size_t)w;
	}
	return (ssize_t)done;
}

static int ck_seek(void *c, off64_t *off, int whence)
{
	off_t r = lseek((int)(intptr_t)c, *off, whence);
	if (r < 0)
		return -1;
	*off = r;
	return 0;
}

static int ck_close(void *c)
{
	return close((int)(intptr_t)c);
}

#define NCOOKIE 64
static FILE *g_cookie[NCOOKIE];   /* our streams, for fclose */

static bool our_stream(FILE *fp)
{
	for (int i = 0; i < NCOOKIE; i++)
		if (__atomic_load_n(&g_cookie[i], __ATOMIC_ACQUIRE) == fp)
			return true;
	return false;
}

EXPORT FILE *fdopen(int fd, const char *mode)
{
	struct aofd *a = lookup(fd);
	if (!a)
		return REAL(fdopen)(fd, mode);
	/* a slot for it; without one, the C library's stream (P3) */
	int slot = -1;
	pthread_mutex_lock(&g_mu);
	for (int i = 0; i < NCOOKIE && slot < 0; i++)
		if (!g_cookie[i])
			slot = i;
	if (slot >= 0)
		g_cookie[slot] = (FILE *)1;   /* taken */
	pthread_mutex_unlock(&g_mu);
	if (slot < 0) {
		if (materialize(a) < 0)
			return NULL;
		return REAL(fdopen)(fd, mode);
	}
	cookie_io_functions_t io = { ck_read, ck_write, ck_seek, ck_close };
	char m[8];
	snprintf(m, sizeof(m), "%c%s", mode[0], strchr(mode, '+') ? "+" : "");
	FILE *fp = fopencookie((void *)(intptr_t)fd, m, io);
	if (!fp) {
		__atomic_store_n(&g_cookie[slot], NULL, __ATOMIC_RELEASE);
		return NULL;
	}
	fp->_fileno = fd;
	__atomic_store_n(&g_cookie[slot], fp, __ATOMIC_RELEASE);
	return fp;
}

EXPORT FILE *freopen(const char *path, const char *mode, FILE *fp)
{
	int flags = mode ? mode_flags(mode) : -1;
	if (t_in || !g_ready || !path || !fp || !wants_path(path, flags))
		return REAL(freopen)(path, mode, fp);
	/* the atomic open, then the stream's descriptor replaced by it */
	int fd = open(path, flags, 0666);
	if (fd < 0)
		return NULL;
	fflush(fp);
	int sfd = fileno(fp);
	if (sfd < 0 || dup2(fd, sfd) < 0) {
		close(fd);
		return NULL;
	}
	close(fd);
	struct aofd *a = lookup(sfd);
	if (a && materialize(a) < 0)
		return NULL;
	clearerr(fp);
	fseeko(fp, 0, (flags & O_APPEND) ? SEEK_END : SEEK_SET);
	return fp;
}
EXPORT FILE *freopen64(const char *path, const char *mode, FILE *fp)
	__attribute__((alias("freopen")));

EXPORT int fclose(FILE *fp)
{
	if (fp && our_stream(fp)) {
		/* its close is ck_close: our close, the last close's commit */
		for (int i = 0; i < NCOOKIE; i++)
			if (g_cookie[i] == fp)
				__atomic_store_n(&g_cookie[i], NULL, __ATOMIC_RELEASE);
		return REAL(fclose)(fp);
	}
	int fd = fp ? fileno(fp) : -1;
	if (!lookup(fd) || vforked())
		return REAL(fclose)(fp);
	/* glibc closes the descriptor inside; the last close is ours after */
	pthread_mutex_lock(&g_mu);
	int r = REAL(fclose)(fp);
	int e = errno;
	struct aofd *a = lookup(fd);
	int rc = 0;
	if (a) {
		tab_set(fd, NULL);
		if (--a->refs == 0 && a->maps == 0) {
			rc = let_go(a);
			if (rc < 0)
				e = errno;
		}
	}
	pthread_mutex_unlock(&g_mu);
	errno = e;
	return rc < 0 ? EOF : r;
}

/* ---- fork and exec ------------------------------------------------------- */

static void fork_prepare(void)
{
	pthread_mutex_lock(&g_mu);
	int e = errno;
	t_in++;
	for (struct aofd *a = g_list; a; a = a->next) {
		pthread_mutex_lock(&a->mu);
		if (spill_locked(a) < 0)
			say(a->path, "cannot hand the pending changes over", errno);
		a->solo = false;
		if (a->tok_pid == getpid())
			a->fork_tok = new_token(a->tok);
	}
	t_in--;
	errno = e;
}

static void fork_parent(void)
{
	for (struct aofd *a = g_list; a; a = a->next) {
		unhide_close(a->fork_tok);
		a->fork_tok = -1;
		pthread_mutex_unlock(&a->mu);
	}
	pthread_mutex_unlock(&g_mu);
}

static void fork_child(void)
{
	pid_t me = getpid();
	g_pid = me;
	for (struct aofd *a = g_list; a; a = a->next) {
		pthread_mutex_init(&a->mu, NULL);
		if (a->fork_tok >= 0) {
			unhide_close(a->tok);   /* the parent's */
			a->tok = a->fork_tok;
			a->tok_pid = me;
		}
		a->fork_tok = -1;
	}
	pthread_mutex_init(&g_mu, NULL);
}

static bool has_env(char *const *envp, const char *name, size_t n)
{
	for (; envp && *envp; envp++)
		if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
			return true;
	return false;
}

static size_t env_count(char *const *envp)
{
	size_t n = 0;
	while (envp && envp[n])
		n++;
	return n;
}

/* The strings build_env may add. */
struct env_bufs {
	char preload[PATH_MAX + 32], self[PATH_MAX + 32];
	char match[4200], close[40];
};

/* The environment of a program we start: ENVP without ENV_FDS, with what
 * the preload needs put back where ENVP lost it (LD_PRELOAD, our path, the
 * settings), and FDSV (an ENV_FDS string) unless NULL.  ENV has room for
 * env_count(ENVP) + 6 entries; the strings go to B.  No heap: a vfork
 * child calls it. */
static void build_env(char *const envp[], char **env, struct env_bufs *b,
		      char *fdsv)
{
	size_t ne = env_count(envp), k = 0;
	for (size_t i = 0; i < ne; i++)
		if (strncmp(envp[i], ENV_FDS "=", sizeof(ENV_FDS)) != 0)
			env[k++] = envp[i];
	if (g_self[0] && !has_env(envp, "LD_PRELOAD", 10)) {
		snprintf(b->preload, sizeof(b->preload), "LD_PRELOAD=%s", g_self);
		env[k++] = b->preload;
	}
	if (g_self[0] && !has_env(envp, "OATOMIC_PRELOAD", 15)) {
		snprintf(b->self, sizeof(b->self), "OATOMIC_PRELOAD=%s", g_self);
		env[k++] = b->self;
	}
	if (g_match && !has_env(envp, "OATOMIC_MATCH", 13)) {
		snprintf(b->match, sizeof(b->match), "OATOMIC_MATCH=%s", g_match);
		env[k++] = b->match;
	}
	if (g_discard && !has_env(envp, "OATOMIC_ON_CLOSE", 16)) {
		snprintf(b->close, sizeof(b->close), "OATOMIC_ON_CLOSE=discard");
		env[k++] = b->close;
	}
	if (fdsv)
		env[k++] = fdsv;
	env[k] = NULL;
}

/* execve(2) with the preload kept in the environment and every atomic
 * description the new program keeps handed over (tokens and anchors made
 * inheritable, named in ENV_FDS).  Runs in vfork children too: no heap, no
 * change to memory shared with the parent. */
static int do_execve(int dirfd, const char *path, char *const argv[],
		     char *const envp[], int atflags, bool byfd)
{
	if (!g_ready)
		return byfd ? (int)syscall(SYS_execveat, dirfd, path, argv, envp, atflags)
			    : REAL(execve)(path, argv, envp);
	char why[512];
	int err = 0;
	if (!byfd) {
		enum oa_reach rr = oa_reach_check(path, getenv("PATH"), why,
						  sizeof(why), &err);
		if (rr == OA_REACH_STATIC || rr == OA_REACH_SETID ||
		    rr == OA_REACH_CAPS || rr == OA_REACH_CLASS) {
			char m[PATH_MAX + 700];
			int n = snprintf(m, sizeof(m), "oatomic: %s: %s: preloading "
					 "cannot reach it; refusing to run it without "
					 "atomicity\n", path, why);
			(void)!syscall(SYS_write, 2, m, (size_t)n < sizeof(m) ? (size_t)n : sizeof(m));
			errno = EACCES;
			return -1;
		}
	}
	/* which descriptions survive the exec: one of their descriptors is
	 * not close-on-exec.  (In a vfork child the parent's memory: the
	 * parent must lock from now on, the one store made here.) */
	for (struct aofd *a = g_list; a; a = a->next)
		__atomic_store_n(&a->solo, false, __ATOMIC_SEQ_CST);
	bool vf = vforked();
	/* Every descriptor the new program will have that is S: also one a
	 * vfork child made by a dup2 our wrapper did not record (Python's
	 * subprocess).  Raw calls and stack buffers only. */
	unsigned long long open_ino[256], open_dev[256];
	int nopen = 0;
	if (g_list) {
		int dfd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/fd",
				       O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
		char db[4096];
		long n;
		while (dfd >= 0 && (n = syscall(SYS_getdents64, dfd, db, sizeof(db))) > 0) {
			for (long o = 0; o < n && nopen < 256;) {
				struct dirent64 *de = (struct dirent64 *)(db + o);
				o += de->d_reclen;
				if (de->d_name[0] < '0' || de->d_name[0] > '9')
					continue;
				int fd = atoi(de->d_name);
				struct stat st;
				int fl = fd == dfd ? -1 : (int)syscall(SYS_fcntl, fd, F_GETFD);
				if (fl < 0 || (fl & FD_CLOEXEC) ||
				    syscall(SYS_fstat, fd, &st) < 0 || !S_ISREG(st.st_mode))
					continue;
				open_ino[nopen] = (unsigned long long)st.st_ino;
				open_dev[nopen++] = (unsigned long long)st.st_dev;
			}
		}
		if (dfd >= 0)
			syscall(SYS_close, dfd);
	}
	unsigned long long sino[256];
	int fds[256][2], nf = 0;
	int made[512], nm = 0;
	if (g_tab) {
		for (struct aofd *a = g_list; a && nf < 256; a = a->next) {
			bool keeps = false;
			for (int i = 0; i < nopen && !keeps; i++)
				keeps = open_ino[i] == (unsigned long long)a->sino &&
					open_dev[i] == (unsigned long long)a->sdev;
			if (!keeps) {
				/* the exec closes it: a last close here, but
				 * never in a vfork child (the parent holds it) */
				if (!vf && !g_discard)
					commit(a);
				continue;
			}
			/* (after a vfork, done in the parent already) */
			if (a->direct && REAL(fcntl)(a->tok, F_GETFD) >= 0) {
				pthread_mutex_lock(&a->mu);
				t_in++;
				if (spill_locked(a) < 0)
					say(a->path, "cannot hand the pending "
					    "changes over", errno);
				t_in--;
				pthread_mutex_unlock(&a->mu);
			}
			/* a fresh token (never the parent's description, in a
			 * vfork child) and the anchor, inheritable */
			int t = token_fd(a->tok, false);
			int an = a->anchor >= 0 ? REAL(fcntl)(a->anchor, F_DUPFD, g_base) : -1;
			if (t < 0)
				continue;
			made[nm++] = t;
			if (an >= 0)
				made[nm++] = an;
			sino[nf] = (unsigned long long)a->sino;
			fds[nf][0] = t;
			fds[nf][1] = an;
			nf++;
		}
	}
	char fdsv[256 * 40 + 32];
	if (nf) {
		int n = snprintf(fdsv, sizeof(fdsv), "%s=", ENV_FDS);
		for (int i = 0; i < nf; i++)
			n += snprintf(fdsv + n, sizeof(fdsv) - (size_t)n, "%s%llu:%d:%d",
				      i ? "," : "", sino[i], fds[i][0], fds[i][1]);
	}
	char **env = alloca((env_count(envp) + 6) * sizeof(char *));
	struct env_bufs eb;
	build_env(envp, env, &eb, nf ? fdsv : NULL);
	int r = byfd ? (int)syscall(SYS_execveat, dirfd, path, argv, env, atflags)
		     : REAL(execve)(path, argv, env);
	int e = errno;
	for (int i = 0; i < nm; i++)
		REAL(close)(made[i]);
	errno = e;
	return r;
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	return do_execve(AT_FDCWD, path, argv, envp, 0, false);
}
EXPORT int execv(const char *path, char *const argv[])
{
	return do_execve(AT_FDCWD, path, argv, environ, 0, false);
}
EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	return do_execve(fd, "", argv, envp, AT_EMPTY_PATH, true);
}
EXPORT int execveat(int dirfd, const char *path, char *const argv[],
		    char *const envp[], int flags)
{
	return do_execve(dirfd, path, argv, envp, flags, true);
}

static int exec_search(const char *file, char *const argv[], char *const envp[])
{
	if (strchr(file, '/'))
		return do_execve(AT_FDCWD, file, argv, envp, 0, false);
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	char buf[PATH_MAX];
	int saw_eacces = 0;
	for (const char *p = path;; ) {
		const char *c = strchr(p, ':');
		size_t dl = c ? (size_t)(c - p) : strlen(p);
		if (dl + strlen(file) + 2 <= sizeof(buf)) {
			memcpy(buf, p, dl);
			size_t o = dl;
			if (o == 0)
				buf[o++] = '.';
			buf[o++] = '/';
			strcpy(buf + o, file);
			do_execve(AT_FDCWD, buf, argv, envp, 0, false);
			if (errno == EACCES)
				saw_eacces = 1;
			else if (errno != ENOENT && errno != ENOTDIR && errno != ESTALE)
				return -1;
		}
		if (!c)
			break;
		p = c + 1;
	}
	if (saw_eacces)
		errno = EACCES;
	return -1;
}

EXPORT int execvp(const char *file, char *const argv[])
{
	return exec_search(file, argv, environ);
}
EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	return exec_search(file, argv, envp);
}

static char **gather(const char *arg0, va_list ap, char ***envp)
{
	va_list c;
	va_copy(c, ap);
	size_t n = 1;
	while (va_arg(c, char *))
		n++;
	va_end(c);
	char **v = malloc((n + 1) * sizeof(char *));
	if (!v)
		return NULL;
	v[0] = (char *)arg0;
	for (size_t i = 1; i <= n; i++)
		v[i] = i < n ? va_arg(ap, char *) : NULL;
	(void)va_arg(ap, char *);   /* the NULL */
	if (envp)
		*envp = va_arg(ap, char **);
	return v;
}
EXPORT int execl(const char *path, const char *arg0, ...)
{
	va_list ap;
	va_start(ap, arg0);
	char **v = gather(arg0, ap, NULL);
	va_end(ap);
	if (!v)
		return -1;
	int r = do_execve(AT_FDCWD, path, v, environ, 0, false);
	free(v);
	return r;
}
EXPORT int execlp(const char *file, const char *arg0, ...)
{
	va_list ap;
	va_start(ap, arg0);
	char **v = gather(arg0, ap, NULL);
	va_end(ap);
	if (!v)
		return -1;
	int r = exec_search(file, v, environ);
	free(v);
	return r;
}
EXPORT int execle(const char *path, const char *arg0, ...)
{
	va_list ap;
	va_start(ap, arg0);
	char **env;
	char **v = gather(arg0, ap, &env);
	va_end(ap);
	if (!v)
		return -1;
	int r = do_execve(AT_FDCWD, path, v, env, 0, false);
	free(v);
	return r;
}

/* posix_spawn: the program is checked and the environment kept
 * (build_env); the child's descriptors are inherited as the kernel does
 * (its token is made when its own preload starts). */
struct posix_spawn_file_actions;
struct posix_spawnattr;
static int do_spawn(bool p, pid_t *pid, const char *file, const void *fa,
		    const void *at, char *const argv[], char *const envp[])
{
	char res[PATH_MAX];
	const char *path = file;
	if (p && !strchr(file, '/')) {
		const char *sp = getenv("PATH");
		if (!sp || !*sp)
			sp = "/usr/local/bin:/usr/bin:/bin";
		path = NULL;
		for (const char *q = sp; q;) {
			const char *c = strchr(q, ':');
			size_t dl = c ? (size_t)(c - q) : strlen(q);
			if (dl + strlen(file) + 2 <= sizeof(res)) {
				snprintf(res, sizeof(res), "%.*s/%s", (int)dl,
					 dl ? q : ".", file);
				if (access(res, X_OK) == 0) {
					path = res;
					break;
				}
			}
			q = c ? c + 1 : NULL;
		}
	}
	if (path && g_ready) {
		char why[512];
		int err = 0;
		enum oa_reach rr = oa_reach_check(path, getenv("PATH"), why,
						  sizeof(why), &err);
		if (rr == OA_REACH_STATIC || rr == OA_REACH_SETID ||
		    rr == OA_REACH_CAPS || rr == OA_REACH_CLASS) {
			say(path, why, 0);
			say(path, "preloading cannot reach it; refusing to run "
			    "it without atomicity", 0);
			return EACCES;
		}
	}
	char **env = malloc((env_count(envp) + 6) * sizeof(char *));
	struct env_bufs *eb = malloc(sizeof(*eb));
	if (!env || !eb) {
		free(env);
		free(eb);
		return ENOMEM;
	}
	build_env(envp, env, eb, NULL);
	share_all();
	int r = p ? REAL(posix_spawnp)(pid, file, fa, at, argv, env)
		  : REAL(posix_spawn)(pid, file, fa, at, argv, env);
	free(env);
	free(eb);
	return r;
}
EXPORT int posix_spawn(pid_t *pid, const char *path, const void *fa,
		       const void *at, char *const argv[], char *const envp[])
{
	return do_spawn(false, pid, path, fa, at, argv, envp);
}
EXPORT int posix_spawnp(pid_t *pid, const char *file, const void *fa,
			const void *at, char *const argv[], char *const envp[])
{
	return do_spawn(true, pid, file, fa, at, argv, envp);
}

/* vfork(2): the child runs in our memory until it execs, and may first
 * close every descriptor but the ones it passes on (Python's subprocess
 * does): hand every description over to its temporary file before, in the
 * parent, where the library's descriptors are all there.  vfork cannot be
 * wrapped in C (the child would return through the wrapper's frame, which
 * the parent then returns through again), so the wrapper is a few
 * instructions that call the hand-over and jump to the C library's vfork,
 * which returns straight to the caller.  x86-64 only; elsewhere a vfork
 * child's exec hands over as it can (do_execve). */
__attribute__((visibility("hidden"))) void *oa_pl_real_vfork;
__attribute__((visibility("hidden"))) void oa_pl_pre_vfork(void);
void oa_pl_pre_vfork(void)
{
	if (!oa_pl_real_vfork)
		oa_pl_real_vfork = dlsym(RTLD_NEXT, "vfork");
	if (g_ready && !vforked())
		share_all();
}
#if defined(__x86_64__)
__asm__(".text\n"
	".globl vfork\n"
	".type vfork, @function\n"
	"vfork:\n"
	"	sub $8, %rsp\n"
	"	call oa_pl_pre_vfork\n"
	"	add $8, %rsp\n"
	"	jmp *oa_pl_real_vfork(%rip)\n"
	".size vfork, .-vfork\n");
#endif

/* system(3) and popen(3) start their shell from inside the C library (no
 * wrapper of ours runs in the child): S may be shared from then on. */
DECL(system);
DECL(popen);
EXPORT int system(const char *cmd)
{
	if (g_ready && !vforked())
		share_all();
	return REAL(system)(cmd);
}
EXPORT FILE *popen(const char *cmd, const char *type)
{
	if (g_ready && !vforked())
		share_all();
	return REAL(popen)(cmd, type);
}

/* ---- start and exit ------------------------------------------------------- */

/* Descriptors inherited from the program that exec'd us: each one whose file
 * names a target (X_TARGET) is an atomic description's. */
static void adopt_inherited(void)
{
	char *fdsv = getenv(ENV_FDS);
	char list[256 * 40 + 32] = "";
	if (fdsv) {
		snprintf(list, sizeof(list), "%s", fdsv);
		unsetenv(ENV_FDS);
	}
	int dfd = REAL(openat)(AT_FDCWD, "/proc/self/fd", O_RDONLY | O_DIRECTORY |
			       O_CLOEXEC, 0);
	if (dfd < 0)
		return;
	DIR *d = fdopendir(dfd);
	if (!d) {
		REAL(close)(dfd);
		return;
	}
	int fds[1024], n = 0;
	struct dirent *de;
	while ((de = readdir(d)) && n < 1024) {
		if (de->d_name[0] == '.')
			continue;
		int fd = atoi(de->d_name);
		if (fd != dfd)
			fds[n++] = fd;
	}
	closedir(d);
	for (int i = 0; i < n; i++) {
		int fd = fds[i];
		struct stat st;
		char tg[PATH_MAX + 64];
		if (REAL(fstat)(fd, &st) < 0 || !S_ISREG(st.st_mode))
			continue;
		ssize_t tn = REAL(fgetxattr)(fd, X_TARGET, tg, sizeof(tg) - 1);
		if (tn <= 0)
			continue;
		tg[tn] = 0;
		/* one of our own inherited tokens or anchors is not the
		 * program's: those are named in the list */
		bool ours = false;
		for (char *p = list; *p;) {
			unsigned long long si;
			int t, an;
			if (sscanf(p, "%llu:%d:%d", &si, &t, &an) == 3 &&
			    (fd == t || fd == an))
				ours = true;
			char *c = strchr(p, ',');
			if (!c)
				break;
			p = c + 1;
		}
		if (ours)
			continue;
		tab_init();
		struct aofd *a = NULL;
		for (struct aofd *b = g_list; b; b = b->next)
			if (b->sino == st.st_ino && b->sdev == st.st_dev)
				a = b;
		if (a) {
			a->refs++;
			tab_set(fd, a);
			continue;
		}
		unsigned long long dv, in;
		int off = 0;
		if (sscanf(tg, "%llu %llu %n", &dv, &in, &off) != 2 || off <= 0 ||
		    !(a = aofd_new()))
			continue;
		a->dev = (dev_t)dv;
		a->ino = (ino_t)in;
		a->sdev = st.st_dev;
		a->sino = st.st_ino;
		a->path = strdup(tg + off);
		int fl = REAL(fcntl)(fd, F_GETFL);
		a->acc = fl >= 0 ? (fl & O_ACCMODE) : O_RDWR;
		if (st.st_blksize >= 512 && st.st_blksize <= (1 << 20))
			a->blk = (unsigned)st.st_blksize;
		/* the token and anchor handed over, else new ones */
		for (char *p = list; *p;) {
			unsigned long long si;
			int t, an;
			if (sscanf(p, "%llu:%d:%d", &si, &t, &an) == 3 &&
			    (ino_t)si == st.st_ino) {
				struct stat ts;
				if (t >= 0 && REAL(fstat)(t, &ts) == 0 &&
				    ts.st_ino == st.st_ino && ts.st_dev == st.st_dev) {
					a->tok = t;
					REAL(fcntl)(t, F_SETFD, FD_CLOEXEC);
					if (t < g_cap)
						g_hid[t] = 1;
				}
				if (an >= 0 && REAL(fstat)(an, &ts) == 0 &&
				    ts.st_ino == a->ino && ts.st_dev == a->dev) {
					a->anchor = an;
					REAL(fcntl)(an, F_SETFD, FD_CLOEXEC);
					if (an < g_cap)
						g_hid[an] = 1;
				}
			}
			char *c = strchr(p, ',');
			if (!c)
				break;
			p = c + 1;
		}
		if (a->tok < 0)
			a->tok = new_token(fd);
		a->tok_pid = getpid();
		if (a->tok < 0 || !a->path) {
			unhide_close(a->anchor);
			free(a->path);
			free(a);
			continue;
		}
		a->refs = 1;
		a->next = g_list;
		g_list = a;
		tab_set(fd, a);
	}
	/* P3: the standard streams write through stdio, raw */
	for (int fd = 0; fd < 3; fd++) {
		struct aofd *a = lookup(fd);
		if (a)
			materialize(a);
	}
}

__attribute__((constructor)) static void preload_init(void)
{
	t_in++;
	const char *m = getenv("OATOMIC_MATCH");
	if (m && *m)
		g_match = strdup(m);
	const char *c = getenv("OATOMIC_ON_CLOSE");
	g_discard = c && strcmp(c, "discard") == 0;
	Dl_info di;
	if (dladdr((void *)preload_init, &di) && di.dli_fname &&
	    di.dli_fname[0] == '/')
		snprintf(g_self, sizeof(g_self), "%s", di.dli_fname);
	g_pid = getpid();
	oa_pl_real_vfork = dlsym(RTLD_NEXT, "vfork");
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	tab_init();
	adopt_inherited();
	g_ready = true;
	t_in--;
}

/* The process ends: each description it holds has its last close here
 * (the kernel's close at exit).  FLUSH: exit(3), whose stdio flush comes
 * after us, so we flush first; _exit(2) flushes nothing. */
static void exit_commit(bool flush)
{
	if (!g_list || getpid() != g_pid)
		return;   /* nothing held, or a vfork child: the parent's memory */
	if (flush)
		fflush(NULL);
	pthread_mutex_lock(&g_mu);
	while (g_list) {
		struct aofd *a = g_list;
		for (int fd = 0; fd < g_hi; fd++)
			if (g_tab[fd] == a)
				tab_set(fd, NULL);
		a->refs = 0;
		a->maps = 0;
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s", a->path);
		if (let_go(a) < 0)
			say(path, "the commit at exit failed", errno);
	}
	pthread_mutex_unlock(&g_mu);
}

__attribute__((destructor)) static void preload_fini(void)
{
	exit_commit(true);
}

DECL(_exit);
EXPORT void _exit(int status)
{
	exit_commit(false);
	REAL(_exit)(status);
	__builtin_unreachable();
}
EXPORT void _Exit(int status)
{
	exit_commit(false);
	REAL(_exit)(status);
	__builtin_unreachable();
}
