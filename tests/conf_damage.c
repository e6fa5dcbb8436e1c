/*
 * conf_damage.c - damage is refused, never passed as success ("Everyday
 * use", 3).  Each trial: a child writer commits in a loop on a model it
 * knows (every commit rewrites 8 scattered 4 KiB blocks of a 256 KiB file
 * with its number), and dies by SIGKILL — at a random instant, or at a kill
 * point of the commit protocol (record written, flushed, half applied,
 * applied: the apply in place is the window that matters).  Then the
 * control file or the journal is damaged (seeded, reproducible): bit flips,
 * truncation to a random length, or a 512-byte sector of junk, aimed at the
 * part of the file the library wrote.  Then oa_recover must either return
 * 0 with the file in a state the writer had committed or was committing
 * (before or after the commit it died in, never a mix), or fail with
 * EUCLEAN.  Counts per kind; any violation fails the test and prints the
 * trial's seed (DAMAGE_SEED=S DAMAGE_ONLY=I replays trial I).
 *
 * Environment: DAMAGE_TRIALS per damage kind (default 200; the long run
 * uses more), DAMAGE_SEED (default: tu_seed()).
 *
 * timeout: 300
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>

#include "testutil.h"
#include "internal.h"
#include "oatomic-private.h"

#define BLK     4096
#define NBLK    64
#define FLEN    (NBLK * BLK)
#define PER     8               /* blocks per commit */

enum { K_FLIP, K_TRUNC, K_SECTOR, NKIND };
static const char *kind_name[NKIND] = { "bit flips", "truncation",
					"junk sector" };

static const char *path;
static uint64_t trial_seed;
/* Shared with the child: the commit it is in (1, 2, ...). */
static volatile uint64_t *committing;

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* The blocks commit K of the trial rewrites (distinct, unsorted). */
static void blocks_of(uint64_t k, int out[PER])
{
	uint64_t st = mix(trial_seed ^ (k * 0x100000001b3ull)) | 1;
	for (int i = 0; i < PER; i++) {
		int b, dup;
		do {
			b = (int)(tu_rand(&st) % NBLK);
			dup = 0;
			for (int j = 0; j < i; j++)
				dup |= out[j] == b;
		} while (dup);
		out[i] = b;
	}
}

/* Block B as commit K writes it (K = 0: the initial contents). */
static void block_fill(unsigned char *p, uint64_t k, int b)
{
	tu_fill_stamp(p, BLK, mix(trial_seed + k * NBLK + (uint64_t)b) | 1);
}

/* The file after commits 1..K. */
static void state(unsigned char *buf, uint64_t k)
{
	int bl[PER];
	for (int b = 0; b < NBLK; b++)
		block_fill(buf + (size_t)b * BLK, 0, b);
	for (uint64_t j = 1; j <= k; j++) {
		blocks_of(j, bl);
		for (int i = 0; i < PER; i++)
			block_fill(buf + (size_t)bl[i] * BLK, j, bl[i]);
	}
}

struct plan {
	int kp;          /* kill point of the last commit, 0: killed by us */
	int commits;     /* with a kill point: commits before the fatal one */
};

static int writer(void *arg)
{
	const struct plan *pl = arg;
	unsigned char b[BLK];
	int bl[PER];
	oa_file *f = oa_open(path, O_RDWR, 0);
	if (!f)
		return 2;
	for (uint64_t k = 1;; k++) {
		blocks_of(k, bl);
		for (int i = 0; i < PER; i++) {
			block_fill(b, k, bl[i]);
			if (oa_pwrite(f, b, BLK, (off_t)bl[i] * BLK) != BLK)
				return 3;
		}
		*committing = k;
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (pl->kp && (int)k == pl->commits + 1)
			oa__set_killpoint(pl->kp);
		if (oa_commit(f))
			return 4;
		if (pl->kp && (int)k > pl->commits)
			return 5;   /* the kill point did not fire */
	}
}

/* End of what the library wrote in FD: its last non-zero byte + 1. */
static off_t used_end(int fd)
{
	static unsigned char b[1 << 16];
	off_t size = lseek(fd, 0, SEEK_END), end = 0;
	for (off_t off = 0; off < size; off += (off_t)sizeof(b)) {
		ssize_t n = pread(fd, b, sizeof(b), off);
		CHECK(n > 0);
		for (ssize_t i = n; i-- > 0;)
			if (b[i]) {
				end = off + i + 1;
				break;
			}
	}
	return end;
}

