#!/bin/bash
# Device call 1: the CUDA tests, the learner per graph scope, a short Pong pipeline run.
T0=$(date +%s); DEADLINE=${DEADLINE:-270}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/.dev:$PWD PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; grep -m1 'model name' /proc/cpuinfo;
  grep -m2 -E '^(cpu family|model)\s' /proc/cpuinfo; nproc;
  python3 -c "import sys,torch,ale_py,gymnasium,numpy; print(sys.version, torch.__version__, ale_py.__version__, gymnasium.__version__, numpy.__version__)"; } > $OUT/machine.txt 2>&1
cat $OUT/machine.txt
timeout 70 python3 -m pytest tests/test_learner.py -q -p no:cacheprovider -k "device or whole or graphed or cuda" 2>&1 | tail -15 > $OUT/cuda_tests.log
cat $OUT/cuda_tests.log
timeout 100 python3 .dev/gpu_variants2.py > $OUT/variants.log 2>&1; echo "variants rc=$?" >> $OUT/variants.log
grep -v "^ *$" $OUT/variants.log | grep -iv "warn" | tail -12
LEFT=$((DEADLINE - ($(date +%s) - T0) - 25))
echo "pipeline seconds: $LEFT"
if [ $LEFT -gt 50 ]; then
  MIN=$(python3 -c "print(round($LEFT/60, 2))")
  timeout $((LEFT+20)) python3 mario_rl_optimized.py --env ALE/Pong-v5 --sticky-actions 0 --seed 1 --time-limit $MIN \
    --save-replay false --run-dir /tmp/pong1 > $OUT/pong1_stdout.log 2>&1; echo "pong rc=$?" >> $OUT/pong1_stdout.log
  grep -E "^\[MAIN\] (Speed|ALE|Profile|Compil|Each|Warning|Stopped)|Collect|Error|error" $OUT/pong1_stdout.log | tail -14
  cp /tmp/pong1/metrics.jsonl $OUT/pong1_metrics.jsonl 2>/dev/null
fi
ls /dev/shm
