"""A real headless Chromium (Debian's ``chromium``, which ``make test`` installs) driven
by playwright, for the pages the bot serves. A missing browser fails the test: it is
never skipped."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from playwright.async_api import Browser, async_playwright


def chromium_path() -> str:
    """Debian's chromium (``scripts/ensure-chromium`` installs it)."""
    found = shutil.which("chromium")
    assert found, "chromium is missing: run scripts/ensure-chromium (make test does)"
    return found


@asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    """A headless Chromium, closed at the end."""
    async with async_playwright() as driver:
        browser = await driver.chromium.launch(
            executable_path=chromium_path(), args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            yield browser
        finally:
            await browser.close()
