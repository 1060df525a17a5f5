"""The learner process: a run's parts built and wired in one place (``wiring.py``), the loop
that drives them (``trainer.py``), a whole run from its settings to its last line (``run.py``)
and what the fork server imports for the children it forks (``child_preload.py``)."""
