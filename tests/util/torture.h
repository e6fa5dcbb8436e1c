/*
 * torture.h - what the crash tortures share (tests/torture_kill.c,
 * tests/torture_pair.c, tests/torture_cut.c): the deterministic
 * transaction generator, the in-memory reference model, and the harness of
 * torture.c (writers, acknowledgements, the verifier, spawning).
 *
 * Transaction K of seed S is a pure function of (S, K): tort_plan() gives its
 * operations (writes and truncates), whether it is aborted, and so on, and
 * wl_fill() the bytes of each write.  Nothing depends on the file's state,
 * so a writer can start at any K and the verifier can replay any range.
 *
 * The offsets a sequence touches lie within its span (a run-time parameter,
 * 64 KiB to 1 GiB, TORT_SPAN by default): the same seed with another span is
 * another sequence, of the same byte volume (write lengths do not depend on
 * the span, so a 64 MiB span is a sparse file with big holes and truncates
 * far out, not more data).
 *
 * The model is the file's content after transaction K: a byte array of
 * capacity tort_cap(span) whose bytes beyond `size` are always zero, so
 * extending the size (by a write past the end or a growing truncate) is just
 * moving `size`.
 *
 * The generator and the data stream are workload.h's, which `oatomic demo`
 * draws from too.  The generator and the model are static inline (the
 * plans and the model are drawn and applied in the tortures' hot loops);
 * the harness is in torture.c.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef OA_TORTURE_H
#define OA_TORTURE_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "oatomic.h"
#include "workload.h"

#define TORT_KIB        1024ULL
#define TORT_MIB        (1024ULL * 1024ULL)
/* Writes start below the span; truncates go up to span + 256 KiB. */
#define TORT_SPAN       (4 * TORT_MIB)       /* the default span */
#define TORT_SPAN_MIN   (64 * TORT_KIB)
#define TORT_SPAN_MAX   (1024 * TORT_MIB)
#define TORT_MAXLEN     (256 * TORT_KIB)     /* normal write, at most */
#define TORT_BIGLEN     (512 * TORT_KIB)     /* write of a big transaction */
#define TORT_MAXOPS     24

/* The largest file a sequence of span SPAN can make. */
static inline uint64_t tort_cap(uint64_t span)
{
	return span + TORT_BIGLEN + 4 * TORT_KIB;
}

enum { TORT_WRITE = 1, TORT_TRUNC = 2 };

struct tort_op {
	int kind;          /* TORT_WRITE or TORT_TRUNC */
	int vec;           /* write: through oa_pwritev in a few pieces */
	uint64_t off;      /* write: offset */
	uint64_t len;      /* write: length; truncate: the new size */
	uint64_t dseed;    /* write: seed of the data */
};

struct tort_plan {
	uint64_t k;
	int nops;
	int aborted;       /* oa_abort instead of oa_commit */
	int big;           /* several MiB */
	int reopen;        /* close and reopen the handle after the commit */
	int check;         /* read back with oa_pread before committing */
	struct tort_op ops[TORT_MAXOPS];
};

/* The generator for transaction B of seed A (workload.h's, seeded the
 * torture's way). */
static inline struct wl_rng tort_rng_make(uint64_t a, uint64_t b)
{
	struct wl_rng r = { wl_mix(a ^ wl_mix(b + 0x632be59bd9b4e019ULL)) };
	return r;
}

/* 1 .. TORT_MAXLEN, roughly log-uniform: as many tiny writes as huge ones. */
static inline uint64_t tort_len(struct wl_rng *r)
{
	if (wl_below(r, 16) == 0)
		return TORT_MAXLEN;
	unsigned b = (unsigned)wl_below(r, 18);
	return (1ULL << b) | wl_below(r, 1ULL << b);
}

/* Transaction K of seed SEED over span SPAN (a multiple of 64 KiB).  The
 * draws do not depend on SPAN except through the offsets and the aligned
 * write's size, so the default span gives the sequences it always gave. */
