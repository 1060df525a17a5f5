"""Learning-curve PNG of a run directory: mean episode return (last 20 episodes, raw) against
agent steps and against wall-clock minutes; a game family's own figures (Mario's distance
reached, ``GameFamily.curves``) add a panel each where the run's rows have them."""
from __future__ import annotations

from pathlib import Path

from .files import CURVE_NAME
from .metrics import read_metrics


def format_steps(x: float, _pos=None) -> str:
    """Axis label for a step count: 950, 100k, 1.2M (plain numbers overlap past 100,000)."""
    if abs(x) >= 1e6:
        return f"{x / 1e6:.1f}".rstrip("0").rstrip(".") + "M"
    if abs(x) >= 1e3:
        return f"{x / 1e3:.0f}k"
    return f"{x:.0f}"


def plot_learning_curve(run_dir: str | Path, out: str | Path | None = None, title: str | None = None) -> Path:
    import matplotlib

    matplotlib.use("Agg")  # no display needed; also safe inside the training process
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    from wrappers.families import CURVES

    run_dir = Path(run_dir)
    rows = [r for r in read_metrics(run_dir) if r.get("return_mean") is not None]
    out = Path(out) if out else run_dir / CURVE_NAME
    panels = [(key, label) for key, label in CURVES if any(r.get(key) is not None for r in rows)]
    fig, axes = plt.subplots(1, 2 + len(panels), figsize=(10 + 5 * len(panels), 4), squeeze=False)
    steps = [r["agent_steps"] for r in rows]
    minutes = [r["wall_s"] / 60 for r in rows]
    ret = [r["return_mean"] for r in rows]
    axes[0][0].plot(steps, ret)
    axes[0][0].set_xlabel("agent steps")
    axes[0][1].plot(minutes, ret)
    axes[0][1].set_xlabel("wall clock (minutes)")
    for ax in axes[0][:2]:
        ax.set_ylabel("mean return, last 20 episodes")
        ax.grid(alpha=0.3)
    for ax in axes[0][::2]:  # the agent-step axes
        ax.xaxis.set_major_formatter(FuncFormatter(format_steps))
    for ax, (key, label) in zip(axes[0][2:], panels):
        ax.plot(steps, [r.get(key) for r in rows])
        ax.set_xlabel("agent steps")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    fig.suptitle(title or str(run_dir))
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
