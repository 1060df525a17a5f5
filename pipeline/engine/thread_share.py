"""The learner's CPU threads follow the cores other work leaves free during a run.

A learner's OpenMP team stalls at every parallel step while another process holds one of its
cores: a default Atari run on a 2-vCPU Xeon made 62 updates/s alone and 7.8 beside one training
test, where with one thread it would have kept about half. So every few seconds the learner
process reads how much CPU the processes outside its own tree (itself, its collectors, its
evaluator) used since the last look, from /proc, and takes as many threads as that leaves:
fewer when it finds itself sharing, back to its full team when the cores free, each change in
the log. A change must be seen twice in a row before it is made, so a compile or a short burst
beside the run does not flap the team. Linux only (/proc); elsewhere the threads stay as set."""
from __future__ import annotations

import os
import time
from pathlib import Path

CHECK_EVERY_S = 5.0   # how often the CPU used by other processes is read
CONFIRM = 2           # looks in a row that must agree before the team changes
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def threads_for(max_threads: int, others_cores: float) -> int:
    """The learner's threads when other processes use ``others_cores`` cores' worth of CPU: the
    full team less one thread per core they hold (a half core rounds to one: a thread that shares
    its core half the time stalls its team half the time), never below one."""
    return max(1, min(max_threads, max_threads - int(others_cores + 0.5)))


def total_busy_ticks(stat: str) -> int:
    """CPU ticks spent busy on every core since boot, from /proc/stat's first line (user, nice,
    system, irq, softirq, steal; not idle or iowait)."""
    f = [int(x) for x in stat.splitlines()[0].split()[1:]]
    return sum(f[:3]) + sum(f[5:8])


def process_ticks(stat: str) -> tuple[int, int]:
    """(parent pid, CPU ticks used) of one process from its /proc/PID/stat line."""
    rest = stat[stat.rindex(")") + 2:].split()  # the name may hold spaces and brackets
    return int(rest[1]), int(rest[11]) + int(rest[12])


def tree_ticks(root: int, proc: Path = Path("/proc")) -> int:
    """CPU ticks used by ``root`` and every live process below it."""
    parent, ticks = {}, {}
    for d in proc.iterdir():
        if not d.name.isdigit():
            continue
        try:
            parent[int(d.name)], ticks[int(d.name)] = process_ticks((d / "stat").read_text())
        except (OSError, ValueError, IndexError):
            continue  # ended while read
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += ticks.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total


class ThreadShare:
    """Looks every ``CHECK_EVERY_S`` at the CPU other processes used and sets the learner's threads
    (``set_threads``, torch.set_num_threads in a run) to what they leave, logging each change."""

    def __init__(self, max_threads: int, cores: int, set_threads, log, pid: int | None = None,
                 proc: Path = Path("/proc"), clock=time.monotonic):
        self.max_threads, self.cores, self.set_threads, self.log = max_threads, cores, set_threads, log
        self.pid, self.proc, self.clock = pid or os.getpid(), proc, clock
        self.threads = max_threads
        self.changes = 0
        self._pending, self._seen = max_threads, 0
        self._last = self._read()

    @property
    def active(self) -> bool:
        """Whether there is a team to shrink and a /proc to read."""
        return self.max_threads > 1 and self._last is not None

    def _read(self) -> tuple[float, int, int] | None:
        try:
            return self.clock(), total_busy_ticks((self.proc / "stat").read_text()), tree_ticks(self.pid, self.proc)
        except (OSError, ValueError, IndexError):
            return None

    def poll(self) -> None:
        """Called often (the trainer's health check); reads /proc at most every ``CHECK_EVERY_S``."""
        if not self.active or self.clock() - self._last[0] < CHECK_EVERY_S:
            return
        now = self._read()
        if now is None:
            return
        (t0, busy0, ours0), (t1, busy1, ours1) = self._last, now
        self._last = now
        others = max(0.0, ((busy1 - busy0) - (ours1 - ours0)) / CLOCK_TICKS / max(1e-6, t1 - t0))
        self.consider(min(float(self.cores), others))

    def consider(self, others_cores: float) -> None:
        """One look: other processes used ``others_cores`` cores since the last; the team changes
        once ``CONFIRM`` looks in a row call for the same new size."""
        want = threads_for(self.max_threads, others_cores)
        if want == self.threads:
            self._seen = 0
            return
        self._seen = self._seen + 1 if want == self._pending else 1
        self._pending = want
        if self._seen >= CONFIRM:
            self.log(f"[MAIN] Learner threads {self.threads} -> {want}: other processes used {others_cores:.1f} of "
                     f"this machine's {self.cores} cores over the last {CHECK_EVERY_S * CONFIRM:.0f} s"
                     + (" (back to the full team)" if want == self.max_threads else
                        "; a team that shares a core stalls at every parallel step"))
            self.set_threads(want)
            self.threads, self._seen = want, 0
            self.changes += 1
