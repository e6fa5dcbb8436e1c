/*
 * oabench - oatomic against the usual ways, side by side.
 *
 *   build/bench/oabench [--dir D] [--quick] [--reps N] [--format table|csv]
 *                       [--only ABC] [--keep]
 *
 * Each workload runs the oatomic variant and its baseline in the same run,
 * alternating (oatomic, baseline, oatomic, baseline, ...) so that drift of
 * the machine (page cache, writeback, a noisy neighbour on the virtual disk)
 * falls on both alike.  Every figure is the median over the repetitions,
 * with the min-max range; the ratio column is oatomic/baseline, computed per
 * pair of neighbouring runs and then summarised the same way.
 *
 *   A  small commit: one 4 KiB write at a random aligned offset per commit,
 *      on a preexisting, fully written and synced file;
 *      oa_pwrite + oa_commit   vs   pwrite + fdatasync in place.
 *   B  one 4 KiB change to a big file;
 *      oa_pwrite + oa_commit   vs   copy the whole file with the change into
 *      a temporary, fsync it, rename it over, fsync the directory.
 *   C  large transaction: the file's size in 1 MiB writes into an empty file;
 *      oa_pwrite..., oa_commit, oa_close   vs   pwrite..., fdatasync, close.
 *
 * For oatomic, flushes and bytes come from the library's own I/O seam
 * (oa__stats_get, reset before each measured phase); a measured phase ends
 * with oa_close so that the checkpoint, which the library does when its
 * journal fills and at the last close, is paid inside it.  For the
 * baselines this program counts its own fsync/fdatasync calls and bytes.
 *
 * Nothing here asserts a timing: the targets are printed as met / not met
 * and the exit status is 0 whatever they say.  The exit status is non-zero
 * only when an I/O call fails or a file does not hold what was committed
 * (every oatomic run is read back with plain pread after its close).
 *
 * SPDX-License-Identifier: MIT
 */
#include <fcntl.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysinfo.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>

#include "oatomic.h"
#include "oatomic-private.h"

#define KiB (1024ULL)
#define MiB (1024ULL * 1024ULL)
#define BLK (4 * KiB)          /* the small update */
#define CHUNK (1 * MiB)        /* the write size of workload C and copies */
#define MAXREPS 64
#define MAXROWS 12
#define MAXTARGETS 3

/* ------------------------------------------------------------------ */
/* Configuration                                                       */

struct config {
	const char *dir;
	int quick;
	int reps;
	int csv;
	int keep;
	const char *only;
	/* A */
	uint64_t a_file;
	int a_commits;
	/* B */
	uint64_t b_file;
	int b_reps;
	int b_cycles;
	/* C */
	uint64_t c_bytes;
	int c_reps;
};

static struct config cfg;
static char g_workdir[PATH_MAX];
static int g_dirfd = -1;
static int g_cleanup_armed;

/* ------------------------------------------------------------------ */
/* Small helpers                                                       */

static void cleanup(void);

static void __attribute__((format(printf, 1, 2), noreturn))
die(const char *fmt, ...)
{
	int e = errno;
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "oabench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (e)
		fprintf(stderr, ": %s", strerror(e));
	fputc('\n', stderr);
	cleanup();
	exit(1);
}

