/*
 * testutil.c - helpers for the oatomic tests (see testutil.h).
 *
 * SPDX-License-Identifier: MIT
 */
#include "testutil.h"

#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>

#include "workload.h"   /* the I/O loops */

/* ---- failing and skipping ---------------------------------------------- */

void tu_fail(const char *file, int line, int err, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "%s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (err)
		fprintf(stderr, " [errno %d %s: %s]", err, tu_errname(err),
			strerror(err));
	fprintf(stderr, " (pid %d)\n", (int)getpid());
	fflush(stderr);
	exit(1);
}

void tu_skip(const char *fmt, ...)
{
	va_list ap;

	fflush(stderr);
	printf("SKIP: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	exit(TU_SKIP);
}

void tu_note(const char *fmt, ...)
{
	va_list ap;

	printf("NOTE: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

const char *tu_errname(int err)
{
	static __thread char other[16];

	switch (err) {
#define E(x) case x: return #x
	E(EPERM); E(ENOENT); E(EINTR); E(EIO); E(EBADF); E(EAGAIN);
	E(ENOMEM); E(EACCES); E(EFAULT); E(EBUSY); E(EEXIST); E(EXDEV);
	E(ENOTDIR); E(EISDIR); E(EINVAL); E(EMFILE); E(EFBIG); E(ENOSPC);
	E(ESPIPE); E(EROFS); E(EMLINK); E(ERANGE); E(EDEADLK);
	E(ENAMETOOLONG); E(ENOLCK); E(ENOSYS); E(ELOOP); E(ENODATA);
	E(EOVERFLOW); E(EOPNOTSUPP); E(EUCLEAN); E(EDQUOT); E(ETXTBSY);
	E(ESTALE); E(ECANCELED);
#undef E
	case 0:
		return "0";
	}
	snprintf(other, sizeof(other), "E?%d", err);
	return other;
}

void tu_check_mem(const char *file, int line, const char *what,
		  const void *got, const void *want, size_t n, uint64_t base)
{
	const unsigned char *g = got, *w = want;
	size_t i, j, end;

	if (n == 0 || memcmp(got, want, n) == 0)
		return;
	for (i = 0; i < n && g[i] == w[i]; i++)
		;
	for (end = i; end < n && g[end] != w[end]; end++)
		;
	fflush(stdout);
	fprintf(stderr, "%s:%d: %s: %zu bytes differ from offset %llu "
		"(first run of differences %zu bytes)\n  got: ", file, line,
		what, n, (unsigned long long)(base + i), end - i);
	for (j = i; j < n && j < i + 16; j++)
		fprintf(stderr, "%02x ", g[j]);
	fprintf(stderr, "\n want: ");
	for (j = i; j < n && j < i + 16; j++)
		fprintf(stderr, "%02x ", w[j]);
	fprintf(stderr, "\n");
	tu_fail(file, line, 0, "CHECK_MEM(%s) failed", what);
}

/* ---- the scratch directory and paths ----------------------------------- */

static char tu_dir_buf[PATH_MAX];
static pid_t tu_dir_owner;   /* pid that made tu_dir_buf with mkdtemp */

/* Every string handed out by tu_path & co., so that they stay reachable
 * (LeakSanitizer) and valid until exit. */
static char **tu_strings;
static size_t tu_nstrings, tu_capstrings;

static const char *tu_keep(char *s)
{
	if (tu_nstrings == tu_capstrings) {
		size_t cap = tu_capstrings ? 2 * tu_capstrings : 64;
		char **p = realloc(tu_strings, cap * sizeof(*p));

		if (!p)
			tu_fail(__FILE__, __LINE__, errno, "realloc");
		tu_strings = p;
		tu_capstrings = cap;
	}
	tu_strings[tu_nstrings++] = s;
	return s;
}

static void tu_rm_rf(const char *path)
{
	struct stat st;
	DIR *d;
	struct dirent *de;

	if (lstat(path, &st) != 0)
		return;
	if (!S_ISDIR(st.st_mode)) {
		unlink(path);
		return;
	}
	d = opendir(path);
	if (d) {
		while ((de = readdir(d)) != NULL) {
			char sub[PATH_MAX];

			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
			tu_rm_rf(sub);
		}
		closedir(d);
	}
	rmdir(path);
}

static void tu_dir_cleanup(void)
{
	if (tu_dir_owner == getpid() && tu_dir_buf[0])
		tu_rm_rf(tu_dir_buf);
}

const char *tu_dir(void)
{
	const char *env, *tmp;

	if (tu_dir_buf[0])
		return tu_dir_buf;
	env = getenv("OA_TEST_DIR");
	if (env && *env) {
		if (mkdir(env, 0700) != 0 && errno != EEXIST)
			tu_fail(__FILE__, __LINE__, errno, "mkdir %s", env);
		snprintf(tu_dir_buf, sizeof(tu_dir_buf), "%s", env);
		return tu_dir_buf;
	}
	tmp = getenv("TMPDIR");
	snprintf(tu_dir_buf, sizeof(tu_dir_buf), "%s/oatest.XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(tu_dir_buf))
		tu_fail(__FILE__, __LINE__, errno, "mkdtemp %s", tu_dir_buf);
	tu_dir_owner = getpid();
	atexit(tu_dir_cleanup);
	return tu_dir_buf;
}

const char *tu_path(const char *fmt, ...)
{
	char name[PATH_MAX], *s;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	if (asprintf(&s, "%s/%s", tu_dir(), name) < 0)
		tu_fail(__FILE__, __LINE__, errno, "asprintf");
	return tu_keep(s);
}

/* ".NAME" + SUFFIX beside PATH. */
static const char *tu_beside(const char *path, const char *suffix)
{
	const char *slash = strrchr(path, '/');
	char *s;
	int r;

	if (slash)
		r = asprintf(&s, "%.*s/.%s%s", (int)(slash - path), path,
			     slash + 1, suffix);
	else
		r = asprintf(&s, ".%s%s", path, suffix);
	if (r < 0)
		tu_fail(__FILE__, __LINE__, errno, "asprintf");
	return tu_keep(s);
}

const char *tu_control_path(const char *path)
{
	return tu_beside(path, ".oa");
}

/* Journal K: 0 lives in the control file (format 2), K >= 1 in files of
 * their own. */
const char *tu_journal_path(const char *path, int k)
{
	char suffix[32];

	if (k == 0)
		return tu_control_path(path);
	snprintf(suffix, sizeof(suffix), ".oaj-%d", k);
	return tu_beside(path, suffix);
}

/* Calls FN on every ".NAME.oa*" beside PATH; returns how many. */
static int tu_each_journal(const char *path, void (*fn)(const char *))
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX], prefix[NAME_MAX + 8];
	DIR *d;
	struct dirent *de;
	int n = 0;

	if (slash)
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	else
		snprintf(dir, sizeof(dir), ".");
	snprintf(prefix, sizeof(prefix), ".%s.oa", slash ? slash + 1 : path);
	d = opendir(dir);
	if (!d)
		return 0;
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, prefix, strlen(prefix)))
			continue;
		n++;
		if (fn) {
			char p[PATH_MAX + NAME_MAX + 2];

			snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
			fn(p);
		}
	}
	closedir(d);
	return n;
}

