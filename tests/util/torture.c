/*
 * torture.c - the harness the crash tortures share (torture.h): the
 * writers of the transaction sequence (the library's and the deliberately
 * broken ones), their acknowledgements, the verifier that classifies a
 * file after a crash, and the plumbing of the programs (spawning a writer,
 * the scratch directory, the seed).
 *
 * Used by tests/torture_kill.c, tests/torture_pair.c and tests/torture_cut.c
 * (the power cuts' helper); linked into every test like the rest of
 * tests/util/, its names all start with tort_.
 *
 * SPDX-License-Identifier: MIT
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "oatomic.h"
#include "oatomic-private.h"   /* oa__set_killpoint */
#include "torture.h"

char tort_self_exe[PATH_MAX];

void tort_init(void)
{
	ssize_t n = readlink("/proc/self/exe", tort_self_exe,
			     sizeof(tort_self_exe) - 1);
	if (n <= 0)
		tort_die(1, "readlink /proc/self/exe", NULL);
	tort_self_exe[n] = 0;
	signal(SIGPIPE, SIG_IGN);
}

void tort_die(int code, const char *what, const char *file)
{
	fprintf(stderr, "torture: %s %s: %s\n", what, file ? file : "",
		strerror(errno));
	exit(code);
}

uint64_t tort_parse_u64(const char *s, const char *what)
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
uint64_t tort_parse_span(const char *s)
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

/* ---- the writers -------------------------------------------------------- */

void tort_ack_open(struct tort_acker *a, const struct tort_wopts *o)
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
			tort_die(2, "open ack file", o->ack_file);
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
void tort_check_alive(const char *file)
{
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "torture: %s: %s: file system shut down, ack "
			"withheld\n", file, strerror(errno));
		exit(4);
	}
	close(fd);
}

