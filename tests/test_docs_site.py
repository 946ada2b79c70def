"""The documentation site: `mkdocs build --strict` makes it with no warning (no broken link, no page left out of
the navigation), and in a real headless browser its pages open, read at phone width, and its search finds what a
newcomer looks for."""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from browserkit import chromium
from loadclock import scaled

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The site built from docs/ into a temporary folder, served on loopback (the search runs in a worker that
    fetches its index, which a file:// page cannot)."""
    folder = tmp_path_factory.mktemp("site")
    built = subprocess.run([str(Path(sys.executable).parent / "mkdocs"), "build", "--strict", "-d", str(folder)],
                           cwd=ROOT, capture_output=True, text=True, timeout=scaled(180),
                           env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, built.stdout + built.stderr
    said = [line for line in (built.stdout + built.stderr).splitlines() if not line.startswith("INFO")]
    assert not [line for line in said if line.strip()], f"mkdocs build said more than INFO: {said}"
    handler = functools.partial(_Quiet, directory=str(folder))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def browser(site: str) -> Iterator:
    with chromium() as launched:
        yield launched


def _search(page, words: str) -> list[str]:
    """Type into the site's search box; the result links it lists."""
    page.click("input.md-search__input")
    page.keyboard.type(words)
    page.wait_for_selector(".md-search-result__item a", timeout=scaled(20) * 1000)
    return page.eval_on_selector_all(".md-search-result__item a", "links => links.map(a => a.href)")


@pytest.mark.parametrize("words, page_of", [
    ("webhook", ("guides/webhooks/",)),
    ("exactly once", ("guides/events/", "guarantees/")),
    ("expect_signal_every", ("guides/projections/", "reference/config/")),
])
def test_the_search_finds_what_a_newcomer_looks_for(site: str, browser, words: str, page_of: tuple[str, ...]) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(site + "/")
        links = _search(page, words)
        assert any(p in link for link in links for p in page_of), (words, links)
    finally:
        page.close()


def test_every_page_of_the_navigation_opens_and_reads_at_phone_width(site: str, browser) -> None:
    page = browser.new_page(viewport={"width": 390, "height": 844})
    try:
        page.goto(site + "/")
        links = sorted(set(page.eval_on_selector_all("nav.md-nav--primary a.md-nav__link[href]",
                                                     "links => links.map(a => a.href)")))
        pages = [link.split("#")[0] for link in links if link.startswith(site)]
        assert len(set(pages)) > 30
        for url in sorted(set(pages)):
            response = page.goto(url)
            assert response is not None and response.status == 200, url
            assert page.title().endswith("Nerve"), (url, page.title())
            wide = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            assert wide <= 1, f"{url} is {wide}px wider than a phone's screen"
    finally:
        page.close()


def test_every_test_the_guarantees_page_names_exists() -> None:
    """A promise on docs/guarantees.md names the test that holds it: each such test is there, by that name."""
    import re

    named = re.findall(r"`tests/(test_\w+\.py)::(test_\w+)`", (ROOT / "docs" / "guarantees.md").read_text(encoding="utf-8"))
    assert len(named) >= 10
    missing = [f"{file}::{name}" for file, name in named
               if not re.search(rf"^(async )?def {name}\(", (ROOT / "tests" / file).read_text(encoding="utf-8"), re.M)]
    assert not missing, f"docs/guarantees.md names tests that do not exist: {missing}"


def test_the_readme_is_short_and_every_link_in_it_resolves() -> None:
    """README.md is the front page (≤ 200 lines); each link is a file of the repository and, with an anchor, a
    heading of that page (mkdocs --strict checks docs/, not the README)."""
    root = Path(__file__).resolve().parent.parent
    text = (root / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert links
    for link in links:
        if link.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = link.partition("#")
        target = root / path
        assert target.is_file(), f"README.md links to {link}: no such file"
        if anchor:
            headings = [re.sub(r"[^\w\- ]", "", h.strip("# ").lower()).replace(" ", "-")
                        for h in target.read_text(encoding="utf-8").splitlines() if h.startswith("#")]
            assert anchor in headings, f"README.md links to {link}: {path} has no heading #{anchor}"
