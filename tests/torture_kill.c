/*
 * torture_kill.c - the kill torture of oatomic: SIGKILL at random instants
 * and at the library's kill points inside the commit protocol.
 *
 * A writer runs the deterministic transaction sequence of a seed (see
 * util/torture.h) on one file and acknowledges every commit that returned
 * 0.  After the crash, recovery runs, and the file must be exactly the state
 * after the last acknowledged transaction, or after the next committed one
 * (the one that may have been in flight).  Anything else is a violation:
 * "lost" when the file is the state before the acknowledged commit, "torn"
 * otherwise.
 *
 * Every round: the writer is SIGKILLed after a random 0-30 ms (sometimes 0,
 * sometimes longer), or dies at a kill point of the commit protocol
 * (oa__set_killpoint 1..6); in some rounds a second writer holding a handle
 * open takes over after a death past the commit point (relay), in some a
 * first recovery is itself killed.  Then oa_recover, the check above,
 * oa__check must say clean, a second oa_recover must change nothing, and
 * oa_open + oa_pread must read the same bytes.
 *
 * The sequence's offsets lie within a span (util/torture.h): the torture
 * splits its kills over several, a fresh file each (64 KiB, 1 MiB, 4 MiB,
 * and a sparse 64 MiB with far truncates and holes).
 *
 * The torture of two writers on one file is torture_pair.c; the power cuts'
 * helpers are torture_cut.c.
 *
 *   torture_kill [--kills N] [--seed S] [--span S[:W][,S[:W]...]] [--dir D]
 *                [--no-selftest] [-v]
 *       The self-test, then the kill torture (what tests/run runs).  N from
 *       $TORTURE_KILLS, else 1000; S from $TORTURE_SEED, else random
 *       (printed); D from $OA_TEST_DIR; spans (weights W: their share of
 *       the kills) from $TORTURE_SPANS, else 64K:3,1M:3,4M:3,64M:1.
 *   torture_kill selftest [--rounds N]
 *       The kill torture against deliberately broken writers of our own: it
 *       must see their violations (and none from a correct one).
 *   torture_kill writer FILE SEED [--start K] [--ack-fd FD | --ack-file PATH]
 *                [--big-flag PATH] [--killpoint P [--kill-after J]]
 *                [--max-txns N] [--relay-fd FD] [--span S]
 *       Run transactions K+1, K+2, ... (K: the transaction the file is at).
 *       --relay-fd: open the file, ack 0 ("ready"), then read the 8-byte K
 *       to start after from FD (end of file: close and exit 0).
 *       Acks: 8-byte numbers to FD; or lines to PATH, fdatasync'd each (put
 *       it on another file system than FILE for power cuts); else lines on
 *       standard output.  --big-flag: write the number of each big
 *       transaction to PATH as it starts.  --killpoint: oa__set_killpoint(P)
 *       before the commit that follows J successful ones.
 *   torture_kill mutant good|torn|lost FILE SEED [writer options]
 *       A writer that is not the library (tort_run_mutant in util/torture.c).
 *   torture_kill cut FILE SEED ACKFILE [writer options]
 *       writer --ack-file ACKFILE (the power cuts run it as torture_cut cut;
 *       both programs have the writer modes of tort_writer_main).
 *
 * Exit status: 0 pass, 1 violation / failure; writers: 2 a library call
 * failed, 3 the library read back something else than was written.
 *
 * For tests/run (1000 kills take well under this):
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
#include <time.h>
#include <unistd.h>

#include "oatomic.h"
#include "oatomic-private.h"   /* oa__set_killpoint, oa__check */
#include "torture.h"

/* "64K", "4M": the inverse of parse_span, for messages. */
static const char *span_str(char *buf, size_t n, uint64_t span)
{
	if (span % TORT_MIB == 0)
		snprintf(buf, n, "%" PRIu64 "M", (uint64_t)(span / TORT_MIB));
	else
		snprintf(buf, n, "%" PRIu64 "K", (uint64_t)(span / TORT_KIB));
	return buf;
}

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
	long map_rounds;
	long kp_hit_at[8], kp_tried_at[8];
	uint64_t final_k;
};

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
			tort_die(1, "realloc", NULL);
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
			tort_die(1, "poll", NULL);
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
		tort_die(1, "fork", NULL);
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
static int lib_read_check(struct tort_verifier *v, const char *file)
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

