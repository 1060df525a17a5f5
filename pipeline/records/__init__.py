"""Run records: the run folder and everything a run writes into it or reads back (record,
checkpoints, resume, metrics, curves, episodes, epoch logs, the run log, W&B, the Hub). Every
file name of a run folder is defined once, in ``files.py``."""
