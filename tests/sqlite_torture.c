/*
 * sqlite_torture.c - SQLite through the oatomic VFS, killed at random:
 * after every crash, SQLite's own eyes (PRAGMA integrity_check) and the
 * contents must show the last acknowledged transaction or the next one.
 *
 * The writer runs random multi-statement transactions on a database opened
 * with the "oatomic" VFS and journal_mode=MEMORY: inserts and replaces of
 * rows with blobs, updates of an indexed column, deletes of ranges,
 * savepoints rolled back inside committed transactions, ROLLBACKs (some
 * after the transaction spilled pages to the file), and every 12th
 * transaction one several times larger than the page cache, so that it
 * spills.  Each committed transaction sets meta.k to its number and is
 * acknowledged after COMMIT returns.  Transaction K's statements depend only
 * on (seed, K), so the state after any K is rebuilt in a :memory: database
 * by replaying the committed ones, and compared row by row (a hash).
 *
 * Without arguments (the test): ROUNDS rounds (default 500; 150 under the
 * sanitizers), each on a fresh database: the writer is SIGKILLed after a
 * random 0-120 ms, or at a kill point of the library's commit protocol
 * (record written, flushed, half applied, applied) in a random
 * transaction; `synchronous` is FULL, NORMAL or OFF at random (the commit
 * is the same); a quarter of the rounds use journal_mode=DELETE (SQLite's
 * own journal, the default VFS's file, beside ours: a hot journal it left
 * must roll back only what our commit did not make durable).  Then: the
 * database opens through the VFS (recovery), integrity_check is "ok",
 * meta.k is the last ack or the next committed transaction, the rows are
 * that state's, and no -journal (but with DELETE: SQLite may leave one it
 * judged cold), -wal or -shm file exists.
 *
 * With arguments (the power cuts' helper, tests/sqlite_powercut.sh):
 *   sqlite_torture init DB             create the database (state 0)
 *   sqlite_torture writer DB ACK SEED  commit forever; after each COMMIT
 *                                      returns, write its K to ACK (a file
 *                                      elsewhere) and fdatasync it
 *   sqlite_torture check DB ACK SEED   the checks above, the ack from ACK
 *
 * Environment: SQLITE_TORTURE_ROUNDS, OA_TEST_SEED.
 *
 * timeout: 600
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>

#include "testutil.h"
#include "internal.h"
#include "oatomic-private.h"
#include "oatomic_sqlite.h"
#include "tsqlite.h"

#define NIDS      2000
#define BIG_EVERY 12

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Does transaction K of SEED end in ROLLBACK?  1 in 8. */
static int rolls_back(uint64_t seed, uint64_t k)
{
	return mix(seed ^ (k * 0x51ed27) ^ 0x7777) % 8 == 0;
}

static void row_blob(unsigned char *b, size_t n, uint64_t st)
{
	for (size_t i = 0; i < n; i += 8) {
		uint64_t v = tu_rand(&st);
		memcpy(b + i, &v, n - i < 8 ? n - i : 8);
	}
}

static sqlite3_stmt *prep(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *s = NULL;
	int rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
	CHECKF(rc == SQLITE_OK, "prepare %s: %s", sql, sqlite3_errmsg(db));
	return s;
}

static void step_done(sqlite3 *db, sqlite3_stmt *s)
{
	int rc = sqlite3_step(s);
	CHECKF(rc == SQLITE_DONE, "step: %s (%d)", sqlite3_errmsg(db), rc);
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
}

static void insert_row(sqlite3 *db, uint64_t *st)
{
	static unsigned char b[4096];
	sqlite3_stmt *s = prep(db, "INSERT OR REPLACE INTO t VALUES(?,?,?)");
	size_t n = 16 + tu_rand(st) % 2000;
	row_blob(b, n, tu_rand(st) | 1);
	sqlite3_bind_int64(s, 1, (sqlite3_int64)(1 + tu_rand(st) % NIDS));
	sqlite3_bind_int64(s, 2, (sqlite3_int64)(tu_rand(st) % 100));
	sqlite3_bind_blob(s, 3, b, (int)n, SQLITE_STATIC);
	step_done(db, s);
	sqlite3_finalize(s);
}

