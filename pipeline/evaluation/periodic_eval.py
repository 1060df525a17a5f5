"""Evaluation during training (--eval-interval): every N agent steps the current weights play
--eval-episodes whole games in a process of their own, and the best evaluation's weights are
kept in best_eval.pt.

Training games are played with exploration and cut at every lost life, so their scores (what
best.pt goes by) are a noisy view of the policy; this plays full games at --eval-epsilon, as
CleanRL and SB3's EvalCallback do. A process of its own, because a game of Pong takes a minute
of CPU and the learner must not wait for it; one evaluation at a time (the next one is due at
the first interval after it ends), each answering through a pipe of its own, so a late answer
can never be taken for the next evaluation's.
"""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import statistics
import time
from pathlib import Path

from ..records.files import BEST_EVAL_NAME, CANDIDATE_NAME, EVALS_NAME

TIMEOUT_S = 1800  # an evaluation still playing after this long is stopped (a policy stuck in a game)


def _exit_with_parent(parent_pid: int, every_s: float = 0.1) -> None:
    """End this process within ``every_s`` of its parent's death. ``daemon=True`` acts only when
    the parent exits normally; after a SIGKILL (an OOM kill) the evaluator would play its
    remaining games, minutes of a core, beside the --resume that follows. A thread, so a game
    step in progress cannot hold it up; the collectors check the same way in their loop."""
    import threading

    def watch():
        while os.getppid() == parent_pid:
            time.sleep(every_s)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _play(checkpoint: str, episodes: int, epsilon: float, seed: int, conn, parent_pid: int) -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the learner, which stops us
    _exit_with_parent(parent_pid)
    import torch

    from .evaluate import evaluate

    torch.set_num_threads(1)
    try:
        res = evaluate(checkpoint, episodes, None, seed=seed, epsilon=epsilon, log=lambda *_: None)
        conn.send({"returns": res.returns, "lengths": res.lengths, "distances": res.distances, "flags": res.flags})
    except BaseException as e:
        conn.send({"error": f"{type(e).__name__}: {e}"})
    finally:
        conn.close()


def keep_as_best(candidate: Path, best_path: Path, best: dict) -> None:
    """The evaluated weights become ``best_path``, carrying the evaluation that chose them: a
    resume reads its bar from the file itself (the periodic checkpoint may predate it), and a
    reader knows what the weights scored and on what games."""
    from ..records import checkpoint as ckpt

    state = ckpt.load(candidate)
    state["best"] = best
    ckpt.save(best_path, state)  # whole or not at all
    candidate.unlink(missing_ok=True)


class PeriodicEval:
    def __init__(self, run_dir: Path, interval: int, episodes: int, epsilon: float, metric: str, seed: int, log,
                 best: float = float("-inf"), next_at: int = 0):
        # spawn, whatever --start-method says: this process is forked mid-training otherwise,
        # beside running threads, and would inherit the learner's signal handlers
        self.ctx = mp.get_context("spawn")
        self.run_dir, self.interval, self.episodes = Path(run_dir), interval, episodes
        self.epsilon, self.metric, self.seed, self.log = epsilon, metric, seed, log
        self.best = best           # best mean score of an evaluation so far (kept in checkpoints)
        self.next_at = next_at     # agent steps at which the next evaluation is due
        self.proc = self.conn = None
        self.steps = 0             # agent steps of the weights being evaluated
        self.started = 0.0

    @property
    def running(self) -> bool:
        return self.proc is not None

    def due(self, steps: int) -> bool:
        return self.interval > 0 and self.proc is None and steps >= self.next_at

    def start(self, save_weights, steps: int) -> None:
        """Evaluate the weights that ``save_weights(name)`` writes now (a checkpoint file)."""
        self.next_at = (steps // self.interval + 1) * self.interval
        try:
            path = save_weights(CANDIDATE_NAME)
            recv, send = self.ctx.Pipe(duplex=False)
            proc = self.ctx.Process(target=_play, name="evaluator", daemon=True,
                                    args=(str(path), self.episodes, self.epsilon, self.seed + steps, send, os.getpid()))
            proc.start()
        except Exception as e:  # a full disk or no memory for a process: training goes on without it
            self.log(f"[EVAL] Evaluation at {steps:,} agent steps not started: {type(e).__name__}: {e}")
            return
        send.close()
        self.proc, self.conn, self.steps, self.started = proc, recv, steps, time.monotonic()

    def poll(self) -> None:
        """Take a finished evaluation's result: log it, append it to evals.jsonl, keep its weights if best."""
        if self.proc is None:
            return
        if self.conn.poll():
            try:
                res = self.conn.recv()
            except EOFError:
                res = {"error": f"the evaluator exited with code {self.proc.exitcode} without a result"}
        elif not self.proc.is_alive():  # its answer is sent before it exits, so there is none
            res = {"error": f"the evaluator exited with code {self.proc.exitcode} without a result"}
        elif time.monotonic() - self.started > TIMEOUT_S:
            res = {"error": f"it played for more than {TIMEOUT_S // 60} minutes and was stopped"}
        else:
            return
        self._end()
        if "error" in res:
            self.log(f"[EVAL] Evaluation at {self.steps:,} agent steps failed: {res['error']}")
            return
        scores = res["distances"] if self.metric == "distance" else res["returns"]
        score = statistics.fmean(scores)
        row = {"env_steps": self.steps, "score": score, "metric": self.metric, "epsilon": self.epsilon, **res}
        with open(self.run_dir / EVALS_NAME, "a") as f:
            f.write(json.dumps(row) + "\n")
        note = ""
        if score > self.best:
            self.best = score
            keep_as_best(self.run_dir / CANDIDATE_NAME, self.run_dir / BEST_EVAL_NAME,
                         {"metric": self.metric, "score": score, "env_steps": self.steps, "games": len(scores),
                          "epsilon": self.epsilon, "seed": self.seed + self.steps})
            note = f"; best so far, weights in {self.run_dir / BEST_EVAL_NAME}"
        self.log(f"[EVAL] At {self.steps:,} agent steps: mean {self.metric} {score:.2f} over {len(scores)} games "
                 f"(epsilon {self.epsilon:g}){note}")

    def finish(self, wait_s: float) -> None:
        """At a planned stop: give an evaluation still playing up to ``wait_s`` seconds to report."""
        deadline = time.monotonic() + wait_s
        while self.proc is not None and time.monotonic() < deadline:
            self.poll()
            time.sleep(0.1)

    def _end(self) -> None:
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(timeout=5)
            if self.proc.is_alive():
                self.proc.kill()
        self.proc.join()
        self.conn.close()
        self.proc = self.conn = None

    def close(self) -> None:
        """Stop an evaluation still playing: no evaluator outlives the run."""
        if self.proc is not None:
            self._end()
        (self.run_dir / CANDIDATE_NAME).unlink(missing_ok=True)
