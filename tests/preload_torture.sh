#!/bin/bash
# preload_torture.sh - unmodified programs under `oatomic run`, killed and
# cut at random moments: the file must hold exactly the last version the
# program acknowledged (after its commit) or the next one - never a mix,
# never a torn or truncated version.
#
# The programs are python3 (tests/util/pl_writer.py, plain Python file I/O:
# an in-place rewrite committed by os.fsync, an O_TRUNC rewrite through a
# buffered file, a rewrite committed by the last close, stores through a
# mapping committed by flush) and dash (each version a `> file` redirection
# of a loop of printf, committed at the redirection's close).
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
# Environment: PRELOAD_KILLS (default 60), PRELOAD_CUTS (default 16 per
# file system), PRELOAD_FS (default "ext4 xfs").
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
KILLS=${PRELOAD_KILLS:-60}
CUTS=${PRELOAD_CUTS:-16}
FSLIST=${PRELOAD_FS:-ext4 xfs}

[ -x "$PY" ] || { echo "SKIP: no $PY"; exit 77; }
[ -x "$OA" ] && [ -f "$OATOMIC_PRELOAD" ] || { echo "$OA not built"; exit 1; }
fails=0
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
MODES="inplace trunc close mmap sh"

# init MODE FILE: version 0, written plainly
init() {
	if [ "$1" = sh ]; then "$PY" "$PW" init sh "$2"
	else "$PY" "$PW" init "$1" "$2"; fi
}

# start MODE FILE ACK: the writer, in its own process group; prints its pid
start() {
	local mode=$1 file=$2 ackf=$3
	if [ "$mode" = sh ]; then
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
		msg=$("$PY" "$PW" check "$mode" "$f" "$ackf") ||
			fail "kill $r ($mode): $msg"
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
		for mode in inplace trunc close mmap; do
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
			msg=$("$PY" "$PW" check "$mode" "$f" "$ackf") ||
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
