import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_NUM_THREADS", "1")
# A user's own autotuned profiles (from --autotune) must not change what the tests see: point
# the profile folder, here and in every subprocess, at one that does not exist.
os.environ["DQN_PROFILE_DIR"] = os.path.join(tempfile.gettempdir(), f"dqn-tests-no-profiles-{os.getpid()}")
