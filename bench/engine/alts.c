/*
 * alts.c - the alternatives `oatomic bench` compares, each doing the same
 * logical update (a set of 4 KiB-aligned page writes made atomic and
 * durable as one unit):
 *
 *   oatomic-METHOD   oa_pwrite per update, oa_commit; one per method asked;
 *   inplace          pwrite per update, fdatasync: NOT atomic, the floor;
 *   copy-rename      copy the file with the updates into a temporary, fsync
 *                    it, rename it over, fsync the directory;
 *   sqlite-rollback  SQLite, journal_mode=DELETE, synchronous=FULL, one row
 *   sqlite-wal       (id, 4 KiB blob) per page, journal_mode=WAL, ditto;
 *   sqlite-oatomic   ditto through the "oatomic" VFS (liboatomic_sqlite.so,
 *                    loaded as SQLite loads extensions; found as `oatomic
 *                    run` finds its library, or $OATOMIC_SQLITE_EXT),
 *                    journal_mode=MEMORY: one oatomic commit per
 *                    transaction, no journal file;
 *   lmdb             LMDB, one record per page (integer key), default
 *                    durability (a flush at every commit);
 *   rwf-atomic       pwritev2(RWF_ATOMIC|RWF_DSYNC) on an O_DIRECT fd: only a
 *                    transaction of one write within the atomic write unit.
 *
 * SQLite and LMDB are loaded with dlopen() (libsqlite3.so.0, liblmdb.so.0),
 * not linked: the oatomic tool then depends on nothing but libc, builds
 * without their -dev packages, and the bench can say "not installed" for a
 * missing one instead of failing to start.  The few entry points used are
 * declared below with the types of their public headers (sqlite3.h 3.x,
 * lmdb.h 0.9; both APIs are stable).
 *
 * SPDX-License-Identifier: MIT
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include "oatomic.h"
#include "oatomic-private.h"
#include "bench.h"
#include "companion.h"

/* ---- counters of the baselines' own calls -------------------------------- */

static _Atomic uint64_t ctr_flushes, ctr_bytes;

void bench_appctr_of(int oatomic, struct bench_appctr *out)
{
	struct oa_stats st;

	if (oatomic) {
		oa__stats_get(&st);
		out->flushes = st.flushes;
		out->bytes = st.bytes_written;
	} else {
		out->flushes = ctr_flushes;
		out->bytes = ctr_bytes;
	}
}

void bench_appctr_get(const struct bench_alt *a, struct bench_appctr *out)
{
	bench_appctr_of(a->method >= 0, out);
}

int bench_pwrite(int fd, const void *buf, size_t n, off_t off)
{
	const char *p = buf;

	while (n) {
		ssize_t w = pwrite(fd, p, n, off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
		off += w;
		ctr_bytes += (uint64_t)w;
	}
	return 0;
}

int bench_pread(int fd, void *buf, size_t n, off_t off)
{
	char *p = buf;

	while (n) {
		ssize_t r = pread(fd, p, n, off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r == 0)
				errno = EIO;
			return -1;
		}
		p += r;
		n -= (size_t)r;
		off += r;
	}
	return 0;
}

void bench_flush_counted(void)
{
	ctr_flushes++;
}

int bench_fdatasync(int fd)
{
	ctr_flushes++;
	return fdatasync(fd);
}

int bench_fsync(int fd)
{
	ctr_flushes++;
	return fsync(fd);
}

int bench_fsync_dir_of(const char *path)
{
	char d[4096];
	char *slash;
	int fd, rc;

	snprintf(d, sizeof(d), "%s", path);
	slash = strrchr(d, '/');
	if (slash)
		*slash = '\0';
	else
		snprintf(d, sizeof(d), ".");
	fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	rc = bench_fsync(fd);
	close(fd);
	return rc;
}

/* The initial contents of page P of every data set (not timed). */
static void initial_page(unsigned char *buf, uint64_t p)
{
	for (unsigned i = 0; i < BENCH_PAGE; i += 8)
		memcpy(buf + i, &(uint64_t){ p * 0x9e3779b97f4a7c15ULL + i }, 8);
}

/* A plain file of SIZE bytes of initial pages, synced. */
int bench_make_plain(const char *path, uint64_t size)
{
	unsigned char *buf = malloc(BENCH_CHUNK);
	int fd, rc = -1;

	if (!buf)
		return -1;
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		goto out;
	for (uint64_t off = 0; off < size; off += BENCH_CHUNK) {
		uint64_t n = size - off < BENCH_CHUNK ? size - off : BENCH_CHUNK;
		for (uint64_t i = 0; i < n; i += BENCH_PAGE)
			initial_page(buf + i, (off + i) / BENCH_PAGE);
		if (bench_pwrite(fd, buf, n, (off_t)off) < 0)
			goto out_close;
	}
	if (fsync(fd) < 0 || bench_fsync_dir_of(path) < 0)
		goto out_close;
	rc = 0;
out_close:
	close(fd);
out:
	free(buf);
	return rc;
}

