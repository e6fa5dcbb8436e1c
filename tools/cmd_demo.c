/*
 * cmd_demo.c - `oatomic demo`: kill a writer again and again, and show that
 * oatomic never leaves a torn or lost transaction where plain pwrite does.
 *
 * The workload.  A file of DEMO_NBLOCKS blocks of DEMO_BLOCK bytes.
 * Transaction t (t = 1, 2, ...) rewrites 1..DEMO_MAXSET distinct data blocks
 * (blocks 1..DEMO_NBLOCKS-1), chosen by a generator seeded from (seed, t),
 * and then the header block 0.  Every block it writes is stamped:
 *
 *   offset  size  field
 *        0     8  DEMO_MAGIC
 *        8     8  t, the transaction that wrote the block (0: initial)
 *       16     4  block number
 *       20     4  header only: n, the number of data blocks t wrote
 *       24    32  header only: their numbers (n used, rest 0)
 *       56  4032  filler, generated from (seed, t, block)
 *     4088     8  FNV-1a 64 checksum of bytes 0..4087
 *
 * so the state after transaction k, S(k), is a pure function of the seed:
 * block b holds the stamp of the last transaction <= k that wrote b, block 0
 * the stamp of k.  The verifier replays the sequence from the seed and
 * compares the whole file byte for byte.
 *
 * The experiment.  A child process runs the workload, starting from the
 * state the file is in, and after each commit returns it writes t to a pipe:
 * from then on S(t) or a later state is what the file must show.  The
 * parent waits a random 0..20 ms, SIGKILLs the child, reads the last
 * acknowledged t = a from the pipe, recovers (oa_recover) and reads the
 * file.  The child never starts transaction a + 2 before acknowledging
 * a + 1, so the only correct outcomes are S(a) and S(a + 1); a file equal to
 * S(h) for some h < a has lost a - h acknowledged commits, anything else is
 * torn.  A torn file is repaired to S(a) before the next round.
 *
 * The same is then done with plain pwrite(2) into the file in place, one
 * call per block, and fdatasync(2) at the end of each transaction.  SIGKILL
 * does not drop the page cache, so a plain writer loses nothing that
 * pwrite() returned; it tears when the kill lands between the writes of one
 * transaction, which is why each block is its own call (and why --think,
 * a pause after each block as if the writer computed the next one, makes it
 * tear more often; both writers pause alike).
 *
 * Then both again with the blocks stored through a mapping, 512 bytes at a
 * time: oa_mmap and oa_commit, against a MAP_SHARED mapping and
 * msync(MS_SYNC) (which tears exactly as pwrite does).
 *
 * Everything but the kill times' effect is deterministic from --seed: the
 * transactions, their content and the sequence of delays.  They are drawn
 * from the generator of the crash tortures (workload.h), seeded the demo's
 * own way.
 *
 * SPDX-License-Identifier: MIT
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "oatomic.h"
#include "oatomic-private.h"
#include "tool.h"
#include "workload.h"

#define DEMO_BLOCK	4096u
#define DEMO_NBLOCKS	256u
#define DEMO_MAXSET	8u
#define DEMO_SIZE	((size_t)DEMO_BLOCK * DEMO_NBLOCKS)
#define DEMO_MAGIC	UINT64_C(0x31304f4d4544414f)	/* "OADEMO01" */
#define DEMO_MAX_DELAY_US 20000u

#define OFF_MAGIC	0
#define OFF_TXN		8
#define OFF_BLOCK	16
#define OFF_N		20
#define OFF_LIST	24
#define OFF_FILL	(OFF_LIST + 4 * DEMO_MAXSET)
#define OFF_SUM		(DEMO_BLOCK - 8)

struct demo {
	uint64_t seed;
	unsigned kills;
	unsigned think_us;
	int verbose;
	unsigned char *img;	/* an expected state, DEMO_SIZE */
	unsigned char *file;	/* what the file holds, DEMO_SIZE */
};

