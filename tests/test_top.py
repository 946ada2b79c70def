"""`nerve top`: headless through Textual's Pilot against a real engine, and once in a real terminal (tmux)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from enginekit import RunningEngine, wait_for, write_instance
from enginekit import nerve as nerve_process
from loadclock import IdleClock

from nerve_cli.ops.client import request

CONFIG = """
senses:
  pulse: {group: a}
  boom: {group: a}
reflexes:
  - {sense: pulse, interval: 1h}
  - {sense: boom, interval: 1h}
"""
SENSES = {
    "pulse": "import time\ndef compute(db, peers):\n    return time.time_ns() % 1_000_000_007\n",
    "boom": "def compute(db, peers):\n    raise ValueError('unplugged')\n",
}


def text_of(widget) -> str:
    """What a Static or RichLog shows, as plain text."""
    if hasattr(widget, "lines"):
        return "\n".join(line.text for line in widget.lines)
    return str(widget.render())


def table_rows(table) -> list[list[str]]:
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def until(pilot, condition, timeout: float, what: str):
    """As enginekit.wait_for (idle-machine seconds), letting the app run between polls."""
    clock = IdleClock(timeout)
    while True:
        value = condition()
        if value:
            return value
        if clock.expired():
            raise AssertionError(f"timed out after {timeout}s of idle-machine time waiting for {what}")
        await pilot.pause(0.02)


async def dashboard(pilot, app):
    """The dashboard once its widgets exist: run_test returns before a loaded machine has composed it."""
    from nerve_cli.top.app import Dashboard

    return await until(pilot, lambda: isinstance(app.screen, Dashboard) and app.screen.composed and app.screen,
                       10, "the dashboard's widgets")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return write_instance(tmp_path / "inst", CONFIG, SENSES)


def test_dashboard_shows_the_engine_and_a_new_signal_within_a_second(home: Path) -> None:
    from nerve_cli.top.app import REFRESH_S, NerveTop, SenseScreen

    async def main() -> None:
        app = NerveTop(home)
        async with app.run_test(size=(80, 24)) as pilot:
            senses = (await dashboard(pilot, app)).query_one("#senses")
            await until(pilot, lambda: {r[0] for r in table_rows(senses)} >= {"pulse", "boom"}, 10, "the senses")
            assert "engine pid" in text_of(app.screen.query_one("#headline"))
            assert text_of(app.screen.query_one("#headline")).rstrip().endswith(" · 4 senses · 1 worker")  # pulse, boom and the built-ins nerve-health, nerve-threads
            workers = app.screen.query_one("#workers")
            await until(pilot, lambda: any(r[2] == "ready" for r in table_rows(workers)), 10, "a ready worker")
            events = app.screen.query_one("#events")
            await until(pilot, lambda: "error  boom: unplugged" in text_of(events), 10, "boom's error")

            # within a second: the dashboard reads every REFRESH_S (0.5 s), and the first read that starts
            # after the signal is committed shows it. Checked as that, not as wall time, which a loaded
            # machine stretches (the read itself is what takes longer then)
            assert app.refresh_s == REFRESH_S <= 0.5
            reads: list[tuple[object, float]] = []  # (snapshot, when its read started)
            read = app.source.snapshot

            def timed_read():
                at = time.monotonic()
                snap = read()
                reads.append((snap, at))
                return snap

            app.source.snapshot = timed_read
            answer = await asyncio.to_thread(request, home, "compute", sense="pulse")
            shown = f"signal pulse: {answer['payload']}"
            answered = time.monotonic()
            await until(pilot, lambda: any(snap is app.last and at > answered for snap, at in reads), 10,
                        "a read started after the signal")
            assert shown in text_of(events)
            row = next(r for r in table_rows(senses) if r[0] == "pulse")
            assert row[2] == str(answer["payload"]) and row[3].endswith("s ago")

            # drill into pulse: its chart and its recent signals
            senses.focus()
            senses.move_cursor(row=[r[0] for r in table_rows(senses)].index("pulse"))
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, SenseScreen), 5, "the sense screen")
            chart = text_of(app.screen.query_one("#chart"))
            assert "pulse · signal" in chart and "┌" in chart and "(0 archived, 2 live)" in chart
            assert str(answer["payload"]) in str(table_rows(app.screen.query_one("#recent"))[0])
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, SenseScreen), 5, "back on the dashboard")
            # compute from the dashboard
            before = len(text_of(events).splitlines())
            await pilot.press("c")
            await until(pilot, lambda: len([line for line in text_of(events).splitlines()[before:]
                                             if "signal pulse" in line]) >= 1, 10, "the compute's signal")

    with RunningEngine(home) as engine:
        engine.wait_ready(groups=1)
        wait_for(lambda: engine.status()["senses"]["boom"]["errors"] >= 1 and
                 engine.status()["senses"]["pulse"]["runs"] >= 1, 10, what="boom to fail once, pulse to run")
        asyncio.run(main())
        code, output = engine.stop()
    assert code == 0, output


def finished_thread(home: Path) -> str:
    """One real thread of a two-role workflow, run to its end by the workflow manager."""
    from workflow_support import PINGPONG, ended, manager
    from workflow_support import wait_for as async_wait_for

    from nerve_cli.config.load import load_config

    (home / "workflows").mkdir(exist_ok=True)
    (home / "workflows" / "ping.py").write_text(PINGPONG)
    (home / "nerve.yaml").write_text((home / "nerve.yaml").read_text() + "workflows:\n  ping: {}\n")

    async def run() -> str:
        mgr, logs, _ = manager(home, load_config(home))
        run_id = mgr.launch("ping", "id=q rounds=2", None, {})["run_id"]
        await async_wait_for(lambda: ended(logs, run_id))
        await mgr.stop(1)
        logs.close()
        return run_id

    return asyncio.run(run())


def test_dashboard_reads_the_files_when_the_engine_is_stopped(home: Path) -> None:
    from nerve_cli.top.app import NerveTop, ThreadScreen

    run_id = finished_thread(home)

    with RunningEngine(home) as engine:
        engine.wait_ready(groups=1)
        wait_for(lambda: engine.status()["senses"]["pulse"]["runs"] >= 1 and
                 engine.status()["senses"]["boom"]["errors"] >= 1, 10, what="first computes")
        assert engine.stop()[0] == 0

    async def main() -> None:
        app = NerveTop(home)
        async with app.run_test(size=(80, 24)) as pilot:
            headline = (await dashboard(pilot, app)).query_one("#headline")
            await until(pilot, lambda: "engine stopped: read-only" in text_of(headline), 10, "the stopped headline")
            rows = {r[0]: r for r in table_rows(app.screen.query_one("#senses"))}
            assert set(rows) == {"pulse", "boom"} and rows["boom"][5] == "1" and rows["pulse"][2] != "-"
            # no live state is claimed: the sense is stopped, and when it last ran shows beside it
            assert rows["pulse"][1] == rows["boom"][1] == "stopped" and rows["pulse"][3] != "-"
            assert "signal pulse" in text_of(app.screen.query_one("#events"))
            await pilot.press("c")  # nothing to compute with: it says so instead of failing
            await until(pilot, lambda: any("engine is stopped" in str(n.message) for n in app._notifications), 5,
                        "the read-only notice")
            # a thread opens as its conversation
            threads = app.screen.query_one("#threads")
            assert table_rows(threads)[0][:3] == [run_id, "ping", "completed"]
            threads.focus()
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, ThreadScreen), 5, "the thread screen")
            transcript = text_of(app.screen.query_one("#transcript"))
            assert "#1 a" in transcript and "q round 1" in transcript and "#2 b" in transcript

    asyncio.run(main())


SCROLLBAR_GLYPHS = "▁▂▃▄▅▆▇█▉▊▋▌▍▎▏"


def test_top_starts_and_quits_cleanly_in_a_real_80x24_terminal(home: Path, tmp_path: Path) -> None:
    (home / "data" / "senses").mkdir(parents=True)
    conn = sqlite3.connect(home / "data" / "senses" / "pulse.db")  # twenty signals, each a long line
    conn.execute("CREATE TABLE _signals (id INTEGER PRIMARY KEY AUTOINCREMENT, ts INTEGER NOT NULL, payload TEXT)")
    conn.executemany("INSERT INTO _signals (ts, payload) VALUES (?, ?)",
                     [(1_796_000_000_000 + i, json.dumps("x" * 90)) for i in range(20)])
    conn.commit()
    conn.close()
    tmux = shutil.which("tmux")
    assert tmux, "tmux is needed for this test: `make install` installs it (apt-get install tmux)"
    session = f"nerve-top-{os.getpid()}"
    done = tmp_path / "exit-code"
    # Textual draws on stderr: leave both streams on the terminal; a traceback would show on screen
    command = f"{sys.executable} -m nerve_cli top --home {home}; echo $? > {done}; sleep 60"
    env = {**os.environ, "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    subprocess.run([tmux, "-L", session, "new-session", "-d", "-s", session, "-x", "80", "-y", "24", command],
                   check=True, env=env)
    try:
        def screen() -> str:
            return subprocess.run([tmux, "-L", session, "capture-pane", "-p", "-t", session], capture_output=True,
                                  text=True).stdout

        wait_for(lambda: "engine stopped: read-only" in screen() and "signal pulse" in screen(), 30, 0.1,
                 what="the dashboard on screen")
        lines = screen().splitlines()
        assert len(lines) == 24 and max(len(line) for line in lines) <= 80
        # more events than the pane holds, lines as wide as it: no scrollbar glyphs beside the data
        assert not set(screen().replace("▏^p palette", "")) & set(SCROLLBAR_GLYPHS), screen()
        assert "q Quit" in screen()
        subprocess.run([tmux, "-L", session, "send-keys", "-t", session, "q"], check=True)
        wait_for(done.exists, 15, 0.1, what="nerve top to exit")
        assert done.read_text().strip() == "0"
        after = screen()
        assert "Traceback" not in after and "pulse" not in after  # the terminal is given back, app gone
    finally:
        subprocess.run([tmux, "-L", session, "kill-server"], capture_output=True)


GATED = """
from nerve_cli.sdk import END, PERSON, RoleResult, WorkflowDefinition, ask_person

