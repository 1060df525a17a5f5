#!/bin/bash
cd "$(dirname "$0")/../../.."
for m in forkserver spawn forkserver spawn; do
  t0=$(date +%s.%N); echo "== $m"
  .venv/bin/python -u mario_rl_optimized.py --env tests.catch_env:Catch-v0 --learning-starts 500 --buffer-size 20000 --envs-per-collector 4 --batch-size 32 --replay-ratio 1 --epoch-steps 1000 --total-steps 1500 --num-collectors 2 --start-method $m --run-dir /tmp/fs_$m 2>&1 | while IFS= read -r l; do printf "%5.2f %s\n" $(echo "$(date +%s.%N) - $t0" | bc) "${l:0:110}"; done | grep -v "PROCESSOR\|Warning"
  printf "%5.2f end\n" $(echo "$(date +%s.%N) - $t0" | bc)
  rm -rf /tmp/fs_$m
done
