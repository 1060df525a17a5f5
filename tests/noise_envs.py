"""A stand-in for ``BatchedEnv``: envs whose frames are fresh noise at every step and that never
end, so a rollout asks its network anew each step (tests of acting)."""
import numpy as np

from wrappers.batched import BatchStep


class NoiseEnvs:
    n_actions = 6

    def __init__(self, num_envs: int = 16, seed: int = 0):
        self.num_envs = num_envs
        self.rng = np.random.default_rng(seed)

    def reset(self, seed=None):
        return self.rng.integers(0, 256, (self.num_envs, 84, 84), dtype=np.uint8)

    def step(self, actions):
        no = np.zeros(self.num_envs, bool)
        return BatchStep(self.reset(), np.zeros(self.num_envs, np.float32), no, no, no)
