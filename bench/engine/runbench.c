/*
 * runbench.c - the run workload of `oatomic bench`: what `oatomic run`
 * costs an unmodified program.
 *
 * A worker (this binary again, `oatomic bench --run-worker`, a plain C loop
 * of pwrite(2) and fsync(2) that knows nothing of oatomic) updates random
 * 4 KiB pages of an open file; it runs in turn:
 *   run            under the preload library, the file matching: each
 *                  fsync is a commit;
 *   plain        without the preload (pwrite + fsync in place: unsafe);
 *   run-unmatched  under the preload, the file not matching (OATOMIC_MATCH
 *                  names another): the cost of the look-up alone;
 *   run-stdio      under the preload, the page written through a stdio
 *                  stream (fseeko, fwrite, fflush, then fsync): the
 *                  description is in the temporary file, as for shell
 *                  redirections and anything shared with another process;
 *   plain-stdio    the same without the preload;
 *   run-shared     as run, with a forked child holding the descriptor
 *                  the whole time: the description is shared, its
 *                  changes go through the temporary file (the case of
 *                  every shell redirection);
 * and the same update in this process through the library:
 *   oatomic        oa_pwrite + oa_commit on a handle.
 * Two modes: "4KiB+fsync" (the targets: run within 5 % of oatomic, and
 * run-unmatched within noise of plain) and "4KiB write" (pwrite alone,
 * no flush: the interposition's CPU cost shows where no flush hides it).
 * Each point alternates the alternatives REPS times and takes the median
 * of their medians; x base is run / oatomic and run-unmatched / plain.
 * Device flushes per operation come from the block device's counters, CPU
 * time, peak RSS and blocks written from the workers' rusage (they are
 * other processes); the plain worker's own calls are one fsync (or none)
 * and one byte written per byte.
 *
 * SPDX-License-Identifier: MIT
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "companion.h"
#include "oatomic.h"

extern char **environ;

enum rb_kind { RB_OA, RB_RUN, RB_PLAIN, RB_UNMATCHED, RB_STDIO, RB_PSTDIO,
	       RB_SHARED, RB_N };

static const char *const rb_name[] = { "oatomic", "run", "plain",
				       "run-unmatched", "run-stdio",
				       "plain-stdio", "run-shared" };

static uint64_t rb_rng(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* The loop both sides run: N updates of a random page, each timed (us). */
static int rb_loop(int fd, oa_file *f, FILE *fp, uint64_t size, int n,
		   int sync, uint64_t seed, double *lat)
{
	static unsigned char page[BENCH_PAGE];
	uint64_t np = size / BENCH_PAGE;
	for (int i = 0; i < n; i++) {
		uint64_t pg = rb_rng(&seed) % np;
		memset(page, (int)(seed & 0xff), 64);
		double t = bench_now();
		if (f) {
			if (oa_pwrite(f, page, BENCH_PAGE, (off_t)(pg * BENCH_PAGE)) !=
			    BENCH_PAGE || (sync && oa_commit(f) < 0))
				return -1;
		} else if (fp) {
			if (fseeko(fp, (off_t)(pg * BENCH_PAGE), SEEK_SET) < 0 ||
			    fwrite(page, BENCH_PAGE, 1, fp) != 1 || fflush(fp) < 0 ||
			    (sync && fsync(fd) < 0))
				return -1;
		} else {
			if (pwrite(fd, page, BENCH_PAGE, (off_t)(pg * BENCH_PAGE)) !=
			    BENCH_PAGE || (sync && fsync(fd) < 0))
				return -1;
		}
		lat[i] = (bench_now() - t) * 1e6;
	}
	return 0;
}

/* `oatomic bench --run-worker sync|write[-stdio|-shared] PATH N SEED`: prints
 * "MEDIAN_US P99_US TOTAL_S" of N updates, or an error; exit 0/1. */