/* The library's files beside PATH: ".BASE.oa" and ".BASE.oaj-K". */
static void unlink_oa_files(const char *path)
{
	char p[4200];
	const char *slash = strrchr(path, '/');
	int dl = slash ? (int)(slash - path) + 1 : 0;

	snprintf(p, sizeof(p), "%.*s.%s.oa", dl, path, path + dl);
	unlink(p);
	for (int k = 0; k < 16; k++) {
		snprintf(p, sizeof(p), "%.*s.%s.oaj-%d", dl, path, path + dl, k);
		unlink(p);
	}
}

static void unlink_family(const char *path)
{
	/* the file and what each alternative keeps beside it */
	static const char *const suffix[] = { "", ".tmp", ".lock", "-journal",
		"-wal", "-shm", "-lock" };
	char p[4200];

	for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
		snprintf(p, sizeof(p), "%s%s", path, suffix[i]);
		unlink(p);
	}
	unlink_oa_files(path);   /* sqlite-oatomic's */
}

struct bench_handle {
	struct bench_alt *alt;
	const char *path;
	int fd, lockfd;
	uint64_t size;
	oa_file *oa;
	void *db;		/* sqlite3 * or MDB_env * */
	void *stmt;		/* sqlite3_stmt * */
	unsigned dbi;
	unsigned char *copybuf;
	int crash;
};

static struct bench_handle *handle_new(struct bench_alt *a, const char *path)
{
	struct bench_handle *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	h->alt = a;
	h->path = path;
	h->fd = h->lockfd = -1;
	return h;
}

static int plain_create(struct bench_alt *a, const char *path, uint64_t size)
{
	return bench_make_plain(path, size);
}

static void plain_destroy(struct bench_alt *a, const char *path)
{
	unlink_family(path);
}

/* bulk, inplace: the file written and fsync'd with its directory. */
static int plain_load(struct bench_alt *a, const char *path, uint64_t size,
		      double *us)
{
	double t = bench_now();
	if (bench_make_plain(path, size) < 0)
		return -1;
	*us = (bench_now() - t) * 1e6;
	return 0;
}

/* ---- oatomic -------------------------------------------------------------- */

static int oa_alt_probe(struct bench_alt *a, const char *dir)
{
	struct oa_options opts = { .size = sizeof(opts), .method = a->method };
	struct oa_ioinfo io = { .size = sizeof(io) };
	char p[4200];
	oa_file *f;

	snprintf(p, sizeof(p), "%s/probe-%s", dir, a->name);
	f = oa_open_opts(p, O_RDWR | O_CREAT, 0644, &opts);
	if (!f) {
		snprintf(a->why, sizeof(a->why), "not supported here: %s",
			 strerror(errno));
		unlink(p);
		return -1;
	}
	if (oa_ioinfo(f, &io) == 0)
		a->actual_method = io.method;
	oa_close(f);
	unlink_family(p);   /* the library's files too */
	return 0;
}

/* The data set as a user has it after the first use: the file, and its
 * control file and journal made by a first open (not timed). */
static int oa_alt_create(struct bench_alt *a, const char *path, uint64_t size)
{
	struct oa_options opts = { .size = sizeof(opts), .method = a->method };
	oa_file *f;

	if (bench_make_plain(path, size) < 0)
		return -1;
	f = oa_open_opts(path, O_RDWR, 0, &opts);
	if (!f)
		return -1;
	return oa_close(f);
}

/* bulk, oatomic: a new file made by oa_open (O_CREAT: durable, name
 * included), the pages in 1 MiB oa_pwrites, one oa_commit, oa_close. */
static int oa_alt_load(struct bench_alt *a, const char *path, uint64_t size,
		       double *us)
{
	struct oa_options opts = { .size = sizeof(opts), .method = a->method };
	unsigned char *buf = malloc(BENCH_CHUNK);
	oa_file *f = NULL;
	int rc = -1;
	double t = bench_now();

	if (!buf)
		return -1;
	f = oa_open_opts(path, O_RDWR | O_CREAT | O_TRUNC, 0644, &opts);
	if (!f)
		goto out;
	for (uint64_t off = 0; off < size; off += BENCH_CHUNK) {
		uint64_t n = size - off < BENCH_CHUNK ? size - off : BENCH_CHUNK;
		for (uint64_t i = 0; i < n; i += BENCH_PAGE)
			initial_page(buf + i, (off + i) / BENCH_PAGE);
		if (oa_pwrite(f, buf, n, (off_t)off) != (ssize_t)n)
			goto out;
	}
	if (oa_commit(f) < 0)
		goto out;
	rc = oa_close(f);
	f = NULL;
	*us = (bench_now() - t) * 1e6;
out:
	if (f)
		oa_close(f);
	free(buf);
	return rc;
}

static struct bench_handle *oa_alt_open(struct bench_alt *a, const char *path)
{
	struct oa_options opts = { .size = sizeof(opts), .method = a->method };
	struct bench_handle *h = handle_new(a, path);

	if (!h)
		return NULL;
	h->oa = oa_open_opts(path, O_RDWR, 0, &opts);
	if (!h->oa) {
		free(h);
		return NULL;
	}
	return h;
}

static int oa_alt_txn(struct bench_handle *h, const struct bench_upd *u, int n,
		      const unsigned char *payload)
{
	for (int i = 0; i < n; i++)
		if (oa_pwrite(h->oa, payload + u[i].data, u[i].len,
			      (off_t)u[i].off) != (ssize_t)u[i].len)
			return -1;
	if (h->crash)
		oa__set_killpoint(2);	/* OA_KP_FLUSHED, src/internal.h */
	return oa_commit(h->oa);
}

