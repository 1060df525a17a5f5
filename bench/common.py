"""What several parts of the benchmark share: rates over time windows and their median, the
peak memory of a process tree, one measurement in a fresh process, a replay filled with random
records, and the description of the machine every report starts with."""
from __future__ import annotations

import multiprocessing as mp
import os
import platform
import queue
import statistics
import threading
import time

import numpy as np

FRAME = 84 * 84


def per_agent_step(moved: list[tuple[int, int]]) -> float | None:
    """Samples trained per agent step over a row's measuring windows, each (agent steps, samples
    trained) in it: the replay ratio the row held. From the totals, not a ratio of medians: at a
    few agent steps per window (a loaded machine) the medians of two series need not pair up."""
    steps = sum(m[0] for m in moved)
    return sum(m[1] for m in moved) / steps if steps else None


def rate(step, seconds: float) -> float:
    """Units per second of ``step()`` (which returns how many units it did) called for ``seconds``."""
    t0, n = time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        n += step()
    return n / (time.perf_counter() - t0)


def windows(fn, n_windows: int, warmup: int = 1) -> float:
    """Median of ``fn()`` (a rate) over ``n_windows`` windows after ``warmup`` discarded ones."""
    for _ in range(warmup):
        fn()
    return statistics.median(fn() for _ in range(n_windows))


class RssPeak:
    """Peak resident memory of this process plus its children (collectors), sampled every
    0.2 s; shared-memory pages mapped by both sides count twice."""

    def __init__(self):
        self.peak, self.stop = 0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    @staticmethod
    def _rss(pid: int) -> int:
        try:
            for line in open(f"/proc/{pid}/status"):
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def _tree(self, pid: int) -> list[int]:
        out = [pid]
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                for c in open(f"/proc/{pid}/task/{task}/children").read().split():
                    out += self._tree(int(c))
        except OSError:
            pass
        return out

    def _run(self):
        while not self.stop.wait(0.2):
            self.peak = max(self.peak, sum(self._rss(p) for p in self._tree(os.getpid())))

    def mb(self) -> float:
        self.stop.set()
        return self.peak / 2**20


def then_exit(entry, *args) -> None:
    """``entry(*args)``, then the child's end without the interpreter's teardown (freeing torch,
    ~0.5 s that ``run_in_child``'s join would wait out per row); its queue is flushed first."""
    from pipeline.quick_exit import quick_exit

    entry(*args)
    quick_exit(0)


def get_from(q, p, what: str):
    """The next item ``p`` (a child process) puts on ``q``: an error, not a hang, where the child
    dies first (an import failure, out of memory, a crash in C)."""
    while True:
        try:
            return q.get(timeout=1.0)
        except queue.Empty:
            if not p.is_alive():
                try:  # what it put just before it exited
                    return q.get(timeout=1.0)
                except queue.Empty:
                    raise RuntimeError(f"{what} process exited with code {p.exitcode} before reporting") from None


def run_in_child(entry, args: tuple, what: str) -> dict:
    """``entry(*args, out_q)`` in a fresh spawned process, so its memory peak and thread settings
    are its own; its one report, or an error if it died without one."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=then_exit, args=(entry, *args, q))
    p.start()
    try:
        res = get_from(q, p, what)
    except RuntimeError as e:  # died without a word (killed, out of memory, a crash in C)
        res = {"error": str(e)}
    p.join()
    return res


def fill_replay(replay, n: int, envs: int, first_p: float, chunk: int) -> None:
    """Write at least ``n`` records of random frames and actions, in chunks of ``chunk`` spread over
    ``envs`` streams of collector 0, a game starting at each with probability ``first_p``: a replay
    to sample from without playing."""
    from pipeline.transport.transition import FIRST

    rng = np.random.default_rng(0)
    for _ in range(-(-n // chunk)):
        replay.writer.write(0, rng.integers(0, 255, (chunk, 84, 84), dtype=np.uint8),
                            {"env": (np.arange(chunk) % envs).astype(np.uint16),
                             "action": rng.integers(0, 6, chunk).astype(np.uint8),
                             "reward": np.zeros(chunk, np.float32),
                             "flags": np.where(rng.random(chunk) < first_p, FIRST, 0).astype(np.uint8)})


def machine() -> dict:
    """What a figure was measured on: the CPU by name, family and model (figures compare only
    within one; every EPYC generation is named "AMD EPYC"), whether its learner trains in bf16,
    cores, memory, GPU, versions and the load at the start."""
    import torch

    from pipeline.settings.hardware import cpu_name, detect_hardware

    hw = detect_hardware()
    return {"cores": hw.cores, "cpu": cpu_name(hw.cpu_model, hw.cpu_id), "cpu_bf16": hw.bf16_pays and not hw.cuda,
            "ram_gib": round(hw.ram_bytes / 2**30, 1),
            "gpu": hw.gpu_name, "torch": torch.__version__, "python": platform.python_version(),
            "load_avg_at_start": os.getloadavg()}


def measured_run(trainer, log, measure, keep=lambda trainer: None):
    """Train ``trainer`` while ``measure()`` samples it from a thread of its own ("bench-measure");
    when it returns the run stops, and ``keep(trainer)`` reads what it needs before the trainer's
    resources are released. Returns what ``keep`` returned."""
    def stopper():
        try:
            measure()
        finally:
            trainer.stop_reason = "benchmark"
    threading.Thread(target=stopper, name="bench-measure", daemon=True).start()
    try:
        trainer.train()
    finally:
        trainer.stop_workers()
        kept = keep(trainer)
        trainer.release()
        log.close()
    return kept
