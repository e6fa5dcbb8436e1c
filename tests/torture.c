/*
 * torture.c - crash torture of oatomic: SIGKILL at random instants (and at
 * the library's kill points inside the commit protocol), and the helpers of
 * tests/powercut.sh (real power cuts with FS_IOC_SHUTDOWN on loop devices).
 *
 * A writer runs the deterministic transaction sequence of a seed (see
 * torture_common.h) on one file and acknowledges every commit that returned
 * 0.  After the crash, recovery runs, and the file must be exactly the state
 * after the last acknowledged transaction, or after the next committed one
 * (the one that may have been in flight).  Anything else is a violation:
 * "lost" when the file is the state before the acknowledged commit, "torn"
 * otherwise.
 *
 * Every round of the kill torture: the writer is SIGKILLed after a random
 * 0-30 ms (sometimes 0, sometimes longer), or dies at a kill point of the
 * commit protocol (oa__set_killpoint 1..6); in some rounds a second writer
 * holding a handle open takes over after a death past the commit point
 * (relay), in some a first recovery is itself killed.  Then oa_recover,
 * the check above, oa__check must say clean, a second oa_recover must
 * change nothing, and oa_open + oa_pread must read the same bytes.
 *
 * The sequence's offsets lie within a span (torture_common.h): the kill
 * torture splits its kills over several, a fresh file each (64 KiB, 1 MiB,
 * 4 MiB, and a sparse 64 MiB with far truncates and holes).
 *
 * `pair` is the torture of two writers on one file, with a live reader: see
 * "two writers on one file" below.
 *
 * Modes (run with no arguments: the self-tests, `kill`, then `pair`):
 *
 *   torture kill [--kills N] [--seed S] [--span S[:W][,S[:W]...]] [--dir D]
 *                [--no-selftest] [-v]
 *       N from $TORTURE_KILLS, else 1000; S from $TORTURE_SEED, else
 *       random (printed); D from $OA_TEST_DIR; spans (weights W: their
 *       share of the kills) from $TORTURE_SPANS, else 64K:3,1M:3,4M:3,64M:1.
 *   torture pair [--kills N] [--seed S] [--dir D] [--no-selftest] [-v]
 *       N rounds (from $TORTURE_PAIR_KILLS, else 400), each killing one
 *       writer, the other or both (an eighth: neither); the self-test runs
 *       a writer that splits a transaction in two commits and one that acks
 *       before it commits: the checker must see torn and lost.
 *   torture pair-writer FILE SEED W [writer options] [--broken torn|lost]
 *   torture pair-cut FILE SEED W ACKFILE [writer options]  (power cuts)
 *   torture pair-reader FILE SEED --ack-fd FD
 *   torture pair-verify FILE SEED STARTA STARTB ACKA ACKB
 *   torture selftest [--rounds N]
 *       The kill torture against deliberately broken writers of our own: it
 *       must see their violations (and none from a correct one).
 *   torture writer FILE SEED [--start K] [--ack-fd FD | --ack-file PATH]
 *                  [--big-flag PATH] [--killpoint P [--kill-after J]]
 *                  [--max-txns N] [--relay-fd FD] [--span S]
 *       Run transactions K+1, K+2, ... (K: the transaction the file is at).
 *       --relay-fd: open the file, ack 0 ("ready"), then read the 8-byte K
 *       to start after from FD (end of file: close and exit 0).
 *       Acks: 8-byte numbers to FD; or lines to PATH, fdatasync'd each (put
 *       it on another file system than FILE for power cuts); else lines on
 *       standard output.  --big-flag: write the number of each big
 *       transaction to PATH as it starts.  --killpoint: oa__set_killpoint(P)
 *       before the commit that follows J successful ones.
 *   torture cut FILE SEED ACKFILE [writer options]   (writer --ack-file)
 *   torture mutant good|torn|lost FILE SEED [writer options]
 *   torture recover FILE...                          oa_recover each
 *   torture shutdown MOUNTPOINT                      FS_IOC_SHUTDOWN, NOLOGFLUSH
 *   torture shared-cut FILE EXPECT MOUNTPOINT        the cut of blocks the
 *       file shares with the journal (tests/powercut_shared.sh): commit a
 *       1 MiB write, commit nearly all of it again in small writes, write
 *       the file's pages back, write 1 MiB more without committing and
 *       write the journal's pages back, put the committed state in EXPECT,
 *       cut (no close)
 *   torture model-init MODEL SEED [SPAN]             the model of state 0
 *   torture verify FILE SEED ACKFILE MODEL           check FILE, advance MODEL
 *                                                    (the model has the span)
 *   torture state FILE SEED K [SPAN]                 write state K to FILE
 *
 * Exit status: 0 pass, 1 violation / failure, 77 skip; writers: 2 a library
 * call failed, 3 the library read back something else than was written, 4
 * (power cuts) the file system was shut down.
 *
 * For tests/run (1000 kills and 400 pair rounds take well under this):
 * timeout: 600
 *
 * SPDX-License-Identifier: MIT
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "oatomic.h"
#include "oatomic-private.h"   /* oa__set_killpoint, oa__check */
#include "torture_common.h"

#ifndef FS_IOC_SHUTDOWN
#define FS_IOC_SHUTDOWN _IOR('X', 125, uint32_t)
#endif
#define TORT_SHUTDOWN_NOLOGFLUSH 2u

static char self_exe[PATH_MAX];

static void die_errno(int code, const char *what, const char *file)
{
	fprintf(stderr, "torture: %s %s: %s\n", what, file ? file : "",
		strerror(errno));
	exit(code);
}

static uint64_t parse_u64(const char *s, const char *what)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s || *end) {
		fprintf(stderr, "torture: bad %s: %s\n", what, s);
		exit(1);
	}
	return v;
}

/* A span: bytes, or with a K, M or G suffix; a multiple of 64 KiB from
 * TORT_SPAN_MIN to TORT_SPAN_MAX (tort_plan draws 4 KiB-aligned truncates
 * and aligned writes of up to 64 KiB below it). */
static uint64_t parse_span(const char *s)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	int sh = 0;

	if (*end == 'K' || *end == 'k')
		sh = 10;
	else if (*end == 'M' || *end == 'm')
		sh = 20;
	else if (*end == 'G' || *end == 'g')
		sh = 30;
	if (sh)
		end++;
	if (errno || end == s || *end || v > (TORT_SPAN_MAX >> sh) ||
	    (v << sh) < TORT_SPAN_MIN || (v << sh) % TORT_SPAN_MIN) {
		fprintf(stderr, "torture: bad span %s (64K to 1G, a multiple of "
			"64K)\n", s);
		exit(1);
	}
	return (uint64_t)v << sh;
}

/* "64K", "4M": the inverse of parse_span, for messages. */
static const char *span_str(char *buf, size_t n, uint64_t span)
{
	if (span % TORT_MIB == 0)
		snprintf(buf, n, "%" PRIu64 "M", (uint64_t)(span / TORT_MIB));
	else
		snprintf(buf, n, "%" PRIu64 "K", (uint64_t)(span / TORT_KIB));
	return buf;
}

/* ---- the writers -------------------------------------------------------- */

struct wopts {
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
	const char *broken;     /* pair-writer --broken */
};

struct acker {
	int fd;
	int binary;
	int sync;
	const char *file;
};

static void ack_open(struct acker *a, const struct wopts *o)
{
	a->sync = 0;
	a->binary = 0;
	a->file = o->file;
	if (o->ack_fd >= 0) {
		a->fd = o->ack_fd;
		a->binary = 1;
	} else if (o->ack_file) {
		a->fd = open(o->ack_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
			     0644);
		if (a->fd < 0)
			die_errno(2, "open ack file", o->ack_file);
		a->sync = 1;
	} else {
		a->fd = 1;
	}
}

/*
 * Power cuts are FS_IOC_SHUTDOWN while the writer runs, so the writer lives
 * on after the "cut", and some calls still succeed then without anything
 * reaching the disk (XFS: fsync of a directory whose log items the shutdown
 * aborted returns 0).  Nothing runs after a real cut: an ack must only be
 * given for what was durable before it.  So, before each durable ack, check
 * that FILE's file system is not shut down yet (open fails with EIO once it
 * is, on ext4 and XFS): if it is not, everything the writer did so far
 * completed before the cut.
 */
static void ack_check_alive(const struct acker *a)
{
	int fd = open(a->file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "torture: %s: %s: file system shut down, ack "
			"withheld\n", a->file, strerror(errno));
		exit(4);
	}
	close(fd);
}

static void ack_send(struct acker *a, uint64_t k)
{
	int r;

	if (a->sync)
		ack_check_alive(a);

	if (a->binary) {
		r = wl_write_all(a->fd, &k, sizeof(k));
	} else {
		char line[32];
		int n = snprintf(line, sizeof(line), "%" PRIu64 "\n", k);
		r = wl_write_all(a->fd, line, (size_t)n);
	}
	if (r < 0)
		die_errno(2, "write ack", NULL);
	if (a->sync && fdatasync(a->fd) < 0)
		die_errno(2, "fdatasync ack file", NULL);
}

static void big_flag(const char *path, uint64_t k)
{
	if (!path)
		return;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	dprintf(fd, "%" PRIu64 "\n", k);
	close(fd);
}

static oa_file *w_open(const char *file)
{
	oa_file *f = oa_open(file, O_RDWR | O_CREAT, 0644);
	if (!f)
		die_errno(2, "oa_open", file);
	return f;
}

static uint64_t w_size(oa_file *f, const char *file)
{
	struct stat st;
	if (oa_fstat(f, &st) < 0)
		die_errno(2, "oa_fstat", file);
	return (uint64_t)st.st_size;
}

static void w_write(oa_file *f, const struct wopts *o, const struct tort_plan *p,
		    const struct tort_op *op, uint8_t *buf, uint8_t *rb)
{
	ssize_t n;

	wl_fill(buf, op->len, op->dseed);
	if (op->vec && op->len >= 3) {
		/* two cuts at places derived from the data seed */
		uint64_t c1 = 1 + wl_mix(op->dseed) % (op->len - 1);
		uint64_t c2 = 1 + wl_mix(op->dseed + 1) % (op->len - 1);
		if (c1 > c2) {
			uint64_t t = c1;
			c1 = c2;
			c2 = t;
		}
		struct iovec iov[3] = {
			{ buf, (size_t)c1 },
			{ buf + c1, (size_t)(c2 - c1) },
			{ buf + c2, (size_t)(op->len - c2) },
		};
		n = oa_pwritev(f, iov, 3, (off_t)op->off);
	} else {
		n = oa_pwrite(f, buf, (size_t)op->len, (off_t)op->off);
	}
	if (n < 0)
		die_errno(2, "oa_pwrite", o->file);
	if ((uint64_t)n != op->len) {
		fprintf(stderr, "torture: oa_pwrite %s: txn %" PRIu64
			" returned %zd of %" PRIu64 "\n", o->file, p->k, n, op->len);
		exit(2);
	}
	if (p->check) {
		n = oa_pread(f, rb, (size_t)op->len, (off_t)op->off);
		if (n < 0)
			die_errno(2, "oa_pread", o->file);
		if ((uint64_t)n != op->len || memcmp(rb, buf, (size_t)op->len)) {
			int64_t d = tort_first_diff(rb, (uint64_t)n, buf, op->len);
			fprintf(stderr, "torture: read-your-writes: %s seed %" PRIu64
				" txn %" PRIu64 ": oa_pread(%" PRIu64 ", %" PRIu64
				") got %zd bytes, first difference at +%" PRId64 "\n",
				o->file, o->seed, p->k, op->off, op->len, n, d);
			exit(3);
		}
	}
}

