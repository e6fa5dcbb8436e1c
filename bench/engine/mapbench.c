/*
 * mapbench.c - the mmap workload of `oatomic bench`: a commit of stores
 * through a mapping of a big file, against
 *   msync      the same stores in a MAP_SHARED mapping, msync(MS_SYNC): the
 *              unsafe floor (a crash tears it);
 *   snapshot   msync, then the whole file cloned (FICLONE) to a snapshot
 *              and the snapshot fsync'd, as famus_snap does for failure-
 *              atomic msync on XFS and Btrfs (n/a without reflink);
 *   writeback  the program's whole copy written back and fdatasync'd (what
 *              a program without a mapping does to update atomically in
 *              place... minus the atomicity: the cost of O(mapping)).
 *
 * One commit: D distinct random 4 KiB pages get one 64-byte store each (a
 * B-tree's node updates), then the commit; stores and commit are timed
 * together (oatomic's cost is partly at the store: one fault per page and
 * transaction).  Points: files of 64 MiB, 1 GiB and 4 GiB (capped by
 * --max-size; --quick: 64 MiB), 1 %, 10 % and 100 % of their pages dirty.
 * The ramp: 1 % dirty commits, 500 of them (--quick 100), the first ten
 * and the last ten compared: the snapshot's cost follows the file's extent
 * count, which every commit raises.
 *
 * SPDX-License-Identifier: MIT
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench.h"
#include "oatomic.h"

enum mb_kind { MB_OA, MB_MSYNC, MB_SNAP, MB_WB };

struct mb_alt {
	const char *name;
	enum mb_kind kind;
	int method;		/* MB_OA */
};

struct mb_run {
	int fd, sfd;
	oa_file *f;
	unsigned char *map;	/* the mapping (or writeback's copy) */
	uint64_t size;
	char path[4096], spath[4200];
};

#define MB_STORE 64

static uint64_t mb_rng(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void mb_close(const struct mb_alt *x, struct mb_run *r)
{
	if (x->kind == MB_OA) {
		if (r->map)
			oa_munmap(r->f, r->map, (size_t)r->size);
		if (r->f)
			oa_close(r->f);
	} else if (x->kind == MB_WB) {
		free(r->map);
	} else if (r->map) {
		munmap(r->map, (size_t)r->size);
	}
	if (r->fd >= 0)
		close(r->fd);
	if (r->sfd >= 0)
		close(r->sfd);
	unlink(r->path);
	if (r->spath[0])
		unlink(r->spath);
	/* the library's files beside it */
	char ctl[4300];
	const char *base = strrchr(r->path, '/');
	snprintf(ctl, sizeof(ctl), "%.*s/.%s.oa", (int)(base - r->path),
		 r->path, base + 1);
	unlink(ctl);
	memset(r, 0, sizeof(*r));
	r->fd = r->sfd = -1;
}

/* Make the data file and open it the alternative's way.  0, -1 (errno),
 * or 1: not possible here (WHY). */
static int mb_open(const struct mb_alt *x, struct mb_run *r, uint64_t size,
		   char *why, size_t wl)
{
	memset(r, 0, sizeof(*r));
	r->fd = r->sfd = -1;
	r->size = size;
	snprintf(r->path, sizeof(r->path), "%s/mmap-%s", bench_dir(), x->name);
	if (bench_make_plain(r->path, size) < 0)
		return -1;
	switch (x->kind) {
	case MB_OA: {
		struct oa_options opts = { .size = sizeof(opts),
					   .method = x->method };
		r->f = oa_open_opts(r->path, O_RDWR, 0, &opts);
		if (!r->f)
			return -1;
		r->map = oa_mmap(r->f, (size_t)size, PROT_READ | PROT_WRITE, 0);
		return r->map ? 0 : -1;
	}
	case MB_SNAP:
		snprintf(r->spath, sizeof(r->spath), "%s.snap", r->path);
		r->sfd = open(r->spath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
			      0644);
		if (r->sfd < 0)
			return -1;
		/* fall through */
	case MB_MSYNC:
		r->fd = open(r->path, O_RDWR | O_CLOEXEC);
		if (r->fd < 0)
			return -1;
		if (x->kind == MB_SNAP && ioctl(r->sfd, FICLONE, r->fd) < 0) {
			snprintf(why, wl, "no reflink here (FICLONE: %s)",
				 strerror(errno));
			return 1;
		}
		r->map = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE,
			      MAP_SHARED, r->fd, 0);
		if (r->map == MAP_FAILED) {
			r->map = NULL;
			return -1;
		}
		/* fault the file in, as the library's mapping will be */
		for (uint64_t o = 0; o < size; o += BENCH_PAGE)
			(void)*(volatile unsigned char *)(r->map + o);
		return 0;
	case MB_WB:
		r->fd = open(r->path, O_RDWR | O_CLOEXEC);
		r->map = malloc((size_t)size);
		if (r->fd < 0 || !r->map)
			return -1;
		for (uint64_t o = 0; o < size; o += BENCH_CHUNK)
			if (bench_pread(r->fd, r->map + o, BENCH_CHUNK,
					(off_t)o) < 0)
				return -1;
		return 0;
	}
	return -1;
}

