"""Sharing a run on the Hugging Face Hub (``--push-to-hub REPO``; the optional extra ``hub``):
a folder with a model card, the evaluated weights, ``config.json``, ``eval.json``, the learning
curve and the evaluation video, uploaded as one commit; ``--eval hf://user/repo`` plays it back.

``package_run`` builds the folder and touches no network, so what is uploaded is tested offline;
the card's metadata follows the Hub's RL convention (a model-index with ``mean_reward``), as
SB3's and CleanRL's uploads do, so the Hub shows the score beside the model.
"""
from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

from ..errors import UserError
from .files import CHECKPOINT_NAME, CURVE_NAME, EVAL_NAME, MODEL_CARD_NAME, RECORD_NAME, VIDEO_NAME

HF_PREFIX = "hf://"
WEIGHTS_NAME = CHECKPOINT_NAME  # the uploaded weights keep a run's checkpoint name: --eval hf:// loads them alike


class HubError(UserError, RuntimeError):
    """A run that cannot be shared as it is, or a Hub call that failed; the message says why."""


def _hub():
    try:
        import huggingface_hub
    except ImportError:
        raise HubError("the Hub needs the huggingface_hub package: pip install 'fast-dqn[hub]' "
                       "(or pip install huggingface_hub)") from None
    return huggingface_hub


def check_repo_id(repo_id: str) -> None:
    parts = repo_id.split("/")
    if len(parts) != 2 or not all(parts) or any(c in repo_id for c in " :\\"):
        raise HubError(f"--push-to-hub {repo_id!r}: give a Hub repository as user/name (or org/name)")


def model_card(repo_id: str, record: dict, evaluation: dict) -> str:
    """The README.md the Hub shows: YAML metadata (env, score) and how the run was made."""
    cfg = record["config"]
    env = cfg["env"]
    returns = evaluation["returns"]
    mean = statistics.fmean(returns)
    std = statistics.pstdev(returns) if len(returns) > 1 else 0.0
    meta = {
        "library_name": "fast-dqn",
        "tags": [env, "deep-reinforcement-learning", "reinforcement-learning", "dqn", "fast-dqn"],
        "model-index": [{
            "name": "DQN",
            "results": [{
                "task": {"type": "reinforcement-learning", "name": "reinforcement-learning"},
                "dataset": {"name": env, "type": env},
                "metrics": [{"type": "mean_reward", "value": f"{mean:.2f} +/- {std:.2f}", "name": "mean_reward",
                             "verified": False}],
            }],
        }],
    }
    # JSON is valid YAML: no YAML writer needed for the front matter
    front = "\n".join(f"{k}: {json.dumps(v)}" for k, v in meta.items())
    keys = ("model_arch", "dueling", "quantiles", "iqn_taus", "munchausen", "double_dqn", "weight_average", "n_step", "gamma",
            "batch_size", "replay_ratio", "lr", "target_update_interval", "buffer_size", "eps_decay_steps", "eps_end",
            "frame_stack", "frame_skip", "clip_rewards", "seed")
    rows = "\n".join(f"| {k} | {cfg.get(k)!r} |" for k in keys if k in cfg)
    from wrappers.families import game_family

    extra = game_family(env).card_note(evaluation)  # what the game family adds: Mario's distance and flags
    return f"""---
{front}
---

# DQN agent playing {env}

Trained with fast-dqn (collector processes, a shared-memory replay and a DQN learner; network
`{cfg.get('model_arch')}`). Mean return **{mean:.2f} +/- {std:.2f}** over {len(returns)} whole games at
epsilon {evaluation.get('epsilon', 0.0):g}.{extra}

## Use it

```bash
python mario_rl_optimized.py --eval hf://{repo_id} --episodes 10 --video replay.mp4
```

## How it was trained

Profile `{record.get('profile')}` on {record.get('hardware_summary', 'unknown hardware')}; commit
`{record.get('git_commit', 'unknown')}`. Every setting is in `config.json`; the main ones:

| setting | value |
|---|---|
{rows}

Files: `{WEIGHTS_NAME}` (the evaluated weights), `{RECORD_NAME}` (the run record), `{EVAL_NAME}`
(per-game results), `{CURVE_NAME}` and `{VIDEO_NAME}` where the run had them.
"""


