#!/bin/bash
# mutants.sh - the crash tests can fail: build the library with each planted
# protocol bug (src/internal.h, OA_MUTANT) and run the crash tests against
# it; every mutant must be caught by at least one of them.  Prints one line
# per mutant and "caught N of N"; exits 0 only when every one was caught.
# timeout: 1800
#
# Run by `make crash-mutants` and by the suite.  Environment:
#   MUTANTS          which (default: all, 1-10, 20-28, 30-35, 40-50, 52-68)
#   MUTANT_KILLS     kills of the kill torture per mutant (default 300)
#   MUTANT_CUTS      power cuts per file system per mutant (default 20)
#   MUTANT_TESTS     the crash tests to try, in order (default
#                    "sim_explore sim_faults unit_recover conf_recover
#                    torture_kill torture_pair powercut.sh": the power-loss
#                    simulator first, it is the cheapest and stops at its
#                    first violation; torture_pair is the kill torture with
#                    two writers on one file and a live reader)
#   MUTANT_SIM_STATES  crash states sim_explore may explore per mutant
#                    (default 300000)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root" || exit 2
case ${BUILD:-build} in
*asan*|*san*) echo "SKIP: the planted bugs are shown in the normal build's pass"
	exit 77 ;;
esac
MUTANTS=${MUTANTS:-1 2 3 4 5 6 7 8 9 10 20 21 22 23 24 25 26 27 28 30 31 32 33 34 35 40 41 42 43 44 45 46 47 48 49 50 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68}
KILLS=${MUTANT_KILLS:-300}
CUTS=${MUTANT_CUTS:-20}
work=$(mktemp -d "${TMPDIR:-/tmp}/oamutants.XXXXXX")
trap 'rm -rf "$work"' EXIT