static int mb_commit(const struct mb_alt *x, struct mb_run *r)
{
	switch (x->kind) {
	case MB_OA:
		return oa_commit(r->f);
	case MB_SNAP:
	case MB_MSYNC:
		if (msync(r->map, (size_t)r->size, MS_SYNC) < 0)
			return -1;
		bench_flush_counted();
		if (x->kind == MB_MSYNC)
			return 0;
		if (ioctl(r->sfd, FICLONE, r->fd) < 0)
			return -1;
		return bench_fsync(r->sfd);
	case MB_WB:
		for (uint64_t o = 0; o < r->size; o += BENCH_CHUNK)
			if (bench_pwrite(r->fd, r->map + o, BENCH_CHUNK,
					 (off_t)o) < 0)
				return -1;
		return bench_fdatasync(r->fd);
	}
	return -1;
}

/* D distinct pages of NP, in PAGES, drawn from S (a byte map MARK of NP). */
static void mb_pick(uint64_t *s, uint64_t np, uint64_t d, uint32_t *pages,
		    unsigned char *mark)
{
	if (d >= np) {
		for (uint64_t i = 0; i < np; i++)
			pages[i] = (uint32_t)i;
		return;
	}
	for (uint64_t i = 0; i < d;) {
		uint64_t p = mb_rng(s) % np;
		if (mark[p])
			continue;
		mark[p] = 1;
		pages[i++] = (uint32_t)p;
	}
	for (uint64_t i = 0; i < d; i++)
		mark[pages[i]] = 0;
}

struct mb_res {
	double *lat;
	int n;
	struct bench_meter m0, m1;
	double peak;
};

/* N commits of D dirty pages each through X on a file of SIZE. */
static int mb_point(const struct mb_alt *x, uint64_t size, uint64_t d, int n,
		    struct mb_res *res, char *why, size_t wl)
{
	struct mb_run r;
	uint64_t np = size / BENCH_PAGE, s = 0x6d6170 + size + d;
	uint32_t *pages = malloc((size_t)(d < np ? d : np) * sizeof(*pages));
	unsigned char *mark = calloc(1, (size_t)np);
	unsigned char stamp[MB_STORE];
	int rc = -1;

	res->lat = calloc((size_t)n, sizeof(double));
	res->n = 0;
	if (!pages || !mark || !res->lat) {
		errno = ENOMEM;
		goto out;
	}
	rc = mb_open(x, &r, size, why, wl);
	if (rc)
		goto close;
	bench_settle();
	bench_peak_reset();
	bench_meter_read(x->kind == MB_OA, &res->m0);
	for (int c = 0; c < n; c++) {
		mb_pick(&s, np, d, pages, mark);
		memset(stamp, 'a' + c % 26, sizeof(stamp));
		double t = bench_now();
		for (uint64_t i = 0; i < (d < np ? d : np); i++)
			memcpy(r.map + (uint64_t)pages[i] * BENCH_PAGE +
			       (mb_rng(&s) % (BENCH_PAGE / MB_STORE)) * MB_STORE,
			       stamp, MB_STORE);
		if (mb_commit(x, &r) < 0) {
			rc = -1;
			goto close;
		}
		res->lat[res->n++] = (bench_now() - t) * 1e6;
	}
	bench_meter_read(x->kind == MB_OA, &res->m1);
	res->peak = bench_peak_kib();
	rc = 0;
close:
	{
		int e = errno;
		mb_close(x, &r);
		errno = e;
	}
out:
	free(pages);
	free(mark);
	return rc;
}

