/*
 * torture_pair.c - the torture of two writers on one file, with a live
 * reader (see "two writers" below), and its power cuts' writer and
 * verifier (tests/powercut.sh).
 *
 *   torture_pair [--kills N] [--seed S] [--dir D] [--no-selftest] [-v]
 *       The self-test, then N rounds (from $TORTURE_PAIR_KILLS, else 400),
 *       each killing one writer, the other or both (an eighth: neither);
 *       what tests/run runs.  The self-test runs a writer that splits a
 *       transaction in two commits and one that acks before it commits: the
 *       checker must see torn and lost.  S from $TORTURE_SEED, else random
 *       (printed); D from $OA_TEST_DIR.
 *   torture_pair writer FILE SEED W [writer options] [--broken torn|lost]
 *   torture_pair cut FILE SEED W ACKFILE [writer options]   (power cuts)
 *   torture_pair reader FILE SEED --ack-fd FD
 *   torture_pair verify FILE SEED STARTA STARTB ACKA ACKB   (power cuts)
 *
 * The writer options are those of `torture_kill writer` (util/torture.c).
 *
 * Exit status: 0 pass, 1 violation / failure; writers: 2 a library call
 * failed, 4 (power cuts) the file system was shut down.
 *
 * For tests/run (400 rounds take well under this):
 * timeout: 600
 *
 * SPDX-License-Identifier: MIT
 */
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
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "oatomic.h"
#include "oatomic-private.h"   /* oa__set_killpoint, oa__check */
#include "torture.h"

/* ---- two writers on one file ------------------------------------------------ */

/*
 * The torture: writers A (0) and B (1), each with its own handle on one
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
 * `torture_pair writer FILE SEED W [writer options]`: writer W (0 or 1) of
 * the pair, from transaction --start on.  --broken torn: commit the head
 * unit on its own, then the rest (a kill in between tears it); --broken
 * lost: acknowledge a transaction before committing it.  Broken writers die
 * at that worst moment (SIGKILL) once --kill-after commits are done.
 */
static int run_pair_writer(const struct tort_wopts *o, int w, const char *broken)
{
	struct tort_acker a;
	uint8_t buf[PAIR_UNIT];
	uint64_t commits = 0;
	int torn = broken && !strcmp(broken, "torn");
	int lost = broken && !strcmp(broken, "lost");

	if (broken && !torn && !lost) {
		fprintf(stderr, "torture: unknown broken writer %s\n", broken);
		return 1;
	}
	tort_ack_open(&a, o);
	oa_file *f = tort_w_open(o->file);
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
				tort_die(2, "oa_pwrite", o->file);
			if (torn && !aborted && u == (uint64_t)w) {
				if (oa_commit(f) < 0)
					tort_die(2, "oa_commit", o->file);
				if (armed)
					raise(SIGKILL);
			}
		}
		if (aborted) {
			if (oa_abort(f) < 0)
				tort_die(2, "oa_abort", o->file);
			continue;
		}
		if (lost) {
			tort_ack_send(&a, t);
			if (armed)
				raise(SIGKILL);
		}
		if (o->killpoint && commits == o->kill_after)
			oa__set_killpoint(o->killpoint);
		if (oa_commit(f) < 0)
			tort_die(2, "oa_commit", o->file);
		commits++;
		if (!lost)
			tort_ack_send(&a, t);
		/* now and then a fresh handle (the checkpoint of the last
		 * close, while the other writer works) */
		if (pair_rand(o->seed, w, t, 0xfe) % 20 == 0 ||
		    (o->killpoint >= 5 && commits > o->kill_after)) {
			if (oa_close(f) < 0)
				tort_die(2, "oa_close", o->file);
			f = tort_w_open(o->file);
		}
	}
	if (oa_close(f) < 0)
		tort_die(2, "oa_close", o->file);
	return 0;
}

/*
 * `torture_pair reader FILE SEED --ack-fd FD`: read the whole file with
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
		tort_die(2, "oa_open(O_RDONLY)", file);
	for (;;) {
		if (pair_lib_read(f, img) < 0)
			tort_die(2, "oa_pread", file);
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
	oa_file *f = tort_w_open(file);

	for (uint64_t u = 0; u < PAIR_UNITS; u++) {
		int w = (int)(u % 2);
		pair_unit(buf, seed, w, pair_last(seed, w, u, t[w]), u);
		if (oa_pwrite(f, buf, PAIR_UNIT, (off_t)(u * PAIR_UNIT)) != PAIR_UNIT)
			tort_die(1, "oa_pwrite", file);
	}
	if (oa_commit(f) < 0 || oa_close(f) < 0)
		tort_die(1, "oa_commit", file);
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
		tort_wait_child(pid[w]);
	}
	kill(rpid, SIGKILL);
	tort_wait_child(rpid);
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
	tort_clean_files(c->dir, strrchr(file, '/') + 1);
	int cfd = open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (cfd < 0)
		tort_die(1, "create", file);
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

		char *rargv[] = { tort_self_exe, (char *)"reader", file, s_seed,
				  (char *)"--ack-fd", (char *)"@ACK", NULL };
		rpid = tort_spawn(rargv, &rfd, NULL);
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
			argv[n++] = tort_self_exe;
			argv[n++] = (char *)"writer";
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
			pid[w] = tort_spawn(argv, &afd[w], NULL);
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
				tort_die(1, "poll", NULL);
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
		int rst = tort_wait_child(rpid);
		if (open_fd[2] >= 0)
			close(open_fd[2]);
		r->reads += (long)round_reads;
		r->rounds++;
		for (int w = 0; w < 2; w++) {
			int st = tort_wait_child(pid[w]);
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
	tort_clean_files(c->dir, strrchr(file, '/') + 1);
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

/* `torture_pair verify FILE SEED STARTA STARTB ACKA ACKB` (power cuts):
 * both writers were cut, so each may be at its last durable ack or the
 * next commit. */

