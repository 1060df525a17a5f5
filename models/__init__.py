"""Q-networks: the BatchNorm conv DQN the trainer uses and the plain Nature DQN baseline."""
from .dqn import BatchNormDQN, NatureDQN, build_model

__all__ = ["BatchNormDQN", "NatureDQN", "build_model"]
