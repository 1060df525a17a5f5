"""pipeline.quick_exit: a script's end does what a normal exit does (threads that are not daemons
joined, atexit handlers run, stdio flushed, the exit status kept) and skips only the teardown."""
import subprocess
import sys

from tests.proc_utils import ROOT

CHILD = r"""
import atexit, sys, threading, time
from pipeline.quick_exit import quick_exit

class Torn:
    def __del__(self):
        sys.stdout.write("torn down\n")
        sys.stdout.flush()

KEEP = Torn()  # a module global: the interpreter's teardown would collect it
atexit.register(lambda: print("atexit ran"))

def late():
    time.sleep(0.2)
    print("thread done")

threading.Thread(target=late).start()
sys.stdout.write("unflushed line\n")
quick_exit(int(sys.argv[1]))
print("never reached")
"""


def test_quick_exit_keeps_the_work_of_an_exit_and_skips_the_teardown():
    for code in (0, 3):
        out = subprocess.run([sys.executable, "-c", CHILD, str(code)], cwd=ROOT, capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == code, out.stderr
        lines = out.stdout.splitlines()
        # the thread joined before the handlers, as the interpreter does; the buffered line kept
        assert lines == ["unflushed line", "thread done", "atexit ran"], (lines, out.stderr)


def test_the_same_child_ended_normally_tears_down():
    """The check above can fail: ended by sys.exit, the same module global is collected."""
    out = subprocess.run([sys.executable, "-c", CHILD.replace("quick_exit(int(sys.argv[1]))", "sys.exit(0)"), "0"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "torn down" in out.stdout, out.stdout


POOL_CHILD = r"""
import concurrent.futures, sys
from pipeline.quick_exit import quick_exit

pool = concurrent.futures.ThreadPoolExecutor(2)  # left open, as inductor leaves its compile workers' pool
print(pool.submit(lambda: 41 + 1).result(), flush=True)
quick_exit(0)
"""


def test_an_open_thread_pool_ends_as_at_a_normal_exit():
    """A ThreadPoolExecutor's workers are not daemons and wait for work until the threading
    module's exit hooks tell them to stop; the interpreter runs those hooks before it joins
    threads, and so must quick_exit (joining first waited forever: `--profile` with a compiled learner
    and a cold inductor cache, whose compile workers it starts, hung after its last line)."""
    out = subprocess.run([sys.executable, "-c", POOL_CHILD], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.split() == ["42"], (out.stdout, out.stderr)
