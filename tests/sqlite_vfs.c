/*
 * sqlite_vfs.c - the "oatomic" SQLite VFS does what liboatomic_sqlite(3)
 * says (sqlite/vfs.c, Q1-Q6):
 *   - a transaction is one commit and one flush, whatever `synchronous`
 *     says, and no -journal, -wal or -shm file appears (journal_mode=MEMORY);
 *   - nothing of a transaction reaches the file before COMMIT, even pages a
 *     big transaction spilled; ROLLBACK after a spill leaves the file as it
 *     was;
 *   - readers in other processes never see half a transaction;
 *   - a process using the unix VFS on the file is refused (SQLITE_BUSY)
 *     while an oatomic connection has it open, and works once it is closed;
 *   - two connections of one process coordinate by SQLite's locks;
 *   - WAL mode through the VFS works, and a checkpoint reaches the file;
 *   - a full file system fails the COMMIT (SQLITE_FULL) and leaves the
 *     database as the last commit left it (a 2 MiB tmpfs; root only);
 *   - read-only opens, missing files: SQLite's usual errors.
 *
 * timeout: 300
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "testutil.h"
#include "internal.h"
#include "oatomic-private.h"
#include "oatomic_sqlite.h"
#include "tsqlite.h"

static int exec_rc(sqlite3 *db, const char *sql)
{
	return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

static sqlite3 *open_with(const char *path, const char *vfs, int flags)
{
	sqlite3 *db = NULL;
	int rc = sqlite3_open_v2(path, &db, flags, vfs);
	CHECKF(rc == SQLITE_OK, "open %s (%s): %s", path, vfs ? vfs : "default",
	       db ? sqlite3_errmsg(db) : "?");
	sqlite3_busy_timeout(db, 10000);
	return db;
}

static sqlite3 *open_oa(const char *path)
{
	sqlite3 *db = open_with(path, OATOMIC_SQLITE_VFS,
				SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
	ts_exec(db, "PRAGMA journal_mode=MEMORY");
	return db;
}

static uint64_t flushes(void)
{
	struct oa_stats st;
	oa__stats_get(&st);
	return st.flushes;
}

static uint64_t writes(void)
{
	struct oa_stats st;
	oa__stats_get(&st);
	return st.writes;
}

/* A bulk load reaches the library in big runs (Q7): 4096 rows of a 4 KiB
 * blob inserted in one transaction (a leaf page after its overflow pages,
 * interior pages now and then) cost a few hundred library writes - the
 * journal's and the apply's - not one per few pages (runs of 4-32 KiB
 * before the window); and the load is whole. */
static void test_bulk_runs(void)
{
	const char *path = tu_path("bulk.db");
	ts_unlink_db(path);
	sqlite3 *db = open_oa(path);
	ts_exec(db, "PRAGMA synchronous=FULL");
	ts_exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB)");
	uint64_t w0 = writes();
	ts_exec(db, "BEGIN");
	ts_exec(db, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 "
		    "FROM c WHERE x < 4096) INSERT INTO t SELECT x, "
		    "zeroblob(4096) FROM c");
	ts_exec(db, "COMMIT");
	uint64_t w = writes() - w0;
	CHECKF(w < 1000, "a bulk load of 4096 rows took %llu library writes "
	       "(gathering broken into small runs?)", (unsigned long long)w);
	CHECK_EQ(ts_one_int(db, "SELECT count(*) FROM t"), 4096);
	CHECK_EQ(ts_one_int(db, "SELECT sum(length(b)) FROM t"), 4096 * 4096);
	ts_integrity_ok(db, "after a bulk load");
	CHECK_EQ(sqlite3_close(db), SQLITE_OK);
	printf("bulk load of 4096 rows: %llu library writes\n",
	       (unsigned long long)w);
}

