/*
 * conf_large.c - GUARANTEES.md §6: size is bounded by disk, not memory.
 *
 * One 1 GiB transaction written in 1 MiB oa_pwrite calls must raise the
 * process's peak RSS (getrusage ru_maxrss) by less than 64 MiB, while
 * writing, committing and closing.  Nothing is visible before the commit;
 * afterwards a plain read() of every MiB matches the pattern, and so does the
 * checksum of the whole file.
 *
 * timeout: 900
 *
 * SPDX-License-Identifier: MIT
 */
#include "testutil.h"

#include <sys/resource.h>

#define MIB       (1u << 20)
#define TOTAL_MIB 1024
#define SEED      0x1a46e
#define RSS_LIMIT (64 << 10)    /* KiB, like ru_maxrss */

#if TU_ASAN
/* ASan keeps freed memory in a quarantine (256 MiB by default), which
 * would count as the library's.  Keep it small for this test. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "quarantine_size_mb=8:detect_leaks=1";
}
#endif

static long maxrss_kib(void)
{
	struct rusage ru;

	CHECK_OK(getrusage(RUSAGE_SELF, &ru));
	return ru.ru_maxrss;
}

static void check_rss(long base, const char *when)
{
	long now = maxrss_kib();

	tu_note("peak RSS %s: %ld KiB (+%ld KiB)", when, now, now - base);
	CHECKF(now - base < RSS_LIMIT, "peak RSS grew by %ld MiB %s "
	       "(limit %d MiB): pending data is kept in memory",
	       (now - base) >> 10, when, RSS_LIMIT >> 10);
}

int main(void)
{
	const char *path;
	unsigned char *buf, *want;
	uint64_t free_b, hash_got = TU_HASH_INIT, hash_want = TU_HASH_INIT;
	struct stat st;
	long base;
	double t0;
	oa_file *f;
	int fd;
	unsigned i;

	tu_alarm(880);
	free_b = tu_free_bytes(tu_dir());
	if (free_b < (3ull << 30))
		tu_skip("%llu MiB free in %s, need 3 GiB",
			(unsigned long long)(free_b >> 20), tu_dir());
	path = tu_path("large");
	buf = tu_malloc(MIB);
	want = tu_malloc(MIB);
	memset(buf, 1, MIB);
	memset(want, 1, MIB);

	f = tu_oa_open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
	/* A small transaction first, so that the library's fixed costs
	 * (journal set-up, buffers) are in the baseline. */
	tu_fill(buf, 4096, 7, 0);
	tu_oa_pwrite(f, buf, 4096, 0);
	CHECK_OK(oa_commit(f));
	base = maxrss_kib();

	t0 = tu_now();
	for (i = 0; i < TOTAL_MIB; i++) {
		tu_fill(buf, MIB, SEED, (uint64_t)i * MIB);
		tu_oa_pwrite(f, buf, MIB, (off_t)i * MIB);
	}
	tu_note("1 GiB written pending in %.1fs", tu_now() - t0);
	check_rss(base, "after writing 1 GiB pending");

	/* Read your writes at that scale, and nothing visible yet. */
	CHECK_OK(oa_fstat(f, &st));
	CHECK_EQ(st.st_size, (off_t)TOTAL_MIB * MIB);
	CHECK_EQ(tu_file_size(path), 4096);
	for (i = 0; i < TOTAL_MIB; i += 127) {
		tu_oa_pread(f, buf, MIB, (off_t)i * MIB);
		CHECKF(tu_find_mismatch(buf, MIB, SEED, (uint64_t)i * MIB) < 0,
		       "oa_pread of pending MiB %u", i);
	}

	t0 = tu_now();
	CHECK_OK(oa_commit(f));
	tu_note("commit of 1 GiB took %.1fs", tu_now() - t0);
	check_rss(base, "after the commit");
	t0 = tu_now();
	CHECK_OK(oa_close(f));
	tu_note("close took %.1fs", tu_now() - t0);
	check_rss(base, "after close");

	/* The real bytes: every MiB, all of it, and a checksum of it all. */
	fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	CHECK_OK(fstat(fd, &st));
	CHECK_EQ(st.st_size, (off_t)TOTAL_MIB * MIB);
	for (i = 0; i < TOTAL_MIB; i++) {
		long long bad;

		tu_pread_full(fd, buf, MIB, (off_t)i * MIB);
		tu_fill(want, MIB, SEED, (uint64_t)i * MIB);
		hash_got = tu_hash(hash_got, buf, MIB);
		hash_want = tu_hash(hash_want, want, MIB);
		bad = tu_find_mismatch(buf, MIB, SEED, (uint64_t)i * MIB);
		CHECKF(bad < 0, "MiB %u differs from offset %lld in it", i, bad);
	}
	{
		char c;

		CHECK_EQ(pread(fd, &c, 1, (off_t)TOTAL_MIB * MIB), 0);
	}
	close(fd);
	CHECKF(hash_got == hash_want, "checksum %#llx, want %#llx",
	       (unsigned long long)hash_got, (unsigned long long)hash_want);

	{
		uint64_t jb = 0;
		const char *c = tu_control_path(path);
		struct stat js;
		int k;

		if (stat(c, &js) == 0)
			jb += (uint64_t)js.st_blocks * 512;
		for (k = 0; k < 8; k++)
			if (stat(tu_journal_path(path, k), &js) == 0)
				jb += (uint64_t)js.st_blocks * 512;
		tu_note("journal space left after close: %llu MiB",
			(unsigned long long)(jb >> 20));
	}
	free(buf);
	free(want);
	return 0;
}
