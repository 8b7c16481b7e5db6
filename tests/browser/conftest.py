"""Headless Chromium for the browser tests, driven through Playwright's sync API."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
BUNDLE = Path(__file__).resolve().parents[2] / "frontend" / "dist" / "peakwatch"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts"

# Playwright's sync API runs an event loop in this thread; Django would otherwise refuse
# the fixtures' database queries as if they came from async code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture(scope="session")
def browser():
    if not CHROMIUM.exists():
        pytest.skip(f"browser tests need Chromium at {CHROMIUM}; it is not installed")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--disable-quic",
            ],
        )
        yield browser
        browser.close()


@pytest.fixture
def bundle():
    """The built front end; a missing build fails loudly rather than drawing nothing."""
    for name in ("trend.js", "run.js", "peakwatch.css"):
        if not (BUNDLE / name).exists():
            pytest.fail(
                f"{BUNDLE / name} is missing: build the front end first with "
                "`npm --prefix frontend ci && npm --prefix frontend run build`"
            )
    return BUNDLE


@pytest.fixture
def page(browser, bundle):
    """A fresh page that records failed requests and script errors for the test to check."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.problems = []
    page.on("pageerror", lambda error: page.problems.append(f"page error: {error}"))
    page.on(
        "console",
        lambda message: message.type == "error"
        and page.problems.append(f"console error: {message.text}"),
    )
    page.on(
        "response",
        lambda response: response.status >= 400
        and page.problems.append(f"{response.status} for {response.url}"),
    )
    yield page
    context.close()


@pytest.fixture
def screenshot_dir():
    SCREENSHOTS.mkdir(exist_ok=True)
    return SCREENSHOTS
