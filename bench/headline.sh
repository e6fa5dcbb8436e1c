#!/bin/bash
# headline.sh - the key ratios of `oatomic bench` CSV, as a Markdown table.
#
#   bench/headline.sh RESULT.csv
#
# For a few key points, oatomic-auto's figure and its ratio to each
# baseline: latency ratio for small (aligned and unaligned), many,
# recovery and the core issue's change and fill (per operation, open ..
# close; below 1: oatomic is faster), MB/s ratio for large and commits/s
# ratio for concurrent (above 1: oatomic is faster).  Markdown, for
# docs/BENCHMARKS.md.
set -eu
csv=$1
grep -v '^#' "$csv" | awk -F, '
NR>1 && $7=="ok" { k=$1"|"$4"|"$5"|"$6; lat[k,$2]=$11; cps[k,$2]=$15; mbs[k,$2]=$18; seen[k]=1 }
END {
 n=split("small|4096|1048576|- small|4096|67108864|- small|65536|67108864|- small|4096|67108864|unaligned large|16777216|16777216|- large|268435456|268435456|- many|100|67108864|- many|10000|67108864|- concurrent|8|16777216|threads/one-file concurrent|8|16777216|processes/own-files recovery|268435456|268435456|- change|4096|268435456|- fill|268435456|268435456|-", pts, " ")
 m=split("inplace copy-rename sqlite-rollback sqlite-wal lmdb rwf-atomic", b, " ")
 printf "| point | oatomic-auto |"; for(j=1;j<=m;j++) printf " %s |", b[j]; printf "\n"
 printf "| --- | --- |"; for(j=1;j<=m;j++) printf " --- |"; printf "\n"
 for(i=1;i<=n;i++){ k=pts[i]; split(k,f,"|")
   if (!((k,"oatomic-auto") in lat)) continue
   big = (f[1]=="large")
   conc = (f[1]=="concurrent")
   if (big) v=mbs[k,"oatomic-auto"]; else if (conc) v=cps[k,"oatomic-auto"]; else v=lat[k,"oatomic-auto"]
   unit = big ? " MB/s" : (conc ? " commits/s" : (f[1]=="recovery" ? " us" : " us"))
   printf "| %s %s, file %s MiB%s | %.0f%s |", f[1], f[2], f[3]/1048576, (f[4]=="-"?"":", " f[4]), v, unit
   for(j=1;j<=m;j++){ if (!((k,b[j]) in lat)) { printf " - |"; continue }
     if (big) r = mbs[k,"oatomic-auto"]/mbs[k,b[j]]; else if (conc) r = cps[k,"oatomic-auto"]/cps[k,b[j]]; else r = lat[k,"oatomic-auto"]/lat[k,b[j]]
     printf (r < 0.1 ? " %.3f |" : " %.2f |"), r }
   printf "\n" }
}'