/* The statements of transaction K (no BEGIN, no COMMIT). */
static void txn_body(sqlite3 *db, uint64_t seed, uint64_t k)
{
	uint64_t st = mix(seed * 1000003 + k) | 1;
	int nst = 1 + (int)(tu_rand(&st) % 10);
	char sql[256];

	if (k % BIG_EVERY == 0) {
		/* Bigger than the page cache (cache_size below): spills. */
		for (int i = 0; i < 400; i++)
			insert_row(db, &st);
	}
	for (int i = 0; i < nst; i++) {
		unsigned what = (unsigned)(tu_rand(&st) % 10);
		uint64_t a = 1 + tu_rand(&st) % NIDS, w = tu_rand(&st) % 40;
		if (what < 5) {
			insert_row(db, &st);
		} else if (what < 7) {
			snprintf(sql, sizeof(sql), "UPDATE t SET g = g + %d "
				 "WHERE id BETWEEN %llu AND %llu",
				 (int)(tu_rand(&st) % 7) + 1,
				 (unsigned long long)a,
				 (unsigned long long)(a + w * 5));
			ts_exec(db, sql);
		} else if (what < 9) {
			snprintf(sql, sizeof(sql), "DELETE FROM t WHERE id "
				 "BETWEEN %llu AND %llu", (unsigned long long)a,
				 (unsigned long long)(a + w));
			ts_exec(db, sql);
		} else {
			/* A savepoint rolled back: its changes must vanish. */
			ts_exec(db, "SAVEPOINT s");
			insert_row(db, &st);
			snprintf(sql, sizeof(sql), "DELETE FROM t WHERE id < %llu",
				 (unsigned long long)a);
			ts_exec(db, sql);
			ts_exec(db, "ROLLBACK TO s");
			ts_exec(db, "RELEASE s");
		}
	}
}

static void schema(sqlite3 *db)
{
	ts_exec(db, "CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, "
		 "g INTEGER, v BLOB);"
		 "CREATE INDEX IF NOT EXISTS t_g ON t(g);"
		 "CREATE TABLE IF NOT EXISTS meta(one INTEGER PRIMARY KEY, "
		 "k INTEGER);"
		 "INSERT OR IGNORE INTO meta VALUES(1, 0);");
}

static sqlite3 *open_vfs_mode(const char *path, int sync_mode,
			      const char *jmode)
{
	sqlite3 *db = NULL;
	int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE |
				 SQLITE_OPEN_CREATE, OATOMIC_SQLITE_VFS);
	CHECKF(rc == SQLITE_OK, "open %s through the oatomic VFS: %s", path,
	       db ? sqlite3_errmsg(db) : "?");
	ts_exec(db, jmode);
	ts_exec(db, "PRAGMA cache_size=-256");   /* 256 KiB: big ones spill */
	ts_exec(db, sync_mode == 0 ? "PRAGMA synchronous=OFF" :
		 sync_mode == 1 ? "PRAGMA synchronous=NORMAL" :
				  "PRAGMA synchronous=FULL");
	return db;
}

static sqlite3 *open_vfs(const char *path, int sync_mode)
{
	return open_vfs_mode(path, sync_mode, "PRAGMA journal_mode=MEMORY");
}

/* One transaction K; 1 if it committed. */
static int run_txn(sqlite3 *db, uint64_t seed, uint64_t k)
{
	char sql[64];
	ts_exec(db, "BEGIN");
	txn_body(db, seed, k);
	if (rolls_back(seed, k)) {
		ts_exec(db, "ROLLBACK");
		return 0;
	}
	snprintf(sql, sizeof(sql), "UPDATE meta SET k = %llu",
		 (unsigned long long)k);
	ts_exec(db, sql);
	ts_exec(db, "COMMIT");
	return 1;
}

