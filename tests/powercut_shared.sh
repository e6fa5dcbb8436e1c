#!/bin/bash
# powercut_shared.sh - a real-kernel power cut aimed at the blocks a file
# shares with its journal after a clone (docs/FORMAT.md, I12).
# timeout: 300
#
# `torture_cut shared-cut` (tests/torture_cut.c) commits 1 MiB (the clone method
# clones it from the journal: the file and the journal share its blocks),
# commits nearly all of it again in 32 KiB writes (journal records, applied
# in place: the file's pages copy on write), has the file's pages written back (as the kernel's own writeback
# may at any moment: the file now maps new blocks, in the memory of the file
# system's log only), writes 1 MiB of a transaction it never commits and has
# the journal's pages written back, then cuts with FS_IOC_SHUTDOWN
# (NOLOGFLUSH).  After umount, mount (log replay) and recovery the file must
# be exactly the state after the second commit.  Were the journal to write
# over blocks it shared with the file, XFS's log replay would map them into
# the file again, holding the uncommitted bytes.
#
# Runs on XFS (with the exchange feature where the kernel takes it) with
# the clone method forced and with AUTO, ROUNDS times each (default 3).
# Needs root, loop devices and mkfs.xfs; skips (77) otherwise.  Btrfs never
# overwrites a block in place, and ext4 shares none.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/util/fs.sh"
pc_build   # root, build, T
work=${OA_TEST_DIR:-$(mktemp -d)}
ROUNDS=${POWERCUT_SHARED_ROUNDS:-3}

skip() { echo "SKIP: $*"; exit 77; }
need_loop_mounts mkfs.xfs
[ -x "$T" ] || { echo "powercut_shared: $T not built"; exit 1; }

img=$work/xfs.img mnt=$work/mnt LOOP=
cleanup() {
	mountpoint -q "$mnt" 2>/dev/null && { umount "$mnt" 2>/dev/null || umount -l "$mnt"; }
	[ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null
	LOOP=
}
trap cleanup EXIT
mkdir -p "$mnt"
truncate -s 512M "$img" && mkfs_xfs "$img" || skip "mkfs.xfs failed"
LOOP=$(losetup -f --show "$img") || skip "losetup failed"
mount_xfs "$LOOP" "$img" "$mnt" || { echo "mount failed"; exit 1; }

fail=0 runs=0
for method in clone ""; do
	for r in $(seq 1 "$ROUNDS"); do
		name="${method:-auto} round $r"
		file=$mnt/f-${method:-auto}-$r
		expect=$work/expect
		OATOMIC_METHOD=$method "$T" shared-cut "$file" "$expect" "$mnt"
		rc=$?
		if [ $rc = 77 ]; then skip "FS_IOC_SHUTDOWN not supported"; fi
		[ $rc = 0 ] || { echo "$name: shared-cut exited $rc"; fail=1; }
		umount "$mnt" || { echo "$name: umount failed"; exit 1; }
		mount "$LOOP" "$mnt" || { echo "$name: mount failed"; exit 1; }
		[ $rc = 0 ] || continue
		OATOMIC_METHOD=$method "$T" recover "$file" ||
			{ echo "$name: recovery failed"; fail=1; continue; }
		runs=$((runs + 1))
		if cmp -s "$file" "$expect"; then
			echo "$name: the file is the last committed state"
		else
			fail=1
			echo "$name: VIOLATION: the file is not the last committed state"
			cmp -l "$file" "$expect" | awk 'NR == 1 { first = $1 - 1 }
				END { printf "  %d bytes differ, the first at offset %d\n", NR, first }'
			cmp -l "$file" "$expect" 2>/dev/null | head -3
		fi
		rm -f "$mnt"/f-* "$mnt"/.f-*
	done
done
echo "powercut_shared: $runs cuts, $([ $fail = 0 ] && echo no violation || echo FAILED)"
exit $fail