static int run_writer(const struct wopts *o)
{
	struct acker a;
	struct tort_plan p;
	uint8_t *buf = malloc(TORT_BIGLEN), *rb = malloc(TORT_BIGLEN);
	uint64_t commits = 0;

	if (!buf || !rb)
		die_errno(2, "malloc", NULL);
	ack_open(&a, o);
	oa_file *f = w_open(o->file);
	uint64_t start = o->start;

	if (o->relay_fd >= 0) {
		/* relay: hold the handle open while another writer works and
		 * dies; then take over after the transaction we are told */
		uint64_t ready = 0;
		if (wl_write_all(a.fd, &ready, sizeof(ready)) < 0)
			die_errno(2, "write ready", NULL);
		ssize_t n = read(o->relay_fd, &start, sizeof(start));
		if (n == 0) {
			oa_close(f);
			free(buf);
			free(rb);
			return 0;
		}
		if (n != (ssize_t)sizeof(start))
			die_errno(2, "read relay", NULL);
	}
	uint64_t size = w_size(f, o->file);

	for (uint64_t k = start + 1;
	     !o->max_txns || k <= start + o->max_txns; k++) {
		tort_plan(o->seed, o->span, k, &p);
		if (p.big)
			big_flag(o->big_flag, k);
		uint64_t size0 = size;
		for (int i = 0; i < p.nops; i++) {
			const struct tort_op *op = &p.ops[i];
			if (op->kind == TORT_WRITE) {
				w_write(f, o, &p, op, buf, rb);
				if (op->off + op->len > size)
					size = op->off + op->len;
			} else {
				if (oa_ftruncate(f, (off_t)op->len) < 0)
					die_errno(2, "oa_ftruncate", o->file);
				size = op->len;
			}
		}
		if (p.check && w_size(f, o->file) != size) {
			fprintf(stderr, "torture: %s seed %" PRIu64 " txn %" PRIu64
				": oa_fstat size %" PRIu64 ", expected %" PRIu64 "\n",
				o->file, o->seed, k, w_size(f, o->file), size);
			exit(3);
		}
		if (p.aborted) {
			if (oa_abort(f) < 0)
				die_errno(2, "oa_abort", o->file);
			size = size0;
			if (p.check && w_size(f, o->file) != size) {
				fprintf(stderr, "torture: %s seed %" PRIu64 " txn %"
					PRIu64 ": after oa_abort size %" PRIu64
					", expected %" PRIu64 "\n", o->file, o->seed,
					k, w_size(f, o->file), size);
				exit(3);
			}
			continue;
		}
		if (o->killpoint && commits == o->kill_after)
			oa__set_killpoint(o->killpoint);
		if (oa_commit(f) < 0)
			die_errno(2, "oa_commit", o->file);
		commits++;
		ack_send(&a, k);
		/* points 5 and 6 are in the checkpoint, which the last close
		 * does: close after every commit once they are armed */
		if (p.reopen || (o->killpoint >= 5 && commits > o->kill_after)) {
			if (oa_close(f) < 0)
				die_errno(2, "oa_close", o->file);
			f = w_open(o->file);
			if (w_size(f, o->file) != size) {
				fprintf(stderr, "torture: %s seed %" PRIu64 " txn %"
					PRIu64 ": size after reopen %" PRIu64
					", expected %" PRIu64 "\n", o->file, o->seed,
					k, w_size(f, o->file), size);
				exit(3);
			}
		}
	}
	if (oa_close(f) < 0)
		die_errno(2, "oa_close", o->file);
	free(buf);
	free(rb);
	return 0;
}

static int dirfd_sync(const char *file)
{
	char d[PATH_MAX];
	snprintf(d, sizeof(d), "%s", file);
	char *slash = strrchr(d, '/');
	if (slash)
		*slash = 0;
	else
		snprintf(d, sizeof(d), ".");
	int fd = open(*d ? d : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int r = fsync(fd);
	close(fd);
	return r;
}

/*
 * Writers that are not the library, to show the verifier works:
 *   good  every commit writes the whole new content to a temporary file and
 *         renames it over FILE: atomic, so no violation may be reported
 *         (with --ack-file it also flushes the file and the directory, so
 *         it survives power cuts too);
 *   torn  writes in place with no protection (a kill tears transactions);
 *   lost  acknowledges a transaction before writing it.
 * --killpoint makes them die at their own worst moment in the transaction
 * after --kill-after commits: good between writing the temporary file and
 * the rename, torn after op P of the transaction, lost right after the ack.
 */
static int run_mutant(const char *kind, const struct wopts *o)
{
	struct acker a;
	struct tort_plan p;
	struct tort_model cur, work;
	char tmp[PATH_MAX];
	uint64_t commits = 0;
	int good = !strcmp(kind, "good"), lost = !strcmp(kind, "lost");
	int fd = -1;

	if (!good && !lost && strcmp(kind, "torn")) {
		fprintf(stderr, "torture: unknown mutant %s\n", kind);
		return 1;
	}
	ack_open(&a, o);
	if (good) {
		snprintf(tmp, sizeof(tmp), "%s.mutant-tmp", o->file);
		unlink(tmp);
		if (tort_model_init(&cur, o->span) ||
		    tort_model_init(&work, o->span))
			die_errno(2, "malloc", NULL);
		int64_t r = tort_read_file(o->file, cur.buf, tort_cap(o->span),
					   &cur.size);
		if (r == -1 && errno == ENOENT)
			cur.size = 0;
		else if (r < 0)
			die_errno(2, "read", o->file);
		tort_model_copy(&work, &cur);
	} else {
		fd = open(o->file, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0)
			die_errno(2, "open", o->file);
	}
	uint8_t *buf = malloc(TORT_BIGLEN);
	if (!buf)
		die_errno(2, "malloc", NULL);

	for (uint64_t k = o->start + 1;
	     !o->max_txns || k <= o->start + o->max_txns; k++) {
		tort_plan(o->seed, o->span, k, &p);
		if (p.aborted)
			continue;
		if (p.big)
			big_flag(o->big_flag, k);
		/* torn waits for a transaction of two operations or more */
		int armed = o->killpoint && commits >= o->kill_after &&
			    (good || lost || p.nops >= 2);
		if (good) {
			tort_model_apply(&work, &p);
			int t = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
				     0644);
			if (t < 0 || wl_write_all(t, work.buf, (size_t)work.size) < 0)
				die_errno(2, "write", tmp);
			/* for power cuts (acks to a file): make it durable */
			if (a.sync && fdatasync(t) < 0)
				die_errno(2, "fdatasync", tmp);
			close(t);
			if (armed)
				raise(SIGKILL);
			if (rename(tmp, o->file) < 0)
				die_errno(2, "rename", tmp);
			if (a.sync && dirfd_sync(o->file) < 0)
				die_errno(2, "fsync directory of", o->file);
			tort_model_copy(&cur, &work);
			ack_send(&a, k);
		} else {
			if (lost) {
				ack_send(&a, k);
				if (armed)
					raise(SIGKILL);
			}
			int die_after = o->killpoint < p.nops ? o->killpoint
							      : p.nops - 1;
			for (int i = 0; i < p.nops; i++) {
				const struct tort_op *op = &p.ops[i];
				if (op->kind == TORT_WRITE) {
					wl_fill(buf, op->len, op->dseed);
					if (pwrite(fd, buf, (size_t)op->len,
						   (off_t)op->off) != (ssize_t)op->len)
						die_errno(2, "pwrite", o->file);
				} else if (ftruncate(fd, (off_t)op->len) < 0) {
					die_errno(2, "ftruncate", o->file);
				}
				if (armed && i + 1 == die_after)
					raise(SIGKILL);
			}
			if (!lost)
				ack_send(&a, k);
		}
		commits++;
	}
	free(buf);
	return 0;
}

/* Writer options after the positional arguments; ARGV[I..] */
static void parse_wopts(struct wopts *o, int argc, char **argv, int i)
{
	for (; i < argc; i += 2) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v) {
			fprintf(stderr, "torture: %s needs a value\n", a);
			exit(1);
		}
		if (!strcmp(a, "--start"))
			o->start = parse_u64(v, a);
		else if (!strcmp(a, "--ack-fd"))
			o->ack_fd = (int)parse_u64(v, a);
		else if (!strcmp(a, "--ack-file"))
			o->ack_file = v;
		else if (!strcmp(a, "--big-flag"))
			o->big_flag = v;
		else if (!strcmp(a, "--killpoint"))
			o->killpoint = (int)parse_u64(v, a);
		else if (!strcmp(a, "--kill-after"))
			o->kill_after = parse_u64(v, a);
		else if (!strcmp(a, "--max-txns"))
			o->max_txns = parse_u64(v, a);
		else if (!strcmp(a, "--relay-fd"))
			o->relay_fd = (int)parse_u64(v, a);
		else if (!strcmp(a, "--span"))
			o->span = parse_span(v);
		else if (!strcmp(a, "--broken"))
			o->broken = v;
		else {
			fprintf(stderr, "torture: unknown option %s\n", a);
			exit(1);
		}
	}
}

/* ---- the verifier ------------------------------------------------------- */

enum { V_A, V_B, V_LOST, V_TORN };
static const char *const vname[] = { "ok", "ok (in-flight commit)", "LOST",
				     "TORN" };

struct verifier {
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

static void verifier_init(struct verifier *v, uint64_t seed, uint64_t span)
{
	memset(v, 0, sizeof(*v));
	v->seed = seed;
	v->span = span;
	if (tort_model_init(&v->m, span) || tort_model_init(&v->p, span) ||
	    tort_model_init(&v->b, span) ||
	    !(v->act = malloc((size_t)tort_cap(span))) ||
	    !(v->act2 = malloc((size_t)tort_cap(span))))
		die_errno(1, "malloc", NULL);
}

static void verifier_free(struct verifier *v)
{
	tort_model_free(&v->m);
	tort_model_free(&v->p);
	tort_model_free(&v->b);
	free(v->act);
	free(v->act2);
}

/* Check the acks (increasing, committed, after k0).  Returns 0 or -1. */
static int check_acks(const struct verifier *v, const uint64_t *acks, size_t n)
{
	uint64_t prev = v->m.k;
	struct tort_plan p;

	for (size_t i = 0; i < n; i++) {
		if (acks[i] <= prev) {
			fprintf(stderr, "torture: ack %" PRIu64 " after %" PRIu64
				"\n", acks[i], prev);
			return -1;
		}
		tort_plan(v->seed, v->span, acks[i], &p);
		if (p.aborted) {
			fprintf(stderr, "torture: ack of aborted txn %" PRIu64 "\n",
				acks[i]);
			return -1;
		}
		prev = acks[i];
	}
	return 0;
}

/* Read FILE into v->act (or act2). */
static int read_actual(struct verifier *v, const char *file, int second)
{
	uint8_t *buf = second ? v->act2 : v->act;
	uint64_t *size = second ? &v->act2_size : &v->act_size;
	int64_t r = tort_read_file(file, buf, tort_cap(v->span), size);

	v->missing = v->oversize = 0;
	if (r == -1 && errno == ENOENT) {
		v->missing = 1;
		*size = 0;
		return 0;
	}
	if (r == -2) {
		v->oversize = 1;
		return 0;
	}
	if (r < 0) {
		fprintf(stderr, "torture: read %s: %s\n", file, strerror(errno));
		return -1;
	}
	return 0;
}

static int matches(const struct verifier *v, const struct tort_model *m)
{
	return !v->oversize && v->act_size == m->size &&
	       !memcmp(v->act, m->buf, (size_t)m->size);
}

/*
 * v->m is the state after v->m.k.  A is the last acked transaction (k0 when
 * none).  Classify v->act; afterwards v->m is A, v->b the state after the
 * next commit NB, v->p the state before A (if have_p).
 */
static int classify(struct verifier *v, uint64_t a)
{
	struct tort_plan pl;

	v->k0 = v->m.k;
	v->a = a;
	v->have_p = 0;
	if (a > v->k0) {
		tort_model_advance(&v->m, v->seed, v->k0 + 1, a - 1);
		tort_model_copy(&v->p, &v->m);
		v->have_p = 1;
		tort_plan(v->seed, v->span, a, &pl);
		tort_model_apply(&v->m, &pl);
	}
	v->nb = tort_next_commit(v->seed, v->span, a);
	tort_model_copy(&v->b, &v->m);
	tort_plan(v->seed, v->span, v->nb, &pl);
	tort_model_apply(&v->b, &pl);

	if (v->missing)
		return a == 0 ? V_A : V_TORN;
	if (matches(v, &v->m))
		return V_A;
	if (matches(v, &v->b))
		return V_B;
	if (v->have_p && matches(v, &v->p) &&
	    tort_first_diff(v->p.buf, v->p.size, v->m.buf, v->m.size) >= 0)
		return V_LOST;
	return V_TORN;
}

/* Make v->m the state the file was found in. */
static void settle(struct verifier *v, int cls)
{
	if (cls == V_B) {
		struct tort_model t = v->m;
		v->m = v->b;
		v->b = t;
	}
}

static void hexdump8(FILE *out, const char *label, const uint8_t *buf,
		     uint64_t size, int64_t off)
{
	fprintf(out, "    %s:", label);
	for (int64_t i = off; i < off + 8; i++) {
		if (i >= 0 && (uint64_t)i < size)
			fprintf(out, " %02x", buf[i]);
		else
			fprintf(out, " --");
	}
	fputc('\n', out);
}

static void describe(FILE *out, const struct verifier *v)
{
	struct tort_plan pl;
	const struct tort_model *cand[3] = { &v->m, &v->b, v->have_p ? &v->p : NULL };
	const char *cname[3] = { "acked", "next", "before-acked" };

	if (v->missing)
		fprintf(out, "  file is missing\n");
	else if (v->oversize)
		fprintf(out, "  file has size %" PRIu64 ", larger than any state\n",
			v->act_size);
	else
		fprintf(out, "  file: size %" PRIu64 "\n", v->act_size);
	for (int c = 0; c < 3; c++) {
		const struct tort_model *m = cand[c];
		if (!m)
			continue;
		int64_t d = v->oversize ? 0 : tort_first_diff(v->act, v->act_size,
							      m->buf, m->size);
		fprintf(out, "  %s state (after txn %" PRIu64 "): size %" PRIu64
			", first difference at %" PRId64 "\n", cname[c], m->k,
			m->size, d);
		if (d >= 0 && !v->oversize) {
			hexdump8(out, "file    ", v->act, v->act_size, d);
			hexdump8(out, "expected", m->buf, m->size, d);
		}
	}
	for (uint64_t k = v->a + 1; k <= v->nb; k++) {
		tort_plan(v->seed, v->span, k, &pl);
		fprintf(out, "  txn %" PRIu64 "%s%s: %d ops\n", k,
			pl.aborted ? " (aborted)" : "", pl.big ? " (big)" : "",
			pl.nops);
		for (int i = 0; i < pl.nops; i++) {
			const struct tort_op *o = &pl.ops[i];
			if (o->kind == TORT_WRITE)
				fprintf(out, "    pwrite%s off %" PRIu64 " len %" PRIu64
					" (end %" PRIu64 ")\n", o->vec ? "v" : "",
					o->off, o->len, o->off + o->len);
			else
				fprintf(out, "    ftruncate %" PRIu64 "\n", o->len);
		}
	}
}

/* ---- the kill torture ----------------------------------------------------- */

struct kcfg {
	const char *dir;
	uint64_t seed;
	long rounds;
	const char *mutant;     /* NULL: the library */
	int verbose;
	uint64_t span;
};

struct kres {
	long rounds, commits, ok_a, ok_b, torn, lost, kp_rounds, kp_hits;
	long zero_delay;
	long rec_killed, rec_died_early;
	long relay_rounds, relay_commits;
	long kp_hit_at[8], kp_tried_at[8];
	uint64_t final_k;
};

/* fork and exec ARGV, in which "@ACK" and "@RELAY" stand for the child's
 * ends of a new ack pipe (*ACKFD: ours) and, if RELAYFD, of a relay pipe
 * (*RELAYFD: ours). */
static pid_t spawn(char *const *argv, int *ackfd, int *relayfd)
{
	int ap[2], rp[2] = { -1, -1 };
	char s_a[16], s_r[16];
	char *av[40];
	int n;

	if (pipe2(ap, O_CLOEXEC) < 0 || (relayfd && pipe2(rp, O_CLOEXEC) < 0))
		die_errno(1, "pipe", NULL);
	snprintf(s_a, sizeof(s_a), "%d", ap[1]);
	snprintf(s_r, sizeof(s_r), "%d", rp[0]);
	for (n = 0; argv[n] && n < 39; n++)
		av[n] = !strcmp(argv[n], "@ACK") ? s_a
			: !strcmp(argv[n], "@RELAY") ? s_r : argv[n];
	av[n] = NULL;
	/* vfork: a fork would copy the page tables of our models (five
	 * times 64 MiB with the largest span), for an exec */
	pid_t pid = vfork();
	if (pid < 0)
		die_errno(1, "vfork", NULL);
	if (pid == 0) {
		fcntl(ap[1], F_SETFD, 0);
		if (relayfd)
			fcntl(rp[0], F_SETFD, 0);
		execv(self_exe, av);
		_exit(127);
	}
	close(ap[1]);
	*ackfd = ap[0];
	if (relayfd) {
		close(rp[0]);
		*relayfd = rp[1];
	}
	return pid;
}

struct acklist {
	uint64_t *v;
	size_t n, cap;
};

static void acklist_add(struct acklist *l, uint64_t k)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 256;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		if (!l->v)
			die_errno(1, "realloc", NULL);
	}
	l->v[l->n++] = k;
}

