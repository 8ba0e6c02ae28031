# bench/plot/w4-p99.gp - W4 fan-out: p99 publish-to-delivery latency against
# the publish rate; run in a results directory (bench/run.sh full does).
set terminal pngcairo size 900,520 font ",10"
set output 'bench-w4-p99.png'
set title 'W4 fan-out: p99 latency, publish to delivery (lower is better)'
set xlabel 'transitions published per second per room'
set ylabel 'p99 latency (ms)'
set logscale xy
set grid
set key left top
load 'w4-p99-series.gp'
