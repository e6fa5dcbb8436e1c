/*
 * run.c - the workloads of `oatomic bench` and the runner that measures
 * every alternative side by side.
 *
 * For each point of a workload (an update size, a transaction size, a
 * number of writers, ...) every usable alternative gets its own data set,
 * made before and not timed.  Then the repetitions: in repetition r the
 * alternatives run one after the other, forward when r is even and backward
 * when it is odd (A B C, C B A, ...), so that drift of the machine (page
 * cache filling, writeback, a neighbour on the disk) falls on all alike.
 * Before each run the file system is synced (syncfs), so no run pays for
 * the dirty pages of the one before.  Every alternative commits the same
 * updates: they come from a seed fixed per point and repetition.
 *
 * What one run measures:
 *   latency       each transaction, from its first write to the return of
 *                 its commit (median and p99 over the run);
 *   commits/s     commits / (open .. last commit .. close): the close is in,
 *                 as it is where oatomic checkpoints;
 *   MB/s          logical bytes committed per second, same interval;
 *   flushes, wamp what the alternative itself did (oatomic: the library's
 *                 I/O seam; inplace, copy-rename, rwf-atomic: our own calls;
 *                 SQLite, LMDB: not countable from outside, left empty);
 *   io wamp       /proc/self/io write_bytes (what the process dirtied or
 *                 sent direct; every alternative alike);
 *   dev flushes,  the block device's own counters (/sys/dev/block/M:m/stat):
 *   dev wamp      flush requests and sectors written, file system metadata
 *                 and journal included.  Device-wide: exact on a loop
 *                 device of our own, polluted by others on a shared disk;
 *   peak memory   VmHWM of the process(es), reset before the run;
 *   CPU time      user+system of the process(es) over the run, per commit:
 *                 what the calls cost besides waiting for the device (the
 *                 bench's own bookkeeping, a few memcpy per commit, in).
 * The figure printed is the median over the repetitions, with min-max for
 * the latency and the commit rate.
 *
 * SPDX-License-Identifier: MIT
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/wait.h>

#include "oatomic.h"
#include "oatomic-private.h"
#include "bench.h"

#define MAXREPS 32

static char g_dir[4096];	/* the scratch directory */
static int g_dirfd = -1;
static unsigned g_devmaj, g_devmin;
static int g_have_dev;

/* ---- small helpers ------------------------------------------------------ */

const char *bench_dir(void)
{
	return g_dir;
}

double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng_next(uint64_t *s)
{
	/* splitmix64 */
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The P-quantile (0..1) of V[0..N), sorting V; nearest rank. */
double bench_quantile(double *v, int n, double p)
{
	int k;

	if (n <= 0)
		return -1;
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	if (p == 0.5 && n % 2 == 0)
		return (v[n / 2 - 1] + v[n / 2]) / 2;
	k = (int)ceil(p * n) - 1;
	if (k < 0)
		k = 0;
	if (k >= n)
		k = n - 1;
	return v[k];
}

/* ---- meters ------------------------------------------------------------- */

/* The process's CPU time so far, user + system, every thread's. */
static double cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t proc_write_bytes(void)
{
	char line[128];
	uint64_t v = 0;
	FILE *f = fopen("/proc/self/io", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "write_bytes: %lu", &v) == 1)
			break;
	fclose(f);
	return v;
}

static int dev_stat(uint64_t *flushes, uint64_t *sectors)
{
	char p[64];
	unsigned long long f[17] = { 0 };
	FILE *fp;
	int n;

	if (!g_have_dev)
		return -1;
	snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/stat", g_devmaj, g_devmin);
	fp = fopen(p, "r");
	if (!fp)
		return -1;
	n = fscanf(fp, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu "
		   "%llu %llu %llu %llu %llu %llu", &f[0], &f[1], &f[2], &f[3],
		   &f[4], &f[5], &f[6], &f[7], &f[8], &f[9], &f[10], &f[11],
		   &f[12], &f[13], &f[14], &f[15], &f[16]);
	fclose(fp);
	if (n < 17)	/* no flush counters before Linux 5.5 */
		return -1;
	*sectors = f[6];
	*flushes = f[15];
	return 0;
}

void bench_meter_read(int oatomic, struct bench_meter *m)
{
	bench_appctr_of(oatomic, &m->app);
	m->io_wbytes = proc_write_bytes();
	m->dev_ok = dev_stat(&m->dev_flushes, &m->dev_sectors) == 0;
	m->cpu_s = cpu_seconds();
}

void bench_peak_reset(void)
{
	int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (write(fd, "5", 1) < 0) {
			/* an old kernel: the peak then counts from the start */
		}
		close(fd);
	}
}

double bench_peak_kib(void)
{
	char line[128];
	double v = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %lf", &v) == 1)
			break;
	fclose(f);
	return v;
}

/* Sync what earlier runs left dirty, so that no run pays for another. */
void bench_settle(void)
{
	syncfs(g_dirfd);
}

/* Drop the page cache of every file in the scratch directory (after a
 * bench_settle(), so the pages are clean): what a crash does to the cache. */
