#!/bin/bash
# powercut.sh - real-kernel power cuts of oatomic on ext4 and XFS.
# timeout: 900
#
# For each file system: a loop-mounted image; CUTS times: start the torture
# writer on a file in it (its acks go to a file OUTSIDE the mount, fdatasync'd
# after each), wait for the first ack, wait a random 0-300 ms (or until a
# big transaction of several MiB is in flight), then FS_IOC_SHUTDOWN with
# NOLOGFLUSH (nothing more reaches the disk: a power cut as far as the file
# system is concerned), SIGKILL the writer, umount, mount again (log
# replay), recover, and check that the file is exactly the state after the
# last durable ack or the next transaction.  Recovery twice must not change
# anything.  The cuts rotate over the sequence's spans (util/torture.h): a
# run of cuts on one file per span, 64 KiB to a sparse 64 MiB.
#
# Then PAIRCUTS cuts of two writers on one file (torture_pair): both commit
# to their own units with their own handles, acks to two files; after the
# cut each writer's units must be its last durable ack or its next commit.
#
# Needs root, loop devices, mkfs.ext4 / mkfs.xfs; skips (77) otherwise.
# Environment: POWERCUT_CUTS (default 100 per file system), POWERCUT_SPANS
# (default "64K:3 1M:3 4M:3 64M:1": span:weight, the share of the cuts),
# POWERCUT_PAIR_CUTS (default 20 per file system), POWERCUT_FS
# (default "ext4 xfs xfs:journal xfs:clone xfs:kernel xfs:exchange btrfs"; FS:METHOD runs the writer and the
# recoveries with OATOMIC_METHOD=METHOD: on XFS (made with the exchange-range
# feature), AUTO is the exchange method for big runs, the clone method for
# big records, the journal for the rest (the loop device has no atomic writes
# of its own, so AUTO sends no RWF_ATOMIC write), so "xfs" covers those,
# "xfs:kernel" single aligned writes by RWF_ATOMIC, "xfs:clone" the clone
# method for everything, "xfs:exchange" every whole block and every whole
# replace (a transaction cut to 0, then written) through the exchange, and
# "xfs:journal" the portable method), POWERCUT_SEED, POWERCUT_WRITER (see below),
# OA_TEST_DIR, BUILD.
#
# Note: the loop device passes every write the file system issued to the
# image, so this models a cut of the file system (lost: whatever it had not
# written yet, including its log), not a drive that loses its volatile cache.
#
# Btrfs has no FS_IOC_SHUTDOWN here: its cut is a snapshot.  Its image lives
# on a host XFS (a loop mount of our own, for reflink); at the cut the writer
# is stopped (SIGSTOP: every ack it wrote is older than the snapshot), the
# image is cloned (FICLONE takes the image's locks: the clone holds exactly
# the writes the loop device had completed, which is what a power cut
# leaves), the writer is killed, the file system unmounted and the clone
# mounted in its place.

set -u

here=$(cd "$(dirname "$0")" && pwd)
. "$here/util/fs.sh"
pc_build   # root, build, T
TP=$build/tests/torture_pair
tool=$build/oatomic

need_loop_mounts
for t in "$T" "$TP"; do
	[ -x "$t" ] || { echo "powercut: $t not built"; exit 1; }
done

