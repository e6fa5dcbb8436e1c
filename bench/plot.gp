# plot.gp - one figure of `oatomic bench --format csv` output (see plot.sh).
#
#   gnuplot -e "csv='r.csv'; out='o.svg'; wl='small'; mode='-'; \
#               fsel=''; ycol=11; err=1; logy=1; alts='a b'; \
#               xlab='...'; ylab='...'; ttl='...'" bench/plot.gp
#
# Plots column YCOL against the value column (4) of the rows of workload WL,
# mode MODE, status ok, one line per alternative in ALTS; with ERR, columns
# YCOL+1 and YCOL+2 are the min and max over the repetitions (error bars).
# FSEL is an extra awk condition on the row (e.g. '&& $5==67108864').
set terminal svg size 860,520 dynamic font "sans,11" background rgb "white"
set output out
set datafile separator ","
set logscale x 2
if (logy) set logscale y
set key outside right top
set grid
set xlabel xlab
set ylabel ylab
set title ttl noenhanced
set key noenhanced
sel(a) = sprintf("< awk -F, '$1==\"%s\" && $2==\"%s\" && $6==\"%s\" && $7==\"ok\" %s' %s", wl, a, mode, fsel, csv)
if (err) {
	plot for [a in alts] sel(a) using 4:ycol:(column(ycol+1)):(column(ycol+2)) with yerrorlines title a
} else {
	plot for [a in alts] sel(a) using 4:ycol with linespoints title a
}