static void drop_cache(void)
{
	DIR *d = opendir(g_dir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		int fd = openat(g_dirfd, e->d_name, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		close(fd);
	}
	closedir(d);
}

/* ---- workloads and points ------------------------------------------------ */

enum wl { WL_SMALL, WL_LARGE, WL_MANY, WL_CONC, WL_RECOVERY, WL_BULK, WL_N };

static const char *const wl_name[WL_N] = {
	"small", "large", "many", "concurrent", "recovery", "bulk",
};

static const char *const wl_title[WL_N] = {
	("small commits: one update at a random aligned offset per commit "
	 "(and 4 KiB at an unaligned one)"),
	"large transactions: the whole file rewritten in 1 MiB writes, one commit",
	"many small writes per transaction: 4 KiB writes at random offsets",
	("concurrent committers: 4 KiB commits, threads or processes, one "
	 "file or one file each"),
	"recovery after a crash at the commit point, against journal size",
	("bulk load: a new data set written whole in one transaction (SQLite: "
	 "4 KiB rows inserted into a new database), timed until durable"),
};

/* How a point runs: the concurrency modes, and for small commits the
 * updates that start UNALIGNED_BY bytes past an aligned offset. */
enum conc_mode { CM_NONE, CM_THR_ONE, CM_THR_SEP, CM_PROC_ONE, CM_PROC_SEP,
		 CM_UNALIGNED };

static const char *const cm_name[] = {
	"-", "threads/one-file", "threads/own-files", "processes/one-file",
	"processes/own-files", "unaligned",
};

/* An odd offset: the update straddles two pages and starts mid-sector, so
 * the library's partial-page paths are what is measured. */
#define UNALIGNED_BY	100

struct point {
	enum wl wl;
	uint64_t file_size;
	uint32_t upd;		/* bytes per write */
	int nwrites;		/* writes per transaction */
	int writers;
	enum conc_mode mode;
	uint64_t value;		/* the x of the row */
	const char *param;
	int commits;		/* per run (per writer) */
	int min_commits;
};

struct runcfg {
	const struct bench_opts *o;
	int reps;
	double budget;
	uint64_t max_size;
	struct bench_report *rep;
	struct bench_alt *alts[BENCH_MAXALTS];
	int nalts;
	int failed;
};

/* Fill U[0..nw) for commit C of repetition R of point P (same for every
 * alternative). */
static void gen_updates(const struct point *p, uint64_t seed,
			struct bench_upd *u)
{
	uint64_t s = seed;

	if (p->wl == WL_LARGE || p->wl == WL_RECOVERY) {
		for (int i = 0; i < p->nwrites; i++) {
			u[i].off = (uint64_t)i * BENCH_CHUNK;
			u[i].len = (uint32_t)(p->file_size - u[i].off <
					      BENCH_CHUNK ? p->file_size -
					      u[i].off : BENCH_CHUNK);
			u[i].data = 0;
		}
		return;
	}
	for (int i = 0; i < p->nwrites; i++) {
		/* unaligned: one slot fewer, so the last update still fits */
		uint64_t slots = p->file_size / p->upd -
				 (p->mode == CM_UNALIGNED);
		u[i].off = (rng_next(&s) % slots) * p->upd;	/* aligned */
		if (p->mode == CM_UNALIGNED)
			u[i].off += UNALIGNED_BY;
		u[i].len = p->upd;
		u[i].data = (uint32_t)(((uint64_t)i * p->upd) %
				       (BENCH_CHUNK * 2 - p->upd + 1) &
				       ~(uint64_t)(BENCH_PAGE - 1));
	}
}

/* Is alternative A meaningful at point P?  If not, say why in WHY. */
static int applicable(const struct bench_alt *a, const struct point *p,
		      char *why, size_t len)
{
	if (a->caps & ALT_ONE_WRITE) {
		if (p->nwrites != 1 || p->upd > a->unit_max ||
		    p->upd < a->unit_min) {
			snprintf(why, len, "a transaction of %d write(s) of "
				 "%u bytes is not one RWF_ATOMIC write (unit "
				 "%u..%u)", p->nwrites, p->upd, a->unit_min,
				 a->unit_max);
			return 0;
		}
	}
	if (p->mode == CM_UNALIGNED && (a->caps & ALT_WHOLE_PAGES)) {
		snprintf(why, len, "stores whole aligned pages only");
		return 0;
	}
	if (p->mode == CM_THR_ONE && (a->caps & ALT_NO_THREADS_SAME_FILE)) {
		snprintf(why, len, "LMDB forbids opening one environment twice "
			 "in a process (use the process rows)");
		return 0;
	}
	if (p->wl == WL_BULK && !a->load) {
		snprintf(why, len, "no bulk load for this alternative");
		return 0;
	}
	if (p->wl == WL_RECOVERY && !(a->caps & ALT_RECOVER)) {
		snprintf(why, len, "nothing to recover: no log survives a "
			 "committed transaction");
		return 0;
	}
	return 1;
}

static void data_path(char *buf, size_t len, const struct bench_alt *a,
		      int w)
{
	snprintf(buf, len, "%s/%s.%d", g_dir, a->name, w);
}

/* ---- one run of one alternative ------------------------------------------- */

struct run_out {
	double lat_med, lat_p99, cps, mbs;
	double flushes, wamp, io_wamp, dev_flushes, dev_wamp, peak, cpu;
	uint64_t commits;
	int ok;
	char err[160];
};

/* What one writer records (shared memory for the processes). */
struct wslot {
	double t0, t1;
	uint64_t n;
	uint64_t app_flushes, app_bytes, io_bytes;
	double peak;
	double cpu_s;
	int err;
	char msg[120];
};

struct worker {
	struct bench_alt *alt;
	const struct point *p;
	char path[4200];
	uint64_t seed;
	int startfd;		/* read end of the start pipe */
	struct wslot *slot;
	double *lat;		/* p->commits entries */
	double budget;
	unsigned char *payload;
	int inproc;		/* counters measured by the parent */
};

static void *worker_run(void *arg)
{
	struct worker *w = arg;
	const struct point *p = w->p;
	struct bench_upd *u = calloc((size_t)p->nwrites, sizeof(*u));
	struct bench_handle *h;
	struct bench_meter m0, m1;
	char c;
	uint64_t i;

	if (!u) {
		w->slot->err = ENOMEM;
		return NULL;
	}
	if (!w->inproc) {
		bench_peak_reset();
		bench_meter_read(w->alt->method >= 0, &m0);
	}
	/* wait until every writer is ready: the parent closes the pipe */
	while (read(w->startfd, &c, 1) < 0 && errno == EINTR)
		;
	w->slot->t0 = bench_now();
	h = w->alt->open(w->alt, w->path);
	if (!h) {
		w->slot->err = errno ? errno : EIO;
		snprintf(w->slot->msg, sizeof(w->slot->msg), "open: %s",
			 strerror(w->slot->err));
		free(u);
		return NULL;
	}
	for (i = 0; i < (uint64_t)p->commits; i++) {
		double t;
		if (i >= (uint64_t)p->min_commits &&
		    bench_now() - w->slot->t0 > w->budget)
			break;
		gen_updates(p, w->seed + i * 7919, u);
		/* New bytes in every page of every commit: SQLite skips
		 * rewriting an overflow page whose content is unchanged. */
		for (size_t b = 0; b < BENCH_CHUNK * 2; b += BENCH_PAGE)
			memcpy(w->payload + b, &i, sizeof(i));
		t = bench_now();
		if (w->alt->txn(h, u, p->nwrites, w->payload) < 0) {
			w->slot->err = errno ? errno : EIO;
			snprintf(w->slot->msg, sizeof(w->slot->msg),
				 "commit %lu: %s", (unsigned long)i,
				 strerror(w->slot->err));
			break;
		}
		w->lat[i] = (bench_now() - t) * 1e6;
	}
	if (w->alt->close(h) < 0 && !w->slot->err) {
		w->slot->err = errno ? errno : EIO;
		snprintf(w->slot->msg, sizeof(w->slot->msg), "close: %s",
			 strerror(w->slot->err));
	}
	w->slot->t1 = bench_now();
	w->slot->n = i;
	if (!w->inproc) {
		bench_meter_read(w->alt->method >= 0, &m1);
		w->slot->app_flushes = m1.app.flushes - m0.app.flushes;
		w->slot->app_bytes = m1.app.bytes - m0.app.bytes;
		w->slot->io_bytes = m1.io_wbytes - m0.io_wbytes;
		w->slot->peak = bench_peak_kib();
		w->slot->cpu_s = m1.cpu_s - m0.cpu_s;
	}
	free(u);
	return NULL;
}

/* Run alternative A at point P once (all its writers), repetition R. */
static void run_once(struct runcfg *rc, struct bench_alt *a,
		     const struct point *p, int r, struct run_out *out)
{
	int nw = p->writers, procs = p->mode == CM_PROC_ONE ||
					 p->mode == CM_PROC_SEP;
	size_t latn = (size_t)nw * (size_t)p->commits;
	size_t shsz = sizeof(struct wslot) * (size_t)nw +
		      sizeof(double) * latn;
	struct wslot *slots;
	double *lat;
	struct worker *w = calloc((size_t)nw, sizeof(*w));
	pthread_t *tid = calloc((size_t)nw, sizeof(*tid));
	pid_t *pid = calloc((size_t)nw, sizeof(*pid));
	struct bench_meter m0, m1;
	int pfd[2] = { -1, -1 };
	double t0 = 1e300, t1 = 0, *all = NULL;
	uint64_t n = 0, app_fl = 0, app_by = 0, io_by = 0;
	double peak = -1, cpu = 0;

	memset(out, 0, sizeof(*out));
	slots = mmap(NULL, shsz, PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (slots == MAP_FAILED || !w || !tid || !pid || pipe(pfd) < 0) {
		snprintf(out->err, sizeof(out->err), "setup: %s",
			 strerror(errno));
		if (slots != MAP_FAILED)
			munmap(slots, shsz);
		free(w);
		free(tid);
		free(pid);
		return;
	}
	lat = (double *)(slots + nw);
	for (int k = 0; k < nw; k++) {
		w[k].alt = a;
		w[k].p = p;
		data_path(w[k].path, sizeof(w[k].path), a,
			  p->mode == CM_THR_SEP || p->mode == CM_PROC_SEP ?
			  k : 0);
		w[k].seed = ((uint64_t)p->value << 20) ^ ((uint64_t)r << 8) ^
			    (uint64_t)k ^ (p->file_size << 1);
		w[k].startfd = pfd[0];
		w[k].slot = &slots[k];
		w[k].lat = lat + (size_t)k * (size_t)p->commits;
		w[k].budget = rc->budget;
		w[k].inproc = !procs;
		if (posix_memalign((void **)&w[k].payload, BENCH_PAGE,
				   BENCH_CHUNK * 2) != 0) {
			snprintf(out->err, sizeof(out->err), "out of memory");
			goto out;
		}
		for (size_t b = 0; b < BENCH_CHUNK * 2; b += 8)
			memcpy(w[k].payload + b,
			       &(uint64_t){ b * 31 + (uint64_t)r }, 8);
	}
	bench_settle();
	bench_peak_reset();
	bench_meter_read(a->method >= 0, &m0);
	for (int k = 0; k < nw; k++) {
		if (procs) {
			fflush(NULL);
			pid[k] = fork();
			if (pid[k] == 0) {
				close(pfd[1]);
				worker_run(&w[k]);
				_exit(0);
			}
			if (pid[k] < 0) {
				slots[k].err = errno;
				snprintf(slots[k].msg, sizeof(slots[k].msg),
					 "fork: %s", strerror(errno));
			}
		} else if (pthread_create(&tid[k], NULL, worker_run, &w[k])) {
			tid[k] = 0;
			slots[k].err = EAGAIN;
			snprintf(slots[k].msg, sizeof(slots[k].msg),
				 "pthread_create failed");
		}
	}
	close(pfd[1]);	/* go */
	pfd[1] = -1;
	for (int k = 0; k < nw; k++) {
		if (procs && pid[k] > 0) {
			int st;
			while (waitpid(pid[k], &st, 0) < 0 && errno == EINTR)
				;
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
				slots[k].err = EIO;
				snprintf(slots[k].msg, sizeof(slots[k].msg),
					 "writer process died (status 0x%x)",
					 st);
			}
		} else if (!procs && tid[k]) {
			pthread_join(tid[k], NULL);
		}
	}
	bench_meter_read(a->method >= 0, &m1);
	for (int k = 0; k < nw; k++) {
		if (slots[k].err) {
			snprintf(out->err, sizeof(out->err), "%s",
				 slots[k].msg);
			goto out;
		}
		if (slots[k].t0 < t0)
			t0 = slots[k].t0;
		if (slots[k].t1 > t1)
			t1 = slots[k].t1;
		n += slots[k].n;
		app_fl += slots[k].app_flushes;
		app_by += slots[k].app_bytes;
		io_by += slots[k].io_bytes;
		if (slots[k].peak > peak)
			peak = slots[k].peak;
		cpu += slots[k].cpu_s;
	}
	if (!procs) {
		app_fl = m1.app.flushes - m0.app.flushes;
		app_by = m1.app.bytes - m0.app.bytes;
		io_by = m1.io_wbytes - m0.io_wbytes;
		peak = bench_peak_kib();
		cpu = m1.cpu_s - m0.cpu_s;	/* every thread's */
	}
	all = malloc(sizeof(double) * (n ? n : 1));
	if (!all || n == 0) {
		snprintf(out->err, sizeof(out->err), "no commit made");
		goto out;
	}
	n = 0;
	for (int k = 0; k < nw; k++)
		for (uint64_t i = 0; i < slots[k].n; i++)
			all[n++] = w[k].lat[i];
	{
		double txn = 0, logical;
		struct bench_upd *u = calloc((size_t)p->nwrites, sizeof(*u));
		if (u) {
			gen_updates(p, 1, u);
			for (int i = 0; i < p->nwrites; i++)
				txn += u[i].len;
			free(u);
		}
		logical = txn * (double)n;
		out->commits = n;
		out->lat_p99 = bench_quantile(all, (int)n, 0.99);
		out->lat_med = bench_quantile(all, (int)n, 0.5);
		out->cps = (double)n / (t1 - t0);
		out->mbs = logical / (t1 - t0) / 1e6;
		out->flushes = a->app_counts ? (double)app_fl / (double)n : -1;
		out->wamp = a->app_counts ? (double)app_by / logical : -1;
		out->io_wamp = (double)io_by / logical;
		out->dev_flushes = m0.dev_ok && m1.dev_ok ?
			(double)(m1.dev_flushes - m0.dev_flushes) / (double)n : -1;
		out->dev_wamp = m0.dev_ok && m1.dev_ok ?
			(double)(m1.dev_sectors - m0.dev_sectors) * 512 /
			logical : -1;
		out->peak = peak;
		out->cpu = cpu * 1e6 / (double)n;
		out->ok = 1;
	}
out:
	free(all);
	for (int k = 0; k < nw; k++)
		free(w[k].payload);
	if (pfd[0] >= 0)
		close(pfd[0]);
	if (pfd[1] >= 0)
		close(pfd[1]);
	munmap(slots, shsz);
	free(w);
	free(tid);
	free(pid);
}

/* ---- recovery: one crash and one recovery ---------------------------------- */

/* bulk: a new data set loaded, timed as the alternative says (until it is
 * durable), with the counters around it; the data set removed after. */
static void load_once(struct runcfg *rc, struct bench_alt *a,
		      const struct point *p, int r, struct run_out *out)
{
	struct bench_meter m0, m1;
	char path[4200];
	double us = 0, logical = (double)p->file_size;

	memset(out, 0, sizeof(*out));
	data_path(path, sizeof(path), a, 0);
	a->destroy(a, path);
	bench_settle();
	bench_peak_reset();
	bench_meter_read(a->method >= 0, &m0);
	if (a->load(a, path, p->file_size, &us) < 0) {
		snprintf(out->err, sizeof(out->err), "load: %s",
			 strerror(errno));
		a->destroy(a, path);
		return;
	}
	/* the counters include what follows the timed part (WAL's
	 * checkpoint): they say what the load costs in the end */
	bench_meter_read(a->method >= 0, &m1);
	out->peak = bench_peak_kib();
	a->destroy(a, path);
	out->lat_med = out->lat_p99 = us;
	out->commits = 1;
	out->cps = us > 0 ? 1e6 / us : -1;
	out->mbs = us > 0 ? logical / us : -1;
	out->flushes = a->app_counts ?
		(double)(m1.app.flushes - m0.app.flushes) : -1;
	out->wamp = a->app_counts ?
		(double)(m1.app.bytes - m0.app.bytes) / logical : -1;
	out->io_wamp = (double)(m1.io_wbytes - m0.io_wbytes) / logical;
	out->dev_flushes = m0.dev_ok && m1.dev_ok ?
		(double)(m1.dev_flushes - m0.dev_flushes) : -1;
	out->dev_wamp = m0.dev_ok && m1.dev_ok ?
		(double)(m1.dev_sectors - m0.dev_sectors) * 512 / logical : -1;
	out->cpu = (m1.cpu_s - m0.cpu_s) * 1e6;
	out->ok = 1;
	(void)rc;
	(void)r;
}

static void recover_once(struct runcfg *rc, struct bench_alt *a,
			 const struct point *p, int r, struct run_out *out)
{
	char path[4200];
	struct bench_upd *u = calloc((size_t)p->nwrites, sizeof(*u));
	unsigned char *payload = NULL;
	double t;
	pid_t pid;
	int st;

	memset(out, 0, sizeof(*out));
	data_path(path, sizeof(path), a, 0);
	if (!u || posix_memalign((void **)&payload, BENCH_PAGE,
				 BENCH_CHUNK) != 0) {
		snprintf(out->err, sizeof(out->err), "out of memory");
		goto out;
	}
	memset(payload, 0xa0 + r, BENCH_CHUNK);
	gen_updates(p, 0, u);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		/* the crashing writer */
		struct bench_handle *h = a->open(a, path);
		if (!h)
			_exit(3);
		if (a->crash_setup)
			a->crash_setup(h);
		if (a->txn(h, u, p->nwrites, payload) < 0)
			_exit(4);
		_exit(0);	/* without a close: as a crash */
	}
	if (pid < 0 || waitpid(pid, &st, 0) < 0) {
		snprintf(out->err, sizeof(out->err), "fork: %s",
			 strerror(errno));
		goto out;
	}
	if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0) &&
	    !(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)) {
		snprintf(out->err, sizeof(out->err), "the writer failed "
			 "(status 0x%x)", st);
		goto out;
	}
	bench_settle();
	drop_cache();
	bench_peak_reset();
	t = bench_now();
	if (a->recover(a, path) < 0) {
		snprintf(out->err, sizeof(out->err), "recover: %s",
			 strerror(errno));
		goto out;
	}
	out->lat_med = out->lat_p99 = (bench_now() - t) * 1e6;
	out->peak = bench_peak_kib();
	out->commits = 1;
	if (a->method >= 0) {
		/* the replay really happened: the file holds the commit */
		unsigned char got[BENCH_PAGE];
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || pread(fd, got, sizeof(got), 0) != sizeof(got) ||
		    memcmp(got, payload, sizeof(got)) != 0) {
			snprintf(out->err, sizeof(out->err), "after recovery "
				 "the file does not hold the commit");
			if (fd >= 0)
				close(fd);
			goto out;
		}
		close(fd);
	}
	out->cps = out->mbs = out->flushes = out->wamp = out->io_wamp = -1;
	out->dev_flushes = out->dev_wamp = out->cpu = -1;
	out->ok = 1;
