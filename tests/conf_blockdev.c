/*
 * conf_blockdev.c - GUARANTEES.md §14: a block device opened with a journal
 * directory (a loop device here; it reports no atomic write unit, so every
 * transaction goes through the journal).
 *
 *  - semantics: without a journal directory EINVAL; pending writes unseen
 *    by plain reads until the commit; oa_fstat's size is the capacity;
 *    oa_ftruncate EINVAL; a write past the end ENOSPC; O_DIRECT|O_DSYNC
 *    accepted (O_DIRECT on a regular file still EINVAL); not in a group
 *    (EINVAL); oa_ioinfo says "blockdev"; the sidecar's name is the
 *    device's identity, not its /dev name, and the last close leaves it
 *    at 512 bytes;
 *  - identity: a writer killed after its commit flush (kill point 2), the
 *    image then attached to ANOTHER loop device and a second image to the
 *    first one's number: recovery through the new name replays the
 *    commit; through the old name, now another disk, finds nothing and
 *    changes nothing;
 *  - the kill torture: a writer stamps 16 blocks spread over the device
 *    with its round, commits, acknowledges; SIGKILLed at random or at the
 *    commit's kill points; after recovery all 16 blocks carry the last
 *    acknowledged round or the next.
 *
 *   conf_blockdev [--kills N]      (N: $BLOCKDEV_KILLS, else 300; 60 under
 *                                  the sanitizers)
 *   conf_blockdev writer DEV JDIR ACKFILE     the torture's writer (acks:
 *                                  lines, fdatasync'd)
 *   conf_blockdev check DEV JDIR ACKFILE      recover, check; exit 1 on a
 *                                  violation (tests/powercut_blockdev.sh)
 *
 * Needs root and losetup: SKIP otherwise.
 * timeout: 600
 *
 * SPDX-License-Identifier: MIT
 */
#include "testutil.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "oatomic-private.h"
#include "torture.h"

#define DEV_MB   64
#define NBLK     16
#define BLK      4096

static uint64_t blk_off(int i)
{
	return (uint64_t)i * (DEV_MB << 20) / NBLK + (uint64_t)(i % 3) * BLK;
}

/* losetup -f --show IMG: the device's path (static), or NULL. */
/* every device attached, detached at exit whatever fails */
static char attached[8][64];

static void detach_all(void)
{
	char cmd[160];
	for (int i = 0; i < 8; i++)
		if (attached[i][0]) {
			snprintf(cmd, sizeof(cmd), "losetup -d %.63s 2>/dev/null",
				 attached[i]);
			if (system(cmd) != 0)
				continue;
		}
}

static char *attach(const char *img)
{
	static char dev[4][64];
	static int next;
	static int nat;
	char cmd[PATH_MAX + 64];
	char *d = dev[next++ % 4];
	snprintf(cmd, sizeof(cmd), "losetup -f --show '%s' 2>/dev/null", img);
	FILE *p = popen(cmd, "r");
	if (!p)
		return NULL;
	if (!fgets(d, 64, p)) {
		pclose(p);
		return NULL;
	}
	pclose(p);
	d[strcspn(d, "\n")] = 0;
	if (d[0] == '/' && nat < 8)
		snprintf(attached[nat++], 64, "%s", d);
	return d[0] == '/' ? d : NULL;
}

static void detach(const char *dev)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "losetup -d %s", dev);
	CHECK(system(cmd) == 0);
	for (int i = 0; i < 8; i++)
		if (!strcmp(attached[i], dev))
			attached[i][0] = 0;
}

static void make_image(const char *img)
{
	int fd = open(img, O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0 && ftruncate(fd, (off_t)DEV_MB << 20) == 0);
	close(fd);
}

static oa_file *open_dev(const char *dev, const char *jdir, int flags)
{
	struct oa_options o = { .size = sizeof(o), .journal_dir = jdir };
	return oa_open_opts(dev, flags, 0, &o);
}

/* The stamp all NBLK blocks carry, or -1 (said). */
static int64_t dev_stamp(const char *dev, int verbose)
{
	unsigned char b[BLK];
	int64_t s = -1;
	int fd = open(dev, O_RDONLY);
	if (fd < 0)
		return -1;
	for (int i = 0; i < NBLK; i++) {
		if (pread(fd, b, BLK, (off_t)blk_off(i)) != BLK)
			break;
		uint64_t k = tu_get_stamp(b);
		if (!tu_is_stamp(b, BLK, k) || (s >= 0 && (uint64_t)s != k)) {
			if (verbose)
				fprintf(stderr, "%s: block %d holds %llu, not "
					"%lld throughout\n", dev, i,
					(unsigned long long)k, (long long)s);
			close(fd);
			return -1;
		}
		s = (int64_t)k;
	}
	close(fd);
	return s;
}

