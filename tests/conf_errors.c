/*
 * conf_errors.c - GUARANTEES.md §9: bad input is refused, never applied.
 *
 *  - wrong arguments get the errno the POSIX call would give (open(2),
 *    pread(2), pwrite(2), ftruncate(2) manners), and a refused call changes
 *    nothing (no file created, the transaction as before); O_CREAT through
 *    a dangling symbolic link creates the file it names, as open(2) does;
 *  - a name too long for the journal's names (with a journal directory:
 *    ".NAME.<inode hex>.oaj-K") is refused before anything is created;
 *  - oa_options and oa_ioinfo are checked (size, method, max_txn_bytes),
 *    and oa_ioinfo fills in what it promises;
 *  - a journal damaged inside the committed data (after a crash left a
 *    durable, unapplied commit) gives EUCLEAN from oa_open and oa_recover,
 *    and the file keeps its old contents; a truncated, foreign or garbage
 *    journal is reported or ignored but never applied;
 *  - a journal another user could have written (o+w, or owned by someone
 *    else) is refused with EPERM and not replayed;
 *  - a program started with descriptors 0-2 closed: none of the library's
 *    descriptors is a standard one.
 *
 * SPDX-License-Identifier: MIT
 */
#include "testutil.h"

#include <limits.h>
#include <signal.h>
#include <sys/statfs.h>
#include <sys/wait.h>

/* ---- oa_open ---------------------------------------------------------------- */

static void test_open_errors(void)
{
	const char *file = tu_path("file"), *dir = tu_path("dir");
	const char *link = tu_path("link"), *fifo = tu_path("fifo");
	const char *nofile = tu_path("nofile");
	char longname[PATH_MAX + 10];
	unsigned char b[100];
	oa_file *f;

	tu_fill(b, sizeof(b), 1, 0);
	tu_write_file(file, b, sizeof(b), 0644);
	CHECK_OK(mkdir(dir, 0755));
	CHECK_OK(symlink(file, link));
	CHECK_OK(mkfifo(fifo, 0644));

	CHECK_NULL_ERR(oa_open(nofile, O_RDWR, 0), ENOENT);
	CHECK_NULL_ERR(oa_open(nofile, O_RDONLY, 0), ENOENT);
	CHECK_NULL_ERR(oa_open(tu_path("nodir/x"), O_RDWR | O_CREAT, 0644),
		       ENOENT);
	CHECK_NULL_ERR(oa_open(tu_path("file/x"), O_RDWR | O_CREAT, 0644),
		       ENOTDIR);
	CHECK_NULL_ERR(oa_open(file, O_RDWR | O_CREAT | O_EXCL, 0644), EEXIST);
	CHECK_NULL_ERR(oa_open(link, O_RDWR | O_CREAT | O_EXCL, 0644), EEXIST);
	CHECK_NULL_ERR(oa_open(dir, O_RDWR, 0), EISDIR);
	CHECK_NULL_ERR(oa_open(dir, O_WRONLY, 0), EISDIR);
	errno = 0;
	f = oa_open(dir, O_RDONLY, 0);
	CHECKF(!f && (errno == EISDIR || errno == EINVAL),
	       "oa_open(dir, O_RDONLY): %p, %s", (void *)f, tu_errname(errno));
	CHECK_NULL_ERR(oa_open(link, O_RDWR | O_NOFOLLOW, 0), ELOOP);
	CHECK_NULL_ERR(oa_open(link, O_RDONLY | O_NOFOLLOW, 0), ELOOP);
	/* Not a regular file.  (O_RDONLY on a FIFO with no writer would
	 * block open(2): the library must not hang on it.) */
	CHECK_NULL_ERR(oa_open(fifo, O_RDWR, 0), EINVAL);
	CHECK_NULL_ERR(oa_open("/dev/null", O_RDWR, 0), EINVAL);

	/* Flags the library cannot honour. */
	CHECK_NULL_ERR(oa_open(file, O_RDWR | O_APPEND, 0), EINVAL);
	CHECK_NULL_ERR(oa_open(file, O_WRONLY | O_APPEND, 0), EINVAL);
	CHECK_NULL_ERR(oa_open(file, O_RDWR | O_DIRECT, 0), EINVAL);
	CHECK_NULL_ERR(oa_open(file, O_RDONLY | O_PATH, 0), EINVAL);
	CHECK_NULL_ERR(oa_open(file, O_RDWR | O_DIRECTORY, 0), EINVAL);
	CHECK_NULL_ERR(oa_open(dir, O_RDWR | O_TMPFILE, 0600), EINVAL);
	/* ... and refused before anything is created. */
	CHECK_NULL_ERR(oa_open(nofile, O_RDWR | O_CREAT | O_APPEND, 0644),
		       EINVAL);
	CHECK_EQ(tu_file_size(nofile), -1);
	CHECK_EQ(tu_count_journals(nofile), 0);

	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = 0;
	CHECK_NULL_ERR(oa_open(longname, O_RDWR | O_CREAT, 0644), ENAMETOOLONG);
	memset(longname, 'b', NAME_MAX + 1);
	longname[NAME_MAX + 1] = 0;
	CHECK_NULL_ERR(oa_open(tu_path("%s", longname), O_RDWR | O_CREAT, 0644),
		       ENAMETOOLONG);

	/* oa_openat: relative to a directory fd; EBADF for a bad one. */
	{
		int dfd = open(tu_dir(), O_RDONLY | O_DIRECTORY);

		CHECK(dfd >= 0);
		f = oa_openat(dfd, "file", O_RDONLY, 0);
		CHECK(f);
		CHECK_OA_VIEW(f, b, sizeof(b));
		CHECK_OK(oa_close(f));
		CHECK_NULL_ERR(oa_openat(dfd, "nofile", O_RDONLY, 0), ENOENT);
		CHECK_NULL_ERR(oa_openat(-5, "file", O_RDONLY, 0), EBADF);
		close(dfd);
	}

	/* The target is untouched by all of that. */
	CHECK_FILE(file, b, sizeof(b), sizeof(b));
}