/* One commit and one flush per transaction, whatever `synchronous` says. */
static void test_one_flush(void)
{
	static const char *modes[] = { "OFF", "NORMAL", "FULL", "EXTRA" };
	const char *path = tu_path("flush.db");
	char sql[128];

	ts_unlink_db(path);
	sqlite3 *db = open_oa(path);
	ts_exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)");
	for (int m = 0; m < 4; m++) {
		snprintf(sql, sizeof(sql), "PRAGMA synchronous=%s", modes[m]);
		ts_exec(db, sql);
		uint64_t f0 = flushes();
		for (int i = 0; i < 20; i++) {
			snprintf(sql, sizeof(sql), "INSERT INTO t(v) VALUES"
				 "('%d-%d'); UPDATE t SET v = v || 'x' WHERE "
				 "id = 1;", m, i);
			ts_exec(db, "BEGIN");
			ts_exec(db, sql);
			ts_exec(db, "COMMIT");
		}
		uint64_t n = flushes() - f0;
		/* A checkpoint (two flushes) may fall into the run when the
		 * journal fills; 20 small commits do not fill 3 MiB. */
		CHECKF(n == 20, "synchronous=%s: %llu flushes for 20 "
		       "transactions, want one each", modes[m],
		       (unsigned long long)n);
	}
	CHECK(ts_one_int(db, "SELECT count(*) FROM t") == 80);
	ts_no_sqlite_files(path, 0, path);
	CHECK(sqlite3_close(db) == SQLITE_OK);
	/* Committed with synchronous=OFF too: another connection sees all. */
	db = open_oa(path);
	CHECK(ts_one_int(db, "SELECT count(*) FROM t") == 80);
	CHECK(sqlite3_close(db) == SQLITE_OK);
	tu_note("one flush per transaction with synchronous OFF, NORMAL, FULL, "
		"EXTRA; no -journal/-wal/-shm");
}

/* Q1: a spilled transaction is invisible in the file until COMMIT. */
static void test_spill(void)
{
	const char *path = tu_path("spill.db");
	size_t n0, n1;
	ts_unlink_db(path);
	sqlite3 *db = open_oa(path);
	ts_exec(db, "PRAGMA cache_size=-128");
	ts_exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);"
		 "INSERT INTO t VALUES(1, zeroblob(100))");
	unsigned char *before = tu_read_file(path, &n0);

	for (int round = 0; round < 2; round++) {
		ts_exec(db, "BEGIN");
		ts_exec(db, "WITH RECURSIVE c(x) AS (SELECT 2 UNION ALL SELECT "
			 "x + 1 FROM c WHERE x < 600) INSERT INTO t SELECT x, "
			 "randomblob(1500) FROM c");
		ts_exec(db, "UPDATE t SET v = x'01' WHERE id = 1");
		/* The page cache (128 KiB) is far smaller than 900 KiB: the
		 * pager spilled pages to the database file. */
		unsigned char *mid = tu_read_file(path, &n1);
		CHECKF(n1 == n0 && !memcmp(mid, before, n0),
		       "a spilled transaction reached the file before COMMIT "
		       "(size %zu, was %zu)", n1, n0);
		free(mid);
		CHECK(ts_one_int(db, "SELECT count(*) FROM t") == 600);
		if (round == 0) {
			ts_exec(db, "ROLLBACK");
			unsigned char *after = tu_read_file(path, &n1);
			CHECKF(n1 == n0 && !memcmp(after, before, n0),
			       "ROLLBACK after a spill changed the file");
			free(after);
			CHECK(ts_one_int(db, "SELECT count(*) FROM t") == 1);
			CHECK(ts_one_int(db, "SELECT length(v) FROM t") == 100);
		} else {
			ts_exec(db, "COMMIT");
		}
	}
	CHECK(sqlite3_close(db) == SQLITE_OK);
	db = open_oa(path);
	CHECK(ts_one_int(db, "SELECT count(*) FROM t") == 600);
	CHECK(ts_one_int(db, "SELECT length(v) FROM t WHERE id = 1") == 1);
	ts_integrity_ok(db, path);
	CHECK(sqlite3_close(db) == SQLITE_OK);
	ts_no_sqlite_files(path, 0, path);
	free(before);
	tu_note("a spilled transaction stays out of the file until COMMIT; "
		"ROLLBACK after a spill leaves it as it was");
}

/* Readers in other processes never see half a transaction. */
struct rd {
	const char *path;
	volatile int *done;    /* shared: the writer finished */
};

