#!/bin/bash
# preload_torture.sh - unmodified programs under `oatomic run`, killed and
# cut at random moments: the file must hold exactly the last version the
# program acknowledged (after its commit) or the next one - never a mix,
# never a torn or truncated version.
#
# The programs are python3 (tests/util/pl_writer.py, plain Python file I/O:
# an in-place rewrite committed by os.fsync, an O_TRUNC rewrite through a
# buffered file, a rewrite committed by the last close, stores through a
# mapping committed by flush), dash (each version a `> file` redirection
# of a loop of printf, committed at the redirection's close), and one run
# per version of cp (over the file), dd (conv=notrunc,fsync), tar -x
# --overwrite and sqlite3 (journal_mode=MEMORY, every row updated; checked
# by its integrity check and a counter in every row).
#
#  1. kills: KILLS rounds over the modes, on the scratch directory's file
#     system: start the writer, SIGKILL its process group after a random
#     0-250 ms, `oatomic recover`, check;
#  2. power cuts (root, loop devices): CUTS per file system, ext4 and XFS:
#     the file on a loop mount, the acks outside it (fsync'd); at a random
#     moment FS_IOC_SHUTDOWN without log flush (torture_cut shutdown),
#     SIGKILL, umount, mount (log replay), recover, check.  No temporary of
#     the preload may remain (they are O_TMPFILE: nothing to clean).
#
# Environment: PRELOAD_KILLS (default 90, over the 9 modes), PRELOAD_CUTS
# (default 24 per file system, over the 8 modes but dash's), PRELOAD_FS
# (default "ext4 xfs").
# timeout: 900
#
# SPDX-License-Identifier: MIT
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${BUILD:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
OA=$build/oatomic
T=$build/tests/torture_cut
export OATOMIC_PRELOAD=$build/liboatomic-preload.so
W=${OA_TEST_DIR:-$(mktemp -d)}
PY=/usr/bin/python3
PW=$here/util/pl_writer.py
. "$here/util/fs.sh"
KILLS=${PRELOAD_KILLS:-90}
CUTS=${PRELOAD_CUTS:-24}
FSLIST=${PRELOAD_FS:-ext4 xfs}

[ -x "$PY" ] || { echo "SKIP: no $PY"; exit 77; }
[ -x "$OA" ] && [ -f "$OATOMIC_PRELOAD" ] || { echo "$OA not built"; exit 1; }
fails=0
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
MODES="inplace trunc close mmap sh cp dd tar sqlite"
command -v sqlite3 >/dev/null || MODES=${MODES% sqlite}
command -v tar >/dev/null || MODES=${MODES/ tar/}

# The other programs' versions alternate between two contents (version V
# is content V % 2): cp copies src.K over the file (sizes differ), dd
# writes dsrc.K over it in place (conv=notrunc,fsync; same size), tar -x
# --overwrite extracts it from t.K; the file must be exactly one of the two.
# sqlite3: 200 rows, each transaction adds 1 to every v and rewrites every
# pad; the database must pass its integrity check with min(v) = max(v) = the
# last acknowledged version or the next.
SRC=$W/src
mkdir -p "$SRC/t0" "$SRC/t1"
head -c 70000 /dev/urandom > "$SRC/src.0"
head -c 33333 /dev/urandom > "$SRC/src.1"
head -c 65536 /dev/urandom > "$SRC/dsrc.0"
head -c 65536 /dev/urandom > "$SRC/dsrc.1"
for k in 0 1; do
	cp "$SRC/src.$k" "$SRC/t$k/f-tar"
	tar -cf "$SRC/t.$k" -C "$SRC/t$k" f-tar 2>/dev/null
done
PROGS="cp dd tar sqlite"
is_prog() { case " $PROGS " in *" $1 "*) return 0 ;; esac; return 1; }

# init MODE FILE: version 0, written plainly
init() {
	case $1 in
	cp|tar) cp "$SRC/src.0" "$2" ;;
	dd) cp "$SRC/dsrc.0" "$2" ;;
	sqlite) rm -f "$2"; sqlite3 "$2" "CREATE TABLE t(k INTEGER PRIMARY KEY, v INT, pad BLOB);
		WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200)
		INSERT INTO t SELECT x, 0, randomblob(200) FROM c;" ;;
	*) "$PY" "$PW" init "$1" "$2" ;;
	esac
}

# check MODE FILE ACK: prints what is wrong, returns 1; else 0
check() {
	local mode=$1 f=$2 ackf=$3 a
	if ! is_prog "$mode"; then
		"$PY" "$PW" check "$mode" "$f" "$ackf"
		return
	fi
	a=$(tail -n 1 "$ackf" 2>/dev/null); a=${a:-0}
	case $mode in
	cp|tar) cmp -s "$f" "$SRC/src.0" || cmp -s "$f" "$SRC/src.1" ||
		{ echo "$f: $(stat -c %s "$f") bytes, neither version (acked $a)"; return 1; } ;;
	dd) cmp -s "$f" "$SRC/dsrc.0" || cmp -s "$f" "$SRC/dsrc.1" ||
		{ echo "$f: neither version (acked $a)"; return 1; } ;;
	sqlite)
		local got
		got=$(sqlite3 "$f" "PRAGMA integrity_check; SELECT min(v) || ' ' || max(v) FROM t;" 2>&1)
		case $got in
		"ok
$a $a"|"ok
$((a + 1)) $((a + 1))") ;;
		*) echo "$f: acked $a, got: $(echo $got)"; return 1 ;;
		esac ;;
	esac
	return 0
}