async def writer(messages):
    return RoleResult("a draft", {})

async def critic(messages):
    return ask_person("Publish the draft?")

async def publisher(messages):
    return RoleResult(f"published: {messages[-1].content}", {})

def moderator(messages):
    last = messages[-1]
    if last.role == "__start__":
        return "writer"
    if last.role == "writer":
        return "critic"
    if last.role == PERSON:
        return "publisher" if last.meta["approved"] else END
    return END

workflow = WorkflowDefinition(roles={"writer": writer, "critic": critic, "publisher": publisher}, moderator=moderator)
"""


def test_approving_a_waiting_thread_from_the_dashboard_resumes_it(home: Path) -> None:
    from textual.widgets import Static

    from nerve_cli.ops.workflows.threads import thread_detail
    from nerve_cli.top.app import ConfirmScreen, NerveTop, ThreadScreen

    (home / "workflows").mkdir(exist_ok=True)
    (home / "workflows" / "gated.py").write_text(GATED)
    (home / "nerve.yaml").write_text((home / "nerve.yaml").read_text() + "workflows:\n  gated: {}\n")
    logs_db = home / "data" / "logs.db"

    def status(run_id: str) -> str:
        return thread_detail(logs_db, run_id)["status"]

    async def main(first: str, second: str) -> None:
        app = NerveTop(home)
        async with app.run_test(size=(80, 24)) as pilot:
            threads = (await dashboard(pilot, app)).query_one("#threads")
            await until(pilot, lambda: [r[2] for r in table_rows(threads)][:2] == ["waiting ✋", "waiting ✋"], 10,
                        "both threads shown as waiting for a person")
            # from the thread's own screen: its question, then approve
            threads.focus()
            threads.move_cursor(row=[r[0] for r in table_rows(threads)].index(first))
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, ThreadScreen), 5, "the thread screen")
            assert "waiting for a person: Publish the draft?" in text_of(app.screen.query_one("#transcript"))
            await pilot.press("a")  # the question is shown first, and nothing is sent until it is confirmed
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 5, "the confirmation")
            assert "q1: Publish the draft?" in " ".join(text_of(w) for w in app.screen.query(Static))
            await pilot.press("y")
            await until(pilot, lambda: status(first) == "completed", 20, f"{first} to resume and complete")
            await until(pilot, lambda: "published: approved" in text_of(app.screen.query_one("#transcript")),
                        5, "the screen to show the resumed rounds")
            # a person's answer has no round: it shows who answered, never "#None"
            transcript = text_of(app.screen.query_one("#transcript"))
            assert "person (approve)" in transcript and "#None" not in transcript, transcript
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, ThreadScreen), 5, "back on the dashboard")
            # from the dashboard: x with no thread selected answers nothing
            app.screen.query_one("#senses").focus()
            await pilot.press("x")
            await until(pilot, lambda: any("select a waiting thread first" in str(n.message)
                                           for n in app._notifications), 5, "the notice that none is selected")
            assert status(second) == "waiting"
            # x on the selected one, refused at the confirmation: still waiting; then confirmed
            threads = app.screen.query_one("#threads")
            threads.focus()
            threads.move_cursor(row=[r[0] for r in table_rows(threads)].index(second))
            await pilot.press("x")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 5, "the confirmation")
            await pilot.press("n")
            await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen), 5, "back on the dashboard")
            assert status(second) == "waiting"
            await pilot.press("x")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 5, "the confirmation again")
            await pilot.press("y")
            await until(pilot, lambda: status(second) == "completed", 20, f"{second} to end on the rejection")
            await until(pilot, lambda: {r[0]: r[2] for r in table_rows(app.screen.query_one("#threads"))}
                        == {first: "completed", second: "completed"}, 5, "the table to follow")

    with RunningEngine(home) as engine:
        engine.wait_ready(groups=1)
        first = request(home, "start_thread", workflow="gated", prompt="one")["run_id"]
        second = request(home, "start_thread", workflow="gated", prompt="two")["run_id"]
        wait_for(lambda: logs_db.exists() and status(first) == status(second) == "waiting", 20,
                 what="both threads to wait for a person")
        asyncio.run(main(first, second))
        code, output = engine.stop()
    assert code == 0, output
    roles = [m["role"] for m in thread_detail(logs_db, first)["messages"]]
    assert roles == ["__start__", "writer", "critic", "__person__", "publisher"]
    answer = thread_detail(logs_db, second)["messages"][-1]
    assert (answer["role"], answer["meta"]["decision"], answer["meta"]["via"]) == ("__person__", "reject", "nerve top")

WAITS_FOR_CI = """
from nerve_cli.sdk import END, RoleResult, WorkflowDefinition, wait_for_event

