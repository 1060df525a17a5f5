"""Unpack the exploratory studies the lab notebook cites.

The runs of record (what ``python benchmark_performance.py --results`` reads: suite_atari5_noddqn,
suite_mario, the Pong runs to 1.3M and to +18) are plain folders here and need nothing. Every other
study is one file, ``docs/data/archive/NAME.tar.xz``, that a page links; this script unpacks it into
``docs/data/NAME/``, where the page's file names (and its commands, ``python docs/data/NAME/x.py``)
then are. Run from anywhere, with any Python 3 (the standard library only):

    python docs/data/unpack.py NAME [NAME ...]   one study or several (NAME or NAME.tar.xz)
    python docs/data/unpack.py --all             every study
    python docs/data/unpack.py --list            the studies and their size
    python docs/data/unpack.py NAME --into DIR   into DIR/NAME/ instead

A folder that is already there is left as it is when it holds the archive's files unchanged, and
refused (one line, exit status 1) when it differs: move it away first. Unpacked folders are in
.gitignore, so they are not committed again by accident.

For whoever adds a study: ``python docs/data/unpack.py --pack NAME`` packs docs/data/NAME/ into
archive/NAME.tar.xz (the same bytes for the same files) and adds the folder to .gitignore; then
``git rm -r --cached docs/data/NAME`` and commit the archive."""
from __future__ import annotations

import argparse
import io
import lzma
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ARCHIVE = HERE / "archive"
GITIGNORE = HERE.parent.parent / ".gitignore"


class Refused(Exception):
    """One line for the user: why a study was not unpacked."""


def studies() -> list[str]:
    return sorted(p.name[: -len(".tar.xz")] for p in ARCHIVE.glob("*.tar.xz"))


def name_of(arg: str) -> str:
    name = Path(arg).name.removesuffix(".tar.xz").rstrip("/")
    if name not in studies():
        raise Refused(f"no study {name!r} in {ARCHIVE} (python {sys.argv[0]} --list names them)")
    return name


def members(name: str, archive: Path | None = None, modes: dict[str, int] | None = None) -> dict[str, bytes]:
    """The archive's files, each path relative to docs/data/NAME/, with its bytes (and into
    ``modes`` its permission bits). Refuses an archive holding anything but plain files under
    NAME/ (no links, no absolute or ../ paths)."""
    out = {}
    with tarfile.open(archive or ARCHIVE / f"{name}.tar.xz", "r:xz") as tar:
        for m in tar.getmembers():
            parts = Path(m.name).parts
            if m.isdir() and parts[:1] == (name,) and ".." not in parts:
                continue
            if not (m.isfile() and len(parts) > 1 and parts[0] == name and ".." not in parts
                    and not Path(m.name).is_absolute()):
                raise Refused(f"{name}.tar.xz: {m.name!r} is not a plain file under {name}/; not unpacked")
            out["/".join(parts[1:])] = tar.extractfile(m).read()
            if modes is not None:
                modes["/".join(parts[1:])] = m.mode & 0o755
    return out


def on_disk(folder: Path) -> dict[str, bytes]:
    files = (p for p in sorted(folder.rglob("*")) if p.is_file())
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in files
            if not any(part == "__pycache__" or part.endswith(".pyc") for part in p.relative_to(folder).parts)}


def unpack(name: str, into: Path = HERE, archive: Path | None = None) -> str:
    """Unpack study ``name`` into ``into``/NAME/; the line that says what was done. Raises Refused
    where that folder exists and differs from the archive."""
    modes: dict[str, int] = {}
    files = members(name, archive, modes)
    folder = into / name
    if folder.exists():
        there = on_disk(folder) if folder.is_dir() else None
        if there == files:
            return f"{folder} is already unpacked"
        raise Refused(f"{folder} exists and differs from {name}.tar.xz: not overwritten (move it away, then run again)")
    partial = into / f".{name}.unpacking"
    if partial.exists():
        raise Refused(f"{partial} is left from an unpacking that stopped: delete it, then run again")
    for rel, data in files.items():
        (partial / rel).parent.mkdir(parents=True, exist_ok=True)
        (partial / rel).write_bytes(data)
        (partial / rel).chmod(modes[rel] | 0o644)
    partial.rename(folder)
    return f"unpacked {name}.tar.xz into {folder} ({len(files)} files)"


def pack(name: str, into: Path = ARCHIVE, root: Path = HERE) -> Path:
    """Pack ``root``/NAME/ into ``into``/NAME.tar.xz: its files sorted, owner and times zeroed, so the
    same files give the same bytes. Adds /docs/data/NAME/ to .gitignore when packing docs/data."""
    folder = root / name
    if not folder.is_dir():
        raise Refused(f"{folder} is not a folder")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel, data in on_disk(folder).items():
            info = tarfile.TarInfo(f"{name}/{rel}")
            info.size, info.mode, info.mtime = len(data), 0o755 if (folder / rel).stat().st_mode & 0o100 else 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    into.mkdir(parents=True, exist_ok=True)
    out = into / f"{name}.tar.xz"
    out.write_bytes(lzma.compress(buf.getvalue(), preset=9 | lzma.PRESET_EXTREME))
    if root == HERE and GITIGNORE.is_file():
        line = f"/docs/data/{name}/"
        text = GITIGNORE.read_text()
        if line not in text.splitlines():
            GITIGNORE.write_text(text + ("" if text.endswith("\n") else "\n") + line + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", metavar="NAME", help="a study: archive/NAME.tar.xz")
    ap.add_argument("--all", action="store_true", help="unpack every study")
    ap.add_argument("--list", action="store_true", help="name the studies")
    ap.add_argument("--into", type=Path, default=HERE, metavar="DIR", help="unpack into DIR/NAME/ (default: docs/data)")
    ap.add_argument("--pack", metavar="NAME", help="pack docs/data/NAME/ into archive/NAME.tar.xz")
    args = ap.parse_args(argv)
    try:
        if args.pack:
            print(f"packed {pack(args.pack)}")
            return 0
        if args.list:
            for name in studies():
                print(f"{name}  ({(ARCHIVE / f'{name}.tar.xz').stat().st_size / 1024:.1f} KiB)")
            return 0
        names = studies() if args.all else [name_of(a) for a in args.names]
        if not names:
            ap.error("name a study (NAME), or --all, or --list")
        failed = 0
        for name in names:
            try:
                print(unpack(name, args.into))
            except Refused as e:
                print(e, file=sys.stderr)
                failed = 1
        return failed
    except Refused as e:
        print(e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