/* O_CREAT through a dangling symbolic link creates the file it names, as
 * open(2) does (relative to the link's directory), and the link stays; with
 * O_EXCL or O_NOFOLLOW the link is in the way: EEXIST, ELOOP. */
static void test_dangling_link(void)
{
	const char *sub = tu_path("sub"), *link = tu_path("sub/dangling");
	const char *made = tu_path("sub/made"), *abs = tu_path("abs");
	struct stat st;
	oa_file *f;

	CHECK_OK(mkdir(sub, 0755));
	CHECK_OK(symlink("made", link));
	CHECK_NULL_ERR(oa_open(link, O_RDWR | O_CREAT | O_EXCL, 0644), EEXIST);
	CHECK_NULL_ERR(oa_open(link, O_RDWR | O_CREAT | O_NOFOLLOW, 0644),
		       ELOOP);
	CHECK_NULL_ERR(oa_open(link, O_RDWR, 0), ENOENT);
	CHECK(stat(made, &st) < 0 && errno == ENOENT);
	f = oa_open(link, O_RDWR | O_CREAT, 0644);
	CHECKF(f, "oa_open(dangling link, O_CREAT): %s", tu_errname(errno));
	if (f) {
		tu_oa_pwrite(f, "via link", 8, 0);
		CHECK_OK(oa_commit(f));
		CHECK_OK(oa_close(f));
	}
	CHECK_FILE(made, "via link", 8, 8);
	CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
	CHECK(stat(tu_path("made"), &st) < 0 && errno == ENOENT);
	/* an absolute target; O_WRONLY; a link to a missing directory */
	CHECK_OK(symlink(abs, tu_path("sub/to-abs")));
	f = oa_open(tu_path("sub/to-abs"), O_WRONLY | O_CREAT, 0600);
	CHECKF(f, "oa_open(link to absolute, O_CREAT): %s", tu_errname(errno));
	if (f)
		CHECK_OK(oa_close(f));
	CHECK(stat(abs, &st) == 0 && S_ISREG(st.st_mode));
	CHECK_OK(symlink("nodir/x", tu_path("sub/to-nodir")));
	CHECK_NULL_ERR(oa_open(tu_path("sub/to-nodir"), O_RDWR | O_CREAT, 0644),
		       ENOENT);
}

/* As another user: EACCES. */
static int as_nobody(void *arg)
{
	const char *file = arg;

	CHECK_OK(setgid(65534));
	CHECK_OK(setuid(65534));
	CHECK_NULL_ERR(oa_open(file, O_RDWR, 0), EACCES);
	CHECK_NULL_ERR(oa_open(file, O_RDONLY, 0), EACCES);
	CHECK_ERR(oa_recover(file), EACCES);
	return 0;
}

static void test_eacces(void)
{
	const char *sub = tu_path("acc"), *file = tu_path("acc/f");
	unsigned char b[10] = "0123456789";

	if (!tu_is_root()) {
		tu_note("not root: EACCES checked with mode 000 only");
		tu_write_file(file, b, sizeof(b), 0000);
		CHECK_NULL_ERR(oa_open(file, O_RDWR, 0), EACCES);
		return;
	}
	CHECK_OK(chmod(tu_dir(), 0711));
	CHECK_OK(mkdir(sub, 0755));
	tu_write_file(file, b, sizeof(b), 0600);
	CHECK_CHILD_OK(tu_run_child(as_nobody, (void *)file));
	CHECK_OK(chmod(tu_dir(), 0700));
	CHECK_FILE(file, b, sizeof(b), sizeof(b));
}

