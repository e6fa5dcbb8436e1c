#!/bin/bash
# bench_quick.sh - `oatomic bench --quick` runs every workload and produces
# every figure, in CSV, JSON and table form.  It checks that the figures are
# there and sane (numbers where a number belongs), never how fast anything
# is.
#
# timeout: 600
set -u

BUILD=${BUILD:-build}
SRC=${OA_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
OA=$BUILD/oatomic
[[ $OA = /* ]] || OA=$SRC/$OA
DIR=${OA_TEST_DIR:-$(mktemp -d)}
[ -x "$OA" ] || { echo "SKIP: $OA not built"; exit 77; }

fail() { echo "FAIL: $*"; exit 1; }

csv=$DIR/quick.csv
"$OA" bench --quick --format csv --dir "$DIR" >"$csv" 2>"$DIR/err"
rc=$?
[ $rc -eq 0 ] || { cat "$DIR/err"; tail -5 "$csv"; fail "oatomic bench --quick --format csv exited $rc"; }

want_cols="workload,alternative,param,value,file_bytes,mode,status,reps,commits,txn_bytes,lat_med_us,lat_min_us,lat_max_us,lat_p99_us,commits_s,commits_s_min,commits_s_max,mb_s,flushes_per_commit,bytes_per_byte,io_bytes_per_byte,dev_flushes_per_commit,dev_bytes_per_byte,peak_rss_kib,lat_vs_inplace,lat_p90_us,bytes_per_op,lat_vs_baseline,left_files,left_bytes,cpu_us_per_commit,note"
header=$(grep -v '^#' "$csv" | head -1)
[ "$header" = "$want_cols" ] || fail "CSV header is '$header'"

# The alternatives that could run here ("alt: NAME description"; the ones
# that could not say why instead).
mapfile -t usable < <(awk '/^# alt:/ && $0 !~ /not supported here|not installed|probe failed/ {print $3}' "$csv")
[ ${#usable[@]} -ge 3 ] || fail "fewer than 3 usable alternatives: ${usable[*]}"
printf '%s\n' "${usable[@]}" | grep -qx oatomic-auto || fail "oatomic-auto not usable"
printf '%s\n' "${usable[@]}" | grep -qx inplace || fail "inplace not usable"

# Every row: known status, no failure; ok rows carry their figures.
bad=$(grep -v '^#' "$csv" | tail -n +2 | awk -F, '
function num(v) { return v ~ /^[0-9]+(\.[0-9]+)?$/ }
{
	w = $1; a = $2; st = $7
	if (st == "failed") { print "failed: " $0; next }
	if (st != "ok" && st != "n/a" && st != "skipped") { print "status: " $0; next }
	if (st != "ok") next
	ok[w]++; okalt[w "/" a] = 1
	if (!num($8) || $8 < 1 || !num($9) || $9 < 1) print "reps/commits: " $0
	if (!num($11) || !num($12) || !num($13) || !num($14) || !num($24))
		print "latency/peak: " $0
	if ($12 > $11 || $11 > $13) print "min <= median <= max: " $0
	if (w == "recovery") next
	if (!num($31)) print "cpu_us_per_commit: " $0
	if (w == "open" || w == "oneshot" || w == "replace" || w == "change" ||
	    w == "fill" || w == "frag" || w == "read") {
		# everyday rows: per operation, against the baseline of the workload
		if (!num($15) || $15 <= 0 || !num($19) || !num($26) || !num($27) ||
		    !num($28) || $28 <= 0 || !num($29) || !num($30))
			print "everyday figures: " $0
		if ($14 < $26 || $26 < $11) print "median <= p90 <= p99: " $0
		if (w != "open" && w != "read" &&
		    (!num($18) || !num($20) || $19 <= 0 || $20 < 1))
			print "everyday write counts: " $0
		if (a ~ /^(plain|inplace|copy-rename|clone-exchange)$/ && ($28 != 1 || $29 != 0))
			print "baseline: ratio 1, nothing left: " $0
		if (a ~ /^oatomic-/ && w != "open" && w != "read" && $19 < 1)
			print "oatomic commits without a flush: " $0
		next
	}
	for (i = 15; i <= 18; i++) if (!num($i) || $i <= 0) print "rate col " i ": " $0
	if (!num($21)) print "io_bytes_per_byte: " $0
	if (a ~ /^oatomic-|^inplace$|^copy-rename$|^rwf-atomic$/ &&
	    (!num($19) || !num($20) || $19 <= 0 || $20 <= 0))
		print "own flush/byte counts: " $0
	if (a ~ /^oatomic-/ && $20 < 1) print "oatomic writes less than it commits: " $0
	if (!num($25)) print "lat_vs_inplace: " $0
}
END {
	split("small large many concurrent recovery open oneshot replace change fill mmap run read", wl, " ")
	for (i = 1; i <= 13; i++) if (!ok[wl[i]]) print "no ok row for workload " wl[i]
	for (k in okalt) n++
}')
[ -z "$bad" ] || fail "$(printf 'bad rows:\n%s' "$bad")"

# Each usable alternative ran the small workload, and every concurrency mode
# was measured.
for a in "${usable[@]}"; do
	grep -q "^small,$a,.*,ok," "$csv" || fail "$a has no ok small-commit row"
done
for m in threads/one-file threads/own-files processes/one-file processes/own-files; do
	grep -q "^concurrent,oatomic-auto,writers,[0-9]*,[0-9]*,$m,ok," "$csv" ||
		fail "no concurrent row for $m"
done
grep -q '^recovery,oatomic-auto,journal_bytes,.*,ok,' "$csv" || fail "no oatomic recovery row"
# 4 KiB at an unaligned offset: oatomic and inplace run it, the page stores sit it out.
for a in oatomic-auto inplace; do
	grep -q "^small,$a,update_bytes,4096,1048576,unaligned,ok," "$csv" ||
		fail "no ok unaligned small row for $a"
done
grep -q '^small,sqlite-rollback,update_bytes,4096,1048576,unaligned,ok,' "$csv" &&
	fail "sqlite-rollback ran the unaligned point"
# mmap: oatomic and msync at every point, and the ramp.
for pt in "dirty_pages,163,67108864,1%" "dirty_pages,1638,67108864,10%" \
	"dirty_pages,16384,67108864,100%" "commits,100,67108864,ramp 1%"; do
	for a in oatomic-auto msync; do
		grep -q "^mmap,$a,$pt,ok," "$csv" || fail "no ok row mmap,$a,$pt"
	done
done
# run: the four alternatives of both modes (the preload is built beside the
# tool).
for a in oatomic run plain run-unmatched; do
	for m in "200,1048576,4KiB+fsync" "5000,1048576,4KiB write"; do
		grep -q "^run,$a,ops,$m,ok," "$csv" || fail "no ok row run,$a,ops,$m"
	done
done
# frag: ok rows where the exchange method opens (XFS), n/a rows elsewhere.
grep -q '^frag,oatomic-auto,frag_commits,0,4194304,-,\(ok\|n/a\),' "$csv" ||
	fail "no frag row for oatomic-auto"
# The everyday workloads: oatomic-auto beside its baseline at every point.
for pt in "open,%s,read_bytes,4096,1048576,O_RDONLY" "open,%s,read_bytes,4096,1048576,O_RDWR" \
	"oneshot,%s,update_bytes,4096,1048576,-" "replace,%s,content_bytes,64,64,-" \
	"replace,%s,content_bytes,65536,65536,-" "replace,%s,content_bytes,1048576,1048576,-" \
	"change,%s,update_bytes,4096,4194304,-" "fill,%s,txn_bytes,4194304,4194304,-" \
	"read,%s,read_bytes,4096,1048576,O_RDONLY"; do
	base=plain
	case $pt in oneshot*|fill*) base=inplace ;; replace*|change*) base=copy-rename ;; esac
	for a in oatomic-auto $base; do
		# shellcheck disable=SC2059
		grep -q "^$(printf "$pt" "$a"),ok," "$csv" || fail "no ok row $(printf "$pt" "$a")"
	done
done

# JSON (one small workload, one repetition): well formed, same rows.
json=$DIR/quick.json
"$OA" bench --quick --format json --workload small,recovery,oneshot --reps 1 --ops 4 --dir "$DIR" >"$json" 2>"$DIR/err"
rc=$?
[ $rc -eq 0 ] || { cat "$DIR/err"; fail "oatomic bench --format json exited $rc"; }
if command -v python3 >/dev/null 2>&1; then
	python3 - "$json" <<'EOF' || fail "JSON check failed"
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("machine", "fs", "alternatives", "rows", "reps"):
    assert k in d, k
rows = d["rows"]
assert any(r["workload"] == "small" and r["status"] == "ok" for r in rows)
assert any(r["workload"] == "recovery" and r["status"] == "ok" for r in rows)
for r in rows:
    assert r["status"] != "failed", r
    if r["status"] == "ok" and r["workload"] == "small":
        for k in ("lat_med_us", "lat_p99_us", "commits_s", "mb_s",
                  "io_bytes_per_byte", "peak_rss_kib", "lat_vs_inplace"):
            assert isinstance(r[k], (int, float)) and r[k] >= 0, (k, r)
    if r["status"] == "ok" and r["workload"] == "oneshot":
        for k in ("lat_med_us", "lat_p90_us", "bytes_per_op",
                  "lat_vs_baseline", "left_files", "left_bytes"):
            assert isinstance(r[k], (int, float)) and r[k] >= 0, (k, r)
assert any(r["workload"] == "oneshot" and r["status"] == "ok" for r in rows)
EOF
elif command -v jq >/dev/null 2>&1; then
	jq -e '(.rows | map(select(.status == "failed")) | length == 0) and
	       (.rows | map(select(.workload == "small" and .status == "ok")) | length > 0)' \
		"$json" >/dev/null || fail "JSON check failed"
else
	echo "NOTE: neither python3 nor jq: JSON not parsed"
	grep -q '"rows": \[' "$json" || fail "no rows in the JSON"
fi

# The table: the machine, the columns, a row for oatomic.
"$OA" bench --quick --workload recovery --reps 1 --dir "$DIR" >"$DIR/table" 2>&1 ||
	fail "oatomic bench (table) exited $?"
grep -q '^machine:' "$DIR/table" && grep -q '^== recovery' "$DIR/table" &&
	grep -q '^  oatomic-auto ' "$DIR/table" || fail "table lacks its parts"
"$OA" bench --workload replace --sizes 64 --ops 4 --method auto --dir "$DIR" >"$DIR/table" 2>&1 ||
	fail "oatomic bench --workload replace (table) exited $?"
grep -q '^== replace' "$DIR/table" && grep -q 'left beside the file' "$DIR/table" &&
	grep -q '^  oatomic-auto .* files\?, ' "$DIR/table" &&
	grep -q '^  copy-rename .* 1\.00  0 files, 0$' "$DIR/table" ||
	fail "everyday table lacks its parts"

# Bad usage is refused.
"$OA" bench --method nosuch >/dev/null 2>&1; [ $? -eq 2 ] || fail "--method nosuch accepted"
"$OA" bench --format xml >/dev/null 2>&1; [ $? -eq 2 ] || fail "--format xml accepted"
"$OA" bench --ops 0 >/dev/null 2>&1; [ $? -eq 2 ] || fail "--ops 0 accepted"
"$OA" bench --sizes 64,2m >/dev/null 2>&1; [ $? -eq 2 ] || fail "--sizes 2m accepted"

# Nothing left in the directory.
left=$(find "$DIR" -name 'oatomic-bench.*' | head -1)
[ -z "$left" ] || fail "scratch directory left behind: $left"
echo "PASS: $(grep -vc '^#' "$csv") CSV lines, usable: ${usable[*]}"
exit 0
