# fraction.gp - a chart of scripts/farmem.sh in the shape of Infiniswap's Figure 1: a workload's
# performance against the share of its working set in local memory, normalised to the run with
# all of its memory local (no limit, no swap), one line per swap backend. report.py runs it as
#   gnuplot -e 'datafile="..."; outfile="..."; charttitle="..."; names="none disk ..."; styles="1 2 ...";
#               ymax=..; quick=0|1' fraction.gp
# datafile: "# header" then one line per local fraction (%, descending): the fraction, then one
# normalised figure per backend of names (styles: each one's line style, fixed per backend
# by report.py's STYLE; "?" where it did not run, 0 where it was killed).

set terminal pngcairo size 900,560 font "sans,10" noenhanced
set output outfile
set title charttitle . (quick ? "\n(--quick smoke run: not the experiment)" : "")
set datafile missing "?"
set xlabel "local memory (% of the working set)"
set ylabel "performance / all memory local (0: OOM-killed or timed out)"
set xrange [105:20] reverse
set xtics ("100" 100, "75" 75, "50" 50, "25" 25)
set yrange [0:ymax]
set grid
set key outside right top
set arrow from graph 0, first 1.0 to graph 1, first 1.0 nohead lw 1 dt 2 lc rgb "black"
set style line 1 lc rgb "#888888" lw 2 pt 7 ps 1.2
set style line 2 lc rgb "#cc4444" lw 2 pt 5 ps 1.2
set style line 3 lc rgb "#66aa55" lw 2 pt 9 ps 1.3
set style line 4 lc rgb "#4477aa" lw 3 pt 11 ps 1.3
set style line 5 lc rgb "#aa55aa" lw 3 pt 13 ps 1.3
# passthrough_ll, the FUSE ceiling: dashed
set style line 6 lc rgb "#dd8800" lw 2 dt 2 pt 6 ps 1.2
nseries = words(names)
plot for [i=1:nseries] datafile using 1:(column(i + 1)) with linespoints ls (word(styles, i) + 0) title word(names, i)
