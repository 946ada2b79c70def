"""A real headless browser for the tests: Debian's chromium driven by Playwright (`make tools` installs chromium;
Playwright's own browser download is never used). Root needs --no-sandbox."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"


@contextmanager
def chromium() -> Iterator[Any]:
    """A launched headless chromium (Playwright's Browser), closed after."""
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), "chromium is needed: `make tools` installs it (apt-get install chromium)"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            yield browser
        finally:
            browser.close()