out:
	free(u);
	free(payload);
}

/* ---- a point: every alternative, every repetition --------------------------- */

static int create_sets(struct bench_alt *a, const struct point *p, char *why,
		       size_t len)
{
	int sets = p->mode == CM_THR_SEP || p->mode == CM_PROC_SEP ?
		   p->writers : 1;
	char path[4200];

	for (int k = 0; k < sets; k++) {
		data_path(path, sizeof(path), a, k);
		if (a->create(a, path, p->file_size) < 0) {
			snprintf(why, len, "creating the data set: %s",
				 strerror(errno));
			return -1;
		}
	}
	return 0;
}

static void destroy_sets(struct bench_alt *a, const struct point *p)
{
	char path[4200];

	for (int k = 0; k < (p->writers > 0 ? p->writers : 1); k++) {
		data_path(path, sizeof(path), a, k);
		a->destroy(a, path);
	}
}

static double med(double *v, int n)
{
	return bench_quantile(v, n, 0.5);
}

static void run_point(struct runcfg *rc, const struct point *p)
{
	struct bench_row *rows[BENCH_MAXALTS] = { 0 };
	int ridx[BENCH_MAXALTS];
	struct run_out res[BENCH_MAXALTS][MAXREPS];
	int live[BENCH_MAXALTS] = { 0 };
	uint64_t need;
	struct statvfs sv;
	int nlive = 0, floor_i = -1;

	/* room: each data set, plus a journal / copy / log of one txn */
	need = p->file_size * 3 * (uint64_t)(p->writers > 0 ? p->writers : 1);
	for (int i = 0; i < rc->nalts; i++) {
		struct bench_alt *a = rc->alts[i];
		struct bench_row *row;
		char why[200];

		if (!a->usable)
			continue;
		/* rows may move as rows are added: pointers after the loop */
		row = bench_add_row(rc->rep);
		ridx[i] = (int)(row - rc->rep->rows);
		row->workload = wl_name[p->wl];
		row->alt = a->name;
		row->param = p->param;
		row->value = p->value;
		row->file_size = p->file_size;
		row->mode = cm_name[p->mode];
		row->status = "n/a";
		if (!applicable(a, p, why, sizeof(why))) {
			snprintf(row->note, sizeof(row->note), "%s", why);
			continue;
		}
		if (statvfs(g_dir, &sv) == 0 &&
		    (uint64_t)sv.f_bavail * sv.f_frsize < need + (64 << 20)) {
			row->status = "skipped";
			snprintf(row->note, sizeof(row->note), "needs %lu MiB "
				 "free in the directory", (unsigned long)
				 ((need >> 20) + 64));
			continue;
		}
		if (p->wl != WL_BULK && create_sets(a, p, why, sizeof(why)) < 0) {
			row->status = "failed";
			snprintf(row->note, sizeof(row->note), "%s", why);
			rc->failed = 1;
			destroy_sets(a, p);
			continue;
		}
		live[i] = 1;
		nlive++;
		if (strcmp(a->name, "inplace") == 0)
			floor_i = i;
		/* Disk space for one data set at a time would be kinder, but
		 * then the alternatives could not take turns. */
	}
	for (int i = 0; i < rc->nalts; i++)
		if (rc->alts[i]->usable)
			rows[i] = &rc->rep->rows[ridx[i]];
	for (int r = 0; r < rc->reps && nlive; r++) {
		for (int j = 0; j < rc->nalts; j++) {
			int i = r % 2 == 0 ? j : rc->nalts - 1 - j;
			if (!live[i])
				continue;
			if (p->wl == WL_RECOVERY) {
				/* a fresh data set for every crash */
				if (r > 0) {
					destroy_sets(rc->alts[i], p);
					create_sets(rc->alts[i], p,
						    rows[i]->note,
						    sizeof(rows[i]->note));
				}
				recover_once(rc, rc->alts[i], p, r,
					     &res[i][r]);
			} else if (p->wl == WL_BULK) {
				load_once(rc, rc->alts[i], p, r, &res[i][r]);
			} else {
				run_once(rc, rc->alts[i], p, r, &res[i][r]);
			}
			if (!res[i][r].ok) {
				live[i] = 0;
				rows[i]->status = "failed";
				snprintf(rows[i]->note, sizeof(rows[i]->note),
					 "%s", res[i][r].err);
				rc->failed = 1;
			}
		}
	}
	for (int i = 0; i < rc->nalts; i++) {
		double v[MAXREPS];
		struct bench_row *row = rows[i];
		int n = rc->reps;

		if (!row)
			continue;
		if (!live[i]) {
			if (strcmp(row->status, "n/a") && strcmp(row->status,
								 "skipped"))
				destroy_sets(rc->alts[i], p);
			continue;
		}
		destroy_sets(rc->alts[i], p);
		row->status = "ok";
		row->reps = n;
		row->txn_bytes = p->wl == WL_LARGE || p->wl == WL_RECOVERY ||
				 p->wl == WL_BULK ?
				 p->file_size : (uint64_t)p->upd *
				 (uint64_t)p->nwrites;
		for (int r = 0; r < n; r++)
			row->commits += res[i][r].commits;
#define SUM(field, dst) do { \
		for (int r = 0; r < n; r++) v[r] = res[i][r].field; \
		dst = med(v, n); } while (0)
		SUM(lat_med, row->lat_med);
		row->lat_min = v[0];
		row->lat_max = v[n - 1];
		SUM(lat_p99, row->lat_p99);
		SUM(cps, row->cps);
		row->cps_min = v[0];
		row->cps_max = v[n - 1];
		SUM(mbs, row->mbs);
		SUM(flushes, row->flushes);
		SUM(wamp, row->wamp);
		SUM(io_wamp, row->io_wamp);
		SUM(dev_flushes, row->dev_flushes);
		SUM(dev_wamp, row->dev_wamp);
		SUM(peak, row->peak_kib);
		SUM(cpu, row->cpu_us);
#undef SUM
	}
	if (floor_i >= 0 && live[floor_i])
		for (int i = 0; i < rc->nalts; i++)
			if (rows[i] && live[i] && rows[floor_i]->lat_med > 0)
				rows[i]->vs_floor = rows[i]->lat_med /
						    rows[floor_i]->lat_med;
	for (int i = 0; i < rc->nalts; i++)
		if (rows[i])
			bench_print_row_live(rc->rep, rows[i],
					     rc->o->format);
	if (rc->o->format != BF_TABLE && rc->o->progress)
		fprintf(stderr, "oatomic: bench: %s %s=%lu %s done\n",
			wl_name[p->wl], p->param, (unsigned long)p->value,
			cm_name[p->mode]);
}

