"""Evaluation: greedy games with a checkpoint (``evaluate.py``, ``--eval``) and evaluations
during training in a process of their own (``periodic_eval.py``, ``--eval-interval``)."""