static int reader(void *arg)
{
	struct rd *r = arg;
	sqlite3 *db = open_with(r->path, OATOMIC_SQLITE_VFS,
				SQLITE_OPEN_READWRITE);
	long seen = 0, last = -1, reads = 0;
	while (!*r->done || reads < 100) {
		reads++;
		ts_exec(db, "BEGIN");
		int64_t sum = ts_one_int(db, "SELECT sum(v) FROM t");
		int64_t n = ts_one_int(db, "SELECT count(*) FROM t");
		int64_t k = ts_one_int(db, "SELECT k FROM meta");
		ts_exec(db, "COMMIT");
		CHECKF(sum == 1000 * 64, "reader: sum %lld: half a transaction",
		       (long long)sum);
		CHECKF(n == 64 + k % 5, "reader: %lld rows at transaction %lld",
		       (long long)n, (long long)k);
		if (k != last)
			seen++;
		last = k;
	}
	sqlite3_close(db);
	printf("reader: %ld reads, %ld distinct transactions seen\n", reads,
	       seen);
	/* Interleaved with the commits, not before or after them all. */
	CHECKF(seen >= 5, "reader: only %ld distinct transactions seen", seen);
	return 0;
}

static void test_readers(void)
{
	const char *path = tu_path("readers.db");
	char sql[256];
	ts_unlink_db(path);
	sqlite3 *db = open_oa(path);
	ts_exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER);"
		 "CREATE TABLE meta(k INTEGER); INSERT INTO meta VALUES(0);"
		 "CREATE TABLE pad(id INTEGER PRIMARY KEY, b BLOB)");
	ts_exec(db, "BEGIN");
	for (int i = 1; i <= 64; i++) {
		snprintf(sql, sizeof(sql), "INSERT INTO t VALUES(%d, 1000)", i);
		ts_exec(db, sql);
	}
	ts_exec(db, "COMMIT");

	volatile int *done = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(done != MAP_FAILED);
	*done = 0;
	struct rd r = { path, done };
	pid_t p1 = tu_fork(reader, &r), p2 = tu_fork(reader, &r);
	uint64_t st = 12345;
	for (int k = 1; k <= 300; k++) {
		int a = 1 + (int)(tu_rand(&st) % 64), b = 1 + (int)(tu_rand(&st) % 64);
		int d = (int)(tu_rand(&st) % 500);
		ts_exec(db, "BEGIN IMMEDIATE");
		/* Move D from row A to row B (the sum stays), with pages of
		 * padding in between so that the transaction is several
		 * pages; rows 65.. come and go with k % 5. */
		snprintf(sql, sizeof(sql), "UPDATE t SET v = v - %d WHERE id = "
			 "%d; INSERT OR REPLACE INTO pad VALUES(%d, "
			 "randomblob(3000)); UPDATE t SET v = v + %d WHERE id = "
			 "%d; DELETE FROM t WHERE id > 64; UPDATE meta SET k = "
			 "%d;", d, a, k % 50, d, b, k);
		ts_exec(db, sql);
		for (int j = 0; j < k % 5; j++) {
			snprintf(sql, sizeof(sql), "INSERT INTO t VALUES(%d, 0)",
				 65 + j);
			ts_exec(db, sql);
		}
		ts_exec(db, "COMMIT");
		usleep(2000);   /* let the readers in */
	}
	*done = 1;
	CHECK_CHILD_OK(tu_wait(p1));
	CHECK_CHILD_OK(tu_wait(p2));
	CHECK(sqlite3_close(db) == SQLITE_OK);
	tu_note("2 reader processes reading during 300 commits: never "
		"half a transaction");
}

/* Q6: the unix VFS is refused while an oatomic connection is open. */
static int plain_user(void *arg)
{
	const char *path = arg;
	sqlite3 *db = NULL;
	CHECK(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, "unix") ==
	      SQLITE_OK);
	int rc = exec_rc(db, "SELECT count(*) FROM t");
	int rc2 = exec_rc(db, "INSERT INTO t VALUES(99, 'plain')");
	sqlite3_close(db);
	return (rc == SQLITE_BUSY ? 1 : rc == SQLITE_OK ? 0 : 3) |
	       (rc2 == SQLITE_BUSY ? 4 : rc2 == SQLITE_OK ? 0 : 12);
}

