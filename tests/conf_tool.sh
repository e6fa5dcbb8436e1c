#!/bin/bash
# conf_tool.sh - the oatomic tool against hostile or careless surroundings.
#
#  - standard descriptors closed (cron, daemons): with 0, 2, or all three
#    closed the target keeps its content and inode unless the command
#    legitimately writes it; no input is read from it and no message lands
#    in it;
#  - numbers are decimal (0x for hex): --offset 0100 is byte 100, and junk,
#    signs, blanks, trailing garbage and overflow are usage errors (2) that
#    change nothing; the same for bench's --reps and --budget;
#  - a dangling symbolic link: replace and write --create create the file
#    it names (beside the link for a relative one) and the link stays;
#  - --journal-dir with a long NAME: refused (ENAMETOOLONG) before anything
#    is created, if ".NAME.<16 hex digits>.oaj-4095" would not fit;
#  - info --journal-dir on another file system than an XFS file: reflink
#    and exchange false, the method neither clone nor exchange, and a
#    forced clone fails (EXDEV) leaving the file as it was (needs root and
#    loop devices; that part is left out, with a NOTE, otherwise);
#  - recover --all / check --all: files in nested directories, some with a
#    commit a SIGKILLed writer left unapplied: check --all lists exactly
#    those (exit 1), recover --all settles them, check --all is then clean;
#    a control file whose file is gone is reported (recover 1, check 2);
#    a journal directory's control files are used only with --journal-dir.
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
W=${OA_TEST_DIR:-$(mktemp -d)}
. "$here/util/fs.sh"

[ -x "$OA" ] || { echo "conf_tool: $OA not built"; exit 1; }
cd "$W" || exit 1
# The kill points aim at the journal protocol; AUTO might pick another
# method on the file system of $W.
export OATOMIC_METHOD=journal
fails=0

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

ino() { stat -c %i "$1"; }

# expect_file PATH CONTENT WHAT: PATH holds exactly CONTENT.
expect_file() {
	local got
	got=$(cat "$1" 2>/dev/null; echo .)
	[ "${got%.}" = "$2" ] || fail "$3: $1 holds '$(cat "$1" 2>/dev/null)', not '$2'"
}

# ---- 1. standard descriptors closed ----------------------------------------

# std_case WHAT CONTENT: std holds CONTENT and is still the inode it was;
# then it is made what it was again (same inode), for the next case.
std_case() {
	expect_file std "$2" "$1"
	[ "$(ino std)" = "$i0" ] || fail "$1: std changed inode"
	printf 'hello world\n' >std
}

printf 'hello world\n' >std
i0=$(ino std)
"$OA" write --offset 4 std <&-
std_case "write, stdin closed" $'hello world\n'
"$OA" write std </ 2>&-
[ $? -ne 0 ] || fail "write from a directory, stderr closed: exit 0"
std_case "failing write, stderr closed" $'hello world\n'
"$OA" write --offset 4 std <&- >&- 2>&-
std_case "write, all three closed" $'hello world\n'
"$OA" write std </ <&- >&- 2>&-
std_case "failing write, all three closed" $'hello world\n'
"$OA" write --offset 44 std </ >&- 2>&-
std_case "failing write, stdout and stderr closed" $'hello world\n'
"$OA" check std >&-
"$OA" info std >&- 2>&-
"$OA" recover std >&- 2>&-
std_case "check, info, recover, stdout closed" $'hello world\n'
# ... and a legitimate write still is one.
printf XY | "$OA" write --offset 2 std 2>&- >&-
std_case "write with stdout and stderr closed" $'heXYo world\n'
printf 'hello world\n' | "$OA" replace std 2>&-
std_case "replace, stderr closed" $'hello world\n'

# ---- 2. numbers are decimal ------------------------------------------------

printf 'abc' >num
printf Z | "$OA" write --offset 0100 num
[ "$(stat -c %s num)" = 101 ] || fail "--offset 0100: size $(stat -c %s num), not 101"
[ "$(dd if=num bs=1 skip=100 count=1 2>/dev/null)" = Z ] ||
	fail "--offset 0100 did not write at byte 100"
printf Y | "$OA" write --offset 0x10 num
[ "$(dd if=num bs=1 skip=16 count=1 2>/dev/null)" = Y ] ||
	fail "--offset 0x10 did not write at byte 16"
