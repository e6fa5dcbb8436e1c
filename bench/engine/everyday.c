/*
 * everyday.c - the everyday workloads of `oatomic bench`: what most programs
 * do with a file, one whole operation at a time, each against the plain way
 * of doing it:
 *
 *   open     a clean file (committed and closed long before): open, one
 *            4 KiB read, close; O_RDONLY, and O_RDWR (a writer's open that
 *            changes nothing).  Baseline "plain": open + pread + close;
 *   oneshot  an existing file: open O_RDWR, one 4 KiB write, commit, close.
 *            Baseline "inplace": open + pwrite + fdatasync + close (not
 *            atomic: the floor);
 *   replace  a small file's whole content replaced, as config and state
 *            files are: open O_RDWR, write the new content at 0, ftruncate
 *            to its length, commit, close.  Baseline "copy-rename": write a
 *            temporary beside the file, fsync it, rename it over the file,
 *            fsync the directory.  Sizes 64 B, 64 KiB, 1 MiB by default;
 *   change   one 4 KiB change to a big file (256 MiB): open O_RDWR, write,
 *            commit, close.  Baseline "copy-rename": the whole file copied
 *            with the change into a temporary, fsync, rename over the file,
 *            fsync the directory (what a program does for an atomic change
 *            without a library);
 *   fill     an empty file written whole in one transaction (256 MiB in
 *            1 MiB writes): open O_RDWR, the writes, commit, close.
 *            Baseline "inplace": open + pwrite... + fdatasync + close.  The
 *            file, and for oatomic its control file and journal, are
 *            removed and the file made again, empty, before every operation
 *            (not timed), so every operation starts from a new file;
 *   frag     (XFS with range exchange) one 64 KiB change to a 64 MiB file
 *            that N earlier 4 KiB commits of the exchange method have
 *            fragmented (N = 0, 2000, 8000; made before, not timed): open,
 *            write, commit, close.  Baseline "clone-exchange", the
 *            whole-file pattern of xfs_io's atomic update: the file cloned
 *            (FICLONE) into an O_TMPFILE, the change written there, the
 *            whole file exchanged back with DSYNC.  Shows that the cost of
 *            oatomic's exchange follows the change, not the file's extents;
 *            rows say how many extents the file had (FIEMAP).  Elsewhere
 *            its rows are n/a.
 *
 * One operation is timed from the start of its open to the return of its
 * close.  Every alternative has its own file, made before and not timed.
 * The alternatives take turns in blocks of a few operations, forward then
 * backward (A B, B A, ...), with a syncfs before each block, so that drift
 * of the machine falls on all alike.  Figures: median, p90, p99, min and max
 * over every operation; operations per second of operating; flushes and
 * bytes written per operation as the alternative counts them (oatomic: the
 * library's I/O seam, oa__stats; the baselines: the bench's own calls);
 * /proc/self/io and the block device's counters; the ratio of medians to
 * the workload's baseline; and, after the run, the files left beside the
 * data file (the library's .NAME.oa*, a baseline's temporary) and their
 * disk usage: the "nothing left behind" figure.
 *
 * SPDX-License-Identifier: MIT
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <linux/fiemap.h>
#include <linux/fs.h>

#include "oatomic.h"
#include "oatomic-private.h"	/* the XFS range exchange (sys.h) */
#include "bench.h"

#define EV_FILE		(1u << 20)	/* open, oneshot: the file's size */
#define EV_IO		BENCH_PAGE	/* open, oneshot: bytes per operation */
#define EV_BLOCK	10		/* operations per turn */
#define EV_BIG		(256u << 20)	/* change, fill: the file's size */
#define EV_BIG_QUICK	(4u << 20)	/* the same with --quick */
#define EV_FRAG_FILE	(64u << 20)	/* frag: the file's size */
#define EV_FRAG_IO	(64u << 10)	/* frag: the change */

enum ev_wl { EV_OPEN, EV_ONESHOT, EV_REPLACE, EV_CHANGE, EV_FILL, EV_FRAG,
	     EV_READ };

struct ev_point {
	enum ev_wl wl;
	const char *workload;
	const char *param;
	const char *mode;	/* "O_RDONLY", "O_RDWR", "-" */
	int flags;		/* open: how the file is opened */
	uint64_t file_size;
	uint32_t len;		/* bytes read or written per call (fill: per
				 * write of the file_size an operation
				 * writes) */
	int ops;		/* per alternative */
	int block;		/* operations per turn */
	int frag;		/* frag: 4 KiB exchange commits made before */
};