/* Row hash of DB's table t. */
static uint64_t dump_hash(sqlite3 *db, long *rows)
{
	sqlite3_stmt *s = prep(db, "SELECT id, g, v FROM t ORDER BY id");
	uint64_t h = TU_HASH_INIT;
	int rc;
	*rows = 0;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		int64_t id = sqlite3_column_int64(s, 0);
		int64_t g = sqlite3_column_int64(s, 1);
		const void *v = sqlite3_column_blob(s, 2);
		int n = sqlite3_column_bytes(s, 2);
		h = tu_hash(h, &id, sizeof(id));
		h = tu_hash(h, &g, sizeof(g));
		h = tu_hash(h, v, (size_t)n);
		(*rows)++;
	}
	CHECKF(rc == SQLITE_DONE, "select: %s", sqlite3_errmsg(db));
	sqlite3_finalize(s);
	return h;
}

/* The state after the committed transactions up to K, as a hash. */
static uint64_t model_hash(uint64_t seed, uint64_t k, long *rows)
{
	sqlite3 *m = NULL;
	CHECK(sqlite3_open_v2(":memory:", &m, SQLITE_OPEN_READWRITE, NULL) ==
	      SQLITE_OK);
	schema(m);
	for (uint64_t j = 1; j <= k; j++)
		if (!rolls_back(seed, j)) {
			ts_exec(m, "BEGIN");
			txn_body(m, seed, j);
			ts_exec(m, "COMMIT");
		}
	uint64_t h = dump_hash(m, rows);
	sqlite3_close(m);
	return h;
}

static void init_db(const char *path)
{
	ts_unlink_db(path);
	sqlite3 *db = open_vfs(path, 2);
	schema(db);
	CHECK(sqlite3_close(db) == SQLITE_OK);
}

/* The checks after a crash; ACK the last acknowledged K.  Returns the K
 * found.  WHAT names the round for messages. */
static uint64_t check_db(const char *path, uint64_t seed, uint64_t ack,
			 const char *what, int own_journal)
{
	sqlite3 *db = open_vfs(path, 2);
	ts_integrity_ok(db, what);

	uint64_t k = (uint64_t)ts_one_int(db, "SELECT k FROM meta");
	uint64_t next = ack + 1;
	while (rolls_back(seed, next))
		next++;
	CHECKF(k == ack || k == next, "%s: VIOLATION: meta.k is %llu, the "
	       "last acknowledged transaction is %llu (the next %llu)", what,
	       (unsigned long long)k, (unsigned long long)ack,
	       (unsigned long long)next);
	long rows, mrows;
	uint64_t h = dump_hash(db, &rows), mh = model_hash(seed, k, &mrows);
	CHECKF(h == mh && rows == mrows, "%s: VIOLATION: the rows (%ld) are "
	       "not those of transaction %llu (%ld rows)", what, rows,
	       (unsigned long long)k, mrows);
	CHECK(sqlite3_close(db) == SQLITE_OK);
	/* (journal_mode=DELETE: a journal SQLite judged cold may stay) */
	ts_no_sqlite_files(path, own_journal, what);
	return k;
}

/* ---- the kill torture ---- */

struct wplan {
	const char *path;
	uint64_t seed;
	int sync_mode;
	int delete_mode;     /* journal_mode=DELETE: SQLite's own journal too */
	int kp;              /* kill point, 0: killed by the parent */
	uint64_t kp_txn;     /* ... armed before this transaction's COMMIT */
	volatile uint64_t *ack;
};

static int writer(void *arg)
{
	struct wplan *w = arg;
	sqlite3 *db = open_vfs_mode(w->path, w->sync_mode, w->delete_mode ?
				    "PRAGMA journal_mode=DELETE" :
				    "PRAGMA journal_mode=MEMORY");
	for (uint64_t k = 1;; k++) {
		char sql[64];
		if (w->kp && k == w->kp_txn && !rolls_back(w->seed, k)) {
			ts_exec(db, "BEGIN");
			txn_body(db, w->seed, k);
			snprintf(sql, sizeof(sql), "UPDATE meta SET k = %llu",
				 (unsigned long long)k);
			ts_exec(db, sql);
			oa__set_killpoint(w->kp);
			sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
			return 5;   /* the kill point did not fire */
		}
		if (run_txn(db, w->seed, k)) {
			*w->ack = k;
			__atomic_thread_fence(__ATOMIC_SEQ_CST);
		}
	}
}

