"""A suite's summary statistics as rliable computes them (Agarwal et al. 2021, "Deep RL at the
Edge of the Statistical Precipice"): the interquartile mean (IQM) of the runs' scores over every
game and seed, and its percentile interval from a stratified bootstrap (each game's runs
resampled with replacement within that game, the IQM taken over each resample).

Written here rather than importing rliable: its 1.2 release is an sdist whose pins (arch < 8,
seaborn, pandas) would add a build and three libraries for two functions; these are checked
against cases worked by hand (tests/test_suite_stats.py)."""
from __future__ import annotations

import numpy as np

BOOTSTRAP_REPS = 10_000  # rliable's default is 50,000; 10,000 moves a 95% bound by well under 0.01 here


def iqm(values) -> float:
    """Interquartile mean: the mean of the middle half, a quarter trimmed from each end (as
    scipy.stats.trim_mean(x, 0.25) and rliable compute it): of five scores, the middle three."""
    xs = sorted(np.ravel(np.asarray(values, dtype=float)).tolist())
    k = int(0.25 * len(xs))
    mid = xs[k:len(xs) - k]
    return sum(mid) / len(mid)


def _trimmed_means(samples: np.ndarray) -> np.ndarray:
    """iqm of each row of ``samples`` [reps, n]."""
    n = samples.shape[1]
    k = int(0.25 * n)
    return np.sort(samples, axis=1)[:, k:n - k].mean(axis=1)


def iqm_interval(scores: list[list[float]], reps: int = BOOTSTRAP_REPS, level: float = 0.95,
                 seed: int = 0) -> tuple[float, float]:
    """The ``level`` percentile interval of the IQM of ``scores`` (one list per game: its runs'
    scores, one per seed) under a stratified bootstrap: each replicate redraws every game's runs
    with replacement from that game's own, and takes the IQM over all of them. Seeded, so a
    report written twice from the same runs says the same."""
    rng = np.random.default_rng(seed)
    parts = []
    for game in scores:
        g = np.asarray(game, dtype=float)
        parts.append(g[rng.integers(0, len(g), size=(reps, len(g)))])
    stats = _trimmed_means(np.concatenate(parts, axis=1))
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(stats, [tail, 100 - tail])
    return float(lo), float(hi)
