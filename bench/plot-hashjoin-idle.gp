# gnuplot -e "dir='bench/results'; rows=10000000; ids='dsmpool-2m pg-dsa ...'; ymax=1000; xmax=60" bench/plot-hashjoin-idle.gp
# Reads dir/hashjoin-idle-mem.csv (bench/hashjoin --idle writes it, then runs
# this) and draws dir/hashjoin-idle.png: the picture an operator wants, one
# panel per backend in ids, on one time axis and one scale: the shared memory
# resident in the system (Shmem + hugetlb in use, less what was there before
# the row) sampled every 50 ms, the pool's own resident data (dsmpool rows,
# dashed), and the queries as shaded bands (the first one, then short gaps,
# then long ones).
f = dir.'/hashjoin-idle-mem.csv'
set datafile separator ","
n = words(ids)
set terminal pngcairo size 1400,(170 * n + 120) font ",10"
set output dir.'/hashjoin-idle.png'
set multiplot layout n,1 title sprintf("hash join of %d x %d rows again and again, with short then long gaps: resident shared memory over time (queries shaded)", rows, rows)
set style fill transparent solid 0.25 noborder
set grid ytics
set tics nomirror
set yrange [0:ymax * 1.1]
set xrange [0:xmax]
set boxwidth 0.05 absolute # a sample's span
set ylabel "MiB"
set key inside top right font ",9" samplen 2
set lmargin 10
set rmargin 4
set tmargin 1.5
set bmargin 1.5
do for [i=1:n] {
    b = word(ids, i)
    if (i == n) { set xlabel "seconds since the row began"; set bmargin 3 }
    set title b offset 0,-0.8 font ",10"
    plot f skip 1 using (strcol(1) eq b && $6 >= 0 ? $3 : NaN):(ymax * 1.1) with boxes lc rgb "#f5b041" title (i == 1 ? "query running" : ""), \
         f skip 1 using (strcol(1) eq b ? $3 : NaN):4 with lines lw 2 lc rgb "#1f3a93" title (i == 1 ? "resident in the system" : ""), \
         f skip 1 using (strcol(1) eq b && b[1:7] eq "dsmpool" ? $3 : NaN):5 with lines lw 1.5 dt 2 lc rgb "#c0392b" title (i == 1 ? "the pool's resident data (its stats)" : "")
}
unset multiplot