/* ---- calls on a handle -------------------------------------------------------- */

/* What a plain call on a scratch file of the same file system says:
 * 0 or -errno. */
static int plain_beyond(int trunc, off_t at)
{
	const char *p = tu_path("probe");
	int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600), r;

	CHECK(fd >= 0);
	r = trunc ? ftruncate(fd, at) : (int)pwrite(fd, "x", 1, at);
	r = r < 0 ? -errno : 0;
	close(fd);
	unlink(p);
	return r;
}

static void beyond_fs_max(oa_file *f, const char *path,
			  const unsigned char *b, size_t n, int trunc, off_t at)
{
	const char *what = trunc ? "oa_ftruncate" : "oa_pwrite";
	int plain = plain_beyond(trunc, at);
	long long got;

	errno = 0;
	got = trunc ? oa_ftruncate(f, at) : oa_pwrite(f, "x", 1, at);
	if (plain != -EFBIG) {
		/* The file system takes it: so may the library. */
		if (got >= 0)
			CHECK_OK(oa_abort(f));
		return;
	}
	if (got < 0) {
		CHECKF(errno == EFBIG, "%s at %lld: %s, want EFBIG", what,
		       (long long)at, tu_errname(errno));
		return;
	}
	tu_note("%s at %lld accepted pending where the plain call gives "
		"EFBIG", what, (long long)at);
	CHECK_ERR(oa_commit(f), EFBIG);
	CHECK_FILE(path, b, n, (off_t)n);
	CHECK_OK(oa_abort(f));
}

static int efault_child(void *arg)
{
	/* Its own handle: an inherited one refuses everything (conf_fork). */
	oa_file *f = tu_oa_open(arg, O_RDONLY, 0);

	CHECK_ERR(oa_pread(f, NULL, 100, 0), EFAULT);
	return 0;
}

static void test_handle_errors(void)
{
	const char *path = tu_path("handle");
	unsigned char b[8192], c[8192];
	struct iovec iov[2];
	struct stat st;
	oa_file *r, *w, *rw;
	int st_child;

	tu_fill(b, sizeof(b), 2, 0);
	tu_write_file(path, b, sizeof(b), 0644);
	r = tu_oa_open(path, O_RDONLY, 0);
	w = tu_oa_open(path, O_WRONLY, 0);
	rw = tu_oa_open(path, O_RDWR, 0);

	/* Access mode. */
	CHECK_ERR(oa_pwrite(r, b, 10, 0), EBADF);
	iov[0].iov_base = b;
	iov[0].iov_len = 10;
	CHECK_ERR(oa_pwritev(r, iov, 1, 0), EBADF);
	CHECK_ERR(oa_ftruncate(r, 0), EBADF);
	CHECK_ERR(oa_pread(w, c, 10, 0), EBADF);
	CHECK_OK(oa_fstat(w, &st));             /* fstat needs no read access */
	CHECK_EQ(st.st_size, sizeof(b));
	CHECK_OK(oa_fstat(r, &st));
	off_t sz;
	CHECK_OK(oa_fsize(w, &sz));             /* nor does the size */
	CHECK_EQ(sz, (off_t)sizeof(b));
	CHECK_ERR(oa_fsize(r, NULL), EFAULT);
	CHECK_ERR(oa_fsize(NULL, &sz), EBADF);
	CHECK_ERR(oa_fstat(r, NULL), EFAULT);
	CHECK_OK(oa_commit(r));                 /* nothing to commit */

	/* Negative offsets and lengths. */
	CHECK_ERR(oa_pread(rw, c, 10, -1), EINVAL);
	CHECK_ERR(oa_pwrite(rw, b, 10, -1), EINVAL);
	CHECK_ERR(oa_pwritev(rw, iov, 1, -1), EINVAL);
	CHECK_ERR(oa_ftruncate(rw, -1), EINVAL);
	CHECK_ERR(oa_pwritev(rw, iov, -1, 0), EINVAL);
	CHECK_ERR(oa_pwritev(rw, iov, IOV_MAX + 1, 0), EINVAL);
	iov[0].iov_len = SSIZE_MAX;
	iov[1].iov_base = b;
	iov[1].iov_len = SSIZE_MAX;
	CHECK_ERR(oa_pwritev(rw, iov, 2, 0), EINVAL);   /* total overflows */

	/* Beyond the largest offset. */
	CHECK_ERR(oa_pwrite(rw, b, 100, INT64_MAX - 10), EFBIG);
	CHECK_ERR(oa_pwrite(rw, b, 1, INT64_MAX), EFBIG);
	/* Beyond what the file system takes (ext4: 16 TiB; tmpfs and xfs
	 * take more).  Where pwrite(2)/ftruncate(2) fail with EFBIG, the
	 * library must refuse too, or take the change pending and then fail
	 * the commit with EFBIG, changing nothing. */
	beyond_fs_max(rw, path, b, sizeof(b), 0, (off_t)1 << 60);
	beyond_fs_max(rw, path, b, sizeof(b), 1, INT64_MAX);
	beyond_fs_max(rw, path, b, sizeof(b), 1, (off_t)1 << 60);
	/* Refused writes changed nothing. */
	CHECK_OA_VIEW(rw, b, sizeof(b));
	CHECK_OK(oa_commit(rw));
	CHECK_FILE(path, b, sizeof(b), sizeof(b));

	/* A bad buffer: EFAULT, not a crash (in a child, in case). */
	st_child = tu_run_child(efault_child, (void *)path);
	CHECKF(WIFEXITED(st_child) && WEXITSTATUS(st_child) == 0,
	       "oa_pread into NULL: %s", tu_status_str(st_child));

	CHECK_OK(oa_close(r));
	CHECK_OK(oa_close(w));
	CHECK_OK(oa_close(rw));
}