int bench_run_worker(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "oatomic: bench --run-worker: bad arguments\n");
		return 2;
	}
	int sync = strncmp(argv[0], "sync", 4) == 0;
	int stdio = strstr(argv[0], "-stdio") != NULL;
	int shared = strstr(argv[0], "-shared") != NULL;
	int n = atoi(argv[2]);
	uint64_t seed = strtoull(argv[3], NULL, 10);
	if (n <= 0)
		return 2;
	int fd = open(argv[1], O_RDWR);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_size < BENCH_PAGE)
		return 1;
	/* a child that holds the descriptor until the loop is over */
	int hold[2] = { -1, -1 };
	pid_t child = -1;
	if (shared) {
		if (pipe(hold) < 0 || (child = fork()) < 0) {
			perror("fork");
			return 1;
		}
		if (child == 0) {
			char c;
			close(hold[1]);
			while (read(hold[0], &c, 1) < 0)
				;
			_exit(0);
		}
		close(hold[0]);
	}
	double *lat = malloc(sizeof(double) * (size_t)n);
	FILE *fp = stdio ? fdopen(fd, "r+") : NULL;
	if (stdio && !fp) {
		perror("fdopen");
		return 1;
	}
	double t0 = bench_now();
	if (!lat || rb_loop(fd, NULL, fp, (uint64_t)st.st_size, n, sync, seed,
			    lat) < 0) {
		perror("worker");
		return 1;
	}
	double total = bench_now() - t0;
	if (child > 0) {
		close(hold[1]);
		waitpid(child, NULL, 0);
	}
	if (fp ? fclose(fp) != 0 : close(fd) < 0) {
		perror("close");
		return 1;
	}
	double med = bench_quantile(lat, n, 0.5);
	printf("%.3f %.3f %.6f\n", med, bench_quantile(lat, n, 0.99), total);
	free(lat);
	return 0;
}

struct rb_res {
	double med, p99, total;
	double cpu_s;		/* user + system */
	double peak_kib;	/* peak RSS */
	double wbytes;		/* bytes the process wrote to storage */
};

