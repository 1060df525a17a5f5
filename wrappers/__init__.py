"""Environments: Atari (ale-py) and Super Mario Bros (nes-py), as uint8 84x84 gray frame stacks."""
from .batched import BatchedEnv, BatchStep
from .factory import count_actions, make_env, make_single_frame_env
from .options import EnvOptions
from .registry import UnknownEnvError, check_env_id, is_mario

__all__ = ["BatchedEnv", "BatchStep", "EnvOptions", "UnknownEnvError", "check_env_id", "count_actions", "is_mario",
           "make_env", "make_single_frame_env"]
