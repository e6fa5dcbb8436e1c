/*
 * oamethods.c - the commit methods against their baselines, side by side.
 *
 *   build/bench/oamethods [--dir D] [--reps N] [--quick] [--only WORKLOAD]
 *
 * Three workloads (issue 4's targets), each variant run in turn within every
 * repetition (so drift hits all of them alike), medians printed with the
 * ratio to the baseline:
 *   large   one 256 MiB transaction (1 MiB writes) over a 256 MiB file,
 *           against pwrite of the same bytes in place + fdatasync;
 *   atomic  one aligned 64 KiB write per commit at random aligned offsets of
 *           a 64 MiB file, against a direct pwritev2(RWF_ATOMIC|RWF_DSYNC);
 *   small   one 4 KiB write per commit (aligned, and at an odd offset),
 *           against pwrite + fdatasync in place;
 *           (atomic and small: every variant on a file of its own with
 *           one handle open, blocks of N commits in turn)
 *   frag    (XFS with exchange) the cost of one 64 KiB commit as the file
 *           fragments (thousands of 4 KiB exchanges), oatomic's exchange of
 *           the written range against the whole-file pattern of xfs_io's
 *           atomic update (clone the file, write, exchange it all).
 * oatomic variants: every method that opens on D (auto, journal, clone,
 * kernel).  Flushes per commit come from the library's seam counters.
 *
 * SPDX-License-Identifier: MIT
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <linux/types.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "oatomic.h"
#include "oatomic-private.h"

#ifndef RWF_ATOMIC
#define RWF_ATOMIC 0x00000040
#endif

#define MiB (1024ull * 1024)
#define MAXV 8
#define MAXREPS 50

static const char *dir = ".";
static int reps = 5;
static uint64_t large_bytes = 256 * MiB;
static int small_n = 500, atomic_n = 200;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what)
{
	fprintf(stderr, "oamethods: %s: %s\n", what, strerror(errno));
	exit(1);
}

static uint64_t rnd(void)
{
	static uint64_t s = 0x9e3779b97f4a7c15ull;
	s ^= s << 13;
	s ^= s >> 7;
	s ^= s << 17;
	return s;
}

static void fill(void *b, size_t n)
{
	uint64_t *p = b;
	for (size_t i = 0; i < n / 8; i++)
		p[i] = rnd();
}

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmpd);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* A variant: baseline (method < 0) or oatomic with a method. */
struct variant {
	const char *name;
	int method;            /* -1 baseline */
	double t[MAXREPS];
	double flushes;        /* per commit */
	int ok;
};

static const struct {
	const char *name;
	int m;
} methods[] = {
	{ "oatomic auto", OA_METHOD_AUTO },
	{ "oatomic journal", OA_METHOD_JOURNAL },
	{ "oatomic clone", OA_METHOD_CLONE },
	{ "oatomic kernel", OA_METHOD_KERNEL },
};

static void make_file(const char *path, uint64_t size)
{
	char *b = malloc(MiB);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (!b || fd < 0)
		die(path);
	for (uint64_t o = 0; o < size; o += MiB) {
		fill(b, MiB);
		if (pwrite(fd, b, MiB, (off_t)o) != (ssize_t)MiB)
			die("pwrite");
	}
	if (fsync(fd) < 0)
		die("fsync");
	close(fd);
	free(b);
}

static oa_file *oa_open_m(const char *path, int m)
{
	struct oa_options o = { .size = sizeof(o), .method = m };
	return oa_open_opts(path, O_RDWR, 0, &o);
}

static int setup(struct variant *v, int *nv, const char *base, bool baseline2,
		 const char *bname, const char *b2name)
{
	int n = 0;
	v[n++] = (struct variant){ .name = bname, .method = -1, .ok = 1 };
	if (baseline2)
		v[n++] = (struct variant){ .name = b2name, .method = -2, .ok = 1 };
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		oa_file *f = oa_open_m(base, methods[i].m);
		if (!f) {
			printf("  %-18s not supported here: %s\n", methods[i].name,
			       strerror(errno));
			continue;
		}
		oa_close(f);
		v[n++] = (struct variant){ .name = methods[i].name,
					   .method = methods[i].m, .ok = 1 };
	}
	*nv = n;
	return 0;
}

