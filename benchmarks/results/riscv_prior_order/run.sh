#!/usr/bin/env bash
# usage: run.sh TAG (from a checkout at /work/main): live riscv-sim sgemm searches warm from the
# shipped prior, 3 shapes x 2 cores x 3 seeds, 25 trials; prints the rank correlation of the
# prior's model on the new trials and each trial's time (2026-12-08, RESULTS "a loop order
# recorded as one string")
cd /work/main
for core in x280 x60; do for shape in M=48,N=80,K=48 M=32,N=256,K=64 M=96,N=64,K=128; do for s in 1 2 3; do
  db=/tmp/rv_$1_${core}_${shape//[,=]/}_$s.db; rm -f $db
  timeout 300 .venv/bin/tunex search sgemm --target riscv-sim:$core --shape $shape --budget 25trials --seed $s --db $db > $db.log 2>&1
  rho=$(grep -o "ranks this workload's trials at [-+0-9.]*" $db.log | grep -o "[-+0-9.]*$")
  traj=$(grep -o "trial [0-9]*/25 [0-9.]* ms" $db.log | awk '{print $3}' | tr '\n' ' ')
  echo "$1 $core $shape $s rho=$rho :: $traj"
done; done; done