/*
 * Read 8-byte acks from FD into L until end of file (the child is gone) or
 * DEADLINE (then SIGKILL PID and read on to the end).  With UNTIL_READY,
 * return 1 as soon as an ack 0 ("ready") comes, without killing.  Returns 1
 * if the child closed the pipe (died, or exited) before the deadline, else
 * 0.  Ack 0 is never added to L.  Closes FD unless it returns for ready.
 */
static int collect(pid_t pid, int fd, uint64_t deadline, struct acklist *l,
		   int until_ready)
{
	int eof = 0, sent = 0, early = 0;
	unsigned char part[8];
	size_t partn = 0;

	for (;;) {
		uint64_t now = wl_now_us();
		if (!sent && now >= deadline) {
			if (until_ready)
				return 0;
			kill(pid, SIGKILL);
			sent = 1;
		}
		if (eof)
			break;
		int tmo = sent ? -1 : (int)((deadline - now + 999) / 1000);
		struct pollfd pf = { fd, POLLIN, 0 };
		int pr = poll(&pf, 1, tmo);
		if (pr < 0 && errno != EINTR)
			die_errno(1, "poll", NULL);
		if (pr <= 0)
			continue;
		/* byte by byte when waiting for ready: leave the rest */
		unsigned char rbuf[4096];
		ssize_t got = read(fd, rbuf, until_ready ? 8 - partn : sizeof(rbuf));
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			eof = 1;
			early = !sent;
			continue;
		}
		for (ssize_t i = 0; i < got; i++) {
			part[partn++] = rbuf[i];
			if (partn < 8)
				continue;
			partn = 0;
			uint64_t k;
			memcpy(&k, part, 8);
			if (k == 0) {
				if (until_ready)
					return 1;
				continue;
			}
			acklist_add(l, k);
		}
	}
	close(fd);
	return early;
}

static int wait_child(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			die_errno(1, "waitpid", NULL);
	return st;
}

/*
 * Run a recovery in a child (oa_recover, or with OPEN oa_open + oa_close),
 * with kill point KP armed, and SIGKILL it after DELAY us.  Returns 1 if it
 * died of its kill point (or finished) before that, 0 if our kill stopped
 * it, -1 if it failed (MAY_BE_MISSING: ENOENT is no failure).
 */
static int killed_recovery(const char *file, int kp, int open, uint64_t delay,
			   int may_be_missing)
{
	pid_t pid = fork();
	if (pid < 0)
		die_errno(1, "fork", NULL);
	if (pid == 0) {
		if (kp)
			oa__set_killpoint(kp);
		if (open) {
			oa_file *f = oa_open(file, O_RDWR, 0);
			if (!f || oa_close(f) < 0)
				goto failed;
		} else if (oa_recover(file) < 0) {
			goto failed;
		}
		_exit(0);
failed:
		if (errno == ENOENT && may_be_missing)
			_exit(0);
		fprintf(stderr, "torture: interrupted recovery: %s %s: %s\n",
			open ? "oa_open" : "oa_recover", file, strerror(errno));
		_exit(1);
	}
	uint64_t t0 = wl_now_us();
	int st, early = 0;
	for (;;) {
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid) {
			early = 1;
			break;
		}
		if (wl_now_us() - t0 >= delay) {
			kill(pid, SIGKILL);
			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
			break;
		}
		struct timespec ts = { 0, 100000 };
		nanosleep(&ts, NULL);
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) != 0)
		return -1;
	return early;
}

/* oa_open the file read-only and read it all with oa_pread: it must be what
 * the plain reads saw (v->act). */
static int lib_read_check(struct verifier *v, const char *file)
{
	oa_file *f = oa_open(file, O_RDONLY, 0);
	struct stat st;
	uint64_t got = 0;

	if (!f) {
		if (errno == ENOENT && v->missing)
			return 0;
		fprintf(stderr, "torture: oa_open(O_RDONLY) %s after recovery: "
			"%s\n", file, strerror(errno));
		return -1;
	}
	if (oa_fstat(f, &st) < 0) {
		fprintf(stderr, "torture: oa_fstat %s: %s\n", file, strerror(errno));
		oa_close(f);
		return -1;
	}
	if ((uint64_t)st.st_size != v->act_size) {
		fprintf(stderr, "torture: %s: oa_fstat size %" PRIu64 " but the "
			"file has %" PRIu64 " bytes\n", file,
			(uint64_t)st.st_size, v->act_size);
		oa_close(f);
		return -1;
	}
	while (got < v->act_size) {
		ssize_t n = oa_pread(f, v->act2 + got, (size_t)(v->act_size - got),
				     (off_t)got);
		if (n <= 0) {
			fprintf(stderr, "torture: oa_pread %s at %" PRIu64 ": %s\n",
				file, got, n < 0 ? strerror(errno) : "early EOF");
			oa_close(f);
			return -1;
		}
		got += (uint64_t)n;
	}
	int64_t d = tort_first_diff(v->act, v->act_size, v->act2, got);
	if (d >= 0) {
		fprintf(stderr, "torture: %s: oa_pread differs from the file's "
			"bytes at %" PRId64 "\n", file, d);
		oa_close(f);
		return -1;
	}
	if (oa_close(f) < 0) {
		fprintf(stderr, "torture: oa_close %s: %s\n", file, strerror(errno));
		return -1;
	}
	return 0;
}

static int round_failed(const struct kcfg *c, long round, const char *file,
			const char *fmt, const char *detail)
{
	fprintf(stderr, "torture kill: round %ld (seed %" PRIu64 "): %s %s\n",
		round, c->seed, fmt, detail ? detail : "");
	fprintf(stderr, "  file kept: %s (and its journals beside it)\n", file);
	return 1;
}

/*
 * The kill loop.  Library mode: stops at the first violation and returns 1.
 * Mutant mode: counts violations in *R and returns 0 unless the harness
 * itself failed.
 */
