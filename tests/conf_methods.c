/*
 * conf_methods.c - every commit method does what it claims, on the file
 * system the test runs on (tests/run: the scratch directory; fsmatrix.sh:
 * tmpfs, XFS with exchange, Btrfs).
 *
 * For each method that opens here (a forced method the file system cannot
 * do must fail with EOPNOTSUPP, which is checked against oa_ioinfo):
 *   - oa_ioinfo names it;
 *   - a random mix of writes (aligned runs, unaligned edges, small writes
 *     over earlier big ones, reads of pending data) commits to exactly the
 *     model, also through a second handle and after reopening;
 *   - the bytes and flushes the seam counted show the method at work: the
 *     journal writes big data twice, clone and exchange once, the kernel
 *     method commits a single aligned write with one write and one flush and
 *     no journal;
 *   - after a clone commit the journal is cut back to its ring (I12),
 *     except on Btrfs, which never writes the shared blocks in place;
 *   - a transaction the method cannot take (growth, truncate) still commits
 *     correctly through the journal; an aborted one leaves nothing;
 *   - where the exchange works (AUTO, forced exchange): a whole replace
 *     (cut to 0 then written, or written from 0 over all a cut leaves;
 *     not longer than the file was) writes its bytes once and commits
 *     with one flush, leaving the control file clean; one that keeps old
 *     bytes, or grows the file, is right too.
 *
 * SPDX-License-Identifier: MIT
 */
#include "testutil.h"
#include "oatomic-private.h"

#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FSIZE  (4u << 20)
#define KiB    1024u

/* Their names come from the library's table (oa__method_name). */
static const int methods[] = {
	OA_METHOD_JOURNAL, OA_METHOD_CLONE, OA_METHOD_EXCHANGE,
	OA_METHOD_KERNEL, OA_METHOD_AUTO,
};

static oa_file *open_m(const char *path, int m, int flags)
{
	struct oa_options o = { .size = sizeof(o), .method = m };
	return oa_open_opts(path, flags, 0644, &o);
}

static void model_write(unsigned char *model, uint64_t *size, const void *b,
			size_t n, uint64_t off)
{
	memcpy(model + off, b, n);
	if (off + n > *size)
		*size = off + n;
}

/* Bytes the seam wrote and flushes it counted for one transaction. */
struct cost {
	uint64_t bytes, flushes;
};

static struct cost commit_cost(oa_file *f)
{
	struct oa_stats a, b;
	oa__stats_get(&a);
	CHECK_OK(oa_commit(f));
	oa__stats_get(&b);
	return (struct cost){ b.bytes_written - a.bytes_written,
			      b.flushes - a.flushes };
}

