#!/bin/bash
# Interleaved before/after learner updates/s: BEFORE and CHECKOUT are two checkouts (e.g. a git
# worktree of the commit before), PAUSE the process groups of training runs to hold meanwhile.
# Usage: BEFORE=/tmp/before CHECKOUT=$PWD PAUSE="-26115 -26119" bash run_ab.sh
source $CHECKOUT/.venv/bin/activate
out=updates_per_s.jsonl; : > $out
[ -n "$PAUSE" ] && kill -STOP $PAUSE
trap '[ -n "$PAUSE" ] && kill -CONT $PAUSE' EXIT
sleep 2
for rep in 1 2 3; do
  for recipe in "ALE/Pong-v5" "SuperMarioBros-1-1-v0"; do
    for root in $BEFORE $CHECKOUT; do
      python "$(dirname "$0")/bench_one.py" $root $recipe 2>/dev/null | tail -1 >> $out
    done
  done
  for flags in "--quantiles 0 --iqn-taus 8" "--munchausen true" "--quantiles 0 --iqn-taus 4"; do
    python "$(dirname "$0")/bench_one.py" $CHECKOUT ALE/Pong-v5 $flags 2>/dev/null | tail -1 >> $out
  done
done
