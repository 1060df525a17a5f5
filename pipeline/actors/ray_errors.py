"""The error a run reports when its Ray cluster cannot be used: raised by the cluster code
(``pipeline/distributed/cluster.py``, which imports Ray), caught by the data path's supervisor
and the run, neither of which may import the layer that talks to Ray."""
from __future__ import annotations


class RayClusterError(RuntimeError):
    """The cluster cannot be used; the message names the address and the fix."""
