"""Debian's headless Chromium through Playwright, for the tests that render a page as a user's browser."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser


def chromium_path() -> str:
    """The chromium executable; a failure naming the package when it is missing."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail("chromium is not installed: `make test` installs Debian's chromium package")
    return path


@contextmanager
def headless_chromium() -> Iterator[tuple[Any, Browser]]:
    """Playwright's sync API module and a launched headless Chromium, closed for sure afterwards."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install the test extras (playwright)")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium_path(), headless=True, args=["--no-sandbox"]
        )
        try:
            yield sync_api, browser
        finally:
            browser.close()
