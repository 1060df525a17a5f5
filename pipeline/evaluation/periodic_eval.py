"""Evaluation during training (--eval-interval): every N agent steps the current weights play
--eval-episodes whole games in a process of their own, and the best evaluation's weights are
kept in best_eval.pt.

Training games are played with exploration and cut at every lost life, so their scores (what
best.pt goes by) are a noisy view of the policy; this plays full games at --eval-epsilon, as
CleanRL and SB3's EvalCallback do. A process of its own, because a game of Pong takes a minute
of CPU and the learner must not wait for it; one evaluation at a time (the next one is due at
the first interval after it ends), each answering through a pipe of its own, so a late answer
can never be taken for the next evaluation's.

An evaluation that beats the best so far is confirmed before its weights replace best_eval.pt:
the same weights play fresh games (other seeds; --confirm-episodes of them, as many as the
screening by default), and only the confirmation's score counts. The best of many evaluations is
lucky by selection (weights that won 8 of 10 replayed 6 of 10), so the kept score is one that was
not chosen for being high. A confirmation is lucky too: the kept 10-game one becomes the bar, and
on Mario a 10 / 9 confirmation read 9 / 7 on other fresh games while the later screenings of
10 / 8 could not reach its bar to be confirmed. So a Mario confirmation may play more games than a
screening, its flags counted per screening's games (17 of 20 is 8.5), and a screening that
reaches the flag both ways within one flag of the best is confirmed too: ten games tell flags
apart no closer. A Mario candidate whose confirmation reaches the flag in at least
``FINISHED_SHARE`` of its greedy games is a finished agent (``finished``): the run can stop there.
Greedy Mario without sticky actions has one game per no-op start (31 with the preset; the NES and
greedy play are deterministic), so with --confirm-every-start its confirmation plays each start
once: all of its greedy games, the exact share, where 20 fresh games draw from the 31 with repeats
(World 6-4 weights kept at 15 of 20 reach the axe from 18 of 31 starts).

Mario is judged as every published Mario agent is, by greedy play on fresh games; each evaluation
also plays its games at --eval-epsilon, a figure reported beside it. So the score that keeps
weights is the greedy flag count, with the flags at epsilon and then the mean distance as
tie-breaks (``flag_score``). Kept by the fewer of the two counts, as before, the keep rule read a
random action's cut jump as a worse policy: a run's 700k weights confirmed 9 greedy and 5 at 0.05
were passed over for 450k weights that later played 7 of 10 greedy; and a stop that needed every
flag both ways stopped one seed in three before 5M agent steps (docs/notebook.md).
"""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import statistics
import time
from pathlib import Path

from config_optimized import ConfigError
from wrappers.registry import is_mario

from ..records.files import BEST_EVAL_NAME, CANDIDATE_NAME, EVALS_NAME, PENDING_NAME
from ..records.record import append_jsonl, write_json

TIMEOUT_S = 1800  # an evaluation still playing after this long is stopped (a policy stuck in a game)
# A gap this long between two looks is time the run stood still (stopped with SIGSTOP or Ctrl-Z
# with its evaluator, a laptop asleep), not play: counted as play, a paused run's evaluation was
# stopped on resume and its confirmation lost. The learner looks every fraction of a second, and
# its longest busy spell (a checkpoint with its replay) is well under a minute.
PAUSE_S = 60.0
CONFIRM_SEED_OFFSET = 1_000_003  # a confirmation's games: seeds apart from every screening's
FLAG_SLACK = 1.0  # a Mario screening with flags this close below the best is confirmed (flags per screening)
# A finished agent: its confirmation's greedy games reach the flag at least this often: 30 of
# Mario's 31 starts (played every one, the share is exact), 19 of 20 fresh games where the games
# are a draw. Every game asked one in three seeds to stop; a true rate of 0.95 passes 19 of 20
# three times in four, one of 0.85 one time in five.
FINISHED_SHARE = 0.95