/* One method's run and its tally. */
struct method {
	const char *name;
	int lib;		/* 1: liboatomic; 0: plain pwrite */
	int map;		/* 1: blocks stored through a mapping (oa_mmap;
				 * plain: MAP_SHARED, msync(MS_SYNC)) */
	char path[PATH_MAX];
	uint64_t kills, commits, torn, lost, next;
	double secs;
};

/* The state after transaction k: last[b] is the transaction that last
 * wrote block b (last[0] = k). */
struct model {
	uint64_t k;
	uint64_t last[DEMO_NBLOCKS];
};

struct txn {
	uint32_t n;
	uint32_t blk[DEMO_MAXSET];
};

/* The demo's seeding of the shared generator (workload.h): a stream for
 * (seed, a, b), e.g. the blocks of transaction a. */
static struct wl_rng rng_for(uint64_t seed, uint64_t a, uint64_t b)
{
	struct wl_rng r = { wl_mix(seed) ^
			    wl_mix(a * UINT64_C(0x100000001b3) + b) };

	return r;
}

/* The data blocks transaction T writes (none for T = 0). */
static void txn_of(uint64_t seed, uint64_t t, struct txn *x)
{
	struct wl_rng r = rng_for(seed, t, 0x7478);

	memset(x, 0, sizeof(*x));
	if (t == 0)
		return;
	x->n = 1 + (uint32_t)(wl_next(&r) % DEMO_MAXSET);
	for (uint32_t i = 0; i < x->n; i++) {
		uint32_t b;
		int dup;

		do {
			b = 1 + (uint32_t)(wl_next(&r) % (DEMO_NBLOCKS - 1));
			dup = 0;
			for (uint32_t j = 0; j < i; j++)
				dup |= x->blk[j] == b;
		} while (dup);
		x->blk[i] = b;
	}
}

static uint64_t fnv1a(const unsigned char *p, size_t n)
{
	uint64_t h = UINT64_C(0xcbf29ce484222325);

	while (n--)
		h = (h ^ *p++) * UINT64_C(0x100000001b3);
	return h;
}

static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static uint64_t get64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

/* Block B as transaction T writes it. */
static void fill_block(uint64_t seed, uint64_t t, uint32_t b,
		       unsigned char *buf)
{
	struct wl_rng r = rng_for(seed, t, 0x626c6b00u + b);

	memset(buf, 0, OFF_FILL);
	put64(buf + OFF_MAGIC, DEMO_MAGIC);
	put64(buf + OFF_TXN, t);
	put32(buf + OFF_BLOCK, b);
	if (b == 0) {
		struct txn x;

		txn_of(seed, t, &x);
		put32(buf + OFF_N, x.n);
		for (uint32_t i = 0; i < x.n; i++)
			put32(buf + OFF_LIST + 4 * i, x.blk[i]);
	}
	wl_fill(buf + OFF_FILL, OFF_SUM - OFF_FILL, r.s);
	put64(buf + OFF_SUM, fnv1a(buf, OFF_SUM));
}

/* The transaction a stamped block says wrote it, or -1 if it is no whole
 * block of ours. */
static int64_t block_txn(const unsigned char *buf)
{
	if (get64(buf + OFF_MAGIC) != DEMO_MAGIC ||
	    get64(buf + OFF_SUM) != fnv1a(buf, OFF_SUM))
		return -1;
	return (int64_t)get64(buf + OFF_TXN);
}

static void model_step(const struct demo *d, struct model *m)
{
	struct txn x;

	m->k++;
	txn_of(d->seed, m->k, &x);
	for (uint32_t i = 0; i < x.n; i++)
		m->last[x.blk[i]] = m->k;
	m->last[0] = m->k;
}

static void model_at(const struct demo *d, uint64_t k, struct model *m)
{
	memset(m, 0, sizeof(*m));
	while (m->k < k)
		model_step(d, m);
}

static void model_image(const struct demo *d, const struct model *m,
			unsigned char *img)
{
	for (uint32_t b = 0; b < DEMO_NBLOCKS; b++)
		fill_block(d->seed, m->last[b], b, img + (size_t)b * DEMO_BLOCK);
}

