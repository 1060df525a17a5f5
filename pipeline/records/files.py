"""Every file name a run folder holds, in one place: the modules that write or read a run's files
(and the entry script) import the names from here, so a name is changed once.

A run folder (``runs/{env}__{seed}__{time}``, or ``--run-dir``)::

    checkpoint.pt       the latest checkpoint (``--resume``, ``--eval``)
    best.pt             the weights of the best rolling score at an epoch end
    best_eval.pt        the weights of the best evaluation (``--eval-interval``)
    replay.npz          the saved replay (``--save-replay``), loaded by ``--resume``
    config.json         the run record: settings, hardware, commit, versions
    metrics.jsonl       one row per epoch; tb/ holds the same for TensorBoard
    episodes.jsonl      one row per whole game
    *.after_checkpoint.jsonl  rows a killed run wrote after its last checkpoint, set aside by --resume
    evals.jsonl         one row per evaluation during training
    eval.json           the last ``--eval`` of the run
    eval_history.jsonl  every ``--eval`` of the run, one row each (eval.json's contents and when)
    flag.mp4            a flag run of the kept weights, where a run stopped at a finished agent (Mario)
    videos/             ``--capture-video``: a greedy game of each evaluation during training
    eval_candidate.pt   the weights an evaluation during training is playing
    eval_pending.json   where an evaluation a stop cut short stood: --resume plays it again
    learning_curve.png  ``--plot`` and the end of every run
    train.log           the run's log
    wandb_run_id, wandb/  ``--track``
    NAME.tmp            an atomic write of NAME (written whole, then renamed over it) cut short by a kill

``--overwrite`` removes all of them (CLEARED_FILES, OTHER_FOLDERS) but train.log, which the new
run holds and empties.
"""
from __future__ import annotations

CHECKPOINT_NAME = "checkpoint.pt"
BEST_NAME = "best.pt"
BEST_EVAL_NAME = "best_eval.pt"
CANDIDATE_NAME = "eval_candidate.pt"   # the weights an evaluation during training is playing
PENDING_NAME = "eval_pending.json"     # an evaluation a stop cut short (with the candidate's weights kept)
REPLAY_NAME = "replay.npz"
RECORD_NAME = "config.json"
METRICS_NAME = "metrics.jsonl"
EPISODES_NAME = "episodes.jsonl"
EVALS_NAME = "evals.jsonl"
EVAL_NAME = "eval.json"
EVERY_START_NAME = "eval_every_start.json"  # --eval --every-start: greedy Mario's game from each no-op start
EVAL_HISTORY_NAME = "eval_history.jsonl"
CURVE_NAME = "learning_curve.png"
LOG_NAME = "train.log"
TB_DIR = "tb"
VIDEOS_DIR = "videos"                  # --capture-video: eval-{agent steps}.mp4, one per evaluation
TRACKING_ID_FILE = "wandb_run_id"
WANDB_DIR = "wandb"
VIDEO_NAME = "replay.mp4"              # the evaluation video a Hub upload carries
FLAG_VIDEO_NAME = "flag.mp4"           # a flag run of best_eval.pt, filmed where --stop-at-flag stopped the run
MODEL_CARD_NAME = "README.md"          # the Hub upload's model card
LATEST_LINK = "latest"                 # runs/latest: the newest run under runs/
TMP_SUFFIX = ".tmp"                    # atomic writes go to NAME.tmp, then are renamed over NAME
AFTER_CHECKPOINT_SUFFIX = ".after_checkpoint.jsonl"  # episodes/metrics/evals rows a killed run wrote past its checkpoint


def after_checkpoint_name(name: str) -> str:
    """Where --resume sets aside the rows of ``name`` (a .jsonl) that a killed run wrote after its
    last checkpoint: ``episodes.jsonl`` -> ``episodes.after_checkpoint.jsonl``."""
    return name.removesuffix(".jsonl") + AFTER_CHECKPOINT_SUFFIX

# What makes a folder a run's: a new run must not write into another's (runs once overwrote each
# other silently in a shared runs/latest).
RUN_FILES = (CHECKPOINT_NAME, METRICS_NAME, EPISODES_NAME, LOG_NAME, RECORD_NAME, REPLAY_NAME, BEST_NAME,
             EVALS_NAME, BEST_EVAL_NAME)
# written by a run besides RUN_FILES (which mark a folder as a run's)
OTHER_FILES = (CURVE_NAME, EVAL_NAME, EVAL_HISTORY_NAME, EVERY_START_NAME, FLAG_VIDEO_NAME, CANDIDATE_NAME, PENDING_NAME,
               TRACKING_ID_FILE, *(after_checkpoint_name(n) for n in (EPISODES_NAME, METRICS_NAME, EVALS_NAME)))
OTHER_FOLDERS = (TB_DIR, WANDB_DIR, VIDEOS_DIR)
# What --overwrite clears (with OTHER_FOLDERS): every file of a run, each with the NAME.tmp that a
# write of it leaves where the run was killed before the rename (checkpoints, best*.pt, config.json,
# eval.json, the replay, the rows set aside by a resume)
CLEARED_FILES = tuple(n for name in (*RUN_FILES, *OTHER_FILES) for n in (name, name + TMP_SUFFIX))
# the weights a run kept, best first: what --eval RUN plays and --push-to-hub shares
WEIGHTS_BEST_FIRST = (BEST_EVAL_NAME, BEST_NAME, CHECKPOINT_NAME)