static int kill_loop(const struct kcfg *c, struct kres *r)
{
	char file[PATH_MAX];
	struct verifier v;
	uint64_t *acks = NULL;
	size_t acks_cap = 0;

	memset(r, 0, sizeof(*r));
	snprintf(file, sizeof(file), "%s/torture-%s.dat", c->dir,
		 c->mutant ? c->mutant : "kill");
	verifier_init(&v, c->seed, c->span);

	for (long round = 0; round < c->rounds; round++) {
		struct wl_rng rr = tort_rng_make(c->seed ^ 0x6b696c6cULL,
						   (uint64_t)round);
		int use_kp = wl_below(&rr, 3) == 0;
		if (c->mutant)
			use_kp = round % 2 == 0;
		int kp = 1 + (int)wl_below(&rr, 6);
		uint64_t kafter = wl_below(&rr, 4);
		uint64_t delay;
		switch (wl_below(&rr, 20)) {
		case 0:
			delay = 0;
			break;
		case 1: case 2: case 3:
			delay = wl_below(&rr, 1000);
			break;
		case 4: case 5:
			delay = 1000 + wl_below(&rr, 4000);
			break;
		default:
			delay = wl_below(&rr, 30001);
			break;
		}
		if (wl_below(&rr, 20) == 0)   /* now and then a long run */
			delay = 30000 + wl_below(&rr, 170000);
		/* a third of the rounds: a recovery (oa_recover, or oa_open and
		 * oa_close) that is itself killed, at random or at a kill point
		 * of the replay or the checkpoint, before the real one */
		int kill_rec = !c->mutant && wl_below(&rr, 3) == 0;
		static const int rec_kps[] = { 0, 0, 3, 4, 5, 6 };
		int rec_kp = rec_kps[wl_below(&rr, 6)];
		uint64_t rec_delay = wl_below(&rr, 2) ? wl_below(&rr, 2000)
						       : 2000 + wl_below(&rr, 28000);
		int rec_open = (int)wl_below(&rr, 2);
		if (use_kp)
			delay = 300000;   /* until it dies, or 0.3 s */
		else if (delay == 0)
			r->zero_delay++;

		/* relay rounds: a second writer holds a handle open while the
		 * first dies at a kill point after its commit point (2..4);
		 * then it commits the following transactions, and must first
		 * finish the dead one's (I10) */
		int relay = !c->mutant && use_kp && kp >= 2 && kp <= 4 &&
			    wl_below(&rr, 2) == 0;
		uint64_t relay_txns = 1 + wl_below(&rr, 4);
		/* half of them: killed at random; the rest must finish */
		uint64_t relay_delay = wl_below(&rr, 2) ? wl_below(&rr, 50000)
							 : 0;
		uint64_t k0 = v.m.k;

		char s_seed[32], s_start[32], s_kp[16], s_ka[32], s_rt[16];
		char s_span[32];
		snprintf(s_seed, sizeof(s_seed), "%" PRIu64, c->seed);
		snprintf(s_span, sizeof(s_span), "%" PRIu64, c->span);
		snprintf(s_start, sizeof(s_start), "%" PRIu64, k0);
		snprintf(s_kp, sizeof(s_kp), "%d", kp);
		snprintf(s_ka, sizeof(s_ka), "%" PRIu64, kafter);
		snprintf(s_rt, sizeof(s_rt), "%" PRIu64, relay_txns);
		struct acklist al = { acks, 0, acks_cap };

		pid_t pid2 = -1;
		int afd2 = -1, rfd2 = -1;
		if (relay) {
			char *argv2[] = { self_exe, (char *)"writer", file, s_seed,
					  (char *)"--start", s_start,
					  (char *)"--ack-fd", (char *)"@ACK",
					  (char *)"--relay-fd", (char *)"@RELAY",
					  (char *)"--max-txns", s_rt,
					  (char *)"--span", s_span, NULL };
			pid2 = spawn(argv2, &afd2, &rfd2);
			if (!collect(pid2, afd2, wl_now_us() + 10000000, &al, 1)) {
				int st2 = wait_child(pid2);
				char d[64];
				snprintf(d, sizeof(d), "(status 0x%x)", st2);
				verifier_free(&v);
				free(al.v);
				return round_failed(c, round, file, "the relay "
						    "writer did not get ready", d);
			}
		}

		char *argv[20];
		int n = 0;
		argv[n++] = self_exe;
		if (c->mutant) {
			argv[n++] = (char *)"mutant";
			argv[n++] = (char *)c->mutant;
		} else {
			argv[n++] = (char *)"writer";
		}
		argv[n++] = file;
		argv[n++] = s_seed;
		argv[n++] = (char *)"--start";
		argv[n++] = s_start;
		argv[n++] = (char *)"--ack-fd";
		argv[n++] = (char *)"@ACK";
		argv[n++] = (char *)"--span";
		argv[n++] = s_span;
		if (use_kp) {
			argv[n++] = (char *)"--killpoint";
			argv[n++] = s_kp;
			argv[n++] = (char *)"--kill-after";
			argv[n++] = s_ka;
		}
		argv[n] = NULL;

		int afd;
		pid_t pid = spawn(argv, &afd, NULL);
		int died_first = collect(pid, afd, wl_now_us() + delay, &al, 0);
		int st = wait_child(pid);
		if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
			char d[64];
			snprintf(d, sizeof(d), "(status 0x%x, start %" PRIu64 ")",
				 st, k0);
			verifier_free(&v);
			free(al.v);
			if (pid2 > 0) {
				kill(pid2, SIGKILL);
				wait_child(pid2);
			}
			return round_failed(c, round, file,
					    "the writer did not die by SIGKILL", d);
		}
		r->rounds++;
		if (use_kp) {
			r->kp_rounds++;
			/* died of its own SIGKILL before the deadline */
			if (died_first) {
				r->kp_hits++;
				r->kp_hit_at[kp]++;
			}
			r->kp_tried_at[kp]++;
		}
		r->commits += (long)al.n;
		if (relay) {
			if (died_first) {
				/* the dead writer's last transaction is committed
				 * (kill point after the flush): the relay goes on
				 * after it */
				uint64_t a1 = al.n ? al.v[al.n - 1] : k0;
				uint64_t nb = tort_next_commit(c->seed, c->span,
								 a1);
				acklist_add(&al, nb);
				if (wl_write_all(rfd2, &nb, sizeof(nb)) < 0)
					die_errno(1, "write relay", NULL);
				r->relay_rounds++;
			}
			close(rfd2);
			size_t before = al.n;
			int must_finish = !died_first || !relay_delay;
			int finished = collect(pid2, afd2, wl_now_us() +
					       (must_finish ? 5000000 : relay_delay),
					       &al, 0);
			if (must_finish && !finished) {
				wait_child(pid2);
				fprintf(stderr, "torture kill: round %ld seed %"
					PRIu64 ": the relay writer (a handle open "
					"before the first writer died in its commit "
					"at kill point %d) did not finish %s "
					"transactions in 5 s: hung?\n", round,
					c->seed, kp, s_rt);
				verifier_free(&v);
				free(al.v);
				return 1;
			}
			r->relay_commits += (long)(al.n - before);
			r->commits += (long)(al.n - before);
			int st2 = wait_child(pid2);
			if (!(WIFEXITED(st2) && WEXITSTATUS(st2) == 0) &&
			    !(WIFSIGNALED(st2) && WTERMSIG(st2) == SIGKILL)) {
				char d[64];
				snprintf(d, sizeof(d), "(status 0x%x, start %" PRIu64
					 ")", st2, k0);
				verifier_free(&v);
				free(al.v);
				return round_failed(c, round, file,
						    "the relay writer failed", d);
			}
		}
		acks = al.v;
		acks_cap = al.cap;
		size_t nacks = al.n;
		if (check_acks(&v, acks, nacks) < 0) {
			verifier_free(&v);
			free(acks);
			return round_failed(c, round, file, "bad acks", NULL);
		}
		uint64_t a = nacks ? acks[nacks - 1] : k0;

		if (kill_rec) {
			int rc = killed_recovery(file, rec_kp, rec_open, rec_delay,
						 a == 0);
			if (rc < 0) {
				char d[160];
				snprintf(d, sizeof(d), "(start %" PRIu64 ", acked %"
					 PRIu64 ", %s, killpoint %d)", k0, a,
					 rec_open ? "oa_open" : "oa_recover", rec_kp);
				verifier_free(&v);
				free(acks);
				return round_failed(c, round, file,
						    "the interrupted recovery failed",
						    d);
			}
			r->rec_killed++;
			if (rc == 1)
				r->rec_died_early++;
		}

		/* recover, read, check */
		if (!c->mutant && oa_recover(file) < 0 &&
		    !(errno == ENOENT && a == 0)) {
			char d[128];
			snprintf(d, sizeof(d), "%s (start %" PRIu64 ", acked %" PRIu64
				 ")", strerror(errno), k0, a);
			verifier_free(&v);
			free(acks);
			return round_failed(c, round, file, "oa_recover failed:", d);
		}
		if (read_actual(&v, file, 0) < 0) {
			verifier_free(&v);
			free(acks);
			return 1;
		}
		/* recovered: nothing may be left pending */
		int chk;
		if (!c->mutant && !v.missing &&
		    (chk = oa__check(file, NULL, NULL)) != 0) {
			fprintf(stderr, "torture kill: round %ld seed %" PRIu64
				": after oa_recover, oa__check returns %d (%s); "
				"it says:\n", round, c->seed, chk,
				chk < 0 ? strerror(errno) : "not clean");
			oa__check(file, NULL, stderr);
			verifier_free(&v);
			free(acks);
			return 1;
		}
		int cls = classify(&v, a);
		if (c->verbose)
			fprintf(stderr, "round %ld: start %" PRIu64 " acked %" PRIu64
				" (%zu) next %" PRIu64 " %s%s delay %" PRIu64 "us:"
				" %s\n", round, k0, a, nacks, v.nb,
				use_kp ? "killpoint " : "", use_kp ? s_kp : "",
				delay, vname[cls]);
		if (cls == V_TORN || cls == V_LOST) {
			if (cls == V_TORN)
				r->torn++;
			else
				r->lost++;
			if (c->mutant) {
				/* carry on from what the mutant left: make the
				 * file the acked state again */
				int fd = open(file, O_WRONLY | O_TRUNC | O_CLOEXEC);
				if (fd < 0 || wl_write_all(fd, v.m.buf,
							(size_t)v.m.size) < 0)
					die_errno(1, "rewrite", file);
				close(fd);
				continue;
			}
			fprintf(stderr, "torture kill: VIOLATION (%s) in round %ld, "
				"seed %" PRIu64 ": writer started at txn %" PRIu64
				", last acked txn %" PRIu64 ", next commit %" PRIu64
				", %s\n", vname[cls], round, c->seed, k0, a, v.nb,
				relay ? "killpoint round with a relay writer taking "
				"over (the last acked txn is the one the first "
				"writer died committing)"
				: use_kp ? "killpoint round" : "timed kill");
			fprintf(stderr, "  writer: %s writer %s %s --span %s "
				"--start %s --ack-fd N%s%s%s%s (delay %" PRIu64
				" us)\n", self_exe, file, s_seed, s_span, s_start,
				use_kp ? " --killpoint " : "", use_kp ? s_kp : "",
				use_kp ? " --kill-after " : "", use_kp ? s_ka : "",
				delay);
			describe(stderr, &v);
			fprintf(stderr, "  repro: %s state F %s %s %s && %s writer F "
				"%s --span %s --start %s%s%s%s%s, then kill and "
				"oa_recover F\n", self_exe, s_seed, s_start, s_span,
				self_exe, s_seed, s_span, s_start,
				use_kp ? " --killpoint " : "", use_kp ? s_kp : "",
				use_kp ? " --kill-after " : "", use_kp ? s_ka : "");
			fprintf(stderr, "  file kept: %s\n", file);
			verifier_free(&v);
			free(acks);
			return 1;
		}
		if (cls == V_A)
			r->ok_a++;
		else
			r->ok_b++;

		if (!c->mutant) {
			/* recovery is idempotent */
			if (oa_recover(file) < 0 && !(errno == ENOENT && v.missing)) {
				verifier_free(&v);
				free(acks);
				return round_failed(c, round, file,
						    "second oa_recover failed:",
						    strerror(errno));
			}
			if (read_actual(&v, file, 1) < 0) {
				verifier_free(&v);
				free(acks);
				return 1;
			}
			if (v.act2_size != v.act_size ||
			    memcmp(v.act, v.act2, (size_t)v.act_size)) {
				fprintf(stderr, "torture kill: round %ld seed %"
					PRIu64 ": the second oa_recover changed "
					"the file: size %" PRIu64 " -> %" PRIu64
					", first difference at %" PRId64 "\n",
					round, c->seed, v.act_size, v.act2_size,
					tort_first_diff(v.act, v.act_size, v.act2,
							v.act2_size));
				verifier_free(&v);
				free(acks);
				return 1;
			}
			/* and the library's readers see the same */
			if (lib_read_check(&v, file) < 0) {
				fprintf(stderr, "torture kill: round %ld seed %"
					PRIu64 ": start %" PRIu64 ", acked %" PRIu64
					"\n", round, c->seed, k0, a);
				verifier_free(&v);
				free(acks);
				return 1;
			}
		}
		settle(&v, cls);
	}
	r->final_k = v.m.k;
	verifier_free(&v);
	free(acks);
	return 0;
}

static const char *test_dir(char *buf, size_t n)
{
	const char *d = getenv("OA_TEST_DIR");
	if (d && *d)
		return d;
	snprintf(buf, n, "/tmp/oa-torture-XXXXXX");
	if (!mkdtemp(buf))
		die_errno(1, "mkdtemp", buf);
	return buf;
}

/* Remove the torture file of a loop and whatever the library left beside
 * it (.NAME.oa, .NAME.oaj-K, mutant temporaries). */
static void clean_files(const char *dir, const char *name)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	unlink(p);
	snprintf(p, sizeof(p), "%s/%s.mutant-tmp", dir, name);
	unlink(p);
	snprintf(p, sizeof(p), "%s/.%s.oa", dir, name);
	unlink(p);
	for (int k = 0; k < 64; k++) {
		snprintf(p, sizeof(p), "%s/.%s.oaj-%d", dir, name, k);
		unlink(p);
	}
}

static int selftest(const char *dir, uint64_t seed, long rounds)
{
	static const char *const kinds[] = { "good", "torn", "lost" };
	int bad = 0;

	for (int i = 0; i < 3; i++) {
		struct kcfg c = { dir, seed + (uint64_t)i, rounds, kinds[i], 0,
				  TORT_SPAN };
		struct kres r;
		char name[64];
		snprintf(name, sizeof(name), "torture-%s.dat", kinds[i]);
		clean_files(dir, name);
		uint64_t t0 = wl_now_us();
		if (kill_loop(&c, &r))
			return 1;
		int ok = i == 0 ? r.torn + r.lost == 0
			: i == 1 ? r.torn > 0 : r.lost > 0;
		printf("selftest %s writer: rounds=%ld commits=%ld torn=%ld "
		       "lost=%ld (%.1fs): %s\n", kinds[i], r.rounds, r.commits,
		       r.torn, r.lost, (wl_now_us() - t0) / 1e6,
		       ok ? (i ? "violations detected, as they must be"
			       : "no false alarm")
			  : "WRONG: the verifier is broken");
		if (!ok)
			bad = 1;
		clean_files(dir, name);
	}
	return bad;
}

