"""Python 3.12 shim for the GPU image (not part of the product): SharedMemory(track=False) is 3.13's.

3.12 registers every segment with the resource tracker and unregisters at unlink; track=False
here skips both, which is what 3.13 does."""
import sys

if sys.version_info < (3, 13):
    import _posixshmem
    from multiprocessing import resource_tracker, shared_memory

    class _SharedMemory(shared_memory.SharedMemory):
        def __init__(self, name=None, create=False, size=0, *, track=True):
            self._track = track
            if track:
                super().__init__(name, create, size)
                return
            register = resource_tracker.register
            resource_tracker.register = lambda *a, **k: None
            try:
                super().__init__(name, create, size)
            finally:
                resource_tracker.register = register

        def unlink(self):
            if self._track:
                super().unlink()
            else:
                _posixshmem.shm_unlink(self._name)

    shared_memory.SharedMemory = _SharedMemory
