#!/usr/bin/env bash
# The default Atari run's updates/s alone, then beside one CPU-busy training run, with the
# learner's threads following the free cores (the default) and held fixed (--follow-free-cores false).
cd /work/main
PY=.venv/bin/python
common="--env ALE/Pong-v5 --seed 1 --learning-starts 2000 --epoch-steps 2000 --save-replay false --tensorboard false"
run() {  # name, seconds, extra args...
  local name=$1 secs=$2; shift 2
  rm -rf /tmp/share/$name
  timeout -s INT $secs $PY mario_rl_optimized.py $common --run-dir /tmp/share/$name "$@" > /tmp/share/$name.log 2>&1
}
run alone 240
# the other work: a second training run (Breakout, one learner thread), started first and left going
rm -rf /tmp/share/other
$PY mario_rl_optimized.py --env ALE/Breakout-v5 --seed 2 --learner-threads 1 --learning-starts 2000 --save-replay false --tensorboard false --total-steps 10000000 --run-dir /tmp/share/other > /tmp/share/other.log 2>&1 &
OTHER=$!
sleep 60
run beside_follow 240
run beside_fixed 240 --follow-free-cores false
kill -INT $OTHER; wait $OTHER
for n in alone beside_follow beside_fixed; do
  echo "== $n"; grep -E "Learner threads" /tmp/share/$n.log | head -3
  $PY - "$n" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(f"/tmp/share/{sys.argv[1]}/metrics.jsonl")]
ups = [r["updates_per_s"] for r in rows if r.get("updates", 0) > 0][1:]  # the first window holds the start of learning
print("epochs", len(rows), "updates/s per window:", [round(u, 1) for u in ups], "median", round(statistics.median(ups), 1) if ups else None)
PY
done
