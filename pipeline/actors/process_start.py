"""How the run's child processes (the collectors and the evaluator) start, and how each of them
notices that the learner died.

``forkserver`` (the default where the platform has it): a server process, started before the
learner is built, imports torch, the envs and the children's code once while the learner builds
(``pipeline.runtime.child_preload``), and forks each child from that state. A spawned child imports them
itself, after the learner is built: ~4 s of torch alone on a 2-core AMD EPYC (family 23), in
every collector, every restart and every evaluation. ``fork`` copies the learner mid-run (its
threads' locks, its signal handlers); the server is forked from nothing but imports.
"""
from __future__ import annotations

import multiprocessing as mp
import tempfile

# The fork server listens on a Unix socket at TMPDIR/pymp-XXXXXXXX/listener-XXXXXXXX; a socket's
# path holds at most 107 bytes (sun_path), so a longer temp folder fails at bind ("AF_UNIX path
# too long", Python 3.13 has no fallback).
SOCKET_PATH_MAX = 107
SOCKET_TAIL = len("/pymp-XXXXXXXX/listener-XXXXXXXX")


def start_method_here(method: str) -> tuple[str, str | None]:
    """(the start method the children can use here, a note where it is not ``method``): the fork
    server needs a temp folder short enough for its socket's path, else children are spawned."""
    folder = tempfile.gettempdir()
    if method == "forkserver" and len(folder.encode()) + SOCKET_TAIL > SOCKET_PATH_MAX:
        return "spawn", (f"the temp folder {folder} is too long for the fork server's socket ({SOCKET_PATH_MAX} bytes "
                         "with its name), so the children are spawned, each importing torch itself; a shorter TMPDIR "
                         "(e.g. TMPDIR=/tmp) starts them faster")
    return method, None


def child_context(method: str):
    """The multiprocessing context the run's children start in; for ``forkserver`` its server
    is started now, importing in the background while the caller goes on."""
    ctx = mp.get_context(method)
    if method == "forkserver":
        from multiprocessing import forkserver

        ctx.set_forkserver_preload(["pipeline.runtime.child_preload"])
        forkserver.ensure_running()  # returns once the server process is started, not imported
    return ctx


def learner_alive() -> bool:
    """For a child: whether the learner that started it still runs. A SIGKILLed learner (an OOM
    kill) stops nothing in order, so its children must notice by themselves. Every start method
    hands the child the read end of a pipe whose other end only the learner holds
    (``multiprocessing.parent_process()``'s sentinel): it reads as closed once the learner is
    gone, whoever the child's parent process is (the fork server's children are its own, and
    hold its pipe open: it outlives the learner until they end)."""
    parent = mp.parent_process()
    return parent is not None and parent.is_alive()