static inline void tort_plan(uint64_t seed, uint64_t span, uint64_t k,
			     struct tort_plan *p)
{
	struct wl_rng r = tort_rng_make(seed, k);

	memset(p, 0, sizeof(*p));
	p->k = k;
	p->big = wl_below(&r, 12) == 0;
	p->aborted = wl_below(&r, 10) == 0;
	p->reopen = wl_below(&r, 20) == 0;
	p->check = wl_below(&r, 4) == 0;
	p->nops = p->big ? 8 + (int)wl_below(&r, TORT_MAXOPS - 8 + 1)
			 : 1 + (int)wl_below(&r, 8);
	if (!p->big && wl_below(&r, 6) == 0) {
		/* One aligned power-of-two write, 4 KiB to 256 KiB: what the
		 * kernel method sends down as a single RWF_ATOMIC write. */
		struct tort_op *o = &p->ops[0];
		unsigned shifts = 1;   /* sizes up to min(256 KiB, span) */
		while (shifts < 7 && (4096ULL << shifts) <= span)
			shifts++;
		p->nops = 1;
		o->kind = TORT_WRITE;
		o->len = 4096ULL << wl_below(&r, shifts);
		o->off = wl_below(&r, span / o->len) * o->len;
		o->vec = wl_below(&r, 4) == 0;
		o->dseed = wl_next(&r);
		return;
	}
	for (int i = 0; i < p->nops; i++) {
		struct tort_op *o = &p->ops[i];

		if (!p->big && wl_below(&r, 6) == 0) {
			o->kind = TORT_TRUNC;
			switch (wl_below(&r, 8)) {
			case 0:
				o->len = 0;
				break;
			case 1:
				o->len = wl_below(&r, 4096);
				break;
			case 2:
				o->len = wl_below(&r, span / 4096) * 4096;
				break;
			case 3: /* grow past where writes reach */
				o->len = span + wl_below(&r, TORT_MAXLEN);
				break;
			default:
				o->len = wl_below(&r, span + 1);
				break;
			}
			continue;
		}
		o->kind = TORT_WRITE;
		o->len = p->big ? 128 * TORT_KIB + wl_below(&r, 384 * TORT_KIB)
				: tort_len(&r);
		o->off = wl_below(&r, span);
		if (wl_below(&r, 4) == 0)
			o->off &= ~4095ULL;
		if (wl_below(&r, 4) == 0 && o->len >= 4096)
			o->len &= ~4095ULL;
		o->vec = wl_below(&r, 4) == 0;
		o->dseed = wl_next(&r);
	}
}

/* ---- the reference model ---------------------------------------------- */

struct tort_model {
	uint8_t *buf;      /* tort_cap(span) bytes, zero beyond size */
	uint64_t size;
	uint64_t k;        /* the transaction this is the state after */
	uint64_t span;     /* of the sequence */
};

/* calloc: the pages a small file never touches are never faulted in. */
static inline int tort_model_init(struct tort_model *m, uint64_t span)
{
	m->buf = calloc(1, (size_t)tort_cap(span));
	m->size = 0;
	m->k = 0;
	m->span = span;
	return m->buf ? 0 : -1;
}

static inline void tort_model_free(struct tort_model *m)
{
	free(m->buf);
	m->buf = NULL;
}

static inline void tort_model_copy(struct tort_model *dst,
				   const struct tort_model *src)
{
	uint64_t n = dst->size > src->size ? dst->size : src->size;

	memcpy(dst->buf, src->buf, (size_t)n);
	dst->size = src->size;
	dst->k = src->k;
}

static inline void tort_model_apply(struct tort_model *m,
				    const struct tort_plan *p)
{
	for (int i = 0; i < p->nops; i++) {
		const struct tort_op *o = &p->ops[i];

		if (o->kind == TORT_WRITE) {
			wl_fill(m->buf + o->off, o->len, o->dseed);
			if (o->off + o->len > m->size)
				m->size = o->off + o->len;
		} else {
			if (o->len < m->size)
				memset(m->buf + o->len, 0,
				       (size_t)(m->size - o->len));
			m->size = o->len;
		}
	}
	m->k = p->k;
}

