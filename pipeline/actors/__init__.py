"""The actors: the processes that play. A collector (``collector.py``) steps its envs with
batched epsilon-greedy acting (``rollout.py``) and pushes records into its ring; the supervisor
(``supervisor.py``) starts, watches and restarts them; ``process_start.py`` says how a child
starts and notices a dead learner. ``no_ray.py`` and ``ray_errors.py`` are what the data path
holds of the Ray collectors (``pipeline/distributed/``) without importing Ray."""
