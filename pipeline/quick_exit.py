"""The end of a command-line process, without the interpreter's teardown.

At exit CPython frees every object of every module it loaded; with torch loaded that takes 0.4-1 s
(measured on a 2-core Zen 4: ``python -c "import torch"`` 1.65 s, 1.25 s when it ends with
``os._exit``; a short training run's last line came 1.0 s before its process ended). A user waits
for that after the run has said it stopped, and a suite or a test pays it once per run. Nothing of
it is work: the memory goes back to the system with the process. So the scripts end here: the
work a normal exit does (threads that are not daemons joined, the atexit handlers: multiprocessing's
children and finalizers, logging, Ray, wandb; stdio flushed) is done, then the freeing is skipped."""
from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn


def quick_exit(code: int | None) -> NoReturn:
    """End the process with exit status ``code`` (None is 0) after the work of a normal exit."""
    code = 0 if code is None else int(code)
    try:
        if threading.current_thread() is threading.main_thread():
            # What the interpreter's exit does first: the threading module's own exit hooks (they
            # tell a ThreadPoolExecutor's workers, which are not daemons, to stop: inductor leaves
            # its compile workers' pool open, and a compiled --profile run with a cold cache hung
            # here), then it joins every thread that is not a daemon.
            threading._shutdown()
        else:
            me = threading.current_thread()
            for t in threading.enumerate():
                if t is not me and not t.daemon and t is not threading.main_thread():
                    t.join()
        atexit._run_exitfuncs()
    finally:
        flush_and_exit(code)


def flush_and_exit(code: int) -> NoReturn:
    """stdout and stderr flushed, then ``os._exit(code)``: the end without the exit handlers
    (``quick_exit`` runs them first; the fork server's own handler is this)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):  # closed, or replaced by None
            pass
    os._exit(code)
