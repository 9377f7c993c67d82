# gnuplot -e "dir='bench/results'" bench/plot-efficiency.gp
# Reads dir/efficiency.csv: memory overhead per size distribution, per allocator.
set terminal png size 1200,520 font ",10"
set output dir.'/efficiency.png'
set datafile separator ","
set datafile missing "nan"
set title "memory overhead: bytes used / bytes requested - 1 (lower is better)"
set ylabel "%"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set grid ytics
set xtics rotate by -20 font ",9"
set key top left
plot dir.'/efficiency.csv' every ::1::7 using 2:xtic(1) title "dsmpool" lc rgb "#3060a0", \
     '' every ::1::7 using 3 title "jemalloc" lc rgb "#a04030", \
     '' every ::1::7 using 4 title "mimalloc" lc rgb "#40a040", \
     '' every ::1::7 using 5 title "glibc" lc rgb "#a0a040"
