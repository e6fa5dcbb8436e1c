#!/bin/bash
# recover_copy.sh - a copy of a crashed directory ("Everyday use", 3).
#
# A writer is SIGKILLed with a committed, unapplied transaction (kill point
# 2: after the commit flush, before the apply), and its directory is copied
# with `cp -a` (new inode numbers: the journal and the control file name the
# old inode).  Then, on copies:
#   - `oatomic recover` refuses (exit 1), says what happened ("a copy of the
#     directory?"), names the journal, and leaves the file untouched;
#     `oatomic check` exits 2;
#   - `oatomic recover --adopt` replays the journal: the committed state;
#     then check is clean, a write works;
#   - a clean copy (the original recovered first) recovers, checks and
#     opens silently;
#   - `oatomic recover --discard` leaves the file as it is, says so in one
#     line naming the journal, and later opens are clean;
#   - a damaged journal (journal 0, in the control file, truncated) is
#     refused naming it; --discard drops it.
#
# timeout: 120
#
# SPDX-License-Identifier: MIT
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
OA=$BUILD/oatomic
W=${OA_TEST_DIR:-$(mktemp -d)}
export OATOMIC_METHOD=journal   # the kill point is in the journal's commit
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
[ -x "$OA" ] || { echo "SKIP: $OA not built"; exit 77; }

head -c 65536 /dev/urandom >"$W/old"
head -c 65536 /dev/urandom >"$W/new"

# crashed DIR: DIR/f holds old; a commit of new is durable, not applied.
crashed() {
	rm -rf "$1"; mkdir -p "$1"
	"$OA" write --create "$1/f" <"$W/old" || fail "first write"
	( OATOMIC_KILLPOINT=2 "$OA" write "$1/f" <"$W/new"; exit $? ) 2>/dev/null
	local rc=$?
	[ $rc -eq 137 ] || fail "writer should die by SIGKILL (exit $rc)"
	cmp -s "$1/f" "$W/old" || fail "$1/f changed before the apply"
}

# 1. The copy is refused, with the message; the file is untouched.
crashed "$W/orig"
cp -a "$W/orig" "$W/c1"
"$OA" recover "$W/c1/f" 2>"$W/err"; rc=$?
cat "$W/err"
[ $rc -ne 0 ] || fail "recover of a crashed copy should fail"
grep -q "journal .f.oa was written for inode [0-9]*.*not this file (inode [0-9]*.*a copy of the directory?" "$W/err" ||
	fail "no 'a copy of the directory?' message naming the journal"
cmp -s "$W/c1/f" "$W/old" || fail "refused recovery changed the file"
"$OA" check "$W/c1/f" >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || fail "check of a crashed copy: exit $rc, not 2"
cmp -s "$W/c1/f" "$W/old" || fail "check changed the file"

# 2. --adopt replays it.
"$OA" recover --adopt "$W/c1/f" 2>"$W/err" || { cat "$W/err"; fail "--adopt failed"; }
cmp -s "$W/c1/f" "$W/new" || fail "--adopt: not the committed state"
"$OA" check "$W/c1/f" >/dev/null; rc=$?
[ $rc -eq 0 ] || fail "check after --adopt: exit $rc"
printf 'after adopt' | "$OA" write "$W/c1/f" || fail "write after --adopt"
[ "$(head -c 11 "$W/c1/f")" = "after adopt" ] || fail "write after --adopt lost"

# 3. A clean copy: silent.
"$OA" recover "$W/orig/f" 2>"$W/err" || fail "recover of the original"
[ -s "$W/err" ] && { cat "$W/err"; fail "recover of the original was not silent"; }
cmp -s "$W/orig/f" "$W/new" || fail "original: not the committed state"
cp -a "$W/orig" "$W/c2"
"$OA" recover "$W/c2/f" 2>"$W/err" || fail "recover of a clean copy failed"
[ -s "$W/err" ] && { cat "$W/err"; fail "recover of a clean copy was not silent"; }
"$OA" check "$W/c2/f" >/dev/null; rc=$?
[ $rc -eq 0 ] || fail "check of a clean copy: exit $rc"
printf 'clean copy' | "$OA" write "$W/c2/f" 2>"$W/err" || fail "write to a clean copy"
[ -s "$W/err" ] && { cat "$W/err"; fail "write to a clean copy was not silent"; }
cmp -s <(tail -c +11 "$W/c2/f") <(tail -c +11 "$W/new") || fail "clean copy: contents"

# 4. --discard: the file as it is, one line naming the journal.
crashed "$W/orig2"
cp -a "$W/orig2" "$W/c3"
"$OA" recover --discard "$W/c3/f" 2>"$W/err" || { cat "$W/err"; fail "--discard failed"; }
cat "$W/err"
[ "$(grep -c 'journal 0 in .f.oa discarded' "$W/err")" = 1 ] ||
	fail "--discard did not say, in one line, which journal it threw away"
cmp -s "$W/c3/f" "$W/old" || fail "--discard changed the file"
"$OA" check "$W/c3/f" >/dev/null; rc=$?
[ $rc -eq 0 ] || fail "check after --discard: exit $rc"
"$OA" recover "$W/c3/f" 2>"$W/err" || fail "recover after --discard"
[ -s "$W/err" ] && { cat "$W/err"; fail "recover after --discard was not silent"; }
printf 'after discard' | "$OA" write "$W/c3/f" || fail "write after --discard"

# 5. A damaged journal: refused naming it; --discard drops it.
crashed "$W/d"
truncate -s 60000 "$W/d/.f.oa"   # journal 0 is in it, from 24576
"$OA" recover "$W/d/f" 2>"$W/err"; rc=$?
cat "$W/err"
[ $rc -ne 0 ] || fail "recover over a truncated journal should fail"
grep -q "acknowledged (live area of .f.oa" "$W/err" || fail "message does not name the file"
"$OA" check "$W/d/f" >"$W/out" 2>&1; rc=$?
[ $rc -eq 2 ] || fail "check of a truncated journal: exit $rc"
grep -q "commit [0-9]* was acknowledged" "$W/out" || { cat "$W/out"; fail "check does not name the lost commit"; }
"$OA" recover --discard "$W/d/f" 2>"$W/err" || { cat "$W/err"; fail "--discard of a damaged journal"; }
grep -q 'journal 0 in .f.oa discarded' "$W/err" || fail "--discard: no line"
cmp -s "$W/d/f" "$W/old" || fail "--discard changed the file"
"$OA" check "$W/d/f" >/dev/null; rc=$?
[ $rc -eq 0 ] || fail "check after discarding a damaged journal: exit $rc"

[ $fails -eq 0 ] && echo "recover_copy: all cases hold"
[ $fails -eq 0 ]
