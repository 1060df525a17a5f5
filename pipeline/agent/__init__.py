"""The agent: the learning rules, one function per rule read against its paper (``rules.py``),
and the learner that owns the networks, the optimizer and the one update step
(``learner.py``). It knows nothing of processes, compiles or CUDA graphs: the engine
(``pipeline/engine/``) runs this same step."""