static void tu_unlink_one(const char *p)
{
	unlink(p);
}

void tu_remove_journals(const char *path)
{
	tu_each_journal(path, tu_unlink_one);
}

int tu_count_journals(const char *path)
{
	return tu_each_journal(path, NULL);
}

/* ---- whole files through plain system calls ---------------------------- */

void tu_pwrite_full(int fd, const void *buf, size_t n, off_t off)
{
	if (wl_pwrite_all(fd, buf, n, off) < 0)
		tu_fail(__FILE__, __LINE__, errno, "pwrite fd %d", fd);
}

void tu_pread_full(int fd, void *buf, size_t n, off_t off)
{
	ssize_t r = wl_pread_all(fd, buf, n, off);

	if (r < 0)
		tu_fail(__FILE__, __LINE__, errno, "pread fd %d", fd);
	if ((size_t)r < n)
		tu_fail(__FILE__, __LINE__, 0,
			"pread fd %d: unexpected end of file at %lld",
			fd, (long long)(off + r));
}

void tu_write_file(const char *path, const void *buf, size_t n, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

	if (fd < 0)
		tu_fail(__FILE__, __LINE__, errno, "open %s", path);
	tu_pwrite_full(fd, buf, n, 0);
	if (fsync(fd) != 0)
		tu_fail(__FILE__, __LINE__, errno, "fsync %s", path);
	close(fd);
}

void *tu_read_file(const char *path, size_t *n)
{
	struct stat st;
	char *buf;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		tu_fail(__FILE__, __LINE__, errno, "open %s", path);
	if (fstat(fd, &st) != 0)
		tu_fail(__FILE__, __LINE__, errno, "fstat %s", path);
	buf = tu_malloc((size_t)st.st_size + 1);
	tu_pread_full(fd, buf, (size_t)st.st_size, 0);
	close(fd);
	*n = (size_t)st.st_size;
	return buf;
}