static int oa_alt_close(struct bench_handle *h)
{
	int rc = oa_close(h->oa);

	free(h);
	return rc;
}

static void oa_alt_destroy(struct bench_alt *a, const char *path)
{
	unlink(path);
	unlink_oa_files(path);
}

static int oa_alt_recover(struct bench_alt *a, const char *path)
{
	return oa_recover(path);
}

static void oa_alt_crash(struct bench_handle *h)
{
	h->crash = 1;
}

/* ---- pwrite + fdatasync in place ------------------------------------------ */

static struct bench_handle *inplace_open(struct bench_alt *a, const char *path)
{
	struct bench_handle *h = handle_new(a, path);

	if (!h)
		return NULL;
	h->fd = open(path, O_RDWR | O_CLOEXEC);
	if (h->fd < 0) {
		free(h);
		return NULL;
	}
	return h;
}

static int inplace_txn(struct bench_handle *h, const struct bench_upd *u,
		       int n, const unsigned char *payload)
{
	for (int i = 0; i < n; i++)
		if (bench_pwrite(h->fd, payload + u[i].data, u[i].len,
				(off_t)u[i].off) < 0)
			return -1;
	return bench_fdatasync(h->fd);
}

static int fd_close(struct bench_handle *h)
{
	int rc = h->fd >= 0 ? close(h->fd) : 0;

	if (h->lockfd >= 0)
		close(h->lockfd);
	free(h->copybuf);
	free(h);
	return rc;
}

/* ---- copy + fsync + rename + directory fsync ------------------------------ */

static struct bench_handle *copy_open(struct bench_alt *a, const char *path)
{
	struct bench_handle *h = handle_new(a, path);
	char lp[4200];

	if (!h)
		return NULL;
	snprintf(lp, sizeof(lp), "%s.lock", path);
	/* Writers of one file take turns: two copies renamed over each other
	 * would lose one's update. */
	h->lockfd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	h->copybuf = malloc(BENCH_CHUNK);
	if (h->lockfd < 0 || !h->copybuf) {
		if (h->lockfd >= 0)
			close(h->lockfd);
		free(h->copybuf);
		free(h);
		return NULL;
	}
	return h;
}

static int copy_txn(struct bench_handle *h, const struct bench_upd *u, int n,
		    const unsigned char *payload)
{
	char tmp[4200];
	struct stat st;
	int in = -1, out = -1, rc = -1;

	/* A temporary name per writer: several processes may copy at once
	 * (only the rename is serialised by the lock below). */
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld.%p", h->path, (long)getpid(),
		 (void *)h);
	if (flock(h->lockfd, LOCK_EX) < 0)
		return -1;
	in = open(h->path, O_RDONLY | O_CLOEXEC);
	if (in < 0 || fstat(in, &st) < 0)
		goto out;
	out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (out < 0)
		goto out;
	for (off_t off = 0; off < st.st_size; off += BENCH_CHUNK) {
		size_t len = (size_t)(st.st_size - off < BENCH_CHUNK ?
				      st.st_size - off : BENCH_CHUNK);
		if (bench_pread(in, h->copybuf, len, off) < 0)
			goto out;
		/* patch in the updates that fall into this chunk */
		for (int i = 0; i < n; i++) {
			uint64_t s = u[i].off, e = u[i].off + u[i].len;
			uint64_t cs = (uint64_t)off, ce = cs + len;
			if (e <= cs || s >= ce)
				continue;
			uint64_t from = s > cs ? s : cs, to = e < ce ? e : ce;
			memcpy(h->copybuf + (from - cs),
			       payload + u[i].data + (from - s), to - from);
		}
		if (bench_pwrite(out, h->copybuf, len, off) < 0)
			goto out;
	}
	if (bench_fsync(out) < 0 || rename(tmp, h->path) < 0 ||
	    bench_fsync_dir_of(h->path) < 0)
		goto out;
	rc = 0;
out:
	if (rc < 0)
		unlink(tmp);
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	flock(h->lockfd, LOCK_UN);
	return rc;
}

/* ---- RWF_ATOMIC ------------------------------------------------------------ */

/* Newer than this glibc's headers: the uapi values (linux/fs.h, stat.h). */
#ifndef RWF_ATOMIC
#define RWF_ATOMIC 0x00000040
#endif
#ifndef RWF_DSYNC
#define RWF_DSYNC 0x00000002
#endif
#define BENCH_STATX_WRITE_ATOMIC 0x00010000U

/* struct statx as of Linux 6.11, with the fields we read at their offsets. */
struct bench_statx {
	uint32_t mask, blksize;
	uint64_t attributes;
	uint32_t nlink, uid, gid;
	uint16_t mode, spare0;
	uint64_t ino, size, blocks, attributes_mask;
	unsigned char times[4][16];
	uint32_t rdev_major, rdev_minor, dev_major, dev_minor;
	uint64_t mnt_id;
	uint32_t dio_mem_align, dio_offset_align;
	uint64_t subvol;
	uint32_t atomic_write_unit_min, atomic_write_unit_max;
	uint32_t atomic_write_segments_max;
	uint32_t spare[19];
};
_Static_assert(__builtin_offsetof(struct bench_statx, atomic_write_unit_min)
	       == 168, "statx layout");