/* Set by SIGINT, SIGTERM or SIGPIPE (output closed): finish the round,
 * clean up, stop. */
static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

/* ---- the writer (child) ---- */

static void send_ack(int fd, uint64_t t)
{
	/* 8 bytes < PIPE_BUF: the write is all or nothing, even under
	 * SIGKILL. */
	while (write(fd, &t, sizeof(t)) != (ssize_t)sizeof(t)) {
		if (errno != EINTR)
			_exit(1);
	}
}

/*
 * Run the workload from state K until killed.  First acknowledges K itself,
 * to say it is running.  Never returns.
 */
static __attribute__((noreturn))
void writer(const struct demo *d, const struct method *m, uint64_t k, int ackfd)
{
	unsigned char buf[DEMO_BLOCK];
	oa_file *f = NULL;
	int fd = -1;

	unsigned char *mp = NULL;

	if (m->lib)
		f = oa_open(m->path, O_RDWR, 0);
	else
		fd = open(m->path, O_RDWR | O_CLOEXEC);
	if (!f && fd < 0) {
		tool_error(m->path, "writer: open", errno);
		_exit(1);
	}
	if (m->map) {
		mp = m->lib ? oa_mmap(f, DEMO_SIZE, PROT_READ | PROT_WRITE, 0)
			    : mmap(NULL, DEMO_SIZE, PROT_READ | PROT_WRITE,
				   MAP_SHARED, fd, 0);
		if (!mp || mp == MAP_FAILED) {
			tool_error(m->path, "writer: mmap", errno);
			_exit(1);
		}
	}
	send_ack(ackfd, k);
	for (uint64_t t = k + 1;; t++) {
		struct txn x;

		txn_of(d->seed, t, &x);
		for (uint32_t i = 0; i <= x.n; i++) {
			/* the data blocks, then the header block 0 */
			uint32_t b = i < x.n ? x.blk[i] : 0;
			off_t off = (off_t)b * DEMO_BLOCK;
			int r;

			fill_block(d->seed, t, b, buf);
			if (m->map) {
				/* a block stored as a program stores into
				 * its mapped B-tree: piecewise */
				for (uint32_t o = 0; o < DEMO_BLOCK; o += 512)
					memcpy(mp + off + o, buf + o, 512);
				r = 0;
			} else if (m->lib)
				r = oa_pwrite(f, buf, DEMO_BLOCK, off) ==
				    (ssize_t)DEMO_BLOCK ? 0 : -1;
			else
				r = wl_pwrite_all(fd, buf, DEMO_BLOCK, off);
			if (r < 0) {
				tool_error(m->path, "writer: write", errno);
				_exit(1);
			}
			if (d->think_us && i < x.n)
				wl_sleep_us(d->think_us);
		}
		if ((m->lib ? oa_commit(f) :
		     m->map ? msync(mp, DEMO_SIZE, MS_SYNC) : fdatasync(fd)) < 0) {
			tool_error(m->path, m->lib ? "writer: commit" :
				   m->map ? "writer: msync" : "writer: fdatasync",
				   errno);
			_exit(1);
		}
		send_ack(ackfd, t);
	}
}

/* ---- the verifier (parent) ---- */

/* Make the file hold S(M->k) again, the way the method writes. */
static int repair(const struct demo *d, const struct method *m,
		  const struct model *s)
{
	model_image(d, s, d->img);
	if (m->lib) {
		oa_file *f = oa_open(m->path, O_RDWR, 0);

		if (!f)
			return tool_error(m->path, "repair: open", errno);
		if (oa_pwrite(f, d->img, DEMO_SIZE, 0) != (ssize_t)DEMO_SIZE ||
		    oa_commit(f) < 0) {
			int err = errno;

			oa_close(f);
			return tool_error(m->path, "repair", err);
		}
		if (oa_close(f) < 0)
			return tool_error(m->path, "repair: close", errno);
	} else {
		int fd = open(m->path, O_WRONLY | O_CLOEXEC);

		if (fd < 0)
			return tool_error(m->path, "repair: open", errno);
		if (wl_pwrite_all(fd, d->img, DEMO_SIZE, 0) < 0 || fsync(fd) < 0) {
			int err = errno;

			close(fd);
			return tool_error(m->path, "repair", err);
		}
		close(fd);
	}
	return 0;
}

