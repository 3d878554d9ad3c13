"""The browser tests' Chromium (Debian's package, driven by Playwright) and their screenshots.

Screenshots go to tests/browser/artifacts/ (git-ignored; CI keeps the folder as the run's
artifacts): each test saves the pages it looked at, and a failing test its last page too.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
#: Chromium without the things a test does not want: a sandbox (root in CI containers), the GPU,
#: and background traffic to Google.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


def chromium_path() -> str:
    path = os.environ.get("GROUPCOORD_CHROMIUM", "/usr/bin/chromium")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)) and shutil.which(path) is None:
        pytest.fail(f"Chromium not found at {path!r}: run tests/browser/setup_browser.sh (it installs Debian's "
                    "chromium package), or set GROUPCOORD_CHROMIUM to a Chromium executable", pytrace=False)
    return path


@pytest.fixture
def browser_page(request: pytest.FixtureRequest) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    executable = chromium_path()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        request.node.browser_page = page
        try:
            yield page
        finally:
            context.close()
            browser.close()


@pytest.fixture
def screenshot(request: pytest.FixtureRequest, browser_page: Any) -> Callable[[str], Path]:
    """``screenshot(name)`` saves the page as tests/browser/artifacts/<test>-<name>.png."""
    ARTIFACTS.mkdir(exist_ok=True)

    def save(name: str) -> Path:
        path = ARTIFACTS / f"{request.node.name}-{name}.png"
        browser_page.screenshot(path=str(path), full_page=True)
        return path

    return save


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    page = getattr(item, "browser_page", None)
    if report.when == "call" and report.failed and page is not None:
        ARTIFACTS.mkdir(exist_ok=True)
        try:
            page.screenshot(path=str(ARTIFACTS / f"{item.name}-failed.png"), full_page=True)
        except Exception as exc:  # the page may be what failed; the report matters more than the picture
            report.sections.append(("browser", f"no failure screenshot: {exc}"))
