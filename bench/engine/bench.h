/*
 * bench.h - the engine of `oatomic bench`: workloads, alternatives, reports.
 *
 * Layout:
 *   alts.c    the alternatives: oatomic (once per method), and the baselines
 *             doing the same logical update (pwrite+fdatasync in place, copy
 *             + fsync + rename, SQLite rollback and WAL, LMDB, RWF_ATOMIC);
 *   run.c     the workloads, the alternating runner, the meters;
 *   report.c  table, CSV and JSON.
 * tools/cmd_bench.c parses the options and calls bench_main().
 *
 * Every alternative stores the same data: a file of file_size bytes seen as
 * 4 KiB pages.  An update (off, len) is page aligned, except in the small
 * workload's "unaligned" point, which the alternatives that store whole
 * pages (ALT_WHOLE_PAGES) sit out; SQLite and LMDB store each page as one
 * row / record keyed by its page number.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef OA_BENCH_H
#define OA_BENCH_H

#include <stddef.h>
#include <stdint.h>

#define BENCH_PAGE	4096u
#define BENCH_CHUNK	(1u << 20)	/* largest single write */
#define BENCH_MAXALTS	16

struct bench_upd {
	uint64_t off;
	uint32_t len;		/* multiple of BENCH_PAGE, <= BENCH_CHUNK */
	uint32_t data;		/* offset of the bytes in the payload buffer */
};

/* What one alternative can do (bench_alt.caps). */
#define ALT_RECOVER	0x1	/* has a log that a crash leaves to replay */
#define ALT_ONE_WRITE	0x2	/* only single-write transactions (RWF_ATOMIC) */
#define ALT_NO_THREADS_SAME_FILE 0x4	/* one data set twice in a process: no */
#define ALT_WHOLE_PAGES	0x8	/* stores whole aligned pages only (records
				 * keyed by page number, O_DIRECT) */

struct bench_alt;
struct bench_handle;

struct bench_alt {
	const char *name;
	const char *desc;
	int method;		/* enum oa_method, -1 for a baseline */
	unsigned caps;
	int usable;		/* after probe */
	char why[200];		/* why not usable */
	/* filled by the probe: largest single RWF_ATOMIC write, etc. */
	uint32_t unit_min, unit_max;
	/* what the library said it uses (oatomic) */
	int actual_method;
	int (*probe)(struct bench_alt *a, const char *dir);
	/* Make the data set at PATH: SIZE bytes of pages, durable. */
	int (*create)(struct bench_alt *a, const char *path, uint64_t size);
	struct bench_handle *(*open)(struct bench_alt *a, const char *path);
	/* One transaction: the N updates, atomically and durably. */
	int (*txn)(struct bench_handle *h, const struct bench_upd *u, int n,
		   const unsigned char *payload);
	int (*close)(struct bench_handle *h);
	void (*destroy)(struct bench_alt *a, const char *path);
	/* After a crash: make the data set consistent (time is measured). */
	int (*recover)(struct bench_alt *a, const char *path);
	/* Prepare the next txn in this process to die at its commit point
	 * (oatomic: commit record durable, nothing applied), or to leave its
	 * log unreplayed (SQLite WAL: no checkpoint). */
	void (*crash_setup)(struct bench_handle *h);
	/* Counters the alternative keeps itself: 1 if it has them. */
	int app_counts;
	/* The bulk workload: load SIZE bytes of pages into a new data set at
	 * PATH in one transaction; *US the time until it is durable (work the
	 * alternative leaves for later, a WAL checkpoint, done after it and
	 * not counted).  NULL: the alternative has no bulk load. */
	int (*load)(struct bench_alt *a, const char *path, uint64_t size,
		    double *us);
};

/* Counters of the baselines' own calls (alts.c), summed over threads. */
struct bench_appctr {
	uint64_t flushes;
	uint64_t bytes;
};
void bench_appctr_get(const struct bench_alt *a, struct bench_appctr *out);
/* The same for oatomic (the library's seam, oa__stats) or the baselines. */
void bench_appctr_of(int oatomic, struct bench_appctr *out);

/* The baselines' calls, counted (alts.c): a whole pwrite (bytes), fsync and
 * fdatasync (a flush each), fsync of the directory PATH is in (opened and
 * closed, as programs do). */
int bench_pwrite(int fd, const void *buf, size_t n, off_t off);
int bench_fsync(int fd);
/* A call that makes its data durable itself (an RWF_DSYNC write, a DSYNC
 * range exchange): counted as one flush. */
void bench_flush_counted(void);
/* A whole pread, not counted (copies read, they do not write). */
int bench_pread(int fd, void *buf, size_t n, off_t off);
int bench_fdatasync(int fd);
int bench_fsync_dir_of(const char *path);
/* A plain file of SIZE bytes of the initial pages, synced (set-up). */
int bench_make_plain(const char *path, uint64_t size);

/* The meters every workload reads before and after what it times (run.c). */
struct bench_meter {
	struct bench_appctr app;	/* the alternative's own counts */
	uint64_t io_wbytes;		/* /proc/self/io write_bytes */
	uint64_t dev_flushes, dev_sectors;	/* the block device's */
	int dev_ok;
	double cpu_s;			/* the process's CPU time, user+sys */
};
void bench_meter_read(int oatomic, struct bench_meter *m);
void bench_peak_reset(void);	/* VmHWM from now */
double bench_peak_kib(void);	/* VmHWM, KiB; -1: unknown */
void bench_settle(void);	/* syncfs of the scratch directory */
double bench_now(void);		/* CLOCK_MONOTONIC, seconds */
/* The P-quantile (0..1) of V[0..N), sorting V. */
double bench_quantile(double *v, int n, double p);
const char *bench_dir(void);	/* the scratch directory */

