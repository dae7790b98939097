# ratios.gp - the chart of scripts/bench.sh: rmemfs's throughput divided by each baseline's,
# per job, as clustered bars on a log scale with the 1.0 line (above it rmemfs is faster).
# report.py runs it as
#   gnuplot -e 'datafile="..."; outfile="..."; charttitle="..."; ymin=..; ymax=..' ratios.gp
# datafile: "# header" then one line per job: name ratio_vs_tmpfs ratio_vs_passthrough_ll
# ratio_vs_sshfs ("?" where a figure is missing).

set terminal pngcairo size 1400,640 font "sans,10" noenhanced
set output outfile
set title charttitle
set datafile missing "?"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set logscale y 10
set yrange [ymin:ymax]
set ylabel "rmemfs / baseline (MiB/s or ops/s; log scale)"
set format y "%gx"
set grid ytics
set xtics rotate by -30 left nomirror
set key inside top center horizontal opaque box samplen 2 spacing 1.5 height 0.5
set bmargin 7
set arrow from graph 0, first 1.0 to graph 1, first 1.0 nohead lw 2 lc rgb "black" front
set arrow from graph 0, first 5.0 to graph 1, first 5.0 nohead lw 1 dt 2 lc rgb "#cc6600" front
set label "1.0: as fast" at graph 0.005, first 1.0 left offset 0,0.7 front
set label "5x (target vs sshfs)" at graph 0.005, first 5.0 left offset 0,0.7 tc rgb "#cc6600" front

# each bar's value above it: three bars per cluster, each 1/4 of the cluster's width apart
fmt(v) = v >= 10 ? sprintf("%.0f", v) : (v >= 1 ? sprintf("%.1f", v) : sprintf("%.2f", v))
plot datafile using 2:xtic(1) title "vs tmpfs (local limit)" lc rgb "#4477aa", \
     '' using 3 title "vs passthrough_ll over tmpfs (FUSE ceiling)" lc rgb "#66aa55", \
     '' using 4 title "vs sshfs to localhost" lc rgb "#cc4444", \
     '' using ($0 - 0.25):2:(fmt($2)) with labels offset 0,0.6 font "sans,8" notitle, \
     '' using ($0):3:(fmt($3)) with labels offset 0,0.6 font "sans,8" notitle, \
     '' using ($0 + 0.25):4:(fmt($4)) with labels offset 0,0.6 font "sans,8" notitle