static void print(const char *title, struct variant *v, int nv, double unit,
		  const char *uname, int per_commit)
{
	double base = 0;
	printf("%s\n  %-18s %12s %10s %9s\n", title, "variant", uname,
	       "vs base", "flush/c");
	for (int i = 0; i < nv; i++) {
		if (!v[i].ok) {
			printf("  %-18s failed\n", v[i].name);
			continue;
		}
		double m = median(v[i].t, reps) * unit;
		if (i == 0)
			base = m;
		printf("  %-18s %12.2f %9.3fx", v[i].name, m, base > 0 ? m / base : 0);
		if (v[i].method >= 0 && per_commit)
			printf(" %9.3f", v[i].flushes);
		printf("\n");
	}
}

/* ---- large ---- */

static void large(void)
{
	char path[4096];
	struct variant v[MAXV];
	oa_file *f[MAXV] = { NULL };
	double first[MAXV] = { 0 };
	int nv;
	char *b = malloc(MiB);
	snprintf(path, sizeof(path), "%s/large", dir);
	make_file(path, large_bytes);
	fill(b, MiB);
	setup(v, &nv, path, false, "pwrite+fdatasync", NULL);
	/* Each oatomic variant keeps one handle over all its transactions, as
	 * a program that updates the file repeatedly would (and as the
	 * baseline keeps the file's page cache): repetition -1 is the
	 * handle's first transaction, reported apart, the medians are of the
	 * ones after it. */
	for (int r = -1; r < reps; r++)
		for (int i = 0; i < nv; i++) {
			double t0, t;
			if (v[i].method < 0) {
				int fd = open(path, O_WRONLY);
				t0 = now();
				for (uint64_t o = 0; o < large_bytes; o += MiB)
					if (pwrite(fd, b, MiB, (off_t)o) != (ssize_t)MiB)
						die("pwrite");
				if (fdatasync(fd) < 0)
					die("fdatasync");
				t = now() - t0;
				close(fd);
			} else {
				if (!f[i] && !(f[i] = oa_open_m(path, v[i].method)))
					die("oa_open");
				struct oa_stats s0, s1;
				oa__stats_get(&s0);
				t0 = now();
				for (uint64_t o = 0; o < large_bytes; o += MiB)
					if (oa_pwrite(f[i], b, MiB, (off_t)o) !=
					    (ssize_t)MiB)
						die("oa_pwrite");
				if (oa_commit(f[i]) < 0)
					die("oa_commit");
				t = now() - t0;
				oa__stats_get(&s1);
				v[i].flushes = (double)(s1.flushes - s0.flushes);
			}
			if (r < 0)
				first[i] = t;
			else
				v[i].t[r] = t;
		}
	for (int i = 0; i < nv; i++)
		if (f[i])
			oa_close(f[i]);
	/* throughput as MiB/s: report seconds, ratio inverted below */
	printf("large: one %llu MiB transaction in 1 MiB writes, repeated on one "
	       "handle (seconds; throughput ratio = 1 / time ratio; 'first': the "
	       "handle's first transaction)\n",
	       (unsigned long long)(large_bytes / MiB));
	double base = median(v[0].t, reps);
	for (int i = 0; i < nv; i++) {
		double m = median(v[i].t, reps);
		printf("  %-18s %8.3f s %8.1f MiB/s  throughput %.3fx  first %.3f s",
		       v[i].name, m, (double)large_bytes / MiB / m, base / m,
		       first[i]);
		if (v[i].method >= 0)
			printf("  flushes %.0f", v[i].flushes);
		printf("\n");
	}
	unlink(path);
	free(b);
}

/* ---- atomic 64 KiB and small 4 KiB ---- */

/*
 * Every variant has a file of its own (the same size, written and synced)
 * and one handle kept open, so that no variant works on pages or extents
 * another one just changed (a direct RWF_ATOMIC write drops the page cache
 * of its range; XFS remaps the blocks of an emulated one).  Each repetition
 * runs N commits of every variant in turn, the first one rotating, after a
 * syncfs: a block pays for its own writeback (taking turns commit by commit
 * would let one variant's flush drain what another left on the device).
 */
