import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_NUM_THREADS", "1")
# A user's own profiles/autotuned.json (from --autotune) must not change what the tests see:
# point the auto profile, here and in every subprocess, at a file that does not exist. Set
# before config_optimized is imported, which reads it once.
os.environ["DQN_AUTOTUNED_PROFILE"] = os.path.join(tempfile.gettempdir(), f"dqn-tests-no-autotuned-{os.getpid()}.json")