/* ---- the workloads' points ------------------------------------------------- */

static int wanted(const char *list, const char *name)
{
	const char *s = list;
	size_t n = strlen(name);

	if (!list)
		return 1;
	while (s && *s) {
		if (strncmp(s, name, n) == 0 && (s[n] == ',' || s[n] == '\0'))
			return 1;
		s = strchr(s, ',');
		if (s)
			s++;
	}
	return 0;
}

static void run_workload(struct runcfg *rc, enum wl wl)
{
	static const uint64_t q_files[] = { 1 << 20 };
	static const uint64_t f_files[] = { 1 << 20, 64 << 20, 1ULL << 30,
					    4ULL << 30 };
	static const uint32_t q_upd[] = { 4096, 65536 };
	static const uint32_t f_upd[] = { 4096, 16384, 65536 };
	static const uint64_t q_large[] = { 1 << 20, 4 << 20 };
	static const uint64_t f_large[] = { 1 << 20, 16 << 20, 256 << 20,
					    1ULL << 30 };
	static const int q_many[] = { 10, 100 };
	static const int f_many[] = { 10, 100, 1000, 10000 };
	static const int q_writers[] = { 1, 2 };
	static const int f_writers[] = { 1, 2, 4, 8 };
	static const uint64_t q_jrnl[] = { 64 << 10, 1 << 20 };
	static const uint64_t f_jrnl[] = { 64 << 10, 1 << 20, 16 << 20,
					   256 << 20, 1ULL << 30 };
	int quick = rc->o->quick;
	struct point p;

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))
	if (rc->o->format == BF_TABLE)
		printf("\n== %s: %s\n", wl_name[wl], wl_title[wl]);
	memset(&p, 0, sizeof(p));
	p.wl = wl;
	p.writers = 1;
	p.mode = CM_NONE;
	switch (wl) {
	case WL_SMALL:
		p.param = "update_bytes";
		p.nwrites = 1;
		for (int f = 0; f < (quick ? N(q_files) : N(f_files)); f++) {
			p.file_size = quick ? q_files[f] : f_files[f];
			if (p.file_size > rc->max_size)
				continue;
			for (int k = 0; k < (quick ? N(q_upd) : N(f_upd)); k++) {
				p.upd = quick ? q_upd[k] : f_upd[k];
				p.value = p.upd;
				p.commits = quick ? 20 : 500;
				p.min_commits = 3;
				run_point(rc, &p);
			}
		}
		/* 4 KiB at an odd offset, on the middle file size */
		p.mode = CM_UNALIGNED;
		p.upd = BENCH_PAGE;
		p.value = p.upd;
		p.file_size = quick ? 1 << 20 : 64 << 20;
		if (p.file_size > rc->max_size)
			p.file_size = rc->max_size;
		p.commits = quick ? 20 : 500;
		p.min_commits = 3;
		run_point(rc, &p);
		break;
	case WL_LARGE:
		p.param = "txn_bytes";
		p.upd = BENCH_CHUNK;
		for (int k = 0; k < (quick ? N(q_large) : N(f_large)); k++) {
			p.file_size = quick ? q_large[k] : f_large[k];
			if (p.file_size > rc->max_size)
				continue;
			p.value = p.file_size;
			p.nwrites = (int)((p.file_size + BENCH_CHUNK - 1) /
					  BENCH_CHUNK);
			p.commits = quick ? 3 : (int)((256ULL << 20) /
						      p.file_size);
			if (p.commits < 2)
				p.commits = 2;
			if (p.commits > 20)
				p.commits = 20;
			p.min_commits = 2;
			run_point(rc, &p);
		}
		break;
	case WL_MANY:
		p.param = "writes_per_txn";
		p.upd = BENCH_PAGE;
		p.file_size = quick ? 1 << 20 : 64 << 20;
		if (p.file_size > rc->max_size)
			p.file_size = rc->max_size;
		for (int k = 0; k < (quick ? N(q_many) : N(f_many)); k++) {
			p.nwrites = quick ? q_many[k] : f_many[k];
			p.value = (uint64_t)p.nwrites;
			p.commits = quick ? 5 : 20000 / p.nwrites;
			if (p.commits < 3)
				p.commits = 3;
			if (p.commits > 200)
				p.commits = 200;
			p.min_commits = 2;
			run_point(rc, &p);
		}
		break;
	case WL_CONC:
		p.param = "writers";
		p.upd = BENCH_PAGE;
		p.nwrites = 1;
		p.file_size = quick ? 1 << 20 : 16 << 20;
		for (int m = CM_THR_ONE; m <= CM_PROC_SEP; m++) {
			p.mode = (enum conc_mode)m;
			for (int k = 0; k < (quick ? N(q_writers) :
					     N(f_writers)); k++) {
				p.writers = quick ? q_writers[k] : f_writers[k];
				p.value = (uint64_t)p.writers;
				/* per writer: --ops, for the steady state */
				p.commits = rc->o->ops > 0 ? rc->o->ops
							   : quick ? 10 : 200;
				p.min_commits = 3;
				run_point(rc, &p);
			}
		}
		break;
	case WL_BULK:
		/* 256 MiB (--quick 4 MiB), one load a repetition */
		p.param = "load_bytes";
		p.upd = BENCH_CHUNK;
		p.file_size = quick ? 4 << 20 : 256 << 20;
		if (p.file_size > rc->max_size)
			p.file_size = rc->max_size;
		p.value = p.file_size;
		p.nwrites = (int)((p.file_size + BENCH_CHUNK - 1) / BENCH_CHUNK);
		p.commits = 1;
		run_point(rc, &p);
		break;
	case WL_RECOVERY:
		p.param = "journal_bytes";
		p.upd = BENCH_CHUNK;
		for (int k = 0; k < (quick ? N(q_jrnl) : N(f_jrnl)); k++) {
			p.file_size = quick ? q_jrnl[k] : f_jrnl[k];
			if (p.file_size > rc->max_size)
				continue;
			p.value = p.file_size;
			p.nwrites = (int)((p.file_size + BENCH_CHUNK - 1) /
					  BENCH_CHUNK);
			p.commits = 1;
			run_point(rc, &p);
		}
		break;
	default:
		break;
	}
