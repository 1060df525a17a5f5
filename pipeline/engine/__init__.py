"""The engine: how the agent's update step runs on this machine. ``engine.py`` wraps the step
with ``torch.compile`` and, on CUDA, one captured graph; ``bf16_probe.py`` measures whether bf16
pays on this CPU before the profile is resolved; ``thread_share.py`` keeps the learner's threads
on the cores the collectors leave free."""