/* Say how the file (d->file, LEN bytes) differs from S(A) and S(A+1). */
static void describe_torn(const struct demo *d, const struct model *a,
			  size_t len, unsigned kill)
{
	struct model b = *a;
	unsigned old = 0, new = 0, other = 0;
	int64_t h = len >= DEMO_BLOCK ? block_txn(d->file) : -1;

	model_step(d, &b);
	for (uint32_t blk = 0; blk < DEMO_NBLOCKS; blk++) {
		size_t off = (size_t)blk * DEMO_BLOCK;
		int64_t t = off + DEMO_BLOCK <= len ? block_txn(d->file + off)
						    : -1;

		if (t >= 0 && (uint64_t)t == a->last[blk])
			old++;
		else if (t >= 0 && (uint64_t)t == b.last[blk])
			new++;
		else
			other++;
	}
	printf("  kill %u: torn after commit %" PRIu64 ": header from %" PRId64
	       "; %u blocks as after commit %" PRIu64 ", %u as after %" PRIu64
	       ", %u neither\n", kill, a->k, h, old, a->k, new, b.k, other);
}

/*
 * Check the file after a kill: CUR is the state the round started from, A
 * the last acknowledged transaction.  Counts the outcome in M and leaves in
 * CUR the state the file is in now.  Returns 0, or TOOL_EXIT_ERR.
 */
static int verify(const struct demo *d, struct method *m, struct model *cur,
		  uint64_t a, unsigned kill)
{
	struct model s = *cur;
	ssize_t len;
	int64_t h;
	int fd;

	if (m->lib && oa_recover(m->path) < 0)
		return tool_error(m->path, "recover", errno);
	fd = open(m->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return tool_error(m->path, NULL, errno);
	/* one byte more than the file should hold, to see it grow */
	len = wl_pread_all(fd, d->file, DEMO_SIZE, 0);
	if (len == (ssize_t)DEMO_SIZE) {
		char extra;

		if (wl_pread_all(fd, &extra, 1, DEMO_SIZE) != 0)
			len++;
	}
	close(fd);
	if (len < 0)
		return tool_error(m->path, "read", errno);

	while (s.k < a)
		model_step(d, &s);
	if (len == (ssize_t)DEMO_SIZE) {
		model_image(d, &s, d->img);
		if (memcmp(d->img, d->file, DEMO_SIZE) == 0) {
			*cur = s;
			return 0;
		}
		/* the commit being made when the kill came may be there */
		model_step(d, &s);
		model_image(d, &s, d->img);
		if (memcmp(d->img, d->file, DEMO_SIZE) == 0) {
			m->next++;
			*cur = s;
			return 0;
		}
		/* a whole older state: acknowledged commits are lost */
		h = block_txn(d->file);
		if (h >= 0 && (uint64_t)h < a) {
			struct model o;

			model_at(d, (uint64_t)h, &o);
			model_image(d, &o, d->img);
			if (memcmp(d->img, d->file, DEMO_SIZE) == 0) {
				m->lost += a - (uint64_t)h;
				if (d->verbose)
					printf("  kill %u: lost commits %" PRId64
					       "..%" PRIu64 "\n", kill, h + 1,
					       a);
				*cur = o;
				return 0;
			}
		}
	}
	m->torn++;
	s = *cur;
	while (s.k < a)
		model_step(d, &s);
	if (d->verbose) {
		if (len != (ssize_t)DEMO_SIZE)
			printf("  kill %u: torn after commit %" PRIu64
			       ": size %zd, not %zu\n", kill, a, len,
			       DEMO_SIZE);
		else
			describe_torn(d, &s, (size_t)len, kill);
	}
	if (repair(d, m, &s))
		return TOOL_EXIT_ERR;
	*cur = s;
	return 0;
}

/* One round: start a writer from CUR, kill it after DELAY_US, verify. */
static int round_once(const struct demo *d, struct method *m,
		      struct model *cur, unsigned delay_us, unsigned nth)
{
	uint64_t ack, last;
	int fds[2], st;
	ssize_t r;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return tool_error(NULL, "pipe", errno);
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return tool_error(NULL, "fork", errno);
	}
	if (pid == 0) {
		close(fds[0]);
		writer(d, m, cur->k, fds[1]);
	}
	close(fds[1]);

	/* Start the clock once the writer runs its workload. */
	do
		r = read(fds[0], &ack, sizeof(ack));
	while (r < 0 && errno == EINTR);
	if (r == (ssize_t)sizeof(ack))
		wl_sleep_us(delay_us);
	kill(pid, SIGKILL);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (r != (ssize_t)sizeof(ack) || !WIFSIGNALED(st) ||
	    WTERMSIG(st) != SIGKILL) {
		close(fds[0]);
		/* the writer has said why on stderr */
		return tool_errorf(m->path, "%s writer failed before it was "
				   "killed", m->name);
	}
	last = ack;
	for (;;) {
		r = read(fds[0], &ack, sizeof(ack));
		if (r < 0 && errno == EINTR)
			continue;
		if (r != (ssize_t)sizeof(ack))
			break;
		last = ack;
	}
	close(fds[0]);

	m->kills++;
	m->commits += last - cur->k;
	return verify(d, m, cur, last, nth);
}