/* Apply the committed transactions FROM..TO (inclusive) to M. */
static inline void tort_model_advance(struct tort_model *m, uint64_t seed,
				      uint64_t from, uint64_t to)
{
	struct tort_plan p;

	for (uint64_t k = from; k <= to; k++) {
		tort_plan(seed, m->span, k, &p);
		if (!p.aborted)
			tort_model_apply(m, &p);
	}
	if (to >= from)
		m->k = to;
}

/* The first committed transaction after K. */
static inline uint64_t tort_next_commit(uint64_t seed, uint64_t span,
					uint64_t k)
{
	struct tort_plan p;

	for (;;) {
		tort_plan(seed, span, ++k, &p);
		if (!p.aborted)
			return k;
	}
}

/* First offset where content A (size SA) and B (size SB) differ, or -1. */
static inline int64_t tort_first_diff(const uint8_t *a, uint64_t sa,
				      const uint8_t *b, uint64_t sb)
{
	uint64_t n = sa < sb ? sa : sb;

	if (memcmp(a, b, (size_t)n) != 0) {
		/* find it: by blocks, then bytes */
		uint64_t i = 0;
		while (i + 4096 <= n && memcmp(a + i, b + i, 4096) == 0)
			i += 4096;
		while (i < n && a[i] == b[i])
			i++;
		return (int64_t)i;
	}
	return sa == sb ? -1 : (int64_t)n;
}

/* Read all of PATH into BUF (capacity CAP).  Returns its size, -1 with errno
 * on failure, or -2 when it is larger than CAP (then *SIZE is its size). */