static void mix(const char *path, int m, const char *name, uint64_t *seed)
{
	unsigned char *model = tu_malloc(FSIZE + 256 * KiB);
	unsigned char *saved = tu_malloc(FSIZE + 256 * KiB);
	unsigned char *b = tu_malloc(1024 * KiB);
	uint64_t size = FSIZE, saved_size;
	oa_file *f, *g;

	tu_fill(model, FSIZE, 1, 0);
	tu_write_file(path, model, FSIZE, 0644);
	f = open_m(path, m, O_RDWR);
	CHECKF(f != NULL, "%s: open", name);
	for (int t = 0; t < 12; t++) {
		int nw = 1 + (int)(tu_rand(seed) % 6);
		memcpy(saved, model, size);
		saved_size = size;
		for (int w = 0; w < nw; w++) {
			size_t n;
			uint64_t off;
			switch (tu_rand(seed) % 4) {
			case 0:   /* an aligned run */
				n = (size_t)(64 + tu_rand(seed) % 448) * 1024;
				off = (tu_rand(seed) % ((FSIZE - n) / 4096)) * 4096;
				break;
			case 1:   /* a run with unaligned edges */
				n = (size_t)(64 * KiB + tu_rand(seed) % (400 * KiB));
				off = tu_rand(seed) % (FSIZE - n);
				break;
			case 2:   /* small, anywhere */
				n = 1 + (size_t)(tu_rand(seed) % 5000);
				off = tu_rand(seed) % (FSIZE - n);
				break;
			default:  /* one aligned power of two */
				n = 4096u << (tu_rand(seed) % 5);
				off = (tu_rand(seed) % (FSIZE / n)) * n;
				break;
			}
			tu_fill(b, n, tu_rand(seed), 0);
			tu_oa_pwrite(f, b, n, (off_t)off);
			model_write(model, &size, b, n, off);
		}
		if (t % 3 == 1)
			CHECK_OA_VIEW(f, model, size);   /* read your writes */
		if (t % 5 == 4) {
			/* dropped: the file keeps what it had */
			CHECK_OK(oa_abort(f));
			memcpy(model, saved, saved_size);
			size = saved_size;
			CHECK_FILE(path, model, size, (off_t)size);
			CHECK_OA_VIEW(f, model, size);
			continue;
		}
		CHECK_OK(oa_commit(f));
		CHECK_FILE(path, model, size, (off_t)size);
	}
	g = open_m(path, OA_METHOD_AUTO, O_RDONLY);
	CHECK(g != NULL);
	CHECK_OA_VIEW(g, model, size);
	CHECK_OK(oa_close(g));

	/* growth and a truncate: not for the exchange or kernel method */
	tu_fill(b, 300 * KiB, 77, 0);
	tu_oa_pwrite(f, b, 300 * KiB, (off_t)(FSIZE - 100 * KiB));
	model_write(model, &size, b, 300 * KiB, FSIZE - 100 * KiB);
	CHECK_OK(oa_commit(f));
	CHECK_FILE(path, model, size, (off_t)size);
	CHECK_OK(oa_ftruncate(f, FSIZE / 2));
	tu_fill(b, 128 * KiB, 78, 0);
	tu_oa_pwrite(f, b, 128 * KiB, 4096);
	memcpy(model + 4096, b, 128 * KiB);
	size = FSIZE / 2;
	CHECK_OK(oa_commit(f));
	CHECK_FILE(path, model, size, (off_t)size);
	CHECK_OK(oa_close(f));
	f = open_m(path, m, O_RDWR);
	CHECK(f != NULL);
	CHECK_OA_VIEW(f, model, size);
	CHECK_OK(oa_close(f));
	CHECK_FILE(path, model, size, (off_t)size);
	free(model);
	free(saved);
	free(b);
}