static void commits(const char *title, size_t len, uint64_t fsize, int n,
		    int odd, int direct_base)
{
	char path[MAXV][4096];
	struct variant v[MAXV];
	oa_file *f[MAXV] = { NULL };
	int fd = -1, nv;
	double flushes[MAXV] = { 0 };
	void *b;
	if (posix_memalign(&b, 4096, len) != 0)
		die("memalign");
	fill(b, len);
	snprintf(path[0], sizeof(path[0]), "%s/commits.0", dir);
	make_file(path[0], fsize);
	if (direct_base) {
		/* the baseline must work here, or there is nothing to compare */
		struct iovec iov = { b, len };
		fd = open(path[0], O_RDWR | O_DIRECT);
		if (fd < 0 || pwritev2(fd, &iov, 1, 0, RWF_ATOMIC | RWF_DSYNC) !=
				      (ssize_t)len) {
			printf("%s: not run: RWF_ATOMIC of %zu bytes does not work "
			       "here (%s)\n", title, len, strerror(errno));
			if (fd >= 0)
				close(fd);
			unlink(path[0]);
			free(b);
			return;
		}
	} else {
		fd = open(path[0], O_RDWR);
		if (fd < 0)
			die("open");
	}
	setup(v, &nv, path[0], false,
	      direct_base ? "RWF_ATOMIC direct" : "pwrite+fdatasync", NULL);
	for (int i = 1; i < nv; i++) {
		snprintf(path[i], sizeof(path[i]), "%s/commits.%d", dir, i);
		make_file(path[i], fsize);
		f[i] = oa_open_m(path[i], v[i].method);
		if (!f[i])
			die("oa_open");
	}
	uint64_t slots = (fsize - len) / len;
	for (int r = 0; r < reps; r++)
		for (int j = 0; j < nv; j++) {
			int i = (j + r) % nv;
			struct oa_stats s0, s1;
			double t0;
			/* what the previous block left dirty is not this one's */
			syncfs(fd);
			if (i == 0) {
				t0 = now();
				for (int k = 0; k < n; k++) {
					off_t o = (off_t)((rnd() % slots) * len + (uint64_t)odd);
					if (direct_base) {
						struct iovec iov = { b, len };
						if (pwritev2(fd, &iov, 1, o, RWF_ATOMIC | RWF_DSYNC) != (ssize_t)len)
							die("pwritev2 RWF_ATOMIC");
					} else if (pwrite(fd, b, len, o) != (ssize_t)len ||
						   fdatasync(fd) < 0) {
						die("pwrite+fdatasync");
					}
				}
				v[i].t[r] = (now() - t0) / n;
				continue;
			}
			oa__stats_get(&s0);
			t0 = now();
			for (int k = 0; k < n; k++) {
				off_t o = (off_t)((rnd() % slots) * len + (uint64_t)odd);
				if (oa_pwrite(f[i], b, len, o) != (ssize_t)len ||
				    oa_commit(f[i]) < 0)
					die("oa_pwrite/oa_commit");
			}
			v[i].t[r] = (now() - t0) / n;
			oa__stats_get(&s1);
			flushes[i] += (double)(s1.flushes - s0.flushes);
		}
	for (int i = 1; i < nv; i++) {
		v[i].flushes = flushes[i] / ((double)n * reps);
		oa_close(f[i]);
		unlink(path[i]);
	}
	close(fd);
	print(title, v, nv, 1e6, "us/commit", 1);
	unlink(path[0]);
	free(b);
}

/* ---- fragmentation: exchange of the change vs the whole file ---- */

struct xchg {
	__s32 file1_fd;
	__u32 pad;
	__u64 file1_offset, file2_offset, length, flags;
};
#define XCHG_IOC _IOW('X', 129, struct xchg)
#define XCHG_TO_EOF (1ull << 0)
#define XCHG_DSYNC (1ull << 1)

/* xfs_io's atomic update: a clone of the whole file, the change written
 * into it, the whole of it exchanged back (DSYNC). */
static double whole_file_update(const char *path, const void *b, size_t len,
				off_t off)
{
	double t0 = now();
	int fd = open(path, O_RDWR);
	int tmp = open(dir, O_TMPFILE | O_RDWR, 0600);
	struct stat st;
	if (fd < 0 || tmp < 0 || fstat(fd, &st) < 0)
		die("open");
	if (ioctl(tmp, FICLONE, fd) < 0)
		die("FICLONE");
	if (pwrite(tmp, b, len, off) != (ssize_t)len)
		die("pwrite");
	struct xchg x = { .file1_fd = tmp, .length = (__u64)st.st_size,
			  .flags = XCHG_TO_EOF | XCHG_DSYNC };
	if (ioctl(fd, XCHG_IOC, &x) < 0)
		die("XFS_IOC_EXCHANGE_RANGE");
	close(tmp);
	close(fd);
	return now() - t0;
}

static uint64_t extents(const char *path)
{
	char cmd[4200];
	FILE *p;
	unsigned long long n = 0;
	snprintf(cmd, sizeof(cmd), "filefrag '%s' 2>/dev/null", path);
	p = popen(cmd, "r");
	if (p) {
		char line[4300];
		if (fgets(line, sizeof(line), p)) {
			char *c = strrchr(line, ':');
			if (c)
				n = strtoull(c + 1, NULL, 10);
		}
		pclose(p);
	}
	return n;
}

