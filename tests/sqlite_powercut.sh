#!/bin/bash
# sqlite_powercut.sh - real-kernel power cuts of SQLite through the oatomic
# VFS on ext4 and XFS.
# timeout: 900
#
# For each file system: a loop-mounted image; CUTS times, each on a fresh
# database (sqlite_torture init, through the VFS): start the sqlite_torture
# writer on it (random multi-statement transactions, some spilling, some
# rolled back; after each COMMIT returns, its number goes to an ack file
# OUTSIDE the mount, fdatasync'd), wait for the first ack, wait a random
# 0-300 ms, then FS_IOC_SHUTDOWN with NOLOGFLUSH (nothing more reaches the
# disk: a power cut as far as the file system is concerned), SIGKILL the
# writer, umount, mount again (log replay), and sqlite_torture check: the
# database opens through the VFS (oatomic recovery), PRAGMA
# integrity_check is "ok", the rows are exactly those of the last
# acknowledged transaction or of the next committed one (row by row against
# a model), and no -journal, -wal or -shm file exists.
#
# Needs root, loop devices, mkfs.ext4 / mkfs.xfs; skips (77) otherwise.
# Environment: SQLITE_POWERCUT_CUTS (default 100 per file system, 30 when
# BUILD is a sanitizer build, *asan*), SQLITE_POWERCUT_FS (default
# "ext4 xfs"), SQLITE_POWERCUT_SEED (default from the clock; printed, and
# with it a run repeats: the per-cut seeds and delays follow from it),
# OA_TEST_DIR, BUILD.
# Test hook: SQLITE_POWERCUT_HELPER (default $BUILD/tests/sqlite_torture),
# the program run as "HELPER init DB", "HELPER writer DB ACK SEED" and
# "HELPER check DB ACK SEED"; point it at a broken one to see the test fail.
#
# Note: the loop device passes every write the file system issued to the
# image, so this models a cut of the file system (lost: whatever it had not
# written yet, including its log), not a drive that loses its volatile cache.

set -u

here=$(cd "$(dirname "$0")" && pwd)
. "$here/util/fs.sh"
pc_build   # root, build, T
H=${SQLITE_POWERCUT_HELPER:-$build/tests/sqlite_torture}

need_loop_mounts
for t in "$T" "$H"; do
	[ -x "$t" ] || { echo "sqlite_powercut: $t not built"; exit 1; }
done

case $build in
*asan*) CUTS=${SQLITE_POWERCUT_CUTS:-30} ;;
*) CUTS=${SQLITE_POWERCUT_CUTS:-100} ;;
esac
SEED=${SQLITE_POWERCUT_SEED:-$(( ($(date +%s%N) / 1000) % 1000000000 ))}
FSLIST=${SQLITE_POWERCUT_FS:-ext4 xfs}

if [ -n "${OA_TEST_DIR:-}" ]; then
	W=$OA_TEST_DIR/sqlite_powercut
	mkdir -p "$W"
else
	W=$(mktemp -d /tmp/oa-sqlite-powercut.XXXXXX)
fi

LOOP=
MNT=
WPID=
cleanup() { cleanup_mount; }
trap 'cleanup' EXIT
trap 'cleanup; exit 1' INT TERM HUP

# keep_failure: keep the mount's files, the ack and the writer's log in
# $W/fail-FS-I
keep_failure() {
	local keep=$W/fail-$fs-$i
	mkdir -p "$keep" && cp -a "$mnt"/. "$keep"/ && cp "$ack" "$log" "$keep"/ &&
		echo "$fs: database, sidecar files, ack and log kept in $keep"
}