static uint64_t default_seed(void)
{
	const char *s = getenv("TORTURE_SEED");
	if (s && *s)
		return parse_u64(s, "TORTURE_SEED");
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return wl_mix((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^
			(uint64_t)getpid()) % 1000000000ULL;
}

static void kres_add(struct kres *t, const struct kres *r)
{
	t->rounds += r->rounds;
	t->commits += r->commits;
	t->ok_a += r->ok_a;
	t->ok_b += r->ok_b;
	t->torn += r->torn;
	t->lost += r->lost;
	t->kp_rounds += r->kp_rounds;
	t->kp_hits += r->kp_hits;
	t->zero_delay += r->zero_delay;
	t->rec_killed += r->rec_killed;
	t->rec_died_early += r->rec_died_early;
	t->relay_rounds += r->relay_rounds;
	t->relay_commits += r->relay_commits;
	for (int p = 0; p < 8; p++) {
		t->kp_hit_at[p] += r->kp_hit_at[p];
		t->kp_tried_at[p] += r->kp_tried_at[p];
	}
}

#define TORT_NSPANS_MAX 8
/* The spans of the kill torture by default: a file that fits in a few
 * blocks, the old 4 MiB, and a sparse 64 MiB one (holes, far truncates).
 * SPAN:W weighs a span's share of the kills: a round of the 64 MiB one costs
 * ~6 times one of 4 MiB (the verifier reads, copies and compares the whole
 * file a few times), so it gets a tenth of them. */
static const char default_spans[] = "64K:3,1M:3,4M:3,64M:1";

/* A comma-separated list of spans (SPAN or SPAN:WEIGHT) into SPANS and
 * WEIGHTS; returns how many. */
static int parse_spans(const char *list, uint64_t *spans, long *weights)
{
	char buf[256], *save = NULL;
	int n = 0;

	snprintf(buf, sizeof(buf), "%s", list);
	for (char *t = strtok_r(buf, ",", &save); t;
	     t = strtok_r(NULL, ",", &save)) {
		if (n == TORT_NSPANS_MAX) {
			fprintf(stderr, "torture: at most %d spans\n",
				TORT_NSPANS_MAX);
			exit(1);
		}
		char *colon = strchr(t, ':');
		weights[n] = 1;
		if (colon) {
			*colon = 0;
			weights[n] = (long)parse_u64(colon + 1, "span weight");
		}
		spans[n++] = parse_span(t);
	}
	if (!n) {
		fprintf(stderr, "torture: no span in %s\n", list);
		exit(1);
	}
	return n;
}

/*
 * The kills are split over the spans by weight, a fresh file for each (the
 * model of a file is that of one sequence: one seed, one span); the last
 * span takes the remainder.
 */
static int cmd_kill(int argc, char **argv, int i)
{
	char tbuf[64], sb[32];
	struct kcfg c = { NULL, default_seed(), 1000, NULL, 0, TORT_SPAN };
	uint64_t spans[TORT_NSPANS_MAX];
	long weights[TORT_NSPANS_MAX], wsum = 0, done = 0;
	int nspans, do_selftest = 1;
	const char *e = getenv("TORTURE_KILLS");
	const char *spanlist = getenv("TORTURE_SPANS");

	if (e && *e)
		c.rounds = (long)parse_u64(e, "TORTURE_KILLS");
	if (!spanlist || !*spanlist)
		spanlist = default_spans;
	for (; i < argc; i++) {
		if (!strcmp(argv[i], "--kills") && i + 1 < argc)
			c.rounds = (long)parse_u64(argv[++i], "--kills");
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			c.seed = parse_u64(argv[++i], "--seed");
		else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
			c.dir = argv[++i];
		else if (!strcmp(argv[i], "--span") && i + 1 < argc)
			spanlist = argv[++i];
		else if (!strcmp(argv[i], "--no-selftest"))
			do_selftest = 0;
		else if (!strcmp(argv[i], "-v"))
			c.verbose = 1;
		else {
			fprintf(stderr, "usage: torture kill [--kills N] [--seed S] "
				"[--span S[,S...]] [--dir D] [--no-selftest] "
				"[-v]\n");
			return 1;
		}
	}
	nspans = parse_spans(spanlist, spans, weights);
	for (int si = 0; si < nspans; si++)
		wsum += weights[si];
	if (!wsum)
		wsum = weights[nspans - 1] = 1;
	if (!c.dir)
		c.dir = test_dir(tbuf, sizeof(tbuf));
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (do_selftest && selftest(c.dir, c.seed, 8))
		return 1;

	printf("torture kill: seed %" PRIu64 ", %ld kills over span %s, in %s\n",
	       c.seed, c.rounds, spanlist, c.dir);
	uint64_t t0 = wl_now_us();
	struct kres r, tot;
	long total = c.rounds;
	memset(&tot, 0, sizeof(tot));
	for (int si = 0; si < nspans; si++) {
		c.span = spans[si];
		c.rounds = si == nspans - 1 ? total - done
					    : total * weights[si] / wsum;
		done += c.rounds;
		if (!c.rounds)
			continue;
		span_str(sb, sizeof(sb), c.span);
		clean_files(c.dir, "torture-kill.dat");
		uint64_t t1 = wl_now_us();
		int rc = kill_loop(&c, &r);
		kres_add(&tot, &r);
		if (rc) {
			printf("torture kill: FAILED after %ld kills of span %s, "
			       "seed %" PRIu64 "\n", r.rounds, sb, c.seed);
			return 1;
		}
		printf("  span %s: kills=%ld commits=%ld torn=%ld lost=%ld "
		       "(%.1fs, final txn %" PRIu64 ")\n", sb, r.rounds,
		       r.commits, r.torn, r.lost, (wl_now_us() - t1) / 1e6,
		       r.final_k);
	}
	r = tot;
	double secs = (wl_now_us() - t0) / 1e6;
	printf("kills=%ld commits=%ld torn=%ld lost=%ld\n", r.rounds, r.commits,
	       r.torn, r.lost);
	printf("  (%.1fs; state = acked %ld, in-flight commit survived %ld; "
	       "zero-delay kills %ld)\n", secs, r.ok_a, r.ok_b, r.zero_delay);
	printf("  relay rounds (a second handle takes over from a dead "
	       "committer) %ld, their commits %ld\n", r.relay_rounds,
	       r.relay_commits);
	printf("  interrupted recoveries %ld (%ld finished or hit their kill "
	       "point first)\n", r.rec_killed, r.rec_died_early);
	printf("  killpoint rounds %ld, hit %ld; per point hit/tried:",
	       r.kp_rounds, r.kp_hits);
	for (int p = 1; p <= 6; p++)
		printf(" %d:%ld/%ld", p, r.kp_hit_at[p], r.kp_tried_at[p]);
	printf("\n");
	clean_files(c.dir, "torture-kill.dat");
	return 0;
}

/* ---- two writers on one file ------------------------------------------------ */

/*
 * `torture pair`: writers A (0) and B (1), each with its own handle on one
 * file, commit transactions over disjoint 1 KiB units: A owns the even
 * units, B the odd ones, of a 64 KiB file.  Transaction T of writer W
 * (pair_plan) writes W's head unit (unit W) and each other unit of W with
 * probability 1/4, or is aborted; a unit written by T holds a header (magic,
 * W, T, unit) and 992 bytes derived from them, so any unit decodes to the
 * transaction that wrote it.  W's state after T is then a pure function: each
 * of its units holds the last committed transaction up to T that wrote it
 * (zeros: none), and T is what the head unit says.  Any other combination is
 * a torn transaction of W, whatever the other writer did.
 *
 * A third handle reads the whole file with oa_pread over and over while they
 * run: every read must show each writer in one of its states, never going
 * back.  Then one writer, the other, or both are SIGKILLed (at a random
 * instant or a kill point of the commit protocol); a writer that is spared
 * must finish its transactions (a dead peer must not block it), within the
 * watchdog's 30 s.  After oa_recover, each writer's units must be its last
 * acknowledged state or, if it was killed, its next committed one.
 */
#define PAIR_UNIT       1024
#define PAIR_UNITS      64
#define PAIR_SIZE       (PAIR_UNIT * PAIR_UNITS)
#define PAIR_HDR        32
#define PAIR_WATCHDOG   30000000ULL     /* us without an ack: a deadlock */

static const char pair_magic[8] = "OAPAIR1";

static uint64_t pair_rand(uint64_t seed, int w, uint64_t t, uint64_t u)
{
	return wl_mix(seed ^ wl_mix(((uint64_t)w << 56) ^ (t << 8) ^ u ^
					0x7061697200000000ULL));
}

/* Transaction T of writer W is aborted (1 in 10); its data is written and
 * dropped with oa_abort. */
static int pair_aborted(uint64_t seed, int w, uint64_t t)
{
	return pair_rand(seed, w, t, 0xff) % 10 == 0;
}

/* Transaction T of writer W writes unit U (one of W's). */
static int pair_touches(uint64_t seed, int w, uint64_t t, uint64_t u)
{
	return u == (uint64_t)w || pair_rand(seed, w, t, u) % 4 == 0;
}

/* What unit U of W holds in W's state after T: the last committed
 * transaction up to T that wrote it, 0 for none. */
static uint64_t pair_last(uint64_t seed, int w, uint64_t u, uint64_t t)
{
	for (; t > 0; t--)
		if (pair_touches(seed, w, t, u) && !pair_aborted(seed, w, t))
			return t;
	return 0;
}

static uint64_t pair_next_commit(uint64_t seed, int w, uint64_t t)
{
	while (pair_aborted(seed, w, ++t))
		;
	return t;
}

/* The bytes of unit U as transaction T of W writes them (T 0: zeros). */
static void pair_unit(uint8_t *buf, uint64_t seed, int w, uint64_t t,
		      uint64_t u)
{
	uint64_t h[3] = { (uint64_t)w, t, u };

	if (!t) {
		memset(buf, 0, PAIR_UNIT);
		return;
	}
	memcpy(buf, pair_magic, 8);
	memcpy(buf + 8, h, sizeof(h));
	wl_fill(buf + PAIR_HDR, PAIR_UNIT - PAIR_HDR, pair_rand(seed, w, t, u) ^ 1);
}

/* The transaction unit U of W in BUF is from, or -1 if it is no unit of W's
 * (garbage, another unit's, a mix of two). */
static int64_t pair_decode(const uint8_t *buf, uint64_t seed, int w, uint64_t u)
{
	uint8_t want[PAIR_UNIT];
	uint64_t h[3];
	int zero = 1;

	for (int i = 0; i < PAIR_UNIT && zero; i++)
		zero = !buf[i];
	if (zero)
		return 0;
	memcpy(h, buf + 8, sizeof(h));
	if (memcmp(buf, pair_magic, 8) || h[0] != (uint64_t)w || h[1] == 0 ||
	    h[1] > INT64_MAX || h[2] != u)
		return -1;
	pair_unit(want, seed, w, h[1], u);
	return memcmp(want, buf, PAIR_UNIT) ? -1 : (int64_t)h[1];
}

/*
 * Which state of writer W the file image IMG (PAIR_SIZE bytes, zeros past
 * the end of the file) is in: 0 with *T, or -1 (torn) with a description in
 * WHY.
 */
static int pair_state(const uint8_t *img, uint64_t seed, int w, uint64_t *t,
		      char *why, size_t whyn)
{
	int64_t head = pair_decode(img + (size_t)w * PAIR_UNIT, seed, w, w);

	if (head < 0 || (head > 0 && pair_aborted(seed, w, (uint64_t)head))) {
		snprintf(why, whyn, "writer %c: head unit %d is %s", 'A' + w, w,
			 head < 0 ? "garbage" : "from an aborted transaction");
		return -1;
	}
	*t = (uint64_t)head;
	for (uint64_t u = (uint64_t)w + 2; u < PAIR_UNITS; u += 2) {
		int64_t got = pair_decode(img + u * PAIR_UNIT, seed, w, u);
		uint64_t want = pair_last(seed, w, u, *t);
		if (got != (int64_t)want) {
			snprintf(why, whyn, "writer %c: head unit says txn %" PRIu64
				 ", unit %" PRIu64 " holds %s%" PRId64 " instead "
				 "of %" PRIu64, 'A' + w, *t, u,
				 got < 0 ? "garbage " : "txn ", got, want);
			return -1;
		}
	}
	return 0;
}

/* The file's first PAIR_SIZE bytes through handle F, zeros past its end. */
static int pair_lib_read(oa_file *f, uint8_t *img)
{
	uint64_t got = 0;

	/* one call: a reader sees each commit whole within one oa_pread */
	ssize_t n = oa_pread(f, img, PAIR_SIZE, 0);
	if (n < 0)
		return -1;
	got = (uint64_t)n;
	memset(img + got, 0, PAIR_SIZE - got);
	return 0;
}

/*
 * `torture pair-writer FILE SEED W [writer options]`: writer W (0 or 1) of
 * the pair, from transaction --start on.  --broken torn: commit the head
 * unit on its own, then the rest (a kill in between tears it); --broken
 * lost: acknowledge a transaction before committing it.  Broken writers die
 * at that worst moment (SIGKILL) once --kill-after commits are done.
 */
static int run_pair_writer(const struct wopts *o, int w, const char *broken)
{
	struct acker a;
	uint8_t buf[PAIR_UNIT];
	uint64_t commits = 0;
	int torn = broken && !strcmp(broken, "torn");
	int lost = broken && !strcmp(broken, "lost");

	if (broken && !torn && !lost) {
		fprintf(stderr, "torture: unknown broken writer %s\n", broken);
		return 1;
	}
	ack_open(&a, o);
	oa_file *f = w_open(o->file);
	for (uint64_t t = o->start + 1;
	     !o->max_txns || t <= o->start + o->max_txns; t++) {
		int armed = broken && commits >= o->kill_after;
		int aborted = pair_aborted(o->seed, w, t);
		for (uint64_t u = (uint64_t)w; u < PAIR_UNITS; u += 2) {
			if (!pair_touches(o->seed, w, t, u))
				continue;
			pair_unit(buf, o->seed, w, t, u);
			ssize_t n = oa_pwrite(f, buf, PAIR_UNIT,
					      (off_t)(u * PAIR_UNIT));
			if (n != PAIR_UNIT)
				die_errno(2, "oa_pwrite", o->file);
			if (torn && !aborted && u == (uint64_t)w) {
				if (oa_commit(f) < 0)
					die_errno(2, "oa_commit", o->file);
				if (armed)
					raise(SIGKILL);
			}
		}
		if (aborted) {
			if (oa_abort(f) < 0)
				die_errno(2, "oa_abort", o->file);
			continue;
		}
		if (lost) {
			ack_send(&a, t);
			if (armed)
				raise(SIGKILL);
		}
		if (o->killpoint && commits == o->kill_after)
			oa__set_killpoint(o->killpoint);
		if (oa_commit(f) < 0)
			die_errno(2, "oa_commit", o->file);
		commits++;
		if (!lost)
			ack_send(&a, t);
		/* now and then a fresh handle (the checkpoint of the last
		 * close, while the other writer works) */
		if (pair_rand(o->seed, w, t, 0xfe) % 20 == 0 ||
		    (o->killpoint >= 5 && commits > o->kill_after)) {
			if (oa_close(f) < 0)
				die_errno(2, "oa_close", o->file);
			f = w_open(o->file);
		}
	}
	if (oa_close(f) < 0)
		die_errno(2, "oa_close", o->file);
	return 0;
}

/*
 * `torture pair-reader FILE SEED --ack-fd FD`: read the whole file with
 * oa_pread until killed; every read must show both writers in one of their
 * states, neither going back.  Sends the number of reads done to FD now and
 * then.  Exit 1 on a violation.
 */
static int run_pair_reader(const char *file, uint64_t seed, int fd)
{
	static uint8_t img[PAIR_SIZE];
	uint64_t last[2] = { 0, 0 }, reads = 0;
	char why[256];
	oa_file *f = oa_open(file, O_RDONLY, 0);

	if (!f)
		die_errno(2, "oa_open(O_RDONLY)", file);
	for (;;) {
		if (pair_lib_read(f, img) < 0)
			die_errno(2, "oa_pread", file);
		reads++;
		for (int w = 0; w < 2; w++) {
			uint64_t t;
			if (pair_state(img, seed, w, &t, why, sizeof(why)) < 0) {
				fprintf(stderr, "torture pair: VIOLATION (TORN, live "
					"read %" PRIu64 "): %s\n", reads, why);
				exit(1);
			}
			if (t < last[w]) {
				fprintf(stderr, "torture pair: VIOLATION (live read "
					"%" PRIu64 "): writer %c went back from txn %"
					PRIu64 " to %" PRIu64 "\n", reads, 'A' + w,
					last[w], t);
				exit(1);
			}
			last[w] = t;
		}
		if (reads % 16 == 0 && wl_write_all(fd, &reads, sizeof(reads)) < 0)
			exit(0);   /* the parent is gone */
	}
}

struct pres {
	long rounds, commits, reads, killed[2], kp_rounds, spared, in_flight;
	long torn, lost, live_torn;
};

struct pcfg {
	const char *dir;
	uint64_t seed;
	long rounds;
	const char *broken;     /* NULL: the library; else writer A's defect */
	int verbose;
};

/* Write the states T[0], T[1] of both writers to FILE through the library
 * (after a broken writer's violation: go on from its acked state). */
static void pair_reset(const char *file, uint64_t seed, const uint64_t *t)
{
	uint8_t buf[PAIR_UNIT];
	oa_file *f = w_open(file);

	for (uint64_t u = 0; u < PAIR_UNITS; u++) {
		int w = (int)(u % 2);
		pair_unit(buf, seed, w, pair_last(seed, w, u, t[w]), u);
		if (oa_pwrite(f, buf, PAIR_UNIT, (off_t)(u * PAIR_UNIT)) != PAIR_UNIT)
			die_errno(1, "oa_pwrite", file);
	}
	if (oa_commit(f) < 0 || oa_close(f) < 0)
		die_errno(1, "oa_commit", file);
}

/* Read FILE's first PAIR_SIZE bytes into IMG, zeros past its end; its size
 * in *SIZE. */
static int pair_read_file(const char *file, uint8_t *img, uint64_t *size)
{
	static uint8_t big[PAIR_SIZE + 1];
	int64_t r = tort_read_file(file, big, sizeof(big), size);

	if (r == -2 || (r >= 0 && *size > PAIR_SIZE)) {
		fprintf(stderr, "torture pair: %s has %" PRIu64 " bytes, more than "
			"any state\n", file, *size);
		return -1;
	}
	if (r < 0) {
		fprintf(stderr, "torture pair: read %s: %s\n", file, strerror(errno));
		return -1;
	}
	memcpy(img, big, (size_t)*size);
	memset(img + *size, 0, (size_t)(PAIR_SIZE - *size));
	return 0;
}

enum { P_OK, P_IN_FLIGHT, P_LOST, P_TORN };

/* Classify writer W in IMG against its last ack A (KILLED: it may have died
 * in the next commit); *T the state found. */
static int pair_classify(const uint8_t *img, uint64_t seed, int w, uint64_t a,
			 int killed, uint64_t *t, char *why, size_t whyn)
{
	if (pair_state(img, seed, w, t, why, whyn) < 0)
		return P_TORN;
	if (*t == a)
		return P_OK;
	if (killed && *t == pair_next_commit(seed, w, a))
		return P_IN_FLIGHT;
	snprintf(why, whyn, "writer %c: the file is at its txn %" PRIu64 ", last "
		 "acked %" PRIu64 "%s", 'A' + w, *t, a,
		 killed ? " (and it was killed)" : " (and it finished)");
	return *t < a ? P_LOST : P_TORN;
}

/* Kill the writers PID[2] and the reader RPID and reap them. */
static void pair_kill_all(const pid_t *pid, pid_t rpid)
{
	for (int w = 0; w < 2; w++) {
		kill(pid[w], SIGKILL);
		wait_child(pid[w]);
	}
	kill(rpid, SIGKILL);
	wait_child(rpid);
}

static int pair_loop(const struct pcfg *c, struct pres *r)
{
	static uint8_t img[PAIR_SIZE], img2[PAIR_SIZE];
	char file[PATH_MAX], why[256], s_seed[32];
	uint64_t cur[2] = { 0, 0 }, last_ack_us = wl_now_us();

	memset(r, 0, sizeof(*r));
	snprintf(file, sizeof(file), "%s/torture-pair%s%s.dat", c->dir,
		 c->broken ? "-" : "", c->broken ? c->broken : "");
	snprintf(s_seed, sizeof(s_seed), "%" PRIu64, c->seed);
	clean_files(c->dir, strrchr(file, '/') + 1);
	int cfd = open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (cfd < 0)
		die_errno(1, "create", file);
	close(cfd);

	for (long round = 0; round < c->rounds; round++) {
		struct wl_rng rr = tort_rng_make(c->seed ^ 0x70616972ULL,
						   (uint64_t)round);
		/* who dies: 0 neither, 1 A, 2 B, 3 both */
		int mode = (int)wl_below(&rr, 8);
		mode = mode == 0 ? 0 : mode <= 2 ? 1 : mode <= 4 ? 2 : 3;
		if (c->broken)
			mode = 1;       /* the broken A dies, B goes on */
		pid_t pid[2], rpid;
		int afd[2], rfd, open_fd[3];
		uint64_t deadline[2], acked[2] = { cur[0], cur[1] };
		int killed[2], kp[2] = { 0, 0 };
		char s_start[2][32], s_max[2][16], s_kp[2][16], s_ka[2][16];
		char s_w[2][4];

		char *rargv[] = { self_exe, (char *)"pair-reader", file, s_seed,
				  (char *)"--ack-fd", (char *)"@ACK", NULL };
		rpid = spawn(rargv, &rfd, NULL);
		for (int w = 0; w < 2; w++) {
			char *argv[24];
			int n = 0;
			killed[w] = mode & (1 << w);
			uint64_t delay = wl_below(&rr, 4) == 0 ? wl_below(&rr, 1000)
				       : wl_below(&rr, 30001);
			if (killed[w] && (c->broken || wl_below(&rr, 4) == 0)) {
				kp[w] = c->broken ? 0 : 1 + (int)wl_below(&rr, 6);
				delay = 300000;   /* until it dies, or 0.3 s */
			}
			deadline[w] = killed[w] ? wl_now_us() + delay : UINT64_MAX;
			snprintf(s_w[w], sizeof(s_w[w]), "%d", w);
			snprintf(s_start[w], sizeof(s_start[w]), "%" PRIu64, cur[w]);
			snprintf(s_max[w], sizeof(s_max[w]), "%" PRIu64,
				 1 + wl_below(&rr, 16));
			snprintf(s_kp[w], sizeof(s_kp[w]), "%d", kp[w]);
			snprintf(s_ka[w], sizeof(s_ka[w]), "%" PRIu64,
				 wl_below(&rr, 3));
			argv[n++] = self_exe;
			argv[n++] = (char *)"pair-writer";
			argv[n++] = file;
			argv[n++] = s_seed;
			argv[n++] = s_w[w];
			argv[n++] = (char *)"--start";
			argv[n++] = s_start[w];
			argv[n++] = (char *)"--ack-fd";
			argv[n++] = (char *)"@ACK";
			if (!killed[w]) {
				argv[n++] = (char *)"--max-txns";
				argv[n++] = s_max[w];
			}
			if (kp[w]) {
				argv[n++] = (char *)"--killpoint";
				argv[n++] = s_kp[w];
			}
			if (kp[w] || (c->broken && w == 0)) {
				argv[n++] = (char *)"--kill-after";
				argv[n++] = s_ka[w];
			}
			if (c->broken && w == 0) {
				argv[n++] = (char *)"--broken";
				argv[n++] = (char *)c->broken;
			}
			argv[n] = NULL;
			pid[w] = spawn(argv, &afd[w], NULL);
			if (kp[w])
				r->kp_rounds++;
		}

		/* collect acks until both writers are gone; kill the victims
		 * at their deadlines; the watchdog */
		unsigned char part[3][8];
		size_t partn[3] = { 0, 0, 0 };
		int sent[2] = { 0, 0 };
		open_fd[0] = afd[0];
		open_fd[1] = afd[1];
		open_fd[2] = rfd;
		uint64_t round_reads = 0;
		last_ack_us = wl_now_us();
		while (open_fd[0] >= 0 || open_fd[1] >= 0) {
			uint64_t now = wl_now_us(), next = last_ack_us +
							     PAIR_WATCHDOG;
			for (int w = 0; w < 2; w++) {
				if (!sent[w] && open_fd[w] >= 0 && now >= deadline[w]) {
					kill(pid[w], SIGKILL);
					sent[w] = 1;
				}
				if (!sent[w] && open_fd[w] >= 0 && deadline[w] < next)
					next = deadline[w];
			}
			if (now >= last_ack_us + PAIR_WATCHDOG) {
				fprintf(stderr, "torture pair: round %ld seed %" PRIu64
					": no commit from either writer in %llu s "
					"(writer A at txn %" PRIu64 " %s, B at %" PRIu64
					" %s): DEADLOCK\n", round, c->seed,
					PAIR_WATCHDOG / 1000000, acked[0],
					open_fd[0] >= 0 ? "alive" : "gone", acked[1],
					open_fd[1] >= 0 ? "alive" : "gone");
				fprintf(stderr, "  file kept: %s\n", file);
				pair_kill_all(pid, rpid);
				return 1;
			}
			struct pollfd pf[3];
			int np = 0, idx[3];
			for (int i = 0; i < 3; i++) {
				if (open_fd[i] < 0)
					continue;
				pf[np].fd = open_fd[i];
				pf[np].events = POLLIN;
				idx[np++] = i;
			}
			int tmo = (int)((next - now + 999) / 1000);
			int pr = poll(pf, (nfds_t)np, tmo);
			if (pr < 0 && errno != EINTR)
				die_errno(1, "poll", NULL);
			for (int j = 0; pr > 0 && j < np; j++) {
				int i = idx[j];
				if (!pf[j].revents)
					continue;
				unsigned char rb[512];
				ssize_t got = read(open_fd[i], rb, sizeof(rb));
				if (got < 0 && errno == EINTR)
					continue;
				if (got <= 0) {
					close(open_fd[i]);
					open_fd[i] = -1;
					continue;
				}
				for (ssize_t b = 0; b < got; b++) {
					part[i][partn[i]++] = rb[b];
					if (partn[i] < 8)
						continue;
					partn[i] = 0;
					uint64_t k;
					memcpy(&k, part[i], 8);
					if (i == 2) {
						round_reads = k;
						continue;
					}
					if (k <= acked[i] || pair_aborted(c->seed, i, k)) {
						fprintf(stderr, "torture pair: bad ack "
							"%" PRIu64 " from writer %c after %"
							PRIu64 "\n", k, 'A' + i, acked[i]);
						pair_kill_all(pid, rpid);
						return 1;
					}
					acked[i] = k;
					r->commits++;
					last_ack_us = wl_now_us();
				}
			}
		}
		/* the reader last: it saw the writers' deaths and what the
		 * survivor did after */
		kill(rpid, SIGKILL);
		int rst = wait_child(rpid);
		if (open_fd[2] >= 0)
			close(open_fd[2]);
		r->reads += (long)round_reads;
		r->rounds++;
		for (int w = 0; w < 2; w++) {
			int st = wait_child(pid[w]);
			int ok = killed[w] ? WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL
					   : WIFEXITED(st) && WEXITSTATUS(st) == 0;
			if (!ok) {
				fprintf(stderr, "torture pair: round %ld seed %" PRIu64
					": writer %c %s (status 0x%x, start %s)\n",
					round, c->seed, 'A' + w, killed[w] ?
					"did not die by SIGKILL" : "failed", st,
					s_start[w]);
				fprintf(stderr, "  file kept: %s\n", file);
				return 1;
			}
			if (killed[w])
				r->killed[w]++;
			else
				r->spared++;
		}
		int viol = 0;
		if (WIFEXITED(rst) && WEXITSTATUS(rst) == 1) {
			r->live_torn++;
			viol = 1;
			snprintf(why, sizeof(why), "the live reader saw it (above)");
		} else if (!(WIFSIGNALED(rst) && WTERMSIG(rst) == SIGKILL)) {
			fprintf(stderr, "torture pair: round %ld: the reader failed "
				"(status 0x%x)\n", round, rst);
			return 1;
		}

		uint64_t size, t[2];
		if (oa_recover(file) < 0) {
			fprintf(stderr, "torture pair: round %ld seed %" PRIu64 ": "
				"oa_recover: %s\n  file kept: %s\n", round, c->seed,
				strerror(errno), file);
			return 1;
		}
		if (pair_read_file(file, img, &size) < 0)
			return 1;
		/* (after a violation of the live reader too: the self-test
		 * shows both checks fail) */
		int cls[2];
		for (int w = 0; w < 2; w++) {
			cls[w] = pair_classify(img, c->seed, w, acked[w], killed[w],
					       &t[w], why, sizeof(why));
			if (cls[w] == P_TORN)
				r->torn++, viol = 1;
			else if (cls[w] == P_LOST)
				r->lost++, viol = 1;
			else if (cls[w] == P_IN_FLIGHT)
				r->in_flight++;
		}
		if (c->verbose)
			fprintf(stderr, "round %ld: mode %d kp %d/%d acked %" PRIu64
				"/%" PRIu64 " reads %" PRIu64 ": %s\n", round, mode,
				kp[0], kp[1], acked[0], acked[1], round_reads,
				viol ? why : "ok");
		if (viol) {
			if (c->broken) {
				pair_reset(file, c->seed, acked);
				cur[0] = acked[0];
				cur[1] = acked[1];
				continue;
			}
			fprintf(stderr, "torture pair: VIOLATION in round %ld, seed %"
				PRIu64 ": %s\n  writers started at txns %s and %s, "
				"acked %" PRIu64 " and %" PRIu64 "; %s%s\n"
				"  file kept: %s\n", round, c->seed, why, s_start[0],
				s_start[1], acked[0], acked[1],
				mode == 3 ? "both killed" : mode ? "one killed"
				: "none killed", kp[0] || kp[1] ?
				" (a kill point)" : "", file);
			return 1;
		}
		if (!c->broken) {
			int chk = oa__check(file, NULL, NULL);
			if (chk != 0) {
				fprintf(stderr, "torture pair: round %ld seed %" PRIu64
					": after oa_recover, oa__check returns %d\n",
					round, c->seed, chk);
				oa__check(file, NULL, stderr);
				return 1;
			}
			oa_file *f = oa_open(file, O_RDONLY, 0);
			if (!f || pair_lib_read(f, img2) < 0 || oa_close(f) < 0) {
				fprintf(stderr, "torture pair: oa_open + oa_pread %s "
					"after recovery: %s\n", file, strerror(errno));
				return 1;
			}
			if (memcmp(img, img2, PAIR_SIZE)) {
				fprintf(stderr, "torture pair: round %ld: oa_pread "
					"differs from the file's bytes\n", round);
				return 1;
			}
		}
		cur[0] = t[0];
		cur[1] = t[1];
	}
	clean_files(c->dir, strrchr(file, '/') + 1);
	return 0;
}

static int pair_selftest(const char *dir, uint64_t seed, long rounds)
{
	static const char *const kinds[] = { "torn", "lost" };
	int bad = 0;

	for (int i = 0; i < 2; i++) {
		struct pcfg c = { dir, seed + 10 + (uint64_t)i, rounds, kinds[i], 0 };
		struct pres r;
		uint64_t t0 = wl_now_us();
		if (pair_loop(&c, &r))
			return 1;
		int ok = i == 0 ? r.torn > 0 && r.live_torn > 0 : r.lost > 0;
		printf("pair selftest, writer A %s: rounds=%ld commits=%ld torn=%ld "
		       "(live %ld) lost=%ld (%.1fs): %s\n", kinds[i], r.rounds,
		       r.commits, r.torn, r.live_torn, r.lost,
		       (wl_now_us() - t0) / 1e6,
		       ok ? "violations detected, as they must be"
			  : "WRONG: the checker is broken");
		if (!ok)
			bad = 1;
	}
	return bad;
}

/* `torture pair-verify FILE SEED STARTA STARTB ACKA ACKB` (power cuts):
 * both writers were cut, so each may be at its last durable ack or the
 * next commit. */
static long read_ackfile(const char *path, uint64_t **out);

static int cmd_pair_verify(char **argv)
{
	static uint8_t img[PAIR_SIZE];
	uint64_t seed = parse_u64(argv[3], "seed"), a[2], t[2], size;
	int cls[2];
	long n[2];
	char why[256];

	for (int w = 0; w < 2; w++) {
		uint64_t *acks;
		a[w] = parse_u64(argv[4 + w], "start");
		n[w] = read_ackfile(argv[6 + w], &acks);
		if (n[w] < 0) {
			fprintf(stderr, "torture pair-verify: %s: %s\n", argv[6 + w],
				strerror(errno));
			return 1;
		}
		for (long i = 0; i < n[w]; i++) {
			if (acks[i] <= a[w] || pair_aborted(seed, w, acks[i])) {
				fprintf(stderr, "torture pair-verify: bad ack %" PRIu64
					" of writer %c after %" PRIu64 "\n", acks[i],
					'A' + w, a[w]);
				return 1;
			}
			a[w] = acks[i];
		}
		free(acks);
	}
	if (pair_read_file(argv[2], img, &size) < 0)
		return 1;
	for (int w = 0; w < 2; w++) {
		cls[w] = pair_classify(img, seed, w, a[w], 1, &t[w], why,
				       sizeof(why));
		if (cls[w] == P_TORN || cls[w] == P_LOST) {
			printf("VIOLATION (%s): %s seed %" PRIu64 ": %s (writers "
			       "started at %s and %s)\n", cls[w] == P_TORN ? "TORN"
			       : "LOST", argv[2], seed, why, argv[4], argv[5]);
			return 1;
		}
	}
	printf("a=%" PRIu64 " b=%" PRIu64 " acks=%ld/%ld%s%s\n", t[0], t[1],
	       n[0], n[1], cls[0] == P_IN_FLIGHT ? " A-in-flight" : "",
	       cls[1] == P_IN_FLIGHT ? " B-in-flight" : "");
	return 0;
}

static int cmd_pair(int argc, char **argv, int i)
{
	char tbuf[64];
	struct pcfg c = { NULL, default_seed(), 400, NULL, 0 };
	int do_selftest = 1;
	const char *e = getenv("TORTURE_PAIR_KILLS");

	if (e && *e)
		c.rounds = (long)parse_u64(e, "TORTURE_PAIR_KILLS");
	for (; i < argc; i++) {
		if (!strcmp(argv[i], "--kills") && i + 1 < argc)
			c.rounds = (long)parse_u64(argv[++i], "--kills");
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			c.seed = parse_u64(argv[++i], "--seed");
		else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
			c.dir = argv[++i];
		else if (!strcmp(argv[i], "--no-selftest"))
			do_selftest = 0;
		else if (!strcmp(argv[i], "-v"))
			c.verbose = 1;
		else {
			fprintf(stderr, "usage: torture pair [--kills N] [--seed S] "
				"[--dir D] [--no-selftest] [-v]\n");
			return 1;
		}
	}
	if (!c.dir)
		c.dir = test_dir(tbuf, sizeof(tbuf));
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (do_selftest) {
		printf("pair selftest: broken writers; their readers' VIOLATION "
		       "lines are expected\n");
		if (pair_selftest(c.dir, c.seed, 6))
			return 1;
	}
	printf("torture pair: seed %" PRIu64 ", %ld rounds, in %s\n", c.seed,
	       c.rounds, c.dir);
	uint64_t t0 = wl_now_us();
	struct pres r;
	if (pair_loop(&c, &r)) {
		printf("torture pair: FAILED after %ld rounds, seed %" PRIu64 "\n",
		       r.rounds, c.seed);
		return 1;
	}
	printf("pair rounds=%ld kills=%ld commits=%ld torn=%ld lost=%ld\n",
	       r.rounds, r.killed[0] + r.killed[1], r.commits, r.torn, r.lost);
	printf("  (%.1fs; killed A %ld, B %ld, at a kill point %ld; spared "
	       "writers that finished %ld; in-flight commits survived %ld; live "
	       "reads %ld)\n", (wl_now_us() - t0) / 1e6, r.killed[0],
	       r.killed[1], r.kp_rounds, r.spared, r.in_flight, r.reads);
	return 0;
}

/* ---- power-cut helpers ------------------------------------------------------ */

struct model_hdr {
	char magic[8];
	uint64_t k;
	uint64_t size;
	uint64_t seed;
	uint64_t span;     /* of the sequence: verify replays with it */
};
static const char model_magic[8] = "OATORT2";

static int model_save(const char *path, const struct tort_model *m,
		      uint64_t seed)
{
	char tmp[PATH_MAX];
	struct model_hdr h;

	memcpy(h.magic, model_magic, 8);
	h.k = m->k;
	h.size = m->size;
	h.seed = seed;
	h.span = m->span;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	/* no fsync: the model lives outside the file system that is cut (and
	 * it is 64 MiB with the largest span) */
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || wl_write_all(fd, &h, sizeof(h)) < 0 ||
	    wl_write_all(fd, m->buf, (size_t)m->size) < 0) {
		fprintf(stderr, "torture: write %s: %s\n", tmp, strerror(errno));
		return -1;
	}
	close(fd);
	if (rename(tmp, path) < 0) {
		fprintf(stderr, "torture: rename %s: %s\n", tmp, strerror(errno));
		return -1;
	}
	return 0;
}