static struct bench_row *mb_row(struct bench_report *rep, const char *alt,
				const char *param, uint64_t value,
				uint64_t size, const char *mode)
{
	struct bench_row *row = bench_add_row(rep);
	row->workload = "mmap";
	row->alt = alt;
	row->param = param;
	row->value = value;
	row->file_size = size;
	row->mode = mode;
	row->per_op = 0;
	return row;
}

/* The figures of an ok row from RES: N commits of LOGICAL bytes each
 * (the bytes stored); BASE the msync row's median (<= 0: none yet). */
static void mb_fill(struct bench_row *row, struct mb_res *res, double logical,
		    double base)
{
	double sum = 0;
	for (int i = 0; i < res->n; i++)
		sum += res->lat[i];
	row->status = "ok";
	row->reps = 1;
	row->commits = (uint64_t)res->n;
	row->lat_med = bench_quantile(res->lat, res->n, 0.5);  /* sorts */
	row->lat_p99 = bench_quantile(res->lat, res->n, 0.99);
	row->lat_min = res->lat[0];
	row->lat_max = res->lat[res->n - 1];
	row->cps = row->cps_min = row->cps_max = sum > 0 ? res->n / (sum / 1e6)
							 : -1;
	row->mbs = sum > 0 ? logical * res->n / (sum / 1e6) / 1e6 : -1;
	row->flushes = (double)(res->m1.app.flushes - res->m0.app.flushes) /
		       res->n;
	row->wamp = (double)(res->m1.app.bytes - res->m0.app.bytes) /
		    (logical * res->n);
	row->io_wamp = (double)(res->m1.io_wbytes - res->m0.io_wbytes) /
		       (logical * res->n);
	if (res->m0.dev_ok && res->m1.dev_ok) {
		row->dev_flushes = (double)(res->m1.dev_flushes -
					    res->m0.dev_flushes) / res->n;
		row->dev_wamp = (double)(res->m1.dev_sectors -
					 res->m0.dev_sectors) * 512 /
				(logical * res->n);
	}
	row->cpu_us = (res->m1.cpu_s - res->m0.cpu_s) * 1e6 / res->n;
	row->peak_kib = res->peak;
	row->vs_floor = base > 0 ? row->lat_med / base : 1;
}

static double mb_median(const double *v, int a, int b)
{
	double t[64];
	int n = 0;
	for (int i = a; i < b && n < 64; i++)
		t[n++] = v[i];
	return bench_quantile(t, n, 0.5);
}

int bench_mmap(const struct bench_opts *o, struct bench_report *rep,
	       struct bench_alt *const *alts, int nalts)
{
	static const uint64_t sizes[] = { 64ull << 20, 1ull << 30, 4ull << 30 };
	static const int pct[] = { 1, 10, 100 };
	struct mb_alt xs[BENCH_MAXALTS + 3];
	int nx = 0, failed = 0;