/* What each method costs, counted through the seam. */
static void costs(const char *path, int m, const char *name,
		  const struct oa_ioinfo *io)
{
	unsigned char *b = tu_malloc(1024 * KiB), *model = tu_malloc(FSIZE);
	struct cost c;
	oa_file *f;

	tu_fill(model, FSIZE, 2, 0);
	tu_write_file(path, model, FSIZE, 0644);
	f = open_m(path, m, O_RDWR);
	CHECK(f != NULL);

	/* a 1 MiB aligned run */
	tu_fill(b, 1024 * KiB, 3, 0);
	tu_oa_pwrite(f, b, 1024 * KiB, 1024 * KiB);
	memcpy(model + 1024 * KiB, b, 1024 * KiB);
	c = commit_cost(f);
	tu_note("%s: 1 MiB run: %llu bytes written at commit, %llu flushes",
		name, (unsigned long long)c.bytes,
		(unsigned long long)c.flushes);
	if (m == OA_METHOD_JOURNAL)
		CHECKF(c.bytes >= 1024 * KiB, "%s: the apply copies", name);
	if (m == OA_METHOD_CLONE || m == OA_METHOD_EXCHANGE)
		CHECKF(c.bytes < 64 * KiB,
		       "%s: %llu bytes at commit: the data was written again",
		       name, (unsigned long long)c.bytes);
	/* The first write that bypasses journal 0 after the control file was
	 * clean makes that clean state durable first (I14): one more flush,
	 * once; the next exchange commit makes one. */
	if (m == OA_METHOD_EXCHANGE)
		CHECKF(c.flushes <= 2, "%s: %llu flushes", name,
		       (unsigned long long)c.flushes);
	CHECK_FILE(path, model, FSIZE, FSIZE);
	if (m == OA_METHOD_EXCHANGE) {
		tu_fill(b, 1024 * KiB, 4, 0);
		tu_oa_pwrite(f, b, 1024 * KiB, 1024 * KiB);
		memcpy(model + 1024 * KiB, b, 1024 * KiB);
		c = commit_cost(f);
		CHECKF(c.flushes == 1, "%s: second exchange: %llu flushes",
		       name, (unsigned long long)c.flushes);
		CHECK_FILE(path, model, FSIZE, FSIZE);
	}
	if (m == OA_METHOD_CLONE) {
		/* I12: the blocks the clone shared are cut off the journal,
		 * except on Btrfs, which never writes them in place: there
		 * the journal keeps them for the next big transaction. */
		struct stat js;
		bool btrfs = !strcmp(io->fs_name, "btrfs");
		CHECK_OK(stat(tu_journal_path(path, 0), &js));
		tu_note("%s: journal %lld bytes after a clone commit on %s",
			name, (long long)js.st_size, io->fs_name);
		CHECKF(btrfs ? js.st_size > 4 * 1024 * KiB
			     : js.st_size == 4 * 1024 * KiB,
		       "%s on %s: journal of %lld bytes after a clone commit",
		       name, io->fs_name, (long long)js.st_size);
	}

	/* one aligned 64 KiB write */
	tu_fill(b, 64 * KiB, 4, 0);
	tu_oa_pwrite(f, b, 64 * KiB, 192 * KiB);
	memcpy(model + 192 * KiB, b, 64 * KiB);
	c = commit_cost(f);
	tu_note("%s: one aligned 64 KiB write: %llu bytes, %llu flushes", name,
		(unsigned long long)c.bytes, (unsigned long long)c.flushes);
	if (m == OA_METHOD_KERNEL || (m == OA_METHOD_AUTO && io->rwf_atomic &&
				      io->atomic_write_unit_hw_max >= 64 * KiB &&
				      io->atomic_write_unit_min <= 64 * KiB))
		CHECKF(c.bytes == 64 * KiB && c.flushes == 1,
		       "%s: the kernel method wrote %llu bytes, %llu flushes",
		       name, (unsigned long long)c.bytes,
		       (unsigned long long)c.flushes);
	else if (m == OA_METHOD_AUTO && io->rwf_atomic &&
		 io->atomic_write_unit_hw_max < 64 * KiB)
		/* an atomic write the file system would emulate out of place:
		 * AUTO takes the journal (logged, then applied) */
		CHECKF(c.bytes > 64 * KiB,
		       "%s: AUTO sent a 64 KiB write the device cannot do "
		       "untorn to RWF_ATOMIC (%llu bytes written)", name,
		       (unsigned long long)c.bytes);
	CHECK_FILE(path, model, FSIZE, FSIZE);
	CHECK_OK(oa_close(f));
	free(b);
	free(model);
}

/* AUTO where the exchange works: a handle's first transaction, while the
 * control file is clean, goes to the exchange if it has few runs (a one-
 * shot update: the data written once, one flush from the second update on,
 * the first one of a clean period flushing the control file too, I14),
 * and through the journal if it has many scattered blocks (the exchange's
 * cost grows with its runs: exchange.c OA_XCHG_FIRST). */