/* The last acknowledged round (torture.c reads the lines). */
static uint64_t read_ack(const char *ackfile)
{
	uint64_t *v, last;
	long n = tort_read_ackfile(ackfile, &v);
	last = n > 0 ? v[n - 1] : 0;
	free(v);
	return last;
}

static int writer(const char *dev, const char *jdir, const char *ackfile,
		  int kp, int after)
{
	unsigned char b[BLK];
	oa_file *f = open_dev(dev, jdir, O_RDWR);
	/* acks only while the journal's file system is up (torture.c) */
	struct tort_acker a = { .sync = 1, .file = jdir };
	a.fd = open(ackfile, O_WRONLY | O_APPEND | O_CREAT, 0644);
	if (!f || a.fd < 0 || oa_pread(f, b, 8, (off_t)blk_off(0)) != 8)
		return 2;
	uint64_t k = tu_get_stamp(b);
	tort_ack_send(&a, k);
	for (int round = 0;; round++) {
		k++;
		tu_fill_stamp(b, BLK, k);
		for (int i = 0; i < NBLK; i++)
			if (oa_pwrite(f, b, BLK, (off_t)blk_off(i)) != BLK)
				return 2;
		if (kp && round == after)
			oa__set_killpoint(kp);
		if (oa_commit(f) < 0) {
			fprintf(stderr, "writer: oa_commit: %s\n", strerror(errno));
			return 2;
		}
		tort_ack_send(&a, k);
	}
}

static int check(const char *dev, const char *jdir, const char *ackfile)
{
	uint64_t ack = read_ack(ackfile);
	if (oa__recover_opts(dev, jdir) < 0) {
		fprintf(stderr, "recover %s: %s\n", dev, strerror(errno));
		return 1;
	}
	int64_t s = dev_stamp(dev, 1);
	if (s < 0 || (uint64_t)s < ack || (uint64_t)s > ack + 1) {
		fprintf(stderr, "%s: stamp %lld, last acknowledged %llu\n", dev,
			(long long)s, (unsigned long long)ack);
		return 1;
	}
	return 0;
}

/* ---- the tests ---- */

static const char *jdir;

static void test_basic(const char *dev, const char *img)
{
	unsigned char b[8192], r[8192];
	struct stat st;
	oa_file *f;

	CHECK_NULL_ERR(oa_open(dev, O_RDWR, 0), EINVAL);
	CHECK_NULL_ERR(oa_open(img, O_RDWR | O_DIRECT, 0), EINVAL);
	f = open_dev(dev, jdir, O_RDWR | O_DIRECT | O_DSYNC);
	CHECKF(f != NULL, "oa_open_opts(%s) with a journal directory: %s", dev,
	       strerror(errno));
	tu_fill(b, sizeof(b), 7, 0);
	tu_oa_pwrite(f, b, sizeof(b), 12288);
	tu_oa_pread(f, r, sizeof(r), 12288);
	CHECK_MEM(r, b, sizeof(b));
	int fd = open(dev, O_RDONLY);
	CHECK(fd >= 0);
	CHECK(pread(fd, r, sizeof(r), 12288) == (ssize_t)sizeof(r));
	CHECK(r[0] == 0 && r[8191] == 0);            /* pending: unseen */
	CHECK_OK(oa_fstat(f, &st));
	CHECK_EQ(st.st_size, (off_t)DEV_MB << 20);
	off_t sz;
	CHECK_OK(oa_fsize(f, &sz));
	CHECK_EQ(sz, (off_t)DEV_MB << 20);
	CHECK_ERR(oa_ftruncate(f, 4096), EINVAL);
	CHECK_ERR(oa_pwrite(f, b, sizeof(b), ((off_t)DEV_MB << 20) - 4096),
		  ENOSPC);
	oa_file *g[1] = { f };
	CHECK_ERR(oa_commit_group(g, 1), EINVAL);
	struct oa_ioinfo io = { .size = sizeof(io) };
	CHECK_OK(oa_ioinfo(f, &io));
	CHECKF(!strcmp(io.fs_name, "blockdev"), "fs_name %s", io.fs_name);
	CHECK_EQ(io.method, OA_METHOD_JOURNAL);     /* a loop device: no unit */
	CHECK_OK(oa_commit(f));
	CHECK(pread(fd, r, sizeof(r), 12288) == (ssize_t)sizeof(r));
	CHECK_MEM(r, b, sizeof(b));
	CHECK_OK(oa_close(f));
	close(fd);
	/* the sidecar: named by identity, clean at the last close */
	char ctl[PATH_MAX];
	CHECK_OK(oa__ctl_path(dev, jdir, ctl, sizeof(ctl)));
	CHECKF(strstr(ctl, "/.blkdev.") && !strstr(ctl, "loop"),
	       "control file %s", ctl);
	CHECK_EQ(tu_file_size(ctl), 512);
}

