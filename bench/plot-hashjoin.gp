# gnuplot -e "dir='bench/results'; modes='threads procs'; rows=10000000" bench/plot-hashjoin.gp
# Reads dir/hashjoin-<mode>.dat (a block per series; a block's first line
# names it) and draws, per mode, build time and speedup against T.
set terminal png size 1400,(500 * words(modes)) font ",10"
set output dir.'/hashjoin.png'
set multiplot layout words(modes),2 title sprintf("parallel hash-join build and probe, %d x %d rows", rows, rows)
set logscale x 2
set xlabel "workers (T)"
set grid
set key top left font ",8" opaque
set style data linespoints
do for [m in modes] {
    f = dir.'/hashjoin-'.m.'.dat'
    set ylabel "build time (s), median"
    set title "build, workers as ".m
    plot for [i=0:*] f index i using 1:2 lw 2 title columnheader(1)
    set ylabel "total time of pg-dsa 4 KiB / this"
    set title "speedup, workers as ".m
    plot for [i=0:*] f index i using 1:4 lw 2 title columnheader(1)
}
unset multiplot