/* The power cuts' helper beside us, which writes a state of the sequence
 * (`torture_cut state`), for the repro line of a violation. */
static const char *cut_exe(char *buf, size_t n)
{
	const char *slash = strrchr(tort_self_exe, '/');
	int dir = slash ? (int)(slash - tort_self_exe) + 1 : 0;

	snprintf(buf, n, "%.*storture_cut", dir, tort_self_exe);
	return buf;
}

/*
 * The kill loop.  Library mode: stops at the first violation and returns 1.
 * Mutant mode: counts violations in *R and returns 0 unless the harness
 * itself failed.
 */
static int kill_loop(const struct kcfg *c, struct kres *r)
{
	char file[PATH_MAX];
	struct tort_verifier v;
	uint64_t *acks = NULL;
	size_t acks_cap = 0;

	memset(r, 0, sizeof(*r));
	snprintf(file, sizeof(file), "%s/torture-%s.dat", c->dir,
		 c->mutant ? c->mutant : "kill");
	tort_verifier_init(&v, c->seed, c->span);

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
		/* a third of the rounds store half their writes through
		 * oa_mmap (drawn apart from RR: the other draws stay) */
		uint64_t mdraw = wl_mix(c->seed ^ ((uint64_t)round << 20) ^
					0x6d6d6170ULL);
		/* (half of them with a memory limit that makes them spill) */
		int use_map = c->mutant || mdraw % 3 ? 0 : mdraw % 2 ? 1 : 2;
		const char *s_map = use_map == 2 ? "2" : "1";
		if (use_map)
			r->map_rounds++;

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
			char *argv2[] = { tort_self_exe, (char *)"writer", file, s_seed,
					  (char *)"--start", s_start,
					  (char *)"--ack-fd", (char *)"@ACK",
					  (char *)"--relay-fd", (char *)"@RELAY",
					  (char *)"--max-txns", s_rt,
					  (char *)"--span", s_span,
					  (char *)"--mmap", (char *)(use_map ? s_map : "0"),
					  NULL };
			pid2 = tort_spawn(argv2, &afd2, &rfd2);
			if (!collect(pid2, afd2, wl_now_us() + 10000000, &al, 1)) {
				int st2 = tort_wait_child(pid2);
				char d[64];
				snprintf(d, sizeof(d), "(status 0x%x)", st2);
				tort_verifier_free(&v);
				free(al.v);
				return round_failed(c, round, file, "the relay "
						    "writer did not get ready", d);
			}
		}

		char *argv[20];
		int n = 0;
		argv[n++] = tort_self_exe;
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
		if (use_map) {
			argv[n++] = (char *)"--mmap";
			argv[n++] = (char *)s_map;
		}
		if (use_kp) {
			argv[n++] = (char *)"--killpoint";
			argv[n++] = s_kp;
			argv[n++] = (char *)"--kill-after";
			argv[n++] = s_ka;
		}
		argv[n] = NULL;

		int afd;
		pid_t pid = tort_spawn(argv, &afd, NULL);
		int died_first = collect(pid, afd, wl_now_us() + delay, &al, 0);
		int st = tort_wait_child(pid);
		if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
			char d[64];
			snprintf(d, sizeof(d), "(status 0x%x, start %" PRIu64 ")",
				 st, k0);
			tort_verifier_free(&v);
			free(al.v);
			if (pid2 > 0) {
				kill(pid2, SIGKILL);
				tort_wait_child(pid2);
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
					tort_die(1, "write relay", NULL);
				r->relay_rounds++;
			}
			close(rfd2);
			size_t before = al.n;
			int must_finish = !died_first || !relay_delay;
			int finished = collect(pid2, afd2, wl_now_us() +
					       (must_finish ? 5000000 : relay_delay),
					       &al, 0);
			if (must_finish && !finished) {
				tort_wait_child(pid2);
				fprintf(stderr, "torture kill: round %ld seed %"
					PRIu64 ": the relay writer (a handle open "
					"before the first writer died in its commit "
					"at kill point %d) did not finish %s "
					"transactions in 5 s: hung?\n", round,
					c->seed, kp, s_rt);
				tort_verifier_free(&v);
				free(al.v);
				return 1;
			}
			r->relay_commits += (long)(al.n - before);
			r->commits += (long)(al.n - before);
			int st2 = tort_wait_child(pid2);
			if (!(WIFEXITED(st2) && WEXITSTATUS(st2) == 0) &&
			    !(WIFSIGNALED(st2) && WTERMSIG(st2) == SIGKILL)) {
				char d[64];
				snprintf(d, sizeof(d), "(status 0x%x, start %" PRIu64
					 ")", st2, k0);
				tort_verifier_free(&v);
				free(al.v);
				return round_failed(c, round, file,
						    "the relay writer failed", d);
			}
		}
		acks = al.v;
		acks_cap = al.cap;
		size_t nacks = al.n;
		if (tort_check_acks(&v, acks, nacks) < 0) {
			tort_verifier_free(&v);
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
				tort_verifier_free(&v);
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
			tort_verifier_free(&v);
			free(acks);
			return round_failed(c, round, file, "oa_recover failed:", d);
		}
		if (tort_read_actual(&v, file, 0) < 0) {
			tort_verifier_free(&v);
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
			tort_verifier_free(&v);
			free(acks);
			return 1;
		}
		int cls = tort_classify(&v, a);
		if (c->verbose)
			fprintf(stderr, "round %ld: start %" PRIu64 " acked %" PRIu64
				" (%zu) next %" PRIu64 " %s%s delay %" PRIu64 "us:"
				" %s\n", round, k0, a, nacks, v.nb,
				use_kp ? "killpoint " : "", use_kp ? s_kp : "",
				delay, tort_vname[cls]);
		if (cls == TORT_V_TORN || cls == TORT_V_LOST) {
			if (cls == TORT_V_TORN)
				r->torn++;
			else
				r->lost++;
			if (c->mutant) {
				/* carry on from what the mutant left: make the
				 * file the acked state again */
				int fd = open(file, O_WRONLY | O_TRUNC | O_CLOEXEC);
				if (fd < 0 || wl_write_all(fd, v.m.buf,
							(size_t)v.m.size) < 0)
					tort_die(1, "rewrite", file);
				close(fd);
				continue;
			}
			fprintf(stderr, "torture kill: VIOLATION (%s) in round %ld, "
				"seed %" PRIu64 ": writer started at txn %" PRIu64
				", last acked txn %" PRIu64 ", next commit %" PRIu64
				", %s\n", tort_vname[cls], round, c->seed, k0, a, v.nb,
				relay ? "killpoint round with a relay writer taking "
				"over (the last acked txn is the one the first "
				"writer died committing)"
				: use_kp ? "killpoint round" : "timed kill");
			fprintf(stderr, "  writer: %s writer %s %s --span %s "
				"--start %s --ack-fd N%s%s%s%s%s (delay %" PRIu64
				" us)\n", tort_self_exe, file, s_seed, s_span, s_start,
				use_map == 2 ? " --mmap 2" : use_map ? " --mmap 1" : "",
				use_kp ? " --killpoint " : "", use_kp ? s_kp : "",
				use_kp ? " --kill-after " : "", use_kp ? s_ka : "",
				delay);
			tort_describe(stderr, &v);
			char cut[PATH_MAX];
			fprintf(stderr, "  repro: %s state F %s %s %s && %s writer F "
				"%s --span %s --start %s%s%s%s%s, then kill and "
				"oa_recover F\n", cut_exe(cut, sizeof(cut)), s_seed,
				s_start, s_span, tort_self_exe, s_seed, s_span, s_start,
				use_kp ? " --killpoint " : "", use_kp ? s_kp : "",
				use_kp ? " --kill-after " : "", use_kp ? s_ka : "");
			fprintf(stderr, "  file kept: %s\n", file);
			tort_verifier_free(&v);
			free(acks);
			return 1;
		}
		if (cls == TORT_V_A)
			r->ok_a++;
		else
			r->ok_b++;

		if (!c->mutant) {
			/* recovery is idempotent */
			if (oa_recover(file) < 0 && !(errno == ENOENT && v.missing)) {
				tort_verifier_free(&v);
				free(acks);
				return round_failed(c, round, file,
						    "second oa_recover failed:",
						    strerror(errno));
			}
			if (tort_read_actual(&v, file, 1) < 0) {
				tort_verifier_free(&v);
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
				tort_verifier_free(&v);
				free(acks);
				return 1;
			}
			/* and the library's readers see the same */
			if (lib_read_check(&v, file) < 0) {
				fprintf(stderr, "torture kill: round %ld seed %"
					PRIu64 ": start %" PRIu64 ", acked %" PRIu64
					"\n", round, c->seed, k0, a);
				tort_verifier_free(&v);
				free(acks);
				return 1;
			}
		}
		tort_settle(&v, cls);
	}
	r->final_k = v.m.k;
	tort_verifier_free(&v);
	free(acks);
	return 0;
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
		tort_clean_files(dir, name);
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
		tort_clean_files(dir, name);
	}
	return bad;
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
	t->map_rounds += r->map_rounds;
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
			weights[n] = (long)tort_parse_u64(colon + 1, "span weight");
		}
		spans[n++] = tort_parse_span(t);
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
	struct kcfg c = { NULL, tort_default_seed(), 1000, NULL, 0, TORT_SPAN };
	uint64_t spans[TORT_NSPANS_MAX];
	long weights[TORT_NSPANS_MAX], wsum = 0, done = 0;
	int nspans, do_selftest = 1;
	const char *e = getenv("TORTURE_KILLS");
	const char *spanlist = getenv("TORTURE_SPANS");

	if (e && *e)
		c.rounds = (long)tort_parse_u64(e, "TORTURE_KILLS");
	if (!spanlist || !*spanlist)
		spanlist = default_spans;
	for (; i < argc; i++) {
		if (!strcmp(argv[i], "--kills") && i + 1 < argc)
			c.rounds = (long)tort_parse_u64(argv[++i], "--kills");
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			c.seed = tort_parse_u64(argv[++i], "--seed");
		else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
			c.dir = argv[++i];
		else if (!strcmp(argv[i], "--span") && i + 1 < argc)
			spanlist = argv[++i];
		else if (!strcmp(argv[i], "--no-selftest"))
			do_selftest = 0;
		else if (!strcmp(argv[i], "-v"))
			c.verbose = 1;
		else {
			fprintf(stderr, "usage: torture_kill [--kills N] [--seed S] "
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
		c.dir = tort_test_dir(tbuf, sizeof(tbuf));
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
		tort_clean_files(c.dir, "torture-kill.dat");
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
	printf("  mapping rounds (half the writes stored through oa_mmap, half "
	       "of those spilling past 16 pages) %ld\n", r.map_rounds);
	printf("  interrupted recoveries %ld (%ld finished or hit their kill "
	       "point first)\n", r.rec_killed, r.rec_died_early);
	printf("  killpoint rounds %ld, hit %ld; per point hit/tried:",
	       r.kp_rounds, r.kp_hits);
	for (int p = 1; p <= 6; p++)
		printf(" %d:%ld/%ld", p, r.kp_hit_at[p], r.kp_tried_at[p]);
	printf("\n");
	tort_clean_files(c.dir, "torture-kill.dat");
	return 0;
}


static int usage(void)
{
	fprintf(stderr,
		"usage: torture_kill [--kills N] [--seed S] [--span S[,S...]] [--dir D]\n"
		"                    [--no-selftest] [-v]\n"
		"       torture_kill selftest [--rounds N]\n"
		"       torture_kill writer FILE SEED [--start K] [--ack-fd FD | --ack-file P]\n"
		"                    [--big-flag P] [--killpoint P [--kill-after J]] [--max-txns N]\n"
		"                    [--span S]\n"
		"       torture_kill mutant good|torn|lost FILE SEED [writer options]\n"
		"       torture_kill cut FILE SEED ACKFILE [writer options]\n");
	return 1;
}

int main(int argc, char **argv)
{
	const char *m = argc >= 2 ? argv[1] : "";
	int rc;

	tort_init();
	if (!strcmp(m, "selftest")) {
		char tbuf[64];
		long rounds = 20;
		if (argc >= 4 && !strcmp(argv[2], "--rounds"))
			rounds = (long)tort_parse_u64(argv[3], "--rounds");
		setvbuf(stdout, NULL, _IOLBF, 0);
		return selftest(tort_test_dir(tbuf, sizeof(tbuf)),
				tort_default_seed(), rounds);
	}
	rc = tort_writer_main(argc, argv);
	if (rc >= 0)
		return rc;
	if (!strcmp(m, "selftest") || !strcmp(m, "writer") ||
	    !strcmp(m, "cut") || !strcmp(m, "mutant"))
		return usage();
	/* the torture itself: no arguments (tests/run), or its options */
	return cmd_kill(argc, argv, 1);
}