declare -A what=(
	[1]="skip the commit flush (I2)"
	[2]="apply in place before the commit record (I3)"
	[3]="replay in reverse order (I7)"
	[4]="recovery ignores data checksums (I1)"
	[5]="checkpoint before the file is flushed (I5)"
	[6]="no healing of a dead committer (I10)"
	[7]="failed commit flush reported as success (I9)"
	[8]="no directory flush after creating a control or journal file (I8)"
	[9]="commit record trusted without all its data (I1)"
	[10]="checkpoint passes a failed flush of the file (I9)"
	[20]="kernel method writes while a journal commit awaits its checkpoint (I11)"
	[21]="journal recycled before the checkpoint covers it (I6)"
	[22]="exchange while a journal commit awaits its checkpoint (I11)"
	[23]="a journal found by name used without flushing its directory (I8)"
	[24]="clone method: the journal keeps blocks the file may still map on disk (I12)"
	[25]="recovery ignores the live area's evidence of an acknowledged commit (I13)"
	[26]="last close cuts the control file back before the file's flush (I14)"
	[27]="last close removes extra journals with commits the checkpoint does not cover (I14)"
	[28]="recovery replays extra journals of an earlier era (I15)"
	[30]="mappings: a page stored to is missed by the commit"
	[31]="mappings: stores join the transaction after its commit point"
	[32]="mappings: an abort leaves the aborted stores in the mapping"
	[33]="a checkpoint that failed for space retries its failed flush after giving the dropped bytes back (I9)"
	[34]="a checkpoint that failed for space gives back the journal bytes of a pending transaction (I1, FORMAT I4)"
	[35]="a write into a hole inside the file takes no space before the commit point: a full disk fails the apply after it (EIO) instead of the commit"
	[40]="oatomic run: a commit in two transactions, half of each extent in the first (P4)"
	[41]="oatomic run: a process's last close commits while another still holds the file (P5)"
	[42]="oatomic run: a hand-over to the temporary file copies the bytes written, not whole blocks (P2, P6)"
	[43]="SQLite VFS: every write commits at once, a transaction in pieces (Q1, Q2)"
	[44]="SQLite VFS: only xSync commits; synchronous=OFF transactions never do (Q2)"
	[45]="group: each member's record is a commit of its own, before the group's commit point (G2)"
	[46]="group: a member's recovery replays its record without asking the coordinator (G2)"
	[47]="group: the coordinator's recovery does not settle the members (G5)"
	[48]="group: members checkpointed before every file of the group is flushed (G5)"
	[49]="group commit: a batch's members acknowledged before the batch is durable (B1)"
	[50]="group commit: a batch that failed before its commit point reported as committed (B3)"
	[52]="a journal out of room at a transaction's first write is not started over: ENOSPC while checkpointed commits hold the space"
	[53]="a journal's room ahead takes the file system's free space whole: the next writer cannot make its journal (ENOSPC)"
	[54]="a commit on a full disk keeps its journal's room ahead: ENOSPC where giving it back would make the apply's blocks"
	[55]="a commit leaves the file's clean mark in place: readers opened on it read without a lock across the apply (M2)"
	[56]="a reader opened on the clean mark does not look at it again after a read (M2)"
	[57]="a read without the APPLY lock stands without looking at the apply generation again (I17)"
	[58]="an apply leaves the apply generation as it was: readers without the lock cannot see it (I17)"
	[59]="a dead leader's members settled committed whatever its recovery found (X4)"
	[60]="a slot a dead leader took, found by the next holder of COMMIT, taken for committed (X5)"
	[61]="other processes' commits acknowledged before their batch is durable (X2)"
	[62]="a clean control file taken as flushed without evidence: the kernel and exchange methods write after a cut a crash can undo (I14)"
	[63]="a handle forgets that its own cut made a hole: a write into it takes no space before the commit point"
	[64]="a handle trusts what it knew of holes after other handles' commits: the same"
	[65]="a handle takes the clean mark for removed in a later hold of COMMIT: a mark another handle's close set stays through its commit (M2)"
	[66]="exchange: a transaction written from offset 0 taken for a whole replace without covering what the file keeps (W1): the old bytes past it lost"
	[67]="exchange: a truncate leaves the shadow's blocks past it, and a whole replace exchanges them in (W1)"
	[68]="exchange: a whole replace that grows the file exchanged to EOF (W3): after a power cut the blocks past the old end read zeros"
)
# The methods' mutants need a file system that has the method: the kill
# torture on an XFS image with reflink and exchange (xfs-torture), first;
# the clone method's blocks shared with the file, the power cut aimed at
# them (powercut_shared.sh: the random cuts of powercut.sh hit that window
# about once in a few thousand).
declare -A tests_of=(
	[6]="torture_pair"   # a dead committer's half-applied commit seen by
	                     # the live reader at once; the simulator and
	                     # unit_recover hang on it (a reader waiting for a
	                     # committer that is gone) until their timeout
	[20]="xfs-torture"
	[22]="xfs-torture"
	[66]="xfs-torture"
	[67]="xfs-torture"
	[68]="preload_torture.sh"   # its cp and tar rounds grow a file by
	                            # half, on XFS, cut (the library's own
	                            # power cuts did not catch the growth)
	[24]="powercut_shared.sh"
	[25]="conf_damage"   # damage after a kill: no other test damages
	                     # an acknowledged commit in the boot that made it
	[28]="conf_clean"    # an old journal put back beside a clean file
	[33]="sim_faults"    # 33-34: a checkpoint failing for space; only
	[34]="sim_faults"    # fault injection makes one (sim_explore cannot)
	[35]="conf_gcommit"  # 35, 49, 50: a full sparse file; threads whose
	[49]="conf_gcommit"  # commits are batched (src/gcommit.c), killed
	[50]="conf_gcommit"  # and on a full file system
	[40]="preload_torture.sh"   # 40-41: the preload library's protocol
	[41]="preload_programs.sh"  # (preload/), by its own tests
	[42]="preload_programs.sh"
	[43]="sqlite_torture"   # 43-44: the SQLite VFS (sqlite/vfs.c)
	[44]="sqlite_torture"
	[52]="conf_clean"       # a 2 MiB tmpfs, 2000 small commits
	[53]="conf_clean"       # 8 writers at once on a 2 MiB tmpfs
	[54]="conf_clean"       # a full tmpfs, a commit that grows the file
	[63]="conf_clean"       # 63-64: a write into a hole a cut made, on
	[64]="conf_clean"       # a full tmpfs (commit.c reserve_holes)
	[55]="conf_mark"        # 55-56: readers through the clean mark
	[56]="conf_mark"        # (src/control.c M1-M3) against one-shot writers
	[65]="conf_mark"        # and a writer that keeps its handle
	[59]="conf_xcommit"     # 59-60: a leader of other processes'
	[60]="conf_xcommit"     # commits killed (src/xcommit.c, X4-X5)
	[61]="powercut_gcommit.sh"  # members acknowledged before the flush:
	                            # a power cut, processes' rounds (X2)
	[57]="conf_visibility"  # 57-58: reads without the APPLY lock (I17),
	[58]="conf_visibility"  # torn reads on a tmpfs, where applies are fast
	# 45-48 (oa_commit_group, src/commit.c G1-G5): the simulator's group
	# workload catches each first; conf_group's kill torture catches 45-47
	# and powercut_group.sh 48 too
	# 30-32: the simulator's mapping workload catches them first; the kill
	# torture's mapping rounds do too (MUTANT_TESTS=torture_kill)
)
declare -A method_of=(
	[20]="kernel"      # forced: AUTO uses RWF_ATOMIC only for what the
	                   # device writes untorn itself, none on a loop device
	[22]="exchange"
	[66]="exchange"
	[67]="exchange"
)
. "$here/util/fs.sh"