static int crash_child(void *arg)
{
	const char *dev = arg;
	unsigned char b[BLK];
	oa_file *f = open_dev(dev, jdir, O_RDWR);
	if (!f)
		return 2;
	tu_fill_stamp(b, BLK, 5);
	for (int i = 0; i < NBLK; i++)
		if (oa_pwrite(f, b, BLK, (off_t)blk_off(i)) != BLK)
			return 2;
	oa__set_killpoint(OA_KP_FLUSHED);   /* durable, nothing applied */
	oa_commit(f);
	return 3;
}

static void test_identity(void)
{
	char img[PATH_MAX];
	snprintf(img, sizeof(img), "%s", tu_path("id.img"));
	make_image(img);
	const char *img2 = tu_path("other.img");
	make_image(img2);
	char *a = attach(img);
	CHECK(a);
	char da[64];
	snprintf(da, sizeof(da), "%s", a);
	int st = tu_run_child(crash_child, da);
	CHECKF(WIFSIGNALED(st), "the writer did not die: %s", tu_status_str(st));
	CHECK_EQ(dev_stamp(da, 1), 0);
	detach(da);
	/* the other image takes the first free number (likely DA's), then
	 * the first image a new one */
	char *b = attach(img2), db[64];
	CHECK(b);
	snprintf(db, sizeof(db), "%s", b);
	char *n = attach(img), dn[64];
	CHECK(n);
	snprintf(dn, sizeof(dn), "%s", n);
	CHECKF(strcmp(dn, da) != 0, "the image came back as %s again", dn);
	/* another disk under the old name, or any name: nothing of ours */
	CHECK_OK(oa__recover_opts(db, jdir));
	CHECK_EQ(dev_stamp(db, 1), 0);
	/* the first disk under its new name: its commit */
	CHECK_OK(oa__recover_opts(dn, jdir));
	CHECK_EQ(dev_stamp(dn, 1), 5);
	detach(db);
	detach(dn);
}

struct wargs {
	const char *dev, *ack;
	int kp, after;
};

static int run_writer(void *arg)
{
	struct wargs *w = arg;
	return writer(w->dev, jdir, w->ack, w->kp, w->after);
}

static void torture(const char *dev, int kills)
{
	static const int kps[] = { 0, 0, 0, OA_KP_RECORD_WRITTEN,
				   OA_KP_FLUSHED, OA_KP_HALF_APPLIED,
				   OA_KP_APPLIED };
	uint64_t seed = tu_seed();
	const char *ack = tu_path("ack");
	unlink(ack);
	for (int r = 0; r < kills; r++) {
		struct wargs w = {
			.dev = dev, .ack = ack,
			.kp = kps[tu_rand(&seed) % (sizeof(kps) / sizeof(*kps))],
			.after = (int)(tu_rand(&seed) % 3),
		};
		pid_t pid = tu_fork(run_writer, &w);
		if (w.kp == 0) {
			struct timespec ts = { 0, (long)(tu_rand(&seed) % 20000000) };
			nanosleep(&ts, NULL);
			kill(pid, SIGKILL);
		}
		int st = tu_wait(pid);
		CHECKF(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
		       "round %d: the writer ended %s", r, tu_status_str(st));
		CHECKF(check(dev, jdir, ack) == 0,
		       "round %d (kill point %d after %d): VIOLATION", r, w.kp,
		       w.after);
	}
	tu_note("block device kill torture: %d kills, 0 violations, last "
		"acknowledged round %llu", kills,
		(unsigned long long)read_ack(ack));
}

int main(int argc, char **argv)
{
	if (argc >= 5 && !strcmp(argv[1], "writer"))
		return writer(argv[2], argv[3], argv[4], 0, 0);
	if (argc >= 5 && !strcmp(argv[1], "check")) {
		return check(argv[2], argv[3], argv[4]);
	}
	if (geteuid() != 0 || system("losetup --version >/dev/null 2>&1"))
		tu_skip("needs root and losetup");
	int kills = TU_ASAN ? 60 : 300;
	if (getenv("BLOCKDEV_KILLS"))
		kills = atoi(getenv("BLOCKDEV_KILLS"));
	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "--kills"))
			kills = atoi(argv[i + 1]);
	atexit(detach_all);
	const char *img = strdup(tu_path("disk.img"));
	jdir = strdup(tu_path("j"));
	CHECK(mkdir(jdir, 0700) == 0);
	make_image(img);
	char *d = attach(img), dev[64];
	if (!d)
		tu_skip("no loop device");
	snprintf(dev, sizeof(dev), "%s", d);
	test_basic(dev, img);
	torture(dev, kills);
	detach(dev);
	test_identity();
	free((char *)img);
	free((char *)jdir);
	tu_note("conf_blockdev: PASS");
	return 0;
}
