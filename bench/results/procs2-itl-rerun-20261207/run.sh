#!/usr/bin/env bash
set -u
cd /work/main
PY=/work/main/.venv/bin/python
OUT=/work/notes/s45/ab; export PYTHONPATH=$PWD
echo "# start $(date -u +%FT%TZ) HEAD $(git rev-parse --short HEAD)" >> $OUT/log.txt
for i in 1 2 3 4; do
  for side in A B; do
    if [ $side = A ]; then root="--loadgen-root /work/wt2/base666"; else root=""; fi
    echo "## procs2 round $i side $side $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)" >> $OUT/log.txt
    timeout 300 $PY -m bench.timing_truth --levels 256 --stagger-levels '' --engines procs2 --no-tty $root > $OUT/tt-$side-$i.txt 2>&1
    grep -E "^procs2|warning" $OUT/tt-$side-$i.txt >> $OUT/log.txt
  done
done
echo "# end $(date -u +%FT%TZ)" >> $OUT/log.txt
