"""Where epoch metrics go: one JSON row per epoch in <run_dir>/metrics.jsonl (what the curve
plotter and users' own scripts read) and the same scalars as TensorBoard events in <run_dir>/tb,
indexed by agent steps (``tensorboard --logdir runs``)."""
from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

from .file_keys import current_keys
from .files import METRICS_NAME, TB_DIR

# metrics.jsonl key -> TensorBoard tag, grouped the way CleanRL and SB3 group theirs
# (a game family's own keys and tags come from its GameFamily.tb_tags: MetricsLog adds them)
TB_TAGS = {
    "return_mean": "charts/episodic_return", "length_mean": "charts/episodic_length",
    "epsilon": "charts/epsilon", "lr": "charts/learning_rate",
    "loss": "losses/td_loss", "td_error": "losses/td_error", "q_mean": "losses/q_values", "grad_norm": "losses/grad_norm",
    "agent_steps_per_s": "speed/agent_steps_per_s", "updates_per_s": "speed/updates_per_s",
    "samples_per_s": "speed/samples_per_s", "learner_busy": "speed/learner_busy",
    "buffer": "replay/size", "drops": "replay/ring_drops", "sample_age": "replay/sample_age",
}


class MetricsLog:
    def __init__(self, run_dir: Path, tensorboard: bool = True, game_tags: dict | None = None):
        """``game_tags``: the game family's metrics keys and their TensorBoard tags (``GameFamily.tb_tags``)."""
        self.jsonl = open(run_dir / METRICS_NAME, "a", buffering=1)
        self.tags = {**TB_TAGS, **(game_tags or {})}
        self.tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(str(run_dir / TB_DIR))

    def write(self, row: dict) -> None:
        self.jsonl.write(json.dumps(row) + "\n")
        if self.tb is not None:
            step = row["agent_steps"]
            for key, tag in self.tags.items():
                v = row.get(key)
                if isinstance(v, (int, float)) and math.isfinite(v):
                    self.tb.add_scalar(tag, v, step, walltime=None)
            self.tb.flush()

    def text(self, tag: str, markdown: str) -> None:
        if self.tb is not None:
            self.tb.add_text(tag, markdown)
            self.tb.flush()

    def close(self) -> None:
        self.jsonl.close()
        if self.tb is not None:
            self.tb.close()


def read_metrics(run_dir: str | Path) -> list[dict]:
    """Rows of a run's metrics.jsonl."""
    return read_jsonl(Path(run_dir) / METRICS_NAME)


def most_other_runs(run_dir: str | Path) -> int:
    """The most other training runs any of the run's epochs ended beside: its minutes were a share
    of the machine if above 0 (0 too for a run that ended no epoch, or from before they were counted)."""
    try:
        rows = read_metrics(run_dir)
    except FileNotFoundError:
        return 0
    return max((r.get("other_runs", 0) for r in rows), default=0)


def read_jsonl(path: Path) -> list[dict]:
    """Rows of one of a run's JSON-lines files, or of its gzip copy (``NAME.jsonl.gz``, as kept
    runs are stored); a half-written last line (a killed run) is skipped."""
    path = Path(path)
    packed = path if path.suffix == ".gz" else path.with_name(path.name + ".gz")
    if not path.exists() and packed.exists():
        path = packed
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; pass a run directory written by mario_rl_optimized.py")
    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    rows = []
    for line in text.splitlines():
        try:
            rows.append(current_keys(json.loads(line)))
        except json.JSONDecodeError:
            continue
    return rows
