#!/bin/bash
# In-pipeline A/B: the Atari preset with Double DQN (on) and without (off) on Pong -v5, 3.5 minutes
# each, one after another in the order on, off, off, on, the machine otherwise quiet. Each run's
# metrics.jsonl then gives its epochs' agent steps/s and updates/s (ddqn_ab_zen5.json: the epochs
# after the compile's, medians).
cd "$(git rev-parse --show-toplevel)"
for lab in on off off on; do
  d=/tmp/ab/${lab}_$(date +%H%M%S)
  flag=""; [ $lab = off ] && flag="--double-dqn false"
  python mario_rl_optimized.py --env ALE/Pong-v5 --seed 1 --time-limit 3.5 --epoch-steps 2000 $flag --run-dir $d > $d.log 2>&1
done
