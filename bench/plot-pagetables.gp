# gnuplot -e "dir='bench/results'; size=1024" bench/plot-pagetables.gp
# Reads dir/pagetables.csv: one bar per (pages, P); log scales, since 4 KiB
# pages cost hundreds of times what huge pages do. VmPTE counts a page-table
# page shared between processes (hugetlb PMD sharing) once per process, the
# system's PageTables once: the second panel shows the sharing.
set terminal png size 1800,1300 font ",10"
set output dir.'/pagetables.png'
set datafile separator ","
set multiplot layout 2,2 title sprintf("P processes attach a %d MiB pool and map all of it", size)
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set grid ytics
set xtics rotate by 45 right font ",8"
set bmargin 18
set key off
set logscale y
set title "page tables per process (KiB, VmPTE)"
plot dir.'/pagetables.csv' using ($8 > 0 ? $8 : 1):xtic(sprintf("%s P=%d", strcol(1), $2)) every ::1 lc rgb "#3060a0"
set title "PageTables growth per process (KiB, /proc/meminfo)"
plot dir.'/pagetables.csv' using ($9 > 0 ? $9 : 1):xtic(sprintf("%s P=%d", strcol(1), $2)) every ::1 lc rgb "#6040a0"
set title "minor faults (all processes)"
plot dir.'/pagetables.csv' using ($7 > 0 ? $7 : 1):xtic(sprintf("%s P=%d", strcol(1), $2)) every ::1 lc rgb "#a04030"
set title "seconds to attach and map (after trim: the trim)"
plot dir.'/pagetables.csv' using 4:xtic(sprintf("%s P=%d", strcol(1), $2)) every ::1 lc rgb "#40a040"
unset multiplot
