/*
 * conf_abort_close.c - GUARANTEES.md §5: oa_abort drops the pending changes
 * and keeps the handle usable; oa_close drops them and frees the handle.
 *
 *  - after oa_abort the handle sees the committed file again (data and size,
 *    O_TRUNC included), the file never had the aborted bytes, and the next
 *    transaction of the same handle commits only its own changes;
 *  - oa_abort with nothing pending, on a read-only handle, after a commit;
 *  - aborting large transactions over and over does not grow the journal
 *    without bound (the space of aborted data is reused);
 *  - oa_close with pending writes/truncates leaves the file as committed,
 *    through a new handle and after oa_recover too.
 *
 * SPDX-License-Identifier: MIT
 */
#include "testutil.h"

#include <dirent.h>
#include <limits.h>

static void test_abort(void)
{
	const char *path = tu_path("abort");
	unsigned char base[32768], b[8192], want[32768];
	oa_file *f, *r;

	tu_fill(base, sizeof(base), 1, 0);
	tu_write_file(path, base, sizeof(base), 0644);
	f = tu_oa_open(path, O_RDWR, 0);

	CHECK_OK(oa_abort(f));                     /* nothing pending */
	CHECK_OA_VIEW(f, base, sizeof(base));

	tu_fill(b, sizeof(b), 2, 0);
	tu_oa_pwrite(f, b, 4096, 0);
	CHECK_OK(oa_ftruncate(f, 50000));
	tu_oa_pwrite(f, b, 8192, 60000);
	CHECK_OK(oa_abort(f));
	CHECK_OA_VIEW(f, base, sizeof(base));
	CHECK_FILE(path, base, sizeof(base), sizeof(base));

	/* The handle goes on: its next transaction has only the new write. */
	tu_fill(b, 100, 3, 100);
	tu_oa_pwrite(f, b, 100, 100);
	memcpy(want, base, sizeof(want));
	memcpy(want + 100, b, 100);
	CHECK_OA_VIEW(f, want, sizeof(want));
	CHECK_OK(oa_commit(f));
	CHECK_FILE(path, want, sizeof(want), sizeof(want));

	/* Abort after a commit keeps the commit. */
	CHECK_OK(oa_abort(f));
	CHECK_OA_VIEW(f, want, sizeof(want));
	CHECK_FILE(path, want, sizeof(want), sizeof(want));

	/* A shrink aborted: the bytes beyond are still there. */
	CHECK_OK(oa_ftruncate(f, 10));
	CHECK_OK(oa_abort(f));
	CHECK_OA_VIEW(f, want, sizeof(want));

	/* Abort, write, abort, write, commit. */
	tu_fill(b, 50, 4, 0);
	tu_oa_pwrite(f, b, 50, 0);
	CHECK_OK(oa_abort(f));
	tu_fill(b, 50, 5, 20000);
	tu_oa_pwrite(f, b, 50, 20000);
	memcpy(want + 20000, b, 50);
	CHECK_OK(oa_commit(f));
	CHECK_FILE(path, want, sizeof(want), sizeof(want));
	CHECK_OK(oa_close(f));
	CHECK_FILE(path, want, sizeof(want), sizeof(want));

	/* A read-only handle aborts nothing, successfully. */
	r = tu_oa_open(path, O_RDONLY, 0);
	CHECK_OK(oa_abort(r));
	CHECK_OA_VIEW(r, want, sizeof(want));
	CHECK_OK(oa_close(r));

	/* O_TRUNC is a pending change like the others. */
	f = tu_oa_open(path, O_RDWR | O_TRUNC, 0);
	CHECK_OA_VIEW(f, want, 0);
	CHECK_OK(oa_abort(f));
	CHECK_OA_VIEW(f, want, sizeof(want));
	CHECK_OK(oa_commit(f));
	CHECK_OK(oa_close(f));
	CHECK_FILE(path, want, sizeof(want), sizeof(want));
}

