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

# For the power cuts (powercut.sh, sqlite_powercut.sh):
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
