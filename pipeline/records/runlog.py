"""The run's log: ``[MAIN]``/``[PROCESSOR]`` lines to stdout and <run_dir>/train.log, with a
progress bar in a terminal."""
from __future__ import annotations

import sys
from pathlib import Path

from .files import LOG_NAME


class RunLog:
    """Prints log lines and appends them to <run_dir>/train.log. In a terminal a progress bar
    over total_steps stays under the log lines; piped output gets the plain lines only."""

    def __init__(self, run_dir: Path, total_steps: int):
        self.file = open(run_dir / LOG_NAME, "a", buffering=1)
        self.bar = None
        if sys.stdout.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total_steps, unit="step", unit_scale=True,
                            dynamic_ncols=True, smoothing=0.05, file=sys.stdout)

    def __call__(self, line: str) -> None:
        if self.bar is not None:
            self.bar.write(line, file=sys.stdout)
        else:
            print(line, flush=True)
        self.file.write(line + "\n")

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