/* Damage P by KIND; a line describing it into WHAT. */
static void damage(const char *p, int kind, uint64_t *st, char *what,
		   size_t wn)
{
	int fd = open(p, O_RDWR);
	CHECK(fd >= 0);
	off_t end = used_end(fd), size = lseek(fd, 0, SEEK_END);
	if (end < 1)
		end = size;
	switch (kind) {
	case K_FLIP: {
		int n = 1 + (int)(tu_rand(st) % 8);
		snprintf(what, wn, "%d bit flips below %lld", n, (long long)end);
		for (int i = 0; i < n; i++) {
			off_t at = (off_t)(tu_rand(st) % (uint64_t)end);
			unsigned char c;
			CHECK(pread(fd, &c, 1, at) == 1);
			int bit = (int)(tu_rand(st) % 8);
			c ^= (unsigned char)(1u << bit);
			CHECK(pwrite(fd, &c, 1, at) == 1);
			if (getenv("DAMAGE_ONLY"))
				printf("flip: byte %lld bit %d\n", (long long)at,
				       bit);
		}
		break;
	}
	case K_TRUNC: {
		off_t len = (off_t)(tu_rand(st) % (uint64_t)end);
		snprintf(what, wn, "truncated to %lld of %lld", (long long)len,
			 (long long)size);
		CHECK(ftruncate(fd, len) == 0);
		break;
	}
	default: {
		unsigned char junk[512];
		off_t at = (off_t)(tu_rand(st) % (uint64_t)((end + 511) / 512)) *
			   512;
		for (size_t i = 0; i < sizeof(junk); i += 8) {
			uint64_t v = tu_rand(st);
			memcpy(junk + i, &v, 8);
		}
		snprintf(what, wn, "junk sector at %lld", (long long)at);
		CHECK(pwrite(fd, junk, sizeof(junk), at) == (ssize_t)sizeof(junk));
		break;
	}
	}
	close(fd);
}

/* Overwrite LEN bytes of P at OFF with V (V < 0: flip bit 0 of each). */
static void poke(const char *p, off_t off, size_t len, int v)
{
	unsigned char b[4096];
	int fd = open(p, O_RDWR);
	CHECK(fd >= 0 && len <= sizeof(b));
	CHECK(pread(fd, b, len, off) == (ssize_t)len);
	for (size_t i = 0; i < len; i++)
		b[i] = v < 0 ? (unsigned char)(b[i] ^ 1) : (unsigned char)v;
	CHECK(pwrite(fd, b, len, off) == (ssize_t)len);
	close(fd);
}

/*
 * The cases the random trials hit once in hundreds (CI found one: 3 bit
 * flips took the identity, the only header slot ever written and a record,
 * and recovery took the control file for one whose initialisation never
 * became durable, over a half-applied commit).  The writer dies at kill
 * point KP of commit COMMITS + 1; then the identity is garbled, header slot
 * A garbled and slot B zeroed, and (SEAL) both copies of the seal garbled.
 * WANT_EUCLEAN: recovery must refuse; else it must leave state 0.
 */
