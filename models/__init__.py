"""Q-networks: the BatchNorm conv DQN the trainer uses and the plain Nature DQN baseline, each
built from a ``NetworkSpec``."""
from .dqn import BatchNormDQN, NatureDQN, NetworkSpec, build_model

__all__ = ["BatchNormDQN", "NatureDQN", "NetworkSpec", "build_model"]