static void test_refuse_plain(void)
{
	const char *path = tu_path("plain.db");
	ts_unlink_db(path);
	sqlite3 *db = open_oa(path);
	ts_exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);"
		 "INSERT INTO t VALUES(1, 'a')");
	/* Idle, and inside a read transaction. */
	int st = tu_run_child(plain_user, (void *)path);
	CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 5, "unix VFS beside an "
	       "idle oatomic connection: %s (want 5: both refused BUSY)",
	       tu_status_str(st));
	ts_exec(db, "BEGIN");
	CHECK(ts_one_int(db, "SELECT count(*) FROM t") == 1);
	st = tu_run_child(plain_user, (void *)path);
	CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 5, "unix VFS beside an "
	       "oatomic reader: %s", tu_status_str(st));
	ts_exec(db, "COMMIT");
	/* A second oatomic connection is not refused. */
	sqlite3 *db2 = open_oa(path);
	ts_exec(db2, "INSERT INTO t VALUES(2, 'b')");
	CHECK(ts_one_int(db, "SELECT count(*) FROM t") == 2);
	CHECK(sqlite3_close(db2) == SQLITE_OK);
	CHECK(sqlite3_close(db) == SQLITE_OK);
	/* Closed: the unix VFS may use the file. */
	st = tu_run_child(plain_user, (void *)path);
	CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "unix VFS with no "
	       "oatomic connection open: %s", tu_status_str(st));
	tu_note("the unix VFS gets SQLITE_BUSY beside an oatomic connection "
		"(idle or reading), and works once it closed");
}

/* Q6: the read-only connections' fence byte is never a read-write
 * connection's: with 509 read-write connections open (every other byte of
 * the range taken), a read-only connection still opens and reads (it
 * shared the first byte with them by chance, 1 in 510 per connection,
 * and was locked out until that writer closed). */
static void test_fence_readonly(void)
{
	enum { N = 509 };
	const char *path = tu_path("fence.db");
	struct rlimit rl;
	static sqlite3 *w[N];
	ts_unlink_db(path);
	CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	if (rl.rlim_max < 8 * N) {
		tu_note("fence: RLIMIT_NOFILE below %d: not tried", 8 * N);
		return;
	}
	if (rl.rlim_cur < 8 * N) {
		rl.rlim_cur = 8 * N;
		CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
	}
	w[0] = open_oa(path);
	ts_exec(w[0], "CREATE TABLE t(id INTEGER PRIMARY KEY);"
		"INSERT INTO t VALUES(1)");
	for (int i = 1; i < N; i++)
		w[i] = open_with(path, OATOMIC_SQLITE_VFS, SQLITE_OPEN_READWRITE);
	sqlite3 *r = open_with(path, OATOMIC_SQLITE_VFS, SQLITE_OPEN_READONLY);
	sqlite3_busy_timeout(r, 0);
	CHECKF(ts_one_int(r, "SELECT count(*) FROM t") == 1,
	       "a read-only connection beside %d writers", N);
	CHECK(sqlite3_close(r) == SQLITE_OK);
	for (int i = N - 1; i >= 0; i--)
		CHECK(sqlite3_close(w[i]) == SQLITE_OK);
	tu_note("a read-only connection opens and reads beside %d read-write "
		"ones (every other fence byte taken)", N);
}

/* Q6: a child forked while a connection was open (and never exec'd) does
 * not keep the unix VFS out after the parent closed the connection. */
static int sleeper(void *arg)
{
	(void)arg;
	pause();
	return 0;
}

static void test_fork_close(void)
{
	const char *path = tu_path("forkc.db");
	ts_unlink_db(path);
	sqlite3 *db = open_oa(path);
	ts_exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);"
		 "INSERT INTO t VALUES(1, 'a')");
	pid_t kid = tu_fork(sleeper, NULL);
	CHECK(sqlite3_close(db) == SQLITE_OK);
	int st = tu_run_child(plain_user, (void *)path);
	kill(kid, SIGKILL);
	tu_wait(kid);
	CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "unix VFS after the "
	       "connection closed, a forked child still alive: %s (want 0)",
	       tu_status_str(st));
	tu_note("a forked child keeps no lock of a connection its parent "
		"closed");
}

/* Started with the standard descriptors closed (cron, a daemon, `2>&-`):
 * the connection's descriptors are never 0-2, so what the program then
 * writes to its standard output and error does not land in the database
 * or the library's files. */