static int cmd_pair_verify(char **argv)
{
	static uint8_t img[PAIR_SIZE];
	uint64_t seed = tort_parse_u64(argv[3], "seed"), a[2], t[2], size;
	int cls[2];
	long n[2];
	char why[256];

	for (int w = 0; w < 2; w++) {
		uint64_t *acks;
		a[w] = tort_parse_u64(argv[4 + w], "start");
		n[w] = tort_read_ackfile(argv[6 + w], &acks);
		if (n[w] < 0) {
			fprintf(stderr, "torture_pair verify: %s: %s\n", argv[6 + w],
				strerror(errno));
			return 1;
		}
		for (long i = 0; i < n[w]; i++) {
			if (acks[i] <= a[w] || pair_aborted(seed, w, acks[i])) {
				fprintf(stderr, "torture_pair verify: bad ack %" PRIu64
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
	struct pcfg c = { NULL, tort_default_seed(), 400, NULL, 0 };
	int do_selftest = 1;
	const char *e = getenv("TORTURE_PAIR_KILLS");

	if (e && *e)
		c.rounds = (long)tort_parse_u64(e, "TORTURE_PAIR_KILLS");
	for (; i < argc; i++) {
		if (!strcmp(argv[i], "--kills") && i + 1 < argc)
			c.rounds = (long)tort_parse_u64(argv[++i], "--kills");
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			c.seed = tort_parse_u64(argv[++i], "--seed");
		else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
			c.dir = argv[++i];
		else if (!strcmp(argv[i], "--no-selftest"))
			do_selftest = 0;
		else if (!strcmp(argv[i], "-v"))
			c.verbose = 1;
		else {
			fprintf(stderr, "usage: torture_pair [--kills N] [--seed S] "
				"[--dir D] [--no-selftest] [-v]\n");
			return 1;
		}
	}
	if (!c.dir)
		c.dir = tort_test_dir(tbuf, sizeof(tbuf));
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


static int usage(void)
{
	fprintf(stderr,
		"usage: torture_pair [--kills N] [--seed S] [--dir D] [--no-selftest] [-v]\n"
		"       torture_pair writer FILE SEED W [writer options] [--broken torn|lost]\n"
		"       torture_pair cut FILE SEED W ACKFILE [writer options]\n"
		"       torture_pair reader FILE SEED --ack-fd FD\n"
		"       torture_pair verify FILE SEED STARTA STARTB ACKA ACKB\n");
	return 1;
}

int main(int argc, char **argv)
{
	const char *m = argc >= 2 ? argv[1] : "";
	struct tort_wopts o = TORT_WOPTS_INIT;

	tort_init();
	if ((!strcmp(m, "writer") || !strcmp(m, "cut")) && argc >= 5) {
		int cut = !strcmp(m, "cut");
		int w = (int)tort_parse_u64(argv[4], "writer");
		if (w != 0 && w != 1)
			return usage();
		o.file = argv[2];
		o.seed = tort_parse_u64(argv[3], "seed");
		if (cut && argc < 6)
			return usage();
		if (cut)
			o.ack_file = argv[5];
		tort_parse_wopts(&o, argc, argv, cut ? 6 : 5);
		return run_pair_writer(&o, w, o.broken);
	}
	if (!strcmp(m, "reader") && argc == 6 && !strcmp(argv[4], "--ack-fd"))
		return run_pair_reader(argv[2], tort_parse_u64(argv[3], "seed"),
				       (int)tort_parse_u64(argv[5], "fd"));
	if (!strcmp(m, "verify") && argc == 8)
		return cmd_pair_verify(argv);
	if (!strcmp(m, "writer") || !strcmp(m, "cut") ||
	    !strcmp(m, "reader") || !strcmp(m, "verify"))
		return usage();
	/* the torture itself: no arguments (tests/run), or its options */
	return cmd_pair(argc, argv, 1);
}