static int run_method(const struct demo *d, struct method *m)
{
	struct wl_rng delays = rng_for(d->seed, 0x64656c6179, 0);
	struct model cur;
	uint64_t t0 = wl_now_us();
	int fd;

	/* S(0), written plainly: the file starts as any file does. */
	model_at(d, 0, &cur);
	model_image(d, &cur, d->img);
	fd = open(m->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return tool_error(m->path, NULL, errno);
	if (wl_pwrite_all(fd, d->img, DEMO_SIZE, 0) < 0 || fsync(fd) < 0) {
		int err = errno;

		close(fd);
		return tool_error(m->path, "write", err);
	}
	close(fd);

	if (d->verbose)
		printf("%s:\n", m->name);
	for (unsigned i = 1; i <= d->kills; i++) {
		unsigned delay = (unsigned)(wl_next(&delays) %
					    (DEMO_MAX_DELAY_US + 1));

		if (interrupted)
			return tool_errorf(NULL, "demo: interrupted");
		if (round_once(d, m, &cur, delay, i))
			return TOOL_EXIT_ERR;
	}
	m->secs = (double)(wl_now_us() - t0) / 1e6;
	return 0;
}

/* ---- the scratch directory ---- */

static int rm_entry(const char *path, const struct stat *st, int type,
		    struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	if (remove(path) < 0)
		tool_error(path, "remove", errno);
	return 0;
}

static void rm_tree(const char *dir)
{
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* What the library says about the file: "journal on ext4". */
static void describe_method(const struct method *m, char *buf, size_t len)
{
	struct oa_ioinfo io = { .size = sizeof(io) };
	oa_file *f = oa_open(m->path, O_RDONLY, 0);
	const char *name;

	snprintf(buf, len, "?");
	if (!f)
		return;
	if (oa_ioinfo(f, &io) == 0) {
		name = oa__method_name(io.method);
		snprintf(buf, len, "method %s on %s", name ? name : "?",
			 io.fs_name);
	}
	oa_close(f);
}

static int demo_f(const struct tool_cmd *cmd, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "kills", required_argument, NULL, 'k' },
		{ "dir", required_argument, NULL, 'd' },
		{ "seed", required_argument, NULL, 's' },
		{ "think", required_argument, NULL, 't' },
		{ "keep", no_argument, NULL, 'K' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct demo d = { .seed = 1, .kills = 200 };
	struct method lib = { .name = "oatomic", .lib = 1 };
	struct method plain = { .name = "plain pwrite", .lib = 0 };
	struct method libmap = { .name = "oatomic mmap", .lib = 1, .map = 1 };
	struct method msyncm = { .name = "mmap + msync", .lib = 0, .map = 1 };
	struct method *all[4] = { &lib, &plain, &libmap, &msyncm };
	const char *base = getenv("TMPDIR");
	char dir[PATH_MAX - 32], how[64];
	struct sigaction sa = { .sa_flags = 0 }, old_int, old_term,
			 old_pipe;
	int keep = 0, opt, ret;
	uint64_t v;
	int rc;

	if (!base || !*base)
		base = "/tmp";
	while ((opt = getopt_long(argc, argv, ":k:d:s:t:Kvh", longopts,
				  NULL)) != -1) {
		switch (opt) {
		case 'k':
			if ((rc = tool_parse_range(cmd, "--kills", optarg, 1,
						   1000000, "1 to 1000000",
						   &v)) != 0)
				return rc;
			d.kills = (unsigned)v;
			break;
		case 'd':
			base = optarg;
			break;
		case 's':
			if ((rc = tool_parse_range(cmd, "--seed", optarg, 0,
						   UINT64_MAX, "a number ("
						   TOOL_NUM_HINT ")", &v)) != 0)
				return rc;
			d.seed = v;
			break;
		case 't':
			if ((rc = tool_parse_range(cmd, "--think", optarg, 0,
						   1000000, "0 to 1000000 "
						   "microseconds", &v)) != 0)
				return rc;
			d.think_us = (unsigned)v;
			break;
		case 'K':
			keep = 1;
			break;
		case 'v':
			d.verbose = 1;
			break;
		case 'h':
			return tool_help(cmd);
		default:
			return tool_badopt(cmd, opt, argv);
		}
	}
	if (optind != argc)
		return tool_usage(cmd, "too many arguments");

	if ((size_t)snprintf(dir, sizeof(dir), "%s/oatomic-demo.XXXXXX",
			     base) >= sizeof(dir))
		return tool_error(base, NULL, ENAMETOOLONG);
	if (!mkdtemp(dir))
		return tool_error(base, "mkdtemp", errno);
	snprintf(lib.path, sizeof(lib.path), "%s/oatomic.dat", dir);
	snprintf(plain.path, sizeof(plain.path), "%s/pwrite.dat", dir);
	snprintf(libmap.path, sizeof(libmap.path), "%s/oatomic-mmap.dat", dir);
	snprintf(msyncm.path, sizeof(msyncm.path), "%s/msync.dat", dir);
	d.img = malloc(DEMO_SIZE);
	d.file = malloc(DEMO_SIZE + 1);
	if (!d.img || !d.file) {
		ret = tool_error(NULL, NULL, ENOMEM);
		goto out;
	}

	printf("oatomic demo: a writer commits transactions of 1-%u random "
	       "%u KiB blocks\nand a header to a %zu KiB file and is "
	       "SIGKILLed %u times at random moments\n(0-%u ms; seed %" PRIu64
	       "%s); after each kill the file must hold the last\n"
	       "acknowledged commit or the one after it.  Then the same with "
	       "the blocks\nstored through a mapping (oa_mmap, against "
	       "MAP_SHARED + msync).\n",
	       DEMO_MAXSET, DEMO_BLOCK / 1024, DEMO_SIZE / 1024, d.kills,
	       DEMO_MAX_DELAY_US / 1000, d.seed,
	       d.think_us ? ", think time set" : "");
	/* Ctrl-C (or a closed output) ends the demo after the current round,
	 * so that the scratch directory is still removed (the writers inherit the handler and
	 * are killed by us as usual). */
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	sigaction(SIGPIPE, &sa, &old_pipe);
	ret = run_method(&d, &lib);
	if (ret == 0) {
		describe_method(&lib, how, sizeof(how));
		ret = run_method(&d, &plain);
	}
	/* the same through a mapping: stores, then oa_commit / msync */
	if (ret == 0)
		ret = run_method(&d, &libmap);
	if (ret == 0)
		ret = run_method(&d, &msyncm);
	if (ret == 0) {
		printf("\nran in %s; oatomic used %s\n\n", dir, how);
		printf("%-14s %7s %9s %6s %6s %8s\n", "method", "kills",
		       "commits", "torn", "lost", "time");
		for (int i = 0; i < 4; i++) {
			const struct method *m = all[i];

			printf("%-14s %7" PRIu64 " %9" PRIu64 " %6" PRIu64
			       " %6" PRIu64 " %7.1fs\n", m->name, m->kills,
			       m->commits, m->torn, m->lost, m->secs);
		}
		printf("\n");
		for (int i = 0; i < 4; i += 2) {
			const struct method *m = all[i];
			if (m->torn == 0 && m->lost == 0)
				printf("%s: no kill left a torn file or lost "
				       "an acknowledged commit.\n", m->name);
			else
				printf("%s: FAILED: %" PRIu64 " torn states, %"
				       PRIu64 " lost commits.\n", m->name,
				       m->torn, m->lost);
		}
		if (plain.torn)
			printf("plain pwrite: %" PRIu64 " of %" PRIu64 " kills "
			       "left blocks of two transactions mixed.\n",
			       plain.torn, plain.kills);
		else
			printf("plain pwrite: no kill happened to land between "
			       "its writes this time (try --think 20).\n");
		if (msyncm.torn)
			printf("mmap + msync: %" PRIu64 " of %" PRIu64 " kills "
			       "left blocks of two transactions mixed.\n",
			       msyncm.torn, msyncm.kills);
		if (lib.torn || lib.lost || libmap.torn || libmap.lost)
			ret = TOOL_EXIT_ERR;
	}
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	sigaction(SIGPIPE, &old_pipe, NULL);
out:
	free(d.img);
	free(d.file);
	if (keep)
		printf("kept %s\n", dir);
	else
		rm_tree(dir);
	return ret;
}

const struct tool_cmd demo_cmd = {
	.name = "demo",
	.func = demo_f,
	.args = "[--kills N] [--dir D] [--seed S] [--think US] [--keep] "
		"[--verbose]",
	.oneline = "kill a writer at random moments: oatomic never tears, "
		   "plain pwrite does",
	.help =
" Runs a writer process that commits transactions of 1 to 8 random 4 KiB\n"
" blocks plus a header block to a 1 MiB file, SIGKILLs it at a random\n"
" moment (0-20 ms after it starts), recovers, and compares the file byte\n"
" for byte with the state after the last acknowledged commit (or the one\n"
" after it, which may have reached the disk before its acknowledgement).\n"
" Anything else is a torn state; an older whole state means lost commits.\n"
" Then the same workload is written with plain pwrite(2), one call per\n"
" block and fdatasync(2) per transaction, and killed the same way.  It\n"
" prints a table of kills, acknowledged commits, torn states and lost\n"
" commits for both, and exits 0 only if oatomic had none torn or lost.\n"
" The workload and the delays follow from the seed.\n"
"\n"
" Options:\n"
"   -k, --kills N    kill each writer N times (default 200)\n"
"   -d, --dir D      make the scratch directory in D (default $TMPDIR,\n"
"                    else /tmp); use it to try another file system\n"
"   -s, --seed S     seed of the workload and the delays (default 1)\n"
"   -t, --think US   pause US microseconds after each block of a\n"
"                    transaction, in both writers (default 0)\n"
"   -K, --keep       keep the scratch directory\n"
"   -v, --verbose    describe every torn or lost state\n"
"\n"
" Numbers are decimal, or hex after 0x.\n"
"\n"
" Example:\n"
"   oatomic demo --kills 500 --dir /mnt/xfs --seed 7\n",
};