# run_fs FS: returns 0, 1 on a violation or failure, 77 when FS cannot be had
run_fs() {
	local fs=$1 img=$W/$1.img mnt=$W/mnt-$1 size=512M mkfs
	case $fs in
	ext4) mkfs="mkfs.ext4 -q -F" ;;
	xfs)  mkfs="mkfs_xfs" ;;   # xfsprogs >= 5.19 wants > 300 MB
	*) echo "sqlite_powercut: unknown fs $fs"; return 1 ;;
	esac
	command -v "mkfs.$fs" >/dev/null || { echo "$fs: skipped: no mkfs.$fs"; return 77; }
	grep -qw "$fs" /proc/filesystems || modprobe "$fs" 2>/dev/null
	grep -qw "$fs" /proc/filesystems || { echo "$fs: skipped: kernel has no $fs"; return 77; }

	rm -f "$img"
	truncate -s $size "$img" || return 1
	$mkfs "$img" >/dev/null 2>&1 || { echo "$fs: mkfs failed"; return 1; }
	LOOP=$(losetup -f --show "$img" 2>&1) || { echo "$fs: skipped: losetup: $LOOP"; LOOP=; return 77; }
	mkdir -p "$mnt"
	if [ "$fs" = xfs ]; then mount_xfs "$LOOP" "$img" "$mnt"
	else mount "$LOOP" "$mnt"; fi || { echo "$fs: skipped: cannot mount $LOOP"; return 77; }
	MNT=$mnt

	local snap= CUTNAME=cut   # (for cut_remount)
	local db=$mnt/db ack=$W/$fs.ack log=$W/$fs.log
	local fseed=$((SEED + ${#fs})) cseed ok=0 next=0 acks=0 i out a k delay
	local t0=$(date +%s)
	: > "$log"
	RANDOM=$fseed

	for ((i = 1; i <= CUTS; i++)); do
		cseed=$(( (RANDOM << 30 | RANDOM << 15 | RANDOM) + 1 ))
		delay=$((RANDOM % 301))
		rm -f "$db" "$db-journal" "$db-wal" "$db-shm" "$mnt"/.db.oa* "$ack"
		if ! out=$("$H" init "$db" 2>&1); then
			echo "$fs: cut $i: init failed: $out"
			return 1
		fi
		echo "--- cut $i seed $cseed" >>"$log"
		"$H" writer "$db" "$ack" $cseed >>"$log" 2>&1 &
		WPID=$!
		if ! wait_for "$ack" $WPID 10; then
			echo "$fs: cut $i: the writer made no commit (seed $cseed):"
			tail -5 "$log"
			return 1
		fi
		sleep_ms $delay
		cut_remount $WPID || return $?
		if ! out=$("$H" check "$db" "$ack" $cseed 2>&1); then
			echo "$fs: cut $i: FAILED (SQLITE_POWERCUT_SEED=$SEED, cut seed $cseed, delay ${delay} ms):"
			echo "$out" | sed "s/^/$fs: cut $i:   /"
			echo "$fs: cut $i: to repeat: SQLITE_POWERCUT_SEED=$SEED SQLITE_POWERCUT_FS=$fs SQLITE_POWERCUT_CUTS=$i $0"
			keep_failure
			return 1
		fi
		# ack A found K
		case $out in
		*"ack "*" found "*)
			a=${out##*ack }; a=${a%% *}
			k=${out##*found }; k=${k%%[!0-9]*}
			[ "$k" != "$a" ] && next=$((next + 1))
			acks=$((acks + a)) ;;
		*)
			echo "$fs: cut $i: check said no \"ack A found K\": $out"
			return 1 ;;
		esac
		ok=$((ok + 1))
	done

	umount "$mnt" 2>/dev/null && MNT=
	image_check "$fs" "$fs"
	cleanup
	local secs=$(( $(date +%s) - t0 ))
	echo "sqlite powercut $fs: $ok cuts, all integrity ok and acknowledged-or-next (the next in $next) (seed $fseed, ${secs}s, acknowledged transactions $acks)"
	rm -f "$img" "$ack" "$log"
	return 0
}

echo "sqlite_powercut: seed $SEED (SQLITE_POWERCUT_SEED to repeat), $CUTS cuts per file system, in $W, helper $H"
run_each_fs $FSLIST
rc=$?
[ -z "${OA_TEST_DIR:-}" ] && [ $rc = 0 ] && rm -rf "$W"
exit $rc