/* ---- oa_options ------------------------------------------------------------- */

static void test_options(void)
{
	const char *path = tu_path("opts");
	unsigned char b[65536 + 10];
	struct oa_options o;
	struct oa_ioinfo io;
	oa_file *f;

	tu_write_file(path, "", 0, 0644);
	memset(&o, 0, sizeof(o));
	o.size = 1;
	CHECK_NULL_ERR(oa_open_opts(path, O_RDWR, 0, &o), EINVAL);
	o.size = 0;
	CHECK_NULL_ERR(oa_open_opts(path, O_RDWR, 0, &o), EINVAL);
	o.size = sizeof(o);
	o.method = 999;
	CHECK_NULL_ERR(oa_open_opts(path, O_RDWR, 0, &o), EINVAL);
	o.method = -1;
	CHECK_NULL_ERR(oa_open_opts(path, O_RDWR, 0, &o), EINVAL);
	o.method = 0;
	o.journal_dir = tu_path("no-such-dir");
	CHECK_NULL_ERR(oa_open_opts(path, O_RDWR, 0, &o), ENOENT);
	o.journal_dir = NULL;

	f = oa_open_opts(path, O_RDWR, 0, NULL);
	CHECK(f);
	CHECK_OK(oa_close(f));
	o.method = OA_METHOD_JOURNAL;
	f = oa_open_opts(path, O_RDWR, 0, &o);
	CHECK(f);
	CHECK_OK(oa_close(f));

	/* max_txn_bytes: EFBIG past it, the transaction unchanged. */
	o.method = 0;
	o.max_txn_bytes = 65536;
	f = oa_open_opts(path, O_RDWR, 0, &o);
	CHECK(f);
	io.size = sizeof(io);
	CHECK_OK(oa_ioinfo(f, &io));
	CHECKF(io.max_txn_bytes > 0 && io.max_txn_bytes <= 65536,
	       "ioinfo max_txn_bytes %llu with opts.max_txn_bytes 65536",
	       (unsigned long long)io.max_txn_bytes);
	tu_fill(b, sizeof(b), 3, 0);
	tu_oa_pwrite(f, b, 60000, 0);
	CHECK_ERR(oa_pwrite(f, b + 60000, 8192, 60000), EFBIG);
	CHECK_OA_VIEW(f, b, 60000);
	tu_oa_pwrite(f, b + 60000, 5536, 60000);          /* exactly full */
	CHECK_ERR(oa_pwrite(f, b + 65536, 1, 65536), EFBIG);
	CHECK_OA_VIEW(f, b, 65536);
	CHECK_OK(oa_commit(f));
	CHECK_FILE(path, b, 65536, 65536);
	/* A new transaction has the whole budget again. */
	tu_fill(b, sizeof(b), 4, 0);
	tu_oa_pwrite(f, b, 65536, 0);
	CHECK_OK(oa_abort(f));
	CHECK_ERR(oa_pwrite(f, b, 65537, 0), EFBIG);
	CHECK_OK(oa_close(f));
}

/* ---- oa_ioinfo ------------------------------------------------------------------ */

