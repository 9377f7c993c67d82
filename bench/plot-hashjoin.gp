# gnuplot -e "dir='bench/results'; modes='threads procs'; rows=10000000" bench/plot-hashjoin.gp
# Reads dir/hashjoin.csv (bench/hashjoin writes it, then runs this) and
# draws dir/hashjoin.png: two panels per worker kind in modes, bars grouped
# by worker count T, each bar one backend's median total time (build and
# probe), its solid part the median build time, labelled with its speedup
# over pg-dsa 4 KiB at the same T (no label when the run had no pg-dsa).
#   left:  dsmpool 2 MiB (red) and 4 KiB against the strongest peers: the
#          fastest of jemalloc, mimalloc and glibc at each T (named on its
#          bar; threads only), pg-dsa 4 KiB (PostgreSQL's DSA, the baseline)
#          and pg-prealloc 2 MiB (preallocated DSM in huge pages)
#   right: the attribution rows, each adding one change to the one before:
#          pg-dsa 4 KiB, the same on a THP tmpfs, pg-prealloc 4 KiB, in
#          2 MiB pages, with inline translation, dsmpool 2 MiB
# A backend the run skipped has no bar.
f = dir.'/hashjoin.csv'
set datafile separator ","
nm = words(modes)
set terminal pngcairo size 1400,(540 * nm) font ",10"
set output dir.'/hashjoin.png'
set multiplot layout nm,2 title sprintf("parallel hash join, %d x %d rows: median time per worker count (lower is better)", rows, rows)

# the series: backend, pages, legend, colour (dsmpool 2 MiB red in both panels)
array A_b[5] = ["dsmpool", "dsmpool", "malloc", "pg-dsa", "pg-prealloc"]
array A_p[5] = ["2 MiB", "4 KiB", "-", "4 KiB", "2 MiB"]
array A_t[5] = ["dsmpool 2 MiB", "dsmpool 4 KiB", "fastest of jemalloc, mimalloc, glibc", \
                "pg-dsa 4 KiB (the baseline)", "pg-prealloc 2 MiB"]
array A_c[5] = ["#c0392b", "#f1948a", "#7f8c8d", "#1f3a93", "#5dade2"]
array B_b[6] = ["pg-dsa", "pg-dsa", "pg-prealloc", "pg-prealloc", "pg-prealloc+inl", "dsmpool"]
array B_p[6] = ["4 KiB", "THP tmpfs", "4 KiB", "2 MiB", "2 MiB", "2 MiB"]
array B_t[6] = ["pg-dsa 4 KiB", "+ THP tmpfs (faults, TLB)", "pg-prealloc 4 KiB (no segment creation)", \
                "+ 2 MiB pages", "+ inline translation", "dsmpool 2 MiB (lock-free allocation)"]
array B_c[6] = ["#1f3a93", "#2e86c1", "#48c9b0", "#27ae60", "#d4ac0d", "#c0392b"]
is_malloc(b) = b eq "jemalloc" || b eq "mimalloc" || b eq "glibc"

array Tv[64] # the worker counts of the mode, in the order of the CSV
array bt[64] # per worker count: the fastest malloc's row
array bb[64]
array bp[64]
array bs[64]
array bn[64]
array iA[8] # the series present in this mode, by number
array iB[8]
tpos(t, i) = i > nT ? 0 : (Tv[i] == t ? i : tpos(t, i + 1))
addT(t) = tpos(t, 1) > 0 ? 0 : (nT = nT + 1, Tv[nT] = t, 0)
best(t, bld, prb, tot, spd, name) = (k = tpos(t, 1), k > 0 && tot < bt[k] ? \
    (bt[k] = tot, bb[k] = bld, bp[k] = prb, bs[k] = spd, bn[k] = name, 0) : 0)
sel(b, p) = strcol(3) eq m && strcol(1) eq b && strcol(2) eq p
xat(t, j) = tpos(t, 1) + (j - (ns + 1) / 2.0) * bw

set style fill solid 1.0 noborder
set grid ytics
set tics nomirror
set xlabel "workers (T)"
set ylabel "seconds: total (solid part: build)"
set key outside below center vertical maxrows 6 reverse Left font ",9" samplen 2
set bmargin 10

