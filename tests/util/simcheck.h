/*
 * simcheck.h - workloads on the simulated disk (sim.h) with their oracle:
 * the harness keeps, per file, the last acknowledged contents and the
 * contents of a commit in flight; at every seam call that may change what a
 * power cut leaves it takes a snapshot together with the states then
 * allowed.  sc_check() cuts the power of a snapshot one way, runs the
 * library's recovery through the simulator, and checks:
 *   - recovery succeeds (no EUCLEAN, no EIO);
 *   - each file is its acknowledged state or the in-flight one (the new
 *     one wherever oa_commit had returned 0; either after a latched EIO);
 *     the files of a group in flight all the one or all the other, also
 *     when only one of them was recovered;
 *   - a second recovery changes nothing on the disk;
 *   - (sometimes) the recovered file takes one more transaction.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef OA_SIMCHECK_H
#define OA_SIMCHECK_H

#include "sim.h"
#include "testutil.h"

#define SC_MAXF 2
#define SC_MAXH 4
#define SC_MAXOPS 64

struct sc_state {
	unsigned char *b;
	size_t n;
	bool absent;        /* the file does not exist */
};

struct sc_file {
	const char *path;
	struct sc_state acked;
	struct sc_state infl;   /* valid when has_infl */
	bool has_infl;
	bool absent_ok;         /* created, but not yet durable by oa_open */
	int grp;                /* the in-flight state is part of a group
				 * (oa_commit_group) with every file of the
				 * same grp: all new or all old */
};

struct sc_op {
	bool trunc;
	uint64_t off, len;      /* write; trunc: len = new size */
	uint64_t seed;
};

struct sc_handle {
	oa_file *f;
	unsigned char *map;     /* sc_store's mapping (SC_MAPLEN), or NULL */
	int fi;
	struct sc_op ops[SC_MAXOPS];
	int nops;
};

struct sc_snap {
	struct sim_fs *fs;
	struct sc_file file[SC_MAXF];
	long call;
	const char *what;
};

struct sc {
	struct sim_fs *fs;
	struct sc_file file[SC_MAXF];
	int nfiles;
	struct sc_handle h[SC_MAXH];
	/* snapshots taken by the hook */
	struct sc_snap *snaps;
	size_t nsnaps, scap;
	bool snapshotting;
	/* outcomes */
	int fails;              /* workload-level failures (oa_* unexpected) */
	bool latched;           /* a commit failed with a latched EIO */
	bool last_commit_ok;
};

/* Start: a fresh disk with directory /d and files (PATHS; CONTENT sizes
 * given by SIZES, -1: absent), durable. */
void sc_init(struct sc *s, int nfiles, const char *const *paths,
	     const long *sizes);
void sc_fini(struct sc *s);
/* Snapshot at every mutating seam call from now on. */
void sc_record(struct sc *s, bool on);
/* A final snapshot (the state at the end). */
void sc_snap_now(struct sc *s, const char *what);

/* Workload steps; a failing oa_* call (when EXPECT_OK) counts as a failure
 * of the test (s->fails). */
int sc_open(struct sc *s, int fi, int flags);          /* handle index */
int sc_write(struct sc *s, int h, uint64_t off, uint64_t len, uint64_t seed);
int sc_trunc(struct sc *s, int h, uint64_t len);
/* A write made as stores through oa_mmap (the file grown first with
 * oa_ftruncate where it must, as a program does): the model's write. */
#define SC_MAPLEN (256u << 10)
int sc_store(struct sc *s, int h, uint64_t off, uint64_t len, uint64_t seed);
/* Returns oa_commit's result; keeps the model. */
int sc_commit(struct sc *s, int h);
/* oa_commit_group of handles HS[0..N); the model's files change together. */
int sc_commit_group(struct sc *s, const int *hs, int n);
int sc_abort(struct sc *s, int h);
int sc_close(struct sc *s, int h);
/* Power cut now with everything unflushed lost (CHOICE NULL) or as
 * given, then continue on the crashed disk (handles are gone). */
void sc_reboot(struct sc *s, const unsigned char *choice,
	       const struct sim_cfg *cfg);

/* Check one cut of snapshot SN.  Returns 0 ok, 1 violation (described on
 * stderr), 2 the state was seen before (memo hit, same verdict: ok). */
int sc_check(struct sc_snap *sn, const struct sim_cfg *cfg,
	     const unsigned char *choice, bool reopen);
/* Verify a live disk (no cut): the files as readers see them now. */
int sc_check_live(struct sc *s);
void sc_memo_clear(void);
extern unsigned long sc_recoveries;   /* distinct states recovered */
extern int sc_verbose;

/* Apply a handle's operations to a state (the model of a commit). */
void sc_apply(struct sc_state *st, const struct sc_handle *h);
void sc_state_copy(struct sc_state *dst, const struct sc_state *src);
void sc_state_free(struct sc_state *st);

#endif