static int torture(void)
{
	long rounds = tu_is_root() ? 500 : 200;
	const char *e = getenv("SQLITE_TORTURE_ROUNDS");
	uint64_t seed = tu_seed();
	long kp_rounds = 0, found_next = 0, delete_rounds = 0;
#if defined(__SANITIZE_ADDRESS__)
	rounds = 150;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
	rounds = 150;
#endif
#endif
	if (e)
		rounds = atol(e);
	const char *path = tu_path("db");
	volatile uint64_t *ack = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(ack != MAP_FAILED);
	tu_pin_journal();

	for (long r = 0; r < rounds; r++) {
		uint64_t st = mix(seed * 7919 + (uint64_t)r) | 1;
		struct wplan w = { .path = path, .seed = tu_rand(&st),
				   .sync_mode = (int)(tu_rand(&st) % 3),
				   .delete_mode = tu_rand(&st) % 4 == 0,
				   .ack = ack };
		char what[96];
		int status;
		pid_t pid;

		init_db(path);
		*ack = 0;
		delete_rounds += w.delete_mode;
		if (tu_rand(&st) % 2) {
			static const int kps[] = { OA_KP_RECORD_WRITTEN,
						   OA_KP_FLUSHED,
						   OA_KP_HALF_APPLIED,
						   OA_KP_APPLIED };
			w.kp = kps[tu_rand(&st) % 4];
			w.kp_txn = 1 + tu_rand(&st) % 30;
			while (rolls_back(w.seed, w.kp_txn))
				w.kp_txn++;
			kp_rounds++;
			pid = tu_fork(writer, &w);
		} else {
			pid = tu_fork(writer, &w);
			struct timespec ts = { 0, (long)(tu_rand(&st) % 120) *
						   1000000 };
			nanosleep(&ts, NULL);
			kill(pid, SIGKILL);
		}
		CHECK(waitpid(pid, &status, 0) == pid);
		snprintf(what, sizeof(what), "round %ld (OA_TEST_SEED=%llu)",
			 r, (unsigned long long)seed);
		CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
		       "%s: writer %s", what, tu_status_str(status));
		uint64_t k = check_db(path, w.seed, *ack, what, w.delete_mode);
		found_next += k != *ack;
	}
	printf("sqlite torture: %ld kills (%ld at kill points of the commit, "
	       "%ld with journal_mode=DELETE), integrity ok and the "
	       "acknowledged state or the next in all; the next in %ld\n",
	       rounds, kp_rounds, delete_rounds, found_next);
	return 0;
}

/* ---- the power cuts' helper ---- */

static uint64_t read_ack(const char *ackpath)
{
	uint64_t v = 0;
	int fd = open(ackpath, O_RDONLY);
	if (fd < 0)
		return 0;
	if (pread(fd, &v, sizeof(v), 0) != (ssize_t)sizeof(v))
		v = 0;
	close(fd);
	return v;
}

static int cut_writer(const char *path, const char *ackpath, uint64_t seed)
{
	int afd = open(ackpath, O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(afd >= 0);
	sqlite3 *db = open_vfs(path, (int)(seed % 3));
	for (uint64_t k = 1;; k++)
		if (run_txn(db, seed, k)) {
			CHECK(pwrite(afd, &k, sizeof(k), 0) == (ssize_t)sizeof(k));
			CHECK(fdatasync(afd) == 0);
		}
}

int main(int argc, char **argv)
{
	CHECK(oatomic_sqlite_register(0) == SQLITE_OK);
	if (argc == 1)
		return torture();
	if (argc == 3 && !strcmp(argv[1], "init")) {
		init_db(argv[2]);
		return 0;
	}
	if (argc == 5 && !strcmp(argv[1], "writer"))
		return cut_writer(argv[2], argv[3], strtoull(argv[4], NULL, 0));
	if (argc == 5 && !strcmp(argv[1], "check")) {
		uint64_t seed = strtoull(argv[4], NULL, 0);
		uint64_t ack = read_ack(argv[3]);
		uint64_t k = check_db(argv[2], seed, ack, argv[2], 0);
		printf("ack %llu found %llu\n", (unsigned long long)ack,
		       (unsigned long long)k);
		return 0;
	}
	fprintf(stderr, "usage: sqlite_torture [init DB | writer DB ACK SEED "
		"| check DB ACK SEED]\n");
	return 2;
}
