/*
 * oatomic_sqlite.h - the "oatomic" SQLite VFS (liboatomic_sqlite(3)).
 *
 * With PRAGMA journal_mode=MEMORY, every SQLite transaction on a database
 * opened through this VFS becomes one oatomic commit: the database file
 * shows the old transaction or the new one after any crash, and no -journal
 * or -wal file is written.
 *
 * From the sqlite3 shell or any program that loads extensions:
 *     .load liboatomic_sqlite
 *     .open file:app.db?vfs=oatomic
 *     PRAGMA journal_mode=MEMORY;
 *
 * Programs that link the extension instead (liboatomic_sqlite.a, with
 * -loatomic -lsqlite3) call oatomic_sqlite_register() once, before opening
 * databases.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef OATOMIC_SQLITE_H
#define OATOMIC_SQLITE_H

#ifdef __cplusplus
extern "C" {
#endif

/* The VFS's name, for sqlite3_open_v2() and URIs (?vfs=oatomic). */
#define OATOMIC_SQLITE_VFS "oatomic"

/* Register the "oatomic" VFS over SQLite's default one; MAKE_DEFAULT
 * non-zero also makes it the default VFS.  Calling it again is harmless (a
 * later call may make it the default).  Returns SQLITE_OK, or
 * SQLITE_ERROR when SQLite has no default VFS, SQLITE_NOMEM. */
int oatomic_sqlite_register(int make_default);

#ifdef __cplusplus
}
#endif
#endif