printf X | "$OA" write -o 1k num
[ "$(stat -c %s num)" = 1025 ] || fail "--offset 1k: size $(stat -c %s num)"
sum=$(cksum <num)
for bad in -1 +5 ' 5' '5 ' 5x 0x 0xg 0x-1 '' 1.5 08q 1kk \
	   18446744073709551616 9223372036854775808 17179869184g 0x1q; do
	out=$(printf Q | "$OA" write --offset "$bad" num 2>&1)
	rc=$?
	[ $rc = 2 ] || fail "--offset '$bad': exit $rc, not 2"
	case $out in *"--offset: an offset"*) ;; *) fail "--offset '$bad': '$out'" ;; esac
done
[ "$(cksum <num)" = "$sum" ] || fail "a refused --offset changed the file"
for opt in "--reps 1x" "--reps -2" "--max-size 1m5" "--budget inf" \
	   "--budget 1e3" "--budget -1" "--budget 0x10" "--budget ' 2'"; do
	eval "timeout 20 \"\$OA\" bench --quick --dir /nonexistent $opt" \
		>/dev/null 2>&1
	rc=$?
	[ $rc = 2 ] || fail "bench $opt: exit $rc, not 2"
done
for opt in "--kills 0x" "--kills 5k5" "--seed -3" "--think ' 1'"; do
	eval "timeout 20 \"\$OA\" demo --dir /nonexistent $opt" >/dev/null 2>&1
	rc=$?
	[ $rc = 2 ] || fail "demo $opt: exit $rc, not 2"
done

# ---- 3. a dangling symbolic link -------------------------------------------

ln -s made-by-replace L
printf 'new\n' | "$OA" replace L || fail "replace through a dangling link"
[ -L L ] || fail "replace: L is no longer a symbolic link"
expect_file made-by-replace $'new\n' "replace through a dangling link"
mkdir -p sub
ln -s t sub/L	# relative: sub/t, not ./t
printf 'w\n' | "$OA" write --create sub/L || fail "write --create through a dangling link"
[ -L sub/L ] || fail "write --create: sub/L is no longer a symbolic link"
expect_file sub/t $'w\n' "write --create through a relative dangling link"
[ -e t ] && fail "write --create: the link's target made relative to ., not sub/"
ln -s "$W/abs-target" sub/A
printf 'a\n' | "$OA" write --create sub/A || fail "write --create through an absolute dangling link"
expect_file abs-target $'a\n' "absolute dangling link"
ln -s chain2 chain1
ln -s chain3 chain2
printf 'c\n' | "$OA" replace chain1 || fail "replace through two dangling links"
expect_file chain3 $'c\n' "two dangling links"
# not without --create, and not into a directory that is not there
ln -s nothing-here N
printf 'x\n' | "$OA" write N 2>/dev/null && fail "write without --create through a dangling link"
ln -s no-dir/x ND
printf 'x\n' | "$OA" replace ND 2>/dev/null && fail "replace into a missing directory"
[ -e nothing-here ] || [ -e no-dir ] && fail "a refused write created something"

# ---- 4. --journal-dir and a long name --------------------------------------

mkdir -p jd long
# ".NAME.<inode>.oaj-0" no longer fits for 245 bytes with any inode of 3
# hex digits or more, though ".NAME.oaj-4095" does.
n245=$(printf '%0245d' 0 | tr 0 n)
out=$(printf x | "$OA" write --create -J jd "long/$n245" 2>&1)
rc=$?
[ $rc = 1 ] || fail "long name with --journal-dir: exit $rc, not 1"
case $out in *"too long"*) ;; *) fail "long name with --journal-dir: '$out'" ;; esac
[ -z "$(ls -A long)$(ls -A jd)" ] || fail "long name with --journal-dir: created $(ls -A long jd | head -c 300)"
printf x | "$OA" replace -J jd "long/$n245" 2>/dev/null && fail "replace, long name, --journal-dir"
[ -z "$(ls -A long)$(ls -A jd)" ] || fail "replace with a long name created something"
# 228 bytes: the longest that always fits
n228=$(printf '%0228d' 0 | tr 0 m)
printf x | "$OA" write --create -J jd "long/$n228" || fail "228-byte name with --journal-dir"
expect_file "long/$n228" x "228-byte name with --journal-dir"
rm -rf long jd

# ---- 5. info --journal-dir on another file system --------------------------

json_field() { sed -n "s/^  \"$1\": \"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}$/\1/p"; }