	/* msync first: the others' ratio is to it */
	xs[nx++] = (struct mb_alt){ "msync", MB_MSYNC, -1 };
	for (int i = 0; i < nalts; i++)
		if (alts[i]->method >= 0 && alts[i]->usable)
			xs[nx++] = (struct mb_alt){ alts[i]->name, MB_OA,
						    alts[i]->method };
	xs[nx++] = (struct mb_alt){ "snapshot", MB_SNAP, -1 };
	xs[nx++] = (struct mb_alt){ "writeback", MB_WB, -1 };
	if (o->format == BF_TABLE)
		printf("\n== mmap: one commit of 64-byte stores into D random "
		       "4 KiB pages of a mapping (stores + commit timed);\n"
		       "   against msync (MAP_SHARED + msync: unsafe), snapshot "
		       "(msync + the file cloned + fsync, as famus_snap),\n"
		       "   writeback (the whole copy written + fdatasync); x base "
		       "= median / msync's; note: us per dirty page\n");
	unsigned dirty = o->dirty ? o->dirty : ~0u;
	int nsz = o->quick ? 1 : 3;
	for (int zi = 0; zi < nsz; zi++) {
		uint64_t size = sizes[zi];
		if (o->max_size && size > o->max_size)
			break;
		for (int pi = 0; pi < 3; pi++) {
			/* 4 GiB: the 1 % point only (the others write and
			 * copy gigabytes per commit per alternative) */
			if (size > (1ull << 30) && pct[pi] > 1)
				break;
			if (!(dirty & (1u << pi)))
				continue;
			uint64_t np = size / BENCH_PAGE;
			uint64_t d = np * (uint64_t)pct[pi] / 100;
			int n = o->ops > 0 ? o->ops :
				(o->quick ? 5 : (pct[pi] == 100 ? 5 : 20));
			double base = -1;
			for (int k = 0; k < nx; k++) {
				struct mb_res res;
				char why[200] = "";
				const struct mb_alt *x = &xs[k];
				static const char *const mode[] = { "1%", "10%",
								    "100%" };
				struct bench_row *row = mb_row(rep, x->name,
					"dirty_pages", d, size, mode[pi]);
				/* the whole file written per commit: a few */
				int xn = x->kind == MB_WB && size >= (1ull << 30)
					 && n > 3 ? 3 : n;
				int rc = mb_point(x, size, d, xn, &res, why,
						  sizeof(why));
				if (rc) {
					row->status = rc > 0 ? "n/a" : "failed";
					snprintf(row->note, sizeof(row->note),
						 "%s", rc > 0 ? why :
						 strerror(errno));
					failed |= rc < 0;
					free(res.lat);
					bench_print_row_live(rep, row, o->format);
					continue;
				}
				double first = res.lat[0];
				row->txn_bytes = d * MB_STORE;
				mb_fill(row, &res, (double)d * MB_STORE, base);
				if (x->kind == MB_MSYNC)
					base = row->lat_med;
				snprintf(row->note, sizeof(row->note),
					 "%.2f us per dirty page; first commit "
					 "%.0f us", row->lat_med / (double)d,
					 first);
				free(res.lat);
				bench_print_row_live(rep, row, o->format);
			}
		}
	}
	/* the ramp: many 1 % commits, the first and the last compared */
	if (!(dirty & BENCH_DIRTY_RAMP))
		return failed;
	uint64_t rsize = o->quick ? 64ull << 20 : 1ull << 30;
	if (o->max_size && rsize > o->max_size)
		rsize = o->max_size;
	int rn = o->quick ? 100 : 500;
	uint64_t rd = rsize / BENCH_PAGE / 100;
	double rbase = -1;
	for (int k = 0; k < nx; k++) {
		const struct mb_alt *x = &xs[k];
		struct mb_res res;
		char why[200] = "";
		if (x->kind == MB_WB)
			continue;
		struct bench_row *row = mb_row(rep, x->name, "commits",
					       (uint64_t)rn, rsize, "ramp 1%");
		int rc = mb_point(x, rsize, rd, rn, &res, why, sizeof(why));
		if (rc) {
			row->status = rc > 0 ? "n/a" : "failed";
			snprintf(row->note, sizeof(row->note), "%s",
				 rc > 0 ? why : strerror(errno));
			failed |= rc < 0;
			free(res.lat);
			bench_print_row_live(rep, row, o->format);
			continue;
		}
		double a = mb_median(res.lat, 0, 10);
		double b = mb_median(res.lat, res.n - 10, res.n);
		row->txn_bytes = rd * MB_STORE;
		mb_fill(row, &res, (double)rd * MB_STORE, rbase);
		if (x->kind == MB_MSYNC)
			rbase = row->lat_med;
		snprintf(row->note, sizeof(row->note),
			 "commits 1-10: %.0f us, %d-%d: %.0f us (x%.2f)",
			 a, res.n - 9, res.n, b, a > 0 ? b / a : 0);
		free(res.lat);
		bench_print_row_live(rep, row, o->format);
	}
	return failed;
}
