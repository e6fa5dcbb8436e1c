/*
 * torture_cut.c - the helpers of the real power cuts: tests/powercut.sh
 * (FS_IOC_SHUTDOWN on loop devices, the writer and verifier of the kill
 * torture's sequence) and tests/powercut_shared.sh (the cut aimed at the
 * blocks a clone shares).  Not a test of its own: tests/run leaves it out
 * (the "helper:" line below).  The pair's writer and verifier of the power
 * cuts are `torture_pair cut` and `torture_pair verify`.
 *
 * helper: run by tests/powercut.sh and tests/powercut_shared.sh
 *
 *   torture_cut cut FILE SEED ACKFILE [writer options]
 *       The library's writer of the sequence (util/torture.h), its acks
 *       lines in ACKFILE, fdatasync'd each (put it on another file system
 *       than FILE); the writer options are those of `torture_kill writer`.
 *   torture_cut mutant good|torn|lost FILE SEED [writer options]
 *       A writer that is not the library (POWERCUT_WRITER).
 *   torture_cut writer FILE SEED [writer options]
 *       As torture_kill writer (both programs have the writer modes of
 *       tort_writer_main).
 *   torture_cut recover FILE...                 oa_recover each
 *   torture_cut shutdown MOUNTPOINT             FS_IOC_SHUTDOWN, NOLOGFLUSH
 *   torture_cut shared-cut FILE EXPECT MOUNTPOINT
 *       The cut of blocks the file shares with the journal
 *       (tests/powercut_shared.sh): commit a 1 MiB write, commit nearly all
 *       of it again in small writes, write the file's pages back, write
 *       1 MiB more without committing and write the journal's pages back,
 *       put the committed state in EXPECT, cut (no close).
 *   torture_cut model-init MODEL SEED [SPAN]    the model of state 0
 *   torture_cut verify FILE SEED ACKFILE MODEL  check FILE, advance MODEL
 *                                               (the model has the span)
 *   torture_cut state FILE SEED K [SPAN]        write state K to FILE
 *
 * Exit status: 0 pass, 1 violation / failure, 77 skip (no FS_IOC_SHUTDOWN);
 * writers: 2 a library call failed, 3 the library read back something else
 * than was written, 4 the file system was shut down.
 *
 * SPDX-License-Identifier: MIT
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "oatomic.h"
#include "torture.h"

#ifndef FS_IOC_SHUTDOWN
#define FS_IOC_SHUTDOWN _IOR('X', 125, uint32_t)
#endif
#define TORT_SHUTDOWN_NOLOGFLUSH 2u

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


static int cmd_verify(const char *file, uint64_t seed, const char *ackfile,
		      const char *model)
{
	struct tort_verifier v;
	struct model_hdr h;
	uint64_t mseed, *acks;

	if (model_header(model, &h) < 0)
		return 1;
	tort_verifier_init(&v, seed, h.span);
	if (model_load(model, &v.m, &mseed) < 0)
		return 1;
	if (mseed != seed) {
		fprintf(stderr, "torture verify: model %s is of seed %" PRIu64
			", not %" PRIu64 "\n", model, mseed, seed);
		return 1;
	}
	long n = tort_read_ackfile(ackfile, &acks);
	if (n < 0) {
		fprintf(stderr, "torture verify: %s: %s\n", ackfile, strerror(errno));
		return 1;
	}
	if (tort_check_acks(&v, acks, (size_t)n) < 0)
		return 1;
	uint64_t k0 = v.m.k, a = n ? acks[n - 1] : k0;
	if (tort_read_actual(&v, file, 0) < 0)
		return 1;
	int cls = tort_classify(&v, a);
	if (cls == TORT_V_TORN || cls == TORT_V_LOST) {
		printf("VIOLATION (%s): %s seed %" PRIu64 ": writer started at txn %"
		       PRIu64 ", last durable ack %" PRIu64 ", next commit %" PRIu64
		       "\n", tort_vname[cls], file, seed, k0, a, v.nb);
		fflush(stdout);
		tort_describe(stdout, &v);
		return 1;
	}
	tort_settle(&v, cls);
	if (model_save(model, &v.m, seed) < 0)
		return 1;
	printf("state=%" PRIu64 " acked=%" PRIu64 " start=%" PRIu64 " acks=%ld %s\n",
	       v.m.k, a, k0, n, cls == TORT_V_B ? "in-flight" : "acked");
	free(acks);
	tort_verifier_free(&v);
	return 0;
}

static int cmd_model_init(const char *model, uint64_t seed, uint64_t span)
{
	struct tort_model m;
	if (tort_model_init(&m, span))
		tort_die(1, "malloc", NULL);
	int r = model_save(model, &m, seed);
	tort_model_free(&m);
	return r < 0;
}

static int cmd_state(const char *file, uint64_t seed, uint64_t k,
		     uint64_t span)
{
	struct tort_model m;
	if (tort_model_init(&m, span))
		tort_die(1, "malloc", NULL);
	tort_model_advance(&m, seed, 1, k);
	int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || wl_write_all(fd, m.buf, (size_t)m.size) < 0 || fsync(fd) < 0)
		tort_die(1, "write", file);
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
		tort_die(1, "open", mnt);
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
		tort_die(1, "malloc", NULL);
	for (uint32_t i = 0; i < SHARED_SZ; i++) {
		a[i] = (unsigned char)('a' + (i >> 12) % 26);
		k[i] = (unsigned char)('A' + (i >> 12) % 26);
		x[i] = (unsigned char)('X' ^ (i >> 12));
	}
	oa_file *f = oa_open(file, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (!f)
		tort_die(1, "oa_open", file);
	if (oa_pwrite(f, a, SHARED_SZ, 0) != SHARED_SZ || oa_commit(f) < 0)
		tort_die(2, "first commit", file);
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
				tort_die(2, "oa_pwrite", file);
			memcpy(a + o, k + o, n);
		}
	}
	if (oa_commit(f) < 0)
		tort_die(2, "second commit", file);
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		tort_die(1, "open", file);
	sync_back(fd);
	close(fd);
	if (oa_pwrite(f, x, SHARED_SZ, 0) != SHARED_SZ)
		tort_die(2, "uncommitted write", file);
	/* the journals: .NAME.oa (journal 0 is in it) and .NAME.oaj-K */
	char dir[PATH_MAX], pre[NAME_MAX + 8];
	const char *slash = strrchr(file, '/');
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - file) : 1,
		 slash ? file : ".");
	snprintf(pre, sizeof(pre), ".%s.oa", slash ? slash + 1 : file);
	DIR *d = opendir(dir);
	if (!d)
		tort_die(1, "opendir", dir);
	int nj = 0;
	for (struct dirent *e; (e = readdir(d));) {
		if (strncmp(e->d_name, pre, strlen(pre)))
			continue;
		fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			tort_die(1, "open", e->d_name);
		sync_back(fd);
		close(fd);
		nj++;
	}
	closedir(d);
	if (!nj) {
		errno = ENOENT;
		tort_die(1, "no journal beside", file);
	}
	fd = open(expect, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || wl_write_all(fd, a, SHARED_SZ) < 0 || fsync(fd) < 0)
		tort_die(1, "write", expect);
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
		"usage: torture_cut cut FILE SEED ACKFILE [writer options]\n"
		"       torture_cut mutant good|torn|lost FILE SEED [writer options]\n"
		"       torture_cut writer FILE SEED [writer options]\n"
		"       torture_cut recover FILE...\n"
		"       torture_cut shutdown MOUNTPOINT\n"
		"       torture_cut shared-cut FILE EXPECT MOUNTPOINT\n"
		"       torture_cut model-init MODEL SEED [SPAN]\n"
		"       torture_cut verify FILE SEED ACKFILE MODEL\n"
		"       torture_cut state FILE SEED K [SPAN]\n");
	return 1;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage();
	const char *m = argv[1];
	int rc;

	tort_init();
	rc = tort_writer_main(argc, argv);
	if (rc >= 0)
		return rc;
	if (!strcmp(m, "recover") && argc >= 3)
		return cmd_recover(argc, argv, 2);
	if (!strcmp(m, "shutdown") && argc == 3)
		return cmd_shutdown(argv[2]);
	if (!strcmp(m, "shared-cut") && argc == 5)
		return cmd_shared_cut(argv[2], argv[3], argv[4]);
	if (!strcmp(m, "model-init") && (argc == 4 || argc == 5))
		return cmd_model_init(argv[2], tort_parse_u64(argv[3], "seed"),
				      argc == 5 ? tort_parse_span(argv[4])
						: TORT_SPAN);
	if (!strcmp(m, "verify") && argc == 6)
		return cmd_verify(argv[2], tort_parse_u64(argv[3], "seed"),
				  argv[4], argv[5]);
	if (!strcmp(m, "state") && (argc == 5 || argc == 6))
		return cmd_state(argv[2], tort_parse_u64(argv[3], "seed"),
				 tort_parse_u64(argv[4], "K"),
				 argc == 6 ? tort_parse_span(argv[5]) : TORT_SPAN);
	return usage();
}
