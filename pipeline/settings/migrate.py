"""The settings of earlier versions read as today's, wherever an old record is read: a field's
old name (``RENAMED_FIELDS``, in flags, config files, run records and autotuned profiles), and
what a run record made before a field existed trained with (``as_trained``: the default of that
time, ``BEFORE_IT_EXISTED``; Mario's no-op starts and sticky actions, which Mario ignored before
a commit, told apart by ``git merge-base``). Called only where something saved or typed for an
earlier version is read: ``layers.saved_settings`` (the one reader of a saved run config, for
``--resume``, ``--eval`` and ``--value-check``), the readers of config files and autotuned
profiles, and the old flags (``cli.py``); today's defaults, presets and profiles never need it."""
from __future__ import annotations

import subprocess

from config_optimized import FIELDS, RUN_CONTROL, Config, flag

from ..records.record import ROOT

# Old names still read from flags, config files, autotuned profiles and the run records of
# earlier versions -> today's.
RENAMED_FIELDS = {"processor_log_interval": "consolidation_log_interval", "queue_capacity": "ring_capacity"}


def current_names(values: dict) -> dict:
    """``values`` with each renamed field's old name read as today's."""
    return {RENAMED_FIELDS.get(k, k): v for k, v in values.items()}


# A run record lacks the fields added after its run started. Such a run trained as the code did
# before the field existed, which is the field's Config default unless listed here (where the
# default has moved since); never the game preset's or the profile's value, which may differ
# (the Atari preset trains QR-DQN on batch-normalized targets; a run recorded before either
# existed trained neither).
BEFORE_IT_EXISTED = {"bn_targets": "running", "quantiles": 0, "stop_at_flag": False}  # n_step_cut: its default
# Settings a Mario run recorded but ignored before the commit that made Mario honour them.
MARIO_IGNORED_UNTIL = ("12057b4", {"noop_max": 0, "sticky_actions": 0.0})
NOT_RECORDED = ("profile",)  # resolved apart: the saved profile name, else this machine's


def record_predates(commit: str | None, ref: str) -> bool | None:
    """Whether the recorded commit comes before ``ref`` in this checkout's history: True, False,
    or None when git cannot tell (no git, a shallow clone, a commit it does not have)."""
    commit = (commit or "").split(" ")[0]
    if len(commit) < 7 or not all(c in "0123456789abcdef" for c in commit):
        return None
    try:
        out = subprocess.run(["git", "merge-base", "--is-ancestor", commit, f"{ref}^"], cwd=ROOT,
                             capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return {0: True, 1: False}.get(out.returncode)


def as_trained(saved: dict, commit: str | None, env: str) -> tuple[dict, list[str]]:
    """The values a recorded run trained with that its record does not say: each field added
    since takes the value the code used before it existed; Mario's no-op starts and sticky actions
    recorded before Mario honoured them take 0. Returns (those values, a note for each)."""
    from wrappers.registry import is_mario

    fills, notes = {}, []
    missing = [k for k in FIELDS if k not in saved and k not in RUN_CONTROL and k not in NOT_RECORDED]
    defaults = Config()
    for k in missing:
        fills[k] = BEFORE_IT_EXISTED.get(k, defaults.get(k))
        notes.append(f"{flag(k)} {fills[k]!r}: the run was recorded before this setting existed and trained as "
                     f"{fills[k]!r} does")
    ref, ignored = MARIO_IGNORED_UNTIL
    if is_mario(env) and any(saved.get(k) not in (None, v) for k, v in ignored.items()):
        before = record_predates(commit, ref)
        for k, v in ignored.items():
            if saved.get(k) in (None, v):
                continue
            if before:
                fills[k] = v
                notes.append(f"{flag(k)} {v!r}: the record says {saved[k]!r}, which Mario ignored when the run "
                             f"started (commit {(commit or '').split(' ')[0][:10]}, before {ref}); kept as it trained")
            elif before is None:
                notes.append(f"{flag(k)} {saved[k]!r}: kept as recorded, but git cannot tell whether the run's commit "
                             f"predates {ref}, before which Mario ignored it")
    return fills, notes
