"""What an MP4 file holds, read from its bytes (ISO base media boxes): the video track's codec as
its sample entry names it (``avc1``: H.264; ``mp4v``: MPEG-4 Part 2), its frame count and size.
A test reads these rather than trusting a decoder that plays both."""
from __future__ import annotations

import dataclasses
import struct
from pathlib import Path

CONTAINERS = ("moov", "trak", "mdia", "minf", "stbl")


@dataclasses.dataclass(frozen=True)
class Track:
    brand: str      # ftyp's major brand
    codec: str      # the sample entry's four characters
    frames: int     # samples in the track (stsz)
    width: int
    height: int


def boxes(data: bytes, start: int, end: int):
    """(type, payload start, box end) of each box from ``start`` to ``end``."""
    i = start
    while i + 8 <= end:
        size, kind = struct.unpack(">I4s", data[i:i + 8])
        head = 8
        if size == 1:
            size, head = struct.unpack(">Q", data[i + 8:i + 16])[0], 16
        elif size == 0:
            size = end - i
        if size < head:
            raise ValueError(f"a box of {size} bytes at {i}")
        yield kind.decode("latin-1"), i + head, i + size
        i += size


def video_track(path: str | Path) -> Track:
    data = Path(path).read_bytes()
    top = {kind: (a, b) for kind, a, b in boxes(data, 0, len(data))}
    brand = data[top["ftyp"][0]:top["ftyp"][0] + 4].decode("latin-1")
    found: dict[str, tuple[int, int]] = {}

    def walk(a: int, b: int) -> None:
        for kind, start, end in boxes(data, a, b):
            if kind == "trak" and "hdlr_vide" in found:
                continue  # the first video track only
            if kind == "hdlr" and data[start + 8:start + 12] == b"vide":
                found["hdlr_vide"] = (start, end)
            if kind in ("stsd", "stsz"):
                found[kind] = (start, end)
            if kind in CONTAINERS:
                walk(start, end)
    walk(*top["moov"])
    stsd, stsz = found["stsd"][0], found["stsz"][0]
    entry = stsd + 8  # version and flags, entry count
    codec = data[entry + 4:entry + 8].decode("latin-1")
    width, height = struct.unpack(">HH", data[entry + 32:entry + 36])  # a visual sample entry's size
    frames = struct.unpack(">I", data[stsz + 8:stsz + 12])[0]
    return Track(brand, codec, frames, width, height)