static void test_ioinfo(void)
{
	const char *path = tu_path("ioinfo");
	struct oa_ioinfo io;
	struct statfs sfs;
	oa_file *f;

	tu_write_file(path, "abc", 3, 0644);
	f = tu_oa_open(path, O_RDWR, 0);
	CHECK_ERR(oa_ioinfo(f, NULL), EINVAL);
	memset(&io, 0, sizeof(io));
	io.size = 4;
	CHECK_ERR(oa_ioinfo(f, &io), EINVAL);
	memset(&io, 0xff, sizeof(io));
	io.size = sizeof(io);
	CHECK_OK(oa_ioinfo(f, &io));
	CHECK_OK(statfs(path, &sfs));
	CHECKF(io.method != OA_METHOD_AUTO && io.method > 0,
	       "ioinfo method %d is not a method in use", io.method);
	CHECK_EQ(io.fs_magic, (unsigned long)sfs.f_type);
	CHECK(memchr(io.fs_name, 0, sizeof(io.fs_name)) != NULL);
	CHECKF(io.fs_name[0] != 0, "fs_name empty");
	CHECKF(!strcmp(io.fs_name, tu_fs_name(path)) ||
	       !strncmp(tu_fs_name(path), "0x", 2),
	       "fs_name \"%s\", statfs says %s", io.fs_name, tu_fs_name(path));
	CHECK(io.block_size > 0);
	CHECK_EQ(io.block_size, sfs.f_bsize);
	CHECK(io.rwf_atomic == 0 || io.rwf_atomic == 1);
	CHECK(io.reflink == 0 || io.reflink == 1);
	CHECK(io.exchange == 0 || io.exchange == 1);
	CHECK(io.atomic_write_unit_min <= io.atomic_write_unit_max);
	CHECK(io.atomic_write_unit_hw_max <= io.atomic_write_unit_max);
	CHECK(io.max_txn_bytes > 0);
	CHECKF(io.max_txn_bytes <= tu_free_bytes(path) + (1ull << 20),
	       "max_txn_bytes %llu above free space %llu",
	       (unsigned long long)io.max_txn_bytes,
	       (unsigned long long)tu_free_bytes(path));
	tu_note("ioinfo: method %d fs %s bsize %u dio %u/%u awu %u-%u "
		"rwf_atomic %d reflink %d exchange %d max_txn %llu",
		io.method, io.fs_name, io.block_size, io.dio_mem_align,
		io.dio_offset_align, io.atomic_write_unit_min,
		io.atomic_write_unit_max, io.rwf_atomic, io.reflink,
		io.exchange, (unsigned long long)io.max_txn_bytes);
	CHECK_OK(oa_close(f));
}

/* ---- damaged journals -------------------------------------------------------------- */

#define OLD_SEED 101
#define NEW_SEED 102
#define TX_LEN   (32 << 10)
#define FILE_LEN (64 << 10)

static void write_new(oa_file *f, void *arg)
{
	unsigned char *b = tu_malloc(TX_LEN);

	(void)arg;
	tu_fill(b, TX_LEN, NEW_SEED, 0);
	tu_oa_pwrite(f, b, TX_LEN, 0);
	free(b);
}

/* A first transaction committed (and applied) in the callback, then the
 * new pattern pending for the commit the crash interrupts. */
static void write_two(oa_file *f, void *arg)
{
	unsigned char *b = tu_malloc(TX_LEN);

	(void)arg;
	tu_fill(b, TX_LEN, OLD_SEED + 7, 0);
	tu_oa_pwrite(f, b, TX_LEN, TX_LEN);
	CHECK_OK(oa_commit(f));
	tu_fill(b, TX_LEN, NEW_SEED, 0);
	tu_oa_pwrite(f, b, TX_LEN, 0);
	free(b);
}

/* Offset in journal JPATH of the first 512 bytes of pattern SEED. */
static off_t find_pattern(const char *jpath, uint64_t seed)
{
	unsigned char want[512];
	size_t n;
	unsigned char *j = tu_read_file(jpath, &n);

	tu_fill(want, sizeof(want), seed, 0);
	for (size_t o = 0; o + sizeof(want) <= n; o++)
		if (!memcmp(j + o, want, sizeof(want))) {
			free(j);
			return (off_t)o;
		}
	tu_fail(__FILE__, __LINE__, 0, "pattern %llu not in %s",
		(unsigned long long)seed, jpath);
}

/* PATH with the old contents, and a journal holding one durable commit
 * (kill point 2: flushed, not applied).  Returns the old contents. */
static unsigned char *crashed_file(const char *path)
{
	unsigned char *old = tu_malloc(FILE_LEN);

	tu_fill(old, FILE_LEN, OLD_SEED, 0);
	tu_write_file(path, old, FILE_LEN, 0644);
	CHECKF(tu_crash_commit(path, 2, write_new, NULL) == 1,
	       "kill point 2 was not hit");
	CHECK_FILE(path, old, FILE_LEN, FILE_LEN);
	CHECK(tu_file_size(tu_journal_path(path, 0)) > 0);
	return old;
}

