#!/bin/bash
# fsmatrix.sh - the conformance tests, `oatomic run`'s programs
# (preload_programs.sh, once per file system) and a kill torture on every
# kind of file system the library claims: tmpfs, and XFS and Btrfs on loop devices
# (ext4 is where the rest of the suite runs, and powercut.sh covers ext4 and
# XFS with real power cuts).
# timeout: 900
#
# Each entry is FS or FS:METHOD; METHOD is forced on every handle the tests
# open with OA_METHOD_AUTO (OATOMIC_METHOD).  AUTO is the journal on tmpfs,
# exchange + kernel atomic writes + clone on XFS (made with the exchange-range
# feature), clone on Btrfs; "xfs:exchange" sends every whole block through the
# exchange, "xfs:journal" keeps
# the portable method tested on XFS, "xfs:clone" runs the tests that aim kill
# points at the journal's protocol (unit_recover, conf_errors: they pin it,
# tu_pin_journal) with clone applies, and "xfs:kernel" forces every eligible
# transaction through RWF_ATOMIC.
#
# Needs root and loop devices for XFS and Btrfs (a file system whose mkfs is
# missing is skipped with a note; all missing: SKIP).  Environment:
# FSMATRIX_FS (default "tmpfs xfs xfs:journal xfs:clone xfs:kernel xfs:exchange btrfs"),
# FSMATRIX_KILLS (default 200, over the kill torture's spans, 64 KiB to a
# sparse 64 MiB), FSMATRIX_PAIR_KILLS (rounds of the torture of two writers
# on one file, torture_pair: default 30).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${BUILD:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
work=${OA_TEST_DIR:-$(mktemp -d)}
. "$here/util/fs.sh"
FSLIST=${FSMATRIX_FS:-tmpfs xfs xfs:journal xfs:clone xfs:kernel xfs:exchange btrfs}
# (the sanitizer pass, BUILD=*asan*, is for memory errors: 60 kills and 12
# pair rounds there)
case $build in
*asan*) KILLS=${FSMATRIX_KILLS:-60} PKILLS=${FSMATRIX_PAIR_KILLS:-12} ;;
*) KILLS=${FSMATRIX_KILLS:-200} PKILLS=${FSMATRIX_PAIR_KILLS:-30} ;;
esac
TESTS="conf_commit conf_ryw conf_visibility conf_abort_close conf_errors
       conf_recover conf_concurrency conf_perms unit_recover conf_methods
       conf_mmap conf_group"

[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (mount)"; exit 77; }

mnt=""
cleanup() {
	[ -n "$mnt" ] && mountpoint -q "$mnt" && umount "$mnt"
	[ -n "${loopdev:-}" ] && losetup -d "$loopdev" 2>/dev/null
	loopdev=""
}
trap cleanup EXIT

ran=0 failed=0
for entry in $FSLIST; do
	fs=${entry%%:*}
	export OATOMIC_METHOD=
	case $entry in *:*) OATOMIC_METHOD=${entry#*:} ;; esac
	mnt=$work/mnt-$fs
	mkdir -p "$mnt"
	loopdev=""
	case $fs in
	tmpfs)
		mount -t tmpfs -o size=1g tmpfs "$mnt" || { echo "$fs: mount failed"; failed=1; continue; } ;;
	xfs|btrfs)
		command -v "mkfs.$fs" >/dev/null || { echo "NOTE: no mkfs.$fs: $fs skipped"; continue; }
		img=$work/$fs.img
		truncate -s 1G "$img"
		if [ "$fs" = xfs ]; then mkfs_xfs "$img"
		else mkfs.btrfs -q -f "$img" >/dev/null 2>&1; fi || { echo "$fs: mkfs failed"; failed=1; continue; }
		loopdev=$(losetup -f --show "$img") || { echo "SKIP: no loop device"; exit 77; }
		if [ "$fs" = xfs ]; then mount_xfs "$loopdev" "$img" "$mnt"
		else mount "$loopdev" "$mnt"; fi || { echo "$fs: mount failed"; failed=1; cleanup; continue; } ;;
	*) echo "unknown file system $fs"; failed=1; continue ;;
	esac
	# conf_perms runs a part as an unprivileged user: it must be able to
	# walk down to its scratch directory.
	chmod 0711 "$work" "$mnt"
	ran=$((ran + 1))
	fs=$entry   # in the messages
	for t in $TESTS; do
		d=$(mktemp -d "$mnt/$t.XXXXXX")
		if OA_TEST_DIR=$d GROUP_KILLS=$KILLS timeout 300 "$build/tests/$t" >"$work/$fs-$t.log" 2>&1; then
			echo "$fs: $t ok"
		else
			echo "$fs: $t FAILED"; grep -v '^NOTE' "$work/$fs-$t.log" | tail -5
			failed=1
		fi
		rm -rf "$d"
	done
	# oatomic run's programs, once per file system (the preload's
	# temporary files: O_TMPFILE, SEEK_DATA, hole punching, xattrs)
	case $entry in
	*:*) ;;
	*)	d=$(mktemp -d "$mnt/preload.XXXXXX")
		chmod 0755 "$d"
		if OA_TEST_DIR=$d BUILD=$build timeout 300 "$here/preload_programs.sh" \
		     >"$work/$fs-preload.log" 2>&1; then
			echo "$fs: preload_programs ok"
		else
			echo "$fs: preload_programs FAILED"; grep -v '^NOTE' "$work/$fs-preload.log" | tail -5
			failed=1
		fi
		rm -rf "$d" ;;
	esac
	d=$(mktemp -d "$mnt/torture.XXXXXX")
	if OA_TEST_DIR=$d TORTURE_KILLS=$KILLS timeout 600 "$build/tests/torture_kill" \
	     --no-selftest >"$work/$fs-torture.log" 2>&1; then
		echo "$fs: torture $(grep -o 'kills=.*' "$work/$fs-torture.log" | tail -1)"
	else
		echo "$fs: torture FAILED"; tail -8 "$work/$fs-torture.log"; failed=1
	fi
	rm -rf "$d"
	d=$(mktemp -d "$mnt/pair.XXXXXX")
	if OA_TEST_DIR=$d timeout 300 "$build/tests/torture_pair" --kills $PKILLS \
	     --no-selftest >"$work/$fs-pair.log" 2>&1; then
		echo "$fs: torture $(grep -o 'pair rounds=.*' "$work/$fs-pair.log" | tail -1)"
	else
		echo "$fs: torture pair FAILED"; tail -8 "$work/$fs-pair.log"; failed=1
	fi
	rm -rf "$d"
	cleanup
done
[ $ran -gt 0 ] || { echo "SKIP: no file system could be made"; exit 77; }
exit $failed
