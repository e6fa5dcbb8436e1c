#!/bin/bash
# powercut_gcommit.sh - real-kernel power cuts of batched commits (group
# commit: src/gcommit.c).
# timeout: 600
#
# An ext4 image and an XFS image, loop-mounted, a file on each.  CUTS
# rounds: conf_gcommit's writer runs 8 threads (or, by turns of three
# rounds, 8 processes: src/xcommit.c), each with its own handle,
# committing a stamp into two pages of its own, again and again (their
# commits batched: one flush for the queued ones); each thread stores the
# stamp it last saw acknowledged in a file OUTSIDE the mounts (mapped: the
# writer is killed, the machine is not), and only while the file system
# is up.  After a random 0-300 ms, FS_IOC_SHUTDOWN with NOLOGFLUSH cuts the
# file's file system (ext4, XFS by turns), the writer is killed, the file
# system is unmounted and mounted again (log replay); every third round
# the writer is only killed.  Then `conf_gcommit check`: after recovery
# every thread's pages hold the stamp it last saw acknowledged or the
# next one, never two commits.
#
# Needs root, loop devices, mkfs.ext4 and mkfs.xfs; skips (77) otherwise.
# Environment: POWERCUT_GCOMMIT_CUTS (rounds; else POWERCUT_CUTS, else 90),
# POWERCUT_SEED, OA_TEST_DIR, BUILD.

set -u

here=$(cd "$(dirname "$0")" && pwd)
. "$here/util/fs.sh"
pc_build   # root, build, T
G=$build/tests/conf_gcommit

need_loop_mounts mkfs.ext4 mkfs.xfs
for t in "$T" "$G"; do
	[ -x "$t" ] || { echo "powercut_gcommit: $t not built"; exit 1; }
done
CUTS=${POWERCUT_GCOMMIT_CUTS:-${POWERCUT_CUTS:-90}}
RANDOM=${POWERCUT_SEED:-$$}
echo "NOTE: seed ${POWERCUT_SEED:-$$} (POWERCUT_SEED repeats it)"

work=$(mktemp -d "${OA_TEST_DIR:-/tmp}/pcgc.XXXXXX")
two_images "$work"   # E, X (mounts), LE, LX; cleanup at exit
"$G" init "$E/f" && "$G" init "$X/f" || exit 1
sync

declare -A n_of=()
acked=0
for ((i = 1; i <= CUTS; i++)); do
	case $((i % 3)) in
	0) mnt=$E lo=$LE name=ext4 cut=1 ;;
	1) mnt=$X lo=$LX name=XFS cut=1 ;;
	2) if ((i % 2)); then mnt=$E lo=$LE; else mnt=$X lo=$LX; fi
	   name=kill cut=0 ;;
	esac
	ACK=$work/ack
	rm -f "$ACK"   # this round's acks only (a writer killed before it starts leaves none)
	# threads of one process (gcommit.c) and processes (xcommit.c), by
	# turns of three rounds
	how=threads
	(( (i / 3) % 2 )) && how=processes
	"$G" writer "$mnt/f" "$ACK" "$i" $how 2>>"$work/writer.log" &
	WPID=$!
	sleep_ms $((RANDOM % 300))
	if [ $cut = 1 ]; then
		# fs.sh's cut: shutdown, kill, umount, mount (log replay)
		fs=$name CUTNAME=round snap= LOOP=$lo MNT=$mnt
		cut_remount $WPID
		case $? in
		0) ;;
		77) echo "SKIP: $fs cannot be shut down"; exit 77 ;;
		*) exit 1 ;;
		esac
		MNT= LOOP=
	else
		kill -9 $WPID 2>/dev/null
		wait $WPID 2>/dev/null
		WPID=
	fi
	if ! out=$("$G" check "$mnt/f" "$ACK" 2>&1); then
		echo "round $i ($name): VIOLATION"
		echo "$out"
		exit 1
	fi
	n_of[$name]=$(( ${n_of[$name]:-0} + 1 ))
	n_of[$how]=$(( ${n_of[$how]:-0} + 1 ))
	[ "$out" -gt 0 ] 2>/dev/null && acked=$((acked + 1))
done
# the check proves something only where commits were acknowledged
if [ $((acked * 2)) -lt $CUTS ]; then
	echo "only $acked of $CUTS rounds had an acknowledged commit: the writer does not work"
	tail "$work/writer.log"
	exit 1
fi
echo "powercut_gcommit: $CUTS rounds (cuts of the ext4 ${n_of[ext4]:-0}, of the XFS ${n_of[XFS]:-0}; the writer killed, no cut ${n_of[kill]:-0}; writers threads ${n_of[threads]:-0}, processes ${n_of[processes]:-0}; $acked with commits acknowledged), 0 violations"
exit 0
