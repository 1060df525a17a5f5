#!/bin/bash
# Short device call: the auto profile on Atari as a user runs it (expects gpu-optimal with 2 x 8 envs).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/.dev:$PWD PYTHONUNBUFFERED=1
timeout 215 python3 mario_rl_optimized.py --env ALE/Pong-v5 --sticky-actions 0 --seed 2 --time-limit 3.0 \
  --save-replay false --run-dir /tmp/pong > $OUT/auto_stdout.log 2>&1
echo "pong rc=$?" | tee -a $OUT/auto_stdout.log
grep -E "^\[MAIN\] (ALE|Profile|Compil|Stopped)|^Profile|^Collect" $OUT/auto_stdout.log | head -8; grep "Speed" $OUT/auto_stdout.log | tail -2
cp /tmp/pong/metrics.jsonl /tmp/pong/episodes.jsonl /tmp/pong/config.json $OUT/ 2>/dev/null; ls /dev/shm
