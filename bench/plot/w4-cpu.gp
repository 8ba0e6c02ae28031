# bench/plot/w4-cpu.gp - W4 fan-out: deliveries per server CPU-second against
# the publish rate; run in a results directory (bench/run.sh full does).
set terminal pngcairo size 900,520 font ",10"
set output 'bench-w4-cpu.png'
set title 'W4 fan-out: deliveries per server CPU-second (higher is better)'
set xlabel 'transitions published per second per room'
set ylabel 'deliveries per server CPU-second'
set logscale xy
set grid
set key left top
load 'w4-cpu-series.gp'