/* Offset of the committed data in the journal: where the start of the new
 * pattern lies (the expected layout puts it at 8192 + 64). */
static off_t find_data(const char *jpath)
{
	unsigned char want[512];
	size_t n;
	unsigned char *j = tu_read_file(jpath, &n);
	off_t at = -1;

	tu_fill(want, sizeof(want), NEW_SEED, 0);
	for (size_t i = 0; i + sizeof(want) <= n; i++) {
		if (j[i] == want[0] && !memcmp(j + i, want, sizeof(want))) {
			at = (off_t)i;
			break;
		}
	}
	free(j);
	if (at < 0) {
		tu_note("new data not found in the journal: damaging 8192+64");
		at = 8192 + 64;
	}
	return at;
}

static void flip(const char *p, off_t off, size_t n)
{
	unsigned char b[4096];
	int fd = open(p, O_RDWR);

	CHECK(fd >= 0 && n <= sizeof(b));
	tu_pread_full(fd, b, n, off);
	for (size_t i = 0; i < n; i++)
		b[i] ^= 0x5a;
	tu_pwrite_full(fd, b, n, off);
	CHECK_OK(fsync(fd));
	close(fd);
}

/* Either refused with EUCLEAN or ignored, and in both cases the file keeps
 * OLD; WHAT names the damage. */
static void expect_refused_or_ignored(const char *path,
				      const unsigned char *old,
				      const char *what)
{
	oa_file *f;
	int r;

	errno = 0;
	r = oa_recover(path);
	CHECKF(r == 0 || errno == EUCLEAN, "%s: oa_recover %d %s", what, r,
	       tu_errname(errno));
	CHECK_FILE(path, old, FILE_LEN, FILE_LEN);
	errno = 0;
	f = oa_open(path, O_RDWR, 0);
	CHECKF(f || errno == EUCLEAN, "%s: oa_open %s", what,
	       tu_errname(errno));
	if (f) {
		CHECK_OA_VIEW(f, old, FILE_LEN);
		CHECK_OK(oa_close(f));
	}
	CHECK_FILE(path, old, FILE_LEN, FILE_LEN);
	tu_note("%s: %s", what, r == 0 ? "ignored" : "EUCLEAN");
}

