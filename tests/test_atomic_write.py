"""Every save of a run's files goes through ``atomic_write``: the new file whole under the name,
or the previous one untouched and no NAME.tmp left, whatever cuts the write short."""
from __future__ import annotations

import os

import pytest

from pipeline.records import checkpoint as ckpt
from pipeline.records.atomic import atomic_write
from pipeline.records.record import write_json


def test_the_new_file_takes_the_name_only_when_whole_and_synced(tmp_path, monkeypatch):
    path = tmp_path / "f.json"
    path.write_text("old")
    synced, real = [], os.fsync

    def fsync(fd):
        synced.append((os.readlink(f"/proc/self/fd/{fd}"), path.read_text()))
        real(fd)
    monkeypatch.setattr(os, "fsync", fsync)
    with atomic_write(path, "w") as f:
        f.write("new")
        assert path.read_text() == "old"  # not yet
    assert synced == [(str(tmp_path / "f.json.tmp"), "old")]  # the data on disk before the rename
    assert path.read_text() == "new" and not (tmp_path / "f.json.tmp").exists()


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_write_cut_short_leaves_the_old_file_and_no_tmp(tmp_path, error):
    path = tmp_path / "f.bin"
    path.write_bytes(b"old")
    with pytest.raises(type(error)):
        with atomic_write(path) as f:
            f.write(b"half of the new")
            raise error
    assert path.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["f.bin"]


def test_the_savers_go_through_it(tmp_path, monkeypatch):
    """write_json and the checkpoint's save write through atomic_write: a failed write in either
    leaves the previous file and no NAME.tmp."""
    write_json(tmp_path / "config.json", {"a": 1})
    ckpt.save(tmp_path / "checkpoint.pt", {"x": 1})
    real_open = open

    def full_disk(file, mode="r", *a, **k):
        if str(file).endswith(".tmp"):
            f = real_open(file, mode, *a, **k)
            f.write = lambda *_: (_ for _ in ()).throw(OSError(28, "No space left on device"))
            return f
        return real_open(file, mode, *a, **k)
    monkeypatch.setattr("builtins.open", full_disk)
    with pytest.raises(OSError):
        write_json(tmp_path / "config.json", {"a": 2})
    with pytest.raises(ckpt.CheckpointError, match="No space left"):
        ckpt.save(tmp_path / "checkpoint.pt", {"x": 2})
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt", "config.json"]
    assert (tmp_path / "config.json").read_text().count('"a": 1') == 1
    import torch
    assert torch.load(tmp_path / "checkpoint.pt", weights_only=True) == {"x": 1}
