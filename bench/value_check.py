"""``--value-check RUN_DIR``: the learned Q(s, a) of the actions the agent took, against the
discounted return that really followed them in the run's saved replay (van Hasselt et al. 2016
plot the same comparison to show DQN's overestimation). A Q far below the returns is a
pessimistic bias that bootstrapping keeps; far above, an optimistic one.

It reads the run's final checkpoint and the replay saved beside it (a clean stop writes both);
the returns are the training rewards (clipped, as the learner sees them) discounted with the
run's gamma, to each episode's end, so only the states whose episode ended inside the replay
count. The replay holds the last ``--buffer-size`` agent steps, played by the policies of that
stretch: on a run still improving, their returns are a little below the final policy's."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch


def discounted_returns(reward: np.ndarray, flags: np.ndarray, gamma: float) -> np.ndarray:
    """One env stream's records in the order they were played: the discounted return from each
    record to the end of its episode, NaN where the episode's end is not in the stream (it went
    on past the newest record, or was truncated) and on the LAST records (a final observation,
    no action)."""
    from pipeline.transport.transition import LAST, TERM, TRUNC

    out = np.full(len(reward), np.nan)
    run = np.nan  # unknown until an episode's end is seen
    for i in range(len(reward) - 1, -1, -1):
        f = int(flags[i])
        if f & LAST:
            run = 0.0
            continue
        if f & TERM:
            run = float(reward[i])
        elif f & TRUNC:
            run = np.nan
        else:
            run = float(reward[i]) + gamma * run
        out[i] = run
    return out


def value_check(run_dir, states_per_stream: int = 64, seed: int = 0) -> dict:
    from pipeline.agent.learner import Learner
    from pipeline.records import checkpoint as ckpt
    from pipeline.records.files import REPLAY_NAME
    from pipeline.replay import Replay
    from pipeline.records import replay_snapshot as snapshot
    from pipeline.settings.layers import trained_config

    run_dir = Path(run_dir)
    state = ckpt.load(run_dir)
    cfg = trained_config(state, run_dir).replace(amp=False, compile=False)
    fs, col = cfg.env_options.frame_stack, cfg.collectors
    replay = Replay.of(cfg.replay.buffer_size, col.total_collectors, col.envs_per_collector, frame_stack=fs,
                       n_step=cfg.replay.n_step, gamma=cfg.replay.gamma, seed=seed)
    path = run_dir / REPLAY_NAME
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: --value-check needs the replay a clean stop saves "
                                "(a run with --save-replay true, stopped by its limit, Ctrl-C or SIGTERM)")
    meta = snapshot.load(replay, path, cfg.env, fs)
    learner = Learner(cfg.learner, fs, state["meta"]["n_actions"], torch.device("cpu"))
    learner.load_state_dict(state["learner"])
    st, gamma = replay.storage, cfg.replay.gamma
    rng = np.random.default_rng(seed)
    streams, positions, returns = [], [], []
    for s in range(st.num_streams):
        n = int(min(st.written[s], st.stream_len))
        order = (st.pos[s] - n + np.arange(n)) % st.stream_len  # oldest .. newest
        g = discounted_returns(st.reward[s, order], st.flags[s, order], gamma)
        known = np.flatnonzero(~np.isnan(g))
        if len(known) == 0:
            continue
        pick = rng.choice(known, min(states_per_stream, len(known)), replace=False)
        streams += [s] * len(pick)
        positions += list(order[pick])
        returns += list(g[pick])
    if not returns:
        raise ValueError(f"no episode ends in {path}: nothing to compare the Q-values with")
    s, p, g = np.array(streams), np.array(positions), np.array(returns)
    obs = learner.to_device({"obs": st.frames[s[:, None], st.stack_indices(s, p, fs)]})["obs"]
    act = torch.from_numpy(st.action[s, p].astype(np.int64))
    rows = torch.arange(len(p))
    with torch.no_grad():
        q = {}
        for name, net, train in (("q_eval", learner.model, False), ("q_train", learner.model, True),
                                 ("q_target", learner.target, False)):
            was = net.training
            # train mode normalizes on this batch (BatchNorm): running statistics are put back after
            buffers = {k: v.clone() for k, v in net.named_buffers()}
            net.train(train)
            q[name] = net(obs)[rows, act].numpy()
            net.train(was)
            for k, v in net.named_buffers():
                v.copy_(buffers[k])
    return {"run_dir": str(run_dir), "states": len(g), "checkpoint_agent_steps": state["counters"]["agent_steps"],
            "replay_agent_steps": meta.get("agent_steps"), "gamma": gamma, "mc_return": float(g.mean()),
            **{k: float(v.mean()) for k, v in q.items()},
            "bias": float((q["q_eval"] - g).mean()), "correlation": float(np.corrcoef(q["q_eval"], g)[0, 1])}


def print_value_check(r: dict) -> None:
    print(f"\nValue check of {r['run_dir']} (checkpoint at {r['checkpoint_agent_steps']:,} agent steps, replay at "
          f"{r['replay_agent_steps']:,}; {r['states']} states whose episode ended in the replay, gamma {r['gamma']}):")
    print("| discounted return that followed | Q(s, a) eval mode (acting, targets) | train mode (the loss) "
          "| target network | Q - return | correlation |\n|---|---|---|---|---|---|")
    print(f"| {r['mc_return']:+.3f} | {r['q_eval']:+.3f} | {r['q_train']:+.3f} | {r['q_target']:+.3f} "
          f"| {r['bias']:+.3f} | {r['correlation']:.2f} |")