static void __attribute__((format(printf, 1, 2)))
progress(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "oabench: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* CPU time of the process (user + system), ns: what the calls cost besides
 * waiting for the device. */
static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void *xalloc(size_t n)
{
	void *p = NULL;

	if (posix_memalign(&p, 4096, n ? n : 1) != 0)
		die("out of memory (%zu bytes)", n);
	return p;
}

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void fill_random(void *buf, size_t n, uint64_t seed)
{
	uint64_t *p = buf;
	size_t i;

	for (i = 0; i < n / 8; i++)
		p[i] = splitmix64(&seed);
}

/* The first 32 bytes of a block name what it is, so that a block landing in
 * the wrong place, or an old one left behind, is caught by the read-back. */
static void stamp(void *buf, uint64_t tag, uint64_t rep, uint64_t seq,
		  uint64_t off)
{
	uint64_t *p = buf;

	p[0] = tag;
	p[1] = rep;
	p[2] = seq;
	p[3] = off;
}

/* Plain whole-buffer I/O (not counted: setup and read-back). */
static void full_pwrite(int fd, const void *buf, size_t n, off_t off,
			const char *what)
{
	const char *p = buf;

	while (n) {
		ssize_t w = pwrite(fd, p, n, off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			die("pwrite %s", what);
		p += w;
		n -= (size_t)w;
		off += w;
	}
}

static void full_pread(int fd, void *buf, size_t n, off_t off,
		       const char *what)
{
	char *p = buf;

	while (n) {
		ssize_t r = pread(fd, p, n, off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die("pread %s", what);
		if (r == 0) {
			errno = 0;
			die("%s: unexpected end of file at %lld", what,
			    (long long)off);
		}
		p += r;
		n -= (size_t)r;
		off += r;
	}
}

/* Baselines: the flushes and bytes they make, counted here. */
struct bcount {
	uint64_t flushes;
	uint64_t bytes_written;
	uint64_t writes;
};

static struct bcount bc;

static void b_pwrite(int fd, const void *buf, size_t n, off_t off)
{
	const char *p = buf;

	while (n) {
		ssize_t w = pwrite(fd, p, n, off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			die("baseline pwrite");
		bc.writes++;
		bc.bytes_written += (uint64_t)w;
		p += w;
		n -= (size_t)w;
		off += w;
	}
}

static void b_fdatasync(int fd)
{
	bc.flushes++;
	if (fdatasync(fd) != 0)
		die("baseline fdatasync");
}

static void b_fsync(int fd)
{
	bc.flushes++;
	if (fsync(fd) != 0)
		die("baseline fsync");
}

static void xsyncfs(void)
{
	if (syncfs(g_dirfd) != 0)
		die("syncfs %s", g_workdir);
}

static void xfsync_dir(void)
{
	if (fsync(g_dirfd) != 0)
		die("fsync %s", g_workdir);
}

/* Remove NAME and the control and journal files oatomic keeps beside it
 * (.NAME.oa, .NAME.oaj-K). */
static void remove_with_companions(const char *name)
{
	char prefix[NAME_MAX + 8];
	size_t plen;
	DIR *d;
	struct dirent *de;
	int fd;

	if (unlinkat(g_dirfd, name, 0) != 0 && errno != ENOENT)
		die("unlink %s/%s", g_workdir, name);
	snprintf(prefix, sizeof(prefix), ".%s.oa", name);
	plen = strlen(prefix);
	fd = openat(g_dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || !(d = fdopendir(fd)))
		die("opendir %s", g_workdir);
	while ((de = readdir(d)))
		if (strncmp(de->d_name, prefix, plen) == 0 &&
		    unlinkat(g_dirfd, de->d_name, 0) != 0 && errno != ENOENT)
			die("unlink %s/%s", g_workdir, de->d_name);
	closedir(d);
}

static void cleanup(void)
{
	DIR *d;
	struct dirent *de;
	int fd;

	if (!g_cleanup_armed)
		return;
	g_cleanup_armed = 0;
	if (cfg.keep) {
		fprintf(stderr, "oabench: files kept in %s\n", g_workdir);
		return;
	}
	fd = openat(g_dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0 && (d = fdopendir(fd))) {
		while ((de = readdir(d)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
				unlinkat(g_dirfd, de->d_name, 0);
		closedir(d);
	}
	if (rmdir(g_workdir) != 0)
		fprintf(stderr, "oabench: cannot remove %s: %s\n", g_workdir,
			strerror(errno));
}

/* Create NAME of SIZE bytes of pseudo-random data, durable (file and
 * directory entry).  If MIRROR is given it receives the contents. */
static void make_file(const char *name, uint64_t size, uint64_t seed,
		      unsigned char *mirror)
{
	unsigned char *buf = xalloc(CHUNK);
	uint64_t off;
	int fd;

	fd = openat(g_dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
		    0644);
	if (fd < 0)
		die("create %s/%s", g_workdir, name);
	for (off = 0; off < size; off += CHUNK) {
		size_t n = size - off < CHUNK ? (size_t)(size - off) : CHUNK;

		fill_random(buf, n, seed ^ (off * 0x100000001b3ULL));
		full_pwrite(fd, buf, n, (off_t)off, name);
		if (mirror)
			memcpy(mirror + off, buf, n);
	}
	if (fsync(fd) != 0)
		die("fsync %s", name);
	close(fd);
	xfsync_dir();
	free(buf);
}

/* Compare the file NAME with MIRROR (SIZE bytes) using plain reads. */
static void verify_file(const char *name, const unsigned char *mirror,
			uint64_t size)
{
	unsigned char *buf = xalloc(CHUNK);
	struct stat st;
	uint64_t off;
	int fd;

	fd = openat(g_dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0)
		die("open %s/%s for read-back", g_workdir, name);
	if ((uint64_t)st.st_size != size) {
		errno = 0;
		die("read-back %s: size %lld, expected %llu", name,
		    (long long)st.st_size, (unsigned long long)size);
	}
	for (off = 0; off < size; off += CHUNK) {
		size_t n = size - off < CHUNK ? (size_t)(size - off) : CHUNK;

		full_pread(fd, buf, n, (off_t)off, name);
		if (memcmp(buf, mirror + off, n) != 0) {
			errno = 0;
			die("read-back %s: the file does not hold what was "
			    "committed (in the MiB at %llu)", name,
			    (unsigned long long)off);
		}
	}
	close(fd);
	free(buf);
}

static void verify_block(const char *name, const void *want, off_t off)
{
	unsigned char buf[BLK];
	int fd = openat(g_dirfd, name, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		die("open %s/%s for read-back", g_workdir, name);
	full_pread(fd, buf, BLK, off, name);
	close(fd);
	if (memcmp(buf, want, BLK) != 0) {
		errno = 0;
		die("read-back %s: the block at %lld is not the committed one",
		    name, (long long)off);
	}
}

/* ------------------------------------------------------------------ */
/* oatomic calls that must succeed                                     */

static oa_file *xoa_open(const char *name, int flags)
{
	char path[PATH_MAX];
	oa_file *f;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", g_workdir, name) >=
	    sizeof(path)) {
		errno = ENAMETOOLONG;
		die("%s/%s", g_workdir, name);
	}
	f = oa_open(path, flags, 0644);
	if (!f)
		die("oa_open %s", path);
	return f;
}

static void xoa_pwrite(oa_file *f, const void *buf, size_t n, off_t off)
{
	ssize_t w = oa_pwrite(f, buf, n, off);

	if (w < 0)
		die("oa_pwrite %zu bytes at %lld", n, (long long)off);
	if ((size_t)w != n) {
		errno = 0;
		die("oa_pwrite: short write (%zd of %zu)", w, n);
	}
}

static void xoa_commit(oa_file *f)
{
	if (oa_commit(f) != 0)
		die("oa_commit");
}

static void xoa_close(oa_file *f)
{
	if (oa_close(f) != 0)
		die("oa_close");
}

/* ------------------------------------------------------------------ */
/* Results                                                             */

struct series {
	double v[MAXREPS];
	int n;
};

struct row {
	const char *metric;
	const char *key;      /* for csv */
	const char *unit;
	int prec;
	int ratio;            /* print oatomic/baseline */
	struct series oa, base;
};

struct target {
	int row;
	int le;               /* ratio <= thr (else >=) */
	double thr;
	const char *text;
};

struct workload {
	char id;
	char title[160];
	char detail[320];
	const char *oa_name, *base_name;
	struct row rows[MAXROWS];
	int nrows;
	struct target targets[MAXTARGETS];
	int ntargets;
};

static void push(struct series *s, double v)
{
	if (s->n < MAXREPS)
		s->v[s->n++] = v;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median_of(const double *v, int n)
{
	double *t;
	double m;

	if (n <= 0)
		return NAN;
	t = malloc(sizeof(*t) * (size_t)n);
	if (!t)
		die("out of memory");
	memcpy(t, v, sizeof(*t) * (size_t)n);
	qsort(t, (size_t)n, sizeof(*t), cmp_double);
	m = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
	free(t);
	return m;
}

/* P-th percentile (nearest rank) of V, sorting V in place. */
static double percentile_sort(double *v, int n, double p)
{
	int k;

	if (n <= 0)
		return NAN;
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	k = (int)ceil(p / 100.0 * n) - 1;
	if (k < 0)
		k = 0;
	if (k >= n)
		k = n - 1;
	return v[k];
}

struct summary {
	double med, min, max;
	int n;
};

static struct summary summarise(const double *v, int n)
{
	struct summary s = { NAN, NAN, NAN, n };
	int i;

	if (n <= 0)
		return s;
	s.med = median_of(v, n);
	s.min = s.max = v[0];
	for (i = 1; i < n; i++) {
		if (v[i] < s.min)
			s.min = v[i];
		if (v[i] > s.max)
			s.max = v[i];
	}
	return s;
}

/* Ratios oatomic/baseline of the runs paired by repetition. */
static int ratios(const struct row *r, double *out)
{
	int n = r->oa.n < r->base.n ? r->oa.n : r->base.n;
	int i, k = 0;

	if (!r->ratio)
		return 0;
	for (i = 0; i < n; i++)
		if (r->base.v[i] != 0)
			out[k++] = r->oa.v[i] / r->base.v[i];
	return k;
}

static struct row *add_row(struct workload *w, const char *metric,
			   const char *key, const char *unit, int prec,
			   int ratio)
{
	struct row *r;

	if (w->nrows >= MAXROWS) {
		errno = 0;
		die("internal: too many rows");
	}
	r = &w->rows[w->nrows++];
	memset(r, 0, sizeof(*r));
	r->metric = metric;
	r->key = key;
	r->unit = unit;
	r->prec = prec;
	r->ratio = ratio;
	return r;
}

static void add_target(struct workload *w, const struct row *row, int le,
		       double thr, const char *text)
{
	struct target *t = &w->targets[w->ntargets++];

	t->row = (int)(row - w->rows);
	t->le = le;
	t->thr = thr;
	t->text = text;
}

static void cell(char *buf, size_t sz, const struct series *s, int prec)
{
	struct summary m = summarise(s->v, s->n);

	if (s->n == 0)
		snprintf(buf, sz, "-");
	else if (s->n == 1 || m.min == m.max)
		snprintf(buf, sz, "%.*f", prec, m.med);
	else
		snprintf(buf, sz, "%.*f [%.*f-%.*f]", prec, m.med, prec, m.min,
			 prec, m.max);
}

static int ratio_prec(double v)
{
	return v < 0.01 ? 5 : v < 0.1 ? 4 : 3;
}

static void print_table(const struct workload *w)
{
	char a[64], b[64], c[64];
	double rv[MAXREPS];
	int i;

	printf("\n%c. %s\n", w->id, w->title);
	printf("   %s\n\n", w->detail);
	printf("   %-38s %-28s %-28s %s\n", "metric", w->oa_name, w->base_name,
	       "ratio oatomic/baseline");
	for (i = 0; i < w->nrows; i++) {
		const struct row *r = &w->rows[i];
		char name[80];
		int k = ratios(r, rv);

		snprintf(name, sizeof(name), "%s%s%s%s", r->metric,
			 *r->unit ? " (" : "", r->unit, *r->unit ? ")" : "");
		cell(a, sizeof(a), &r->oa, r->prec);
		cell(b, sizeof(b), &r->base, r->prec);
		if (k) {
			struct series s;
			struct summary m;

			memcpy(s.v, rv, sizeof(double) * (size_t)k);
			s.n = k;
			m = summarise(rv, k);
			cell(c, sizeof(c), &s, ratio_prec(m.med));
		} else {
			snprintf(c, sizeof(c), "%s", "");
		}
		printf("   %-38s %-28s %-28s %s\n", name, a, b, c);
	}
	for (i = 0; i < w->ntargets; i++) {
		const struct target *t = &w->targets[i];
		int k = ratios(&w->rows[t->row], rv);
		struct summary m = summarise(rv, k);
		int met = t->le ? m.med <= t->thr : m.med >= t->thr;

		printf("   target: %s: ratio %.*f -> %s", t->text,
		       ratio_prec(m.med), m.med, k ? (met ? "MET" : "NOT MET")
						   : "no data");
		if (t->le && m.med > 0 && m.med < 0.5)
			printf(" (oatomic %.0fx faster)", 1 / m.med);
		printf("\n");
	}
	fflush(stdout);
}

static void csv_series(const struct workload *w, const struct row *r,
		       const char *which, const double *v, int n,
		       const char *unit)
{
	struct summary m = summarise(v, n);

	if (n == 0)
		return;
	printf("%c,%s,%s,%s,%.6g,%.6g,%.6g,%d\n", w->id, r->key, unit, which,
	       m.med, m.min, m.max, n);
}

static void print_csv(const struct workload *w)
{
	double rv[MAXREPS];
	int i;

	for (i = 0; i < w->nrows; i++) {
		const struct row *r = &w->rows[i];
		int k = ratios(r, rv);

		csv_series(w, r, "oatomic", r->oa.v, r->oa.n, r->unit);
		csv_series(w, r, "baseline", r->base.v, r->base.n, r->unit);
		csv_series(w, r, "ratio", rv, k, "oatomic/baseline");
	}
	for (i = 0; i < w->ntargets; i++) {
		const struct target *t = &w->targets[i];
		int k = ratios(&w->rows[t->row], rv);
		struct summary m = summarise(rv, k);
		int met = t->le ? m.med <= t->thr : m.med >= t->thr;

		printf("# target %c: %s: ratio %.6g: %s\n", w->id, t->text,
		       m.med, k ? (met ? "met" : "not met") : "no data");
	}
	fflush(stdout);
}

static void report(const struct workload *w)
{
	if (cfg.csv)
		print_csv(w);
	else
		print_table(w);
}

/* ------------------------------------------------------------------ */
/* The machine                                                         */

/* Header lines: comments in csv. */
static void __attribute__((format(printf, 1, 2)))
hprintf(const char *fmt, ...)
{
	va_list ap;

	if (cfg.csv)
		fputs("# ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
}

static const char *fs_name(unsigned long magic)
{
	static const struct { unsigned long m; const char *n; } t[] = {
		{ 0xEF53, "ext2/3/4" }, { 0x58465342, "xfs" },
		{ 0x9123683E, "btrfs" }, { 0x01021994, "tmpfs" },
		{ 0x794c7630, "overlayfs" }, { 0xF2F52010, "f2fs" },
		{ 0x6969, "nfs" }, { 0x2fc12fc1, "zfs" },
		{ 0x65735546, "fuse" }, { 0xca451a4e, "bcachefs" },
		{ 0x4d44, "vfat" }, { 0x5346544e, "ntfs" },
	};
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (t[i].m == magic)
			return t[i].n;
	return "unknown";
}

static void unescape_octal(char *s)
{
	char *d = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '7' && s[2] &&
		    s[3]) {
			*d++ = (char)(((s[1] - '0') << 6) | ((s[2] - '0') << 3) |
				      (s[3] - '0'));
			s += 4;
		} else {
			*d++ = *s++;
		}
	}
	*d = 0;
}

struct mountdesc {
	char mnt[PATH_MAX];
	char fstype[64];
	char source[PATH_MAX];
	char opts[512];
	unsigned maj, min;
};

/* The mount holding PATH: the longest mount point that prefixes its real
 * path, preferring mounts whose device is the file's st_dev. */
static int find_mount(const char *path, struct mountdesc *out)
{
	char real[PATH_MAX], line[8192];
	struct stat st;
	size_t best = 0;
	int best_devmatch = -1;
	FILE *f;

	if (!realpath(path, real) || stat(real, &st) != 0)
		return -1;
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *tok[64], *save = NULL, *p;
		int n = 0, sep = -1, devmatch;
		unsigned ma, mi;
		size_t len;

		for (p = strtok_r(line, " \n", &save); p && n < 64;
		     p = strtok_r(NULL, " \n", &save))
			tok[n++] = p;
		for (int i = 6; i < n; i++)
			if (strcmp(tok[i], "-") == 0) {
				sep = i;
				break;
			}
		if (n < 6 || sep < 0 || sep + 2 >= n ||
		    sscanf(tok[2], "%u:%u", &ma, &mi) != 2)
			continue;
		unescape_octal(tok[4]);
		len = strlen(tok[4]);
		if (!(strcmp(tok[4], "/") == 0 ||
		      (strncmp(real, tok[4], len) == 0 &&
		       (real[len] == '/' || real[len] == 0))))
			continue;
		devmatch = ma == major(st.st_dev) && mi == minor(st.st_dev);
		if (devmatch < best_devmatch ||
		    (devmatch == best_devmatch && len < best))
			continue;
		best_devmatch = devmatch;
		best = len;
		snprintf(out->mnt, sizeof(out->mnt), "%s", tok[4]);
		snprintf(out->fstype, sizeof(out->fstype), "%s", tok[sep + 1]);
		snprintf(out->source, sizeof(out->source), "%s", tok[sep + 2]);
		snprintf(out->opts, sizeof(out->opts), "%s", tok[5]);
		out->maj = ma;
		out->min = mi;
	}
	fclose(f);
	return best_devmatch < 0 ? -1 : 0;
}

static int read_line(const char *path, char *buf, size_t sz)
{
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		return -1;
	if (!fgets(buf, (int)sz, f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	n = strlen(buf);
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = 0;
	return 0;
}

static void device_cache(unsigned maj, unsigned min, char *buf, size_t sz)
{
	char p[128];

	snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/queue/write_cache", maj,
		 min);
	if (read_line(p, buf, sz) == 0)
		return;
	snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/../queue/write_cache",
		 maj, min);
	if (read_line(p, buf, sz) != 0)
		snprintf(buf, sz, "?");
}

static void describe_fs(const char *label, const char *path, int depth)
{
	struct statfs sf;
	struct mountdesc md;
	char cache[64];

	memset(&md, 0, sizeof(md));
	if (statfs(path, &sf) != 0) {
		hprintf("%-10s %s: statfs: %s\n", label, path, strerror(errno));
		return;
	}
	if (find_mount(path, &md) != 0) {
		hprintf("%-10s %s: %s (statfs magic 0x%lx), mount not found\n",
		       label, path, fs_name((unsigned long)sf.f_type),
		       (unsigned long)sf.f_type);
		return;
	}
	device_cache(md.maj, md.min, cache, sizeof(cache));
	hprintf("%-10s %s: %s (statfs magic 0x%lx, block %ld) mounted at %s "
	       "(%s)\n", label, path, md.fstype, (unsigned long)sf.f_type,
	       (long)sf.f_bsize, md.mnt, md.opts);
	hprintf("%-10s device %s (%u:%u), write cache: %s\n", "", md.source,
	       md.maj, md.min, cache);
	if (strncmp(md.source, "/dev/loop", 9) == 0 && depth < 2) {
		char p[128], back[PATH_MAX], dio[16];
		const char *base = md.source + 5;

		snprintf(p, sizeof(p), "/sys/block/%.32s/loop/backing_file",
			 base);
		if (read_line(p, back, sizeof(back)) == 0) {
			snprintf(p, sizeof(p), "/sys/block/%.32s/loop/dio",
				 base);
			if (read_line(p, dio, sizeof(dio)) != 0)
				snprintf(dio, sizeof(dio), "?");
			hprintf("%-10s loop device, backing file %s (direct I/O %s)"
			       "\n", "", back, dio);
			describe_fs("  backing", back, depth + 1);
		}
	}
}

/* The load average: other work on the machine skews every figure, so the
 * report says how busy it was at the start and at the end. */
static void print_load(const char *when)
{
	char l[128];

	if (read_line("/proc/loadavg", l, sizeof(l)) != 0)
		snprintf(l, sizeof(l), "?");
	hprintf("%-10s %s (1, 5, 15 min, runnable/total, last pid) %s\n",
		"load:", l, when);
	fflush(stdout);
}

static const char *method_name(int m)
{
	switch (m) {
	case OA_METHOD_AUTO:
		return "auto";
	case OA_METHOD_JOURNAL:
		return "journal";
	default:
		return "other";
	}
}

static void describe_machine(void)
{
	struct utsname u;
	struct sysinfo si;
	char cpu[256] = "?", line[512];
	FILE *f;
	struct oa_ioinfo info;
	oa_file *h;

	uname(&u);
	sysinfo(&si);
	f = fopen("/proc/cpuinfo", "re");
	if (f) {
		while (fgets(line, sizeof(line), f))
			if (strncmp(line, "model name", 10) == 0) {
				char *c = strchr(line, ':');

				if (c) {
					snprintf(cpu, sizeof(cpu), "%s", c + 2);
					cpu[strcspn(cpu, "\n")] = 0;
				}
				break;
			}
		fclose(f);
	}
	hprintf("oabench: oatomic %d.%d.%d against baselines, side by side; "
	       "%s mode, %d reps\n", OATOMIC_VERSION_MAJOR,
	       OATOMIC_VERSION_MINOR, OATOMIC_VERSION_PATCH,
	       cfg.quick ? "quick" : "full", cfg.reps);
	hprintf("%-10s %s %s %s, %ld CPUs online (%s), %.1f GiB RAM\n",
	       "machine:", u.sysname, u.release, u.machine,
	       sysconf(_SC_NPROCESSORS_ONLN), cpu,
	       (double)si.totalram * si.mem_unit / (double)(1ULL << 30));
	/* A guest that reports its free memory to the host (virtio-balloon
	 * free page reporting) gets it back zeroed and slow: page cache freed
	 * and allocated again a few seconds later costs host faults.  Seen
	 * here to halve a run at random, so the header says whether it is on. */
	f = fopen("/sys/module/page_reporting/parameters/page_reporting_order",
		  "r");
	if (f) {
		int order = -1;
		if (fscanf(f, "%d", &order) == 1)
			hprintf("%-10s free page reporting to the host, blocks "
				"of order %d (%d KiB)%s\n", "memory:", order,
				order >= 0 && order < 20 ? 4 << order : 0,
				order > 10 ? ": off in effect" : "");
		fclose(f);
	}
	describe_fs("dir:", g_workdir, 0);
	print_load("at the start");

	/* What the library makes of this file system. */
	h = xoa_open("probe", O_RDWR | O_CREAT);
	memset(&info, 0, sizeof(info));
	info.size = sizeof(info);
	if (oa_ioinfo(h, &info) != 0)
		die("oa_ioinfo");
	xoa_close(h);
	remove_with_companions("probe");
	hprintf("%-10s method %s (%d), fs %s, block %u, dio align %u/%u, "
	       "atomic write unit %u-%u, rwf_atomic %d, reflink %d, "
	       "exchange %d\n", "library:", method_name(info.method),
	       info.method, info.fs_name, info.block_size, info.dio_mem_align,
	       info.dio_offset_align, info.atomic_write_unit_min,
	       info.atomic_write_unit_max, info.rwf_atomic, info.reflink,
	       info.exchange);
	hprintf("%-10s median [min-max] over the repetitions; the ratio "
		"is oatomic/baseline, per pair of neighbouring runs\n",
		"figures:");
	if (cfg.csv)
		printf("workload,metric,unit,series,median,min,max,n\n");
	fflush(stdout);
}

/* ------------------------------------------------------------------ */
/* A. small commits                                                    */

#define TAG_A_OA   0x414f41ULL
#define TAG_A_BASE 0x41424153ULL

struct a_result {
	double p50, p99, mean_commits, mean_incl_close; /* us */
	double close_ms, cpu_us;
	double flushes_commits, flushes_all, bytes_ratio, writes_per, reads_ratio;
};

/* N commits on the oatomic file; MIRROR follows the file's contents. */
static void a_run_oa(int rep, int n, unsigned char *mirror, double *lat,
		     struct a_result *res)
{
	uint64_t nblocks = cfg.a_file / BLK, seed = 0xA11CEULL + (uint64_t)rep;
	unsigned char *blk = xalloc(BLK);
	struct oa_stats s1, s2;
	uint64_t t0, t1, c0, total = 0;
	oa_file *f;
	int i;

	fill_random(blk, BLK, 0xB10CULL + (uint64_t)rep);
	xsyncfs();
	f = xoa_open("a-oa.dat", O_RDWR);
	oa__stats_reset();
	c0 = cpu_ns();
	for (i = 0; i < n; i++) {
		off_t off = (off_t)((splitmix64(&seed) % nblocks) * BLK);

		stamp(blk, TAG_A_OA, (uint64_t)rep, (uint64_t)i, (uint64_t)off);
		t0 = now_ns();
		xoa_pwrite(f, blk, BLK, off);
		xoa_commit(f);
		t1 = now_ns();
		lat[i] = (double)(t1 - t0) / 1e3;
		total += t1 - t0;
		memcpy(mirror + off, blk, BLK);
	}
	oa__stats_get(&s1);
	res->mean_commits = (double)total / 1e3 / n;
	t0 = now_ns();
	xoa_close(f);
	t1 = now_ns();
	res->cpu_us = (double)(cpu_ns() - c0) / 1e3 / n;
	oa__stats_get(&s2);
	total += t1 - t0;
	free(blk);

	res->close_ms = (double)(t1 - t0) / 1e6;
	res->mean_incl_close = (double)total / 1e3 / n;
	res->flushes_commits = (double)s1.flushes / n;
	res->flushes_all = (double)s2.flushes / n;
	res->bytes_ratio = (double)s2.bytes_written / ((double)n * BLK);
	res->writes_per = (double)s2.writes / n;
	res->reads_ratio = (double)s2.bytes_read / ((double)n * BLK);
	res->p50 = percentile_sort(lat, n, 50);
	res->p99 = percentile_sort(lat, n, 99);
}

static void a_run_base(int rep, int n, double *lat, struct a_result *res)
{
	uint64_t nblocks = cfg.a_file / BLK, seed = 0xA11CEULL + (uint64_t)rep;
	unsigned char *blk = xalloc(BLK);
	uint64_t t0, t1, c0, total = 0;
	struct bcount c1;
	int fd, i;

	fill_random(blk, BLK, 0xB10CULL + (uint64_t)rep);
	xsyncfs();
	fd = openat(g_dirfd, "a-base.dat", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		die("open a-base.dat");
	memset(&bc, 0, sizeof(bc));
	c0 = cpu_ns();
	for (i = 0; i < n; i++) {
		off_t off = (off_t)((splitmix64(&seed) % nblocks) * BLK);

		stamp(blk, TAG_A_BASE, (uint64_t)rep, (uint64_t)i,
		      (uint64_t)off);
		t0 = now_ns();
		b_pwrite(fd, blk, BLK, off);
		b_fdatasync(fd);
		t1 = now_ns();
		lat[i] = (double)(t1 - t0) / 1e3;
		total += t1 - t0;
	}
	c1 = bc;
	res->mean_commits = (double)total / 1e3 / n;
	t0 = now_ns();
	close(fd);
	t1 = now_ns();
	res->cpu_us = (double)(cpu_ns() - c0) / 1e3 / n;
	total += t1 - t0;
	free(blk);

	res->close_ms = (double)(t1 - t0) / 1e6;
	res->mean_incl_close = (double)total / 1e3 / n;
	res->flushes_commits = (double)c1.flushes / n;
	res->flushes_all = (double)bc.flushes / n;
	res->bytes_ratio = (double)bc.bytes_written / ((double)n * BLK);
	res->writes_per = (double)bc.writes / n;
	res->reads_ratio = 0;
	res->p50 = percentile_sort(lat, n, 50);
	res->p99 = percentile_sort(lat, n, 99);
}

static void workload_a(void)
{
	struct workload w;
	struct a_result ro, rb;
	unsigned char *mirror = xalloc(cfg.a_file);
	double *lat = xalloc(sizeof(double) * (size_t)cfg.a_commits);
	struct row *r[12];
	int rep;

	memset(&w, 0, sizeof(w));
	w.id = 'A';
	snprintf(w.title, sizeof(w.title),
		 "small commit: one 4 KiB write at a random aligned offset "
		 "per commit");
	snprintf(w.detail, sizeof(w.detail),
		 "%llu MiB preexisting file (written and synced), %d commits "
		 "per run, %d runs of each, alternating; oatomic runs end "
		 "with oa_close (its checkpoint is counted)",
		 (unsigned long long)(cfg.a_file / MiB), cfg.a_commits,
		 cfg.reps);
	w.oa_name = "oatomic";
	w.base_name = "pwrite+fdatasync";
	r[0] = add_row(&w, "time/commit, median", "us_per_commit_p50", "us",
		       1, 1);
	r[1] = add_row(&w, "time/commit, p99", "us_per_commit_p99", "us", 1,
		       1);
	r[9] = add_row(&w, "time/commit, mean, commits only",
		       "us_per_commit_mean", "us", 1, 1);
	r[2] = add_row(&w, "time/commit, mean incl. close",
		       "us_per_commit_mean_incl_close", "us", 1, 1);
	r[3] = add_row(&w, "close", "close_ms", "ms", 2, 0);
	r[10] = add_row(&w, "CPU time/commit, user+sys", "cpu_us_per_commit",
			"us", 1, 1);
	r[4] = add_row(&w, "flushes/commit, commits only",
		       "flushes_per_commit", "", 3, 0);
	r[5] = add_row(&w, "flushes/commit, incl. close",
		       "flushes_per_commit_incl_close", "", 3, 0);
	r[6] = add_row(&w, "bytes written/byte committed",
		       "bytes_written_per_byte", "", 3, 0);
	r[7] = add_row(&w, "write calls/commit", "writes_per_commit", "", 3,
		       0);
	r[8] = add_row(&w, "bytes read/byte committed", "bytes_read_per_byte",
		       "", 3, 0);
	add_target(&w, r[0], 1, 1.2, "A median time/commit <= 1.2x baseline");
	add_target(&w, r[2], 1, 1.2,
		   "A mean time/commit incl. checkpoint+close <= 1.2x baseline");

	progress("A: creating two %llu MiB files",
		 (unsigned long long)(cfg.a_file / MiB));
	make_file("a-oa.dat", cfg.a_file, 0xAAAA, mirror);
	make_file("a-base.dat", cfg.a_file, 0xAAAA, NULL);

	/* Warm-up, not measured: creates the control and journal files. */
	progress("A: warm-up");
	a_run_oa(1000, cfg.a_commits / 10 + 1, mirror, lat, &ro);
	a_run_base(1000, cfg.a_commits / 10 + 1, lat, &rb);

	for (rep = 0; rep < cfg.reps; rep++) {
		progress("A: run %d/%d oatomic", rep + 1, cfg.reps);
		a_run_oa(rep, cfg.a_commits, mirror, lat, &ro);
		verify_file("a-oa.dat", mirror, cfg.a_file);
		progress("A: run %d/%d baseline", rep + 1, cfg.reps);
		a_run_base(rep, cfg.a_commits, lat, &rb);

		push(&r[0]->oa, ro.p50);
		push(&r[0]->base, rb.p50);
		push(&r[1]->oa, ro.p99);
		push(&r[1]->base, rb.p99);
		push(&r[9]->oa, ro.mean_commits);
		push(&r[9]->base, rb.mean_commits);
		push(&r[2]->oa, ro.mean_incl_close);
		push(&r[2]->base, rb.mean_incl_close);
		push(&r[3]->oa, ro.close_ms);
		push(&r[3]->base, rb.close_ms);
		push(&r[10]->oa, ro.cpu_us);
		push(&r[10]->base, rb.cpu_us);
		push(&r[4]->oa, ro.flushes_commits);
		push(&r[4]->base, rb.flushes_commits);
		push(&r[5]->oa, ro.flushes_all);
		push(&r[5]->base, rb.flushes_all);
		push(&r[6]->oa, ro.bytes_ratio);
		push(&r[6]->base, rb.bytes_ratio);
		push(&r[7]->oa, ro.writes_per);
		push(&r[7]->base, rb.writes_per);
		push(&r[8]->oa, ro.reads_ratio);
	}
	remove_with_companions("a-oa.dat");
	remove_with_companions("a-base.dat");
	xsyncfs();
	free(mirror);
	free(lat);
	report(&w);
}

/* ------------------------------------------------------------------ */
/* B. one small change to a big file                                   */

#define TAG_B_OA   0x424f41ULL
#define TAG_B_BASE 0x42424153ULL

static off_t b_offset(uint64_t *seed)
{
	return (off_t)((splitmix64(seed) % (cfg.b_file / BLK)) * BLK);
}

struct b_result {
	double commit_ms, cycle_ms;
	double flushes_commit, flushes_cycle, bytes_ratio, reads_ratio;
};

/* CYCLES times: open, one 4 KiB write, commit, close.  Per-cycle medians. */
static void b_run_oa(int rep, struct b_result *res)
{
	uint64_t seed = 0xB0B0ULL + (uint64_t)rep;
	unsigned char *blk = xalloc(BLK);
	double commit[MAXREPS * 4], cycle[MAXREPS * 4];
	uint64_t fl_commit = 0, fl_cycle = 0, bytes = 0, reads = 0;
	int i, n = cfg.b_cycles;

	fill_random(blk, BLK, 0xB1B1ULL + (uint64_t)rep);
	for (i = 0; i < n; i++) {
		off_t off = b_offset(&seed);
		struct oa_stats s1, s2;
		uint64_t t0, t1, t2, t3;
		oa_file *f;

		stamp(blk, TAG_B_OA, (uint64_t)rep, (uint64_t)i, (uint64_t)off);
		xsyncfs();
		oa__stats_reset();
		t0 = now_ns();
		f = xoa_open("b-oa.dat", O_RDWR);
		t1 = now_ns();
		xoa_pwrite(f, blk, BLK, off);
		xoa_commit(f);
		t2 = now_ns();
		oa__stats_get(&s1);
		xoa_close(f);
		t3 = now_ns();
		oa__stats_get(&s2);
		commit[i] = (double)(t2 - t1) / 1e6;
		cycle[i] = (double)(t3 - t0) / 1e6;
		fl_commit += s1.flushes;
		fl_cycle += s2.flushes;
		bytes += s2.bytes_written;
		reads += s2.bytes_read;
		verify_block("b-oa.dat", blk, off);
	}
	free(blk);
	res->commit_ms = median_of(commit, n);
	res->cycle_ms = median_of(cycle, n);
	res->flushes_commit = (double)fl_commit / n;
	res->flushes_cycle = (double)fl_cycle / n;
	res->bytes_ratio = (double)bytes / ((double)n * BLK);
	res->reads_ratio = (double)reads / ((double)n * BLK);
}

/* The usual safe way: a whole new copy with the change, fsync, rename over
 * the old one, fsync the directory. */
static void b_run_base(int rep, struct b_result *res)
{
	uint64_t seed = 0xB0B0ULL + (uint64_t)rep;
	unsigned char *blk = xalloc(BLK), *buf = xalloc(CHUNK);
	off_t off = b_offset(&seed);
	uint64_t t0, t1, pos;
	int src, tmp;

	fill_random(blk, BLK, 0xB1B1ULL + (uint64_t)rep);
	stamp(blk, TAG_B_BASE, (uint64_t)rep, 0, (uint64_t)off);
	xsyncfs();
	memset(&bc, 0, sizeof(bc));
	t0 = now_ns();
	src = openat(g_dirfd, "b-base.dat", O_RDONLY | O_CLOEXEC);
	tmp = openat(g_dirfd, "b-base.dat.tmp",
		     O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (src < 0 || tmp < 0)
		die("open b-base.dat / b-base.dat.tmp");
	for (pos = 0; pos < cfg.b_file; pos += CHUNK) {
		size_t n = cfg.b_file - pos < CHUNK ? (size_t)(cfg.b_file - pos)
						    : CHUNK;

		full_pread(src, buf, n, (off_t)pos, "b-base.dat");
		if ((uint64_t)off >= pos && (uint64_t)off < pos + n)
			memcpy(buf + (off - (off_t)pos), blk, BLK);
		b_pwrite(tmp, buf, n, (off_t)pos);
	}
	b_fsync(tmp);
	close(tmp);
	close(src);
	if (renameat(g_dirfd, "b-base.dat.tmp", g_dirfd, "b-base.dat") != 0)
		die("rename b-base.dat.tmp");
	b_fsync(g_dirfd);
	t1 = now_ns();
	verify_block("b-base.dat", blk, off);
	free(blk);
	free(buf);
	res->commit_ms = res->cycle_ms = (double)(t1 - t0) / 1e6;
	res->flushes_commit = res->flushes_cycle = (double)bc.flushes;
	res->bytes_ratio = (double)bc.bytes_written / BLK;
	res->reads_ratio = (double)cfg.b_file / BLK;
}

static void workload_b(void)
{
	struct workload w;
	struct b_result ro, rb;
	struct row *r[8];
	int rep;

	memset(&w, 0, sizeof(w));
	w.id = 'B';
	snprintf(w.title, sizeof(w.title),
		 "one 4 KiB change to a %llu MiB file",
		 (unsigned long long)(cfg.b_file / MiB));
	snprintf(w.detail, sizeof(w.detail),
		 "oatomic: oa_open, oa_pwrite, oa_commit, oa_close (median of "
		 "%d per run); baseline: copy with the change to a temporary, "
		 "fsync, rename over, fsync the directory; %d runs of each, "
		 "alternating", cfg.b_cycles, cfg.b_reps);
	w.oa_name = "oatomic";
	w.base_name = "copy+fsync+rename";
	r[0] = add_row(&w, "time/change, write+commit", "ms_per_change_commit",
		       "ms", 3, 1);
	r[1] = add_row(&w, "time/change, open..close", "ms_per_change_cycle",
		       "ms", 3, 1);
	r[2] = add_row(&w, "flushes/change, write+commit",
		       "flushes_per_change_commit", "", 2, 0);
	r[3] = add_row(&w, "flushes/change, open..close",
		       "flushes_per_change_cycle", "", 2, 0);
	r[4] = add_row(&w, "bytes written/byte changed",
		       "bytes_written_per_byte", "", 2, 0);
	r[5] = add_row(&w, "bytes read/byte changed", "bytes_read_per_byte",
		       "", 2, 0);
	add_target(&w, r[0], 1, 0.01,
		   "B write+commit at least 100x faster than the copy");
	add_target(&w, r[1], 1, 0.01,
		   "B open..close at least 100x faster than the copy");

	progress("B: creating two %llu MiB files",
		 (unsigned long long)(cfg.b_file / MiB));
	make_file("b-oa.dat", cfg.b_file, 0xBBBB, NULL);
	make_file("b-base.dat", cfg.b_file, 0xBBBB, NULL);
	progress("B: warm-up");
	{
		int saved = cfg.b_cycles;

		cfg.b_cycles = 2;
		b_run_oa(1000, &ro);
		cfg.b_cycles = saved;
	}
	for (rep = 0; rep < cfg.b_reps; rep++) {
		progress("B: run %d/%d oatomic", rep + 1, cfg.b_reps);
		b_run_oa(rep, &ro);
		progress("B: run %d/%d baseline", rep + 1, cfg.b_reps);
		b_run_base(rep, &rb);
		push(&r[0]->oa, ro.commit_ms);
		push(&r[0]->base, rb.commit_ms);
		push(&r[1]->oa, ro.cycle_ms);
		push(&r[1]->base, rb.cycle_ms);
		push(&r[2]->oa, ro.flushes_commit);
		push(&r[2]->base, rb.flushes_commit);
		push(&r[3]->oa, ro.flushes_cycle);
		push(&r[3]->base, rb.flushes_cycle);
		push(&r[4]->oa, ro.bytes_ratio);
		push(&r[4]->base, rb.bytes_ratio);
		push(&r[5]->oa, ro.reads_ratio);
		push(&r[5]->base, rb.reads_ratio);
	}
	remove_with_companions("b-oa.dat");
	remove_with_companions("b-base.dat");
	unlinkat(g_dirfd, "b-base.dat.tmp", 0);
	xsyncfs();
	report(&w);
}

/* ------------------------------------------------------------------ */
/* C. one large transaction                                            */

#define TAG_C_OA   0x434f41ULL
#define TAG_C_BASE 0x43424153ULL

struct c_result {
	double mbps, write_s, commit_s, close_s, cpu_s;
	double flushes, bytes_ratio, reads_ratio, writes;
};

static void c_expected(unsigned char *buf, const unsigned char *pat,
		       uint64_t tag, int rep, uint64_t i)
{
	memcpy(buf, pat, CHUNK);
	stamp(buf, tag, (uint64_t)rep, i, i * CHUNK);
}

static void c_verify(const char *name, const unsigned char *pat,
		     uint64_t tag, int rep)
{
	unsigned char *want = xalloc(CHUNK), *got = xalloc(CHUNK);
	struct stat st;
	uint64_t i, n = cfg.c_bytes / CHUNK;
	int fd = openat(g_dirfd, name, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) != 0)
		die("open %s for read-back", name);
	if ((uint64_t)st.st_size != cfg.c_bytes) {
		errno = 0;
		die("read-back %s: size %lld, expected %llu", name,
		    (long long)st.st_size, (unsigned long long)cfg.c_bytes);
	}
	for (i = 0; i < n; i++) {
		c_expected(want, pat, tag, rep, i);
		full_pread(fd, got, CHUNK, (off_t)(i * CHUNK), name);
		if (memcmp(want, got, CHUNK) != 0) {
			errno = 0;
			die("read-back %s: MiB %llu is not what was committed",
			    name, (unsigned long long)i);
		}
	}
	close(fd);
	free(want);
	free(got);
}

static void c_run_oa(int rep, const unsigned char *pat, struct c_result *res)
{
	unsigned char *buf = xalloc(CHUNK);
	uint64_t i, n = cfg.c_bytes / CHUNK, t0, t1, t2, t3, c0;
	char name[64];
	struct oa_stats s;
	oa_file *f;

	snprintf(name, sizeof(name), "c-oa-%d.dat", rep);
	memcpy(buf, pat, CHUNK);
	f = xoa_open(name, O_RDWR | O_CREAT | O_EXCL);
	xsyncfs();
	oa__stats_reset();
	c0 = cpu_ns();
	t0 = now_ns();
	for (i = 0; i < n; i++) {
		stamp(buf, TAG_C_OA, (uint64_t)rep, i, i * CHUNK);
		xoa_pwrite(f, buf, CHUNK, (off_t)(i * CHUNK));
	}
	t1 = now_ns();
	xoa_commit(f);
	t2 = now_ns();
	xoa_close(f);
	t3 = now_ns();
	res->cpu_s = (double)(cpu_ns() - c0) / 1e9;
	oa__stats_get(&s);
	free(buf);
	c_verify(name, pat, TAG_C_OA, rep);
	remove_with_companions(name);
	xsyncfs();

	res->write_s = (double)(t1 - t0) / 1e9;
	res->commit_s = (double)(t2 - t1) / 1e9;
	res->close_s = (double)(t3 - t2) / 1e9;
	res->mbps = (double)cfg.c_bytes / 1e6 / ((double)(t3 - t0) / 1e9);
	res->flushes = (double)s.flushes;
	res->bytes_ratio = (double)s.bytes_written / (double)cfg.c_bytes;
	res->reads_ratio = (double)s.bytes_read / (double)cfg.c_bytes;
	res->writes = (double)s.writes;
}

static void c_run_base(int rep, const unsigned char *pat,
		       struct c_result *res)
{
	unsigned char *buf = xalloc(CHUNK);
	uint64_t i, n = cfg.c_bytes / CHUNK, t0, t1, t2, t3, c0;
	char name[64];
	int fd;

	snprintf(name, sizeof(name), "c-base-%d.dat", rep);
	memcpy(buf, pat, CHUNK);
	fd = openat(g_dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC,
		    0644);
	if (fd < 0 || fsync(fd) != 0)
		die("create %s", name);
	xfsync_dir();
	xsyncfs();
	memset(&bc, 0, sizeof(bc));
	c0 = cpu_ns();
	t0 = now_ns();
	for (i = 0; i < n; i++) {
		stamp(buf, TAG_C_BASE, (uint64_t)rep, i, i * CHUNK);
		b_pwrite(fd, buf, CHUNK, (off_t)(i * CHUNK));
	}
	t1 = now_ns();
	b_fdatasync(fd);
	t2 = now_ns();
	close(fd);
	t3 = now_ns();
	res->cpu_s = (double)(cpu_ns() - c0) / 1e9;
	free(buf);
	c_verify(name, pat, TAG_C_BASE, rep);
	remove_with_companions(name);
	xsyncfs();

	res->write_s = (double)(t1 - t0) / 1e9;
	res->commit_s = (double)(t2 - t1) / 1e9;
	res->close_s = (double)(t3 - t2) / 1e9;
	res->mbps = (double)cfg.c_bytes / 1e6 / ((double)(t3 - t0) / 1e9);
	res->flushes = (double)bc.flushes;
	res->bytes_ratio = (double)bc.bytes_written / (double)cfg.c_bytes;
	res->reads_ratio = 0;
	res->writes = (double)bc.writes;
}

static void workload_c(void)
{
	struct workload w;
	struct c_result ro, rb;
	unsigned char *pat = xalloc(CHUNK);
	struct row *r[9];
	int rep;

	memset(&w, 0, sizeof(w));
	w.id = 'C';
	snprintf(w.title, sizeof(w.title),
		 "large transaction: %llu MiB in 1 MiB writes into an empty "
		 "file", (unsigned long long)(cfg.c_bytes / MiB));
	snprintf(w.detail, sizeof(w.detail),
		 "oatomic: oa_pwrite x %llu, oa_commit, oa_close (checkpoint "
		 "counted); baseline: pwrite x %llu, fdatasync, close; "
		 "%d runs of each, alternating, a new file each run",
		 (unsigned long long)(cfg.c_bytes / CHUNK),
		 (unsigned long long)(cfg.c_bytes / CHUNK), cfg.c_reps);
	w.oa_name = "oatomic";
	w.base_name = "pwrite+fdatasync";
	r[0] = add_row(&w, "throughput, write..close", "mb_per_s", "MB/s", 1,
		       1);
	r[1] = add_row(&w, "write phase", "write_s", "s", 3, 1);
	r[2] = add_row(&w, "oa_commit / fdatasync", "commit_s", "s", 3, 1);
	r[3] = add_row(&w, "close (checkpoint)", "close_s", "s", 3, 0);
	r[8] = add_row(&w, "CPU time, user+sys", "cpu_s", "s", 3, 1);
	r[4] = add_row(&w, "flushes/transaction", "flushes", "", 0, 0);
	r[5] = add_row(&w, "bytes written/byte committed",
		       "bytes_written_per_byte", "", 3, 0);
	r[6] = add_row(&w, "bytes read/byte committed", "bytes_read_per_byte",
		       "", 3, 0);
	r[7] = add_row(&w, "write calls/transaction", "writes", "", 0, 0);
	add_target(&w, r[0], 0, 0.5, "C throughput >= 0.5x baseline");

	fill_random(pat, CHUNK, 0xCCCC);
	for (rep = 0; rep < cfg.c_reps; rep++) {
		progress("C: run %d/%d oatomic", rep + 1, cfg.c_reps);
		c_run_oa(rep, pat, &ro);
		progress("C: run %d/%d baseline", rep + 1, cfg.c_reps);
		c_run_base(rep, pat, &rb);
		push(&r[0]->oa, ro.mbps);
		push(&r[0]->base, rb.mbps);
		push(&r[1]->oa, ro.write_s);
		push(&r[1]->base, rb.write_s);
		push(&r[2]->oa, ro.commit_s);
		push(&r[2]->base, rb.commit_s);
		push(&r[3]->oa, ro.close_s);
		push(&r[3]->base, rb.close_s);
		push(&r[8]->oa, ro.cpu_s);
		push(&r[8]->base, rb.cpu_s);
		push(&r[4]->oa, ro.flushes);
		push(&r[4]->base, rb.flushes);
		push(&r[5]->oa, ro.bytes_ratio);
		push(&r[5]->base, rb.bytes_ratio);
		push(&r[6]->oa, ro.reads_ratio);
		push(&r[7]->oa, ro.writes);
		push(&r[7]->base, rb.writes);
	}
	free(pat);
	report(&w);
}

/* ------------------------------------------------------------------ */

static void usage(FILE *out, int status)
{
	fprintf(out,
		"usage: oabench [--dir D] [--quick] [--reps N] "
		"[--format table|csv] [--only ABC] [--keep]\n"
		"  --dir D       where to put the test files (default: .);\n"
		"                a scratch directory oabench.PID is made there\n"
		"  --quick       small sizes, finishes in under a minute\n"
		"  --reps N      runs of each variant (default 5, quick 3)\n"
		"  --format F    table (default) or csv\n"
		"  --only LIST   run only these workloads, e.g. --only AC\n"
		"  --keep        leave the scratch directory behind\n"
		"example: build/bench/oabench --dir /mnt/test --quick\n");
	exit(status);
}

static void parse_args(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "quick", no_argument, NULL, 'q' },
		{ "reps", required_argument, NULL, 'r' },
		{ "format", required_argument, NULL, 'f' },
		{ "only", required_argument, NULL, 'o' },
		{ "keep", no_argument, NULL, 'k' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	cfg.dir = ".";
	cfg.reps = 0;
	while ((c = getopt_long(argc, argv, "d:qr:f:o:kh", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			cfg.dir = optarg;
			break;
		case 'q':
			cfg.quick = 1;
			break;
		case 'r': {
			char *end;
			long v = strtol(optarg, &end, 10);

			if (*end || v < 1 || v > MAXREPS) {
				fprintf(stderr, "oabench: --reps: 1..%d\n",
					MAXREPS);
				exit(2);
			}
			cfg.reps = (int)v;
			break;
		}
		case 'f':
			if (strcmp(optarg, "csv") == 0)
				cfg.csv = 1;
			else if (strcmp(optarg, "table") == 0)
				cfg.csv = 0;
			else
				usage(stderr, 2);
			break;
		case 'o':
			cfg.only = optarg;
			break;
		case 'k':
			cfg.keep = 1;
			break;
		case 'h':
			usage(stdout, 0);
			break;
		default:
			usage(stderr, 2);
		}
	}
	if (optind != argc)
		usage(stderr, 2);
	if (!cfg.reps)
		cfg.reps = cfg.quick ? 3 : 5;
	if (cfg.quick) {
		cfg.a_file = 16 * MiB;
		cfg.a_commits = 500;
		cfg.b_file = 32 * MiB;
		cfg.b_cycles = 10;
		cfg.c_bytes = 32 * MiB;
	} else {
		cfg.a_file = 64 * MiB;
		cfg.a_commits = 2000;
		cfg.b_file = 256 * MiB;
		cfg.b_cycles = 20;
		cfg.c_bytes = 256 * MiB;
	}
	cfg.b_reps = cfg.reps < 3 ? cfg.reps : 3;
	cfg.c_reps = cfg.reps;
}

static int wanted(char id)
{
	return !cfg.only || strchr(cfg.only, id) ||
	       strchr(cfg.only, id - 'A' + 'a');
}

int main(int argc, char **argv)
{
	parse_args(argc, argv);
	snprintf(g_workdir, sizeof(g_workdir), "%s/oabench.%ld", cfg.dir,
		 (long)getpid());
	if (mkdir(g_workdir, 0755) != 0)
		die("mkdir %s", g_workdir);
	g_dirfd = open(g_workdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (g_dirfd < 0)
		die("open %s", g_workdir);
	g_cleanup_armed = 1;

	describe_machine();
	if (wanted('A'))
		workload_a();
	if (wanted('B'))
		workload_b();
	if (wanted('C'))
		workload_c();
	if (!cfg.csv)
		printf("\n");
	print_load("at the end");
	cleanup();
	close(g_dirfd);
	return 0;
}