_Static_assert(sizeof(struct bench_statx) == 256, "statx size");

static int rwf_probe(struct bench_alt *a, const char *dir)
{
	struct bench_statx stx;
	char p[4200];
	void *buf = NULL;
	int fd;

	snprintf(p, sizeof(p), "%s/probe-rwf", dir);
	if (bench_make_plain(p, 1 << 20) < 0)
		goto err;
	memset(&stx, 0, sizeof(stx));
	if (syscall(SYS_statx, AT_FDCWD, p, 0, BENCH_STATX_WRITE_ATOMIC,
		    &stx) < 0)
		goto err;
	if (!(stx.mask & BENCH_STATX_WRITE_ATOMIC) ||
	    stx.atomic_write_unit_max == 0) {
		snprintf(a->why, sizeof(a->why), "not supported here: the file "
			 "system reports no atomic write unit (statx "
			 "STATX_WRITE_ATOMIC)");
		unlink(p);
		return -1;
	}
	a->unit_min = stx.atomic_write_unit_min;
	a->unit_max = stx.atomic_write_unit_max;
	if (a->unit_max > BENCH_CHUNK)
		a->unit_max = BENCH_CHUNK;
	fd = open(p, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (fd < 0)
		goto err;
	if (posix_memalign(&buf, 4096, a->unit_min) == 0) {
		struct iovec iov = { buf, a->unit_min };
		memset(buf, 0x5a, a->unit_min);
		if (pwritev2(fd, &iov, 1, 0, RWF_ATOMIC | RWF_DSYNC) !=
		    (ssize_t)a->unit_min) {
			snprintf(a->why, sizeof(a->why), "not supported here: "
				 "pwritev2(RWF_ATOMIC): %s", strerror(errno));
			free(buf);
			close(fd);
			unlink(p);
			return -1;
		}
	}
	free(buf);
	close(fd);
	unlink(p);
	return 0;
err:
	snprintf(a->why, sizeof(a->why), "probe failed: %s", strerror(errno));
	unlink(p);
	return -1;
}

static struct bench_handle *rwf_open(struct bench_alt *a, const char *path)
{
	struct bench_handle *h = handle_new(a, path);

	if (!h)
		return NULL;
	h->fd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (h->fd < 0 || posix_memalign((void **)&h->copybuf, 4096,
					BENCH_CHUNK) != 0) {
		if (h->fd >= 0)
			close(h->fd);
		free(h);
		return NULL;
	}
	return h;
}

static int rwf_txn(struct bench_handle *h, const struct bench_upd *u, int n,
		   const unsigned char *payload)
{
	struct iovec iov;

	if (n != 1 || u->len < h->alt->unit_min || u->len > h->alt->unit_max) {
		errno = EINVAL;
		return -1;
	}
	/* O_DIRECT wants an aligned buffer: the payload may not be at one. */
	memcpy(h->copybuf, payload + u->data, u->len);
	iov.iov_base = h->copybuf;
	iov.iov_len = u->len;
	bench_flush_counted();	/* the RWF_DSYNC write is the flush */
	if (pwritev2(h->fd, &iov, 1, (off_t)u->off, RWF_ATOMIC | RWF_DSYNC) !=
	    (ssize_t)u->len)
		return -1;
	ctr_bytes += u->len;
	return 0;
}

/* ---- SQLite (dlopen) ------------------------------------------------------ */

typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;
#define SQLITE_OK 0
#define SQLITE_ROW 100
#define SQLITE_DONE 101
#define SQLITE_OPEN_READWRITE 0x2
#define SQLITE_OPEN_CREATE 0x4
#define SQLITE_OPEN_NOMUTEX 0x8000

static struct {
	void *so;
	int (*open_v2)(const char *, sqlite3 **, int, const char *);
	int (*close)(sqlite3 *);
	int (*exec)(sqlite3 *, const char *, void *, void *, char **);
	int (*prepare_v2)(sqlite3 *, const char *, int, sqlite3_stmt **,
			  const char **);
	int (*bind_int64)(sqlite3_stmt *, int, long long);
	int (*bind_blob)(sqlite3_stmt *, int, const void *, int,
			 void (*)(void *));
	int (*step)(sqlite3_stmt *);
	int (*reset)(sqlite3_stmt *);
	int (*finalize)(sqlite3_stmt *);
	const char *(*errmsg)(sqlite3 *);
	int (*busy_timeout)(sqlite3 *, int);
	void (*free)(void *);
	const char *(*libversion)(void);
	int (*enable_load_extension)(sqlite3 *, int);
	int (*load_extension)(sqlite3 *, const char *, const char *, char **);
	int vfs_loaded;      /* the oatomic VFS is registered */
} sq;

static int sqlite_load(char *why, size_t len)
{
	if (sq.so)
		return 0;
	sq.so = dlopen("libsqlite3.so.0", RTLD_NOW | RTLD_LOCAL);
	if (!sq.so) {
		snprintf(why, len, "not installed (libsqlite3.so.0: %s; Debian "
			 "package libsqlite3-0)", dlerror());
		return -1;
	}
#define SQ(f, n) (*(void **)&sq.f = dlsym(sq.so, "sqlite3_" n))
	if (!SQ(open_v2, "open_v2") || !SQ(close, "close") ||
	    !SQ(exec, "exec") || !SQ(prepare_v2, "prepare_v2") ||
	    !SQ(bind_int64, "bind_int64") || !SQ(bind_blob, "bind_blob") ||
	    !SQ(step, "step") || !SQ(reset, "reset") ||
	    !SQ(finalize, "finalize") || !SQ(errmsg, "errmsg") ||
	    !SQ(busy_timeout, "busy_timeout") || !SQ(free, "free") ||
	    !SQ(libversion, "libversion") ||
	    !SQ(enable_load_extension, "enable_load_extension") ||
	    !SQ(load_extension, "load_extension")) {
		snprintf(why, len, "libsqlite3.so.0 lacks a function we use");
		dlclose(sq.so);
		sq.so = NULL;
		return -1;
	}
#undef SQ
	return 0;
}

static int is_wal(const struct bench_alt *a)
{
	return strcmp(a->name, "sqlite-wal") == 0;
}

static int is_oa_vfs(const struct bench_alt *a)
{
	return strcmp(a->name, "sqlite-oatomic") == 0;
}

/* Register the oatomic VFS in the loaded SQLite: the extension, loaded
 * through a scratch connection (it stays registered after it closes). */
static int sqlite_load_vfs(char *why, size_t len)
{
	char path[PATH_MAX], tried[3 * PATH_MAX + 64];
	sqlite3 *db = NULL;
	char *err = NULL;

	if (sq.vfs_loaded)
		return 0;
	if (oa_companion("liboatomic_sqlite.so", "OATOMIC_SQLITE_EXT", path,
			 tried, sizeof(tried)) < 0) {
		snprintf(why, len, "liboatomic_sqlite.so not found (tried %.120s)",
			 tried);
		return -1;
	}
	if (sq.open_v2(":memory:", &db, SQLITE_OPEN_READWRITE, NULL) !=
	    SQLITE_OK || sq.enable_load_extension(db, 1) != SQLITE_OK ||
	    sq.load_extension(db, path, NULL, &err) != SQLITE_OK) {
		snprintf(why, len, "cannot load %.80s: %.80s", path,
			 err ? err : db ? sq.errmsg(db) : "no memory");
		sq.free(err);
		if (db)
			sq.close(db);
		return -1;
	}
	sq.close(db);
	sq.vfs_loaded = 1;
	return 0;
}

static int sq_exec(sqlite3 *db, const char *sql)
{
	char *err = NULL;

	if (sq.exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
		sq.free(err);
		errno = EIO;
		return -1;
	}
	return 0;
}

static int sqlite_probe(struct bench_alt *a, const char *dir)
{
	if (sqlite_load(a->why, sizeof(a->why)) < 0)
		return -1;
	if (is_oa_vfs(a) && sqlite_load_vfs(a->why, sizeof(a->why)) < 0)
		return -1;
	return 0;
}

static sqlite3 *sq_connect(struct bench_alt *a, const char *path, int create)
{
	sqlite3 *db = NULL;

	if (sq.open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX |
		       (create ? SQLITE_OPEN_CREATE : 0),
		       is_oa_vfs(a) ? "oatomic" : NULL) != SQLITE_OK) {
		if (db)
			sq.close(db);
		errno = EIO;
		return NULL;
	}
	sq.busy_timeout(db, 120000);
	if (sq_exec(db, is_wal(a) ? "PRAGMA journal_mode=WAL" :
			is_oa_vfs(a) ? "PRAGMA journal_mode=MEMORY" :
				       "PRAGMA journal_mode=DELETE") < 0 ||
	    sq_exec(db, "PRAGMA synchronous=FULL") < 0) {
		sq.close(db);
		return NULL;
	}
	return db;
}