# The sanitizer pass (BUILD=*asan*) is there for memory errors, which a few
# cuts per file system exercise as well as many: 30 there, 100 otherwise.
case $build in
*asan*) CUTS=${POWERCUT_CUTS:-30} PAIRCUTS=${POWERCUT_PAIR_CUTS:-8} ;;
*) CUTS=${POWERCUT_CUTS:-100} PAIRCUTS=${POWERCUT_PAIR_CUTS:-20} ;;
esac
# A 64 MiB span costs a cut more than the others (the checks read, hash and
# model the whole sparse file): it gets a tenth of the cuts.
SPANS=${POWERCUT_SPANS:-64K:3 1M:3 4M:3 64M:1}
SPANW=0
for s in $SPANS; do
	case $s in *:*) SPANW=$((SPANW + ${s#*:})) ;; *) SPANW=$((SPANW + 1)) ;; esac
done
# span_of I: the span of cut I (1..CUTS): the spans take consecutive runs
span_of() {
	local s w acc=0
	for s in $SPANS; do
		w=1; case $s in *:*) w=${s#*:} ;; esac
		acc=$((acc + w))
		if [ $(( ($1 - 1) * SPANW )) -lt $((acc * CUTS)) ]; then
			echo "${s%%:*}"; return
		fi
	done
	s=${SPANS##* }; echo "${s%%:*}"
}
# POWERCUT_WRITER=good|torn|lost: run a writer of the tortures' own instead of
# the library, to see the harness catch a broken one (torn, lost: expect
# violations; good: none).
MUTANT=${POWERCUT_WRITER:-}
[ "$MUTANT" = lib ] && MUTANT=
SEED=${POWERCUT_SEED:-$(( ($(date +%s%N) / 1000) % 1000000000 ))}
FSLIST=${POWERCUT_FS:-ext4 xfs xfs:journal xfs:clone xfs:kernel xfs:exchange btrfs}

if [ -n "${OA_TEST_DIR:-}" ]; then
	W=$OA_TEST_DIR/powercut
	mkdir -p "$W"
else
	W=$(mktemp -d /tmp/oa-powercut.XXXXXX)
fi

LOOP=
MNT=
WPID=
HOSTLOOP=
HOSTMNT=
cleanup_host() {
	if [ -n "$HOSTMNT" ] && mountpoint -q "$HOSTMNT"; then
		umount "$HOSTMNT" 2>/dev/null || umount -l "$HOSTMNT" 2>/dev/null
	fi
	HOSTMNT=
	if [ -n "$HOSTLOOP" ]; then losetup -d "$HOSTLOOP" 2>/dev/null; fi
	HOSTLOOP=
}
cleanup() {
	cleanup_mount
	cleanup_host
}
trap 'cleanup' EXIT
trap 'cleanup; exit 1' INT TERM HUP

# recover_check FILE: after a cut, oatomic check (pending work is normal,
# damage never is), recovery, and a second recovery that must change
# nothing; then check must be clean.  Prints the VIOLATION; returns 1.
recover_check() {
	local out h1 h2 rec2=("$T" recover)
	[ -x "$tool" ] && rec2=("$tool" recover)
	if [ -x "$tool" ]; then
		out=$("$tool" check "$1" 2>&1)
		if [ $? -ge 2 ]; then
			echo "$fs: $CUTNAME $i: VIOLATION: after a mere power cut, oatomic check says: $out"
			return 1
		fi
	fi
	if ! out=$("$T" recover "$1" 2>&1); then
		echo "$fs: $CUTNAME $i: VIOLATION: recovery failed: $out (seed $fseed)"
		return 1
	fi
	h1=$(sha256sum < "$1")
	if ! out=$("${rec2[@]}" "$1" 2>&1); then
		echo "$fs: $CUTNAME $i: VIOLATION: second recovery (${rec2[0]##*/}) failed: $out"
		return 1
	fi
	h2=$(sha256sum < "$1")
	if [ "$h1" != "$h2" ]; then
		echo "$fs: $CUTNAME $i: VIOLATION: the second recovery changed the file $1 (seed $fseed)"
		return 1
	fi
	if [ -x "$tool" ] && [ -z "$MUTANT" ] && ! out=$("$tool" check "$1" 2>&1); then
		echo "$fs: $CUTNAME $i: VIOLATION: after recovery, oatomic check is not clean: $out"
		return 1
	fi
	return 0
}

# keep_failure FILE...: keep the mount's files and FILE... in $W/fail-FS-I
keep_failure() {
	local keep=$W/fail-$fs-$i
	mkdir -p "$keep" && cp -a "$mnt"/. "$keep"/ && cp "$@" "$keep"/ &&
		echo "$fs: files, journals, acks and model kept in $keep"
}

violations_total=0

# run_fs FS: returns 0, 1 on a violation or failure, 77 when FS cannot be had
run_fs() {
	local fs=${1%%:*} img=$W/${1%%:*}.img mnt=$W/mnt-${1%%:*} size mkfs
	local tag=$1
	export OATOMIC_METHOD=
	case $1 in *:*) OATOMIC_METHOD=${1#*:} ;; esac
	case $fs in
	ext4) size=256M; mkfs="mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0" ;;
	xfs)  size=512M; mkfs="mkfs_xfs" ;;   # xfsprogs >= 5.19 wants > 300 MB
	btrfs) size=512M; mkfs="mkfs.btrfs -q -f" ;;
	*) echo "powercut: unknown fs $fs"; return 1 ;;
	esac
	command -v "${mkfs%% *}" >/dev/null || command -v "mkfs.$fs" >/dev/null ||
		{ echo "$fs: skipped: no mkfs.$fs"; return 77; }
	grep -qw "$fs" /proc/filesystems || modprobe "$fs" 2>/dev/null
	grep -qw "$fs" /proc/filesystems || { echo "$fs: skipped: kernel has no $fs"; return 77; }

	local snap=
	if [ "$fs" = btrfs ]; then
		# the snapshot cut: the image on a host file system with reflink
		local host=$W/host-$tag
		rm -f "$host.img"; mkdir -p "$host"
		truncate -s 1200M "$host.img" && mkfs.xfs -q -f "$host.img" >/dev/null 2>&1 ||
			{ echo "$fs: skipped: no host XFS for the snapshot cut"; return 77; }
		HOSTLOOP=$(losetup -f --show "$host.img" 2>&1) || { echo "$fs: skipped: losetup: $HOSTLOOP"; HOSTLOOP=; return 77; }
		mount "$HOSTLOOP" "$host" || { echo "$fs: skipped: cannot mount the host XFS"; return 77; }
		HOSTMNT=$host
		img=$host/$fs.img
		snap=$host/$fs.snap
	fi
	rm -f "$img"
	truncate -s $size "$img" || return 1
	$mkfs "$img" >/dev/null 2>&1 || { echo "$fs: mkfs failed"; return 1; }
	LOOP=$(losetup -f --show "$img" 2>&1) || { echo "$fs: skipped: losetup: $LOOP"; LOOP=; return 77; }
	mkdir -p "$mnt"
	if [ "$fs" = xfs ]; then mount_xfs "$LOOP" "$img" "$mnt"
	else mount "$LOOP" "$mnt"; fi || { echo "$fs: skipped: cannot mount $LOOP"; return 77; }
	MNT=$mnt

	local file=$mnt/f ack=$W/$fs.ack big=$W/$fs.big model=$W/$fs.model
	local log=$W/$fs.log start=0 ok=0 viol=0 i inflight=0 bigcuts=0 mapcuts=0 commits=0
	local fseed=$((SEED + ${#tag})) span= s spans=
	fs=$tag   # in the messages below
	local t0=$(date +%s)
	: > "$log"
	RANDOM=$fseed

	CUTNAME=cut
	for ((i = 1; i <= CUTS; i++)); do
		s=$(span_of $i)
		if [ "$s" != "$span" ]; then
			# the next span: a new sequence, on a new file
			span=$s spans+=" $span" start=0
			rm -f "$file" "$file.mutant-tmp" "$mnt/.f.oa" "$mnt"/.f.oaj-*
			"$T" model-init "$model" $fseed $span || return 1
		fi
		rm -f "$ack" "$big"
		local usebig=$((RANDOM % 4 == 0)) delay
		local wargs=(cut "$file" $fseed "$ack" --start $start --span $span)
		[ -n "$MUTANT" ] && wargs=(mutant "$MUTANT" "$file" $fseed --ack-file "$ack" --start $start --span $span)
		[ $usebig = 1 ] && wargs+=(--big-flag "$big")
		# every third cut: half the writes are stores through oa_mmap
		# (every sixth: spilling to disk past 16 pages)
		if [ -z "$MUTANT" ] && [ $((i % 3)) = 0 ]; then
			wargs+=(--mmap $((i % 6 == 0 ? 2 : 1)))
			mapcuts=$((mapcuts + 1))
		fi
		"$T" "${wargs[@]}" >>"$log" 2>&1 &
		WPID=$!
		if ! wait_for "$ack" $WPID 30; then
			echo "$fs: cut $i: the writer made no commit (seed $fseed, start $start, span $span):"
			tail -5 "$log"
			return 1
		fi
		if [ $usebig = 1 ] && wait_for "$big" $WPID 10; then
			delay=$((RANDOM % 40))
			bigcuts=$((bigcuts + 1))
		else
			delay=$((RANDOM % 301))
		fi
		sleep_ms $delay
		cut_remount $WPID || return $?
		recover_check "$file" || { viol=$((viol + 1)); break; }
		if ! out=$("$T" verify "$file" $fseed "$ack" "$model" 2>&1); then
			echo "$fs: cut $i: $out"
			echo "$fs: cut $i: seed $fseed, span $span, writer started at txn $start, delay ${delay} ms, big=$usebig"
			keep_failure "$ack" "$model"
			viol=$((viol + 1)); break
		fi
		# state=K acked=A start=S acks=N acked|in-flight
		local st=${out#state=}; st=${st%% *}
		case $out in *in-flight*) inflight=$((inflight + 1)) ;; esac
		commits=$((commits + $(wc -l < "$ack")))
		start=$st
		ok=$((ok + 1))
	done

	# two writers on one file (the library's writers only)
	local pfile=$mnt/p pa=$W/$fs.pa pb=$W/$fs.pb sa=0 sb=0 pok=0 pinf=0
	local pcommits=0 npair=$PAIRCUTS pid_a pid_b
	[ -n "$MUTANT" ] && npair=0
	CUTNAME='pair cut'
	for ((i = 1; i <= npair && viol == 0; i++)); do
		rm -f "$pa" "$pb"
		"$TP" cut "$pfile" $fseed 0 "$pa" --start $sa >>"$log" 2>&1 &
		pid_a=$!
		"$TP" cut "$pfile" $fseed 1 "$pb" --start $sb >>"$log" 2>&1 &
		pid_b=$!
		WPID="$pid_a $pid_b"
		if ! wait_for "$pa" $pid_a 30 || ! wait_for "$pb" $pid_b 30; then
			echo "$fs: pair cut $i: a writer made no commit (seed $fseed, starts $sa $sb):"
			tail -5 "$log"
			return 1
		fi
		sleep_ms $((RANDOM % 101))
		cut_remount $pid_a $pid_b || return $?
		recover_check "$pfile" || { viol=$((viol + 1)); break; }
		if ! out=$("$TP" verify "$pfile" $fseed $sa $sb "$pa" "$pb" 2>&1); then
			echo "$fs: pair cut $i: $out"
			keep_failure "$pa" "$pb"
			viol=$((viol + 1)); break
		fi
		# a=TA b=TB acks=NA/NB [A-in-flight] [B-in-flight]
		sa=${out#a=}; sa=${sa%% *}
		sb=${out#* b=}; sb=${sb%% *}
		case $out in *in-flight*) pinf=$((pinf + 1)) ;; esac
		pcommits=$((pcommits + $(cat "$pa" "$pb" | wc -l)))
		pok=$((pok + 1))
	done

	umount "$mnt" 2>/dev/null && MNT=
	image_check "${fs%%:*}" "$fs"
	cleanup
	local secs=$(( $(date +%s) - t0 ))
	echo "$fs: cuts=$((ok + viol)) ok=$ok violations=$viol (seed $fseed, ${secs}s, spans$spans, commits $commits, in-flight commit survived $inflight, cuts during a big transaction $bigcuts, cuts with stores through mappings $mapcuts, final txn $start); pair cuts=$pok (commits $pcommits, in-flight survived $pinf, final txns $sa $sb)"
	violations_total=$((violations_total + viol))
	[ $viol = 0 ] && [ $ok = "$CUTS" ] && [ $pok = "$npair" ] || return 1
	rm -f "$img" "$ack" "$big" "$model" "$log" "$pa" "$pb"
	return 0
}

echo "powercut: seed $SEED, $CUTS cuts per file system over spans $SPANS, $PAIRCUTS of two writers, in $W${MUTANT:+, writer: mutant $MUTANT}"
run_each_fs $FSLIST
rc=$?
[ -z "${OA_TEST_DIR:-}" ] && [ $rc = 0 ] && rm -rf "$W"
exit $rc
