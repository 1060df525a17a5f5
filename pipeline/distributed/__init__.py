"""Ray collectors on other machines: joining the cluster (``cluster.py``), the collector actor
(``remote_collector.py``) and the learner's side that feeds them and takes their batches
(``intake.py``)."""
