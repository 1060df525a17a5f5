"""Joining the Ray cluster that remote collectors run in (--ray-address): finding its head,
telling a user in one line when it cannot be reached, and connecting this process as the
cluster's driver, so every actor it starts dies with it.

Imported only when a run asks for Ray collectors: a plain run never imports Ray.
"""
from __future__ import annotations

import socket

INSTALL = "pip install 'ray==2.60.0' (or install this project with its Ray extra: pip install -e '.[ray]')"


from ..actors.ray_errors import RayClusterError  # noqa: F401  (raised here; the data path catches it from actors/)


def head_address(address: str) -> str:
    """host:port of the cluster's head for ``address`` (``auto``: RAY_ADDRESS, else the cluster
    this machine last joined with ``ray start``)."""
    try:
        from ray._private.services import canonicalize_bootstrap_address
    except ImportError:
        raise RayClusterError(f"Ray collectors need the ray package, which is not installed: {INSTALL}") from None
    try:
        found = canonicalize_bootstrap_address(address)
    except Exception as e:  # Ray's own lookup failed: say what it said
        raise RayClusterError(f"{address!r} names no Ray cluster ({e}); start one with `ray start --head` or give "
                              "its head's HOST:PORT") from None
    if not found:
        raise RayClusterError(f"{address!r}: no Ray cluster is running on this machine; start one with "
                              "`ray start --head`, or give the head's HOST:PORT")
    return found


def check_reachable(address: str, timeout_s: float = 3.0) -> str:
    """The head's host:port, once a TCP connection to it succeeds; RayClusterError naming the
    address and the fix otherwise. Fails in seconds where ray.init would retry for a minute."""
    head = head_address(address)
    host, _, port = head.rpartition(":")
    if not host or not port.isdigit():
        raise RayClusterError(f"{address!r} is not HOST:PORT (e.g. 10.0.0.5:6379) or auto")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except OSError as e:
        raise RayClusterError(f"cannot reach the Ray head at {head} ({e.strerror or e}); check the address "
                              f"(`ray status` on the head prints it) and that port {port} is open") from None
    return head


def connect(address: str) -> dict:
    """Join the cluster as its driver (the learner): actors this process starts are owned by
    it and stopped by Ray when it exits, however it exits. Validation has already checked that
    the head answers (``check_reachable``). Returns the cluster's CPU count and node count, for
    the log."""
    import ray

    head = head_address(address)
    if not ray.is_initialized():
        try:
            ray.init(address=head, logging_level="ERROR", log_to_driver=False, configure_logging=False)
        except (ConnectionError, RuntimeError) as e:
            raise RayClusterError(f"could not join the Ray cluster at {head}: {e}") from None
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    return {"head": head, "nodes": len(nodes), "cpus": int(ray.cluster_resources().get("CPU", 0))}


def disconnect() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()