static void first_txn(const char *path)
{
	unsigned char *model = tu_malloc(FSIZE), b[4096];
	struct cost c;
	oa_file *f;

	tu_fill(model, FSIZE, 5, 0);
	tu_write_file(path, model, FSIZE, 0644);
	for (int round = 0; round < 3; round++) {
		f = open_m(path, OA_METHOD_AUTO, O_RDWR);
		CHECK(f != NULL);
		struct oa_stats s0, s1;
		tu_fill(b, sizeof(b), 6 + round, 0);
		oa__stats_get(&s0);
		tu_oa_pwrite(f, b, sizeof(b), (off_t)(round + 3) * 4096);
		memcpy(model + (round + 3) * 4096, b, sizeof(b));
		c = commit_cost(f);
		oa__stats_get(&s1);
		uint64_t all = s1.bytes_written - s0.bytes_written;
		tu_note("auto: one-shot 4 KiB, round %d: %llu bytes, %llu "
			"flushes", round, (unsigned long long)all,
			(unsigned long long)c.flushes);
		/* the block once, into the shadow (and the control file's
		 * identity after its flush); the journal would write it
		 * twice, with its record */
		CHECKF(all >= sizeof(b) && all < 2 * sizeof(b), "auto, "
		       "one-shot 4 KiB with the exchange: %llu bytes written "
		       "(the journal?)", (unsigned long long)all);
		CHECKF(c.flushes <= (round ? 1u : 2u), "auto, one-shot round "
		       "%d: %llu flushes", round,
		       (unsigned long long)c.flushes);
		CHECK_OK(oa_close(f));
		CHECK_FILE(path, model, FSIZE, FSIZE);
	}
	/* 12 scattered blocks and an unaligned piece: the journal */
	f = open_m(path, OA_METHOD_AUTO, O_RDWR);
	CHECK(f != NULL);
	for (int i = 0; i < 12; i++) {
		off_t at = (off_t)(16 + 7 * i) * 4096;
		tu_fill(b, sizeof(b), 20 + i, 0);
		tu_oa_pwrite(f, b, sizeof(b), at);
		memcpy(model + at, b, sizeof(b));
	}
	tu_fill(b, 100, 40, 0);
	tu_oa_pwrite(f, b, 100, 5000);
	memcpy(model + 5000, b, 100);
	c = commit_cost(f);
	tu_note("auto: a first transaction of 12 scattered blocks: %llu "
		"bytes, %llu flushes", (unsigned long long)c.bytes,
		(unsigned long long)c.flushes);
	/* the apply copies every block into the file; an exchange would
	 * write only the blocks the journal held, composed, into the
	 * shadow (5 here) */
	CHECKF(c.bytes >= 12 * 4096 + 100, "auto, 12 scattered blocks "
	       "first: %llu bytes written at commit (exchanged, not the "
	       "journal?)", (unsigned long long)c.bytes);
	CHECK_OK(oa_close(f));
	CHECK_FILE(path, model, FSIZE, FSIZE);
	free(model);
}

/* A whole replace where the exchange works (exchange.c W1, W2): a
 * transaction that keeps no byte of the file (cut to 0, then written; or
 * written from 0 on over all the cut leaves) is the shadow's whole
 * content, committed by one exchange of the two files to their ends: the
 * bytes written once, one flush (the first of a clean period flushes the
 * control file too, I14), sizes that shrink and grow with it, and the
 * control file left clean.  A transaction that keeps old bytes is not one:
 * the file shows them. */
static void whole_replace(const char *path, int m, const char *name)
{
	static unsigned char old[200000], nb[200000];
	struct { uint64_t oldsize, cut1, w, cut2; bool whole; } cs[] = {
		{ 100000, UINT64_MAX, 64, 64, true },     /* write, cut */
		{ 100000, 0, 70000, UINT64_MAX, true },   /* cut 0, write */
		{ 64, UINT64_MAX, 100000, UINT64_MAX, false },  /* grows: W3 */
		{ 100000, 0, 100, 8000, true },    /* cut, write, grow to 8000 */
		{ 100000, UINT64_MAX, 50000, 30000, true },
		{ 100000, UINT64_MAX, 5000, 60000, false },    /* keeps old */
		{ 100000, UINT64_MAX, 64, UINT64_MAX, false }, /* one-shot */
	};
	char ctl[4096];
	struct stat st;
	snprintf(ctl, sizeof(ctl), "%.*s.%s.oa", (int)(strrchr(path, '/') + 1 - path),
		 path, strrchr(path, '/') + 1);
	for (size_t i = 0; i < sizeof(cs) / sizeof(cs[0]); i++) {
		uint64_t size = cs[i].oldsize;
		tu_fill(old, sizeof(old), 70 + i, 0);
		tu_fill(nb, sizeof(nb), 80 + i, 0);
		tu_write_file(path, old, size, 0644);
		oa_file *f = open_m(path, m, O_RDWR);
		CHECK(f != NULL);
		struct oa_stats s0, s1;
		oa__stats_get(&s0);
		if (cs[i].cut1 != UINT64_MAX) {
			CHECK_OK(oa_ftruncate(f, (off_t)cs[i].cut1));
			size = cs[i].cut1;
		}
		uint64_t at = cs[i].cut1 == 0 && cs[i].cut2 == 8000 ? 5000 : 0;
		if (at > size)
			memset(old + size, 0, at - size);
		tu_oa_pwrite(f, nb, cs[i].w, (off_t)at);
		memcpy(old + at, nb, cs[i].w);
		if (at + cs[i].w > size)
			size = at + cs[i].w;
		if (cs[i].cut2 != UINT64_MAX) {
			CHECK_OK(oa_ftruncate(f, (off_t)cs[i].cut2));
			if (cs[i].cut2 > size)
				memset(old + size, 0, cs[i].cut2 - size);
			size = cs[i].cut2;
		}
		struct cost c = commit_cost(f);
		oa__stats_get(&s1);
		uint64_t all = s1.bytes_written - s0.bytes_written;
		CHECK_OK(oa_close(f));
		CHECK_FILE(path, old, size, (off_t)size);
		CHECKF(stat(ctl, &st) == 0 && st.st_size == 512, "%s, case %zu: "
		       "the control file %s is not left clean", name, i, ctl);
		tu_note("%s: replace case %zu: %llu bytes, %llu flushes", name,
			i, (unsigned long long)all,
			(unsigned long long)c.flushes);
		if (!cs[i].whole)
			continue;
		/* the new bytes once, into the shadow: no journal record
		 * (and the control file's identity, 512 bytes, where this
		 * commit flushed it) */
		CHECKF(all == cs[i].w || all == cs[i].w + 512, "%s, whole "
		       "replace case %zu: %llu bytes written for %llu (the "
		       "journal?)", name, i, (unsigned long long)all,
		       (unsigned long long)cs[i].w);
		/* (2: the first bypass after a journal commit's clean close
		 * flushes the control file, I14) */
		CHECKF(c.flushes <= (i && cs[i - 1].whole ? 1u : 2u), "%s, "
		       "whole replace case %zu: %llu flushes", name, i,
		       (unsigned long long)c.flushes);
	}
}