async def opener(messages):
    return wait_for_event("ci.done", match={"pr": 7})

async def closer(messages):
    return RoleResult("done", {})

workflow = WorkflowDefinition(roles={"opener": opener, "closer": closer},
                              moderator=lambda m: "opener" if len(m) == 1 else "closer" if len(m) == 3 else END)
"""


def test_a_stopped_dashboard_moves_focus_with_tab_lists_threads_newest_first_and_answers_offline(home: Path) -> None:
    """Tab goes from table to table as the keys say; a new thread shows above the older ones; a waiting
    thread is answered with the engine stopped, as `nerve thread approve` does offline."""
    from nerve_cli.ops.workflows.threads import thread_detail
    from nerve_cli.top.app import ConfirmScreen, NerveTop

    (home / "workflows").mkdir(exist_ok=True)
    (home / "workflows" / "gated.py").write_text(GATED)
    (home / "workflows" / "ci.py").write_text(WAITS_FOR_CI)
    (home / "nerve.yaml").write_text((home / "nerve.yaml").read_text() + "workflows:\n  gated: {}\n  ci: {}\n")
    logs_db = home / "data" / "logs.db"
    first = nerve_process("workflow", "run", "gated", "--prompt", "one", home=home)
    assert first.returncode == 5, first.stderr  # it waits for a person

    async def main() -> None:
        app = NerveTop(home)
        async with app.run_test(size=(80, 24)) as pilot:
            threads = (await dashboard(pilot, app)).query_one("#threads")
            await until(pilot, lambda: [r[0] for r in table_rows(threads)] == ["run-1"], 10, "run-1 listed")
            assert app.focused is app.screen.query_one("#senses")
            await pilot.press("tab")
            assert app.focused is app.screen.query_one("#workers")
            await pilot.press("tab")
            assert app.focused is threads
            await pilot.press("shift+tab")
            assert app.focused is app.screen.query_one("#workers")
            second = await asyncio.to_thread(nerve_process, "workflow", "run", "gated", "--prompt", "two", home=home)
            assert second.returncode == 5, second.stderr
            await until(pilot, lambda: [r[0] for r in table_rows(threads)] == ["run-2", "run-1"], 10,
                        "the new thread above the older one")
            third = await asyncio.to_thread(nerve_process, "workflow", "run", "ci", "--prompt", "pr 7", home=home)
            assert third.returncode == 5, third.stderr  # it waits for an event
            await until(pilot, lambda: [(r[0], r[2]) for r in table_rows(threads)] == [
                ("run-3", "waiting ⏸"), ("run-2", "waiting ✋"), ("run-1", "waiting ✋")], 10, "what each waits for")
            await pilot.press("a")  # nothing selected in the threads table: nothing is answered
            await until(pilot, lambda: any("select a waiting thread first" in str(n.message)
                                           for n in app._notifications), 5, "the notice that none is selected")
            await pilot.press("tab")
            assert app.focused is threads
            threads.move_cursor(row=1)  # run-2, written for the next start once confirmed
            await pilot.press("a")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 5, "the confirmation")
            await pilot.press("y")
            try:
                await until(pilot, lambda: thread_detail(logs_db, "run-2")["status"] == "queued", 10, "the answer")
            except AssertionError as exc:  # seen once under load: say what the dashboard said
                raise AssertionError(f"{exc}; focused {app.focused}; rows {table_rows(threads)}; notices "
                                     f"{[str(n.message) for n in app._notifications]}") from None
            await until(pilot, lambda: any("next `nerve run`" in str(n.message) for n in app._notifications), 5,
                        "the notice that it resumes at the next start")
            threads.focus()
            threads.move_cursor(row=0)  # run-3: nobody can answer a wait for an event
            await pilot.press("x")
            await until(pilot, lambda: any("run-3 waits for ci.done where pr = 7, not for a person" in str(n.message)
                                           for n in app._notifications), 5, "the notice that run-3 waits for an event")
            assert thread_detail(logs_db, "run-3")["status"] == "waiting"

    asyncio.run(main())


def test_a_snapshot_read_before_the_dashboard_has_its_widgets_is_shown_once_it_has_them(home: Path) -> None:
    # On a loaded machine the first read can come back before the dashboard has composed its widgets: it
    # crashed the app (NoMatches '#headline'); now the dashboard shows that snapshot as it mounts.
    from nerve_cli.top.app import NerveTop

    class Early(NerveTop):
        def on_mount(self) -> None:
            super().on_mount()
            self._show(self.source.snapshot())  # the Dashboard is pushed, not yet composed

    async def main() -> None:
        app = Early(home)
        async with app.run_test(size=(80, 24)) as pilot:
            # the screen is app.screen as soon as it is pushed, its widgets a moment later (a loaded machine
            # shows the gap): wait for them, then for the snapshot read before them
            await dashboard(pilot, app)
            await until(pilot, lambda: "engine stopped" in text_of(app.screen.query_one("#headline")), 5,
                        "the early snapshot shown")

    asyncio.run(main())


def test_a_cell_that_grows_is_shown_whole_and_an_error_names_its_subject_once(home: Path) -> None:
    """"in 7s" then "in 909ms" in the same column was cut to "in 909"; a message that starts with its sense's
    name ("sense x: workflow directive refused") was shown as "x: sense x: ..."."""
    from textual.app import App
    from textual.widgets import DataTable

    from nerve_cli.top.app import _fill, about

    class One(App):
        def compose(self):
            yield DataTable(id="t")

    async def main() -> None:
        app = One()
        async with app.run_test(size=(80, 10)) as pilot:
            table = app.query_one("#t", DataTable)
            table.add_columns("sense", "next")
            _fill(table, [("pulse", ("pulse", "in 7s"))])
            await pilot.pause()
            _fill(table, [("pulse", ("pulse", "in 909ms"))])
            await pilot.pause()
            assert list(table.columns.values())[1].content_width >= len("in 909ms")

    asyncio.run(main())
    assert about("looper", "sense looper: workflow directive refused: no workflow nope") == \
        "sense looper: workflow directive refused: no workflow nope"
    assert about("notes", "workflow notes failed to load: SyntaxError") == "workflow notes failed to load: SyntaxError"
    assert about("boom", "ValueError: unplugged") == "boom: ValueError: unplugged"