/* The header of the model file at PATH; -1 if it is not one. */
static int model_header(const char *path, struct model_hdr *h)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int ok = fd >= 0 && pread(fd, h, sizeof(*h), 0) == (ssize_t)sizeof(*h) &&
		 !memcmp(h->magic, model_magic, 8) &&
		 h->span >= TORT_SPAN_MIN && h->span <= TORT_SPAN_MAX &&
		 h->size <= tort_cap(h->span);

	if (fd >= 0)
		close(fd);
	if (!ok)
		fprintf(stderr, "torture: bad model file %s\n", path);
	return ok ? 0 : -1;
}

/* Load the model at PATH into M, made for the span of its header. */
static int model_load(const char *path, struct tort_model *m, uint64_t *seed)
{
	struct model_hdr h;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    m->span != h.span || h.size > tort_cap(m->span) ||
	    pread(fd, m->buf, (size_t)h.size, sizeof(h)) != (ssize_t)h.size) {
		fprintf(stderr, "torture: bad model file %s\n", path);
		return -1;
	}
	close(fd);
	memset(m->buf + h.size, 0, (size_t)(tort_cap(m->span) - h.size));
	m->size = h.size;
	m->k = h.k;
	*seed = h.seed;
	return 0;
}

/* The numbers in ACKFILE (one a line).  Returns the count, -1 on error. */
static long read_ackfile(const char *path, uint64_t **out)
{
	FILE *fp = fopen(path, "re");
	uint64_t *v = NULL;
	long n = 0, cap = 0;
	char line[64];

	*out = NULL;
	if (!fp)
		return errno == ENOENT ? 0 : -1;
	while (fgets(line, sizeof(line), fp)) {
		if (!strchr(line, '\n'))
			break;          /* a torn last line: not durable */
		if (n == cap) {
			cap = cap ? 2 * cap : 256;
			v = realloc(v, (size_t)cap * sizeof(*v));
			if (!v)
				die_errno(1, "realloc", NULL);
		}
		v[n++] = strtoull(line, NULL, 10);
	}
	fclose(fp);
	*out = v;
	return n;
}