int main(void)
{
	uint64_t seed = tu_seed();
	int ran = 0;

	tu_alarm(280);
	/* The methods are what this test is about: no override. */
	unsetenv("OATOMIC_METHOD");
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		const int m = methods[i];
		const char *name = oa__method_name(m);
		const char *path = tu_path("m-%s", name);
		struct oa_ioinfo io = { .size = sizeof(io) };
		oa_file *f;
		int can;

		tu_write_file(path, "x", 1, 0644);
		f = open_m(path, OA_METHOD_AUTO, O_RDWR);
		CHECK(f != NULL);
		CHECK_OK(oa_ioinfo(f, &io));
		CHECK_OK(oa_close(f));
		switch (m) {
		case OA_METHOD_CLONE: can = io.reflink; break;
		case OA_METHOD_EXCHANGE: can = io.exchange; break;
		case OA_METHOD_KERNEL: can = io.rwf_atomic; break;
		default: can = 1;
		}
		f = open_m(path, m, O_RDWR);
		if (!can) {
			CHECKF(f == NULL && errno == EOPNOTSUPP,
			       "%s on %s: forced without support must fail "
			       "with EOPNOTSUPP", name, io.fs_name);
			tu_note("%s: not on %s (EOPNOTSUPP, as ioinfo says)",
				name, io.fs_name);
			continue;
		}
		CHECKF(f != NULL, "%s on %s", name, io.fs_name);
		struct oa_ioinfo mi = { .size = sizeof(mi) };
		CHECK_OK(oa_ioinfo(f, &mi));
		CHECK_OK(oa_close(f));
		if (m != OA_METHOD_AUTO)
			CHECK_EQ(mi.method, m);
		else
			CHECK_EQ(mi.method, io.exchange ? OA_METHOD_EXCHANGE
					    : io.reflink ? OA_METHOD_CLONE
							 : OA_METHOD_JOURNAL);
		mix(path, m, name, &seed);
		costs(path, m, name, &io);
		if (m == OA_METHOD_AUTO && io.exchange)
			first_txn(path);
		if ((m == OA_METHOD_AUTO || m == OA_METHOD_EXCHANGE) &&
		    io.exchange)
			whole_replace(path, m, name);
		tu_remove_journals(path);
		unlink(path);
		ran++;
		tu_note("%s on %s: ok", name, io.fs_name);
	}
	CHECK(ran >= 2);
	return 0;
}
