/*
 * conf_ryw.c - GUARANTEES.md §2: read your own writes.
 *
 * oa_pread and oa_fstat of a handle show its pending changes merged over the
 * committed contents: later writes win over earlier ones, holes and the
 * ground uncovered by a shrink-then-grow read as zeros, reads stop at the size
 * the handle sees, O_TRUNC empties the handle's view at once but the file only
 * at commit.  Each step is checked against a model buffer, and after every
 * commit the real bytes (plain read) must equal the model too.
 *
 * SPDX-License-Identifier: MIT
 */
#include "testutil.h"

#include <limits.h>

/* What the handle should show. */
struct model {
	unsigned char *buf;
	size_t size, cap;
};

static void m_reserve(struct model *m, size_t n)
{
	if (n <= m->cap)
		return;
	size_t cap = m->cap ? m->cap : 4096;

	while (cap < n)
		cap *= 2;
	m->buf = realloc(m->buf, cap);
	CHECK(m->buf);
	memset(m->buf + m->cap, 0, cap - m->cap);
	m->cap = cap;
}

static void m_write(struct model *m, const void *p, size_t n, size_t off)
{
	m_reserve(m, off + n);
	memcpy(m->buf + off, p, n);
	if (off + n > m->size)
		m->size = off + n;
}

static void m_truncate(struct model *m, size_t len)
{
	m_reserve(m, len);
	if (len < m->size)
		memset(m->buf + len, 0, m->size - len);
	m->size = len;
}

static void m_copy(struct model *dst, const struct model *src)
{
	m_truncate(dst, 0);
	m_reserve(dst, src->size);
	if (src->size)
		memcpy(dst->buf, src->buf, src->size);
	dst->size = src->size;
}

static void m_free(struct model *m)
{
	free(m->buf);
	memset(m, 0, sizeof(*m));
}

/* Write through the handle and into the model. */
static void both_write(oa_file *f, struct model *m, uint64_t seed, size_t n,
		       size_t off)
{
	unsigned char *p = tu_malloc(n);

	tu_fill(p, n, seed, off);
	tu_oa_pwrite(f, p, n, (off_t)off);
	m_write(m, p, n, off);
	free(p);
}

static void both_truncate(oa_file *f, struct model *m, size_t len)
{
	CHECK_OK(oa_ftruncate(f, (off_t)len));
	m_truncate(m, len);
}

/* oa_pread of [OFF, OFF+N) returns exactly what the model says, including a
 * short count at the end of the file and 0 beyond it. */
static void check_range(oa_file *f, const struct model *m, size_t off,
			size_t n)
{
	unsigned char *got = tu_malloc(n + 1);
	size_t want = off >= m->size ? 0 : (m->size - off < n ? m->size - off : n);
	size_t done = 0;

	while (done < n) {
		ssize_t r = oa_pread(f, got + done, n - done,
				     (off_t)(off + done));

		CHECKF(r >= 0, "oa_pread(%zu at %zu)", n - done, off + done);
		if (r == 0)
			break;
		done += (size_t)r;
	}
	CHECKF(done == want, "oa_pread of %zu bytes at %zu gave %zu bytes, "
	       "want %zu (size %zu)", n, off, done, want, m->size);
	CHECK_MEM_AT(got, m->buf + off, want, off);
	free(got);
}

#define CHECK_VIEW(f, m) CHECK_OA_VIEW((f), (m)->buf, (m)->size)

/* ---- overlapping writes, later wins ------------------------------------ */

