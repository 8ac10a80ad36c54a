#!/usr/bin/env bash
# same-sitting A/B on the final tree (quiet box): the refactor vs 666c20d, and tracing on vs off
set -u
cd /work/wt2/s45-lead
PY=/work/main/.venv/bin/python
OUT=/work/notes/s45/abf; mkdir -p $OUT
export PYTHONPATH=$PWD
echo "# start $(date -u +%FT%TZ) HEAD $(git rev-parse --short HEAD) load $(cut -d' ' -f1-3 /proc/loadavg)" > $OUT/log.txt
timeout 900 $PY -m bench.ab_run --base 666c20d --rounds 8 > $OUT/ab_run-666c20d.txt 2>&1; tail -5 $OUT/ab_run-666c20d.txt | head -4 >> $OUT/log.txt
timeout 900 $PY -m bench.ab_run --base working-tree --a-set api.traceparent=false --rounds 8 > $OUT/ab_run-trace-off-on.txt 2>&1; tail -5 $OUT/ab_run-trace-off-on.txt | head -4 >> $OUT/log.txt
for i in 1 2 3; do
  for side in A B T; do
    case $side in
      A) extra="--loadgen-root /work/wt2/base666";;
      B) extra="";;
      T) extra="--set api.traceparent=false";;
    esac
    echo "## timing_truth round $i side $side $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)" >> $OUT/log.txt
    timeout 600 $PY -m bench.timing_truth --levels 256 --stagger-levels '' --engines native,procs2,locust1 --no-tty $extra > $OUT/tt-$side-$i.txt 2>&1
    grep -E "^(native|procs2|locust1) " $OUT/tt-$side-$i.txt >> $OUT/log.txt
  done
done
timeout 600 $PY -m bench.capacity_vs_mlperf_endpoints --peer-python /work/peer/venv/bin/python --rounds 2 > $OUT/cap.txt 2>&1; tail -4 $OUT/cap.txt >> $OUT/log.txt
echo "# end $(date -u +%FT%TZ)" >> $OUT/log.txt
