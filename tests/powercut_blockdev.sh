#!/bin/bash
# powercut_blockdev.sh - real-kernel power cuts of a block device's journal.
# timeout: 600
#
# A block device - a loop device over an image file on an ext4 image of
# its own, loop-mounted - is written through oatomic with its journal in a
# directory of that same ext4, so that a cut of it loses whatever neither
# the device nor the journal had flushed.  CUTS times: conf_blockdev's
# writer stamps 16 blocks spread over the device with its round and
# commits, again and again, acknowledging each commit in a file outside
# the mount (fdatasync'd); after a random 0-300 ms FS_IOC_SHUTDOWN
# (NOLOGFLUSH) cuts the ext4, the writer is killed, the device detached,
# the ext4 unmounted and mounted again (log replay) and the image attached
# again (as whichever loop device is free: the journal must find the
# device by its identity, not its name); then recovery, and all 16 blocks
# must carry the last acknowledged round or the next (conf_blockdev
# check).  A loop device reports no atomic write unit: the RWF_ATOMIC path
# for a device that has one is not tried here (docs/TESTING.md).
#
# Needs root, loop devices and mkfs.ext4; skips (77) otherwise.
# Environment: POWERCUT_BLOCKDEV_CUTS (else POWERCUT_CUTS, else 60),
# POWERCUT_SEED, OA_TEST_DIR, BUILD.

set -u

here=$(cd "$(dirname "$0")" && pwd)
. "$here/util/fs.sh"
pc_build   # root, build, T
B=$build/tests/conf_blockdev

need_loop_mounts mkfs.ext4
for t in "$T" "$B"; do
	[ -x "$t" ] || { echo "powercut_blockdev: $t not built"; exit 1; }
done
CUTS=${POWERCUT_BLOCKDEV_CUTS:-${POWERCUT_CUTS:-60}}
RANDOM=${POWERCUT_SEED:-$$}
echo "NOTE: seed ${POWERCUT_SEED:-$$} (POWERCUT_SEED repeats it)"

work=$(mktemp -d "${OA_TEST_DIR:-/tmp}/pcblk.XXXXXX")
M=$work/jfs LJ= LD= WPID=
cleanup() {
	if [ -n "$WPID" ]; then kill -9 $WPID 2>/dev/null; wait $WPID 2>/dev/null; fi
	mountpoint -q "$M" && { umount "$M" 2>/dev/null || umount -l "$M"; }
	[ -n "$LJ" ] && losetup -d "$LJ" 2>/dev/null
	[ -n "$LD" ] && losetup -d "$LD" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$M"
truncate -s 256M "$work/jfs.img" && truncate -s 1M "$work/spacer.img" || exit 1
mkfs.ext4 -q -F "$work/jfs.img" >/dev/null 2>&1 || { echo "SKIP: mkfs.ext4 failed"; exit 77; }
LJ=$(losetup -f --show "$work/jfs.img") || { echo "SKIP: losetup"; exit 77; }
mount "$LJ" "$M" || { echo "SKIP: cannot mount ext4"; exit 77; }
mkdir -p "$M/j"
truncate -s 64M "$M/disk.img" && sync || exit 1
LD=$(losetup -f --show "$M/disk.img") || { echo "SKIP: losetup"; exit 77; }
ACK=$work/ack
declare -A names=()

for ((i = 1; i <= CUTS; i++)); do
	"$B" writer "$LD" "$M/j" "$ACK" 2>>"$work/writer.log" &
	WPID=$!
	sleep_ms $((RANDOM % 300))
	sd=$("$T" shutdown "$M" 2>&1)
	case $? in
	0) ;;
	77) echo "SKIP: $sd"; exit 77 ;;
	*) echo "shutdown failed: $sd"; exit 1 ;;
	esac
	kill -9 $WPID 2>/dev/null
	wait $WPID 2>/dev/null
	WPID=
	losetup -d "$LD"; LD=
	for n in 1 2 3 4 5 6 7 8 9 10; do umount "$M" 2>/dev/null && break; sleep 0.2; done
	mountpoint -q "$M" && { echo "cut $i: umount failed"; exit 1; }
	mount "$LJ" "$M" || { echo "cut $i: mount after the cut failed"; dmesg | tail; exit 1; }
	# every other cut a spacer takes the free number first: the device
	# comes back under another name
	SP=
	[ $((i % 2)) = 0 ] && SP=$(losetup -f --show "$work/spacer.img" 2>/dev/null)
	LD=$(losetup -f --show "$M/disk.img") || { echo "cut $i: losetup: $LD"; LD=; exit 1; }
	[ -n "$SP" ] && losetup -d "$SP"
	names[$LD]=1
	if ! out=$("$B" check "$LD" "$M/j" "$ACK" 2>&1); then
		echo "cut $i: VIOLATION"
		echo "$out"
		exit 1
	fi
done
last=$(tail -n 1 "$ACK" 2>/dev/null)
echo "powercut_blockdev: $CUTS cuts, 0 violations; the device came back as ${#names[@]} name(s); last acknowledged round ${last:-none}"
exit 0
