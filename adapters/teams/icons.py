"""The Teams app icons, drawn in pure Python and written as PNG (zlib + struct).

``color.png`` is 192x192 and opaque (RGB); ``outline.png`` is 32x32, white on
transparent (RGBA), as Teams requires. Regenerate the committed files with
``python -m adapters.teams.icons manifest/teams``.
"""

from __future__ import annotations

import itertools
import math
import struct
import sys
import zlib
from pathlib import Path
from typing import Final

COLOR_SIZE: Final = 192
OUTLINE_SIZE: Final = 32
BACKGROUND: Final = (0x46, 0x4E, 0xB8)
WHITE: Final = (0xFF, 0xFF, 0xFF)

# A check mark in unit coordinates, and its stroke width relative to the icon.
_CHECK: Final = ((0.27, 0.53), (0.43, 0.69), (0.75, 0.35))
_STROKE: Final = 0.11


def png(width: int, height: int, rows: list[bytes], *, alpha: bool) -> bytes:
    """Encode 8-bit RGB or RGBA rows (no filtering) as a PNG file."""
    color_type = 6 if alpha else 2
    header = struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)
    raw = b"".join(b"\x00" + row for row in rows)
    return b"".join(
        [
            b"\x89PNG\r\n\x1a\n",
            _chunk(b"IHDR", header),
            _chunk(b"IDAT", zlib.compress(raw, 9)),
            _chunk(b"IEND", b""),
        ]
    )


def color_icon() -> bytes:
    """The 192x192 full-color icon: a white check mark on the brand color."""
    rows = []
    for y in range(COLOR_SIZE):
        row = bytearray()
        for x in range(COLOR_SIZE):
            cover = _check_coverage(x, y, COLOR_SIZE)
            row += bytes(round(b + (w - b) * cover) for b, w in zip(BACKGROUND, WHITE, strict=True))
        rows.append(bytes(row))
    return png(COLOR_SIZE, COLOR_SIZE, rows, alpha=False)


def outline_icon() -> bytes:
    """The 32x32 outline icon: a white check mark on a transparent background."""
    rows = []
    for y in range(OUTLINE_SIZE):
        row = bytearray()
        for x in range(OUTLINE_SIZE):
            cover = _check_coverage(x, y, OUTLINE_SIZE)
            row += bytes((*WHITE, round(255 * cover)))
        rows.append(bytes(row))
    return png(OUTLINE_SIZE, OUTLINE_SIZE, rows, alpha=True)


def write_icons(directory: Path) -> None:
    """Write ``color.png`` and ``outline.png`` into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "color.png").write_bytes(color_icon())
    (directory / "outline.png").write_bytes(outline_icon())


def _check_coverage(x: int, y: int, size: int) -> float:
    """How much of pixel (x, y) the check mark's stroke covers, 0..1 (anti-aliased)."""
    px, py = (x + 0.5) / size, (y + 0.5) / size
    distance = min(_segment_distance(px, py, a, b) for a, b in itertools.pairwise(_CHECK))
    edge = (_STROKE / 2 - distance) * size + 0.5
    return min(1.0, max(0.0, edge))


def _segment_distance(
    px: float, py: float, a: tuple[float, float], b: tuple[float, float]
) -> float:
    (ax, ay), (bx, by) = a, b
    dx, dy = bx - ax, by - ay
    t = max(0.0, min(1.0, ((px - ax) * dx + (py - ay) * dy) / (dx * dx + dy * dy)))
    return math.hypot(px - (ax + t * dx), py - (ay + t * dy))


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


if __name__ == "__main__":
    write_icons(Path(sys.argv[1] if len(sys.argv) > 1 else "manifest/teams"))