static void test_damaged(void)
{
	const char *path = tu_path("damaged"), *jp = tu_journal_path(path, 0);
	unsigned char *old = crashed_file(path);
	off_t at = find_data(jp);
	FILE *devnull = fopen("/dev/null", "w");

	/* Damage inside the data of the newest commit.  With one flush per
	 * commit this cannot be told from a flush the crash tore (the commit
	 * record arrived, a data page did not): it is refused or dropped, never
	 * applied (docs/FORMAT.md, "Limits of the rule"). */
	flip(jp, at + 10, 100);
	errno = 0;
	int r0 = oa_recover(path);
	CHECKF(r0 == 0 || errno == EUCLEAN, "oa_recover %d %s", r0,
	       tu_errname(errno));
	CHECK_FILE(path, old, FILE_LEN, FILE_LEN);
	CHECK(devnull);
	/* Undo the damage.  A decision once taken holds: a dropped commit
	 * never comes back (the file would change state after it was read);
	 * a refused one is applied now that it is whole. */
	flip(jp, at + 10, 100);
	CHECK_OK(oa_recover(path));
	{
		unsigned char *neu = tu_malloc(FILE_LEN);

		memcpy(neu, old, FILE_LEN);
		tu_fill(neu, TX_LEN, NEW_SEED, 0);
		CHECK_FILE(path, r0 == 0 ? old : neu, FILE_LEN, FILE_LEN);
		free(neu);
	}
	free(old);

	/* Damage inside the data of an older commit while a newer one is
	 * intact: that commit was acknowledged (a later one exists), so this
	 * is corruption, refused with EUCLEAN, and nothing is applied. */
	path = tu_path("damaged2");
	jp = tu_journal_path(path, 0);
	old = tu_malloc(FILE_LEN);
	tu_fill(old, FILE_LEN, OLD_SEED, 0);
	tu_write_file(path, old, FILE_LEN, 0644);
	CHECKF(tu_crash_commit(path, 2, write_two, NULL) == 1,
	       "kill point 2 was not hit");
	{
		/* the first commit was applied in place; the second was not */
		unsigned char *mid = tu_malloc(FILE_LEN);
		memcpy(mid, old, FILE_LEN);
		tu_fill(mid + TX_LEN, TX_LEN, OLD_SEED + 7, 0);
		CHECK_FILE(path, mid, FILE_LEN, FILE_LEN);
		at = find_pattern(jp, OLD_SEED + 7);
		flip(jp, at + 10, 100);
		CHECK_NULL_ERR(oa_open(path, O_RDWR, 0), EUCLEAN);
		CHECK_NULL_ERR(oa_open(path, O_RDONLY, 0), EUCLEAN);
		CHECK_ERR(oa_recover(path), EUCLEAN);
		CHECK_ERR(oa_recover(path), EUCLEAN);
		CHECK_EQ(oa__check(path, NULL, devnull), 2);
		CHECK_FILE(path, mid, FILE_LEN, FILE_LEN);
		/* Undo: the evidence was kept; now both commits apply. */
		flip(jp, at + 10, 100);
		CHECK_OK(oa_recover(path));
		tu_fill(mid, TX_LEN, NEW_SEED, 0);
		CHECK_FILE(path, mid, FILE_LEN, FILE_LEN);
		free(mid);
	}
	free(old);
	fclose(devnull);

	/* A journal cut short inside the data. */
	path = tu_path("truncated");
	old = crashed_file(path);
	jp = tu_journal_path(path, 0);
	CHECK_OK(truncate(jp, find_data(jp) + 10));
	expect_refused_or_ignored(path, old, "truncated journal");
	free(old);

	/* A journal of all garbage. */
	path = tu_path("garbage");
	old = crashed_file(path);
	jp = tu_journal_path(path, 0);
	{
		size_t n = (size_t)tu_file_size(jp);
		unsigned char *g = tu_malloc(n);

		tu_fill(g, n, 77, 0);
		tu_write_file(jp, g, n, 0600);
		free(g);
	}
	expect_refused_or_ignored(path, old, "garbage journal");
	free(old);

	/* Another file's journal copied in place (foreign: other inode). */
	{
		const char *other = tu_path("other");
		unsigned char *oold = crashed_file(other);
		size_t n;
		void *j = tu_read_file(tu_journal_path(other, 0), &n);

		path = tu_path("foreign");
		old = tu_malloc(FILE_LEN);
		tu_fill(old, FILE_LEN, 55, 0);
		tu_write_file(path, old, FILE_LEN, 0644);
		tu_remove_journals(path);
		tu_write_file(tu_journal_path(path, 0), j, n, 0600);
		expect_refused_or_ignored(path, old, "foreign journal");
		free(j);
		free(old);
		free(oold);
	}
}

/* ---- journals others could have written ---------------------------------------- */

static void test_unsafe_journal(void)
{
	const char *path = tu_path("unsafe"), *jp = tu_journal_path(path, 0);
	unsigned char *old = crashed_file(path), *neu = tu_malloc(FILE_LEN);
	struct stat st;

	memcpy(neu, old, FILE_LEN);
	tu_fill(neu, TX_LEN, NEW_SEED, 0);

	CHECK_OK(stat(jp, &st));
	CHECK_OK(chmod(jp, (st.st_mode & 07777) | S_IWOTH));
	CHECK_NULL_ERR(oa_open(path, O_RDWR, 0), EPERM);
	CHECK_NULL_ERR(oa_open(path, O_RDONLY, 0), EPERM);
	CHECK_ERR(oa_recover(path), EPERM);
	CHECK_FILE(path, old, FILE_LEN, FILE_LEN);

	if (tu_is_root()) {
		CHECK_OK(chmod(jp, st.st_mode & 07777));
		CHECK_OK(chown(jp, 1234, 1234));
		CHECK_NULL_ERR(oa_open(path, O_RDWR, 0), EPERM);
		CHECK_ERR(oa_recover(path), EPERM);
		CHECK_FILE(path, old, FILE_LEN, FILE_LEN);
		CHECK_OK(chown(jp, st.st_uid, st.st_gid));
	}
	/* Made safe again: the commit is recovered. */
	CHECK_OK(chmod(jp, st.st_mode & 07777));
	CHECK_OK(oa_recover(path));
	CHECK_FILE(path, neu, FILE_LEN, FILE_LEN);
	free(old);
	free(neu);
}

/* ---- FIFOs (last: a library that blocks here hangs the child) ------------- */

/* open(2) of a FIFO for reading only (writing only) blocks until a writer
 * (reader) comes: the library must not. */
static int fifo_child(void *arg)
{
	const char *fifo = tu_path("fifo");

	signal(SIGALRM, SIG_DFL);
	alarm(5);
	CHECK_NULL_ERR(oa_open(fifo, (int)(intptr_t)arg, 0644), EINVAL);
	return 0;
}

