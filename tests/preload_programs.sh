#!/bin/bash
# preload_programs.sh - `oatomic run` with programs nobody here wrote:
# unmodified Debian binaries (sh, bash, dd, cp, sed, tar, python3,
# sqlite3), each checked for the right result and for the inode kept
# (owner, mode, extended attributes, hard links), and for pending changes
# that nobody else sees before the commit:
#
#  - `sh -c 'printf new > f'` replaces f and keeps its inode, link, mode,
#    xattr; a reader started inside the run while the file is open sees the
#    old contents; --on-close discard leaves it as it was;
#  - bash `{ echo; /bin/echo; (echo); echo; } > f`: writes from the shell,
#    a forked subshell and an exec'd child through one shared descriptor,
#    in order, one commit at the last close;
#  - `exec 3>f` in dash (which leaves by _exit): committed at exit; a
#    child that exits while its parent holds the descriptor commits
#    nothing; `env -i` does not take the preload away from what it runs;
#  - dd conv=notrunc,fsync; cp over an existing file (its reflink attempt
#    falls back); cp -a keeps mode, xattrs and times (set after the
#    commit); sed writing through stdio (standard output and `w FILE`);
#    tar -x --overwrite over existing files;
#  - python3: seek/write/truncate/fstat/stat through the pending size, a
#    reader process before and after os.fsync, writes handed over at a
#    fork (partial blocks, a truncation, both processes writing), a
#    subprocess (vfork, close_fds) writing through the same description, a
#    SIGKILL after an fsync
#    (the fsync'd state stays, the rest is lost), mmap + flush;
#  - a full 1 MiB tmpfs: the program gets ENOSPC, no signal, the file
#    keeps its contents (root: mount); where the failed commit is the
#    close dash's dup2 makes (which cannot report it), the preload says it;
#  - a file size limit (ulimit -f 16) below the library's own files: the
#    commit fails with EFBIG, said; no SIGXFSZ, the file unchanged;
#  - a C program's fopen stream (fileno, fsync(fileno), fseek, fprintf,
#    fclose) on an atomic file;
#  - sqlite3 with PRAGMA journal_mode=MEMORY: the transaction lands, the
#    integrity check passes, no -journal or -wal file appears; two
#    processes with long-lived connections increment a counter 200 times
#    each (SQLite's locks work on the file): 400;
#  - programs preloading cannot reach: a static binary (if gcc -static
#    works) is refused by `oatomic run` (126) and by the preload when a
#    shell inside the run execs it; `oatomic run --check` says which.
#
# timeout: 300
#
# SPDX-License-Identifier: MIT
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${BUILD:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
OA=$build/oatomic
export OATOMIC_PRELOAD=$build/liboatomic-preload.so
W=${OA_TEST_DIR:-$(mktemp -d)}
PY=/usr/bin/python3

[ -x "$OA" ] && [ -f "$OATOMIC_PRELOAD" ] ||
	{ echo "preload_programs: $OA or $OATOMIC_PRELOAD not built"; exit 1; }
cd "$W" || exit 1
fails=0
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
ino() { stat -c %i "$1"; }
# expect_file PATH CONTENT WHAT
expect_file() {
	local got
	got=$(cat "$1" 2>/dev/null; echo .)
	[ "${got%.}" = "$2" ] || fail "$3: $1 holds '$(head -c 200 "$1" 2>/dev/null)', not '$2'"
}
run() { "$OA" run "$@"; }
have() { command -v "$1" >/dev/null 2>&1; }

# ---- sh redirection: content replaced, inode and its attributes kept -------
printf 'old contents\n' > f
ln f f.link
chmod 0640 f
have setfattr && setfattr -n user.keep -v yes f
i0=$(ino f)
run -- sh -c 'printf "new\n" > f' || fail "sh redirection: exit $?"
expect_file f "new
" "sh redirection"
[ "$(ino f)" = "$i0" ] || fail "sh redirection: new inode"
[ "$(stat -c %h:%a f)" = "2:640" ] || fail "sh redirection: links/mode $(stat -c %h:%a f)"
expect_file f.link "new
" "sh redirection (hard link)"
if have getfattr; then
	[ "$(getfattr --only-values -n user.keep f 2>/dev/null)" = yes ] ||
		fail "sh redirection: xattr lost"
fi

# standard descriptors closed (cron, daemons): the library's own
# descriptors must not land where the program expects its files
printf 'old\n' > c0
run -- sh -c 'echo new > c0; echo more >> c0' <&- >&- 2>&-
expect_file c0 "new
more
" "standard descriptors closed"

# O_DSYNC: every write is a commit of its own (others see it at once)
if [ -x "$PY" ]; then
	printf 'old\n' > ds
	run -- "$PY" -c '
import os, subprocess
fd = os.open("ds", os.O_WRONLY | os.O_DSYNC)
os.write(fd, b"new\n")
open("ds.seen", "wb").write(subprocess.run(["cat", "ds"], capture_output=True).stdout)
os.close(fd)'
	expect_file ds.seen "new
" "O_DSYNC: a write is a commit"
fi

# ---- pending until the last close; others see the old contents --------------
printf 'old\n' > g
run -- sh -c 'exec 3>g; echo new >&3; /bin/true; cat g > seen; echo more >&3'
expect_file seen "old
" "reader during the run, after a child holding the descriptor exited"
expect_file g "new
more
" "exec 3> committed at exit (dash leaves by _exit)"

# a program that clears the environment keeps its children covered
printf 'old\n' > e
run -- sh -c 'env -i /bin/sh -c "exec 3>e; echo new >&3; cat e > seen_e"'
expect_file seen_e "old
" "env -i: the child under the preload again"
expect_file e "new
" "env -i: committed"

printf 'old\n' > h
run --on-close discard -- sh -c 'echo new > h; echo more > h'
expect_file h "old
" "--on-close discard"

# ---- one description shared by a shell, a subshell and an exec'd child ------
if have bash; then
	run -- bash -c '{ echo a; /bin/echo b; (echo c); echo d; } > m'
	expect_file m "a
b
c
d
" "bash: shell, exec'd child and subshell on one descriptor"
fi

# ---- dd, cp, sed, tar ---------------------------------------------------------
head -c 20000 /dev/urandom > src
head -c 50000 /dev/zero | tr '\0' a > dst
i0=$(ino dst)
run -- dd if=src of=dst bs=4k seek=1 conv=notrunc,fsync status=none ||
	fail "dd: exit $?"
{ head -c 4096 /dev/zero | tr '\0' a; cat src; head -c $((50000 - 4096 - 20000)) /dev/zero | tr '\0' a; } > dst.want
cmp -s dst dst.want || fail "dd conv=notrunc,fsync: wrong result"
[ "$(ino dst)" = "$i0" ] || fail "dd: new inode"
run -- cp src dst || fail "cp: exit $?"
cmp -s src dst || fail "cp over an existing file: wrong result"
[ "$(ino dst)" = "$i0" ] || fail "cp: new inode"

# cp -a: the copy's mode, extended attributes and times are the source's
# (the times are set again after the commit at the close)
mkdir -p ca && printf 'hello\n' > ca/x && chmod 0640 ca/x &&
	touch -d '2020-01-01 00:00' ca/x
have setfattr && setfattr -n user.k -v v ca/x
run -- cp -a ca cb || fail "cp -a: exit $?"
expect_file cb/x "hello
" "cp -a"
[ "$(stat -c '%a %Y' cb/x)" = "$(stat -c '%a %Y' ca/x)" ] ||
	fail "cp -a: mode/mtime $(stat -c '%a %Y' cb/x), not $(stat -c '%a %Y' ca/x)"
if have getfattr; then
	[ "$(getfattr --only-values -n user.k cb/x 2>/dev/null)" = v ] || fail "cp -a: xattr"
fi

printf 'a1\na2\na3\n' > sin
printf 'stale\n' > sout
printf 'stale\n' > sw
i0=$(ino sout)
run -- sh -c 'sed s/a/b/ sin > sout; sed -n "w sw" sin'
expect_file sout "b1
b2
b3
" "sed (stdio on standard output)"
expect_file sw "a1
a2
a3
" "sed w FILE (fopen)"
[ "$(ino sout)" = "$i0" ] || fail "sed: new inode"

if have tar; then
	mkdir -p tx/a && (cd tx && echo one > a/x && echo two > a/y &&
		tar cf ../t.tar a && echo OLDX-LONGER > a/x && echo OLDY > a/y)
	ix=$(ino tx/a/x)
	(cd tx && run -- tar -xf ../t.tar --overwrite) || fail "tar: exit $?"
	expect_file tx/a/x "one
" "tar -x --overwrite"
	[ "$(ino tx/a/x)" = "$ix" ] || fail "tar --overwrite: new inode"
fi

# ---- python3 ------------------------------------------------------------------
if [ -x "$PY" ]; then
	printf '0123456789abcdef' > p
	i0=$(ino p)
	out=$(run -- "$PY" - <<'EOF'
import os, subprocess
f = open('p', 'r+b')
f.seek(4); f.write(b'XY'); f.flush()
f.seek(0); assert f.read() == b'0123XY6789abcdef', "own read"
assert open('p', 'rb').read() == b'0123456789abcdef', "second open sees the commit"
other = lambda: subprocess.run(['cat', 'p'], capture_output=True).stdout
assert other() == b'0123456789abcdef', "other process before fsync"
os.fsync(f.fileno())
assert other() == b'0123XY6789abcdef', "other process after fsync"
f.truncate(8); f.seek(0, 2); f.write(b'END'); f.flush()
assert os.fstat(f.fileno()).st_size == 11, "fstat: pending size"
assert os.stat('p').st_size == 11, "stat: pending size"
assert other() == b'0123XY6789abcdef', "other process during"
f.close()
print("ok")
EOF
)
	[ "$out" = ok ] || fail "python3 read/write/truncate/stat: $out"
	expect_file p "0123XY67END" "python3 result"
	[ "$(ino p)" = "$i0" ] || fail "python3: new inode"

	# writes through the handle (direct mode), then a fork hands them over
	# to the temporary file both processes share: partial blocks below
	# the end, a truncation, writes from both sides, one commit at the end
	head -c 20000 /dev/urandom > fk
	cp fk fk.orig
	out=$(run -- "$PY" - <<'EOF'
import os
fd = os.open('fk', os.O_RDWR)
os.pwrite(fd, b'AAAA', 100)          # a partial block in the middle
os.pwrite(fd, b'BBBB', 9000)
os.ftruncate(fd, 15000)              # a truncation below the old end
os.pwrite(fd, b'CCCC', 16000)        # past it: zeros between
pid = os.fork()
if pid == 0:
    os.pwrite(fd, b'DDDD', 5000)     # the child's, pending with the rest
    os._exit(0)
os.waitpid(pid, 0)
with open('fk', 'rb') as r:          # nothing committed yet
    assert r.read() == open('fk.orig', 'rb').read(), "visible before the close"
os.pwrite(fd, b'EEEE', 200)
os.close(fd)
print("ok")
EOF
)
	[ "$out" = ok ] || fail "python3 fork after direct writes: $out"
	"$PY" - <<'EOF' || fail "python3 fork after direct writes: wrong result"
d = bytearray(open('fk.orig', 'rb').read())
d[100:104] = b'AAAA'; d[9000:9004] = b'BBBB'; d = d[:15000]
d += bytes(16000 - 15000) + b'CCCC'
d[5000:5004] = b'DDDD'; d[200:204] = b'EEEE'
import sys
sys.exit(0 if open('fk', 'rb').read() == bytes(d) else 1)
EOF

	# a child started by subprocess (vfork, every other descriptor closed)
	# writes through the same description
	printf 'old\n' > sp
	run -- "$PY" -c '
import subprocess
f = open("sp", "r+b"); f.write(b"parent\n"); f.flush()
subprocess.run(["echo", "child"], stdout=f)
f.seek(0, 2); f.write(b"parent again\n"); f.close()'
	expect_file sp "parent
child
parent again
" "python3 subprocess writing to the parent's atomic file"

	# O_CREAT|O_EXCL: creates a new file (atomic, empty until the close),
	# refuses an existing one
	rm -f ex
	printf 'keep\n' > ex2
	out=$(run -- "$PY" -c '
import os
fd = os.open("ex", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
os.write(fd, b"fresh\n")
assert os.path.getsize("ex") == 6, "own stat: the pending size"
os.close(fd)
try:
    os.open("ex2", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    print("EEXIST missing")
except FileExistsError:
    print("ok")')
	[ "$out" = ok ] || fail "python3 O_CREAT|O_EXCL: $out"
	expect_file ex "fresh
" "O_CREAT|O_EXCL"
	[ "$(stat -c %a ex)" = 600 ] || fail "O_CREAT|O_EXCL: mode $(stat -c %a ex)"
	expect_file ex2 "keep
" "O_CREAT|O_EXCL over an existing file"

	# a SIGKILL after an fsync: the fsync'd state, nothing after it
	printf 'AAAAAAAA' > k
	run -- "$PY" -c '
import os, signal
fd = os.open("k", os.O_RDWR)
os.pwrite(fd, b"BB", 0); os.fsync(fd)
os.pwrite(fd, b"CC", 2); os.ftruncate(fd, 3)
os.kill(os.getpid(), signal.SIGKILL)' 2>/dev/null
	"$OA" recover k >/dev/null 2>&1
	expect_file k "BBAAAAAA" "python3 killed after fsync"

	# mmap: stores pending until flush (msync), then committed
	head -c 8192 /dev/zero > mm
	out=$(run -- "$PY" - <<'EOF'
import mmap, subprocess
f = open('mm', 'r+b'); m = mmap.mmap(f.fileno(), 0)
m[0:5] = b'HELLO'
assert subprocess.run(['head', '-c5', 'mm'], capture_output=True).stdout == b'\0' * 5, "store visible before flush"
m.flush()
assert subprocess.run(['head', '-c5', 'mm'], capture_output=True).stdout == b'HELLO', "flush did not commit"
m[4096:4101] = b'WORLD'; m.close(); f.close()
print("ok")
EOF
)
	[ "$out" = ok ] || fail "python3 mmap: $out"
	[ "$(head -c 5 mm; dd if=mm bs=1 skip=4096 count=5 status=none)" = HELLOWORLD ] ||
		fail "python3 mmap: result"
else
	echo "NOTE: no $PY: python3 cases left out"
fi

# ---- sqlite3 -------------------------------------------------------------------
if have sqlite3; then
	rm -f db db-journal db-wal
	sqlite3 db "create table t(a, b); insert into t values(1, 'x');"
	i0=$(ino db)
	out=$(run -- sqlite3 db "PRAGMA journal_mode=MEMORY; begin;
		insert into t select a + 1, b || 'y' from t;
		insert into t select a + 10, b from t; commit;
		PRAGMA integrity_check;" 2>&1)
	[ "$out" = "memory
ok" ] || fail "sqlite3: $out"
	[ "$(sqlite3 db 'select count(*), sum(a) from t; pragma integrity_check')" = "4|26
ok" ] || fail "sqlite3: result"
	[ "$(ino db)" = "$i0" ] || fail "sqlite3: new inode"
	[ -e db-journal ] || [ -e db-wal ] && fail "sqlite3: a journal file appeared"
	# two processes with long-lived connections, 200 transactions each:
	# SQLite's own locks (on the file itself) keep them apart
	if [ -x "$PY" ]; then
		rm -f cnt.db
		sqlite3 cnt.db "create table c(n); insert into c values(0);"
		cat > inc.py <<'EOF'
import sqlite3
c = sqlite3.connect('cnt.db', timeout=20, isolation_level=None)
c.execute('PRAGMA journal_mode=MEMORY')
for i in range(200):
    c.execute('BEGIN IMMEDIATE')
    c.execute('UPDATE c SET n = n + 1')
    c.execute('COMMIT')
c.close()
EOF
		run -- "$PY" inc.py & p1=$!
		run -- "$PY" inc.py & p2=$!
		wait $p1; r1=$?; wait $p2; r2=$?
		[ $r1 = 0 ] && [ $r2 = 0 ] || fail "sqlite3 two writers: exit $r1 $r2"
		[ "$(sqlite3 cnt.db 'select n from c; pragma integrity_check')" = "400
ok" ] || fail "sqlite3 two writers: $(sqlite3 cnt.db 'select n from c')"
	fi
else
	echo "NOTE: no sqlite3: its case left out"
fi

# ---- a full disk: the program sees ENOSPC, the file keeps its contents ------
head -c 600000 /dev/zero > big
if [ "$(id -u)" = 0 ] && mkdir -p tiny && mount -t tmpfs -o size=1m tmpfs tiny 2>/dev/null; then
	printf 'old\n' > tiny/f
	run -- sh -c 'head -c 2000000 /dev/zero > tiny/f' 2>err; rc=$?
	[ $rc -ge 128 ] && fail "full tmpfs: killed by signal $((rc - 128)): $(cat err)"
	[ $rc = 0 ] && fail "full tmpfs: no error"
	expect_file tiny/f "old
" "full tmpfs"
	# dash redirects a command that is not its last in the shell itself:
	# the dup2 that restores its standard output is the last close, whose
	# failed commit the program cannot learn: the preload says it
	run -- sh -c 'cat big > tiny/f; echo rc=$?' >out 2>err; rc=$?
	[ $rc -ge 128 ] && fail "full tmpfs, dup2: killed by signal $((rc - 128))"
	expect_file tiny/f "old
" "full tmpfs, dup2"
	grep -q "tiny/f: the commit at the close dup2 made failed: No space" err ||
		fail "full tmpfs, dup2: the failed commit not said: $(cat err)"
	umount tiny
fi

# ---- a file size limit below the library's files: an error, never SIGXFSZ --
printf 'old\n' > lim
(ulimit -f 16; run -- sh -c 'head -c 10000 big > lim; echo rc=$?') >out 2>err; rc=$?
[ $rc -ge 128 ] && fail "ulimit -f 16: killed by signal $((rc - 128)): $(cat err)"
expect_file lim "old
" "ulimit -f 16"
grep -q "lim: .*File too large" err || fail "ulimit -f 16: no message: $(cat err)"

# ---- a C program's stdio stream on an atomic file ------------------------------
# fopen gives a stream of the preload's own: fileno() is the descriptor,
# fsync(fileno()) commits, reads, seeks and fprintf go through the library
if cat > stdio.c <<'EOF' && cc -o stdio_prog stdio.c 2>/dev/null; then
#include <stdio.h>
#include <unistd.h>
int main(void)
{
	char b[32] = { 0 };
	FILE *f = fopen("sf", "r+");
	if (!f || fileno(f) < 0)
		return 1;
	fseek(f, 4, SEEK_SET);
	fputs("XY", f);
	if (fflush(f) || fsync(fileno(f)))
		return 2;
	FILE *r = fopen("sf", "r");          /* the commit is visible */
	if (!r || fread(b, 1, 10, r) != 10)
		return 3;
	fclose(r);
	fseek(f, 0, SEEK_END);
	fprintf(f, "tail%d\n", 42);         /* pending until the close */
	return fclose(f) ? 4 : b[4] == 'X' ? 0 : 5;
}
EOF
	printf '0123456789\n' > sf
	run -- ./stdio_prog || fail "stdio program: exit $?"
	expect_file sf "0123XY6789
tail42
" "a C program's stdio stream"
else
	echo "NOTE: no C compiler: the stdio program's case left out"
fi

# ---- what preloading cannot reach ---------------------------------------------
"$OA" run --check sh >/dev/null || fail "run --check sh: not reachable?"
if printf 'int main(void){return 0;}\n' > st.c && gcc -static -o static st.c 2>/dev/null; then
	printf 'keep\n' > r
	run -- ./static 2>err; rc=$?
	[ $rc = 126 ] || fail "run of a static binary: exit $rc, not 126"
	grep -q "statically linked" err || fail "run of a static binary: message: $(cat err)"
	"$OA" run --check ./static >/dev/null && fail "run --check: static reported reachable"
	run -- sh -c 'echo new > r; ./static' 2>err
	grep -q "refusing" err || fail "preload let sh exec a static binary: $(cat err)"
else
	echo "NOTE: gcc -static unavailable: the static-binary case left out"
fi

[ $fails = 0 ] || exit 1
echo "preload_programs: all passed"