def package_run(run_dir: str | Path, repo_id: str, out_dir: str | Path, evaluation: dict,
                video: str | Path | None = None) -> Path:
    """The folder to upload, built from a run and its evaluation (eval.json's contents): no
    network, no change to the run."""
    check_repo_id(repo_id)
    run_dir, out = Path(run_dir), Path(out_dir)
    record_path = run_dir / RECORD_NAME
    if not record_path.is_file():
        raise HubError(f"{run_dir} has no {RECORD_NAME}; share a run made by this version (or resume it once)")
    weights = Path(evaluation.get("checkpoint") or run_dir / WEIGHTS_NAME)
    if weights.is_dir():
        weights = weights / WEIGHTS_NAME
    if not weights.is_file():
        raise HubError(f"the evaluated checkpoint {weights} is gone; evaluate the run again (--eval {run_dir})")
    if not evaluation.get("returns"):
        raise HubError(f"the evaluation of {run_dir} holds no games; run --eval {run_dir} first")
    record = json.loads(record_path.read_text())
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(weights, out / WEIGHTS_NAME)
    # where and how it ran on the trainer's machine (folders, command line) stays there
    shared = {k: v for k, v in record.items() if k not in ("cwd", "command", "previous")}
    shared["config"] = {**record["config"], "run_dir": "", "resume": ""}
    (out / RECORD_NAME).write_text(json.dumps(shared, indent=2, default=str))
    (out / EVAL_NAME).write_text(json.dumps({**evaluation, "checkpoint": WEIGHTS_NAME}, indent=2))
    if (run_dir / CURVE_NAME).is_file():
        shutil.copyfile(run_dir / CURVE_NAME, out / CURVE_NAME)
    if video is not None and Path(video).is_file():
        shutil.copyfile(video, out / VIDEO_NAME)
    (out / MODEL_CARD_NAME).write_text(model_card(repo_id, record, evaluation))
    return out


def current_evaluation(run_dir: str | Path) -> dict | None:
    """The run's eval.json if it is of the weights it names as they are now (their SHA-256 is
    the one it recorded); None if there is none, it predates the digest, or those weights have
    been replaced since (evaluate again then)."""
    from ..evaluation.evaluate import weights_digest
    from .checkpoint import checkpoint_file

    eval_path = Path(run_dir) / EVAL_NAME
    evaluation = json.loads(eval_path.read_text()) if eval_path.is_file() else None
    if not evaluation or not evaluation.get("checkpoint") or not evaluation.get("weights_sha256"):
        return None
    played = checkpoint_file(evaluation["checkpoint"])
    if played.is_file() and weights_digest(played) == evaluation["weights_sha256"]:
        return evaluation
    return None


def weights_to_share(run_dir: str | Path) -> Path:
    """The run's best weights, to evaluate before sharing: best_eval.pt, else best.pt, else the
    checkpoint (the weights --eval RUN plays)."""
    from .checkpoint import kept_weights

    return kept_weights(Path(run_dir))


def push(folder: str | Path, repo_id: str, private: bool = False) -> str:
    """Upload a packaged folder as one commit (token: HF_TOKEN or ``hf auth login``); its URL."""
    hub = _hub()
    api = hub.HfApi()
    try:
        api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
        api.upload_folder(folder_path=str(folder), repo_id=repo_id, repo_type="model",
                          commit_message="fast-dqn: upload a trained agent")
    except Exception as e:  # network, auth and permission errors all end the same way for the user
        raise HubError(f"uploading to {repo_id} failed ({type(e).__name__}: {e}); check HF_TOKEN (or run "
                       "'hf auth login') and that you may write to that repository") from None
    return f"https://huggingface.co/{repo_id}"


def fetch(ref: str) -> Path:
    """``hf://user/repo`` -> the downloaded checkpoint file."""
    repo_id = ref[len(HF_PREFIX):]
    check_repo_id(repo_id)
    hub = _hub()
    try:
        folder = hub.snapshot_download(repo_id=repo_id, repo_type="model")
    except Exception as e:
        raise HubError(f"downloading {repo_id} failed ({type(e).__name__}: {e}); check the name and your "
                       "network (private repositories need HF_TOKEN)") from None
    path = Path(folder) / WEIGHTS_NAME
    if not path.is_file():
        raise HubError(f"{repo_id} holds no {WEIGHTS_NAME}; it was not uploaded by fast-dqn --push-to-hub")
    return path
