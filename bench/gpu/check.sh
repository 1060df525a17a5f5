#!/usr/bin/env bash
# The prepared GPU check: one device call (bench/gpu/wheels.sh first, here), at most ~9 minutes:
#   1. the machine (GPU, host CPU, cores, versions);
#   2. the CUDA tests (the learner on the GPU: batches, CUDA graphs, bit-for-bit paths; collectors
#      acting on the GPU);
#   2b. the collectors alone for 25 s each, acting on the host CPU and on the GPU (--collector-device);
#   3. Pong without sticky actions to +18 with the defaults (the auto profile), seed 1;
#   4. its figures from the run's own records: agent steps/s, updates/s, the learner's busy
#      share, the collectors' env/act split, minutes and agent steps to +18.
# Everything it prints and the run's records go to $OUT; commit them under docs/data/ as they are.
# Device call: run(command="bash bench/gpu/check.sh", carry=[".whl"], timeout_s=600)
set -u
T0=$(date +%s); DEADLINE=${DEADLINE:-560}
OUT=${OUT:-/tmp/gpu_check_out}; mkdir -p "$OUT"
left() { echo $((DEADLINE - ($(date +%s) - T0))); }
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheel install failed"; exit 1; }
fi
# the GPU image's Python is 3.12: bench/gpu/sitecustomize.py gives it 3.13's SharedMemory(track=False)
export PYTHONPATH=/tmp/site:$PWD/bench/gpu:$PWD PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; grep -m1 'model name' /proc/cpuinfo
  grep -m2 -E '^(cpu family|model)\s' /proc/cpuinfo; echo "cores: $(nproc)"; free -g | head -2
  git log -1 --format='commit %H %s' 2>/dev/null || true
  python3 -c "import sys,torch,ale_py,gymnasium,numpy; print(sys.version.split()[0], 'torch', torch.__version__, 'ale_py', ale_py.__version__, 'gymnasium', gymnasium.__version__, 'numpy', numpy.__version__)"
  python3 config_optimized.py --env ALE/Pong-v5 2>&1 | head -40; } > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

echo "== CUDA tests ($(left) s left)"
[ "$(left)" -gt 300 ] || { echo "too little time left for the CUDA tests and a Pong run"; exit 1; }
timeout 180 python3 -m pytest tests/test_learner.py tests/test_collector_device.py tests/test_rules.py -q -p no:cacheprovider -x \
  -k "device or cuda or graph" \
  > "$OUT/cuda_tests.log" 2>&1
echo "cuda tests rc=$?"; tail -5 "$OUT/cuda_tests.log"

# The collectors alone, acting on the host CPU and on the GPU (--collector-device), the auto
# profile's layout: 25 s each with learning held off, so the Speed lines show what they play.
for dev in cpu cuda; do
  timeout 45 python3 mario_rl_optimized.py --env ALE/Pong-v5 --sticky-actions 0 --seed 1 --collector-device $dev \
    --learning-starts 1000000000 --epoch-steps 5000 --time-limit 0.42 --save-replay false --run-dir /tmp/act_$dev \
    > "$OUT/collectors_${dev}.log" 2>&1
  echo "collectors on $dev rc=$?: $(grep '^\[MAIN\] Speed' "$OUT/collectors_${dev}.log" | tail -1)"
done
MIN=$(python3 -c "print(round(max(1.0, ($(left) - 75) / 60), 2))")
echo "== Pong -v5 --sticky-actions 0 to +18, the auto profile, at most $MIN min ($(left) s left)"
timeout $(( $(left) - 20 )) python3 mario_rl_optimized.py --env ALE/Pong-v5 --sticky-actions 0 --seed 1 \
  --target-score 18 --time-limit "$MIN" --save-replay false --run-dir /tmp/pong > "$OUT/pong_train.log" 2>&1
echo "pong rc=$? at $(( $(date +%s) - T0 )) s"
grep -E '^\[MAIN\] (ALE|Compil|Learning|Reached|Stopped|Target)' "$OUT/pong_train.log" | head -12
grep '^\[MAIN\] Speed' "$OUT/pong_train.log" | tail -3
for f in config.json metrics.jsonl episodes.jsonl; do cp "/tmp/pong/$f" "$OUT/pong_$f" 2>/dev/null; done
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, re, statistics, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(f"{out}/pong_metrics.jsonl")] if __import__("os").path.exists(f"{out}/pong_metrics.jsonl") else []
games = [json.loads(l) for l in open(f"{out}/pong_episodes.jsonl")] if __import__("os").path.exists(f"{out}/pong_episodes.jsonl") else []
learn = [r for r in rows if r.get("updates_per_s")]
med = lambda k: statistics.median(r[k] for r in learn if r.get(k) is not None) if learn else None
print("epochs", len(rows), "games", len(games))
for k in ("agent_steps_per_s", "updates_per_s", "learner_busy", "collector_throttled", "collector_ring_wait"):
    print(f"median {k}: {med(k)}")
split = [tuple(map(int, m.groups())) for m in re.finditer(r"collectors: env (\d+)%, act (\d+)%", open(f"{out}/pong_train.log").read())]
if split:
    print("collectors env/act % (median over Speed lines):", statistics.median(s[0] for s in split), statistics.median(s[1] for s in split))
last20, hit = [], None
for g in games:
    last20 = (last20 + [g["return"]])[-20:]
    if hit is None and len(last20) == 20 and sum(last20) / 20 >= 18:
        hit = g
print("+18 (last-20 mean):", f"{hit['wall_s'] / 60:.2f} min, {hit['agent_steps']:,} agent steps" if hit else "not reached",
      "| best last-20:", max((sum(games[max(0, i - 19):i + 1][j]["return"] for j in range(len(games[max(0, i - 19):i + 1]))) / len(games[max(0, i - 19):i + 1]) for i in range(19, len(games))), default=None))
PY
ls /dev/shm | grep -c dqnrl_ | sed 's/^/shared-memory segments left: /'
echo "done at $(( $(date +%s) - T0 )) s"
