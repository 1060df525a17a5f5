"""What the fork server (``--start-method forkserver``) imports once, before it forks the run's
collectors and evaluators, so none of them imports it again: torch, OpenCV, the envs, the
networks and the code the children run. Imported only there (``process_start.child_context``).

Importing starts no thread, so the forked children start clean. The fork server skips a preload
that raises ImportError but dies of any other error, and every child with it: the optional env
libraries are imported here with any error suppressed, and a child that needs one fails with the
library's own error, in its report.

The server itself ends when the learner does (its end of the server's pipe closes), with a
normal interpreter exit: freeing torch there took 0.9 s on a 2-core AMD EPYC (family 23), a
process holding the run's stdout open after the run ended. Its first exit handler ends it
with ``os._exit`` instead (it holds nothing to save), registered in the server alone; the
children it forks clear the server's exit handlers and end with ``os._exit`` too."""
import atexit
import contextlib
import sys

import cv2  # noqa: F401
import torch  # noqa: F401

import models  # noqa: F401
import wrappers  # noqa: F401

from ..actors import collector, rollout  # noqa: F401
from ..evaluation import evaluate  # noqa: F401
from ..quick_exit import flush_and_exit
from ..transport import control, ring  # noqa: F401

with contextlib.suppress(Exception):
    import ale_py  # noqa: F401
with contextlib.suppress(Exception):
    import gym_super_mario_bros  # noqa: F401


def _in_fork_server() -> bool:
    """Whether the fork server's main is importing this (its preload), not another process
    that imports the module: there the handler would turn any exit status into 0."""
    from multiprocessing import forkserver

    frame = sys._getframe()
    while frame is not None:
        if frame.f_code is forkserver.main.__code__:
            return True
        frame = frame.f_back
    return False


if _in_fork_server():
    atexit.register(flush_and_exit, 0)  # the last registered runs first
