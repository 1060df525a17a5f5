#!/bin/bash
# Device call 2: Pong without sticky actions to +18 with the defaults (auto profile), as a user runs it.
T0=$(date +%s); DEADLINE=${DEADLINE:-480}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/.dev:$PWD PYTHONUNBUFFERED=1
LEFT=$((DEADLINE - ($(date +%s) - T0) - 40))
MIN=$(python3 -c "print(round($LEFT/60, 2))"); echo "pong minutes: $MIN"
timeout $((LEFT+30)) python3 mario_rl_optimized.py --env ALE/Pong-v5 --sticky-actions 0 --seed 1 --target-score 18 \
  --time-limit $MIN --save-replay false --run-dir /tmp/pong $EXTRA > $OUT/train.log 2>&1
echo "pong rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/train.log
grep -E "^\[MAIN\] (ALE|Profile|Compil|Each|Warning|Learning|Reached|Stopped|Target)" $OUT/train.log | head; grep "^\[MAIN\] Speed" $OUT/train.log | tail -3; tail -4 $OUT/train.log
for f in config.json metrics.jsonl episodes.jsonl; do cp /tmp/pong/$f $OUT/ 2>/dev/null; done
ls /dev/shm
