#!/bin/bash
# One device call: Pong without sticky actions to +18 on the GPU with the CPU recipe's collection
# (2 collectors x 8 envs, replay 100k) instead of gpu-optimal's 256 envs; then the CUDA unit tests.
T0=$(date +%s); DEADLINE=${DEADLINE:-585}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/.dev:$PWD PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; grep -m1 'model name' /proc/cpuinfo;
  grep -m2 -E '^(cpu family|model)\s' /proc/cpuinfo; nproc;
  python3 -c "import sys,torch,ale_py,gymnasium,numpy; print(sys.version, torch.__version__, ale_py.__version__, gymnasium.__version__, numpy.__version__)"; } > $OUT/machine.txt 2>&1
cat $OUT/machine.txt
LEFT=$((DEADLINE - ($(date +%s) - T0) - 95))
MIN=$(python3 -c "print(round($LEFT/60, 2))"); echo "pong minutes: $MIN"
timeout $((LEFT+30)) python3 mario_rl_optimized.py --env ALE/Pong-v5 --sticky-actions 0 --seed 1 --target-score 18 \
  --num-collectors 2 --envs-per-collector 8 --buffer-size 100000 \
  --time-limit $MIN --save-replay false --run-dir /tmp/pong > $OUT/pong_stdout.log 2>&1
echo "pong rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/pong_stdout.log
grep -E "^\[MAIN\] (ALE|Compil|Learning|Reached|Stopped|Target)" $OUT/pong_stdout.log | head; grep "^\[MAIN\] Speed" $OUT/pong_stdout.log | tail -3; tail -4 $OUT/pong_stdout.log
for f in config.json metrics.jsonl episodes.jsonl; do cp /tmp/pong/$f $OUT/ 2>/dev/null; done
ls /dev/shm
T=$((DEADLINE - ($(date +%s) - T0) - 5)); echo "tests seconds: $T"
[ $T -gt 20 ] && timeout $T python3 -m pytest tests/test_learner.py -q -p no:cacheprovider -k "device" 2>&1 | tail -8 > $OUT/cuda_tests.log
cat $OUT/cuda_tests.log