static void targeted(int kp, int commits, bool seal, bool want_euclean,
		     unsigned char *want0)
{
	struct plan pl = { kp, commits };
	const char *ctl = tu_control_path(path);
	int status, r, err;
	size_t n;
	pid_t pid;

	trial_seed = 42 + (uint64_t)kp * 7 + (uint64_t)commits;
	unlink(path);
	tu_remove_journals(path);
	state(want0, 0);
	tu_write_file(path, want0, FLEN, 0644);
	pid = tu_fork(writer, &pl);
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
	       "targeted kp %d: writer %s", kp, tu_status_str(status));
	poke(ctl, OA_ID_OFF + 40, 1, -1);
	poke(ctl, OA_CSLOT + OA_SLOT_A + 50, 1, -1);
	poke(ctl, OA_CSLOT + OA_SLOT_B, OA_SLOT_BYTES, 0);
	if (seal) {
		poke(ctl, OA_LIVE_OFF + OA_SEAL_OFF + 30, 1, -1);
		poke(ctl, OA_LIVE_OFF + OA_SEAL2_OFF + 30, 1, -1);
	}
	errno = 0;
	r = oa_recover(path);
	err = errno;
	if (want_euclean) {
		CHECKF(r < 0 && err == EUCLEAN,
		       "kill at point %d of commit %d, identity, header and%s "
		       "seal damaged: oa_recover returned %d (%s), not EUCLEAN",
		       kp, commits + 1, seal ? "" : " not the", r,
		       tu_errname(err));
	} else {
		CHECKF(r == 0, "kill at point %d of commit %d, identity and "
		       "header damaged, nothing acknowledged: oa_recover "
		       "failed (%s)", kp, commits + 1, tu_errname(err));
		unsigned char *got = tu_read_file(path, &n);
		CHECKF(n == FLEN && !memcmp(got, want0, FLEN),
		       "nothing acknowledged, recovered: the file changed");
		free(got);
	}
}

struct count {
	long trials, recovered, refused, violations;
};