/* A new database at PATH loaded with SIZE bytes of 4 KiB rows in one
 * transaction; *US (if not NULL) the time from the connection to COMMIT's
 * return; then WAL's checkpoint (TRUNCATE), not counted. */
static int sqlite_fill(struct bench_alt *a, const char *path, uint64_t size,
		       double *us)
{
	unsigned char page[BENCH_PAGE];
	sqlite3_stmt *st = NULL;
	sqlite3 *db;
	int rc = -1;
	double t;

	unlink_family(path);
	t = bench_now();
	db = sq_connect(a, path, 1);
	if (!db)
		return -1;
	/* WAL: no automatic checkpoint inside COMMIT (it would copy the
	 * load into the database before COMMIT returns): the one after the
	 * load is not counted, so WAL is timed at its fastest. */
	if (sq_exec(db, "PRAGMA page_size=4096") < 0 ||
	    (is_wal(a) && sq_exec(db, "PRAGMA wal_autocheckpoint=0") < 0) ||
	    sq_exec(db, "CREATE TABLE pages(id INTEGER PRIMARY KEY, "
			"data BLOB NOT NULL)") < 0 ||
	    sq_exec(db, "BEGIN") < 0 ||
	    sq.prepare_v2(db, "INSERT INTO pages VALUES(?1, ?2)", -1, &st,
			  NULL) != SQLITE_OK)
		goto out;
	for (uint64_t p = 0; p < size / BENCH_PAGE; p++) {
		initial_page(page, p);
		sq.bind_int64(st, 1, (long long)p);
		sq.bind_blob(st, 2, page, BENCH_PAGE, NULL);
		if (sq.step(st) != SQLITE_DONE)
			goto out;
		sq.reset(st);
	}
	if (sq_exec(db, "COMMIT") < 0)
		goto out;
	if (us)
		*us = (bench_now() - t) * 1e6;
	if (is_wal(a) && sq_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)") < 0)
		goto out;
	rc = 0;
out:
	if (st)
		sq.finalize(st);
	sq.close(db);
	return rc;
}