def _exit_with_learner(every_s: float = 0.1) -> None:
    """End this process within ``every_s`` of its learner's death. ``daemon=True`` acts only when
    the learner exits normally; after a SIGKILL (an OOM kill) the evaluator would play its
    remaining games, minutes of a core, beside the --resume that follows. A thread, so a game
    step in progress cannot hold it up; the collectors check the same way in their loop."""
    import threading

    from ..actors.process_start import learner_alive

    def watch():
        while learner_alive():
            time.sleep(every_s)
        os._exit(0)

    threading.Thread(target=watch, name="learner-watch", daemon=True).start()


def eval_plan(mario: bool, eval_epsilon: float, score_metric: str) -> tuple[str, tuple[float, ...]]:
    """(the metric evaluations keep weights by, the epsilons each one plays its games at). Mario:
    flags, greedy and at ``eval_epsilon`` (greedy alone when that is 0); any other game:
    ``score_metric`` at ``eval_epsilon``."""
    if mario:
        return "flags", (0.0, eval_epsilon) if eval_epsilon > 0 else (0.0,)
    return score_metric, (eval_epsilon,)


def run_eval_plan(cfg) -> tuple[str, tuple[float, ...]]:
    """``eval_plan`` for a run's config."""
    return eval_plan(is_mario(cfg.env), cfg.run.eval_epsilon, cfg.run.score_metric)


def flag_score(flags: list[int], games: int, distances: list[float], per: int = 0) -> float:
    """The score of weights whose plays (the greedy play first, then one per epsilon, ``games``
    games each) reached the flag ``flags[i]`` times, with these distances: the greedy flags; a
    tie goes to more flags at the other epsilons, and then to the longer mean distance. Each
    tie-break is worth less than one step of what it breaks (a level is far shorter than 100,000
    px). Counted per ``per`` games (0: per ``games``), so plays of 10 and of 20 games compare: 17
    of 20 is 8.5."""
    slots = (len(flags) - 1) * games + 1
    mean_distance = statistics.fmean(distances) if distances else 0.0
    scale = (per or games) / games
    return scale * (flags[0] + sum(flags[1:]) / slots + min(mean_distance, 99_999.0) / 100_000 / slots)


def finished_play(plays: list[dict]) -> bool:
    """Whether a confirmation's plays make a finished agent: its greedy play (else its first)
    reached the flag in at least ``FINISHED_SHARE`` of its games."""
    judged = next((p for p in plays if p.get("epsilon") == 0), plays[0] if plays else {})
    flags = judged.get("flags") or []
    return finished_flags(sum(flags), len(flags))


def finished_flags(flags: int, games: int) -> bool:
    """``flags`` of ``games`` greedy games at the flag make a finished agent (``FINISHED_SHARE``)."""
    return games > 0 and flags >= FINISHED_SHARE * games - 1e-9


def kept_finished(best_eval: Path) -> bool:
    """Whether the weights kept in ``best_eval`` were a finished agent when kept: a run killed
    after such a confirmation and resumed stops as finished, instead of training on past weights
    no later confirmation can beat."""
    from ..records import checkpoint as ckpt

    if not best_eval.is_file():
        return False
    try:
        plays = (ckpt.load(best_eval).get("best") or {}).get("plays") or []
    except ckpt.CheckpointError:
        return False  # the resume check has refused a damaged file already; nothing is finished here
    judged = next((p for p in plays if p["epsilon"] == 0), plays[0] if plays else None)
    return judged is not None and finished_flags(judged["flags"], judged["games"])


PHASES = ("screen", "confirm")  # what an evaluation plays: a screening, or the confirmation of one that beat the best