static int closed_std(void *arg)
{
	const char *path = arg;
	close(0);
	close(1);
	close(2);
	sqlite3 *db = NULL;
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE,
			    OATOMIC_SQLITE_VFS) != SQLITE_OK)
		_exit(3);
	if (exec_rc(db, "PRAGMA journal_mode=MEMORY; "
		    "INSERT INTO t VALUES(2, 'b')") != SQLITE_OK)
		_exit(4);
	for (int fd = 0; fd <= 2; fd++)
		if (write(fd, "NOT A DATABASE: what the program printed", 40) > 0)
			_exit(5);   /* a descriptor 0-2 is open: whose? */
	if (sqlite3_close(db) != SQLITE_OK)
		_exit(6);
	_exit(0);
}

static void test_closed_std(void)
{
	const char *path = tu_path("std.db");
	ts_unlink_db(path);
	sqlite3 *db = open_oa(path);
	ts_exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);"
		 "INSERT INTO t VALUES(1, 'a')");
	CHECK(sqlite3_close(db) == SQLITE_OK);
	int st = tu_run_child(closed_std, (void *)path);
	CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a connection opened "
	       "with 0-2 closed: %s (5: one of them was the connection's)",
	       tu_status_str(st));
	db = open_oa(path);
	CHECK(ts_one_int(db, "SELECT count(*) FROM t") == 2);
	ts_integrity_ok(db, "opened with 0-2 closed");
	CHECK(sqlite3_close(db) == SQLITE_OK);
	tu_note("with 0-2 closed no descriptor of the connection is a "
		"standard one; the database is whole");
}

/* Two connections in one process: SQLite's locks, as between processes. */
static void test_two_connections(void)
{
	const char *path = tu_path("two.db");
	ts_unlink_db(path);
	sqlite3 *a = open_oa(path), *b = open_oa(path);
	ts_exec(a, "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)");
	ts_exec(a, "BEGIN IMMEDIATE; INSERT INTO t VALUES(1, 'a')");
	sqlite3_busy_timeout(b, 0);
	CHECK(exec_rc(b, "BEGIN IMMEDIATE") == SQLITE_BUSY);
	/* b reads the last commit while a holds RESERVED. */
	CHECK(ts_one_int(b, "SELECT count(*) FROM t") == 0);
	ts_exec(a, "COMMIT");
	CHECK(ts_one_int(b, "SELECT count(*) FROM t") == 1);
	ts_exec(b, "BEGIN IMMEDIATE; INSERT INTO t VALUES(2, 'b'); COMMIT");
	CHECK(ts_one_int(a, "SELECT count(*) FROM t") == 2);
	/* Closing one connection (its descriptors) keeps the other's locks
	 * (OFD locks; POSIX ones would all go). */
	ts_exec(a, "BEGIN IMMEDIATE");
	CHECK(sqlite3_close(b) == SQLITE_OK);
	b = open_oa(path);
	sqlite3_busy_timeout(b, 0);
	CHECK(exec_rc(b, "BEGIN IMMEDIATE") == SQLITE_BUSY);
	ts_exec(a, "ROLLBACK");
	CHECK(sqlite3_close(a) == SQLITE_OK);
	CHECK(sqlite3_close(b) == SQLITE_OK);
	tu_note("two connections of one process: RESERVED is exclusive, reads "
		"see the last commit, a close keeps the other's locks");
}