# xfs_torture BUILD METHOD: the kill torture on a fresh XFS loop mount.
xfs_torture() {
	local b=$1 m=$2 d img mnt loop rc
	[ "$(id -u)" = 0 ] || return 77
	d=$(mktemp -d "$work/x.XXXXXX")
	img=$d/xfs.img mnt=$d/mnt
	mkdir -p "$mnt"
	truncate -s 1G "$img" && mkfs_xfs "$img" || return 77
	loop=$(losetup -f --show "$img" 2>/dev/null) || return 77
	mount_xfs "$loop" "$img" "$mnt" >/dev/null || { losetup -d "$loop"; return 77; }
	OATOMIC_METHOD=$m OA_TEST_DIR=$mnt TORTURE_KILLS=$KILLS \
		timeout 600 "$b/tests/torture_kill" --no-selftest >"$d.log" 2>&1
	rc=$?
	umount "$mnt"; losetup -d "$loop"; rm -rf "$d"
	return $rc
}

# needs B T: build (in B) what test T runs, when it is first tried: most
# planted bugs are caught by the first test, so a mutant's build is the
# library and one or two programs, not all of them (the builds were a third
# of this script's time).  Non-zero: the build failed (logged).
needs() {
	local b=$1 t=$2 what
	case $t in
	xfs-torture) what="$b/tests/torture_kill" ;;
	powercut.sh) what="$b/tests/torture_pair $b/oatomic" ;;
	powercut_shared.sh|powercut_group.sh) what="$b/tests/torture_cut $b/tests/conf_group" ;;
	preload_*.sh) what="$b/tests/torture_cut $b/oatomic $b/liboatomic-preload.so" ;;
	*.sh) what="$b/tests/torture_cut $b/tests/torture_pair $b/oatomic $b/liboatomic-preload.so" ;;
	*) what="$b/tests/$t" ;;
	esac
	# shellcheck disable=SC2086
	make -s -j2 BUILD="$b" MUTANT="$m" $what >>"$work/make$m.log" 2>&1
}

# The crash tests, cheapest first; the first failure catches the mutant.
run_tests() {
	local b=$1 m=$2 t d
	for t in ${tests_of[$m]:-} ${MUTANT_TESTS:-sim_explore sim_faults unit_recover conf_recover torture_kill torture_pair powercut.sh}; do
		if ! needs "$b" "$t"; then
			echo "mutant $m: build for $t failed" >&2
			cat "$work/make$m.log" >&2
			continue
		fi
		d=$(mktemp -d "$work/t.XXXXXX")
		case $t in
		xfs-torture) xfs_torture "$b" "${method_of[$m]:-}" ;;
		sim_*) OA_TEST_DIR=$d SIM_STOP_FIRST=1 SIM_NO_KNOWN=1 \
			SIM_FAULT_DIRSYNC=1 SIM_FAULT_IOCTL=1 \
			SIM_STATES=${MUTANT_SIM_STATES:-300000} \
			timeout 600 "$b/tests/$t" >"$d.log" 2>&1 ;;
		*.sh) OA_TEST_DIR=$d BUILD=$b POWERCUT_CUTS=$CUTS \
			timeout 600 "tests/$t" >"$d.log" 2>&1 ;;
		torture_kill) OA_TEST_DIR=$d TORTURE_KILLS=$KILLS \
			timeout 600 "$b/tests/$t" --no-selftest >"$d.log" 2>&1 ;;
		torture_pair) OA_TEST_DIR=$d \
			timeout 600 "$b/tests/$t" --kills "$KILLS" \
			--no-selftest >"$d.log" 2>&1 ;;
		*) OA_TEST_DIR=$d timeout 600 "$b/tests/$t" >"$d.log" 2>&1 ;;
		esac
		local rc=$?
		rm -rf "$d"
		if [ $rc -eq 126 ] || [ $rc -eq 127 ]; then
			# not found or not runnable: the harness's fault,
			# never a catch
			echo "mutant $m: test $t could not run (exit $rc)" >&2
			continue
		fi
		if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
			echo "$t"
			return 0
		fi
	done
	return 1
}

n=0 caught=0
for m in $MUTANTS; do
	n=$((n + 1))
	b=$work/build-m$m
	# the library first: a mutant that does not compile is reported once
	if ! make -s -j2 BUILD="$b" MUTANT="$m" "$b/liboatomic.a" \
	     >"$work/make$m.log" 2>&1; then
		echo "mutant $m: build failed"; cat "$work/make$m.log"; continue
	fi
	if by=$(run_tests "$b" "$m"); then
		caught=$((caught + 1))
		printf 'mutant %d (%s): caught by %s\n' "$m" "${what[$m]}" "$by"
	else
		printf 'mutant %d (%s): NOT CAUGHT\n' "$m" "${what[$m]}"
	fi
	rm -rf "$b"
done
echo "caught $caught of $n"
[ "$caught" -eq "$n" ]