void tort_ack_send(struct tort_acker *a, uint64_t k)
{
	int r;

	if (a->sync)
		tort_check_alive(a->file);

	if (a->binary) {
		r = wl_write_all(a->fd, &k, sizeof(k));
	} else {
		char line[32];
		int n = snprintf(line, sizeof(line), "%" PRIu64 "\n", k);
		r = wl_write_all(a->fd, line, (size_t)n);
	}
	if (r < 0)
		tort_die(2, "write ack", NULL);
	if (a->sync && fdatasync(a->fd) < 0)
		tort_die(2, "fdatasync ack file", NULL);
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

oa_file *tort_w_open(const char *file)
{
	oa_file *f = oa_open(file, O_RDWR | O_CREAT, 0644);
	if (!f)
		tort_die(2, "oa_open", file);
	return f;
}

static uint64_t w_size(oa_file *f, const char *file)
{
	struct stat st;
	if (oa_fstat(f, &st) < 0)
		tort_die(2, "oa_fstat", file);
	return (uint64_t)st.st_size;
}

/* With --mmap: the handle's mapping of the sequence's whole reach. */
static uint8_t *w_map(oa_file *f, const struct tort_wopts *o)
{
	if (!o->mmap)
		return NULL;
	/* --mmap 2: stores spill to disk past 16 pages (map.c) */
	if (o->mmap == 2)
		setenv("OATOMIC_MAP_MEM", "65536", 1);
	uint8_t *m = oa_mmap(f, (size_t)tort_cap(o->span), PROT_READ | PROT_WRITE,
			     0);
	if (!m)
		tort_die(2, "oa_mmap", o->file);
	return m;
}

static void w_write(oa_file *f, const struct tort_wopts *o, const struct tort_plan *p,
		    const struct tort_op *op, uint8_t *buf, uint8_t *rb,
		    uint8_t *map, uint64_t size)
{
	ssize_t n;

	wl_fill(buf, op->len, op->dseed);
	if (map && tort_map_store(op)) {
		/* a store through the mapping: the file is grown first (a
		 * store past the end is not part of the file), as a program
		 * growing a mapped file does */
		if (op->off + op->len > size &&
		    oa_ftruncate(f, (off_t)(op->off + op->len)) < 0)
			tort_die(2, "oa_ftruncate (grow for a store)", o->file);
		memcpy(map + op->off, buf, (size_t)op->len);
		n = (ssize_t)op->len;
	} else if (op->vec && op->len >= 3) {
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
		tort_die(2, "oa_pwrite", o->file);
	if ((uint64_t)n != op->len) {
		fprintf(stderr, "torture: oa_pwrite %s: txn %" PRIu64
			" returned %zd of %" PRIu64 "\n", o->file, p->k, n, op->len);
		exit(2);
	}
	if (p->check) {
		n = oa_pread(f, rb, (size_t)op->len, (off_t)op->off);
		if (n < 0)
			tort_die(2, "oa_pread", o->file);
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

int tort_run_writer(const struct tort_wopts *o)
{
	struct tort_acker a;
	struct tort_plan p;
	uint8_t *buf = malloc(TORT_BIGLEN), *rb = malloc(TORT_BIGLEN);
	uint64_t commits = 0;

	if (!buf || !rb)
		tort_die(2, "malloc", NULL);
	tort_ack_open(&a, o);
	oa_file *f = tort_w_open(o->file);
	uint64_t start = o->start;

	if (o->relay_fd >= 0) {
		/* relay: hold the handle open while another writer works and
		 * dies; then take over after the transaction we are told */
		uint64_t ready = 0;
		if (wl_write_all(a.fd, &ready, sizeof(ready)) < 0)
			tort_die(2, "write ready", NULL);
		ssize_t n = read(o->relay_fd, &start, sizeof(start));
		if (n == 0) {
			oa_close(f);
			free(buf);
			free(rb);
			return 0;
		}
		if (n != (ssize_t)sizeof(start))
			tort_die(2, "read relay", NULL);
	}
	uint64_t size = w_size(f, o->file);
	uint8_t *map = w_map(f, o);

	for (uint64_t k = start + 1;
	     !o->max_txns || k <= start + o->max_txns; k++) {
		tort_plan(o->seed, o->span, k, &p);
		if (p.big)
			big_flag(o->big_flag, k);
		uint64_t size0 = size;
		for (int i = 0; i < p.nops; i++) {
			const struct tort_op *op = &p.ops[i];
			if (op->kind == TORT_WRITE) {
				w_write(f, o, &p, op, buf, rb, map, size);
				if (op->off + op->len > size)
					size = op->off + op->len;
			} else {
				if (oa_ftruncate(f, (off_t)op->len) < 0)
					tort_die(2, "oa_ftruncate", o->file);
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
				tort_die(2, "oa_abort", o->file);
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
			tort_die(2, "oa_commit", o->file);
		commits++;
		tort_ack_send(&a, k);
		/* points 5 and 6 are in the checkpoint, which the last close
		 * does: close after every commit once they are armed */
		if (p.reopen || (o->killpoint >= 5 && commits > o->kill_after)) {
			if (oa_close(f) < 0)
				tort_die(2, "oa_close", o->file);
			f = tort_w_open(o->file);
			map = w_map(f, o);
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
		tort_die(2, "oa_close", o->file);
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
int tort_run_mutant(const char *kind, const struct tort_wopts *o)
{
	struct tort_acker a;
	struct tort_plan p;
	/* set up only for the good writer; initialised for the compiler */
	struct tort_model cur = { .buf = NULL }, work = { .buf = NULL };
	char tmp[PATH_MAX];
	uint64_t commits = 0;
	int good = !strcmp(kind, "good"), lost = !strcmp(kind, "lost");
	int fd = -1;

	if (!good && !lost && strcmp(kind, "torn")) {
		fprintf(stderr, "torture: unknown mutant %s\n", kind);
		return 1;
	}
	tort_ack_open(&a, o);
	if (good) {
		snprintf(tmp, sizeof(tmp), "%s.mutant-tmp", o->file);
		unlink(tmp);
		if (tort_model_init(&cur, o->span) ||
		    tort_model_init(&work, o->span))
			tort_die(2, "malloc", NULL);
		int64_t r = tort_read_file(o->file, cur.buf, tort_cap(o->span),
					   &cur.size);
		if (r == -1 && errno == ENOENT)
			cur.size = 0;
		else if (r < 0)
			tort_die(2, "read", o->file);
		tort_model_copy(&work, &cur);
	} else {
		fd = open(o->file, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0)
			tort_die(2, "open", o->file);
	}
	uint8_t *buf = malloc(TORT_BIGLEN);
	if (!buf)
		tort_die(2, "malloc", NULL);

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
				tort_die(2, "write", tmp);
			/* for power cuts (acks to a file): make it durable */
			if (a.sync && fdatasync(t) < 0)
				tort_die(2, "fdatasync", tmp);
			close(t);
			if (armed)
				raise(SIGKILL);
			if (rename(tmp, o->file) < 0)
				tort_die(2, "rename", tmp);
			if (a.sync && dirfd_sync(o->file) < 0)
				tort_die(2, "fsync directory of", o->file);
			tort_model_copy(&cur, &work);
			tort_ack_send(&a, k);
		} else {
			if (lost) {
				tort_ack_send(&a, k);
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
						tort_die(2, "pwrite", o->file);
				} else if (ftruncate(fd, (off_t)op->len) < 0) {
					tort_die(2, "ftruncate", o->file);
				}
				if (armed && i + 1 == die_after)
					raise(SIGKILL);
			}
			if (!lost)
				tort_ack_send(&a, k);
		}
		commits++;
	}
	free(buf);
	return 0;
}

/* Writer options after the positional arguments; ARGV[I..] */
void tort_parse_wopts(struct tort_wopts *o, int argc, char **argv, int i)
{
	for (; i < argc; i += 2) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v) {
			fprintf(stderr, "torture: %s needs a value\n", a);
			exit(1);
		}
		if (!strcmp(a, "--start"))
			o->start = tort_parse_u64(v, a);
		else if (!strcmp(a, "--ack-fd"))
			o->ack_fd = (int)tort_parse_u64(v, a);
		else if (!strcmp(a, "--ack-file"))
			o->ack_file = v;
		else if (!strcmp(a, "--big-flag"))
			o->big_flag = v;
		else if (!strcmp(a, "--killpoint"))
			o->killpoint = (int)tort_parse_u64(v, a);
		else if (!strcmp(a, "--kill-after"))
			o->kill_after = tort_parse_u64(v, a);
		else if (!strcmp(a, "--max-txns"))
			o->max_txns = tort_parse_u64(v, a);
		else if (!strcmp(a, "--relay-fd"))
			o->relay_fd = (int)tort_parse_u64(v, a);
		else if (!strcmp(a, "--span"))
			o->span = tort_parse_span(v);
		else if (!strcmp(a, "--broken"))
			o->broken = v;
		else if (!strcmp(a, "--mmap"))
			o->mmap = (int)tort_parse_u64(v, a);
		else {
			fprintf(stderr, "torture: unknown option %s\n", a);
			exit(1);
		}
	}
}

int tort_writer_main(int argc, char **argv)
{
	const char *m = argc >= 2 ? argv[1] : "";
	struct tort_wopts o = TORT_WOPTS_INIT;

	if (!strcmp(m, "writer") && argc >= 4) {
		o.file = argv[2];
		o.seed = tort_parse_u64(argv[3], "seed");
		tort_parse_wopts(&o, argc, argv, 4);
		return tort_run_writer(&o);
	}
	if (!strcmp(m, "cut") && argc >= 5) {
		o.file = argv[2];
		o.seed = tort_parse_u64(argv[3], "seed");
		o.ack_file = argv[4];
		tort_parse_wopts(&o, argc, argv, 5);
		return tort_run_writer(&o);
	}
	if (!strcmp(m, "mutant") && argc >= 5) {
		o.file = argv[3];
		o.seed = tort_parse_u64(argv[4], "seed");
		tort_parse_wopts(&o, argc, argv, 5);
		return tort_run_mutant(argv[2], &o);
	}
	return -1;
}

/* ---- the verifier ------------------------------------------------------- */

const char *const tort_vname[] = { "ok", "ok (in-flight commit)", "LOST",
				   "TORN" };

void tort_verifier_init(struct tort_verifier *v, uint64_t seed, uint64_t span)
{
	memset(v, 0, sizeof(*v));
	v->seed = seed;
	v->span = span;
	if (tort_model_init(&v->m, span) || tort_model_init(&v->p, span) ||
	    tort_model_init(&v->b, span) ||
	    !(v->act = malloc((size_t)tort_cap(span))) ||
	    !(v->act2 = malloc((size_t)tort_cap(span))))
		tort_die(1, "malloc", NULL);
}

void tort_verifier_free(struct tort_verifier *v)
{
	tort_model_free(&v->m);
	tort_model_free(&v->p);
	tort_model_free(&v->b);
	free(v->act);
	free(v->act2);
}

/* Check the acks (increasing, committed, after k0).  Returns 0 or -1. */
int tort_check_acks(const struct tort_verifier *v, const uint64_t *acks, size_t n)
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
int tort_read_actual(struct tort_verifier *v, const char *file, int second)
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

static int matches(const struct tort_verifier *v, const struct tort_model *m)
{
	return !v->oversize && v->act_size == m->size &&
	       !memcmp(v->act, m->buf, (size_t)m->size);
}

/*
 * v->m is the state after v->m.k.  A is the last acked transaction (k0 when
 * none).  Classify v->act; afterwards v->m is A, v->b the state after the
 * next commit NB, v->p the state before A (if have_p).
 */
int tort_classify(struct tort_verifier *v, uint64_t a)
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
		return a == 0 ? TORT_V_A : TORT_V_TORN;
	if (matches(v, &v->m))
		return TORT_V_A;
	if (matches(v, &v->b))
		return TORT_V_B;
	if (v->have_p && matches(v, &v->p) &&
	    tort_first_diff(v->p.buf, v->p.size, v->m.buf, v->m.size) >= 0)
		return TORT_V_LOST;
	return TORT_V_TORN;
}

/* Make v->m the state the file was found in. */
void tort_settle(struct tort_verifier *v, int cls)
{
	if (cls == TORT_V_B) {
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

void tort_describe(FILE *out, const struct tort_verifier *v)
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


/* fork and exec ARGV, in which "@ACK" and "@RELAY" stand for the child's
 * ends of a new ack pipe (*ACKFD: ours) and, if RELAYFD, of a relay pipe
 * (*RELAYFD: ours). */
pid_t tort_spawn(char *const *argv, int *ackfd, int *relayfd)
{
	int ap[2], rp[2] = { -1, -1 };
	char s_a[16], s_r[16];
	char *av[40];
	int n;

	if (pipe2(ap, O_CLOEXEC) < 0 || (relayfd && pipe2(rp, O_CLOEXEC) < 0))
		tort_die(1, "pipe", NULL);
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
		tort_die(1, "vfork", NULL);
	if (pid == 0) {
		fcntl(ap[1], F_SETFD, 0);
		if (relayfd)
			fcntl(rp[0], F_SETFD, 0);
		execv(tort_self_exe, av);
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

int tort_wait_child(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			tort_die(1, "waitpid", NULL);
	return st;
}

const char *tort_test_dir(char *buf, size_t n)
{
	const char *d = getenv("OA_TEST_DIR");
	if (d && *d)
		return d;
	snprintf(buf, n, "/tmp/oa-torture-XXXXXX");
	if (!mkdtemp(buf))
		tort_die(1, "mkdtemp", buf);
	return buf;
}

/* Remove the torture file of a loop and whatever the library left beside
 * it (.NAME.oa, .NAME.oaj-K, mutant temporaries). */
void tort_clean_files(const char *dir, const char *name)
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


uint64_t tort_default_seed(void)
{
	const char *s = getenv("TORTURE_SEED");
	if (s && *s)
		return tort_parse_u64(s, "TORTURE_SEED");
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return wl_mix((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^
			(uint64_t)getpid()) % 1000000000ULL;
}

/* The numbers in ACKFILE (one a line).  Returns the count, -1 on error. */
long tort_read_ackfile(const char *path, uint64_t **out)
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
				tort_die(1, "realloc", NULL);
		}
		v[n++] = strtoull(line, NULL, 10);
	}
	fclose(fp);
	*out = v;
	return n;
}
