"""docs/data stays small and whole: at most 250 tracked files; the runs of record that --results
reads are plain tracked folders; every other study is one archive (docs/data/archive/NAME.tar.xz)
that a page links, that docs/data/unpack.py unpacks into a folder holding the files the pages name,
and whose unpacked folder git ignores; unpack.py refuses to overwrite a folder that differs."""
from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "docs" / "data"
MAX_TRACKED = 250

spec = importlib.util.spec_from_file_location("unpack", DATA / "unpack.py")
U = importlib.util.module_from_spec(spec)
spec.loader.exec_module(U)


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def git(*args: str) -> subprocess.CompletedProcess:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


def linked_archives() -> dict[str, list[str]]:
    """Each archive a page links (data/archive/NAME.tar.xz) -> the pages that link it."""
    out: dict[str, list[str]] = {}
    for page in pages():
        for name in re.findall(r"\]\((?:docs/)?data/archive/([^)/\s]+)\.tar\.xz\)", page.read_text(encoding="utf-8")):
            out.setdefault(name, []).append(page.name)
    return out


def mentioned_files(name: str) -> set[str]:
    """The paths inside study NAME that a page names: docs/data/NAME/x (in a command or a code
    span), NAME's own loose files (NAME.json, NAME_config.json, ...) that are not kept plain, and a
    file a link to NAME.tar.xz names as its text ([learner_scopes.py](data/archive/NAME.tar.xz))."""
    out = set()
    for page in pages():
        text = page.read_text(encoding="utf-8")
        for label in re.findall(rf"\[`?([\w./+-]+\.[a-z]+)`?\]\((?:docs/)?data/archive/{re.escape(name)}\.tar\.xz\)", text):
            if not label.endswith(".tar.xz"):
                out.add(label.removeprefix("data/").removeprefix(f"{name}/"))
        for rel in re.findall(rf"(?<![\w/])(?:docs/)?data/{re.escape(name)}/([\w./+-]*[\w])", text):
            if not any(part.isupper() for part in rel.split("/")):  # GAME, RUN: a placeholder
                out.add(rel)
        for loose in re.findall(rf"(?<![\w/]){re.escape(name)}(?:_[\w.-]+)?\.(?:json|jsonl|jsonl\.gz|png)\b", text):
            if not (DATA / loose).is_file():
                out.add(loose)
    return out


def runs_of_record() -> list[str]:
    from bench import results as RS

    return [run for src in RS.SOURCES for run in src.runs]


def test_docs_data_holds_at_most_250_tracked_files():
    files = git("ls-files", "docs/data").stdout.split()
    assert 0 < len(files) <= MAX_TRACKED, (
        f"docs/data tracks {len(files)} files; pack a study (python docs/data/unpack.py --pack NAME) to keep it "
        f"at most {MAX_TRACKED}")


def test_the_runs_of_record_are_plain_tracked_folders_and_none_is_ignored():
    tracked = set(git("ls-files", "docs/data").stdout.split())
    for run in runs_of_record():
        if run == "suite_mario_stages" and not (DATA / run).exists():
            continue  # a source that has no run yet
        assert (DATA / run).is_dir() and not (U.ARCHIVE / f"{run}.tar.xz").exists(), run
        assert any(f.startswith(f"docs/data/{run}/") for f in tracked), f"{run}: no tracked file"
    for name in ("suite_mario_stages", *runs_of_record()):
        assert git("check-ignore", "-q", f"docs/data/{name}/x").returncode == 1, f"{name} is ignored by .gitignore"
    assert git("ls-files", "-ci", "--exclude-standard", "docs/data").stdout == "", "a tracked file is ignored"


def test_every_archive_is_linked_and_every_linked_archive_is_there():
    linked = linked_archives()
    assert sorted(linked) == U.studies(), "an archive no page links, or a link to an archive that is not there"
    assert not set(linked) & set(runs_of_record())


def test_every_unpacked_study_is_ignored_by_git():
    for name in U.studies():
        assert git("check-ignore", "-q", f"docs/data/{name}/x").returncode == 0, (
            f"docs/data/{name}/ is not in .gitignore: an unpacked study would be committed again")
        assert git("check-ignore", "-q", f"docs/data/archive/{name}.tar.xz").returncode == 1


def test_each_archive_unpacks_into_a_folder_with_the_files_the_pages_name(tmp_path):
    for name in U.studies():
        assert U.unpack(name, tmp_path).startswith("unpacked")
        folder = tmp_path / name
        files = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
        assert files, name
        missing = {rel for rel in mentioned_files(name) if rel not in files and not (folder / rel).is_dir()}
        assert not missing, f"{name}.tar.xz lacks what the pages name: {sorted(missing)}"
    # the pages' commands find their scripts once unpacked
    assert (tmp_path / "mario_jump_cut" / "jump_cut.py").is_file()
    assert (tmp_path / "mario_stall30_zen4_seed1" / "compare_training_games.py").is_file()


def test_unpack_leaves_an_unchanged_folder_and_refuses_to_overwrite_a_different_one(tmp_path):
    name = min(U.studies(), key=lambda n: (U.ARCHIVE / f"{n}.tar.xz").stat().st_size)
    script = [sys.executable, str(DATA / "unpack.py")]
    first = subprocess.run([*script, name, "--into", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert first.returncode == 0 and "unpacked" in first.stdout, first.stderr
    again = subprocess.run([*script, name, "--into", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and "already unpacked" in again.stdout
    some = next(p for p in sorted((tmp_path / name).rglob("*")) if p.is_file())
    some.write_bytes(some.read_bytes() + b"\nedited\n")
    refused = subprocess.run([*script, name, "--into", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1
    assert len(refused.stderr.strip().splitlines()) == 1 and "not overwritten" in refused.stderr
    assert some.read_bytes().endswith(b"\nedited\n"), "the edited file was overwritten"
    with pytest.raises(U.Refused):
        U.unpack(name, tmp_path)
    unknown = subprocess.run([*script, "no_such_study", "--into", str(tmp_path)], capture_output=True, text=True,
                             timeout=60)
    assert unknown.returncode == 1 and len(unknown.stderr.strip().splitlines()) == 1


def test_pack_gives_the_same_bytes_for_the_same_files(tmp_path):
    """An archive packed again from its unpacked folder is byte for byte the one committed."""
    name = min(U.studies(), key=lambda n: (U.ARCHIVE / f"{n}.tar.xz").stat().st_size)
    U.unpack(name, tmp_path / "unpacked")
    again = U.pack(name, into=tmp_path / "packed", root=tmp_path / "unpacked")
    assert again.read_bytes() == (U.ARCHIVE / f"{name}.tar.xz").read_bytes()


def test_an_archive_with_a_path_outside_its_folder_is_refused(tmp_path):
    import io
    import tarfile

    bad = tmp_path / "evil.tar.xz"
    with tarfile.open(bad, "w:xz") as tar:
        info = tarfile.TarInfo("evil/../../outside.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    with pytest.raises(U.Refused):
        U.unpack("evil", tmp_path / "into", archive=bad)
    assert not (tmp_path / "outside.txt").exists()
