"""How the run's children start (pipeline/process_start.py) and what the fork server imports for
them (pipeline/child_preload.py)."""
import subprocess
import sys

from tests.proc_utils import ROOT


def test_the_fork_servers_quick_end_is_its_own():
    """The preload ends the fork server with os._exit(0); a process that imports the module for
    another reason (a test, a tool) keeps its own exit status."""
    out = subprocess.run([sys.executable, "-c", "import pipeline.child_preload, sys; sys.exit(3)"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 3, out.stderr[-2000:]