xfs_part() {
	local img=$W/xfs.img mnt=$W/mnt jd=$W/jd5 LOOP out
	mkdir -p "$mnt" "$jd"
	truncate -s 320M "$img" && mkfs_xfs "$img" ||
		{ echo "NOTE: mkfs.xfs failed: no XFS part"; return; }
	LOOP=$(losetup -f --show "$img") ||
		{ echo "NOTE: losetup failed: no XFS part"; return; }
	if ! mount_xfs "$LOOP" "$img" "$mnt"; then
		losetup -d "$LOOP"
		fail "mount XFS"
		return
	fi
	printf 'xfs file\n' >"$mnt/f"
	out=$("$OA" info --json "$mnt/f")
	if [ "$(echo "$out" | json_field reflink)" != true ]; then
		echo "NOTE: no reflink on this XFS: no XFS part"
	else
		out=$("$OA" info --json -J "$jd" "$mnt/f")
		[ "$(echo "$out" | json_field reflink)" = false ] ||
			fail "info -J (other fs): reflink not false"
		[ "$(echo "$out" | json_field exchange)" = false ] ||
			fail "info -J (other fs): exchange not false"
		case $(echo "$out" | json_field method) in
		clone|exchange) fail "info -J (other fs): method $(echo "$out" | json_field method)" ;;
		esac
		"$OA" info -J "$jd" "$mnt/f" | grep -q '^reflink works  *no$' ||
			fail "info -J (other fs): table says reflink works"
		# AUTO: the journal; forced clone or exchange: EXDEV
		printf 'AUTO\n' | OATOMIC_METHOD= "$OA" write -t -J "$jd" "$mnt/f" ||
			fail "write -J (other fs) under AUTO"
		expect_file "$mnt/f" $'AUTO\n' "write -J (other fs) under AUTO"
		for m in clone exchange; do
			out=$(printf 'FORCED\n' | OATOMIC_METHOD=$m "$OA" write -J "$jd" "$mnt/f" 2>&1)
			rc=$?
			[ $rc = 1 ] || fail "forced $m, journal on another fs: exit $rc"
			case $out in *cross-device*) ;;
			*) fail "forced $m, journal on another fs: '$out'" ;; esac
			expect_file "$mnt/f" $'AUTO\n' "forced $m, journal on another fs"
		done
		# the same directory as the file: reflink still seen
		out=$("$OA" info --json -J "$mnt" "$mnt/f")
		[ "$(echo "$out" | json_field reflink)" = true ] ||
			fail "info -J (same fs): reflink not true"
	fi
	umount "$mnt" || umount -l "$mnt"
	losetup -d "$LOOP"
}

if out=$(need_loop_mounts mkfs.xfs); then
	xfs_part
else
	echo "NOTE: no XFS part: ${out#SKIP: }"
fi

# ---- 6. recover --all and check --all --------------------------------------

# kill_commit FILE DATA [OPTS]: a writer SIGKILLed with its commit durable
# in the journal and nothing applied (OA_KP_FLUSHED).
kill_commit() {
	(printf '%s\n' "$2" | OATOMIC_KILLPOINT=2 "$OA" write "${@:3}" "$1") 2>/dev/null
	[ $? = 137 ] || fail "kill_commit $1: the writer was not killed at the kill point"
}

mkdir -p tree/a/b/c tree/d tree/e
for f in tree/top tree/a/one tree/a/b/two tree/a/b/c/three tree/d/four tree/e/five; do
	printf 'old\n' >"$f"
	printf 'v1\n' | "$OA" write --truncate "$f" || fail "write $f"
done
printf 'never\n' >tree/d/plain		# never used with oatomic
kill_commit tree/a/one 'P1'
kill_commit tree/a/b/c/three 'P3'
kill_commit tree/e/five 'P5'
expect_file tree/a/one $'v1\n' "a killed commit was applied"

out=$("$OA" check --all tree)
rc=$?
[ $rc = 1 ] || fail "check --all with pending commits: exit $rc, not 1"
listed=$(echo "$out" | cut -d: -f1 | sort -u | tr '\n' ' ')
[ "$listed" = "tree/a/b/c/three tree/a/one tree/e/five " ] ||
	fail "check --all listed '$listed'"
echo "$out" | grep -q 'tree/a/one: .*committed' || fail "check --all: no finding for tree/a/one: $out"

out=$("$OA" recover --all tree)
rc=$?
[ $rc = 0 ] || fail "recover --all: exit $rc"
[ "$(echo "$out" | sort | tr '\n' ' ')" = "tree/a/b/c/three: recovered tree/a/one: recovered tree/e/five: recovered " ] ||
	fail "recover --all printed '$out'"
expect_file tree/a/one $'P1\n' "recover --all"
expect_file tree/a/b/c/three $'P3\n' "recover --all"
expect_file tree/e/five $'P5\n' "recover --all"
expect_file tree/a/b/two $'v1\n' "recover --all (nothing pending)"
expect_file tree/d/plain $'never\n' "recover --all (never used)"
out=$("$OA" check --all tree)
rc=$?
[ $rc = 0 ] && [ -z "$out" ] || fail "check --all after recover --all: exit $rc, '$out'"