static int sqlite_create(struct bench_alt *a, const char *path, uint64_t size)
{
	return sqlite_fill(a, path, size, NULL);
}

static struct bench_handle *sqlite_open(struct bench_alt *a, const char *path)
{
	struct bench_handle *h = handle_new(a, path);
	sqlite3_stmt *st = NULL;

	if (!h)
		return NULL;
	h->db = sq_connect(a, path, 0);
	if (!h->db)
		goto fail;
	if (sq.prepare_v2(h->db, "UPDATE pages SET data = ?2 WHERE id = ?1",
			  -1, &st, NULL) != SQLITE_OK)
		goto fail;
	h->stmt = st;
	return h;
fail:
	if (h->db)
		sq.close(h->db);
	free(h);
	errno = EIO;
	return NULL;
}

static int sqlite_txn(struct bench_handle *h, const struct bench_upd *u, int n,
		      const unsigned char *payload)
{
	sqlite3_stmt *st = h->stmt;

	/* IMMEDIATE: concurrent writers queue at BEGIN (busy timeout) instead
	 * of deadlocking on the upgrade of a read lock. */
	if (sq_exec(h->db, "BEGIN IMMEDIATE") < 0)
		return -1;
	for (int i = 0; i < n; i++)
		for (uint32_t o = 0; o < u[i].len; o += BENCH_PAGE) {
			sq.bind_int64(st, 1,
				      (long long)((u[i].off + o) / BENCH_PAGE));
			sq.bind_blob(st, 2, payload + u[i].data + o,
				     BENCH_PAGE, NULL);
			if (sq.step(st) != SQLITE_DONE) {
				sq.reset(st);
				sq_exec(h->db, "ROLLBACK");
				errno = EIO;
				return -1;
			}
			sq.reset(st);
		}
	return sq_exec(h->db, "COMMIT");
}

static int sqlite_close(struct bench_handle *h)
{
	int rc;

	sq.finalize(h->stmt);
	rc = sq.close(h->db) == SQLITE_OK ? 0 : -1;
	free(h);
	return rc;
}

static void sqlite_crash(struct bench_handle *h)
{
	/* A crash leaves the WAL unreplayed: no checkpoint before it. */
	sq_exec(h->db, "PRAGMA wal_autocheckpoint=0");
}

static int sqlite_recover(struct bench_alt *a, const char *path)
{
	sqlite3_stmt *st = NULL;
	sqlite3 *db = sq_connect(a, path, 0);
	int rc = -1;

	/* The first reader after a crash rebuilds the WAL index (reads the
	 * whole WAL); a rollback journal would be rolled back here. */
	if (!db)
		return -1;
	if (sq.prepare_v2(db, "SELECT data FROM pages WHERE id = 0", -1, &st,
			  NULL) == SQLITE_OK && sq.step(st) == SQLITE_ROW)
		rc = 0;
	if (st)
		sq.finalize(st);
	sq.close(db);
	return rc;
}

/* ---- LMDB (dlopen) -------------------------------------------------------- */

typedef struct MDB_env MDB_env;
typedef struct MDB_txn MDB_txn;
typedef struct { size_t mv_size; void *mv_data; } MDB_val;
#define MDB_NOSUBDIR 0x4000
#define MDB_INTEGERKEY 0x08
#define MDB_CREATE 0x40000
#define MDB_NOTLS 0x200000
#define MDB_RDONLY 0x20000

static struct {
	void *so;
	int (*env_create)(MDB_env **);
	int (*env_set_mapsize)(MDB_env *, size_t);
	int (*env_open)(MDB_env *, const char *, unsigned, unsigned);
	void (*env_close)(MDB_env *);
	int (*txn_begin)(MDB_env *, MDB_txn *, unsigned, MDB_txn **);
	int (*txn_commit)(MDB_txn *);
	void (*txn_abort)(MDB_txn *);
	int (*dbi_open)(MDB_txn *, const char *, unsigned, unsigned *);
	int (*put)(MDB_txn *, unsigned, MDB_val *, MDB_val *, unsigned);
	int (*get)(MDB_txn *, unsigned, MDB_val *, MDB_val *);
	const char *(*strerror)(int);
} mdb;

