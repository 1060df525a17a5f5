"""What a user can fix: ``UserError``, the one type the command lines (``mario_rl_optimized.py``,
``python config_optimized.py``, ``benchmark_performance.py``) catch and print as one line,
``error: ...``, with exit code 2, instead of a traceback. Its message names what is wrong and the
fix.

``ConfigError`` is the kind for input: a setting, an option or a file named on the command line
that cannot work (raised before anything starts). The files a run keeps have kinds of their own,
each a ``UserError`` too: ``CheckpointError`` (``pipeline/records/checkpoint.py``),
``ReplayFileError`` (``pipeline/records/replay_snapshot.py``) and ``HubError``
(``pipeline/records/hub.py``). Imports nothing: every layer may raise them.
"""
from __future__ import annotations


class UserError(Exception):
    """A problem the user can fix; the message names it and the fix, on one line."""


class ConfigError(UserError, ValueError):
    """A config value, an option or a file named on the command line that cannot work; the message
    names the field (or option), the value and the fix."""