/* The alternatives (alts.c). */
int bench_alts_init(struct bench_alt **out, int max);
void bench_alts_done(void);

/* Options (cmd_bench.c fills them). */
enum bench_format { BF_TABLE, BF_CSV, BF_JSON };

struct bench_opts {
	const char *dir;	/* NULL: a scratch directory under $TMPDIR */
	int quick;
	int reps;		/* 0: default */
	enum bench_format format;
	const char *methods;	/* NULL: auto + every method that opens */
	const char *baselines;	/* NULL: all */
	const char *workloads;	/* NULL: all */
	uint64_t max_size;	/* 0: the ranges (4 GiB files) */
	double budget;		/* seconds per alternative per rep, 0: default */
	int keep;
	int progress;		/* a line on stderr per point (csv, json) */
	/* the everyday workloads (everyday.c) */
	int ops;		/* operations per alternative, 0: default */
	uint64_t sizes[8];	/* replace: the content sizes */
	int nsizes;		/* 0: 64 B, 64 KiB, 1 MiB */
	/* mmap (mapbench.c): the points to run, BENCH_DIRTY_* bits; 0: all */
	unsigned dirty;
};

#define BENCH_DIRTY_1	1u
#define BENCH_DIRTY_10	2u
#define BENCH_DIRTY_100	4u
#define BENCH_DIRTY_RAMP 8u

#define BENCH_WORKLOADS "small,large,many,concurrent,recovery,bulk," \
			BENCH_EVERYDAY ",mmap,run"
#define BENCH_EVERYDAY	"open,oneshot,replace,change,fill,frag,read"

/* Run the benchmark; returns a tool exit status. */
int bench_main(const struct bench_opts *o);

/* ---- results (run.c fills them, report.c prints them) ---- */

struct bench_row {
	const char *workload;
	const char *alt;
	const char *param;	/* name of the x value */
	uint64_t value;		/* x: update size, txn size, writers, ... */
	uint64_t file_size;
	const char *mode;	/* "-", "threads/one-file", ... */
	int reps;
	uint64_t commits;	/* total over reps */
	uint64_t txn_bytes;	/* logical bytes per commit */
	double lat_med, lat_min, lat_max;	/* median per-commit latency, us:
						 * median over reps, min, max */
	double lat_p99;		/* us, median over reps */
	double cps, cps_min, cps_max;		/* commits per second */
	double mbs;		/* MB/s (10^6) of logical bytes committed */
	double flushes;		/* per commit, counted by the alternative; <0: n/a */
	double wamp;		/* bytes written per byte committed, ditto */
	double io_wamp;		/* /proc/self/io write_bytes per byte */
	double dev_flushes;	/* device flush requests per commit; <0 n/a */
	double dev_wamp;	/* device bytes written per byte committed */
	double peak_kib;	/* peak RSS (VmHWM) during the rep, KiB */
	double vs_floor;	/* lat_med / lat_med of "inplace"; <0: n/a */
	/* The everyday workloads (everyday.c): one operation (open .. close)
	 * is what the latency and the per-commit figures count; <0: n/a. */
	int per_op;		/* 1: an everyday row */
	double lat_p90;		/* us, over every operation */
	double bytes_per_op;	/* bytes written, as the alternative counts */
	double vs_base;		/* lat_med / the workload's baseline's */
	double left_files;	/* the library's files beside the data file */
	double left_bytes;	/* and their disk usage (du), after the run */
	double cpu_us;		/* CPU time (user+system) of the process(es)
				 * per commit or operation, us; <0: n/a */
	const char *status;	/* "ok", "n/a", "skipped", "failed" */
	char note[200];
};

struct bench_env {
	char kernel[160];
	char cpu[128];
	int ncpu;
	double mem_gib;
	int page_order;		/* free page reporting to the host: its
				 * order; -1: the machine does not report */
	char dir[4096];
	char fs[32];
	char dev[256];
	char mount[512];
	char load_start[64], load_end[64];
	char started[32];
	int quick, reps;
	double seconds;
};

struct bench_report {
	struct bench_env env;
	struct bench_alt **alts;
	int nalts;
	struct bench_row *rows;
	int nrows, cap;
};

/* A new row, every figure -1 (not measured). */
struct bench_row *bench_add_row(struct bench_report *r);
void bench_print(const struct bench_report *r, enum bench_format f);
/* One row as it is finished (table mode prints as it goes). */
void bench_print_row_live(const struct bench_report *r,
			  const struct bench_row *row, enum bench_format f);
void bench_print_head(const struct bench_report *r, enum bench_format f);
void bench_print_tail(const struct bench_report *r, enum bench_format f);

/* The everyday workloads (everyday.c): WORKLOAD, one of BENCH_EVERYDAY,
 * with the usable oatomic alternatives among ALTS and the workload's own
 * baseline; rows added to REP.  Returns 1 if an alternative failed. */
int bench_everyday(const struct bench_opts *o, struct bench_report *rep,
		   struct bench_alt *const *alts, int nalts,
		   const char *workload);

/* The mmap workload (mapbench.c): commits of stores through a mapping,
 * against msync, a reflink snapshot per commit and a whole write-back. */
int bench_mmap(const struct bench_opts *o, struct bench_report *rep,
	       struct bench_alt *const *alts, int nalts);

/* The run workload (runbench.c): a program's pwrite + fsync under
 * `oatomic run`, against oa_pwrite + oa_commit, in place, and unmatched. */
int bench_run(const struct bench_opts *o, struct bench_report *rep);
/* `oatomic bench --run-worker ...`: the program it runs (runbench.c). */
int bench_run_worker(int argc, char **argv);

#endif