static int lmdb_load(char *why, size_t len)
{
	if (mdb.so)
		return 0;
	mdb.so = dlopen("liblmdb.so.0", RTLD_NOW | RTLD_LOCAL);
	if (!mdb.so) {
		snprintf(why, len, "not installed (liblmdb.so.0: %s; Debian "
			 "package liblmdb0)", dlerror());
		return -1;
	}
#define MD(f, n) (*(void **)&mdb.f = dlsym(mdb.so, "mdb_" n))
	if (!MD(env_create, "env_create") ||
	    !MD(env_set_mapsize, "env_set_mapsize") ||
	    !MD(env_open, "env_open") || !MD(env_close, "env_close") ||
	    !MD(txn_begin, "txn_begin") || !MD(txn_commit, "txn_commit") ||
	    !MD(txn_abort, "txn_abort") || !MD(dbi_open, "dbi_open") ||
	    !MD(put, "put") || !MD(get, "get") ||
	    !MD(strerror, "strerror")) {
		snprintf(why, len, "liblmdb.so.0 lacks a function we use");
		dlclose(mdb.so);
		mdb.so = NULL;
		return -1;
	}
#undef MD
	return 0;
}

static int lmdb_probe(struct bench_alt *a, const char *dir)
{
	return lmdb_load(a->why, sizeof(a->why)) < 0 ? -1 : 0;
}

/* Address space for the map (not allocated up front on Linux): room for
 * the largest data set and a transaction's worth of copied pages. */
#define LMDB_MAPSIZE (64ULL << 30)

static MDB_env *lmdb_env(const char *path, unsigned *dbi, int create)
{
	MDB_env *env;
	MDB_txn *t;
	int e;

	if ((e = mdb.env_create(&env)) != 0)
		goto fail_nocl;
	if ((e = mdb.env_set_mapsize(env, LMDB_MAPSIZE)) != 0 ||
	    (e = mdb.env_open(env, path, MDB_NOSUBDIR | MDB_NOTLS, 0644)) != 0)
		goto fail;
	if ((e = mdb.txn_begin(env, NULL, 0, &t)) != 0)
		goto fail;
	if ((e = mdb.dbi_open(t, NULL, MDB_INTEGERKEY |
			      (create ? MDB_CREATE : 0), dbi)) != 0) {
		mdb.txn_abort(t);
		goto fail;
	}
	if ((e = mdb.txn_commit(t)) != 0)
		goto fail;
	return env;
fail:
	mdb.env_close(env);
fail_nocl:
	errno = e > 0 && e < 4096 ? e : EIO;
	return NULL;
}

static int lmdb_put_pages(MDB_env *env, unsigned dbi, uint64_t first,
			  uint64_t npages, const unsigned char *data)
{
	unsigned char page[BENCH_PAGE];
	MDB_txn *t;
	int e;

	if ((e = mdb.txn_begin(env, NULL, 0, &t)) != 0)
		goto fail;
	for (uint64_t p = first; p < first + npages; p++) {
		uint64_t key = p;
		MDB_val k = { sizeof(key), &key }, v;
		if (!data)
			initial_page(page, p);
		v.mv_size = BENCH_PAGE;
		v.mv_data = data ? (void *)(data + (p - first) * BENCH_PAGE)
				 : page;
		if ((e = mdb.put(t, dbi, &k, &v, 0)) != 0) {
			mdb.txn_abort(t);
			goto fail;
		}
	}
	if ((e = mdb.txn_commit(t)) != 0)
		goto fail;
	return 0;
fail:
	errno = e > 0 && e < 4096 ? e : EIO;
	return -1;
}

static int lmdb_create(struct bench_alt *a, const char *path, uint64_t size)
{
	unsigned dbi;
	MDB_env *env;
	int rc = 0;

	unlink_family(path);
	env = lmdb_env(path, &dbi, 1);
	if (!env)
		return -1;
	for (uint64_t p = 0; p < size / BENCH_PAGE && rc == 0; p += 16384) {
		uint64_t n = size / BENCH_PAGE - p;
		rc = lmdb_put_pages(env, dbi, p, n < 16384 ? n : 16384, NULL);
	}
	mdb.env_close(env);
	return rc;
}

static struct bench_handle *lmdb_open(struct bench_alt *a, const char *path)
{
	struct bench_handle *h = handle_new(a, path);

	if (!h)
		return NULL;
	h->db = lmdb_env(path, &h->dbi, 0);
	if (!h->db) {
		free(h);
		return NULL;
	}
	return h;
}

static int lmdb_txn(struct bench_handle *h, const struct bench_upd *u, int n,
		    const unsigned char *payload)
{
	MDB_txn *t;
	int e;

	if ((e = mdb.txn_begin(h->db, NULL, 0, &t)) != 0)
		goto fail;
	for (int i = 0; i < n; i++)
		for (uint32_t o = 0; o < u[i].len; o += BENCH_PAGE) {
			uint64_t key = (u[i].off + o) / BENCH_PAGE;
			MDB_val k = { sizeof(key), &key };
			MDB_val v = { BENCH_PAGE,
				      (void *)(payload + u[i].data + o) };
			if ((e = mdb.put(t, h->dbi, &k, &v, 0)) != 0) {
				mdb.txn_abort(t);
				goto fail;
			}
		}
	if ((e = mdb.txn_commit(t)) != 0)
		goto fail;
	return 0;
fail:
	errno = e > 0 && e < 4096 ? e : EIO;
	return -1;
}

static int lmdb_close(struct bench_handle *h)
{
	mdb.env_close(h->db);
	free(h);
	return 0;
}