off_t tu_file_size(const char *path)
{
	struct stat st;

	if (stat(path, &st) != 0)
		return -1;
	return st.st_size;
}

void tu_check_file(const char *file, int line, const char *path,
		   const void *want, size_t n, off_t size)
{
	size_t got_n;
	char *got = tu_read_file(path, &got_n);

	if (size >= 0 && (off_t)got_n != size)
		tu_fail(file, line, 0, "%s: size %zu, want %lld", path, got_n,
			(long long)size);
	if (got_n < n)
		tu_fail(file, line, 0, "%s: size %zu, shorter than %zu", path,
			got_n, n);
	tu_check_mem(file, line, path, got, want, n, 0);
	free(got);
}

/* ---- the library, checked ---------------------------------------------- */

void tu_oa_update_at(const char *file, int line, const char *path,
		     const void *buf, size_t n, off_t off)
{
	oa_file *f = tu_oa_open_at(file, line, path, O_RDWR, 0);

	tu_oa_pwrite_at(file, line, f, buf, n, off);
	if (oa_commit(f) < 0)
		tu_fail(file, line, errno, "oa_commit(%s) failed", path);
	if (oa_close(f) < 0)
		tu_fail(file, line, errno, "oa_close(%s) failed", path);
}

oa_file *tu_oa_open_at(const char *file, int line, const char *path,
		       int flags, mode_t mode)
{
	oa_file *f = oa_open(path, flags, mode);

	if (!f)
		tu_fail(file, line, errno, "oa_open(%s, 0%o) failed", path,
			flags);
	return f;
}

void tu_oa_pwrite_at(const char *file, int line, oa_file *f, const void *buf,
		     size_t n, off_t off)
{
	ssize_t r = oa_pwrite(f, buf, n, off);

	if (r < 0 || (size_t)r != n)
		tu_fail(file, line, r < 0 ? errno : 0,
			"oa_pwrite(%zu bytes at %lld) returned %zd", n,
			(long long)off, r);
}

void tu_oa_pread_at(const char *file, int line, oa_file *f, void *buf,
		    size_t n, off_t off)
{
	char *p = buf;

	while (n) {
		ssize_t r = oa_pread(f, p, n, off);

		if (r <= 0)
			tu_fail(file, line, r < 0 ? errno : 0,
				"oa_pread(%zu bytes at %lld) returned %zd", n,
				(long long)off, r);
		p += r;
		n -= (size_t)r;
		off += r;
	}
}

void *tu_oa_read_all(oa_file *f, size_t *n)
{
	struct stat st;
	char *buf;

	if (oa_fstat(f, &st) != 0)
		tu_fail(__FILE__, __LINE__, errno, "oa_fstat");
	buf = tu_malloc((size_t)st.st_size + 1);
	if (st.st_size)
		tu_oa_pread(f, buf, (size_t)st.st_size, 0);
	*n = (size_t)st.st_size;
	return buf;
}

void tu_check_oa_view(const char *file, int line, oa_file *f,
		      const void *want, size_t n)
{
	struct stat st;
	char *got, extra;
	ssize_t r;

	if (oa_fstat(f, &st) != 0)
		tu_fail(file, line, errno, "oa_fstat");
	if ((size_t)st.st_size != n)
		tu_fail(file, line, 0, "oa_fstat size %lld, want %zu",
			(long long)st.st_size, n);
	off_t sz = -1;
	if (oa_fsize(f, &sz) != 0)
		tu_fail(file, line, errno, "oa_fsize");
	if ((size_t)sz != n)
		tu_fail(file, line, 0, "oa_fsize %lld, want %zu",
			(long long)sz, n);
	got = tu_malloc(n + 1);
	if (n)
		tu_oa_pread_at(file, line, f, got, n, 0);
	r = oa_pread(f, &extra, 1, (off_t)n);
	if (r != 0)
		tu_fail(file, line, r < 0 ? errno : 0,
			"oa_pread at the end (%zu) returned %zd, want 0", n, r);
	tu_check_mem(file, line, "oa_pread view", got, want, n, 0);
	free(got);
}

struct tu_crash {
	const char *path;
	int point;
	void (*write)(oa_file *f, void *arg);
	void *arg;
};

static int tu_crash_child(void *p)
{
	const struct tu_crash *c = p;
	oa_file *f = tu_oa_open(c->path, O_RDWR | O_CREAT, 0644);

	c->write(f, c->arg);
	oa__set_killpoint(c->point);
	if (oa_commit(f) != 0)
		tu_fail(__FILE__, __LINE__, errno,
			"oa_commit before kill point %d failed", c->point);
	if (oa_close(f) != 0)
		tu_fail(__FILE__, __LINE__, errno,
			"oa_close before kill point %d failed", c->point);
	return 0;
}