/* WAL mode: the WAL is the default VFS's; a checkpoint reaches the file. */
static void test_wal(void)
{
	const char *path = tu_path("wal.db");
	ts_unlink_db(path);
	sqlite3 *db = open_with(path, OATOMIC_SQLITE_VFS,
				SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
	sqlite3_stmt *s;
	CHECK(sqlite3_prepare_v2(db, "PRAGMA journal_mode=WAL", -1, &s, NULL) ==
	      SQLITE_OK);
	CHECK(sqlite3_step(s) == SQLITE_ROW);
	CHECKF(!strcmp((const char *)sqlite3_column_text(s, 0), "wal"),
	       "journal_mode=WAL gave %s", sqlite3_column_text(s, 0));
	sqlite3_finalize(s);
	ts_exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)");
	sqlite3 *r = open_with(path, OATOMIC_SQLITE_VFS, SQLITE_OPEN_READWRITE);
	for (int i = 0; i < 50; i++)
		ts_exec(db, "INSERT INTO t(v) VALUES(randomblob(3000))");
	CHECK(ts_one_int(r, "SELECT count(*) FROM t") == 50);
	ts_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
	CHECK(ts_one_int(r, "SELECT count(*) FROM t") == 50);
	CHECK(sqlite3_close(r) == SQLITE_OK);
	CHECK(sqlite3_close(db) == SQLITE_OK);
	/* Everything is in the database file itself now: read it with the
	 * unix VFS, read-only, WAL gone. */
	char wal[PATH_MAX];
	snprintf(wal, sizeof(wal), "%s-wal", path);
	CHECK(access(wal, F_OK) != 0);
	db = open_with(path, "unix", SQLITE_OPEN_READONLY);
	CHECK(ts_one_int(db, "SELECT count(*) FROM t") == 50);
	CHECK(sqlite3_close(db) == SQLITE_OK);
	tu_note("WAL mode through the VFS: readers, checkpoint into the file");
}

/* A full file system: COMMIT fails, the database keeps the last commit. */
static void test_full(void)
{
	if (!tu_is_root()) {
		tu_note("SKIP part: the full file system needs root (tmpfs)");
		return;
	}
	const char *mnt = tu_path("tiny");
	CHECK(mkdir(mnt, 0755) == 0 || errno == EEXIST);
	if (mount("oa-tiny", mnt, "tmpfs", 0, "size=2m") != 0) {
		tu_note("SKIP part: cannot mount a tmpfs (%s)", strerror(errno));
		return;
	}
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/full.db", mnt);
	sqlite3 *db = open_oa(path);
	ts_exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)");
	int64_t committed = 0;
	int rc = SQLITE_OK;
	for (int i = 0; i < 200 && rc == SQLITE_OK; i++) {
		ts_exec(db, "BEGIN");
		rc = exec_rc(db, "INSERT INTO t(v) VALUES(randomblob(60000))");
		if (rc == SQLITE_OK)
			rc = exec_rc(db, "COMMIT");
		if (rc == SQLITE_OK)
			committed++;
		else
			exec_rc(db, "ROLLBACK");
	}
	CHECKF(rc == SQLITE_FULL, "filling a 2 MiB tmpfs ended with %d (%s), "
	       "want SQLITE_FULL", rc, sqlite3_errstr(rc));
	CHECK(committed > 0);
	CHECK(ts_one_int(db, "SELECT count(*) FROM t") == committed);
	CHECK(sqlite3_close(db) == SQLITE_OK);
	db = open_oa(path);
	CHECK(ts_one_int(db, "SELECT count(*) FROM t") == committed);
	ts_integrity_ok(db, path);
	/* Room again: the next transactions commit.  One row at a time:
	 * Debian's SQLite has secure_delete on, so a DELETE overwrites every
	 * page it frees, and all the rows at once (1.4 MiB of zeros) need as
	 * much journal - in any journal mode - as the full disk has no more
	 * (it passed while the journal's room ahead had taken a part of the
	 * disk before the database could, and gave it back at the close). */
	for (int64_t i = committed; i > 2; i--)
		ts_exec(db, "DELETE FROM t WHERE id = (SELECT max(id) FROM t)");
	CHECK(ts_one_int(db, "SELECT count(*) FROM t") == 2);
	ts_exec(db, "INSERT INTO t(v) VALUES(x'00')");
	CHECK(sqlite3_close(db) == SQLITE_OK);
	/* Four processes inserting at once on the same tmpfs, a row per
	 * transaction: each needs a journal of its own (extra journals made
	 * small, room ahead at most a quarter of the free space; before
	 * 2026-12-06 all but 6 of 600 inserts failed with SQLITE_FULL).  The
	 * rows take 40 % of the disk: the journals of writers open at once
	 * keep the room they took while the disk was emptier (with 60 %
	 * taken by the rows, one run in 12 to 20 found the disk full). */
	char cpath[PATH_MAX];
	snprintf(cpath, sizeof(cpath), "%s/c.db", mnt);
	ts_unlink_db(path);   /* the whole 2 MiB again */
	db = open_oa(cpath);
	ts_exec(db, "CREATE TABLE c(p INTEGER, v BLOB)");
	CHECK(sqlite3_close(db) == SQLITE_OK);
	pid_t kid[4];
	for (int p = 0; p < 4; p++) {
		CHECK((kid[p] = fork()) >= 0);
		if (kid[p] == 0) {
			sqlite3 *c = open_oa(cpath);
			char sql[128];
			snprintf(sql, sizeof(sql), "INSERT INTO c VALUES(%d, "
				 "randomblob(2000))", p);
			for (int i = 0; i < 100; i++)
				if (exec_rc(c, sql) != SQLITE_OK) {
					fprintf(stderr, "process %d, insert %d: "
						"%s\n", p, i, sqlite3_errmsg(c));
					_exit(1);
				}
			_exit(sqlite3_close(c) != SQLITE_OK);
		}
	}
	for (int p = 0; p < 4; p++) {
		int st;
		CHECK(waitpid(kid[p], &st, 0) == kid[p]);
		CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "2 MiB tmpfs: "
		       "inserting process %d of 4 failed", p);
	}
	db = open_oa(cpath);
	CHECK(ts_one_int(db, "SELECT count(*) FROM c") == 400);
	ts_integrity_ok(db, cpath);
	CHECK(sqlite3_close(db) == SQLITE_OK);
	CHECK(umount(mnt) == 0);
	tu_note("2 MiB tmpfs: %lld transactions, then SQLITE_FULL; the database "
		"kept them, integrity ok; 4 processes inserting 100 rows each "
		"at once: all in", (long long)committed);
}