static int cmd_verify(const char *file, uint64_t seed, const char *ackfile,
		      const char *model)
{
	struct verifier v;
	struct model_hdr h;
	uint64_t mseed, *acks;

	if (model_header(model, &h) < 0)
		return 1;
	verifier_init(&v, seed, h.span);
	if (model_load(model, &v.m, &mseed) < 0)
		return 1;
	if (mseed != seed) {
		fprintf(stderr, "torture verify: model %s is of seed %" PRIu64
			", not %" PRIu64 "\n", model, mseed, seed);
		return 1;
	}
	long n = read_ackfile(ackfile, &acks);
	if (n < 0) {
		fprintf(stderr, "torture verify: %s: %s\n", ackfile, strerror(errno));
		return 1;
	}
	if (check_acks(&v, acks, (size_t)n) < 0)
		return 1;
	uint64_t k0 = v.m.k, a = n ? acks[n - 1] : k0;
	if (read_actual(&v, file, 0) < 0)
		return 1;
	int cls = classify(&v, a);
	if (cls == V_TORN || cls == V_LOST) {
		printf("VIOLATION (%s): %s seed %" PRIu64 ": writer started at txn %"
		       PRIu64 ", last durable ack %" PRIu64 ", next commit %" PRIu64
		       "\n", vname[cls], file, seed, k0, a, v.nb);
		fflush(stdout);
		describe(stdout, &v);
		return 1;
	}
	settle(&v, cls);
	if (model_save(model, &v.m, seed) < 0)
		return 1;
	printf("state=%" PRIu64 " acked=%" PRIu64 " start=%" PRIu64 " acks=%ld %s\n",
	       v.m.k, a, k0, n, cls == V_B ? "in-flight" : "acked");
	free(acks);
	verifier_free(&v);
	return 0;
}

