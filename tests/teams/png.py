"""A small PNG reader for checking the icons: size, color type and pixels (8-bit only)."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

SIGNATURE = b"\x89PNG\r\n\x1a\n"
_CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}


@dataclass(frozen=True)
class Image:
    width: int
    height: int
    color_type: int
    rows: list[bytes]

    @property
    def channels(self) -> int:
        return _CHANNELS[self.color_type]

    def pixels(self) -> list[tuple[int, ...]]:
        n = self.channels
        return [tuple(row[i : i + n]) for row in self.rows for i in range(0, len(row), n)]


def read_png(data: bytes) -> Image:
    """Decode an 8-bit, non-interlaced PNG (any filter), checking every chunk's CRC."""
    assert data[:8] == SIGNATURE, "not a PNG"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert zlib.crc32(kind + body) & 0xFFFFFFFF == crc, f"bad CRC in {kind!r}"
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, color_type, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8, "only 8-bit PNGs are supported"
    assert interlace == 0, "only non-interlaced PNGs are supported"
    bpp = _CHANNELS[color_type]
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    previous = bytes(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up = previous[i]
            corner = previous[i - bpp] if i >= bpp else 0
            line[i] = (line[i] + _predict(kind, left, up, corner)) & 0xFF
        rows.append(bytes(line))
        previous = bytes(line)
    return Image(width, height, color_type, rows)


def _predict(kind: int, left: int, up: int, corner: int) -> int:
    if kind == 0:
        return 0
    if kind == 1:
        return left
    if kind == 2:
        return up
    if kind == 3:
        return (left + up) // 2
    if kind == 4:
        p = left + up - corner
        pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
        if pa <= pb and pa <= pc:
            return left
        return up if pb <= pc else corner
    raise AssertionError(f"unknown PNG filter {kind}")