static void test_fifo(void)
{
	static const int modes[] = { O_RDONLY, O_WRONLY, O_WRONLY | O_CREAT };
	size_t i;

	for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		int st = tu_run_child(fifo_child, (void *)(intptr_t)modes[i]);

		CHECKF(!WIFSIGNALED(st) || WTERMSIG(st) != SIGALRM,
		       "oa_open(FIFO, 0%o) blocked (5 s) instead of failing "
		       "with EINVAL", modes[i]);
		CHECK_CHILD_OK(st);
	}
}

/* A name that leaves no room for ".NAME.oaj-K" is refused before O_CREAT
 * makes anything, not at the first write. */
static void test_long_name(void)
{
	char name[256];
	const char *path;
	struct stat st;

	memset(name, 'n', 250);
	name[250] = 0;
	path = tu_path("%s", name);
	CHECK_NULL_ERR(oa_open(path, O_RDWR | O_CREAT, 0644), ENAMETOOLONG);
	CHECK(stat(path, &st) < 0 && errno == ENOENT);
	/* 240 bytes fit: open, write, commit work. */
	name[240] = 0;
	path = tu_path("%s", name);
	oa_file *f = tu_oa_open(path, O_RDWR | O_CREAT, 0644);
	tu_oa_pwrite(f, "x", 1, 0);
	CHECK_OK(oa_commit(f));
	CHECK_OK(oa_close(f));
	CHECK_FILE(path, "x", 1, 1);

	/* With a journal directory the names are ".NAME.<inode hex>.oa" and
	 * ".NAME.<inode hex>.oaj-K": a name that fits without the inode but
	 * not with 16 hex digits of it is refused before anything is made. */
	{
		struct oa_options o = { .size = sizeof(o),
					.journal_dir = tu_path("jdir") };

		CHECK_OK(mkdir(o.journal_dir, 0755));
		memset(name, 'j', 245);
		name[245] = 0;
		path = tu_path("%s", name);
		CHECK_NULL_ERR(oa_open_opts(path, O_RDWR | O_CREAT, 0644, &o),
			       ENAMETOOLONG);
		CHECK(stat(path, &st) < 0 && errno == ENOENT);
		CHECK(rmdir(o.journal_dir) == 0);   /* still empty */
		CHECK_OK(mkdir(o.journal_dir, 0755));
		name[228] = 0;   /* the longest that always fits */
		path = tu_path("%s", name);
		f = oa_open_opts(path, O_RDWR | O_CREAT, 0644, &o);
		CHECKF(f, "oa_open_opts(228 bytes, journal_dir): %s",
		       tu_errname(errno));
		if (f) {
			tu_oa_pwrite(f, "y", 1, 0);
			CHECK_OK(oa_commit(f));
			CHECK_OK(oa_close(f));
		}
		CHECK_FILE(path, "y", 1, 1);
	}
}

/* Started with 0-2 closed (cron, a daemon, `2>&-`): no descriptor of a
 * handle - the file, its directory, the control file, a journal, the
 * shadow - is a standard one, so what the program then prints lands
 * nowhere of the library's. */
static int closed_std(void *arg)
{
	const char *path = arg;
	close(0);
	close(1);
	close(2);
	oa_file *f = oa_open(path, O_RDWR | O_CREAT, 0644);
	if (!f)
		_exit(3);
	oa_file *g = oa_open(path, O_RDWR, 0);   /* an extra journal too */
	if (!g || oa_pwrite(f, "new!", 4, 0) != 4 ||
	    oa_pwrite(g, "more", 4, 8192) != 4 || oa_commit(f) < 0 ||
	    oa_commit(g) < 0)
		_exit(4);
	for (int fd = 0; fd <= 2; fd++)
		if (write(fd, "what the program printed", 24) > 0)
			_exit(5);
	if (oa_close(g) < 0 || oa_close(f) < 0)
		_exit(6);
	_exit(0);
}

static void test_closed_std(void)
{
	const char *path = tu_path("std");
	char want[8196] = "new!";
	memcpy(want + 8192, "more", 4);
	int st = tu_run_child(closed_std, (void *)path);
	CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "handles opened with "
	       "0-2 closed: %s (5: one of 0-2 was the library's)",
	       tu_status_str(st));
	CHECK_FILE(path, want, sizeof(want), (off_t)sizeof(want));
	tu_note("with 0-2 closed, no descriptor of the library is a standard "
		"one");
}

int main(void)
{
	tu_alarm(240);
	tu_pin_journal();   /* the crash cases aim at the journal protocol */
	test_open_errors();
	test_dangling_link();
	test_eacces();
	test_handle_errors();
	test_options();
	test_ioinfo();
	test_damaged();
	test_unsafe_journal();
	test_fifo();
	test_long_name();
	test_closed_std();
	return 0;
}
