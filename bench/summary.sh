#!/bin/bash
# summary.sh - a Markdown table of some points of `oatomic bench` CSV.
#
#   bench/summary.sh RESULT.csv 'WORKLOAD VALUE FILE_BYTES MODE' ...
#
# One table per point given (a FILE_BYTES or MODE of '*' matches any), one
# row per alternative: latency median [min-max] and p99 in us, commits/s,
# MB/s, flushes per commit and bytes per byte (the alternative's own
# count), device flushes per commit, and latency / inplace's.
set -eu
csv=$1; shift
for pt in "$@"; do
	read -r w v f m <<<"$pt"
	grep -v '^#' "$csv" | awk -F, -v w="$w" -v v="$v" -v f="$f" -v m="$m" '
	function c(x, fmt) { return x == "" ? "-" : sprintf(fmt, x) }
	NR > 1 && $1 == w && $4 == v && (f == "*" || $5 == f) && (m == "*" || $6 == m) {
		if (!head++) {
			printf "\n**%s, %s = %s, file %s MiB%s**\n\n", w, $3, v, $5 / 1048576, ($6 == "-" ? "" : ", " $6)
			print "| alternative | latency us, median [min-max] | p99 us | commits/s | MB/s | flushes/commit | bytes/byte | dev flushes/commit | x inplace |"
			print "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
		}
		if ($7 != "ok") {
			note = $0; sub(/^[^"]*"/, "", note); sub(/"$/, "", note)
			printf "| %s | %s: %s | | | | | | | |\n", $2, $7, note
			next
		}
		printf "| %s | %.0f [%.0f-%.0f] | %.0f | %s | %s | %s | %s | %s | %s |\n", $2, $11, $12, $13, $14,
		       c($15, "%.0f"), c($18, "%.1f"), c($19, "%.2f"), c($20, "%.2f"), c($22, "%.2f"), c($25, "%.2f")
	}'
done