#undef N
}

/* ---- the machine ----------------------------------------------------------- */

static void read_first(const char *path, const char *key, char *out,
		       size_t len)
{
	char line[512];
	FILE *f = fopen(path, "r");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, strlen(key)) == 0) {
			char *v = strchr(line, ':');
			v = v ? v + 1 : line + strlen(key);
			while (*v == ' ' || *v == '\t')
				v++;
			v[strcspn(v, "\n")] = '\0';
			snprintf(out, len, "%s", v);
			break;
		}
	}
	fclose(f);
}

static void describe(struct bench_env *e, const char *dir)
{
	struct utsname u;
	struct statfs sf;
	struct stat st;
	char line[1024], mem[64] = "";
	FILE *f;
	size_t best = 0;
	time_t now = time(NULL);

	if (uname(&u) == 0)
		snprintf(e->kernel, sizeof(e->kernel), "Linux %s %s",
			 u.release, u.machine);
	read_first("/proc/cpuinfo", "model name", e->cpu, sizeof(e->cpu));
	e->ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
	read_first("/proc/meminfo", "MemTotal", mem, sizeof(mem));
	e->mem_gib = atof(mem) / 1048576.0;
	/* A virtual machine that reports free pages to its host gets freed
	 * page cache back slowly: workloads that free much of it (the
	 * exchange method) measure the host, not the library. */
	e->page_order = -1;
	f = fopen("/sys/module/page_reporting/parameters/"
		  "page_reporting_order", "r");
	if (f) {
		if (fscanf(f, "%d", &e->page_order) != 1)
			e->page_order = -1;
		fclose(f);
	}
	snprintf(e->dir, sizeof(e->dir), "%s", dir);
	if (statfs(dir, &sf) == 0) {
		const char *n = oa__fs_name((unsigned long)sf.f_type);
		if (n)
			snprintf(e->fs, sizeof(e->fs), "%s", n);
		else
			snprintf(e->fs, sizeof(e->fs), "0x%lx",
				 (unsigned long)sf.f_type);
	}
	if (stat(dir, &st) == 0) {
		g_devmaj = major(st.st_dev);
		g_devmin = minor(st.st_dev);
		snprintf(line, sizeof(line), "/sys/dev/block/%u:%u/stat",
			 g_devmaj, g_devmin);
		g_have_dev = access(line, R_OK) == 0;
	}
	/* the mount: longest mount point that is a prefix of DIR */
	f = fopen("/proc/self/mountinfo", "r");
	while (f && fgets(line, sizeof(line), f)) {
		char mp[512], src[256];
		char *dash = strstr(line, " - ");
		if (sscanf(line, "%*s %*s %*s %*s %511s", mp) != 1 || !dash ||
		    sscanf(dash + 3, "%*s %255s", src) != 1)
			continue;
		size_t l = strlen(mp);
		if (strncmp(dir, mp, l) == 0 && (dir[l] == '/' ||
		    dir[l] == '\0' || l == 1) && l >= best) {
			best = l;
			snprintf(e->mount, sizeof(e->mount), "%s", mp);
			snprintf(e->dev, sizeof(e->dev), "%s", src);
		}
	}
	if (f)
		fclose(f);
	read_first("/proc/loadavg", "", e->load_start, sizeof(e->load_start));
	strftime(e->started, sizeof(e->started), "%Y-%m-%dT%H:%M:%SZ",
		 gmtime(&now));
}

