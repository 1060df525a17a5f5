"""The run's log: ``[MAIN]``/``[PROCESSOR]`` lines to stdout and <run_dir>/train.log, with a
progress bar in a terminal. The open log is also the run's hold on its folder."""
from __future__ import annotations

import fcntl
import sys
from pathlib import Path

from config_optimized import ConfigError

from .files import LOG_NAME


class RunLog:
    """Prints log lines and appends them to <run_dir>/train.log. In a terminal a progress bar
    over total_steps stays under the log lines; piped output gets the plain lines only.

    The log stays open, under an exclusive flock, for the run's life: a second run on the same
    folder (``--resume latest`` in two terminals, one ``--run-dir`` twice, two runs started in the
    same second with the same game and seed) is refused here, before it writes a line, where it
    would otherwise interleave two runs' checkpoints, games and replay in one folder. The lock is
    on train.log, which every run keeps open anyway, rather than on the folder: ``--eval`` holds
    the folder's own flock while it writes eval.json, and may play a run's checkpoint while the
    run trains. The kernel drops the lock when the process ends, however it ends."""

    def __init__(self, run_dir: Path, total_steps: int):
        self.file = open(run_dir / LOG_NAME, "a", buffering=1)
        try:
            fcntl.flock(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.file.close()
            raise ConfigError(f"{run_dir}: another run is training in this folder (it holds {LOG_NAME}); wait for "
                              "it to stop, or choose another --run-dir") from None
        self.bar = None
        if sys.stdout.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total_steps, unit=" agent steps", unit_scale=True,  # its rate reads "agent steps/s"
                            dynamic_ncols=True, smoothing=0.05, file=sys.stdout)

    def __call__(self, line: str) -> None:
        if self.bar is not None:
            self.bar.write(line, file=sys.stdout)
        else:
            print(line, flush=True)
        self.file.write(line + "\n")

    def clear(self) -> None:
        """--overwrite: the old run's log goes (this run holds the file, so it is emptied, not removed)."""
        self.file.truncate(0)

    def start_at(self, steps: int) -> None:
        """A resumed run's bar starts at its step count (and its rate counts from there)."""
        if self.bar is not None:
            self.bar.initial = self.bar.n = self.bar.last_print_n = steps
            self.bar.refresh()

    def progress(self, steps: int) -> None:
        if self.bar is not None and steps > self.bar.n:
            self.bar.update(min(steps, self.bar.total) - self.bar.n)

    def close(self):
        if self.bar is not None:
            self.bar.close()
        self.file.close()