do for [m in modes] {
    nT = 0
    do for [i=1:64] { Tv[i] = 0; bt[i] = 1e30; bb[i] = 0; bp[i] = 0; bs[i] = 0; bn[i] = "" }
    stats f skip 1 using (strcol(3) eq m ? addT($4) : 0) nooutput
    stats f skip 1 using (strcol(3) eq m && is_malloc(strcol(1)) ? best($4, $5, $6, $7, $8, strcol(1)) : 0) nooutput
    set print $best # the fastest malloc at each T, as rows of the CSV
    print "backend,pages,mode,workers,build_s,probe_s,total_s,speedup_vs_pgdsa,name"
    do for [i=1:nT] {
        if (bt[i] < 1e30) { print sprintf("malloc,-,%s,%d,%g,%g,%g,%g,%s", m, Tv[i], bb[i], bp[i], bt[i], bs[i], bn[i]) }
    }
    unset print
    stats f skip 1 using (strcol(3) eq m ? $7 : NaN) nooutput
    rot = nT > 3 ? 90 : 0
    ytop = STATS_max
    set yrange [0:ytop * (rot ? 1.35 : 1.25)]
    set xrange [0.5:nT + 0.5]
    set xtics ()
    do for [i=1:nT] { set xtics add (sprintf("%d", Tv[i]) i) }

    # the series this mode has rows of, in order (malloc: threads only)
    nA = 0
    do for [j=1:|A_b|] {
        cnt = 0
        if (A_b[j] eq "malloc") { do for [i=1:nT] { cnt = cnt + (bt[i] < 1e30) } } \
        else { stats f skip 1 using (sel(A_b[j], A_p[j]) ? (cnt = cnt + 1, 0) : 0) nooutput }
        if (cnt > 0) { nA = nA + 1; iA[nA] = j }
    }
    nB = 0
    do for [j=1:|B_b|] {
        cnt = 0
        stats f skip 1 using (sel(B_b[j], B_p[j]) ? (cnt = cnt + 1, 0) : 0) nooutput
        if (cnt > 0) { nB = nB + 1; iB[nB] = j }
    }

    ns = nA
    bw = 0.84 / ns
    set boxwidth bw * 0.92 absolute
    set title m.": dsmpool against the strongest peers"
    plot for [k=1:nA] (A_b[iA[k]] eq "malloc" ? "$best" : f) skip 1 \
            using (sel(A_b[iA[k]], A_p[iA[k]]) ? xat($4, k) : NaN):7 \
            with boxes fs transparent solid 0.35 lc rgb A_c[iA[k]] notitle, \
         for [k=1:nA] (A_b[iA[k]] eq "malloc" ? "$best" : f) skip 1 \
            using (sel(A_b[iA[k]], A_p[iA[k]]) ? xat($4, k) : NaN):5 with boxes lc rgb A_c[iA[k]] title A_t[iA[k]], \
         for [k=1:nA] (A_b[iA[k]] eq "malloc" ? "$best" : f) skip 1 \
            using (sel(A_b[iA[k]], A_p[iA[k]]) ? xat($4, k) : NaN):7: \
                  (($8 > 0 ? sprintf("%.2fx", $8) : "").(A_b[iA[k]] eq "malloc" ? (rot ? " " : "\n").strcol(9) : "")) \
            with labels rotate by rot left offset (rot ? 0 : -1.6), (A_b[iA[k]] eq "malloc" && !rot ? 1.7 : 0.6) \
            font ",8" notitle

    ns = nB
    bw = 0.84 / ns
    set boxwidth bw * 0.92 absolute
    set title m.": where dsmpool's lead comes from (each bar adds one change)"
    plot for [k=1:nB] f skip 1 using (sel(B_b[iB[k]], B_p[iB[k]]) ? xat($4, k) : NaN):7 \
            with boxes fs transparent solid 0.35 lc rgb B_c[iB[k]] notitle, \
         for [k=1:nB] f skip 1 using (sel(B_b[iB[k]], B_p[iB[k]]) ? xat($4, k) : NaN):5 \
            with boxes lc rgb B_c[iB[k]] title B_t[iB[k]], \
         for [k=1:nB] f skip 1 using (sel(B_b[iB[k]], B_p[iB[k]]) ? xat($4, k) : NaN):7:($8 > 0 ? sprintf("%.2fx", $8) : "") \
            with labels rotate by rot left offset (rot ? 0 : -1.6), 0.6 font ",8" notitle
}
unset multiplot
