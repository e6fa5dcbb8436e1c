/*
 * conf_timestamps.c - the file's timestamps, as tools that poll them (make,
 * rsync, backup programs, editors) see them:
 *
 *  - pending writes leave the file's mtime and ctime alone (nothing of a
 *    transaction reaches the file before its commit, metadata included);
 *  - a commit that changes the file's bytes moves its mtime forward, as the
 *    writes it stands for would have;
 *  - the library asks the file's size, not its timestamps, on the commit,
 *    apply and read paths: since Linux 6.13 a stat that reports ctime or
 *    mtime makes the next write to the inode take a fine-grained timestamp
 *    and log the inode, which cost 20 % of a 4 KiB commit on ext4.  Checked
 *    by counting fstat(2) calls through the I/O seam (skipped where statx(2)
 *    is missing and fstat is the library's only way to the size).
 *
 * SPDX-License-Identifier: MIT
 */
#include "testutil.h"

#include "oatomic-private.h"
#include "sys.h"

#include <time.h>

static int n_fstat;

static int counting_fstat(int fd, struct stat *st)
{
	n_fstat++;
	return oa_sys_linux.fstat(fd, st);
}

static struct stat stat_of(const char *path)
{
	struct stat st;
	CHECK_OK(stat(path, &st));
	return st;
}

static int ts_cmp(struct timespec a, struct timespec b)
{
	if (a.tv_sec != b.tv_sec)
		return a.tv_sec < b.tv_sec ? -1 : 1;
	if (a.tv_nsec != b.tv_nsec)
		return a.tv_nsec < b.tv_nsec ? -1 : 1;
	return 0;
}

static void pause_ms(long ms)
{
	struct timespec t = { .tv_sec = 0, .tv_nsec = ms * 1000000L };
	nanosleep(&t, NULL);
}

/* Pending writes do not touch the file; the commit moves mtime on. */
static void test_pending_and_commit(void)
{
	const char *path = tu_path("ts");
	unsigned char b[8192];
	struct stat s0, s1, s2;
	oa_file *f;

	tu_fill(b, sizeof(b), 1, 0);
	f = tu_oa_open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
	tu_oa_pwrite(f, b, sizeof(b), 0);
	CHECK_OK(oa_commit(f));
	s0 = stat_of(path);
	/* Beyond any timestamp granularity (a jiffy, at most 10 ms). */
	pause_ms(30);
	tu_fill(b, sizeof(b), 2, 0);
	tu_oa_pwrite(f, b, 4096, 0);
	tu_oa_pwrite(f, b, 100, 6000);
	CHECK_OK(oa_ftruncate(f, 20000));
	s1 = stat_of(path);
	CHECKF(ts_cmp(s1.st_mtim, s0.st_mtim) == 0 &&
		       ts_cmp(s1.st_ctim, s0.st_ctim) == 0 &&
		       s1.st_size == s0.st_size,
	       "pending changes touched the file: mtime %ld.%09ld -> "
	       "%ld.%09ld, size %lld -> %lld",
	       (long)s0.st_mtim.tv_sec, s0.st_mtim.tv_nsec,
	       (long)s1.st_mtim.tv_sec, s1.st_mtim.tv_nsec,
	       (long long)s0.st_size, (long long)s1.st_size);
	CHECK_OK(oa_commit(f));
	s2 = stat_of(path);
	CHECKF(ts_cmp(s2.st_mtim, s0.st_mtim) > 0,
	       "the commit left mtime at %ld.%09ld", (long)s2.st_mtim.tv_sec,
	       s2.st_mtim.tv_nsec);
	CHECK_EQ(s2.st_size, 20000);
	CHECK_OK(oa_close(f));
}

/* No fstat of anything on the paths every commit and read takes. */
static void test_no_timestamp_queries(void)
{
	static struct oa_sysops ops;
	const char *path = tu_path("hot");
	unsigned char b[1 << 16], r[1 << 16];
	struct oa_statx sx;
	oa_file *f;

	/* statx is how the library gets a size without timestamps. */
	if (oa_sys_linux.statx(AT_FDCWD, "/", 0, OA_STATX_SIZE, &sx) < 0)
		tu_skip("statx(2) not available (%s): the library falls back "
			"to fstat", strerror(errno));

	tu_fill(b, sizeof(b), 3, 0);
	f = tu_oa_open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
	tu_oa_pwrite(f, b, sizeof(b), 0);
	CHECK_OK(oa_commit(f));

	ops = oa_sys_linux;
	ops.fstat = counting_fstat;
	oa__set_sysops(&ops);
	n_fstat = 0;
	/* Small commits (enough to pass a checkpoint), reads of pending and
	 * committed bytes, a growing commit and a truncating one. */
	for (int i = 0; i < 1000; i++) {
		tu_fill(b, 4096, 10 + i, 0);
		if (oa_pwrite(f, b, 4096, (off_t)(i % 16) * 4096) != 4096)
			tu_fail(__FILE__, __LINE__, errno, "oa_pwrite");
		if (i % 100 == 0 &&
		    oa_pread(f, r, sizeof(r), 0) != (ssize_t)sizeof(r))
			tu_fail(__FILE__, __LINE__, errno, "oa_pread");
		CHECK_OK(oa_commit(f));
	}
	tu_oa_pwrite(f, b, sizeof(b), sizeof(b));
	CHECK_OK(oa_commit(f));
	CHECK_OK(oa_ftruncate(f, 5000));
	CHECK_OK(oa_commit(f));
	CHECK(oa_pread(f, r, sizeof(r), 0) == 5000);
	oa__set_sysops(NULL);
	CHECKF(n_fstat == 0,
	       "%d fstat calls in 1002 commits and 11 reads: each marks the "
	       "inode's timestamps as queried", n_fstat);
	CHECK_OK(oa_close(f));
}

int main(void)
{
	tu_alarm(120);
	test_pending_and_commit();
	test_no_timestamp_queries();
	return 0;
}