# A symbolic link is not followed, nor is another tree's file reported.
mkdir -p other
printf 'o\n' | "$OA" write --create other/x
kill_commit other/x 'OX'
ln -s ../other tree/link
out=$("$OA" check --all tree)
[ $? = 0 ] && [ -z "$out" ] || fail "check --all followed a symbolic link: '$out'"
"$OA" recover --all other >/dev/null || fail "recover --all other"
expect_file other/x $'OX\n' "recover --all other"

# A control file whose file is gone: reported, a failure.
mkdir -p gone
printf 'g\n' | "$OA" write --create gone/g
kill_commit gone/g 'G'
printf 'k\n' | "$OA" write --create gone/keep
kill_commit gone/keep 'K'
g_ino=$(ino gone/g)
rm gone/g
out=$("$OA" check --all gone 2>&1)
rc=$?
[ $rc = 2 ] || fail "check --all with a file gone: exit $rc, not 2"
case $out in *"control file gone/.g.oa: its file (inode $g_ino) was not found under gone"*) ;;
*) fail "check --all with a file gone: '$out'" ;; esac
case $out in *"gone/keep: "*committed*) ;; *) fail "check --all with a file gone: keep not listed: '$out'" ;; esac
out=$("$OA" recover --all gone 2>&1)
rc=$?
[ $rc = 1 ] || fail "recover --all with a file gone: exit $rc, not 1"
case $out in *"was not found under gone"*) ;; *) fail "recover --all, file gone: '$out'" ;; esac
expect_file gone/keep $'K\n' "recover --all with a file gone elsewhere"

# A journal directory's control files (.NAME.INO.oa): only with -J.
mkdir -p jt/files jt/jd
printf 'j\n' | "$OA" write --create -J jt/jd jt/files/j
kill_commit jt/files/j 'J' -J jt/jd
out=$("$OA" check --all jt)
[ $? = 0 ] && [ -z "$out" ] || fail "check --all took a journal directory's control file: '$out'"
out=$("$OA" check --all -J jt/jd jt/files)
[ $? = 1 ] || fail "check --all -J: exit not 1: '$out'"
case $out in "jt/files/j: "*committed*) ;; *) fail "check --all -J: '$out'" ;; esac
out=$("$OA" recover --all -J jt/jd jt/files)
[ $? = 0 ] && [ "$out" = "jt/files/j: recovered" ] || fail "recover --all -J: '$out'"
expect_file jt/files/j $'J\n' "recover --all -J"

# Homes recorded on the file (docs/FORMAT.md, "The home"): a file renamed
# after its crash into another directory is found under its new name; a
# new file made under its old name may not take over the old home while
# that holds commits to recover (it is refused, never given a home over
# them), and works once the tree is settled.
mkdir -p ht/a ht/b
printf 'h\n' >ht/a/f
printf 'v1\n' | "$OA" write --truncate ht/a/f || fail "write ht/a/f"
kill_commit ht/a/f 'H1'
mv ht/a/f ht/b/moved
printf 'n\n' >ht/a/f
printf 'v2\n' | "$OA" write --truncate ht/a/f 2>/dev/null &&
	fail "a new file took over a home with commits to recover"
expect_file ht/a/f $'n\n' "a refused write"
out=$("$OA" check --all ht)
[ $? = 1 ] || fail "check --all, homes: exit not 1: '$out'"
case $out in "ht/b/moved: "*committed*) ;; *) fail "check --all, homes: moved not listed: '$out'" ;; esac
"$OA" recover --all ht >/dev/null || fail "recover --all, homes"
expect_file ht/b/moved $'H1\n' "recover --all, a file renamed after its crash"
printf 'v2\n' | "$OA" write --truncate ht/a/f || fail "write new ht/a/f after recover --all"
kill_commit ht/a/f 'H2'
out=$("$OA" check --all ht)
[ $? = 1 ] || fail "check --all, homes: exit not 1: '$out'"
case $out in "ht/a/f: "*committed*) ;; *) fail "check --all, homes: new file not listed: '$out'" ;; esac
"$OA" recover --all ht >/dev/null || fail "recover --all, homes (2)"
expect_file ht/a/f $'H2\n' "recover --all, a new file under a taken name"
expect_file ht/b/moved $'H1\n' "recover --all, the moved file left alone"
out=$("$OA" check --all ht)
[ $? = 0 ] && [ -z "$out" ] || fail "check --all, homes, after recover: '$out'"

