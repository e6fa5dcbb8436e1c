#!/bin/bash
# plot.sh - the figures of docs/BENCHMARKS.md from `oatomic bench` CSV.
#
#   bench/plot.sh RESULT.csv OUTPREFIX [SMALL_FILE_BYTES]
#
# Writes OUTPREFIX-small.svg (latency against update size, on the file size
# SMALL_FILE_BYTES, default the largest measured), -large.svg (MB/s
# against transaction size), -many.svg (latency against writes per
# transaction), -concurrent.svg (commits/s against writers, one figure per
# mode: -concurrent-threads-one-file.svg, ...) and -recovery.svg (recovery
# time against journal size).  Needs gnuplot (Debian: gnuplot-nox).
set -eu
csv=$1 out=$2
here=$(dirname "$0")
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot not found (apt install gnuplot-nox)" >&2; exit 1; }

alts_of() {	# the alternatives with ok rows in workload $1, mode $2
	grep -v '^#' "$csv" | awk -F, -v w="$1" -v m="$2" '$1==w && $6==m && $7=="ok" && !s[$2]++ {printf "%s ", $2}'
}
fsname=$(sed -n 's/^# dir: *[^:]*: \([^ ]*\) on.*/\1/p' "$csv" | head -1)
small_file=${3:-$(grep -v '^#' "$csv" | awk -F, '$1=="small" && $7=="ok" && $5>m {m=$5} END {print m+0}')}

plot() {	# workload mode fsel ycol err logy xlab ylab title file
	local a
	a=$(alts_of "$1" "$2")
	[ -n "$a" ] || return 0
	gnuplot -e "csv='$csv'; out='${10}'; wl='$1'; mode='$2'; fsel='$3'; \
		ycol=$4; err=$5; logy=$6; alts='$a'; xlab='$7'; ylab='$8'; \
		ttl='$9'" "$here/plot.gp"
	echo "$out: wrote ${10}"
}

plot small - "&& \$5==$small_file" 11 1 1 "update per commit (bytes)" \
	"latency per commit, median (us)" \
	"small commits on a $((small_file >> 20)) MiB file, $fsname" "$out-small.svg"
plot large - "" 18 0 1 "transaction size (bytes)" "MB/s committed" \
	"large transactions (1 MiB writes), $fsname" "$out-large.svg"
plot many - "" 11 1 1 "4 KiB writes per transaction" \
	"latency per commit, median (us)" \
	"many small writes per transaction, $fsname" "$out-many.svg"
for m in threads/one-file threads/own-files processes/one-file processes/own-files; do
	plot concurrent "$m" "" 15 1 1 "writers" "commits/s, all writers" \
		"concurrent 4 KiB commits, $m, $fsname" "$out-concurrent-${m//\//-}.svg"
done
plot recovery - "" 11 1 1 "journal / log size (bytes)" \
	"recovery time (us)" "recovery after a crash at the commit point, $fsname" \
	"$out-recovery.svg"