/* One worker run of KIND; 0, or -1 with WHY. */
static int rb_spawn(enum rb_kind k, const char *preload, const char *path,
		    int sync, int n, uint64_t seed, struct rb_res *r,
		    char *why, size_t wn)
{
	char exe[PATH_MAX], ns[32], ss[32];
	ssize_t l = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (l <= 0) {
		snprintf(why, wn, "/proc/self/exe: %s", strerror(errno));
		return -1;
	}
	exe[l] = 0;
	snprintf(ns, sizeof(ns), "%d", n);
	snprintf(ss, sizeof(ss), "%llu", (unsigned long long)seed);
	int p[2];
	if (pipe(p) < 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		close(p[0]);
		dup2(p[1], 1);
		unsetenv("LD_PRELOAD");
		unsetenv("OATOMIC_MATCH");
		unsetenv("OATOMIC_ON_CLOSE");
		if (k != RB_PLAIN && k != RB_PSTDIO) {
			setenv("LD_PRELOAD", preload, 1);
			setenv("OATOMIC_PRELOAD", preload, 1);
		}
		if (k == RB_UNMATCHED)
			setenv("OATOMIC_MATCH", "*.no-such-file", 1);
		/* a sanitizer build of this binary: its runtime cannot be
		 * first when a preload library is (harmless otherwise) */
		if (k != RB_PLAIN && k != RB_PSTDIO) {
			const char *ao = getenv("ASAN_OPTIONS");
			char opt[1024];
			snprintf(opt, sizeof(opt), "%s%sverify_asan_link_order=0",
				 ao ? ao : "", ao && *ao ? ":" : "");
			setenv("ASAN_OPTIONS", opt, 1);
		}
		char mode[32];
		snprintf(mode, sizeof(mode), "%s%s", sync ? "sync" : "write",
			 k == RB_STDIO || k == RB_PSTDIO ? "-stdio" :
			 k == RB_SHARED ? "-shared" : "");
		char *av[] = { exe, (char *)"bench", (char *)"--run-worker",
			       mode, (char *)path, ns, ss, NULL };
		execve(exe, av, environ);
		_exit(127);
	}
	close(p[1]);
	char buf[256] = "";
	size_t got = 0;
	ssize_t m;
	while (got < sizeof(buf) - 1 &&
	       (m = read(p[0], buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)m;
	close(p[0]);
	int st;
	struct rusage ru;
	memset(&ru, 0, sizeof(ru));
	wait4(pid, &st, 0, &ru);
	r->cpu_s = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
		   (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	r->peak_kib = (double)ru.ru_maxrss;
	r->wbytes = (double)ru.ru_oublock * 512;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 ||
	    sscanf(buf, "%lf %lf %lf", &r->med, &r->p99, &r->total) != 3) {
		snprintf(why, wn, "worker (%s) failed, status %d", rb_name[k], st);
		return -1;
	}
	return 0;
}

static int rb_inproc(const char *path, int sync, int n, uint64_t seed,
		     struct rb_res *r)
{
	oa_file *f = oa_open(path, O_RDWR, 0);
	if (!f)
		return -1;
	struct stat st;
	double *lat = malloc(sizeof(double) * (size_t)n);
	if (!lat || oa_fstat(f, &st) < 0) {
		free(lat);
		oa_close(f);
		return -1;
	}
	struct bench_meter m0, m1;
	bench_peak_reset();
	bench_meter_read(1, &m0);
	double t0 = bench_now();
	int rc = rb_loop(-1, f, NULL, (uint64_t)st.st_size, n, sync, seed, lat);
	r->total = bench_now() - t0;
	bench_meter_read(1, &m1);
	r->cpu_s = m1.cpu_s - m0.cpu_s;
	r->peak_kib = bench_peak_kib();
	r->wbytes = (double)(m1.io_wbytes - m0.io_wbytes);
	if (oa_close(f) < 0)
		rc = -1;
	if (rc == 0) {
		r->med = bench_quantile(lat, n, 0.5);
		r->p99 = bench_quantile(lat, n, 0.99);
	}
	free(lat);
	return rc;
}

int bench_run(const struct bench_opts *o, struct bench_report *rep)
{
	static const uint64_t sizes[] = { 1ull << 20, 64ull << 20 };
	char preload[PATH_MAX];
	int failed = 0;
	int reps = o->reps > 0 ? o->reps : (o->quick ? 2 : 5);
	if (reps > 64)
		reps = 64;
	if (o->format == BF_TABLE)
		printf("\n== run: a program's 4 KiB pwrite (+ fsync) of random "
		       "pages under `oatomic run` (the preload library),\n"
		       "   against the same through oa_pwrite + oa_commit "
		       "(oatomic), without the preload (plain), and under\n"
		       "   it with the file not matching (run-unmatched); x base "
		       "= run / oatomic, run-unmatched / plain;\n"
		       "   %d runs alternated, medians of their medians\n", reps);
	/* The preload library, where `oatomic run` finds it. */
	int have = oa_companion("liboatomic-preload.so", "OATOMIC_PRELOAD",
				preload, NULL, 0) == 0;
	for (int zi = 0; zi < (o->quick ? 1 : 2); zi++) {
		uint64_t size = sizes[zi];
		if (o->max_size && size > o->max_size)
			break;
		for (int sync = 1; sync >= 0; sync--) {
			int n = o->ops > 0 ? o->ops :
				sync ? (o->quick ? 200 : 1000) : (o->quick ? 5000 : 20000);
			char path[4200];
			snprintf(path, sizeof(path), "%s/run.dat", bench_dir());
			if (bench_make_plain(path, size) < 0) {
				failed = 1;
				continue;
			}
			double med[RB_N][64], p99[RB_N][64], tot[RB_N][64];
			double cpu[RB_N][64], peak[RB_N] = { 0 }, wb[RB_N] = { 0 };
			struct bench_meter m0[RB_N], m1[RB_N];
			memset(m0, 0, sizeof(m0));
			memset(m1, 0, sizeof(m1));
			int ok[RB_N] = { 1, have, 1, have, have, 1, have };
			char why[RB_N][200] = { "", "", "", "", "", "", "" };
			if (!have)
				snprintf(why[RB_RUN], sizeof(why[0]), "no "
					 "liboatomic-preload.so (set "
					 "OATOMIC_PRELOAD)");
			snprintf(why[RB_UNMATCHED], sizeof(why[0]), "%s",
				 why[RB_RUN]);
			snprintf(why[RB_STDIO], sizeof(why[0]), "%s", why[RB_RUN]);
			snprintf(why[RB_SHARED], sizeof(why[0]), "%s", why[RB_RUN]);
			for (int r = 0; r < reps; r++)
				for (int k0 = 0; k0 < RB_N; k0++) {
					/* rotate who goes first */
					int k = (k0 + r) % RB_N;
					if (!ok[k])
						continue;
					struct rb_res res;
					struct bench_meter a, b;
					bench_settle();
					bench_meter_read(k == RB_OA, &a);
					int rc = k == RB_OA ?
						rb_inproc(path, sync, n, 7 + (uint64_t)r, &res) :
						rb_spawn((enum rb_kind)k, preload, path, sync,
							 n, 7 + (uint64_t)r, &res, why[k],
							 sizeof(why[k]));
					bench_meter_read(k == RB_OA, &b);
					if (rc < 0) {
						ok[k] = 0;
						if (!why[k][0])
							snprintf(why[k], sizeof(why[k]),
								 "%s", strerror(errno));
						failed = 1;
						continue;
					}
					med[k][r] = res.med;
					p99[k][r] = res.p99;
					tot[k][r] = res.total;
					cpu[k][r] = res.cpu_s;
					if (res.peak_kib > peak[k])
						peak[k] = res.peak_kib;
					wb[k] += res.wbytes;
					m0[k] = a;   /* the last run's counters */
					m1[k] = b;
				}
			double base[RB_N] = { -1, -1, -1, -1, -1, -1, -1 };
			for (int k = 0; k < RB_N; k++)
				if (ok[k]) {
					double mm[64];
					memcpy(mm, med[k], sizeof(double) * (size_t)reps);
					base[k] = bench_quantile(mm, reps, 0.5);
				}
			for (int k = 0; k < RB_N; k++) {
				struct bench_row *row = bench_add_row(rep);
				row->workload = "run";
				row->alt = rb_name[k];
				row->param = "ops";
				row->value = (uint64_t)n;
				row->file_size = size;
				row->mode = sync ? "4KiB+fsync" : "4KiB write";
				row->per_op = 0;
				if (!ok[k]) {
					row->status = have || k == RB_OA || k == RB_PLAIN ||
						      k == RB_PSTDIO ?
						"failed" : "n/a";
					snprintf(row->note, sizeof(row->note), "%.190s", why[k]);
					bench_print_row_live(rep, row, o->format);
					continue;
				}
				row->status = "ok";
				row->reps = reps;
				row->commits = (uint64_t)n * (uint64_t)reps;
				row->txn_bytes = BENCH_PAGE;
				double mm[64];
				memcpy(mm, med[k], sizeof(double) * (size_t)reps);
				row->lat_med = bench_quantile(mm, reps, 0.5);   /* sorts */
				row->lat_min = mm[0];
				row->lat_max = mm[reps - 1];
				memcpy(mm, p99[k], sizeof(double) * (size_t)reps);
				row->lat_p99 = bench_quantile(mm, reps, 0.5);
				memcpy(mm, tot[k], sizeof(double) * (size_t)reps);
				double t = bench_quantile(mm, reps, 0.5);
				row->cps = t > 0 ? n / t : -1;
				row->cps_min = mm[reps - 1] > 0 ? n / mm[reps - 1] : -1;
				row->cps_max = mm[0] > 0 ? n / mm[0] : -1;
				memcpy(mm, cpu[k], sizeof(double) * (size_t)reps);
				row->cpu_us = bench_quantile(mm, reps, 0.5) * 1e6 / n;
				row->peak_kib = peak[k];
				row->io_wamp = wb[k] / ((double)n * reps * BENCH_PAGE);
				row->mbs = t > 0 ? (double)n * BENCH_PAGE / t / 1e6 : -1;
				if (m0[k].dev_ok && m1[k].dev_ok) {
					row->dev_flushes = (double)(m1[k].dev_flushes -
						m0[k].dev_flushes) / n;
					row->dev_wamp = (double)(m1[k].dev_sectors -
						m0[k].dev_sectors) * 512 /
						((double)n * BENCH_PAGE);
				}
				if (k == RB_PLAIN || k == RB_PSTDIO) {   /* its own calls */
					row->flushes = sync ? 1 : 0;
					row->wamp = 1;
				}
				if (k == RB_OA) {
					row->flushes = (double)(m1[k].app.flushes -
						m0[k].app.flushes) / n;
					row->wamp = (double)(m1[k].app.bytes -
						m0[k].app.bytes) / ((double)n * BENCH_PAGE);
				}
				/* run against oatomic, unmatched against plain */
				int ref = k == RB_STDIO ? RB_PSTDIO :
					  k == RB_RUN || k == RB_SHARED ? RB_OA : k == RB_UNMATCHED ?
					  RB_PLAIN : k;
				row->vs_base = base[ref] > 0 && ok[ref] ?
					       row->lat_med / base[ref] : -1;
				row->vs_floor = base[RB_PLAIN] > 0 ?
						row->lat_med / base[RB_PLAIN] : -1;
				if (row->vs_base > 0 && ref != k)
					snprintf(row->note, sizeof(row->note),
						 "x%.3f of %s (runs %.1f-%.1f us)",
						 row->vs_base, rb_name[ref],
						 row->lat_min, row->lat_max);
				else
					snprintf(row->note, sizeof(row->note),
						 "runs %.1f-%.1f us", row->lat_min,
						 row->lat_max);
				bench_print_row_live(rep, row, o->format);
			}
			unlink(path);
		}
	}
	return failed;
}