def read_pending(run_dir: Path) -> dict | None:
    """Where the evaluation the last stop cut short stood (``eval_pending.json``, which ``close``
    writes), checked whole; None where no stop cut one short. Read by the resume check before
    any process starts: a damaged file there is one line naming it and the fix (ConfigError),
    not a traceback from the running pipeline."""
    path = Path(run_dir) / PENDING_NAME
    if not path.exists():
        return None
    try:
        state = json.loads(path.read_text())
        if not isinstance(state, dict):
            raise ValueError("not a JSON object")
        for key in ("agent_steps", "games_seed"):
            if not isinstance(state.get(key), int):
                raise ValueError(f"no {key}" if key not in state else f"{key} {state[key]!r} is not a whole number")
        if state.get("phase") not in PHASES:
            raise ValueError(f"phase {state.get('phase')!r}, not one of {', '.join(PHASES)}")
        if not isinstance(state.get("screened") or {}, dict):
            raise ValueError("screened is not a JSON object")
    except (OSError, UnicodeDecodeError, ValueError) as e:  # json's JSONDecodeError is a ValueError
        raise ConfigError(f"{path} (where an evaluation the last stop cut short stood) cannot be read "
                          f"({type(e).__name__}: {e}); delete {path} to resume without playing that evaluation "
                          "again") from None
    return state


def read_evals(run_dir: Path) -> list[dict]:
    """The rows of a run's evals.jsonl on one timeline. A folder a killed run left before its
    resume set such rows aside (``set_aside_rows_after``) holds the killed run's evaluations past
    its checkpoint and then the resumed run's of the same agent steps: where a row goes back to
    (or to the same) agent steps as rows before it, those earlier rows are the killed run's and
    are dropped, so no evaluation counts twice. A confirmation follows its own screening at the
    same agent steps, and stays. Raises FileNotFoundError where the run kept no evaluations."""
    from ..records.metrics import read_jsonl

    out: list[dict] = []
    for row in read_jsonl(Path(run_dir) / EVALS_NAME):
        steps = row.get("agent_steps", 0)
        follows_its_screening = (row.get("phase") == "confirm" and out and out[-1].get("phase", "screen") == "screen"
                                 and out[-1].get("agent_steps", 0) == steps)
        while out and out[-1].get("agent_steps", 0) >= steps and not follows_its_screening:
            out.pop()
        out.append(row)
    return out