static void test_overlap(void)
{
	const char *path = tu_path("overlap");
	struct model m = {0}, old = {0};
	unsigned char b[64 << 10];
	oa_file *f;

	tu_fill(b, sizeof(b), 1, 0);
	tu_write_file(path, b, sizeof(b), 0644);
	m_write(&m, b, sizeof(b), 0);
	m_copy(&old, &m);

	f = tu_oa_open(path, O_RDWR, 0);
	CHECK_VIEW(f, &m);
	both_write(f, &m, 2, 4000, 1000);
	CHECK_VIEW(f, &m);
	both_write(f, &m, 3, 1000, 3000);       /* inside the first */
	CHECK_VIEW(f, &m);
	both_write(f, &m, 4, 1500, 4500);       /* over the first's tail */
	CHECK_VIEW(f, &m);
	both_write(f, &m, 5, 1, 0);             /* one byte */
	both_write(f, &m, 6, 6000, 500);        /* over all of them */
	CHECK_VIEW(f, &m);
	both_write(f, &m, 7, 100, 999);         /* a seam of the old ones */
	both_write(f, &m, 8, 200, sizeof(b) - 50); /* crosses the end: grows */
	CHECK_VIEW(f, &m);
	check_range(f, &m, 990, 20);
	check_range(f, &m, sizeof(b) - 100, 1000);
	check_range(f, &m, 0, 1);
	/* Many tiny interleaved writes: every other 16 bytes of 8 KiB. */
	for (size_t o = 16384; o < 16384 + 8192; o += 32)
		both_write(f, &m, 9 + (o & 0xff), 16, o);
	CHECK_VIEW(f, &m);
	check_range(f, &m, 16384 + 8, 100);

	/* Nothing reached the file yet. */
	CHECK_FILE(path, old.buf, old.size, (off_t)old.size);
	CHECK_OK(oa_commit(f));
	CHECK_FILE(path, m.buf, m.size, (off_t)m.size);
	CHECK_VIEW(f, &m);
	CHECK_OK(oa_close(f));
	CHECK_FILE(path, m.buf, m.size, (off_t)m.size);
	m_free(&m);
	m_free(&old);
}

/* ---- holes and reads past the end --------------------------------------- */

static void test_holes(void)
{
	const char *path = tu_path("holes");
	struct model m = {0};
	unsigned char c;
	oa_file *f;

	f = tu_oa_open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
	CHECK_VIEW(f, &m);
	CHECK_EQ(oa_pread(f, &c, 1, 0), 0);
	CHECK_EQ(oa_pread(f, &c, 1, 1 << 20), 0);

	both_write(f, &m, 11, 10, 1 << 20);     /* a 1 MiB hole before it */
	CHECK_VIEW(f, &m);
	check_range(f, &m, 0, 4096);            /* zeros */
	check_range(f, &m, (1 << 20) - 5, 10);  /* zeros then data */
	check_range(f, &m, (1 << 20) + 5, 100); /* short: 5 bytes */
	CHECK_EQ(oa_pread(f, &c, 1, (1 << 20) + 10), 0);
	CHECK_EQ(oa_pread(f, &c, 1, (off_t)1 << 40), 0);
	CHECK_EQ(oa_pread(f, &c, 0, 0), 0);     /* zero-length read */
	/* A zero-length write, as pwrite(2): returns 0, does not grow. */
	CHECK_EQ(oa_pwrite(f, &c, 0, 5 << 20), 0);
	CHECK_VIEW(f, &m);

	both_write(f, &m, 12, 100, 300000);     /* into the hole */
	both_write(f, &m, 13, 50, (1 << 20) + 100); /* beyond: another hole */
	CHECK_VIEW(f, &m);
	CHECK_EQ(tu_file_size(path), 0);        /* the file is still empty */

	CHECK_OK(oa_commit(f));
	CHECK_FILE(path, m.buf, m.size, (off_t)m.size);
	CHECK_OK(oa_close(f));

	/* A fresh handle sees the same, holes included. */
	f = tu_oa_open(path, O_RDONLY, 0);
	CHECK_VIEW(f, &m);
	CHECK_OK(oa_close(f));
	m_free(&m);
}

/* ---- oa_ftruncate: shrink, grow, zeros -------------------------------------- */