int main(void)
{
	long trials = 200;
	const char *e = getenv("DAMAGE_TRIALS");
	uint64_t seed = tu_seed();
	long only = -1;
	struct count cnt[NKIND] = { { 0 } };
	unsigned char *want0 = tu_malloc(FLEN), *want1 = tu_malloc(FLEN);
	long kp_hits[8] = { 0 };

	if (e)
		trials = atol(e);
	if ((e = getenv("DAMAGE_SEED")))
		seed = strtoull(e, NULL, 0);
	if ((e = getenv("DAMAGE_ONLY")))
		only = atol(e);
	tu_pin_journal();
	path = tu_path("f");
	committing = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(committing != MAP_FAILED);
	tu_note("seed %llu, %ld trials per kind", (unsigned long long)seed,
		trials);

	if (only < 0) {
		/* An acknowledged commit half applied: the seal proves the
		 * header was flushed; with the seal gone too, nothing tells. */
		targeted(OA_KP_HALF_APPLIED, 1, false, true, want0);
		targeted(OA_KP_HALF_APPLIED, 0, false, true, want0);
		targeted(OA_KP_HALF_APPLIED, 1, true, true, want0);
		/* Nothing acknowledged: a header never flushed is clean. */
		targeted(OA_KP_RECORD_WRITTEN, 0, false, false, want0);
		tu_note("targeted damage of identity, header and seal: as "
			"expected");
	}

	for (long t = 0; t < NKIND * trials; t++) {
		if (only >= 0 && t != only)
			continue;
		int kind = (int)(t % NKIND);
		uint64_t st = mix(seed * 1000003 + (uint64_t)t) | 1;
		struct plan pl = { 0, 0 };
		char what[128];
		int r, err, status;
		pid_t pid;

		trial_seed = tu_rand(&st);
		unlink(path);
		tu_remove_journals(path);
		state(want0, 0);
		tu_write_file(path, want0, FLEN, 0644);
		*committing = 0;

		/* Half the trials die at a kill point (after 0..5 commits),
		 * half at a random instant of a few commits. */
		if (tu_rand(&st) % 2) {
			static const int kps[] = { OA_KP_RECORD_WRITTEN,
						   OA_KP_FLUSHED,
						   OA_KP_HALF_APPLIED,
						   OA_KP_HALF_APPLIED,
						   OA_KP_APPLIED };
			pl.kp = kps[tu_rand(&st) % 5];
			pl.commits = (int)(tu_rand(&st) % 6);
			kp_hits[pl.kp]++;
			pid = tu_fork(writer, &pl);
			CHECK(waitpid(pid, &status, 0) == pid);
			CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
			       "trial %ld: writer %s", t, tu_status_str(status));
		} else {
			/* First let it open (journal creation), then kill it
			 * within the next few commits. */
			pid = tu_fork(writer, &pl);
			while (*committing == 0) {
				int w = waitpid(pid, &status, WNOHANG);
				CHECKF(w == 0, "trial %ld: writer %s", t,
				       tu_status_str(status));
				usleep(100);
			}
			struct timespec ts = { 0, (long)(tu_rand(&st) % 20000) *
						   1000 };
			nanosleep(&ts, NULL);
			kill(pid, SIGKILL);
			CHECK(waitpid(pid, &status, 0) == pid);
			CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
			       "trial %ld: writer %s", t, tu_status_str(status));
		}
		uint64_t k = *committing;

		/* A third of the trials damage the control file, the rest
		 * the journal. */
		const char *victim = tu_rand(&st) % 3 == 0 ?
				     tu_control_path(path) :
				     tu_journal_path(path, 0);
		char vname[64];
		snprintf(vname, sizeof(vname), "%s",
			 strrchr(victim, '/') ? strrchr(victim, '/') + 1 : victim);
		damage(victim, kind, &st, what, sizeof(what));

		if (only >= 0)   /* replaying one trial: what check says */
			oa__check(path, NULL, stdout);
		errno = 0;
		r = oa_recover(path);
		err = errno;
		cnt[kind].trials++;
		if (r < 0) {
			if (err == EUCLEAN) {
				cnt[kind].refused++;
				continue;
			}
			cnt[kind].violations++;
			printf("VIOLATION trial %ld (DAMAGE_SEED=%llu "
			       "DAMAGE_ONLY=%ld): %s of %s, kill %s in commit "
			       "%llu: oa_recover failed with %s, not EUCLEAN\n",
			       t, (unsigned long long)seed, t, what, vname,
			       pl.kp ? "point" : "at random",
			       (unsigned long long)k, tu_errname(err));
			continue;
		}
		size_t n;
		unsigned char *got = tu_read_file(path, &n);
		state(want0, k ? k - 1 : 0);
		state(want1, k);
		if (n == FLEN && (!memcmp(got, want0, FLEN) ||
				  !memcmp(got, want1, FLEN))) {
			cnt[kind].recovered++;
			/* Recovery is idempotent: again, nothing changes. */
			unsigned char *again;
			size_t n2;
			int r2 = oa_recover(path);
			again = tu_read_file(path, &n2);
			CHECKF(r2 == 0 && n2 == n && !memcmp(again, got, n),
			       "trial %ld: second oa_recover changed the file",
			       t);
			free(again);
		} else {
			long b = -1;
			for (size_t i = 0; n == FLEN && i < FLEN && b < 0; i++)
				if (got[i] != want0[i] && got[i] != want1[i])
					b = (long)(i / BLK);
			cnt[kind].violations++;
			printf("VIOLATION trial %ld (DAMAGE_SEED=%llu "
			       "DAMAGE_ONLY=%ld): %s of %s, kill %s%s in commit "
			       "%llu: oa_recover returned 0 but the file is "
			       "neither state %llu nor %llu (size %zu%s%ld)\n",
			       t, (unsigned long long)seed, t, what, vname,
			       pl.kp ? "at point " : "at random",
			       pl.kp ? (pl.kp == OA_KP_HALF_APPLIED ? "half-applied"
				       : pl.kp == OA_KP_FLUSHED ? "flushed"
				       : pl.kp == OA_KP_APPLIED ? "applied"
				       : "record-written") : "",
			       (unsigned long long)k,
			       (unsigned long long)(k ? k - 1 : 0),
			       (unsigned long long)k, n,
			       b >= 0 ? ", block mixing both or neither: " : ", ",
			       b);
		}
		free(got);
	}
	long viol = 0;
	for (int i = 0; i < NKIND; i++) {
		printf("damage: %-12s trials %4ld  recovered %4ld  refused "
		       "(EUCLEAN) %4ld  violations %4ld (%.1f%%)\n",
		       kind_name[i], cnt[i].trials, cnt[i].recovered,
		       cnt[i].refused, cnt[i].violations,
		       cnt[i].trials ? 100.0 * cnt[i].violations / cnt[i].trials
				     : 0.0);
		viol += cnt[i].violations;
	}
	printf("damage: kill points record-written %ld, flushed %ld, "
	       "half-applied %ld, applied %ld; the rest at random\n",
	       kp_hits[OA_KP_RECORD_WRITTEN], kp_hits[OA_KP_FLUSHED],
	       kp_hits[OA_KP_HALF_APPLIED], kp_hits[OA_KP_APPLIED]);
	free(want0);
	free(want1);
	return viol ? 1 : 0;
}