int tu_crash_commit(const char *path, int point,
		    void (*write)(oa_file *f, void *arg), void *arg)
{
	struct tu_crash c = { path, point, write, arg };
	int st = tu_run_child(tu_crash_child, &c);

	if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
		return 1;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	tu_fail(__FILE__, __LINE__, 0, "crashing child (kill point %d): %s",
		point, tu_status_str(st));
}

/* ---- data patterns ----------------------------------------------------- */

static inline uint64_t tu_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static inline unsigned char tu_pattern_byte(uint64_t seed, uint64_t off)
{
	uint64_t w = tu_mix(seed * 0x100000001b3ULL ^ (off >> 3));

	return (unsigned char)(w >> ((off & 7) * 8));
}

void tu_fill(void *buf, size_t n, uint64_t seed, uint64_t off)
{
	unsigned char *p = buf;
	size_t i = 0;

	if (seed == 0) {
		memset(buf, 0, n);
		return;
	}
	/* Head bytes up to an 8-aligned offset, then whole words. */
	for (; i < n && ((off + i) & 7); i++)
		p[i] = tu_pattern_byte(seed, off + i);
	for (; i + 8 <= n; i += 8) {
		uint64_t w = tu_mix(seed * 0x100000001b3ULL ^ ((off + i) >> 3));

		memcpy(p + i, &w, 8);   /* little endian: byte k = w >> 8k */
	}
	for (; i < n; i++)
		p[i] = tu_pattern_byte(seed, off + i);
}

long long tu_find_mismatch(const void *buf, size_t n, uint64_t seed,
			   uint64_t off)
{
	const unsigned char *p = buf;
	unsigned char tmp[4096];
	size_t done = 0;

	while (done < n) {
		size_t k = n - done < sizeof(tmp) ? n - done : sizeof(tmp);

		tu_fill(tmp, k, seed, off + done);
		if (memcmp(tmp, p + done, k)) {
			size_t i;

			for (i = 0; tmp[i] == p[done + i]; i++)
				;
			return (long long)(done + i);
		}
		done += k;
	}
	return -1;
}

void tu_fill_stamp(void *buf, size_t n, uint64_t stamp)
{
	unsigned char *p = buf;
	size_t i;

	for (i = 0; i + 8 <= n; i += 8)
		memcpy(p + i, &stamp, 8);
	if (i < n)
		memcpy(p + i, &stamp, n - i);
}

uint64_t tu_get_stamp(const void *buf)
{
	uint64_t s;

	memcpy(&s, buf, 8);
	return s;
}

int tu_is_stamp(const void *buf, size_t n, uint64_t stamp)
{
	const unsigned char *p = buf;
	size_t i;

	for (i = 0; i + 8 <= n; i += 8)
		if (memcmp(p + i, &stamp, 8))
			return 0;
	return i == n || !memcmp(p + i, &stamp, n - i);
}