static void test_truncate(void)
{
	const char *path = tu_path("trunc");
	struct model m = {0}, old = {0};
	unsigned char b[64 << 10];
	struct stat st;
	oa_file *f;

	tu_fill(b, sizeof(b), 21, 0);
	tu_write_file(path, b, sizeof(b), 0644);
	m_write(&m, b, sizeof(b), 0);
	m_copy(&old, &m);

	f = tu_oa_open(path, O_RDWR, 0);
	both_truncate(f, &m, 10000);            /* shrink */
	CHECK_OK(oa_fstat(f, &st));
	CHECK_EQ(st.st_size, 10000);
	CHECK_VIEW(f, &m);
	check_range(f, &m, 9990, 100);          /* short read at the new end */
	both_truncate(f, &m, 50000);            /* grow: zeros, not old bytes */
	CHECK_VIEW(f, &m);
	check_range(f, &m, 10000, 4096);

	/* A pending write cut by a shrink and uncovered by a grow. */
	both_write(f, &m, 22, 1000, 20000);
	both_truncate(f, &m, 20500);
	both_truncate(f, &m, 30000);
	CHECK_VIEW(f, &m);
	check_range(f, &m, 20400, 200);

	/* Pending write beyond the committed end, then a shrink below it. */
	both_write(f, &m, 23, 2000, 60000);
	both_truncate(f, &m, 1000);
	both_truncate(f, &m, sizeof(b));
	CHECK_VIEW(f, &m);

	/* Shrink to zero, write, grow. */
	both_truncate(f, &m, 0);
	CHECK_VIEW(f, &m);
	both_write(f, &m, 24, 300, 100);
	both_truncate(f, &m, 5000);
	CHECK_VIEW(f, &m);
	/* Same size twice is a no-op. */
	both_truncate(f, &m, 5000);
	CHECK_VIEW(f, &m);

	CHECK_OK(oa_fstat(f, &st));
	CHECK_EQ(st.st_size, 5000);
	CHECK_FILE(path, old.buf, old.size, (off_t)old.size);
	CHECK_OK(oa_commit(f));
	CHECK_FILE(path, m.buf, m.size, (off_t)m.size);

	/* Shrink then grow across committed data in a second transaction. */
	both_write(f, &m, 25, 3000, 1000);
	CHECK_OK(oa_commit(f));
	both_truncate(f, &m, 2000);
	both_truncate(f, &m, 8000);
	CHECK_VIEW(f, &m);
	CHECK_OK(oa_commit(f));
	CHECK_FILE(path, m.buf, m.size, (off_t)m.size);
	CHECK_OK(oa_close(f));
	CHECK_FILE(path, m.buf, m.size, (off_t)m.size);
	m_free(&m);
	m_free(&old);
}

/* ---- O_TRUNC is pending ------------------------------------------------- */

static void test_otrunc(void)
{
	const char *path = tu_path("otrunc");
	unsigned char b[32 << 10], w[100];
	struct stat st;
	oa_file *f;

	tu_fill(b, sizeof(b), 31, 0);
	tu_write_file(path, b, sizeof(b), 0644);

	/* Opened with O_TRUNC: the handle sees an empty file, the file is
	 * untouched. */
	f = tu_oa_open(path, O_RDWR | O_TRUNC, 0);
	CHECK_OK(oa_fstat(f, &st));
	CHECK_EQ(st.st_size, 0);
	CHECK_EQ(oa_pread(f, w, sizeof(w), 0), 0);
	CHECK_FILE(path, b, sizeof(b), sizeof(b));
	/* Closed without commit: still untouched. */
	CHECK_OK(oa_close(f));
	CHECK_FILE(path, b, sizeof(b), sizeof(b));

	/* O_TRUNC and a write: the write over an empty file. */
	f = tu_oa_open(path, O_RDWR | O_TRUNC, 0);
	tu_fill(w, sizeof(w), 32, 0);
	tu_oa_pwrite(f, w, sizeof(w), 0);
	CHECK_OA_VIEW(f, w, sizeof(w));
	CHECK_FILE(path, b, sizeof(b), sizeof(b));
	CHECK_OK(oa_commit(f));
	CHECK_FILE(path, w, sizeof(w), sizeof(w));
	CHECK_OK(oa_close(f));

	/* O_TRUNC alone is a change: the commit empties the file. */
	tu_write_file(path, b, sizeof(b), 0644);
	f = tu_oa_open(path, O_RDWR | O_TRUNC, 0);
	CHECK_OK(oa_commit(f));
	CHECK_EQ(tu_file_size(path), 0);
	CHECK_OK(oa_close(f));
	CHECK_EQ(tu_file_size(path), 0);

	/* O_TRUNC with a write beyond the old end: zeros before it. */
	tu_write_file(path, b, sizeof(b), 0644);
	f = tu_oa_open(path, O_WRONLY | O_TRUNC, 0);
	tu_oa_pwrite(f, w, sizeof(w), 1000);
	CHECK_OK(oa_commit(f));
	CHECK_OK(oa_close(f));
	{
		unsigned char want[1100] = {0};

		memcpy(want + 1000, w, sizeof(w));
		CHECK_FILE(path, want, sizeof(want), sizeof(want));
	}
}

