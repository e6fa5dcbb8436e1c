/*
 * tsqlite.h - helpers of the SQLite tests (sqlite_vfs, sqlite_torture),
 * header-only: only they link SQLite.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef OA_TSQLITE_H
#define OA_TSQLITE_H

#include <limits.h>
#include <sqlite3.h>
#include <unistd.h>

#include "testutil.h"

/* SQL that must succeed. */
static inline void ts_exec(sqlite3 *db, const char *sql)
{
	char *err = NULL;
	int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
	CHECKF(rc == SQLITE_OK, "%s: %s (%d)", sql, err ? err : "?", rc);
	sqlite3_free(err);
}

/* The integer the one-row query SQL gives. */
static inline int64_t ts_one_int(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *s = NULL;
	CHECKF(sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK, "%s: %s",
	       sql, sqlite3_errmsg(db));
	int rc = sqlite3_step(s);
	CHECKF(rc == SQLITE_ROW, "%s: %s (%d)", sql, sqlite3_errmsg(db), rc);
	int64_t v = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return v;
}

/* PRAGMA integrity_check is "ok"; WHAT names the case. */
static inline void ts_integrity_ok(sqlite3 *db, const char *what)
{
	sqlite3_stmt *s = NULL;
	CHECK(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &s, NULL) ==
	      SQLITE_OK);
	CHECKF(sqlite3_step(s) == SQLITE_ROW, "%s: integrity_check: %s", what,
	       sqlite3_errmsg(db));
	const char *ic = (const char *)sqlite3_column_text(s, 0);
	CHECKF(ic && !strcmp(ic, "ok"), "%s: VIOLATION: integrity_check says "
	       "%s", what, ic ? ic : "(null)");
	sqlite3_finalize(s);
}

static const char *const ts_sqlite_sfx[] = { "-journal", "-wal", "-shm" };

/* Remove PATH, SQLite's files beside it and the library's. */
static inline void ts_unlink_db(const char *path)
{
	char p[PATH_MAX];
	unlink(path);
	for (int i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s%s", path, ts_sqlite_sfx[i]);
		unlink(p);
	}
	tu_remove_journals(path);
}

/* None of SQLite's files beside PATH (-journal too unless NOT_JOURNAL). */
static inline void ts_no_sqlite_files(const char *path, int not_journal,
				      const char *what)
{
	char p[PATH_MAX];
	for (int i = not_journal ? 1 : 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s%s", path, ts_sqlite_sfx[i]);
		CHECKF(access(p, F_OK) != 0, "%s: %s exists", what, p);
	}
}

#endif
