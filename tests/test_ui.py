"""The web console in a real headless browser (Debian's chromium driven by Playwright; no browser download).

One engine, one console and one browser for the module. Screenshots at 1280x800 and at a phone's width are
kept in test-output/ui/ (NERVE_TEST_OUTPUT overrides the folder).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from browserkit import CHROMIUM, chromium
from enginekit import RunningEngine, free_port, thread_statuses, wait_for, write_instance
from loadclock import scaled

from nerve_cli.ops.client import request

OUTPUT = Path(os.environ.get("NERVE_TEST_OUTPUT") or Path(__file__).resolve().parent.parent / "test-output") / "ui"
COUNTER = textwrap.dedent('''
    def compute(db, peers):
        import time
        return round(time.time() % 100, 2)
''')
GATE = textwrap.dedent('''
    from nerve_cli.sdk import END, WorkflowDefinition, ask_person, RoleResult

    async def asker(messages):
        return ask_person(f"Deploy {messages[0].content}?", schema={
            "type": "object", "required": ["env"],
            "properties": {"env": {"enum": ["staging", "prod"]}, "replicas": {"type": "integer", "minimum": 1}}})

    async def deployer(messages):
        return RoleResult(f"deployed to {messages[-1].meta['answer']['env']}", {})

    def moderator(messages):
        last = messages[-1]
        if last.role == "__start__":
            return "asker"
        if last.role == "__person__" and last.meta["approved"]:
            return "deployer"
        return END

    workflow = WorkflowDefinition(roles={"asker": asker, "deployer": deployer}, moderator=moderator)
''')


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    assert Path(CHROMIUM).exists(), "chromium is needed: `make tools` installs it (apt-get install chromium)"
    home = write_instance(tmp_path_factory.mktemp("ui") / "home", """
        senses:
          counter: {}
        reflexes:
          - {sense: counter, interval: 300ms}
        workflows:
          gate: {}
    """, {"counter": COUNTER})
    (home / "workflows").mkdir()
    (home / "workflows" / "gate.py").write_text(GATE)
    port = free_port()
    with RunningEngine(home) as engine:
        engine.wait_ready()
        ui = subprocess.Popen([sys.executable, "-m", "nerve_cli", "ui", "--home", str(home), "--listen",
                               f"127.0.0.1:{port}"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env={**os.environ, "NO_COLOR": "1"})
        try:
            line = ui.stdout.readline()  # type: ignore[union-attr]
            found = re.search(r"(http://\S+\?token=\S+)", line)
            assert found, line + ui.stdout.read(2000)  # type: ignore[union-attr]
            yield {"home": home, "engine": engine, "url": found.group(1), "base": f"http://127.0.0.1:{port}"}
        finally:
            ui.terminate()
            ui.wait(scaled(10))


@pytest.fixture(scope="module")
def browser(console: dict) -> Iterator:
    OUTPUT.mkdir(parents=True, exist_ok=True)
    with chromium() as launched:
        yield launched


def _http(url: str, data: bytes | None = None, headers: dict | None = None) -> tuple[int, str]:
    req = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=20) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.mark.timeout(180)
def test_the_inbox_answers_a_waiting_thread_and_the_page_follows_it_live(console: dict, browser) -> None:
    home = console["home"]
    run_id = request(home, "start_thread", workflow="gate", prompt="v2")["run_id"]
    wait_for(lambda: thread_statuses(home).get(run_id) == "waiting", 30, what="the thread to ask")
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(console["url"])  # the token starts a session, then leaves the address bar
    assert "token=" not in page.url
    page.wait_for_selector("text=counter")
    page.screenshot(path=str(OUTPUT / "overview-1280.png"), full_page=True)
    page.goto(console["base"] + "/inbox")
    card = page.locator(f"#{run_id}-q1")
    card.wait_for()
    assert "Deploy v2?" in card.inner_text()
    card.locator("select[name='a.env']").select_option(label="staging")
    card.locator("input[name='a.replicas']").fill("2")
    card.locator("input[name='note']").fill("go ahead")
    page.screenshot(path=str(OUTPUT / "inbox-1280.png"), full_page=True)
    thread_page = browser.new_page(viewport={"width": 390, "height": 844})  # a phone
    thread_page.goto(console["url"].replace("/?", f"/threads/{run_id}?"))
    thread_page.wait_for_selector("#thread-status:has-text('waiting')")
    thread_page.screenshot(path=str(OUTPUT / "thread-waiting-390.png"), full_page=True)
    card.locator("button[value=approve]").click()
    page.wait_for_load_state()
    # the other page was not reloaded: it follows the thread through the live updates
    thread_page.wait_for_selector("#thread-status:has-text('completed')", timeout=scaled(20) * 1000)
    assert "deployed to staging" in thread_page.inner_text("main")
    assert "approve by" in thread_page.inner_text("main") and "via nerve ui" in thread_page.inner_text("main")
    thread_page.screenshot(path=str(OUTPUT / "thread-completed-390.png"), full_page=True)
    page.goto(console["base"] + "/inbox")
    page.wait_for_selector("#inbox-empty")
    page.close()
    thread_page.close()


def test_a_senses_chart_draws_with_its_signals(console: dict, browser) -> None:
    wait_for(lambda: len(_http_points(console)) >= 3, 30, what="a few counter signals")
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(console["url"].replace("/?", "/senses/counter?"))
    page.wait_for_selector("#chart canvas")
    assert int(page.get_attribute("#chart", "data-points") or 0) >= 3
    page.screenshot(path=str(OUTPUT / "sense-1280.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=str(OUTPUT / "sense-390.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(console["base"] + "/mesh")  # the reflex graph, drawn
    drawn = page.locator("#mesh").text_content() or ""
    assert "sense · counter" in drawn and "clock · clock" in drawn
    assert page.locator("#mesh line").count() >= 1
    page.screenshot(path=str(OUTPUT / "mesh-1280.png"), full_page=True)
    page.close()


def _http_points(console: dict) -> list:
    from nerve_cli.ops.senses.chart import sense_series

    try:
        return sense_series(console["home"], "counter").points
    except Exception:
        return []


def test_the_console_refuses_no_token_a_wrong_host_and_a_cross_site_post(console: dict, browser) -> None:
    base = console["base"]
    assert _http(base + "/")[0] == 401
    assert _http(base + "/inbox")[0] == 401
    token = console["url"].split("token=")[1]
    assert _http(base + "/", headers={"Host": "evil.example:80", "Authorization": f"Bearer {token}"})[0] == 400
    run_id = request(console["home"], "start_thread", workflow="gate", prompt="v3")["run_id"]
    wait_for(lambda: thread_statuses(console["home"]).get(run_id) == "waiting", 30, what="the thread to ask")
    context = browser.new_context()
    page = context.new_page()
    page.goto(console["url"])
    cookie = "; ".join(f"{c['name']}={c['value']}" for c in context.cookies())
    form = "decision=reject&question=q1&csrf=x".encode()
    cross = _http(f"{base}/threads/{run_id}/answer", form, {"Cookie": cookie, "Origin": "http://evil.example",
                                                           "Content-Type": "application/x-www-form-urlencoded"})
    assert cross[0] == 403 and "cross-site" in cross[1]
    stale = _http(f"{base}/threads/{run_id}/answer", form, {"Cookie": cookie, "Origin": base,
                                                           "Content-Type": "application/x-www-form-urlencoded"})
    assert stale[0] == 403 and "CSRF" in stale[1]
    assert thread_statuses(console["home"])[run_id] == "waiting"  # neither was taken
    context.close()


def test_with_the_engine_stopped_the_console_reads_the_files_and_answers_for_the_next_start(console: dict,
                                                                                           browser) -> None:
    home = console["home"]
    waiting = [r for r, s in thread_statuses(home).items() if s == "waiting"]
    assert waiting
    console["engine"].stop()
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(console["url"])
    page.wait_for_selector("text=engine stopped")
    page.goto(console["base"] + "/inbox")
    card = page.locator(f"#{waiting[0]}-q1")
    card.locator("button[value=reject]").click()
    page.wait_for_load_state()
    wait_for(lambda: thread_statuses(home).get(waiting[0]) == "queued", 20, what="the offline answer")
    page.screenshot(path=str(OUTPUT / "inbox-stopped-1280.png"), full_page=True)
    page.close()


def test_engine_ui_keeps_the_console_beside_a_running_engine(tmp_path: Path) -> None:
    port = free_port()
    home = write_instance(tmp_path / "home", f"engine: {{ui: 127.0.0.1:{port}}}\n", {})
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=0)
        wait_for(lambda: "the console (engine.ui) on http://127.0.0.1:" in engine.output(), 30, what="the console")
        assert _http(f"http://127.0.0.1:{port}/")[0] == 401  # it serves, behind its token
        token = (home / "data" / "ui.token").read_text().strip()
        assert _http(f"http://127.0.0.1:{port}/", headers={"Authorization": f"Bearer {token}"})[0] == 200
        code, _ = engine.stop()
    assert code == 0
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)
        raise AssertionError("the console outlived its engine")
    except urllib.error.URLError:
        pass
