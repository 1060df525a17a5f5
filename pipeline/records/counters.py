"""Where a run stands, as its checkpoint carries it across a stop and ``--resume``: one class
writes the counters into a checkpoint and reads them back."""
from __future__ import annotations

from dataclasses import dataclass

NO_SCORE = float("-inf")


@dataclass
class RunCounters:
    """The run's counters (all zero for a new run)."""
    agent_steps: int = 0          # agent steps played (the ones a full ring dropped included)
    episodes: int = 0           # games finished
    samples_trained: int = 0
    wall_s: float = 0.0         # the run's wall clock, earlier sessions included
    epoch: int = 0
    launches: int = 0           # collector starts: each start's seeds differ from every earlier one's
    best_score: float = NO_SCORE  # best mean of the last 20 games at an epoch end (best.pt)
    best_eval: float = NO_SCORE   # best --eval-interval evaluation (best_eval.pt)
    owed_updates: int = 0         # updates the agent steps played had paid for and the learner had not trained

    def to_checkpoint(self, metric: str, epsilon: float, eval_metric: str | None = None) -> dict:
        """The checkpoint's ``counters``: these, the metric the best scores are in (``eval_metric``:
        best_eval's, where it differs), and the exploration epsilon at ``agent_steps`` (for
        ``--eval`` and the Hub's model card)."""
        return {"agent_steps": self.agent_steps, "episodes": self.episodes, "samples_trained": self.samples_trained,
                "epoch": self.epoch, "collector_launches": self.launches, "best_score": self.best_score,
                "best_eval": self.best_eval, "best_metric": metric, "best_eval_metric": eval_metric or metric,
                "wall_s": self.wall_s, "epsilon": epsilon, "owed_updates": self.owed_updates}

    @classmethod
    def from_checkpoint(cls, c: dict) -> RunCounters:
        """The counters a checkpoint's ``counters`` hold; what older checkpoints lack takes the
        value the code had before it was saved."""
        return cls(int(c["agent_steps"]), int(c["episodes"]), int(c["samples_trained"]), float(c["wall_s"]),
                   int(c["epoch"]),
                   # before launches were counted the step count set the seeds apart: it still does
                   int(c.get("collector_launches", c["agent_steps"])),
                   float(c.get("best_score", NO_SCORE)), float(c.get("best_eval", NO_SCORE)),
                   int(c.get("owed_updates", 0)))  # before they were carried a resume forgave them