# start MODE FILE ACK: the writer, in its own process group; prints its pid
start() {
	local mode=$1 file=$2 ackf=$3
	if is_prog "$mode"; then
		# one program run per version, acknowledged (and the ack
		# flushed) after it exited 0
		setsid "$OA" run -- sh -c '
			mode=$1 f=$2 ackf=$3 src=$4; v=0
			while :; do
				v=$((v + 1)); k=$((v % 2))
				case $mode in
				cp) cp "$src/src.$k" "$f" ;;
				dd) dd if="$src/dsrc.$k" of="$f" bs=4k conv=notrunc,fsync status=none ;;
				tar) tar -xf "$src/t.$k" --overwrite -C "${f%/*}" ;;
				sqlite) sqlite3 "$f" "PRAGMA journal_mode=MEMORY; UPDATE t SET v = v + 1, pad = randomblob(200);" >/dev/null ;;
				esac || exit 1
				echo $v >> "$ackf"; sync "$ackf"
			done' sh "$mode" "$file" "$ackf" "$SRC" >/dev/null 2>&1 &
	elif [ "$mode" = sh ]; then
		# dash: version V is lines V:1 .. V:(200 + V % 50); its ack
		# (O_APPEND, left alone by the preload) after the close
		setsid "$OA" run -- sh -c '
			v=0
			while :; do
				v=$((v + 1)); n=1; last=$((200 + v % 50))
				while [ $n -le $last ]; do
					printf "%d:%d\n" $v $n; n=$((n + 1))
				done > "$1"
				echo $v >> "$2"
			done' sh "$file" "$ackf" >/dev/null 2>&1 &
	else
		setsid "$OA" run -- "$PY" "$PW" write "$mode" "$file" "$ackf" \
			>/dev/null 2>&1 &
	fi
	echo $!
}

# stop PID: SIGKILL the writer's process group, wait for it
stop() {
	kill -KILL -- "-$1" 2>/dev/null
	wait "$1" 2>/dev/null
}

# ---- 1. kills -----------------------------------------------------------------
d=$W/kills
mkdir -p "$d"
r=0
while [ $r -lt "$KILLS" ]; do
	for mode in $MODES; do
		[ $r -lt "$KILLS" ] || break
		r=$((r + 1))
		f=$d/f-$mode ackf=$d/ack-$mode
		rm -f "$f" "$ackf"
		init "$mode" "$f"
		pid=$(start "$mode" "$f" "$ackf")
		sleep "0.$(printf '%03d' $((RANDOM % 250)))"
		stop "$pid"
		"$OA" recover "$f" >/dev/null 2>&1 || fail "kill $r ($mode): recover failed"
		msg=$(check "$mode" "$f" "$ackf") || fail "kill $r ($mode): $msg"
	done
done
echo "kills: $r rounds"

# ---- 2. power cuts ---------------------------------------------------------------
if [ "$(id -u)" != 0 ] || ! command -v losetup >/dev/null || [ ! -x "$T" ]; then
	echo "NOTE: not root or no losetup: the power cuts are left out"
	[ $fails = 0 ] || exit 1
	exit 0
fi
mnt=""
loopdev=""
cleanup() {
	[ -n "$mnt" ] && mountpoint -q "$mnt" && umount "$mnt"
	[ -n "$loopdev" ] && losetup -d "$loopdev" 2>/dev/null
	loopdev=""
}
trap cleanup EXIT
for fs in $FSLIST; do
	command -v "mkfs.$fs" >/dev/null || { echo "NOTE: no mkfs.$fs"; continue; }
	img=$W/$fs.img mnt=$W/mnt-$fs
	mkdir -p "$mnt"
	truncate -s 512M "$img"
	if [ "$fs" = xfs ]; then mkfs_xfs "$img"
	else mkfs.ext4 -q -F "$img" >/dev/null 2>&1; fi || { fail "$fs: mkfs"; continue; }
	loopdev=$(losetup -f --show "$img") || { echo "SKIP: no loop device"; exit 77; }
	if [ "$fs" = xfs ]; then mount_xfs "$loopdev" "$img" "$mnt"
	else mount "$loopdev" "$mnt"; fi || { fail "$fs: mount"; cleanup; continue; }
	c=0
	while [ $c -lt "$CUTS" ]; do
		for mode in inplace trunc close mmap $PROGS; do
			[ $c -lt "$CUTS" ] || break
			c=$((c + 1))
			f=$mnt/f-$mode ackf=$W/ack-$fs-$mode
			rm -f "$f" "$ackf"
			init "$mode" "$f"
			sync
			pid=$(start "$mode" "$f" "$ackf")
			sleep "0.$(printf '%03d' $((50 + RANDOM % 300)))"
			sd=$("$T" shutdown "$mnt" 2>&1) || { fail "$fs: shutdown: $sd"; stop "$pid"; break 2; }
			stop "$pid"
			# (a process the cut caught in the file system may take a
			# moment to go)
			for n in 1 2 3 4 5 6 7 8 9 10; do
				umount "$mnt" 2>/dev/null && break
				sleep 0.2
			done
			mountpoint -q "$mnt" && { fail "$fs: umount after cut $c: $(fuser -vm "$mnt" 2>&1 | tail -n +2)"; break 2; }
			mount "$loopdev" "$mnt" || { fail "$fs: mount after cut $c"; break 2; }
			"$OA" recover "$f" >/dev/null 2>&1 ||
				fail "$fs cut $c ($mode): recover failed"
			msg=$(check "$mode" "$f" "$ackf") ||
				fail "$fs cut $c ($mode): $msg"
			# nothing of the preload's is left beside the file
			left=$(ls -A "$mnt" | grep -v '^f-\|^\.f-.*\.oa\|^lost+found$')
			[ -z "$left" ] || fail "$fs cut $c: left behind: $left"
		done
	done
	echo "$fs: $c power cuts"
	cleanup
done

[ $fails = 0 ] || exit 1
echo "preload_torture: all passed"