/* ---- pwritev ------------------------------------------------------------- */

static void test_pwritev(void)
{
	const char *path = tu_path("writev");
	struct model m = {0};
	unsigned char a[100], b[1], c[5000], all[5101];
	struct iovec iov[4] = {
		{ a, sizeof(a) }, { NULL, 0 }, { b, sizeof(b) }, { c, sizeof(c) },
	};
	oa_file *f;

	f = tu_oa_open(path, O_RDWR | O_CREAT, 0644);
	tu_fill(a, sizeof(a), 41, 7);
	tu_fill(b, sizeof(b), 42, 107);
	tu_fill(c, sizeof(c), 43, 108);
	CHECK_EQ(oa_pwritev(f, iov, 4, 7), (ssize_t)sizeof(all));
	memcpy(all, a, sizeof(a));
	memcpy(all + 100, b, 1);
	memcpy(all + 101, c, sizeof(c));
	m_write(&m, all, sizeof(all), 7);
	CHECK_VIEW(f, &m);
	CHECK_EQ(oa_pwritev(f, iov, 0, 0), 0);  /* nothing */
	CHECK_VIEW(f, &m);
	CHECK_OK(oa_commit(f));
	CHECK_FILE(path, m.buf, m.size, (off_t)m.size);
	CHECK_OK(oa_close(f));
	m_free(&m);
}

/* ---- random operations against the model -------------------------------- */

static void test_random(void)
{
	const char *path = tu_path("random");
	struct model m = {0}, committed = {0};
	uint64_t rs = tu_seed();
	const size_t span = 256 << 10;
	oa_file *f, *g;
	int i, ops = 3000;

	f = tu_oa_open(path, O_RDWR | O_CREAT, 0644);
	for (i = 0; i < ops; i++) {
		unsigned r = (unsigned)(tu_rand(&rs) % 100);

		if (r < 55) {
			size_t off = tu_rand(&rs) % span;
			size_t n = 1 + tu_rand(&rs) % (tu_rand(&rs) % 4 ? 600 : 20000);

			both_write(f, &m, (uint64_t)i + 100, n, off);
		} else if (r < 65) {
			both_truncate(f, &m, tu_rand(&rs) % (span + 4096));
		} else if (r < 90) {
			size_t off = tu_rand(&rs) % (span + 8192);
			size_t n = 1 + tu_rand(&rs) % 20000;

			check_range(f, &m, off, n);
		} else if (r < 96) {
			CHECK_OK(oa_commit(f));
			m_copy(&committed, &m);
			CHECK_FILE(path, m.buf, m.size, (off_t)m.size);
			/* Another handle sees the committed state. */
			g = tu_oa_open(path, O_RDONLY, 0);
			CHECK_VIEW(g, &committed);
			CHECK_OK(oa_close(g));
		} else if (r < 98) {
			CHECK_OK(oa_abort(f));
			m_copy(&m, &committed);
			CHECK_VIEW(f, &m);
		} else {
			CHECK_VIEW(f, &m);
			/* The file still holds the last commit only. */
			CHECK_FILE(path, committed.buf, committed.size,
				   (off_t)committed.size);
		}
	}
	CHECK_VIEW(f, &m);
	CHECK_OK(oa_commit(f));
	CHECK_OK(oa_close(f));
	CHECK_FILE(path, m.buf, m.size, (off_t)m.size);
	m_free(&m);
	m_free(&committed);
}

int main(void)
{
	tu_alarm(240);
	test_overlap();
	test_holes();
	test_truncate();
	test_otrunc();
	test_pwritev();
	test_random();
	return 0;
}
