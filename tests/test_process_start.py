"""How the run's children start (pipeline/actors/process_start.py) and what the fork server imports for
them (pipeline/runtime/child_preload.py)."""
import subprocess
import sys

from tests.proc_utils import ROOT


def test_the_fork_servers_quick_end_is_its_own():
    """The preload ends the fork server with os._exit(0); a process that imports the module for
    another reason (a test, a tool) keeps its own exit status."""
    out = subprocess.run([sys.executable, "-c", "import pipeline.runtime.child_preload, sys; sys.exit(3)"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 3, out.stderr[-2000:]


def test_a_temp_folder_too_long_for_the_fork_servers_socket_spawns_the_children(monkeypatch, tmp_path):
    """The fork server's socket lives in TMPDIR/pymp-*/listener-*, at most 107 bytes: past that
    its bind fails ("AF_UNIX path too long"), so the run spawns its children and says why; a
    short temp folder keeps the fork server, and another method is kept as asked."""
    import tempfile

    from pipeline.actors.process_start import SOCKET_PATH_MAX, SOCKET_TAIL, start_method_here

    long_dir = tmp_path / ("d" * max(1, SOCKET_PATH_MAX - SOCKET_TAIL - len(str(tmp_path))))
    monkeypatch.setattr(tempfile, "tempdir", str(long_dir))
    method, why = start_method_here("forkserver")
    assert method == "spawn" and str(long_dir) in why and "TMPDIR=/tmp" in why
    assert start_method_here("fork") == ("fork", None)
    monkeypatch.setattr(tempfile, "tempdir", "/tmp")
    assert start_method_here("forkserver") == ("forkserver", None)
