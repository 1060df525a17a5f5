"""What an environment is built with: ``EnvOptions``, the env part of the training config
(declared with the rest of it in ``config_optimized.py``), under the name the wrappers import it by."""
from config_optimized import MARIO_ACTION_SETS, EnvOptions

__all__ = ["MARIO_ACTION_SETS", "EnvOptions"]