static int cmd_model_init(const char *model, uint64_t seed, uint64_t span)
{
	struct tort_model m;
	if (tort_model_init(&m, span))
		die_errno(1, "malloc", NULL);
	int r = model_save(model, &m, seed);
	tort_model_free(&m);
	return r < 0;
}

static int cmd_state(const char *file, uint64_t seed, uint64_t k,
		     uint64_t span)
{
	struct tort_model m;
	if (tort_model_init(&m, span))
		die_errno(1, "malloc", NULL);
	tort_model_advance(&m, seed, 1, k);
	int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || wl_write_all(fd, m.buf, (size_t)m.size) < 0 || fsync(fd) < 0)
		die_errno(1, "write", file);
	close(fd);
	printf("%s: state after txn %" PRIu64 " of seed %" PRIu64 ", %" PRIu64
	       " bytes\n", file, k, seed, m.size);
	tort_model_free(&m);
	return 0;
}

static int cmd_shutdown(const char *mnt)
{
	uint32_t flags = TORT_SHUTDOWN_NOLOGFLUSH;
	int fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		die_errno(1, "open", mnt);
	if (ioctl(fd, FS_IOC_SHUTDOWN, &flags) < 0) {
		int e = errno;
		fprintf(stderr, "torture: FS_IOC_SHUTDOWN %s: %s\n", mnt,
			strerror(e));
		return e == ENOTTY || e == EOPNOTSUPP ? 77 : 1;
	}
	close(fd);
	return 0;
}

/*
 * The power cut of tests/powercut_shared.sh, one fixed sequence.  A commit
 * of 1 MiB (cloned from the journal under the clone method: the file and
 * the journal share its blocks); a commit of small writes over it, applied
 * in place, so the file's pages copy on write; those pages written back, as the
 * kernel's background writeback may do at any time: the file system now
 * holds the file's new blocks, but the change of mapping is in its log's
 * memory only.  Then 1 MiB of an uncommitted transaction into the journal,
 * written back, and the cut.  If the journal wrote over a block the file
 * still maps on disk, the file shows bytes of a transaction that never
 * committed after recovery.
 */
#define SHARED_SZ (1u << 20)
#define SHARED_GAP 200000u

static void sync_back(int fd)
{
	sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE |
			SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
}

static int cmd_shared_cut(const char *file, const char *expect, const char *mnt)
{
	unsigned char *a = malloc(SHARED_SZ), *x = malloc(SHARED_SZ),
		      *k = malloc(SHARED_SZ);
	if (!a || !x || !k)
		die_errno(1, "malloc", NULL);
	for (uint32_t i = 0; i < SHARED_SZ; i++) {
		a[i] = (unsigned char)('a' + (i >> 12) % 26);
		k[i] = (unsigned char)('A' + (i >> 12) % 26);
		x[i] = (unsigned char)('X' ^ (i >> 12));
	}
	oa_file *f = oa_open(file, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (!f)
		die_errno(1, "oa_open", file);
	if (oa_pwrite(f, a, SHARED_SZ, 0) != SHARED_SZ || oa_commit(f) < 0)
		die_errno(2, "first commit", file);
	/* All of it again but for SHARED_GAP bytes: the file's pages all copy
	 * on write, so no block of the journal stays shared (XFS copies on
	 * write around a shared block, cowextsize, so a partly shared range
	 * of the journal would be written out of place anyway); what recovery
	 * replays cannot hide the gap.  32 KiB writes from the end down: each
	 * its own small record, copied in place by the apply. */
	for (uint32_t c = SHARED_SZ / 32768; c-- > 0;) {
		uint32_t lo = c * 32768, hi = lo + 32768;
		uint32_t cut[2][2] = { { lo, hi }, { 0, 0 } };
		if (lo <= SHARED_GAP && SHARED_GAP < hi) {
			cut[0][0] = SHARED_GAP + 100;
			cut[1][0] = lo;
			cut[1][1] = SHARED_GAP;
		}
		for (int j = 0; j < 2 && cut[j][1]; j++) {
			uint32_t o = cut[j][0], n = cut[j][1] - o;
			if (oa_pwrite(f, k + o, n, o) != (ssize_t)n)
				die_errno(2, "oa_pwrite", file);
			memcpy(a + o, k + o, n);
		}
	}
	if (oa_commit(f) < 0)
		die_errno(2, "second commit", file);
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die_errno(1, "open", file);
	sync_back(fd);
	close(fd);
	if (oa_pwrite(f, x, SHARED_SZ, 0) != SHARED_SZ)
		die_errno(2, "uncommitted write", file);
	/* the journals: .NAME.oa (journal 0 is in it) and .NAME.oaj-K */
	char dir[PATH_MAX], pre[NAME_MAX + 8];
	const char *slash = strrchr(file, '/');
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - file) : 1,
		 slash ? file : ".");
	snprintf(pre, sizeof(pre), ".%s.oa", slash ? slash + 1 : file);
	DIR *d = opendir(dir);
	if (!d)
		die_errno(1, "opendir", dir);
	int nj = 0;
	for (struct dirent *e; (e = readdir(d));) {
		if (strncmp(e->d_name, pre, strlen(pre)))
			continue;
		fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			die_errno(1, "open", e->d_name);
		sync_back(fd);
		close(fd);
		nj++;
	}
	closedir(d);
	if (!nj) {
		errno = ENOENT;
		die_errno(1, "no journal beside", file);
	}
	fd = open(expect, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || wl_write_all(fd, a, SHARED_SZ) < 0 || fsync(fd) < 0)
		die_errno(1, "write", expect);
	close(fd);
	int r = cmd_shutdown(mnt);
	if (r == 0)
		_exit(0);   /* a power cut: the handle is never closed */
	return r;
}

static int cmd_recover(int argc, char **argv, int i)
{
	int rc = 0;
	for (; i < argc; i++) {
		if (oa_recover(argv[i]) < 0) {
			fprintf(stderr, "torture: oa_recover %s: %s\n", argv[i],
				strerror(errno));
			rc = 1;
		}
	}
	return rc;
}

static int usage(void)
{
	fprintf(stderr,
		"usage: torture                        (selftest + kill)\n"
		"       torture kill [--kills N] [--seed S] [--span S[,S...]] [--dir D]\n"
		"                    [--no-selftest] [-v]\n"
		"       torture selftest [--rounds N]\n"
		"       torture writer FILE SEED [--start K] [--ack-fd FD | --ack-file P]\n"
		"                      [--big-flag P] [--killpoint P [--kill-after J]] [--max-txns N]\n"
		"                      [--span S]\n"
		"       torture cut FILE SEED ACKFILE [writer options]\n"
		"       torture mutant good|torn|lost FILE SEED [writer options]\n"
		"       torture pair [--kills N] [--seed S] [--dir D] [--no-selftest] [-v]\n"
		"       torture pair-writer FILE SEED W [writer options] [--broken torn|lost]\n"
		"       torture pair-cut FILE SEED W ACKFILE [writer options]\n"
		"       torture pair-reader FILE SEED --ack-fd FD\n"
		"       torture pair-verify FILE SEED STARTA STARTB ACKA ACKB\n"
		"       torture recover FILE...\n"
		"       torture shutdown MOUNTPOINT\n"
		"       torture shared-cut FILE EXPECT MOUNTPOINT\n"
		"       torture model-init MODEL SEED [SPAN]\n"
		"       torture verify FILE SEED ACKFILE MODEL\n"
		"       torture state FILE SEED K [SPAN]\n");
	return 1;
}

int main(int argc, char **argv)
{
	ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
	if (n <= 0)
		die_errno(1, "readlink /proc/self/exe", NULL);
	self_exe[n] = 0;
	signal(SIGPIPE, SIG_IGN);

	if (argc < 2) {
		/* the suite: the kill torture, then the pair's (the kill
		 * counts from TORTURE_KILLS, TORTURE_PAIR_KILLS) */
		if (cmd_kill(argc, argv, 1))
			return 1;
		return cmd_pair(argc, argv, 1);
	}
	const char *m = argv[1];
	struct wopts o = { NULL, 0, 0, -1, NULL, NULL, 0, 0, 0, -1, TORT_SPAN,
			   NULL };

	if (!strcmp(m, "kill"))
		return cmd_kill(argc, argv, 2);
	if (!strcmp(m, "selftest")) {
		char tbuf[64];
		long rounds = 20;
		if (argc >= 4 && !strcmp(argv[2], "--rounds"))
			rounds = (long)parse_u64(argv[3], "--rounds");
		setvbuf(stdout, NULL, _IOLBF, 0);
		return selftest(test_dir(tbuf, sizeof(tbuf)), default_seed(), rounds);
	}
	if (!strcmp(m, "writer") && argc >= 4) {
		o.file = argv[2];
		o.seed = parse_u64(argv[3], "seed");
		parse_wopts(&o, argc, argv, 4);
		return run_writer(&o);
	}
	if (!strcmp(m, "cut") && argc >= 5) {
		o.file = argv[2];
		o.seed = parse_u64(argv[3], "seed");
		o.ack_file = argv[4];
		parse_wopts(&o, argc, argv, 5);
		return run_writer(&o);
	}
	if (!strcmp(m, "mutant") && argc >= 5) {
		o.file = argv[3];
		o.seed = parse_u64(argv[4], "seed");
		parse_wopts(&o, argc, argv, 5);
		return run_mutant(argv[2], &o);
	}
	if (!strcmp(m, "pair"))
		return cmd_pair(argc, argv, 2);
	if ((!strcmp(m, "pair-writer") || !strcmp(m, "pair-cut")) && argc >= 5) {
		int cut = !strcmp(m, "pair-cut");
		int w = (int)parse_u64(argv[4], "writer");
		if (w != 0 && w != 1)
			return usage();
		o.file = argv[2];
		o.seed = parse_u64(argv[3], "seed");
		if (cut && argc < 6)
			return usage();
		if (cut)
			o.ack_file = argv[5];
		parse_wopts(&o, argc, argv, cut ? 6 : 5);
		return run_pair_writer(&o, w, o.broken);
	}
	if (!strcmp(m, "pair-reader") && argc == 6 && !strcmp(argv[4], "--ack-fd"))
		return run_pair_reader(argv[2], parse_u64(argv[3], "seed"),
				       (int)parse_u64(argv[5], "fd"));
	if (!strcmp(m, "pair-verify") && argc == 8)
		return cmd_pair_verify(argv);
	if (!strcmp(m, "recover") && argc >= 3)
		return cmd_recover(argc, argv, 2);
	if (!strcmp(m, "shutdown") && argc == 3)
		return cmd_shutdown(argv[2]);
	if (!strcmp(m, "shared-cut") && argc == 5)
		return cmd_shared_cut(argv[2], argv[3], argv[4]);
	if (!strcmp(m, "model-init") && (argc == 4 || argc == 5))
		return cmd_model_init(argv[2], parse_u64(argv[3], "seed"),
				      argc == 5 ? parse_span(argv[4]) : TORT_SPAN);
	if (!strcmp(m, "verify") && argc == 6)
		return cmd_verify(argv[2], parse_u64(argv[3], "seed"), argv[4],
				  argv[5]);
	if (!strcmp(m, "state") && (argc == 5 || argc == 6))
		return cmd_state(argv[2], parse_u64(argv[3], "seed"),
				 parse_u64(argv[4], "K"),
				 argc == 6 ? parse_span(argv[5]) : TORT_SPAN);
	return usage();
}