/* Bytes allocated to the library's files beside PATH. */
static uint64_t journal_bytes(const char *path)
{
	const char *dir = tu_dir(), *name = strrchr(path, '/') + 1;
	char prefix[NAME_MAX + 2];
	uint64_t sum = 0;
	struct dirent *de;
	DIR *d = opendir(dir);

	CHECK(d);
	snprintf(prefix, sizeof(prefix), ".%s.oa", name);
	while ((de = readdir(d)) != NULL) {
		struct stat st;

		if (strncmp(de->d_name, prefix, strlen(prefix)))
			continue;
		CHECK_OK(fstatat(dirfd(d), de->d_name, &st, 0));
		sum += (uint64_t)st.st_blocks * 512;
	}
	closedir(d);
	return sum;
}

static void test_abort_reuses_space(void)
{
	const char *path = tu_path("abortspace");
	const size_t mib = 1 << 20;
	unsigned char *b = tu_malloc(mib), small[4096];
	uint64_t jb;
	oa_file *f;
	int i;

	tu_fill(small, sizeof(small), 6, 0);
	tu_write_file(path, small, sizeof(small), 0644);
	tu_fill(b, mib, 7, 0);
	f = tu_oa_open(path, O_RDWR, 0);
	for (i = 0; i < 150; i++) {
		tu_oa_pwrite(f, b, mib, (off_t)(i % 4) * (off_t)mib);
		CHECK_OK(oa_abort(f));
	}
	jb = journal_bytes(path);
	tu_note("journal space after 150 aborted MiB: %llu KiB",
		(unsigned long long)(jb >> 10));
	CHECKF(jb < (96ull << 20), "the journal keeps the aborted data: "
	       "%llu MiB allocated after 150 aborted 1 MiB transactions",
	       (unsigned long long)(jb >> 20));
	CHECK_OA_VIEW(f, small, sizeof(small));
	CHECK_OK(oa_close(f));
	CHECK_FILE(path, small, sizeof(small), sizeof(small));
	free(b);
}

static void test_close(void)
{
	const char *path = tu_path("close");
	unsigned char base[20000], b[4096], want[20000];
	oa_file *f;

	tu_fill(base, sizeof(base), 11, 0);
	tu_write_file(path, base, sizeof(base), 0644);

	/* Pending writes and growth, closed. */
	f = tu_oa_open(path, O_RDWR, 0);
	tu_fill(b, sizeof(b), 12, 0);
	tu_oa_pwrite(f, b, sizeof(b), 0);
	tu_oa_pwrite(f, b, sizeof(b), 30000);
	CHECK_OK(oa_close(f));
	CHECK_FILE(path, base, sizeof(base), sizeof(base));

	/* A pending shrink, closed. */
	f = tu_oa_open(path, O_RDWR, 0);
	CHECK_OK(oa_ftruncate(f, 3));
	CHECK_OK(oa_close(f));
	CHECK_FILE(path, base, sizeof(base), sizeof(base));

	/* Committed, then more pending, closed: only the commit stays. */
	f = tu_oa_open(path, O_RDWR, 0);
	tu_fill(b, 1000, 13, 5000);
	tu_oa_pwrite(f, b, 1000, 5000);
	CHECK_OK(oa_commit(f));
	memcpy(want, base, sizeof(want));
	memcpy(want + 5000, b, 1000);
	tu_fill(b, 1000, 14, 7000);
	tu_oa_pwrite(f, b, 1000, 7000);
	CHECK_OK(oa_ftruncate(f, 100000));
	CHECK_OK(oa_close(f));
	CHECK_FILE(path, want, sizeof(want), sizeof(want));

	/* Nothing of it comes back later. */
	CHECK_OK(oa_recover(path));
	CHECK_FILE(path, want, sizeof(want), sizeof(want));
	f = tu_oa_open(path, O_RDWR, 0);
	CHECK_OA_VIEW(f, want, sizeof(want));
	CHECK_OK(oa_commit(f));
	CHECK_OK(oa_close(f));
	CHECK_FILE(path, want, sizeof(want), sizeof(want));

	/* Close of a new, never committed O_CREAT file: it exists, empty. */
	path = tu_path("close-new");
	f = tu_oa_open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
	tu_oa_pwrite(f, b, 1000, 0);
	CHECK_OK(oa_close(f));
	CHECK_EQ(tu_file_size(path), 0);
}

int main(void)
{
	tu_alarm(240);
	test_abort();
	test_abort_reuses_space();
	test_close();
	return 0;
}