def _play(checkpoint: str, episodes: int, epsilons: tuple[float, ...], seed: int, conn, video: str | None = None,
          every_start: bool = False) -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the learner, which stops us
    _exit_with_learner()
    import torch

    from .evaluate import evaluate
    from .starts import play_every_start

    torch.set_num_threads(1)
    try:
        plays = []
        for epsilon in epsilons:  # the same starts each way: seeds draw the no-op starts
            if every_start and epsilon == 0:  # greedy Mario: all its games, one per no-op start (starts.py)
                starts = play_every_start(checkpoint)
                plays.append({"epsilon": 0.0, "every_start": True, "returns": [g.ret for g in starts],
                              "lengths": [g.length for g in starts], "distances": [g.distance for g in starts],
                              "flags": [g.flag for g in starts], "stood": [g.stood for g in starts]})
                continue
            res = evaluate(checkpoint, episodes, None, seed=seed, epsilon=epsilon, log=lambda *_: None)
            plays.append({"epsilon": epsilon, "returns": res.returns, "lengths": res.lengths,
                          "distances": res.distances, "flags": res.flags, "stood": res.stood})
        filmed = {}
        if video:  # --capture-video: one more greedy game, filmed apart so the scored games are as without it
            try:
                evaluate(checkpoint, 1, video, seed=seed, epsilon=0.0, log=lambda *_: None)
                filmed = {"video": video}
            except Exception as e:  # a video must never cost the evaluation its result
                filmed = {"video_error": f"{type(e).__name__}: {e}"}
        conn.send({"plays": plays, **filmed})
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
    def __init__(self, run_dir: Path, interval: int, episodes: int, epsilons: tuple[float, ...], metric: str,
                 seed: int, log, best: float = float("-inf"), next_at: int = 0, confirm_episodes: int = 0,
                 ctx=None, video_dir: Path | None = None, confirm_every_start: bool = False):
        """``epsilons`` and ``metric``: ``eval_plan``'s; ``episodes`` games at each epsilon, and
        ``confirm_episodes`` (0: as many) in a confirmation. ``ctx``: the multiprocessing context
        the evaluator starts in (``process_start.child_context``'s; None: spawn), never fork's:
        a fork mid-training copies the learner beside its running threads, with its signal handlers.
        ``video_dir`` (--capture-video): each screening films a greedy game there as well.
        ``confirm_every_start``: a confirmation's greedy play is one game from each no-op start
        (``starts.play_every_start``: greedy Mario's games are one per start, so that is all of
        them, the exact share a draw of fresh games samples); its other plays stay as they are."""
        self.ctx = mp.get_context("spawn") if ctx is None or ctx.get_start_method() == "fork" else ctx
        self.run_dir, self.interval, self.episodes = Path(run_dir), interval, episodes
        self.video_dir = video_dir
        self.film: Path | None = None  # the video the screening start() launches films (--capture-video)
        self.confirm_episodes = confirm_episodes or episodes
        self.confirm_every_start = confirm_every_start and 0.0 in epsilons
        self.epsilons, self.metric, self.seed, self.log = tuple(epsilons), metric, seed, log
        self.epsilon = max(self.epsilons)  # --eval-epsilon
        self.best = best           # best confirmed mean score so far (kept in checkpoints)
        self.next_at = next_at     # agent steps at which the next evaluation is due
        self.proc = self.conn = None
        self.phase = "screen"      # what is playing: a screening, or the confirmation of one that beat the best
        self.screened: dict = {}   # the screening a confirmation confirms
        self.steps = 0             # agent steps of the weights being evaluated
        self.games_seed = 0        # the seed of the games being played
        self.played_s = 0.0        # seconds the evaluation has played, pauses left out (``PAUSE_S``)
        self.looked = 0.0          # time.monotonic() at the last look
        self.last_flags: str | None = None  # the last evaluation's flags, each way it played (Mario)
        # kept weights reached the flag in FINISHED_SHARE of their confirmation's greedy games
        self.finished = best > float("-inf") and kept_finished(self.run_dir / BEST_EVAL_NAME)

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
            self.film = self.video_dir / f"eval-{steps:09d}.mp4" if self.video_dir else None
            self._launch(path, self.seed + steps, "screen")
        except Exception as e:  # a full disk or no memory for a process: training goes on without it
            self.log(f"[EVAL] Evaluation at {steps:,} agent steps not started: {type(e).__name__}: {e}")
            return
        self.steps = steps

    def _launch(self, path: Path, games_seed: int, phase: str) -> None:
        video, self.film = (str(self.film) if self.film and phase == "screen" else None), None  # start's, once
        recv, send = self.ctx.Pipe(duplex=False)
        proc = self.ctx.Process(target=_play, name="evaluator", daemon=True,
                                args=(str(path), self.confirm_episodes if phase == "confirm" else self.episodes,
                                      self.epsilons, games_seed, send, video,
                                      phase == "confirm" and self.confirm_every_start))
        try:
            proc.start()
        finally:
            send.close()
        self.proc, self.conn, self.phase, self.games_seed = proc, recv, phase, games_seed
        self.start_clock()

    def start_clock(self) -> None:
        """An evaluation starts playing: its play time counts from now."""
        self.played_s, self.looked = 0.0, time.monotonic()

    def _tick(self) -> float:
        """The evaluation's play time at this look: each gap since the last look, up to PAUSE_S."""
        now = time.monotonic()
        self.played_s += min(max(now - self.looked, 0.0), PAUSE_S)
        self.looked = now
        return self.played_s

    def poll(self) -> None:
        """Take a finished evaluation's result: log it, append it to evals.jsonl; a screening that
        beats the best starts its confirmation, a confirmation that does too keeps its weights."""
        if self.proc is None:
            return
        if self.conn.poll():
            try:
                res = self.conn.recv()
            except EOFError:
                res = {"error": f"the evaluator exited with code {self.proc.exitcode} without a result"}
        elif not self.proc.is_alive():  # its answer is sent before it exits, so there is none
            res = {"error": f"the evaluator exited with code {self.proc.exitcode} without a result"}
        elif self._tick() > TIMEOUT_S:
            res = {"error": f"it played for more than {TIMEOUT_S // 60} minutes and was stopped"}
        else:
            return
        self._end()
        candidate = self.run_dir / CANDIDATE_NAME
        what = "Confirmation" if self.phase == "confirm" else "Evaluation"
        if "error" in res:
            self.log(f"[EVAL] {what} at {self.steps:,} agent steps failed: {res['error']}")
            candidate.unlink(missing_ok=True)
            return
        if "video" in res or "video_error" in res:
            self.log(f"[EVAL] A greedy game of the weights at {self.steps:,} agent steps: " + (
                res["video"] if "video" in res else f"not filmed ({res['video_error']})"))
        plays = res["plays"]
        flags = [f for p in plays for f in p["flags"]]  # Mario's (and any game that reports a flag)
        distances = [d for p in plays for d in p["distances"]]
        games = sum(len(p["returns"]) for p in plays)
        if self.metric == "flags":  # flags per screening's games, whatever this play's count
            score = flag_score([sum(p["flags"]) for p in plays], len(plays[0]["flags"]), distances, self.episodes)
        else:
            score = statistics.fmean(distances if self.metric == "distance" else [r for p in plays for r in p["returns"]])
        row = {"agent_steps": self.steps, "score": score, "metric": self.metric, "epsilon": self.epsilon,
               "phase": self.phase, "seed": self.games_seed, "plays": plays,
               **{k: [v for p in plays for v in p[k]] for k in ("returns", "lengths", "distances", "flags")}}
        append_jsonl(self.run_dir / EVALS_NAME, row)
        from .evaluate import greedy_said

        ways = ", ".join(f"{sum(p['flags'])}/{len(p['flags'])} " + (greedy_said(p) if p["epsilon"] == 0 else
                                                                   f"at {p['epsilon']:g}") for p in plays)
        if flags:
            self.last_flags = ways
        fresh = "fresh " if self.phase == "confirm" else ""
        places = 3 if self.metric == "flags" else 2  # a flags score's tie-breaks sit in its decimals
        stood = [f"x {d:,.0f}" + ("" if p["epsilon"] == 0 else f" at {p['epsilon']:g}") for p in plays
                 for d, st in zip(p.get("distances") or [], p.get("stood") or []) if st]
        if stood:  # a policy that stands still, found: each such game was scored where it stood
            ways += f" ({len(stood)} stood still: {', '.join(stood)})"
        if self.metric == "flags":
            said = (f"flag in {ways} {fresh}games, mean distance {statistics.fmean(distances):,.0f}; "
                    f"score {score:.{places}f} (greedy flags per {self.episodes} games, then the flags at epsilon, then distance)")
        else:
            said = (f"mean {self.metric} {score:.2f} over {games} {fresh}games (epsilon {self.epsilon:g})"
                    + (f", flag in {sum(flags)}/{games}" if flags else ""))
        # the slack only among weights that reach the flag both ways: before that, distance
        # breaks the tie and a confirmation of every flagless screening would buy nothing
        near = self.metric == "flags" and score >= 1 and score > self.best - FLAG_SLACK
        if self.phase == "screen" and (score > self.best or near):
            self.screened = {"score": score, "seed": self.games_seed}
            try:
                self._launch(candidate, CONFIRM_SEED_OFFSET + self.games_seed, "confirm")
            except Exception as e:
                self.log(f"[EVAL] At {self.steps:,} agent steps: {said}; its confirmation did not start "
                         f"({type(e).__name__}: {e}): best_eval.pt stays")
                candidate.unlink(missing_ok=True)
                return
            how = "above" if score > self.best else "within a flag of"
            on = (f"greedy from every start and on {self.confirm_episodes} fresh games at {self.epsilon:g}"
                  if self.confirm_every_start and len(self.epsilons) > 1 else "greedy from every start"
                  if self.confirm_every_start else f"on {self.confirm_episodes} fresh games"
                  + (" each way" if len(self.epsilons) > 1 else ""))
            self.log(f"[EVAL] At {self.steps:,} agent steps: {said}; {how} the best so far, confirming {on}")
            return
        if self.phase == "confirm" and score > self.best:
            self.best = score
            best = {"metric": self.metric, "score": score, "agent_steps": self.steps, "games": games,
                    "epsilon": self.epsilon, "seed": self.games_seed, "screen_score": self.screened["score"],
                    "screen_seed": self.screened["seed"]}
            if flags:
                best["flags"] = sum(flags)
                best["plays"] = [{"epsilon": p["epsilon"], "flags": sum(p["flags"]), "games": len(p["flags"]),
                                  **({"every_start": True} if p.get("every_start") else {})} for p in plays]
            keep_as_best(candidate, self.run_dir / BEST_EVAL_NAME, best)
            self.finished = finished_play(plays)
            self.log(f"[EVAL] At {self.steps:,} agent steps, confirmed: {said}; best so far, weights in "
                     f"{self.run_dir / BEST_EVAL_NAME}")
            return
        candidate.unlink(missing_ok=True)
        self.log(f"[EVAL] At {self.steps:,} agent steps: {said}" + (
            f"; not confirmed (the best so far is {self.best:.{places}f}): best_eval.pt stays" if self.phase == "confirm"
            else ""))

    def finish(self, interrupted=lambda: False) -> None:
        """At a planned stop: wait until an evaluation still playing, and a confirmation it starts,
        have reported (``poll`` stops a play after TIMEOUT_S), unless ``interrupted()`` says a
        Ctrl-C or SIGTERM came meanwhile. A fixed wait cut the last confirmation short whenever the
        machine was busy: its weights were then never judged."""
        if self.proc is not None:
            self.log(f"[EVAL] Waiting for the {self._what()} at {self.steps:,} agent steps to report before "
                     "stopping (Ctrl-C stops it)")
        while self.proc is not None and not interrupted():
            self.poll()
            time.sleep(0.1)

    def _what(self) -> str:
        return "confirmation" if self.phase == "confirm" else "evaluation"

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
        """Stop an evaluation still playing: no evaluator outlives the run. Its weights stay, and
        where it stood is written beside them (``eval_pending.json``): ``--resume`` plays it again
        first (``resume_pending``). A run stopped and resumed between sessions lost the
        confirmation under way at every stop, and with it the chance to keep those weights."""
        candidate = self.run_dir / CANDIDATE_NAME
        if self.proc is None:
            candidate.unlink(missing_ok=True)
            return
        self._end()
        pending = self.run_dir / PENDING_NAME
        try:
            write_json(pending, {"phase": self.phase, "agent_steps": self.steps, "games_seed": self.games_seed,
                                 "screened": self.screened})
        except OSError as e:  # a full disk: the stop goes on to its final checkpoint, which says the same
            candidate.unlink(missing_ok=True)  # weights no resume will play
            self.log(f"[EVAL] The {self._what()} at {self.steps:,} agent steps was stopped with the run; where it "
                     f"stood could not be written ({pending}: {e.strerror or e}), so --resume will not play it again; "
                     "best_eval.pt stays")
            return
        self.log(f"[EVAL] The {self._what()} at {self.steps:,} agent steps was stopped with the run; best_eval.pt "
                 "stays, and --resume plays it again first")

    def resume_pending(self) -> None:
        """Play again the evaluation that the last stop cut short, with the weights it was playing,
        on the same games; then evaluations go on as they were due."""
        pending, candidate = self.run_dir / PENDING_NAME, self.run_dir / CANDIDATE_NAME
        try:
            state = read_pending(self.run_dir)  # checked before the run started (check_resume)
        except ConfigError as e:  # damaged since: the run goes on without it
            self.log(f"[EVAL] {str(e).split('; delete')[0]}: not played again")
            state = None
        pending.unlink(missing_ok=True)
        if state is None or not candidate.exists():
            return
        self.steps, self.screened = state["agent_steps"], state.get("screened") or {}
        try:
            self._launch(candidate, state["games_seed"], state["phase"])
        except Exception as e:  # as at any start: training goes on without it
            self.log(f"[EVAL] The {state['phase']} at {self.steps:,} agent steps cut short by the last stop was not "
                     f"started again: {type(e).__name__}: {e}")
            candidate.unlink(missing_ok=True)
            return
        self.log(f"[EVAL] Playing again the {self._what()} at {self.steps:,} agent steps that the last stop cut short")