/* ---- main ------------------------------------------------------------------ */

static void remove_tree(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[4400];

	if (!d)
		return;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		unlink(p);
	}
	closedir(d);
	rmdir(dir);
}

static int method_wanted(const struct bench_opts *o, const struct bench_alt *a)
{
	if (!o->methods)
		return 1;	/* auto + every method: unusable ones reported */
	return wanted(o->methods, a->name + strlen("oatomic-"));
}

int bench_main(const struct bench_opts *o)
{
	static struct bench_report rep;
	struct runcfg rc;
	struct bench_alt *all[BENCH_MAXALTS];
	const char *base = o->dir;
	char tmpl[4096];
	int nall;
	double t0 = bench_now();

	memset(&rc, 0, sizeof(rc));
	rc.o = o;
	rc.rep = &rep;
	rc.reps = o->reps ? o->reps : (o->quick ? 2 : 3);
	if (rc.reps > MAXREPS)
		rc.reps = MAXREPS;
	rc.budget = o->budget > 0 ? o->budget : (o->quick ? 0.5 : 3.0);
	rc.max_size = o->max_size ? o->max_size : 4ULL << 30;
	if (!base) {
		base = getenv("TMPDIR");
		if (!base || !*base)
			base = "/tmp";
	}
	snprintf(tmpl, sizeof(tmpl), "%s/oatomic-bench.XXXXXX", base);
	if (!mkdtemp(tmpl)) {
		fprintf(stderr, "oatomic: %s: cannot make a scratch directory: "
			"%s\n", base, strerror(errno));
		return 1;
	}
	if (!realpath(tmpl, g_dir))
		snprintf(g_dir, sizeof(g_dir), "%s", tmpl);
	g_dirfd = open(g_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	describe(&rep.env, g_dir);
	rep.env.quick = o->quick;
	rep.env.reps = rc.reps;

	nall = bench_alts_init(all, BENCH_MAXALTS);
	for (int i = 0; i < nall; i++) {
		struct bench_alt *a = all[i];
		int want = a->method >= 0 ? method_wanted(o, a)
					  : wanted(o->baselines, a->name);
		if (!want)
			continue;
		a->usable = !a->probe || a->probe(a, g_dir) == 0;
		rc.alts[rc.nalts++] = a;
	}
	rep.alts = rc.alts;
	rep.nalts = rc.nalts;
	bench_print_head(&rep, o->format);
	for (int w = 0; w < WL_N; w++)
		if (wanted(o->workloads, wl_name[w]))
			run_workload(&rc, (enum wl)w);
	for (const char *e = BENCH_EVERYDAY; *e; ) {
		char name[32];
		size_t l = strcspn(e, ",");
		snprintf(name, sizeof(name), "%.*s", (int)l, e);
		if (wanted(o->workloads, name) &&
		    bench_everyday(o, &rep, rc.alts, rc.nalts, name))
			rc.failed = 1;
		e += l + (e[l] == ',');
	}
	if (wanted(o->workloads, "mmap") &&
	    bench_mmap(o, &rep, rc.alts, rc.nalts))
		rc.failed = 1;
	if (wanted(o->workloads, "run") && bench_run(o, &rep))
		rc.failed = 1;
	read_first("/proc/loadavg", "", rep.env.load_end,
		   sizeof(rep.env.load_end));
	rep.env.seconds = bench_now() - t0;
	bench_print_tail(&rep, o->format);
	bench_alts_done();
	close(g_dirfd);
	if (o->keep)
		fprintf(stderr, "oatomic: bench: kept %s\n", g_dir);
	else
		remove_tree(g_dir);
	free(rep.rows);
	return rc.failed ? 1 : 0;
}
