"""Build the Teams app package (the zip to upload) with the app id filled in.

    python -m adapters.teams.package --app-id <MICROSOFT_APP_ID> --out dist/teams-app.zip

``manifest/teams/manifest.json`` holds ``{{MICROSOFT_APP_ID}}`` (the bot's
Entra app id) and ``{{TEAMS_APP_ID}}`` (the Teams app's own id, by default the
same id) placeholders; the zip holds the filled manifest and the two icons.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import zipfile
from pathlib import Path
from typing import Any, Final

MANIFEST_DIR: Final = Path(__file__).resolve().parents[2] / "manifest" / "teams"
FILES: Final = ("manifest.json", "color.png", "outline.png")
_GUID: Final = re.compile(r"^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$")
_PLACEHOLDER: Final = re.compile(r"\{\{[A-Z_]+\}\}")
_ZIP_TIME: Final = (2024, 1, 1, 0, 0, 0)


class PackageError(Exception):
    """The package cannot be built (a bad id, a missing file, an unfilled placeholder)."""


def fill_manifest(
    template: dict[str, Any], *, app_id: str, teams_app_id: str | None = None
) -> dict[str, Any]:
    """The manifest with its placeholders replaced.

    Raises:
        PackageError: An id is not a GUID, or a placeholder is left.
    """
    values = {"MICROSOFT_APP_ID": app_id, "TEAMS_APP_ID": teams_app_id or app_id}
    for name, value in values.items():
        if not _GUID.match(value):
            raise PackageError(f"{name} must be a GUID, got {value!r}")
    text = json.dumps(template)
    for name, value in values.items():
        text = text.replace("{{" + name + "}}", value)
    left = sorted(set(_PLACEHOLDER.findall(text)))
    if left:
        raise PackageError(f"unfilled placeholders in the manifest: {', '.join(left)}")
    filled: dict[str, Any] = json.loads(text)
    return filled


def build_package(
    out: Path,
    *,
    app_id: str,
    teams_app_id: str | None = None,
    manifest_dir: Path = MANIFEST_DIR,
) -> Path:
    """Write the upload zip to ``out`` and return its path.

    Raises:
        PackageError: See ``fill_manifest``, or a file of the package is missing.
    """
    missing = [name for name in FILES if not (manifest_dir / name).is_file()]
    if missing:
        raise PackageError(f"missing in {manifest_dir}: {', '.join(missing)}")
    template = json.loads((manifest_dir / "manifest.json").read_text(encoding="utf-8"))
    manifest = fill_manifest(template, app_id=app_id, teams_app_id=teams_app_id)
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(_entry("manifest.json"), json.dumps(manifest, indent=2) + "\n")
        for name in FILES[1:]:
            archive.writestr(_entry(name), (manifest_dir / name).read_bytes())
    return out


def _entry(name: str) -> zipfile.ZipInfo:
    # Fixed timestamps: the same inputs always give the same bytes.
    info = zipfile.ZipInfo(name, _ZIP_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    return info


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(
        prog="python -m adapters.teams.package", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--app-id", required=True, help="the bot's MICROSOFT_APP_ID (a GUID)")
    parser.add_argument("--teams-app-id", help="the Teams app id (default: the app id)")
    parser.add_argument("--out", type=Path, default=Path("dist/teams-app.zip"))
    parser.add_argument("--manifest-dir", type=Path, default=MANIFEST_DIR)
    args = parser.parse_args(argv)
    try:
        path = build_package(
            args.out,
            app_id=args.app_id,
            teams_app_id=args.teams_app_id,
            manifest_dir=args.manifest_dir,
        )
    except PackageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
