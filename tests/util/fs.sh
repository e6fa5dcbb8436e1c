# tests/util/fs.sh - shell helpers for the tests that make file systems.
# Sourced (not run: tests/run runs only tests/*.sh).

# mkfs_xfs IMG: an XFS image with reflink (mkfs's default) and, where
# xfs_db can set it, the exchange-range feature (incompat bit 0x40), which
# Debian 12's mkfs.xfs is too old to set.  Kernels before 6.10 refuse to
# mount such an image: mount_xfs then makes a plain one.
mkfs_xfs() {
	mkfs.xfs -q -f "$1" >/dev/null 2>&1 || return 1
	command -v xfs_db >/dev/null || return 0
	local v
	v=$(xfs_db -c 'sb 0' -c 'print features_incompat' "$1" 2>/dev/null |
	    awk '{ print $3 }')
	[ -n "$v" ] || return 0
	xfs_db -x -c 'sb 0' -c "write -d features_incompat $(printf '0x%x' $((v | 0x40)))" \
		"$1" >/dev/null 2>&1
	return 0
}

# mount_xfs DEV IMG MNT: mount; if the kernel refuses the exchange feature,
# make IMG again without it and mount that.
mount_xfs() {
	mount "$1" "$3" 2>/dev/null && return 0
	echo "NOTE: $2: no exchange-range support in this kernel; plain XFS"
	mkfs.xfs -q -f "$2" >/dev/null 2>&1 && mount "$1" "$3"
}

