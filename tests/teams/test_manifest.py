"""The Teams app package: manifest structure, icons, and the zip the package command builds."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest

from adapters.teams import icons, package
from bot import approvals_command

from .png import read_png

MANIFEST_DIR = Path(__file__).resolve().parents[2] / "manifest" / "teams"
APP_ID = "5f0c6a9e-1111-4222-8333-944445555666"
MANIFEST_VERSION = "1.30"
"""The newest generally available app manifest schema (August 2026) in Microsoft's
"Microsoft 365 app manifest schema reference"; nothing this manifest uses changed
since 1.17, and the bot command list matches the 1.30 ``root.bots.commandLists``
definition (scopes team/personal/groupChat, commands with title and description)."""
GUID = re.compile(r"^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$")


@pytest.fixture
def manifest() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((MANIFEST_DIR / "manifest.json").read_text())
    return data


def test_the_manifest_has_the_required_keys_and_the_current_schema(
    manifest: dict[str, Any],
) -> None:
    for key in (
        "$schema",
        "manifestVersion",
        "version",
        "id",
        "developer",
        "name",
        "description",
        "icons",
        "accentColor",
        "bots",
    ):
        assert key in manifest, key
    assert manifest["manifestVersion"] == MANIFEST_VERSION
    assert manifest["$schema"] == (
        f"https://developer.microsoft.com/json-schemas/teams/v{MANIFEST_VERSION}/"
        "MicrosoftTeams.schema.json"
    )
    assert re.fullmatch(r"\d+\.\d+\.\d+", manifest["version"])
    for url in ("websiteUrl", "privacyUrl", "termsOfUseUrl"):
        assert manifest["developer"][url].startswith("https://")
    assert len(manifest["name"]["short"]) <= 30
    assert len(manifest["description"]["short"]) <= 80
    assert len(manifest["description"]["full"]) <= 4000
    assert re.fullmatch(r"#[0-9A-Fa-f]{6}", manifest["accentColor"])


def test_the_bot_serves_personal_team_and_group_chats_with_its_commands(
    manifest: dict[str, Any],
) -> None:
    (bot,) = manifest["bots"]
    assert bot["botId"] == "{{MICROSOFT_APP_ID}}"
    assert sorted(bot["scopes"]) == ["groupChat", "personal", "team"]
    personal, shared = bot["commandLists"]
    assert personal["scopes"] == ["personal"]
    assert sorted(shared["scopes"]) == ["groupChat", "team"]
    requests = ["help", "find user", "deploy", "refund"]
    for commands in (personal, shared):
        described = {c["title"]: c["description"] for c in commands["commands"]}
        assert list(described)[-4:] == requests
        # find_user takes a user id (examples/ops/records.py), not a name or an email.
        assert "by id" in described["find user"]
        assert "name" not in described["find user"]
        assert "email" not in described["find user"]
        assert len(commands["commands"]) <= 10
        for command in commands["commands"]:
            assert len(command["title"]) <= 32
            assert 0 < len(command["description"]) <= 128


def test_the_approvals_commands_are_offered_in_the_1_1_chat_only(
    manifest: dict[str, Any],
) -> None:
    """The list is private: in a channel or group chat the bot only says to ask it 1:1."""
    personal, shared = manifest["bots"][0]["commandLists"]
    titles = [c["title"] for c in personal["commands"]]
    # Each is what the core's one grammar reads as that command.
    assert [approvals_command(title) for title in titles[:2]] == ["list", "revoke"]
    assert not any(c["title"].startswith("approvals") for c in shared["commands"])


def test_rsc_lets_thread_replies_reach_the_bot_without_a_mention(
    manifest: dict[str, Any],
) -> None:
    rsc = manifest["authorization"]["permissions"]["resourceSpecific"]
    assert {(p["name"], p["type"]) for p in rsc} == {
        ("ChannelMessage.Read.Group", "Application"),
        ("ChatMessage.Read.Chat", "Application"),
    }
    assert manifest["webApplicationInfo"]["id"] == "{{MICROSOFT_APP_ID}}"
    assert manifest["webApplicationInfo"]["resource"]


def test_the_color_icon_is_192_square_and_opaque(manifest: dict[str, Any]) -> None:
    image = read_png((MANIFEST_DIR / manifest["icons"]["color"]).read_bytes())
    assert (image.width, image.height) == (192, 192)
    if image.color_type == 6:
        assert all(p[3] == 255 for p in image.pixels())
    else:
        assert image.color_type == 2


def test_the_outline_icon_is_32_square_white_on_transparent(manifest: dict[str, Any]) -> None:
    image = read_png((MANIFEST_DIR / manifest["icons"]["outline"]).read_bytes())
    assert (image.width, image.height) == (32, 32)
    assert image.color_type == 6
    pixels = image.pixels()
    assert any(p[3] == 0 for p in pixels)
    assert any(p[3] == 255 for p in pixels)
    assert all(p[:3] == (255, 255, 255) for p in pixels if p[3] > 0)


def test_the_package_has_the_app_id_filled_in(tmp_path: Path) -> None:
    built = package.build_package(tmp_path / "dist" / "teams-app.zip", app_id=APP_ID)
    with zipfile.ZipFile(built.path) as archive:
        assert sorted(archive.namelist()) == ["color.png", "manifest.json", "outline.png"]
        filled = json.loads(archive.read("manifest.json"))
        assert archive.read("outline.png") == (MANIFEST_DIR / "outline.png").read_bytes()
    assert filled["id"] == APP_ID
    assert filled["bots"][0]["botId"] == APP_ID
    assert filled["webApplicationInfo"]["id"] == APP_ID
    assert "{{" not in json.dumps(filled)
    assert filled == built.manifest
    assert filled["version"] == "1.0.0"


def test_the_teams_app_id_can_differ_from_the_bot_id(tmp_path: Path) -> None:
    teams_app_id = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
    built = package.build_package(tmp_path / "app.zip", app_id=APP_ID, teams_app_id=teams_app_id)
    with zipfile.ZipFile(built.path) as archive:
        filled = json.loads(archive.read("manifest.json"))
    assert filled["id"] == teams_app_id
    assert filled["bots"][0]["botId"] == APP_ID
    assert GUID.match(filled["id"])


def test_the_package_command_refuses_an_app_id_that_is_not_a_guid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "app.zip"
    assert package.main(["--app-id", "my-bot", "--out", str(out)]) == 2
    assert "must be a GUID" in capsys.readouterr().err
    assert not out.exists()
    assert package.main(["--app-id", APP_ID, "--out", str(out)]) == 0
    assert out.is_file()


def built_version(out: Path) -> str:
    with zipfile.ZipFile(out) as archive:
        version: str = json.loads(archive.read("manifest.json"))["version"]
        return version


@pytest.mark.parametrize("version", ["1.2.3", "0.0.1", "10.20.300"])
def test_the_package_command_sets_the_app_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: str
) -> None:
    out = tmp_path / "app.zip"
    assert package.main(["--app-id", APP_ID, "--version", version, "--out", str(out)]) == 0
    assert built_version(out) == version
    assert f"(version {version})" in capsys.readouterr().out


@pytest.mark.parametrize(
    "version",
    ["1.2", "1.2.3.4", "v1.2.3", "01.2.3", "1.02.3", "1.2.3-beta", "1.2.3+7", "1.2.3\n", ""],
)
def test_a_version_teams_would_refuse_builds_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: str
) -> None:
    out = tmp_path / "app.zip"
    assert package.main(["--app-id", APP_ID, "--version", version, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the app version must be MAJOR.MINOR.PATCH")
    assert repr(version) in err
    assert not out.exists()


def test_a_manifest_with_a_version_teams_would_refuse_builds_nothing(tmp_path: Path) -> None:
    template = json.loads((MANIFEST_DIR / "manifest.json").read_text())
    with pytest.raises(package.PackageError, match=r"MAJOR\.MINOR\.PATCH"):
        package.fill_manifest({**template, "version": "1.0"}, app_id=APP_ID)
    filled = package.fill_manifest({**template, "version": "1.0"}, app_id=APP_ID, version="1.1.0")
    assert filled["version"] == "1.1.0"


def test_the_package_command_warns_about_the_example_com_urls_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert package.main(["--app-id", APP_ID, "--out", str(tmp_path / "app.zip")]) == 0
    warnings = capsys.readouterr().err.splitlines()
    assert [w.split(" is still")[0] for w in warnings] == [
        "warning: developer.websiteUrl",
        "warning: developer.privacyUrl",
        "warning: developer.termsOfUseUrl",
    ]
    assert "https://example.com/approval-bot/privacy" in warnings[1]
    assert all("manifest.json" in w for w in warnings)


def test_a_manifest_with_its_own_urls_gets_no_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "manifest"
    mine.mkdir()
    template = json.loads((MANIFEST_DIR / "manifest.json").read_text())
    template["developer"] |= {
        "websiteUrl": "https://ops.contoso.test/bot",
        "privacyUrl": "https://ops.contoso.test/privacy",
        "termsOfUseUrl": "https://notexample.com/terms",
    }
    (mine / "manifest.json").write_text(json.dumps(template))
    for icon in ("color.png", "outline.png"):
        (mine / icon).write_bytes((MANIFEST_DIR / icon).read_bytes())
    out = tmp_path / "app.zip"
    args = ["--app-id", APP_ID, "--manifest-dir", str(mine), "--out", str(out)]
    assert package.main(args) == 0
    assert capsys.readouterr().err == ""


def test_placeholder_urls_are_found_anywhere_in_the_manifest() -> None:
    manifest = {
        "developer": {"websiteUrl": "https://www.example.com/"},
        "staticTabs": [{"contentUrl": "https://tabs.example.org/x?y=1"}],
        "description": {"full": "See http://example.net/docs for more."},
        "validDomains": ["*.example.com", "contoso.test"],
        "bots": [{"botId": "https://example.community/not-a-placeholder"}],
    }
    assert package.placeholder_urls(manifest) == [
        ("developer.websiteUrl", "https://www.example.com/"),
        ("staticTabs[0].contentUrl", "https://tabs.example.org/x?y=1"),
        ("description.full", "http://example.net/docs"),
        ("validDomains[0]", "*.example.com"),
    ]


def test_the_committed_icons_are_what_the_generator_draws() -> None:
    assert (MANIFEST_DIR / "color.png").read_bytes() == icons.color_icon()
    assert (MANIFEST_DIR / "outline.png").read_bytes() == icons.outline_icon()
