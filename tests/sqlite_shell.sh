#!/bin/bash
# sqlite_shell.sh - the loadable extension liboatomic_sqlite.so in Debian's
# own sqlite3 shell, as a user types it:
#
#  - `.load` + `.open file:DB?vfs=oatomic` + `PRAGMA journal_mode=MEMORY`:
#    tables, transactions, a ROLLBACK, integrity_check ok, no -journal,
#    -wal or -shm file, `oatomic check` finds nothing to recover, the
#    control file left at its clean length;
#  - `.vfsname` says oatomic; the second entry point
#    (sqlite3_oatomicsqlite_default_init) makes it the default VFS: a plain
#    `.open DB` then goes through it;
#  - while a shell holds the database open through the VFS, a plain
#    sqlite3 (unix VFS) is refused: "database is locked"; after it quits
#    the plain shell reads the rows;
#  - a shell killed (SIGKILL) inside a transaction that spilled pages:
#    the database shows the transaction before, integrity ok.
#
# timeout: 120
#
# SPDX-License-Identifier: MIT
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${BUILD:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
EXT=$build/liboatomic_sqlite
OA=$build/oatomic
W=${OA_TEST_DIR:-$(mktemp -d)}

command -v sqlite3 >/dev/null || { echo "SKIP: no sqlite3 shell"; exit 77; }
[ -f "$EXT.so" ] || { echo "sqlite_shell: $EXT.so not built"; exit 1; }
cd "$W" || exit 1
fails=0
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
osql() { # osql DB LINE...: through the VFS, the three lines of the README
	local db=$1
	shift
	# (no database on the command line: the shell would open it before
	# the -cmd options run, through the default VFS)
	printf '%s\n' "$@" | sqlite3 -batch -cmd ".load $EXT" \
		-cmd ".open file:$db?vfs=oatomic" \
		-cmd "PRAGMA journal_mode=MEMORY" 2>&1
}

# 1. The three lines.
out=$(osql app.db "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);" \
	"BEGIN; INSERT INTO t VALUES(1,'one'),(2,'two'); COMMIT;" \
	"BEGIN; INSERT INTO t VALUES(3,'three'); ROLLBACK;" \
	"SELECT group_concat(v) FROM t; PRAGMA integrity_check;")
want=$(printf 'memory\none,two\nok')
[ "$out" = "$want" ] || fail "the three lines: got [$out], want [$want]"
for s in -journal -wal -shm; do
	[ ! -e "app.db$s" ] || fail "app.db$s exists"
done
if [ -x "$OA" ]; then
	out=$("$OA" check app.db 2>&1) || fail "oatomic check app.db: $out"
fi
sz=$(stat -c %s .app.db.oa 2>/dev/null || echo none)
[ "$sz" = 512 ] || fail "control file after the last close: $sz bytes (want 512, clean)"

# 2. .vfsname, and the default-VFS entry point.
out=$(osql app.db ".vfsname")
[ "$(printf '%s' "$out" | tail -n 1)" = oatomic ] || fail ".vfsname: [$out]"
out=$(printf '.vfsname\nSELECT count(*) FROM t;\n' | sqlite3 -batch \
	-cmd ".load $EXT sqlite3_oatomicsqlite_default_init" -cmd ".open app.db" 2>&1)
[ "$out" = "$(printf 'oatomic\n2')" ] || fail "default entry point: [$out]"

# 3. A plain sqlite3 beside an open oatomic shell is refused.
mkfifo ctl
osql app.db "SELECT count(*) FROM t;" ".read ctl" >holder.out &
hold=$!
exec 7>ctl                      # the holder now waits on the fifo
sleep 0.3
out=$(sqlite3 -batch app.db "SELECT count(*) FROM t;" 2>&1)
case $out in
*"database is locked"*) ;;
*) fail "unix VFS beside an oatomic shell: [$out], want database is locked" ;;
esac
out=$(sqlite3 -batch app.db "INSERT INTO t VALUES(9,'plain');" 2>&1)
case $out in
*"database is locked"*) ;;
*) fail "unix VFS write beside an oatomic shell: [$out]" ;;
esac
exec 7>&-                       # holder reads EOF and quits
wait $hold
out=$(sqlite3 -batch app.db "SELECT count(*) FROM t;" 2>&1)
[ "$out" = 2 ] || fail "unix VFS after the oatomic shell quit: [$out]"
rm -f ctl

# 4. A shell killed inside a transaction that spilled.
osql big.db "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);" \
	"INSERT INTO t VALUES(1, zeroblob(10));" >/dev/null
mkfifo ctl
osql big.db "PRAGMA cache_size=-64;" "BEGIN;" \
	"WITH RECURSIVE c(x) AS (SELECT 2 UNION ALL SELECT x+1 FROM c WHERE x < 500) INSERT INTO t SELECT x, randomblob(2000) FROM c;" \
	"SELECT 'spilled';" ".read ctl" >killed.out &
kpid=$!
exec 7>ctl
for i in $(seq 50); do grep -q spilled killed.out 2>/dev/null && break; sleep 0.1; done
grep -q spilled killed.out || fail "the big transaction did not run: $(cat killed.out)"
# the sqlite3 process is osql's child: kill the whole job
pkill -9 -P $kpid sqlite3 2>/dev/null; kill -9 $kpid 2>/dev/null
wait $kpid 2>/dev/null
exec 7>&-
rm -f ctl
out=$(osql big.db "SELECT count(*) FROM t; PRAGMA integrity_check;")
[ "$out" = "$(printf 'memory\n1\nok')" ] || fail "after a kill inside a spilled transaction: [$out]"

if [ $fails -gt 0 ]; then
	echo "sqlite_shell: $fails failed"
	exit 1
fi
echo "sqlite_shell: the extension in sqlite3: three lines, default VFS, plain shell refused, kill in a spilled transaction"
exit 0