static void frag(void)
{
	char path[4096];
	const int steps[] = { 0, 2000, 8000 };
	const size_t len = 64 * 1024;
	const uint64_t fsize = 64 * MiB;
	void *b;
	double base_o = 0, base_w = 0;
	int done = 0;
	oa_file *f;

	snprintf(path, sizeof(path), "%s/frag", dir);
	make_file(path, fsize);
	f = oa_open_m(path, OA_METHOD_EXCHANGE);
	if (!f) {
		printf("frag: not run: the exchange method does not open here "
		       "(%s)\n", strerror(errno));
		unlink(path);
		return;
	}
	if (posix_memalign(&b, 4096, len) != 0)
		die("memalign");
	fill(b, len);
	printf("frag: one 64 KiB commit as the file fragments (median of %d, "
	       "ms)\n  %8s %9s %12s %10s %14s %10s\n", 3 * reps, "commits",
	       "extents", "oa exchange", "vs start", "whole-file xchg",
	       "vs start");
	for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
		/* fragment: 4 KiB exchanges at random blocks */
		for (; done < steps[s]; done++) {
			off_t o = (off_t)((rnd() % (fsize / 4096)) * 4096);
			if (oa_pwrite(f, b, 4096, o) != 4096 || oa_commit(f) < 0)
				die("oa_commit");
		}
		double to[MAXREPS * 3], tw[MAXREPS * 3];
		int n = 3 * reps;
		for (int r = 0; r < n; r++) {
			off_t o = (off_t)((rnd() % (fsize / len)) * len);
			double t0 = now();
			if (oa_pwrite(f, b, len, o) != (ssize_t)len ||
			    oa_commit(f) < 0)
				die("oa_commit");
			to[r] = now() - t0;
			tw[r] = whole_file_update(path, b, len, o);
		}
		double mo = median(to, n) * 1e3, mw = median(tw, n) * 1e3;
		if (s == 0) {
			base_o = mo;
			base_w = mw;
		}
		printf("  %8d %9llu %12.3f %9.2fx %14.3f %9.2fx\n", done,
		       (unsigned long long)extents(path), mo, mo / base_o, mw,
		       mw / base_w);
	}
	oa_close(f);
	unlink(path);
	free(b);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "reps", required_argument, NULL, 'r' },
		{ "quick", no_argument, NULL, 'q' },
		{ "only", required_argument, NULL, 'o' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	const char *only = NULL;
	while ((c = getopt_long(argc, argv, "d:r:qo:", opts, NULL)) != -1) {
		switch (c) {
		case 'd': dir = optarg; break;
		case 'o': only = optarg; break;
		case 'r': reps = atoi(optarg); break;
		case 'q':
			reps = 3;
			large_bytes = 32 * MiB;
			small_n = 50;
			atomic_n = 30;
			break;
		default:
			fprintf(stderr, "usage: oamethods [--dir D] [--reps N] [--quick] "
				"[--only large|atomic|small|frag]\n");
			return 2;
		}
	}
	if (reps < 1 || reps > MAXREPS) {
		fprintf(stderr, "oamethods: --reps 1..%d\n", MAXREPS);
		return 2;
	}
	printf("oamethods: dir %s, %d repetitions, medians\n", dir, reps);
	{
		/* As oabench: freed page cache comes back slow from a host
		 * that took it (virtio-balloon free page reporting). */
		FILE *pr = fopen("/sys/module/page_reporting/parameters/"
				 "page_reporting_order", "r");
		int order;
		if (pr && fscanf(pr, "%d", &order) == 1)
			printf("memory: free page reporting to the host, order "
			       "%d%s\n", order,
			       order > 10 ? " (off in effect)" : "");
		if (pr)
			fclose(pr);
	}
#define RUN(name) (!only || !strcmp(only, name))
	if (RUN("large"))
		large();
	if (RUN("atomic"))
		commits("atomic: one aligned 64 KiB write per commit", 64 * 1024,
		64 * MiB, atomic_n, 0, 1);
	if (RUN("small")) {
		commits("small: one aligned 4 KiB write per commit", 4096,
			64 * MiB, small_n, 0, 0);
		commits("small: one 4 KiB write at an odd offset per commit",
			4096, 64 * MiB, small_n, 100, 0);
	}
	if (RUN("frag"))
		frag();
	return 0;
}