static void test_errors(void)
{
	const char *path = tu_path("ro.db");
	sqlite3 *db = NULL;
	ts_unlink_db(path);
	/* Missing, without CREATE. */
	CHECK(sqlite3_open_v2(tu_path("missing.db"), &db, SQLITE_OPEN_READWRITE,
			      OATOMIC_SQLITE_VFS) == SQLITE_CANTOPEN);
	sqlite3_close(db);
	db = open_oa(path);
	ts_exec(db, "CREATE TABLE t(a); INSERT INTO t VALUES(1)");
	CHECK(sqlite3_close(db) == SQLITE_OK);
	db = open_with(path, OATOMIC_SQLITE_VFS, SQLITE_OPEN_READONLY);
	CHECK(ts_one_int(db, "SELECT a FROM t") == 1);
	CHECK(exec_rc(db, "INSERT INTO t VALUES(2)") == SQLITE_READONLY);
	CHECK(sqlite3_close(db) == SQLITE_OK);
	/* The VFS names itself. */
	db = open_oa(path);
	char *name = NULL;
	CHECK(sqlite3_file_control(db, "main", SQLITE_FCNTL_VFSNAME, &name) ==
	      SQLITE_OK);
	CHECK(name && !strcmp(name, "oatomic"));
	sqlite3_free(name);
	/* Only what holds: SQLite applies SAFE_APPEND and SEQUENTIAL to its
	 * journal (the default VFS's file) too, where they do not. */
	sqlite3_file *sf = NULL;
	CHECK(sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER,
				   &sf) == SQLITE_OK && sf);
	int dc = sf->pMethods->xDeviceCharacteristics(sf);
	CHECKF((dc & SQLITE_IOCAP_ATOMIC) && (dc & SQLITE_IOCAP_POWERSAFE_OVERWRITE) &&
	       !(dc & (SQLITE_IOCAP_SAFE_APPEND | SQLITE_IOCAP_SEQUENTIAL)),
	       "device characteristics %#x", dc);
	CHECK(sqlite3_close(db) == SQLITE_OK);
	tu_note("missing file CANTOPEN, read-only open READONLY, VFSNAME, device "
		"characteristics");
}

int main(void)
{
	CHECK(oatomic_sqlite_register(0) == SQLITE_OK);
	CHECK(oatomic_sqlite_register(0) == SQLITE_OK);   /* again: harmless */
	CHECK(sqlite3_vfs_find(OATOMIC_SQLITE_VFS) != NULL);
	tu_pin_journal();
	test_one_flush();
	test_bulk_runs();
	test_spill();
	test_readers();
	test_refuse_plain();
	test_fence_readonly();
	test_fork_close();
	test_closed_std();
	test_two_connections();
	test_wal();
	test_errors();
	test_full();
	return 0;
}