static inline int64_t tort_read_file(const char *path, uint8_t *buf,
				     uint64_t cap, uint64_t *size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	uint64_t got = 0;

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	*size = (uint64_t)st.st_size;
	if (*size > cap) {
		close(fd);
		return -2;
	}
	while (got < *size) {
		ssize_t n = pread(fd, buf + got, (size_t)(*size - got),
				  (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		if (n == 0)
			break;
		got += (uint64_t)n;
	}
	close(fd);
	*size = got;
	return (int64_t)got;
}

/* ---- the harness (torture.c) ------------------------------------------- */

/* Writers and verifiers exit with: 0 pass, 1 violation or failure, 77 skip;
 * writers: 2 a library call failed, 3 the library read back something else
 * than was written, 4 (power cuts) the file system was shut down. */

/* This program's path (for tort_spawn); tort_init sets it, and ignores
 * SIGPIPE (a writer whose reader died fails its ack instead). */
extern char tort_self_exe[];
void tort_init(void);

/* Print "torture: WHAT FILE: strerror(errno)" and exit(CODE). */
void tort_die(int code, const char *what, const char *file)
	__attribute__((noreturn));
/* A number (decimal, or hex after 0x), or exit(1) naming WHAT. */
uint64_t tort_parse_u64(const char *s, const char *what);
/* A span: bytes, or with a K, M or G suffix; exit(1) if not one. */
uint64_t tort_parse_span(const char *s);

/* What a writer is told on its command line (tort_parse_wopts). */
struct tort_wopts {
	const char *file;
	uint64_t seed;
	uint64_t start;
	int ack_fd;             /* -1: none */
	const char *ack_file;
	const char *big_flag;
	int killpoint;
	uint64_t kill_after;
	uint64_t max_txns;      /* 0: forever */
	int relay_fd;           /* -1: none */
	uint64_t span;          /* of the sequence (tort_plan) */
	const char *broken;     /* the pair's writer: --broken */
	int mmap;               /* --mmap 1: half the writes are stores
				 * through oa_mmap (tort_map_store); 2: and
				 * they spill to disk past 16 pages */
};

#define TORT_WOPTS_INIT { NULL, 0, 0, -1, NULL, NULL, 0, 0, 0, -1, TORT_SPAN, \
			  NULL, 0 }

/* With --mmap, whether write OP goes through the mapping: a pure function
 * of its data seed, so the same writes do in every run of a seed. */
static inline int tort_map_store(const struct tort_op *op)
{
	return (wl_mix(op->dseed ^ 0x6d6d6170ULL) & 1) != 0;
}
/* Writer options after the positional arguments: ARGV[I..]. */
void tort_parse_wopts(struct tort_wopts *o, int argc, char **argv, int i);

/* Where a writer's acknowledgements go: 8-byte numbers to --ack-fd, lines
 * to --ack-file (fdatasync'd, after checking that the file system is not
 * shut down), else lines on standard output. */
struct tort_acker {
	int fd;
	int binary;
	int sync;
	const char *file;
};
void tort_ack_open(struct tort_acker *a, const struct tort_wopts *o);
void tort_ack_send(struct tort_acker *a, uint64_t k);
/* Exit 4 ("ack withheld") if FILE's file system was shut down (a power
 * cut by FS_IOC_SHUTDOWN, after which some calls still return 0 without
 * reaching the disk): call for every file system a durable ack covers. */
void tort_check_alive(const char *file);

/* oa_open(FILE, O_RDWR | O_CREAT), or exit(2). */
oa_file *tort_w_open(const char *file);
/* The library's writer of the sequence (`writer`, `cut`). */
int tort_run_writer(const struct tort_wopts *o);
/* The writers that are not the library: KIND good, torn or lost. */
int tort_run_mutant(const char *kind, const struct tort_wopts *o);
/* The writer modes of the programs that run the sequence (torture_kill,
 * torture_cut), ARGV[1]: `writer FILE SEED [options]`, `cut FILE SEED
 * ACKFILE [options]` (acks to a file) and `mutant KIND FILE SEED
 * [options]`.  The writer's exit status, or -1 when ARGV is none of them. */
int tort_writer_main(int argc, char **argv);

/* The verifier: what a file holds after a crash, against the model. */
enum { TORT_V_A, TORT_V_B, TORT_V_LOST, TORT_V_TORN };
extern const char *const tort_vname[];

struct tort_verifier {
	uint64_t seed;
	uint64_t span;
	struct tort_model m;    /* the state the file is at: k0, then A */
	struct tort_model p;    /* the state before A */
	struct tort_model b;    /* the state after the next commit */
	uint8_t *act;           /* the file as read */
	uint64_t act_size;
	uint8_t *act2;          /* again, after the second recovery */
	uint64_t act2_size;
	uint64_t k0, a, nb;
	int have_p;
	int missing;
	int oversize;
};

void tort_verifier_init(struct tort_verifier *v, uint64_t seed, uint64_t span);
void tort_verifier_free(struct tort_verifier *v);
int tort_check_acks(const struct tort_verifier *v, const uint64_t *acks,
		    size_t n);
int tort_read_actual(struct tort_verifier *v, const char *file, int second);
int tort_classify(struct tort_verifier *v, uint64_t a);
void tort_settle(struct tort_verifier *v, int cls);
void tort_describe(FILE *out, const struct tort_verifier *v);

/* fork and exec ARGV ("@ACK", "@RELAY": the child's ends of new pipes). */
pid_t tort_spawn(char *const *argv, int *ackfd, int *relayfd);
/* waitpid through EINTR: the status. */
int tort_wait_child(pid_t pid);
/* $OA_TEST_DIR, else a new directory under /tmp (in BUF). */
const char *tort_test_dir(char *buf, size_t n);
/* Remove a torture file and what the library left beside it. */
void tort_clean_files(const char *dir, const char *name);
/* $TORTURE_SEED, else random. */
uint64_t tort_default_seed(void);
/* The numbers in ACKFILE (one a line): the count, -1 on error. */
long tort_read_ackfile(const char *path, uint64_t **out);

#endif