static int lmdb_recover(struct bench_alt *a, const char *path)
{
	MDB_txn *t;
	unsigned dbi;
	uint64_t key = 0;
	MDB_val k = { sizeof(key), &key }, v;
	MDB_env *env = lmdb_env(path, &dbi, 0);
	int rc = -1;

	/* LMDB has no log: opening picks the newer of its two meta pages. */
	if (!env)
		return -1;
	if (mdb.txn_begin(env, NULL, MDB_RDONLY, &t) == 0) {
		rc = mdb.get(t, dbi, &k, &v) == 0 ? 0 : -1;
		mdb.txn_abort(t);
	}
	mdb.env_close(env);
	return rc;
}

/* ---- the table ------------------------------------------------------------ */

static struct bench_alt alts[] = {
	{ .name = "oatomic-auto", .method = OA_METHOD_AUTO,
	  .desc = "oa_pwrite per update, oa_commit (method the library picks)" },
	{ .name = "oatomic-journal", .method = OA_METHOD_JOURNAL,
	  .desc = "oatomic, journal method forced" },
	{ .name = "oatomic-clone", .method = OA_METHOD_CLONE,
	  .desc = "oatomic, clone (reflink) method forced" },
	{ .name = "oatomic-exchange", .method = OA_METHOD_EXCHANGE,
	  .desc = "oatomic, XFS range exchange method forced" },
	{ .name = "oatomic-kernel", .method = OA_METHOD_KERNEL,
	  .desc = "oatomic, kernel untorn writes method forced" },
	{ .name = "inplace", .method = -1, .app_counts = 1,
	  .desc = "pwrite per update + fdatasync, in place: NOT atomic, the floor" },
	{ .name = "copy-rename", .method = -1, .app_counts = 1,
	  .desc = "copy with the updates to a temporary, fsync, rename, fsync dir" },
	{ .name = "sqlite-rollback", .method = -1, .caps = ALT_WHOLE_PAGES,
	  .desc = "SQLite journal_mode=DELETE synchronous=FULL, a 4 KiB blob per page" },
	{ .name = "sqlite-wal", .method = -1,
	  .caps = ALT_RECOVER | ALT_WHOLE_PAGES,
	  .desc = "SQLite journal_mode=WAL synchronous=FULL, a 4 KiB blob per page" },
	{ .name = "sqlite-oatomic", .method = -1,
	  .caps = ALT_RECOVER | ALT_WHOLE_PAGES,
	  .desc = "SQLite through the oatomic VFS, journal_mode=MEMORY, "
		  "synchronous=FULL, a 4 KiB blob per page" },
	{ .name = "lmdb", .method = -1,
	  .caps = ALT_RECOVER | ALT_NO_THREADS_SAME_FILE | ALT_WHOLE_PAGES,
	  .desc = "LMDB, a 4 KiB record per page, synced commits" },
	{ .name = "rwf-atomic", .method = -1,
	  .caps = ALT_ONE_WRITE | ALT_WHOLE_PAGES,
	  .app_counts = 1,
	  .desc = "pwritev2(RWF_ATOMIC|RWF_DSYNC), O_DIRECT: one write per txn" },
};

int bench_alts_init(struct bench_alt **out, int max)
{
	int n = 0;

	for (size_t i = 0; i < sizeof(alts) / sizeof(alts[0]) && n < max; i++) {
		struct bench_alt *a = &alts[i];
		if (a->method >= 0) {
			a->app_counts = 1;
			a->caps |= ALT_RECOVER;
			a->probe = oa_alt_probe;
			a->create = oa_alt_create;
			a->open = oa_alt_open;
			a->txn = oa_alt_txn;
			a->close = oa_alt_close;
			a->destroy = oa_alt_destroy;
			a->recover = oa_alt_recover;
			a->crash_setup = oa_alt_crash;
			a->load = oa_alt_load;
		} else if (strcmp(a->name, "inplace") == 0) {
			a->load = plain_load;
			a->create = plain_create;
			a->open = inplace_open;
			a->txn = inplace_txn;
			a->close = fd_close;
			a->destroy = plain_destroy;
		} else if (strcmp(a->name, "copy-rename") == 0) {
			a->create = plain_create;
			a->open = copy_open;
			a->txn = copy_txn;
			a->close = fd_close;
			a->destroy = plain_destroy;
		} else if (strncmp(a->name, "sqlite", 6) == 0) {
			a->probe = sqlite_probe;
			a->create = sqlite_create;
			a->open = sqlite_open;
			a->txn = sqlite_txn;
			a->close = sqlite_close;
			a->destroy = plain_destroy;
			a->recover = sqlite_recover;
			a->load = sqlite_fill;
			if (is_wal(a))
				a->crash_setup = sqlite_crash;
		} else if (strcmp(a->name, "lmdb") == 0) {
			a->probe = lmdb_probe;
			a->create = lmdb_create;
			a->open = lmdb_open;
			a->txn = lmdb_txn;
			a->close = lmdb_close;
			a->destroy = plain_destroy;
			a->recover = lmdb_recover;
		} else if (strcmp(a->name, "rwf-atomic") == 0) {
			a->probe = rwf_probe;
			a->create = plain_create;
			a->open = rwf_open;
			a->txn = rwf_txn;
			a->close = fd_close;
			a->destroy = plain_destroy;
		}
		out[n++] = a;
	}
	return n;
}

void bench_alts_done(void)
{
	/* The libraries stay loaded: LMDB and SQLite keep thread-specific
	 * data whose destructors must not outlive the code. */
}
