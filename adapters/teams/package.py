"""Build the Teams app package (the zip to upload) with the app id filled in.

    python -m adapters.teams.package --app-id <MICROSOFT_APP_ID> [--version 1.2.3] \
        --out dist/teams-app.zip

``manifest/teams/manifest.json`` holds ``{{MICROSOFT_APP_ID}}`` (the bot's
Entra app id) and ``{{TEAMS_APP_ID}}`` (the Teams app's own id, by default the
same id) placeholders; the zip holds the filled manifest and the two icons.
``--version`` sets the app's version (Teams takes an update of an uploaded app
only with a higher one). The command warns about URLs still on the
``example.com`` placeholder domains, which Teams would show on the app's page.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

MANIFEST_DIR: Final = Path(__file__).resolve().parents[2] / "manifest" / "teams"
FILES: Final = ("manifest.json", "color.png", "outline.png")
_GUID: Final = re.compile(r"^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$")
_PLACEHOLDER: Final = re.compile(r"\{\{[A-Z_]+\}\}")
_ZIP_TIME: Final = (2024, 1, 1, 0, 0, 0)
_VERSION: Final = re.compile(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)")
"""MAJOR.MINOR.PATCH, as the manifest schema asks (no pre-release or build suffix)."""
MAX_VERSION: Final = 256
"""The manifest schema's longest ``version``."""
PLACEHOLDER_DOMAINS: Final = ("example.com", "example.net", "example.org")
"""Domains reserved for examples (RFC 2606): a URL on one was never replaced."""
_URL: Final = re.compile(r"https?://[^\s\"'<>]+")


class PackageError(Exception):
    """The package cannot be built (a bad id, a missing file, an unfilled placeholder)."""


@dataclass(frozen=True, kw_only=True)
class Built:
    """A package written: where, the manifest it holds, and what to fix before publishing."""

    path: Path
    manifest: dict[str, Any]
    warnings: tuple[str, ...]


def check_version(version: str) -> str:
    """``version`` if Teams takes it as an app version.

    Raises:
        PackageError: It is not MAJOR.MINOR.PATCH.
    """
    if len(version) > MAX_VERSION or not _VERSION.fullmatch(version):
        raise PackageError(
            "the app version must be MAJOR.MINOR.PATCH, three numbers without leading "
            f"zeros (e.g. 1.2.3), as Teams requires; got {version!r}"
        )
    return version


def fill_manifest(
    template: dict[str, Any],
    *,
    app_id: str,
    teams_app_id: str | None = None,
    version: str | None = None,
) -> dict[str, Any]:
    """The manifest with its placeholders replaced (and its version, when given).

    Raises:
        PackageError: An id is not a GUID, the version (``version``, else the
            template's) is not one Teams takes, or a placeholder is left.
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
    shown = version if version is not None else str(filled.get("version", ""))
    filled["version"] = check_version(shown)
    return filled


def placeholder_urls(manifest: dict[str, Any]) -> list[tuple[str, str]]:
    """``(where, url)`` of every URL (or valid domain) on a placeholder domain."""
    found: list[tuple[str, str]] = []
    for where, value in _strings(manifest, ""):
        hosts = [(url, urlsplit(url).hostname or "") for url in _URL.findall(value)]
        if where.startswith("validDomains"):
            hosts.append((value, value.lower().removeprefix("*.")))
        found += [(where, url) for url, host in hosts if _is_placeholder(host)]
    return found


def _is_placeholder(host: str) -> bool:
    return any(host == domain or host.endswith("." + domain) for domain in PLACEHOLDER_DOMAINS)


def _strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
    """Every string in a JSON value, with its path (``developer.websiteUrl``)."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{where}[{index}]")


def warnings_for(manifest: dict[str, Any], *, source: Path) -> tuple[str, ...]:
    """What to fix in a manifest (read from ``source``) before people install the app."""
    return tuple(
        f"{where} is still the placeholder {url}: Teams shows it on the app's page; "
        f"put your own URL in {_shown(source)}"
        for where, url in placeholder_urls(manifest)
    )


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it is under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def build_package(
    out: Path,
    *,
    app_id: str,
    teams_app_id: str | None = None,
    version: str | None = None,
    manifest_dir: Path = MANIFEST_DIR,
) -> Built:
    """Write the upload zip to ``out``; what it holds, and the manifest's warnings.

    Raises:
        PackageError: See ``fill_manifest``, or a file of the package is missing.
    """
    missing = [name for name in FILES if not (manifest_dir / name).is_file()]
    if missing:
        raise PackageError(f"missing in {manifest_dir}: {', '.join(missing)}")
    source = manifest_dir / "manifest.json"
    template = json.loads(source.read_text(encoding="utf-8"))
    manifest = fill_manifest(template, app_id=app_id, teams_app_id=teams_app_id, version=version)
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(_entry("manifest.json"), json.dumps(manifest, indent=2) + "\n")
        for name in FILES[1:]:
            archive.writestr(_entry(name), (manifest_dir / name).read_bytes())
    return Built(path=out, manifest=manifest, warnings=warnings_for(manifest, source=source))


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
    parser.add_argument(
        "--version",
        help="the app version, MAJOR.MINOR.PATCH (default: the manifest's); "
        "an update of an uploaded app needs a higher one",
    )
    parser.add_argument("--out", type=Path, default=Path("dist/teams-app.zip"))
    parser.add_argument("--manifest-dir", type=Path, default=MANIFEST_DIR)
    args = parser.parse_args(argv)
    try:
        built = build_package(
            args.out,
            app_id=args.app_id,
            teams_app_id=args.teams_app_id,
            version=args.version,
            manifest_dir=args.manifest_dir,
        )
    except PackageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for warning in built.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"wrote {built.path} (version {built.manifest['version']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