# need_loop_mounts [CMD...]: skip the test (SKIP line, exit 77) unless it
# runs as root with loop devices and losetup, mount, umount and each CMD.
need_loop_mounts() {
	local c
	[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (mount, losetup)"; exit 77; }
	for c in losetup mount umount "$@"; do
		command -v "$c" >/dev/null || { echo "SKIP: no $c"; exit 77; }
	done
	[ -e /dev/loop-control ] || modprobe loop 2>/dev/null
	[ -e /dev/loop-control ] ||
		{ echo "SKIP: no loop devices (/dev/loop-control)"; exit 77; }
}

# For the power cuts (powercut*.sh, sqlite_powercut.sh), from here on.

# pc_build: the tree's paths from the script's directory $here: root, build
# ($BUILD, default build, made absolute) and T (the torture_cut helper).
pc_build() {
	root=$(cd "$here/.." && pwd)
	build=${BUILD:-build}
	case $build in /*) ;; *) build=$root/$build ;; esac
	T=$build/tests/torture_cut
}

# two_images WORK: an ext4 image (256 MiB) and an XFS one (512 MiB, with
# reflink and, where the kernel takes it, range exchange) in WORK,
# loop-mounted at E=WORK/ext4 and X=WORK/xfs (devices LE, LX); an EXIT trap
# (two_images_done) kills the writer WPID and undoes it all.  Skips (77)
# where they cannot be had.
two_images() {
	E=$1/ext4 X=$1/xfs LE= LX= WPID=
	trap two_images_done EXIT
	mkdir -p "$E" "$X"
	truncate -s 256M "$1/ext4.img" && truncate -s 512M "$1/xfs.img" || exit 1
	mkfs.ext4 -q -F "$1/ext4.img" >/dev/null 2>&1 || { echo "SKIP: mkfs.ext4 failed"; exit 77; }
	mkfs_xfs "$1/xfs.img" || { echo "SKIP: mkfs.xfs failed"; exit 77; }
	LE=$(losetup -f --show "$1/ext4.img") || { echo "SKIP: losetup"; exit 77; }
	LX=$(losetup -f --show "$1/xfs.img") || { echo "SKIP: losetup"; exit 77; }
	mount "$LE" "$E" || { echo "SKIP: cannot mount ext4"; exit 77; }
	mount_xfs "$LX" "$1/xfs.img" "$X" || { echo "SKIP: cannot mount XFS"; exit 77; }
	TWO_IMAGES=$1
}

two_images_done() {
	local m
	if [ -n "$WPID" ]; then kill -9 $WPID 2>/dev/null; wait $WPID 2>/dev/null; fi
	for m in "$E" "$X"; do
		mountpoint -q "$m" && { umount "$m" 2>/dev/null || umount -l "$m"; }
	done
	[ -n "$LE" ] && losetup -d "$LE" 2>/dev/null
	[ -n "$LX" ] && losetup -d "$LX" 2>/dev/null
	rm -rf "${TWO_IMAGES:-}"
}

# sleep_ms N
sleep_ms() { sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))"; }

# wait_for FILE PID TENTHS: until FILE is non-empty; 1 if PID died or timeout
wait_for() {
	local n=0
	while [ ! -s "$1" ]; do
		kill -0 "$2" 2>/dev/null || [ -s "$1" ] || return 1
		n=$((n + 1))
		[ $n -le $(($3 * 10)) ] || return 1
		sleep 0.01
	done
	return 0
}

# cleanup_mount: kill the writer WPID, unmount MNT, detach LOOP (each if
# set), for the power cuts' traps.
cleanup_mount() {
	if [ -n "$WPID" ]; then kill -9 $WPID 2>/dev/null; wait $WPID 2>/dev/null; fi
	WPID=
	if [ -n "$MNT" ] && mountpoint -q "$MNT"; then
		umount "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
	fi
	MNT=
	if [ -n "$LOOP" ]; then losetup -d "$LOOP" 2>/dev/null; fi
	LOOP=
}

# cut_remount PID...: the cut, with the writers PID... running: a snapshot
# of the image (Btrfs; they are stopped first, so every ack they wrote is
# older than it) or FS_IOC_SHUTDOWN; then kill them, umount, and mount again
# (log replay).  Uses the caller's fs, i, mnt, img, snap (empty: no
# snapshot), CUTNAME, T (the torture_cut helper), LOOP, MNT, WPID.  Returns
# 0, 1 on a failure, 77 when the file system cannot be shut down.
cut_remount() {
	local sd p n
	if [ -n "$snap" ]; then
		for p; do kill -STOP $p 2>/dev/null; done
		rm -f "$snap"
		cp --reflink=always "$img" "$snap" ||
			{ echo "$fs: $CUTNAME $i: cannot clone the image"; return 1; }
	else
		sd=$("$T" shutdown "$mnt" 2>&1)
		case $? in
		0) ;;
		77) echo "$fs: skipped: $sd"; return 77 ;;
		*) echo "$fs: shutdown failed: $sd"; return 1 ;;
		esac
	fi
	for p; do
		kill -9 $p 2>/dev/null
		kill -CONT $p 2>/dev/null
		wait $p 2>/dev/null
	done
	WPID=
	for n in 1 2 3 4 5; do umount "$mnt" 2>/dev/null && break; sleep 0.2; done
	if mountpoint -q "$mnt"; then echo "$fs: $CUTNAME $i: umount failed"; return 1; fi
	MNT=
	if [ -n "$snap" ]; then
		# the cut's image replaces the one that ran on
		losetup -d "$LOOP" 2>/dev/null
		mv -f "$snap" "$img" || return 1
		LOOP=$(losetup -f --show "$img" 2>&1) || { echo "$fs: $CUTNAME $i: losetup: $LOOP"; LOOP=; return 1; }
	fi
	if ! mount "$LOOP" "$mnt"; then
		echo "$fs: $CUTNAME $i: mount after the cut failed (log replay)"
		dmesg | tail -20
		return 1
	fi
	MNT=$mnt
}

# image_check TYPE NAME: a read-only check of the unmounted image on LOOP
# (ext4: e2fsck -n, xfs: xfs_repair -n); a note naming NAME if the kernel
# left it inconsistent (nothing of oatomic's: a note, not a failure).
image_check() {
	case $1 in
	ext4) e2fsck -fn "$LOOP" >/dev/null 2>&1 || echo "$2: note: e2fsck -fn reports problems in the image (kernel, not oatomic)" ;;
	xfs)  if command -v xfs_repair >/dev/null; then
		local rout
		if ! rout=$(xfs_repair -n "$LOOP" 2>&1); then
			case $rout in
			*"unknown compat/rocompat/incompat features"*) ;;  # exchange bit: too new for this xfs_repair
			*) echo "$2: note: xfs_repair -n reports problems in the image (kernel, not oatomic)" ;;
			esac
		fi
	      fi ;;
	esac
}

# run_each_fs FS...: the caller's run_fs on each (0 ran, 77 could not be
# had, else failed), then its cleanup.  Returns 1 if any failed, else 77
# with a SKIP line if none ran, else 0.
run_each_fs() {
	local fs r rc=0 ran=0
	for fs; do
		run_fs "$fs"
		r=$?
		cleanup
		case $r in
		0) ran=$((ran + 1)) ;;
		77) ;;
		*) rc=1 ;;
		esac
	done
	if [ $rc = 0 ] && [ $ran = 0 ]; then
		echo "SKIP: no file system could be tested"
		return 77
	fi
	return $rc
}