struct ev_alt {
	const char *name;
	struct bench_alt *oa;	/* NULL: the baseline */
	char base[128];		/* the data file's name */
	char path[4200], tmp[4300];
	unsigned char *buf;	/* BENCH_CHUNK, page aligned */
	unsigned char *copy;	/* change, copy-rename: BENCH_CHUNK to copy */
	double *lat;		/* us, one per operation */
	int n, blocks;
	double busy;		/* seconds spent in operations */
	double rate_min, rate_max;	/* ops/s of the fastest/slowest turn */
	uint64_t flushes, bytes, io_bytes, dev_flushes, dev_sectors;
	int dev_ok;
	double peak;
	double left_files, left_bytes;
	double extents;		/* frag: the file's, before the operations */
	double cpu;		/* CPU seconds of the process in the turns */
	oa_file *rh, *wh;	/* read: the reader's and the writer's handles */
	int rfd;		/* read, plain: the descriptor (+1; 0: none) */
	int failed;
	char err[160];
};

static uint64_t ev_rng(uint64_t s)
{
	/* splitmix64, one step */
	uint64_t z = s + 0x9e3779b97f4a7c15ULL;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Bytes one operation reads or writes, and the x of its row. */
static uint64_t ev_bytes(const struct ev_point *p)
{
	return p->wl == EV_FILL ? p->file_size : p->len;
}

static uint64_t ev_value(const struct ev_point *p)
{
	if (p->wl == EV_FRAG)
		return (uint64_t)p->frag;
	return p->wl == EV_REPLACE || p->wl == EV_FILL ? p->file_size : p->len;
}

/* Operation I's offset: a page of the file, the same for every alternative. */
static uint64_t ev_off(const struct ev_point *p, uint64_t i)
{
	if (p->wl == EV_REPLACE || p->wl == EV_FILL)
		return 0;
	if (p->wl == EV_FRAG)	/* aligned to the change's size */
		return ev_rng(i * 7919 + p->file_size) %
		       (p->file_size / p->len) * p->len;
	return ev_rng(i * 7919 + p->file_size) % (p->file_size / BENCH_PAGE) *
	       BENCH_PAGE;
}

/* New bytes for operation I (the first 8 of every page and of the buffer). */
static void ev_stamp(unsigned char *buf, uint32_t len, uint64_t i)
{
	uint64_t v = i * 0x100000001b3ULL + 1;

	for (uint32_t b = 0; b + 8 <= len; b += BENCH_PAGE)
		memcpy(buf + b, &v, 8);
	if (len < 8)
		memcpy(buf, &v, len);
}

/* ---- one operation ---------------------------------------------------------- */

static int op_oatomic(struct ev_alt *a, const struct ev_point *p, uint64_t off)
{
	struct oa_options opts = { .size = sizeof(opts),
				   .method = a->oa->method };
	if (p->wl == EV_READ)
		return oa_pread(a->rh, a->buf, p->len, (off_t)off) ==
		       (ssize_t)p->len ? 0 : -1;
	oa_file *f = oa_open_opts(a->path, p->flags, 0, &opts);
	int rc = -1, e;

	if (!f)
		return -1;
	switch (p->wl) {
	case EV_OPEN:
	case EV_READ:
		if (oa_pread(f, a->buf, p->len, (off_t)off) != (ssize_t)p->len)
			goto out;
		break;
	case EV_ONESHOT:
	case EV_CHANGE:
	case EV_FRAG:
		if (oa_pwrite(f, a->buf, p->len, (off_t)off) !=
		    (ssize_t)p->len || oa_commit(f) < 0)
			goto out;
		break;
	case EV_FILL:
		for (uint64_t o = 0; o < p->file_size; o += p->len) {
			size_t n = p->file_size - o < p->len ?
				   (size_t)(p->file_size - o) : p->len;
			if (oa_pwrite(f, a->buf, n, (off_t)o) != (ssize_t)n)
				goto out;
		}
		if (oa_commit(f) < 0)
			goto out;
		break;
	case EV_REPLACE:
		if (oa_pwrite(f, a->buf, p->len, 0) != (ssize_t)p->len ||
		    oa_ftruncate(f, (off_t)p->len) < 0 || oa_commit(f) < 0)
			goto out;
		break;
	}
	rc = 0;
out:
	e = rc < 0 && errno ? errno : EIO;
	if (oa_close(f) < 0 && rc == 0)
		return -1;
	if (rc < 0)
		errno = e;
	return rc;
}

/* The whole file copied into the temporary with the change at OFF, synced
 * and renamed over the file, the directory synced: an atomic change
 * without a library. */
static int copy_change(struct ev_alt *a, const struct ev_point *p,
		       uint64_t off)
{
	int in = open(a->path, O_RDONLY | O_CLOEXEC), out, rc = -1, e;

	if (in < 0)
		return -1;
	out = open(a->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (out < 0) {
		close(in);
		return -1;
	}
	for (uint64_t o = 0; o < p->file_size; o += BENCH_CHUNK) {
		size_t n = p->file_size - o < BENCH_CHUNK ?
			   (size_t)(p->file_size - o) : BENCH_CHUNK;
		if (bench_pread(in, a->copy, n, (off_t)o) < 0)
			goto out;
		if (off >= o && off < o + n)	/* page aligned: in one chunk */
			memcpy(a->copy + (off - o), a->buf, p->len);
		if (bench_pwrite(out, a->copy, n, (off_t)o) < 0)
			goto out;
	}
	if (bench_fsync(out) == 0)
		rc = 0;
out:
	e = errno;
	close(in);
	if (close(out) < 0 && rc == 0)
		return -1;
	if (rc == 0 && (rename(a->tmp, a->path) < 0 ||
			bench_fsync_dir_of(a->path) < 0))
		return -1;
	errno = e;
	return rc;
}

/* The whole-file pattern of an atomic change on XFS (xfs_io's atomic
 * update): the file cloned into a temporary, the change written there, the
 * whole file exchanged back, durably (DSYNC: the one flush). */
static int clone_exchange(struct ev_alt *a, const struct ev_point *p,
			  uint64_t off)
{
	struct oa_xfs_exchange_range x = {
		.length = p->file_size, .flags = OA_XFS_EXCHANGE_DSYNC,
	};
	int fd = open(a->path, O_RDWR | O_CLOEXEC), tmp = -1, rc = -1, e;

	if (fd < 0)
		return -1;
	tmp = open(bench_dir(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (tmp < 0 || ioctl(tmp, FICLONE, fd) < 0 ||
	    bench_pwrite(tmp, a->buf, p->len, (off_t)off) < 0)
		goto out;
	x.file1_fd = tmp;
	bench_flush_counted();
	if (ioctl(fd, OA_XFS_IOC_EXCHANGE_RANGE, &x) == 0)
		rc = 0;
out:
	e = errno;
	if (tmp >= 0)
		close(tmp);
	if (close(fd) < 0 && rc == 0)
		return -1;
	errno = e;
	return rc;
}

static int op_plain(struct ev_alt *a, const struct ev_point *p, uint64_t off)
{
	int fd, rc = -1, e;

	switch (p->wl) {
	case EV_READ:
		if (pread(a->rfd - 1, a->buf, p->len, (off_t)off) ==
		    (ssize_t)p->len)
			return 0;
		if (errno == 0)
			errno = EIO;
		return -1;
	case EV_CHANGE:
		return copy_change(a, p, off);
	case EV_FRAG:
		return clone_exchange(a, p, off);
	case EV_FILL:
		fd = open(a->path, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			return -1;
		rc = 0;
		for (uint64_t o = 0; o < p->file_size && rc == 0;
		     o += p->len) {
			size_t n = p->file_size - o < p->len ?
				   (size_t)(p->file_size - o) : p->len;
			rc = bench_pwrite(fd, a->buf, n, (off_t)o);
		}
		if (rc == 0)
			rc = bench_fdatasync(fd);
		break;
	case EV_OPEN:
		fd = open(a->path, p->flags | O_CLOEXEC);
		if (fd < 0)
			return -1;
		if (pread(fd, a->buf, p->len, (off_t)off) == (ssize_t)p->len)
			rc = 0;
		else if (errno == 0)
			errno = EIO;
		break;
	case EV_ONESHOT:
		fd = open(a->path, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			return -1;
		if (bench_pwrite(fd, a->buf, p->len, (off_t)off) == 0 &&
		    bench_fdatasync(fd) == 0)
			rc = 0;
		break;
	case EV_REPLACE:
	default:
		fd = open(a->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			  0644);
		if (fd < 0)
			return -1;
		if (bench_pwrite(fd, a->buf, p->len, 0) == 0 &&
		    bench_fsync(fd) == 0) {
			if (close(fd) < 0)
				return -1;
			if (rename(a->tmp, a->path) < 0 ||
			    bench_fsync_dir_of(a->path) < 0)
				return -1;
			return 0;
		}
		break;
	}
	e = errno;
	if (close(fd) < 0 && rc == 0)
		return -1;
	errno = e;
	return rc;
}

/* ---- the data sets ----------------------------------------------------------- */

static void ev_left(struct ev_alt *a, int unlink_them);

/* frag: P->frag commits of 4 KiB at random pages through the exchange
 * method, the same ones for every alternative's file; then the library's
 * files go, so that each alternative starts as it would on a file it finds
 * fragmented. */
static int ev_fragment(struct ev_alt *a, const struct ev_point *p)
{
	struct oa_options opts = { .size = sizeof(opts),
				   .method = OA_METHOD_EXCHANGE };
	oa_file *f = oa_open_opts(a->path, O_RDWR, 0, &opts);
	int rc = 0;

	if (!f)
		return -1;
	for (int k = 0; k < p->frag && rc == 0; k++) {
		uint64_t off = ev_rng((uint64_t)k * 31 + 17) %
			       (p->file_size / BENCH_PAGE) * BENCH_PAGE;
		ev_stamp(a->buf, BENCH_PAGE, (uint64_t)k);
		if (oa_pwrite(f, a->buf, BENCH_PAGE, (off_t)off) != BENCH_PAGE ||
		    oa_commit(f) < 0)
			rc = -1;
	}
	if (oa_close(f) < 0)
		rc = -1;
	ev_left(a, 1);
	return rc;
}

/* The number of extents of PATH, as FIEMAP counts them; -1: unknown. */
static double ev_extents(const char *path)
{
	struct fiemap fm = { .fm_length = FIEMAP_MAX_OFFSET,
			     .fm_flags = FIEMAP_FLAG_SYNC };
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	double n = -1;

	if (fd < 0)
		return -1;
	if (ioctl(fd, FS_IOC_FIEMAP, &fm) == 0)	/* extent_count 0: count */
		n = fm.fm_mapped_extents;
	close(fd);
	return n;
}

/* The file as a user has it: for oatomic, made, then written and committed
 * once and closed (the library's files exist, nothing is pending).  fill
 * makes its file before every operation (ev_new_empty). */
static int ev_create(struct ev_alt *a, const struct ev_point *p)
{
	struct oa_options opts;
	uint32_t n = p->file_size < BENCH_PAGE ? (uint32_t)p->file_size :
						 BENCH_PAGE;
	oa_file *f;
	int rc;

	if (p->wl == EV_FILL)
		return 0;
	if (bench_make_plain(a->path, p->file_size) < 0)
		return -1;
	if (p->wl == EV_FRAG && p->frag > 0 && ev_fragment(a, p) < 0)
		return -1;
	if (!a->oa)
		return 0;
	memset(&opts, 0, sizeof(opts));
	opts.size = sizeof(opts);
	opts.method = a->oa->method;
	f = oa_open_opts(a->path, O_RDWR, 0, &opts);
	if (!f)
		return -1;
	ev_stamp(a->buf, n, (uint64_t)-1);
	rc = oa_pwrite(f, a->buf, n, 0) == (ssize_t)n && oa_commit(f) == 0 ?
	     0 : -1;
	if (oa_close(f) < 0)
		rc = -1;
	return rc;
}

/* Does NAME belong to the data file BASE (other than the file itself):
 * ".BASE.oa", ".BASE.oaj-K", ".BASE.INO.oa*", "BASE.tmp"? */
static int ev_beside(const char *name, const char *base)
{
	size_t l = strlen(base);

	if (name[0] == '.' && strncmp(name + 1, base, l) == 0 &&
	    name[l + 1] == '.')
		return 1;
	return strncmp(name, base, l) == 0 && name[l] == '.';
}

/* Count (and with UNLINK, remove) what is left beside the data file. */
static void ev_left(struct ev_alt *a, int unlink_them)
{
	DIR *d = opendir(bench_dir());
	struct dirent *e;
	struct stat st;

	a->left_files = a->left_bytes = 0;
	if (!d) {
		a->left_files = a->left_bytes = -1;
		return;
	}
	while ((e = readdir(d))) {
		if (!ev_beside(e->d_name, a->base))
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			a->left_files++;
			a->left_bytes += (double)st.st_blocks * 512;
		}
		if (unlink_them)
			unlinkat(dirfd(d), e->d_name, 0);
	}
	closedir(d);
}

/* fill, before each operation: a new empty file, durable, with nothing
 * beside it (the library's control file and journal of the last one
 * removed), as a program that writes a new file has it. */
static int ev_new_empty(struct ev_alt *a)
{
	ev_left(a, 1);
	if (unlink(a->path) < 0 && errno != ENOENT)
		return -1;
	return bench_make_plain(a->path, 0);
}

/* After the run: the file holds the last operation's bytes. */
static int ev_check(struct ev_alt *a, const struct ev_point *p, uint64_t off)
{
	unsigned char *got = malloc(p->len ? p->len : 1);
	ssize_t r = -1;
	off_t size = -1;

	if (!got)
		return -1;
	if (a->oa) {
		oa_file *f = oa_open(a->path, O_RDONLY, 0);
		struct stat st;
		if (f) {
			r = oa_pread(f, got, p->len, (off_t)off);
			if (oa_fstat(f, &st) == 0)
				size = st.st_size;
			oa_close(f);
		}
	} else {
		int fd = open(a->path, O_RDONLY | O_CLOEXEC);
		struct stat st;
		if (fd >= 0) {
			r = pread(fd, got, p->len, (off_t)off);
			if (fstat(fd, &st) == 0)
				size = st.st_size;
			close(fd);
		}
	}
	if (r != (ssize_t)p->len || memcmp(got, a->buf, p->len) != 0 ||
	    (p->wl == EV_REPLACE && size != (off_t)p->len) ||
	    (p->wl == EV_FILL && size != (off_t)p->file_size)) {
		snprintf(a->err, sizeof(a->err), "after the run the file does "
			 "not hold the last operation's bytes");
		free(got);
		return -1;
	}
	free(got);
	return 0;
}

/* ---- a point: every alternative, in turns --------------------------------------- */

static void ev_fail(struct ev_alt *a, const char *what, long i)
{
	int e = errno ? errno : EIO;

	a->failed = 1;
	if (i >= 0)
		snprintf(a->err, sizeof(a->err), "%s %ld: %s", what, i,
			 strerror(e));
	else
		snprintf(a->err, sizeof(a->err), "%s: %s", what, strerror(e));
}

/* read, around a turn: the handles kept open through it.  The library's:
 * a writer's handle that commits one byte as it is (the control file in
 * use, as beside any writer: a database's, a log's) and a reader's handle
 * opened after it; the baseline's: a descriptor. */
static int ev_read_open(struct ev_alt *a)
{
	if (!a->oa) {
		int fd = open(a->path, O_RDONLY | O_CLOEXEC);
		a->rfd = fd + 1;
		return fd < 0 ? -1 : 0;
	}
	struct oa_options opts = { .size = sizeof(opts),
				   .method = a->oa->method };
	unsigned char b;
	a->wh = oa_open_opts(a->path, O_RDWR, 0, &opts);
	if (!a->wh || oa_pread(a->wh, &b, 1, 0) != 1 ||
	    oa_pwrite(a->wh, &b, 1, 0) != 1 || oa_commit(a->wh) < 0)
		return -1;
	a->rh = oa_open_opts(a->path, O_RDONLY, 0, &opts);
	return a->rh ? 0 : -1;
}

static void ev_read_close(struct ev_alt *a)
{
	if (a->rh)
		oa_close(a->rh);
	if (a->wh)
		oa_close(a->wh);
	if (a->rfd > 0)
		close(a->rfd - 1);
	a->rh = a->wh = NULL;
	a->rfd = 0;
}

/* One turn of alternative A: operations FROM .. TO-1. */
static void ev_turn(struct ev_alt *a, const struct ev_point *p, int from,
		    int to)
{
	/* the one timing loop, whichever way the operation is done */
	int (*op)(struct ev_alt *, const struct ev_point *, uint64_t) =
		a->oa ? op_oatomic : op_plain;
	struct bench_meter m0, m1;
	double busy = 0, rate, pk;

	/* fill's turns are one operation long: the new file is made here,
	 * outside the meters */
	if (p->wl == EV_FILL && ev_new_empty(a) < 0) {
		ev_fail(a, "making the empty file", from);
		return;
	}
	if (p->wl == EV_READ && ev_read_open(a) < 0) {
		ev_fail(a, "opening the handles", from);
		ev_read_close(a);
		return;
	}
	bench_settle();
	bench_peak_reset();
	bench_meter_read(a->oa != NULL, &m0);
	for (int i = from; i < to; i++) {
		uint64_t off = ev_off(p, (uint64_t)i);
		double t, dt;
		int rc;

		if (p->wl != EV_OPEN && p->wl != EV_READ)
			ev_stamp(a->buf, p->len, (uint64_t)i);
		errno = 0;
		t = bench_now();
		rc = op(a, p, off);
		dt = bench_now() - t;
		if (rc < 0) {
			ev_fail(a, "operation", i);
			ev_read_close(a);
			return;
		}
		a->lat[a->n++] = dt * 1e6;
		busy += dt;
	}
	bench_meter_read(a->oa != NULL, &m1);
	ev_read_close(a);
	a->flushes += m1.app.flushes - m0.app.flushes;
	a->bytes += m1.app.bytes - m0.app.bytes;
	a->io_bytes += m1.io_wbytes - m0.io_wbytes;
	a->cpu += m1.cpu_s - m0.cpu_s;
	if (m0.dev_ok && m1.dev_ok) {
		a->dev_flushes += m1.dev_flushes - m0.dev_flushes;
		a->dev_sectors += m1.dev_sectors - m0.dev_sectors;
	} else {
		a->dev_ok = 0;
	}
	pk = bench_peak_kib();
	if (pk > a->peak)
		a->peak = pk;
	a->busy += busy;
	a->blocks++;
	rate = busy > 0 ? (to - from) / busy : 0;
	if (a->blocks == 1 || rate < a->rate_min)
		a->rate_min = rate;
	if (a->blocks == 1 || rate > a->rate_max)
		a->rate_max = rate;
}

/* A row of point P for the alternative NAME, every figure not there yet. */
static struct bench_row *ev_row_new(struct bench_report *rep,
				    const struct ev_point *p, const char *name)
{
	struct bench_row *row = bench_add_row(rep);

	row->workload = p->workload;
	row->alt = name;
	row->param = p->param;
	row->value = ev_value(p);
	row->file_size = p->file_size;
	row->mode = p->mode;
	row->per_op = 1;
	return row;
}

static void ev_row(struct bench_report *rep, const struct ev_point *p,
		   struct ev_alt *a, double base_med)
{
	struct bench_row *row = ev_row_new(rep, p, a->name);
	double logical = (double)ev_bytes(p) * a->n;
	int writes = p->wl != EV_OPEN && p->wl != EV_READ;

	if (a->failed) {
		row->status = "failed";
		snprintf(row->note, sizeof(row->note), "%s", a->err);
		return;
	}
	row->status = "ok";
	row->reps = a->blocks;
	row->commits = (uint64_t)a->n;
	row->txn_bytes = writes ? ev_bytes(p) : 0;
	row->lat_p99 = bench_quantile(a->lat, a->n, 0.99);
	row->lat_p90 = bench_quantile(a->lat, a->n, 0.90);
	row->lat_med = bench_quantile(a->lat, a->n, 0.5);
	row->lat_min = a->lat[0];	/* sorted */
	row->lat_max = a->lat[a->n - 1];
	row->cps = a->busy > 0 ? a->n / a->busy : -1;
	row->cps_min = a->rate_min;
	row->cps_max = a->rate_max;
	row->flushes = (double)a->flushes / a->n;
	row->bytes_per_op = (double)a->bytes / a->n;
	if (writes) {
		row->mbs = a->busy > 0 ? logical / a->busy / 1e6 : -1;
		row->wamp = (double)a->bytes / logical;
		row->io_wamp = (double)a->io_bytes / logical;
	}
	if (a->dev_ok) {
		row->dev_flushes = (double)a->dev_flushes / a->n;
		if (writes)
			row->dev_wamp = (double)a->dev_sectors * 512 / logical;
	}
	row->peak_kib = a->peak;
	row->cpu_us = a->cpu * 1e6 / a->n;
	if (base_med > 0)
		row->vs_base = row->lat_med / base_med;
	row->left_files = a->left_files;
	row->left_bytes = a->left_bytes;
	if (p->wl == EV_FRAG && a->extents >= 0)
		snprintf(row->note, sizeof(row->note), "%.0f extent%s before "
			 "the operations", a->extents,
			 a->extents == 1 ? "" : "s");
}

/* Point P cannot run here: an n/a row, saying WHY, for each alternative. */
static void ev_na(struct bench_report *rep, struct bench_alt *const *alts,
		  int nalts, const struct ev_point *p, const char *bname,
		  const char *why, enum bench_format fmt)
{
	for (int i = 0; i <= nalts; i++) {
		struct bench_row *row;

		if (i < nalts && !(alts[i]->method >= 0 && alts[i]->usable))
			continue;
		row = ev_row_new(rep, p, i < nalts ? alts[i]->name : bname);
		row->status = "n/a";
		snprintf(row->note, sizeof(row->note), "%s", why);
		bench_print_row_live(rep, row, fmt);
	}
}

/* frag needs the exchange method: can a file in the scratch directory be
 * opened with it?  If not, WHY says so. */
static int ev_can_exchange(char *why, size_t len)
{
	struct oa_options opts = { .size = sizeof(opts),
				   .method = OA_METHOD_EXCHANGE };
	struct ev_alt probe;
	oa_file *f;
	int ok = 0;

	memset(&probe, 0, sizeof(probe));
	snprintf(probe.base, sizeof(probe.base), "frag-probe");
	snprintf(probe.path, sizeof(probe.path), "%s/%s", bench_dir(),
		 probe.base);
	if (bench_make_plain(probe.path, BENCH_CHUNK) < 0) {
		snprintf(why, len, "making a file: %s", strerror(errno));
		return 0;
	}
	f = oa_open_opts(probe.path, O_RDWR, 0, &opts);
	if (f) {
		ok = 1;
		oa_close(f);
	} else {
		snprintf(why, len, "needs the exchange method (XFS with "
			 "range exchange): %s", strerror(errno));
	}
	ev_left(&probe, 1);
	unlink(probe.path);
	return ok;
}

static int ev_point_run(struct bench_report *rep, struct bench_alt *const *alts,
			int nalts, const struct ev_point *p, const char *bname,
			enum bench_format fmt, int progress)
{
	struct ev_alt ea[BENCH_MAXALTS + 1];
	int na = 0, failed = 0, bi;
	double base_med = -1;

	memset(ea, 0, sizeof(ea));
	for (int i = 0; i < nalts && na < BENCH_MAXALTS; i++)
		if (alts[i]->method >= 0 && alts[i]->usable)
			ea[na++].oa = alts[i];
	bi = na;
	ea[na++].name = bname;	/* the baseline, last */
	for (int k = 0; k < na; k++) {
		struct ev_alt *a = &ea[k];
		if (a->oa)
			a->name = a->oa->name;
		a->dev_ok = 1;
		a->peak = -1;
		/* "oneshot-oatomic-auto", "open-plain-ro", "replace-...-64";
		 * built in locals: the fields share the array ea */
		char base[sizeof(a->base)], path[sizeof(a->path)];
		char size[24] = "";
		if (p->wl == EV_REPLACE)
			snprintf(size, sizeof(size), "-%lu",
				 (unsigned long)p->file_size);
		snprintf(base, sizeof(base), "%s-%s%s%s", p->workload, a->name,
			 p->wl != EV_OPEN ? "" : p->flags == O_RDONLY ? "-ro" :
			 "-rw", size);
		snprintf(path, sizeof(path), "%s/%s", bench_dir(), base);
		memcpy(a->base, base, sizeof(base));
		memcpy(a->path, path, sizeof(path));
		snprintf(a->tmp, sizeof(a->tmp), "%s.tmp", path);
		a->lat = calloc((size_t)p->ops, sizeof(double));
		if (p->wl == EV_CHANGE && !a->oa)
			a->copy = malloc(BENCH_CHUNK);
		if (!a->lat || posix_memalign((void **)&a->buf, BENCH_PAGE,
					      BENCH_CHUNK) != 0 ||
		    (p->wl == EV_CHANGE && !a->oa && !a->copy)) {
			errno = ENOMEM;
			ev_fail(a, "setting up", -1);
			continue;
		}
		for (size_t b = 0; b < BENCH_CHUNK; b += 8)
			memcpy(a->buf + b, &(uint64_t){ b * 31 + 7 }, 8);
		errno = 0;
		a->extents = -1;
		if (ev_create(a, p) < 0)
			ev_fail(a, "creating the file", -1);
		else if (p->wl == EV_FRAG)
			a->extents = ev_extents(a->path);
	}
	bench_settle();
	for (int b = 0, from = 0; from < p->ops; b++, from += p->block) {
		int to = from + p->block < p->ops ? from + p->block : p->ops;
		for (int j = 0; j < na; j++) {
			struct ev_alt *a = &ea[b % 2 == 0 ? j : na - 1 - j];
			if (!a->failed)
				ev_turn(a, p, from, to);
		}
	}
	for (int k = 0; k < na; k++) {
		struct ev_alt *a = &ea[k];
		if (!a->failed && p->wl != EV_OPEN && p->wl != EV_READ &&
		    ev_check(a, p, ev_off(p, (uint64_t)p->ops - 1)) < 0)
			a->failed = 1;
		ev_left(a, 1);	/* counted, then removed */
		unlink(a->path);
		if (a->failed)
			failed = 1;
	}
	/* the baseline's median first: every row's ratio is to it */
	if (!ea[bi].failed && ea[bi].n > 0)
		base_med = bench_quantile(ea[bi].lat, ea[bi].n, 0.5);
	for (int k = 0; k < na; k++) {
		ev_row(rep, p, &ea[k], base_med);
		bench_print_row_live(rep, &rep->rows[rep->nrows - 1], fmt);
		free(ea[k].lat);
		free(ea[k].buf);
		free(ea[k].copy);
	}
	if (fmt != BF_TABLE && progress)
		fprintf(stderr, "oatomic: bench: %s %s=%lu %s done\n",
			p->workload, p->param, (unsigned long)ev_value(p),
			p->mode);
	return failed;
}

/* ---- the workloads ------------------------------------------------------------- */

/* Each workload, in enum ev_wl's order: its name (rows keep it: ours, not
 * the caller's buffer), what one operation is against its baseline (the
 * table's heading), the x of its rows and its baseline. */
static const struct {
	const char *name, *title, *param, *base;
} ev_kinds[] = {
	{ "open", "a clean file opened, 4 KiB read, closed; against open + "
	  "pread + close (plain)", "read_bytes", "plain" },
	{ "oneshot", "open O_RDWR, one 4 KiB write, commit, close; against "
	  "open + pwrite + fdatasync + close (inplace)", "update_bytes",
	  "inplace" },
	{ "replace", "a small file's whole content replaced: open, write at 0, "
	  "ftruncate, commit, close;\n   against a temporary written, fsync, "
	  "rename over, directory fsync (copy-rename)", "content_bytes",
	  "copy-rename" },
	{ "change", "one 4 KiB change to a big file: open O_RDWR, write, "
	  "commit, close;\n   against the whole file copied with the change "
	  "to a temporary, fsync, rename over, directory fsync (copy-rename)",
	  "update_bytes", "copy-rename" },
	{ "fill", "a new, empty file written whole in one transaction of "
	  "1 MiB writes: open O_RDWR, write, commit, close;\n   against open "
	  "+ pwrite... + fdatasync + close (inplace)", "txn_bytes", "inplace" },
	{ "frag", "one 64 KiB change as the file fragments (N 4 KiB exchange "
	  "commits before): open, write, commit, close;\n   against the whole "
	  "file cloned, the change written, the whole file exchanged back "
	  "(clone-exchange); the note: the file's extents", "frag_commits",
	  "clone-exchange" },
	{ "read", "4 KiB oa_pread on a handle kept open beside a writer's "
	  "open handle that has committed;\n   against pread on a descriptor "
	  "kept open (plain); not open .. close, the read alone",
	  "read_bytes", "plain" },
};

int bench_everyday(const struct bench_opts *o, struct bench_report *rep,
		   struct bench_alt *const *alts, int nalts,
		   const char *workload)
{
	static const uint64_t def_sizes[] = { 64, 64 << 10, 1 << 20 };
	static const int q_frag[] = { 0, 100 }, f_frag[] = { 0, 2000, 8000 };
	const uint64_t *sizes = o->nsizes ? o->sizes : def_sizes;
	/* change and fill: one big file, as the --max-size cap allows */
	uint64_t big = o->quick ? EV_BIG_QUICK : EV_BIG;
	uint64_t frag_file = o->quick ? EV_BIG_QUICK : EV_FRAG_FILE;
	struct ev_point p;
	int failed = 0, npoints = 1;
	char why[200];

	if (o->max_size && big > o->max_size)
		big = o->max_size;
	if (o->max_size && frag_file > o->max_size)
		frag_file = o->max_size;
	memset(&p, 0, sizeof(p));
	for (size_t i = 0; i < sizeof(ev_kinds) / sizeof(ev_kinds[0]); i++)
		if (strcmp(workload, ev_kinds[i].name) == 0) {
			p.wl = (enum ev_wl)i;
			p.workload = ev_kinds[i].name;
		}
	if (!p.workload)
		return 1;
	/* A copy or a write of the whole big file per operation: fewer of
	 * them by default. */
	p.ops = o->ops > 0 ? o->ops : p.wl == EV_CHANGE ? 20 :
		p.wl == EV_FRAG ? 15 :
		p.wl == EV_FILL ? (o->quick ? 3 : 5) :
		p.wl == EV_READ ? (o->quick ? 200 : 20000) : (o->quick ? 20 : 200);
	p.block = p.ops >= 4 * EV_BLOCK ? EV_BLOCK :
		  (p.ops / 4 > 0 ? p.ops / 4 : 1);
	if (p.wl == EV_FILL)
		p.block = 1;	/* the new file is made between turns */
	if (p.wl == EV_READ)	/* a read is a microsecond: longer turns */
		p.block = p.ops >= 40 ? p.ops / 20 : p.block;
	p.mode = "-";
	p.param = ev_kinds[p.wl].param;
	p.flags = O_RDWR;
	if (o->format == BF_TABLE)
		printf("\n== %s: %s\n   per operation, open .. close; x base = "
		       "median / %s's; left = files beside the data file "
		       "after the run, du\n", p.workload, ev_kinds[p.wl].title,
		       ev_kinds[p.wl].base);
	if (p.wl == EV_OPEN)
		npoints = 2;	/* O_RDONLY, O_RDWR */
	else if (p.wl == EV_REPLACE)
		npoints = o->nsizes ? o->nsizes : 3;
	else if (p.wl == EV_FRAG)
		npoints = o->quick ? 2 : 3;
	for (int k = 0; k < npoints; k++) {
		switch (p.wl) {
		case EV_OPEN:
			p.file_size = EV_FILE;
			p.len = EV_IO;
			p.flags = k ? O_RDWR : O_RDONLY;
			p.mode = k ? "O_RDWR" : "O_RDONLY";
			break;
		case EV_ONESHOT:
			p.file_size = EV_FILE;
			p.len = EV_IO;
			break;
		case EV_READ:
			p.file_size = EV_FILE;
			p.len = EV_IO;
			p.flags = O_RDONLY;
			p.mode = "O_RDONLY";
			break;
		case EV_REPLACE:
			p.file_size = sizes[k];
			p.len = (uint32_t)sizes[k];
			break;
		case EV_CHANGE:
			p.file_size = big;
			p.len = EV_IO;
			break;
		case EV_FILL:
			p.file_size = big;
			p.len = BENCH_CHUNK;
			break;
		case EV_FRAG:
			p.file_size = frag_file;
			p.len = EV_FRAG_IO;
			p.frag = o->quick ? q_frag[k] : f_frag[k];
			if (k == 0 && !ev_can_exchange(why, sizeof(why))) {
				ev_na(rep, alts, nalts, &p,
				      ev_kinds[p.wl].base, why, o->format);
				return failed;
			}
			break;
		}
		failed |= ev_point_run(rep, alts, nalts, &p,
				       ev_kinds[p.wl].base, o->format,
				       o->progress);
	}
	return failed;
}
