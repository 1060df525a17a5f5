"""The Ray collectors' intake of a run that has none: the same interface as ``RayCollectors``
(``pipeline/distributed/intake.py``) doing nothing, so the trainer, the supervisor and the
consolidation thread talk to their remote collectors one way whether or not Ray runs them, and
Ray is imported only where it does. It imports nothing: the data path (layer 2) holds it."""
from __future__ import annotations


class NoRayCollectors:
    sources: tuple = ()   # no remote sources: the replay's streams are the rings' alone
    error = None          # the intake thread that could fail does not exist

    def publish(self, model) -> None:
        pass

    def start(self) -> None:
        pass

    def pending(self) -> int:
        return 0

    def drain(self, sink_for) -> int:
        return 0

    def deaths(self) -> list:
        return []

    def returns(self) -> list:
        return []

    def stop(self) -> None:
        pass

    def close(self) -> None:
        pass