# ---- 7. no room for the journal ---------------------------------------------
# The journal grows with the transaction (it is not a fixed 4 MiB ring): a
# one-byte write works under a 1 MiB file size limit (ulimit -f) and on a
# 2 MiB tmpfs, and leaves one control file of 512 bytes.  A write that
# cannot fit fails with a message that says why; the tool is not killed
# (SIGXFSZ) and the file is unchanged.
printf 'x\n' >small
out=$( (ulimit -f 1024; printf 'y' | "$OA" write --offset 1 small) 2>&1)
rc=$?
[ $rc = 0 ] || fail "ulimit -f, one byte: exit $rc, not 0 (153 is SIGXFSZ): '$out'"
expect_file small 'xy' "ulimit -f, one byte"
[ "$(stat -c %s .small.oa 2>/dev/null)" = 512 ] ||
	fail "ulimit -f: .small.oa is $(stat -c %s .small.oa 2>&1) bytes, not 512"
[ "$(ls -a | grep -c '^\.small\.')" = 1 ] || fail "ulimit -f: files left: $(ls -a | grep '^\.small\.')"
head -c 2000000 /dev/zero | tr '\0' 'z' >big.in
out=$( (ulimit -f 1024; "$OA" write --offset 0 small <big.in) 2>&1)
rc=$?
[ $rc = 1 ] || fail "ulimit -f, 2 MB: exit $rc, not 1 (153 is SIGXFSZ)"
case $out in *"File too large"*"no room for the journal"*) ;; *) fail "ulimit -f, 2 MB: '$out'" ;; esac
expect_file small 'xy' "ulimit -f, 2 MB"
if [ "$(id -u)" = 0 ] && mkdir -p tiny && mount -t tmpfs -o size=2m oatest tiny 2>/dev/null; then
	printf 'x\n' >tiny/f
	out=$(printf 'y' | "$OA" write --offset 1 tiny/f 2>&1)
	rc=$?
	[ $rc = 0 ] || fail "2 MiB tmpfs, one byte: exit $rc, not 0: '$out'"
	expect_file tiny/f 'xy' "2 MiB tmpfs, one byte"
	out=$("$OA" write --offset 0 tiny/f <big.in 2>&1)
	rc=$?
	[ $rc = 1 ] || fail "2 MiB tmpfs, 2 MB: exit $rc, not 1"
	case $out in *"No space left"*"file unchanged"*) ;; *) fail "2 MiB tmpfs, 2 MB: '$out'" ;; esac
	expect_file tiny/f 'xy' "2 MiB tmpfs, 2 MB"
	umount tiny
else
	echo "NOTE: not root or no tmpfs: the full file system case not tried"
fi

# Several files replaced as one unit (replace --from): the inodes stay
mkdir -p g1 g2
printf 'old a\n' >g1/a; printf 'old b\n' >g2/b; ln g1/a g1/alink; chmod 640 g1/a
printf 'new a\n' >src.a
printf 'new b\n' | "$OA" replace --from src.a g1/a --from - g2/b || fail "replace --from: exit $?"
expect_file g1/a $'new a\n' "replace --from, first file"
expect_file g1/alink $'new a\n' "replace --from, the hard link"
expect_file g2/b $'new b\n' "replace --from, second file (standard input)"
[ "$(stat -c %a g1/a)" = 640 ] || fail "replace --from changed the mode"
"$OA" replace --from src.a g1/a --from src.a g1/a 2>/dev/null
[ $? = 1 ] || fail "replace --from: a file twice is not refused"
"$OA" replace --from src.a g1/a --from 2>/dev/null
[ $? = 2 ] || fail "replace --from without a PATH: not a usage error"
"$OA" replace --from - g1/a --from - g2/b </dev/null 2>/dev/null
[ $? = 2 ] || fail "replace --from: standard input twice: not a usage error"
printf 'x\n' | "$OA" replace --from src.a g1/a --from nosuch g2/b 2>/dev/null
[ $? = 1 ] || fail "replace --from a missing source: exit not 1"
expect_file g1/a $'new a\n' "replace --from, a failed group changes nothing"
expect_file g2/b $'new b\n' "replace --from, a failed group changes nothing"

# Usage
"$OA" recover --all 2>/dev/null
[ $? = 2 ] || fail "recover --all without DIR: not a usage error"
"$OA" check --all std >/dev/null 2>&1
[ $? = 2 ] || fail "check --all on a regular file: not 2"
"$OA" help recover | grep -q -- '--all' || fail "recover's help does not document --all"
"$OA" help check | grep -q -- '--all' || fail "check's help does not document --all"

[ $fails = 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all passed"