uint64_t tu_hash(uint64_t h, const void *buf, size_t n)
{
	const unsigned char *p = buf;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

uint64_t tu_rand(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545f4914f6cdd1dULL;
}

uint64_t tu_seed(void)
{
	static uint64_t seed;
	const char *env;

	if (seed)
		return seed;
	env = getenv("OA_TEST_SEED");
	if (env && *env)
		seed = strtoull(env, NULL, 0);
	else
		seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	if (!seed)
		seed = 1;
	tu_note("seed %llu (set OA_TEST_SEED to repeat)",
		(unsigned long long)seed);
	return seed;
}

/* ---- processes ----------------------------------------------------------- */

/* The threads of this process (the entries of /proc/self/task); 0 when
 * they cannot be counted. */
static int threads_now(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

pid_t tu_fork(int (*fn)(void *), void *arg)
{
	pid_t pid;

	/* The sanitizers' allocator is not fork-safe: a child forked while
	 * another thread holds its lock waits for ever at its first
	 * allocation (CI's ASan pass timed out so).  A test forks its
	 * processes before it starts threads; say so where one does not. */
	int nt = TU_ASAN ? threads_now() : 1;
	if (nt > 1)
		tu_fail(__FILE__, __LINE__, 0, "tu_fork beside %d running "
			"threads under the sanitizers: the child may hang; "
			"fork before starting threads", nt - 1);
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		tu_fail(__FILE__, __LINE__, errno, "fork");
	if (pid == 0) {
		int rc = fn(arg);

		fflush(stdout);
		fflush(stderr);
		_exit(rc);
	}
	return pid;
}

void tu_die_with_parent(pid_t parent)
{
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		_exit(1);   /* (gone already: the signal would never come) */
}

int tu_wait(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			tu_fail(__FILE__, __LINE__, errno, "waitpid %d",
				(int)pid);
	}
	return status;
}

int tu_run_child(int (*fn)(void *), void *arg)
{
	return tu_wait(tu_fork(fn, arg));
}

const char *tu_status_str(int status)
{
	static __thread char buf[64];

	if (WIFEXITED(status))
		snprintf(buf, sizeof(buf), "exit %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, sizeof(buf), "killed by signal %d (%s)",
			 WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(buf, sizeof(buf), "status 0x%x", status);
	return buf;
}

void tu_check_child_ok(const char *file, int line, int status)
{
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		tu_fail(file, line, 0, "child failed: %s",
			tu_status_str(status));
}

static void tu_on_alarm(int sig)
{
	static const char msg[] = "FAIL: the test's own alarm went off "
				  "(deadlock or far too slow)\n";
	ssize_t r = write(2, msg, sizeof(msg) - 1);

	(void)r;
	(void)sig;
	/* Take the whole process group down: children may hold the hang. */
	kill(0, SIGKILL);
	_exit(1);
}

void tu_alarm(unsigned seconds)
{
	signal(SIGALRM, tu_on_alarm);
	alarm(seconds);
}

/* ---- misc ---------------------------------------------------------------- */

double tu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void *tu_malloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		tu_fail(__FILE__, __LINE__, errno, "malloc(%zu)", n);
	return p;
}

void *tu_zalloc(size_t n)
{
	void *p = calloc(1, n ? n : 1);

	if (!p)
		tu_fail(__FILE__, __LINE__, errno, "calloc(%zu)", n);
	return p;
}

int tu_is_root(void)
{
	return geteuid() == 0;
}

static const char *tmpfs_mnt[4];
static pid_t tmpfs_owner;

static void tmpfs_unmount_all(void)
{
	if (getpid() != tmpfs_owner)
		return;   /* a forked child's exit unmounts nothing */
	for (int i = 0; i < 4; i++)
		if (tmpfs_mnt[i])
			umount2(tmpfs_mnt[i], MNT_DETACH);
}

const char *tu_tmpfs(const char *name, const char *size)
{
	static int registered;
	const char *mnt = tu_path("%s", name);
	char opts[64];
	int slot = 0;

	if (!tu_is_root()) {
		tu_note("a %s tmpfs needs root: not tried", size);
		return NULL;
	}
	while (slot < 4 && tmpfs_mnt[slot])
		slot++;
	CHECK(slot < 4);
	CHECK_OK(mkdir(mnt, 0755));
	snprintf(opts, sizeof(opts), "size=%s", size);
	if (mount("oatomic-test", mnt, "tmpfs", 0, opts) < 0) {
		tu_note("no tmpfs mount (%s): not tried", strerror(errno));
		return NULL;
	}
	tmpfs_mnt[slot] = mnt;
	tmpfs_owner = getpid();
	if (!registered) {
		registered = 1;
		atexit(tmpfs_unmount_all);
	}
	return mnt;
}

void tu_tmpfs_done(const char *mnt)
{
	for (int i = 0; i < 4; i++)
		if (tmpfs_mnt[i] == mnt) {
			umount2(mnt, MNT_DETACH);
			tmpfs_mnt[i] = NULL;
		}
}

const char *tu_fs_name(const char *path)
{
	static __thread char buf[32];
	struct statfs st;

	if (statfs(path, &st) != 0)
		return "?";
	const char *n = oa__fs_name((unsigned long)st.f_type);
	if (n)
		return n;
	snprintf(buf, sizeof(buf), "0x%lx", (unsigned long)st.f_type);
	return buf;
}

uint64_t tu_free_bytes(const char *path)
{
	struct statvfs st;

	if (statvfs(path, &st) != 0)
		return 0;
	return (uint64_t)st.f_bavail * st.f_frsize;
}

static char *pinned_from;

void tu_pin_journal(void)
{
	const char *m = getenv("OATOMIC_METHOD");
	free(pinned_from);
	pinned_from = m ? strdup(m) : NULL;
	if (!m || strcmp(m, "clone") != 0)
		setenv("OATOMIC_METHOD", "journal", 1);
}

void tu_unpin_journal(void)
{
	if (pinned_from)
		setenv("OATOMIC_METHOD", pinned_from, 1);
	else
		unsetenv("OATOMIC_METHOD");
}
