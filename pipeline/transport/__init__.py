"""The transport: how a transition travels from a collector to the learner's process. The record
schema (``transition.py``), one shared-memory ring per collector (``ring.py``, with its head of
counters ``collector_block.py``), the learner's control block (``control.py``: stop, step count,
weights), the named segments under them (``shm.py``) and whole games as they leave the ring's
records (``games.py``). Nothing here steps an env or trains."""
