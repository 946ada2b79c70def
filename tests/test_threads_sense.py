"""The built-in nerve-threads sense: every thread transition is a signal any sense can listen to, exactly once."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import textwrap
from pathlib import Path

from conftest import cli
from enginekit import RunningEngine, read_logs, sense_rows, thread_statuses, wait_for, write_instance

from nerve_cli.ops.client import request

SEEN = textwrap.dedent('''
    from nerve_cli.sdk import table

    @table(pk="n")
    class Seen:
        n: int
        signal_id: int
        run_id: str
        transition: str
''')
WATCH = textwrap.dedent('''
    import time
    from nerve_cli.sdk import KEEP

    def compute(db, peers, trigger):
        for event in trigger.events:
            db.execute("INSERT INTO seen (signal_id, run_id, transition) VALUES (?, ?, ?)",
                       [event.id, event.payload["run_id"], event.payload["transition"]])
        time.sleep(0.05)  # a compute takes a while: the kill below finds one in flight
        return KEEP
''')
QUICK = textwrap.dedent('''
    from nerve_cli.sdk import END, RoleResult, WorkflowDefinition

    async def say(messages):
        return RoleResult("done", {})

    workflow = WorkflowDefinition(roles={"say": say}, moderator=lambda m: "say" if len(m) == 1 else END)
''')
THREADS = 50


def _seen(home: Path) -> list[tuple[int, str, str]]:
    return sense_rows(home, "watch", "SELECT signal_id, run_id, transition FROM seen ORDER BY n")


def _transitions(home: Path, run_ids: set[str]) -> list[tuple[str, str]]:
    """Every status row of these threads in the log, as (run_id, transition), in log order."""
    out = []
    for row in read_logs(home, "workflow"):
        if row["ref"] in run_ids and row["type"] != "message":
            resumed = row["type"] == "started" and (row["payload"] or {}).get("resumed")
            out.append((row["ref"], "resumed" if resumed else row["type"]))
    return out


def test_a_listener_gets_every_transition_of_50_threads_exactly_once_across_a_kill(home: Path) -> None:
    write_instance(home, """
        senses:
          watch: {group: watchers}
        reflexes:
          - {sense: watch, on: [nerve-threads]}
        workflows:
          quick: {concurrency: 8}
    """, {"watch": WATCH}, {"watch": SEEN})
    from nerve_cli.schema.diff import generate_migration

    assert generate_migration(home / "senses" / "watch") is not None
    (home / "workflows").mkdir(exist_ok=True)
    (home / "workflows" / "quick.py").write_text(QUICK)
    with RunningEngine(home) as engine:
        engine.wait_ready()
        runs = [request(home, "start_thread", workflow="quick", prompt=f"t{i}")["run_id"] for i in range(THREADS)]
        wait_for(lambda: len(_seen(home)) > 0, 30, what="the listener's first compute")
        worker = next(w for w in engine.status()["workers"] if w["group"] == "watchers")
        os.kill(worker["pid"], signal.SIGKILL)  # while threads still change and a compute may be in flight
        wait_for(lambda: all(s == "completed" for s in thread_statuses(home).values())
                 and len(thread_statuses(home)) == THREADS, 60, what="all threads to complete")
        expected = _transitions(home, set(runs))
        assert len(expected) >= 3 * THREADS  # queued, started, completed at least
        wait_for(lambda: len(_seen(home)) >= len(expected), 60, what="the listener to catch up")
        shown = json.loads(cli("sense", "show", "nerve-threads", "--json", "-n", "3").output)
        health = cli("sense", "show", "nerve-health", "--json")
        asked = json.loads(cli("sense", "compute", "nerve-threads", "--json").output)  # the engine computes it
        engine.stop()

    seen = _seen(home)
    assert len({s[0] for s in seen}) == len(seen)  # no signal twice
    assert sorted((run, transition) for _, run, transition in seen) == sorted(expected)  # every one, once
    assert worker["pid"] in [w["payload"]["pid"] for w in read_logs(home, "system", "worker_exited", "watchers")]
    assert shown["config"]["group"] == "kernel" and shown["signal_count"] == len(expected)
    assert shown["signals"][-1]["payload"]["transition"] == "completed"
    assert {"run_id", "workflow", "status", "transition", "at_ms", "rounds"} <= set(shown["signals"][-1]["payload"])
    assert health.exit_code == 0 and json.loads(health.output)["name"] == "nerve-health"
    assert (asked["sense"], asked["via"], asked["outcome"]) == ("nerve-threads", "engine", "silent")  # nothing new

    # a listener of the built-in sense replays it as the sense it is (its _signals), never as a channel
    dry = json.loads(cli("sense", "replay", "watch", "--source", "nerve-threads", "--from", "0", "--dry-run",
                         "--json").output)
    assert (dry["kind"], dry["cursor_after"], dry["events"], dry["dry_run"]) == ("sense", 0, len(expected), True)
    moved = json.loads(cli("sense", "replay", "watch", "--source", "nerve-threads", "--from", "2", "--json").output)
    assert (moved["kind"], moved["cursor_after"], moved["events"]) == ("sense", 1, len(expected) - 1)
    from nerve_cli.store.events import identity_of

    conn = sqlite3.connect(home / "data" / "senses" / "watch.db")
    try:
        (identity,) = conn.execute("SELECT identity FROM _nerve_cursors WHERE source = 'nerve-threads'").fetchone()
    finally:
        conn.close()
    assert identity is not None and identity == identity_of(home / "data", "sense", "nerve-threads")


def test_the_feed_starts_at_the_logs_end_and_signals_each_transition_once(tmp_path: Path) -> None:
    from nerve_cli.kernel.control.threads_sense import ThreadsStore
    from nerve_cli.store.logs import LogStore
    from nerve_cli.vocab import logrows
    from nerve_cli.vocab.states import ThreadStatus

    logs = LogStore(tmp_path / "logs.db")
    logs.write(logrows.thread_status("run-1", "w", ThreadStatus.QUEUED, prompt="old"))
    logs.flush()
    store = ThreadsStore(tmp_path / "nerve-threads.db", tmp_path / "logs.db")  # history before it is not signalled
    assert store.feed() == ([], False)
    logs.write(logrows.thread_status("run-2", "w", ThreadStatus.STARTED, resumed=True, rounds=2))
    logs.write(logrows.thread_status("run-2", "w", ThreadStatus.WAITING, question="ok?", rounds=2))
    logs.flush()
    signals, more = store.feed()
    assert not more and [(p["run_id"], p["transition"], p["status"], p.get("question")) for _, p in signals] == [
        ("run-2", "resumed", "started", None), ("run-2", "waiting", "waiting", "ok?")]
    assert store.feed() == ([], False)
    store.close()
    again = ThreadsStore(tmp_path / "nerve-threads.db", tmp_path / "logs.db")  # a restart keeps the watermark
    assert again.feed() == ([], False)
    again.close()
    logs.close()


def test_the_built_in_senses_are_shown_and_their_computes_explained_without_an_engine(home: Path) -> None:
    """`sense show` works on both built-ins before any engine ran; a one-off compute or dry run of one (it has no
    code of its own) says the engine computes it and how to ask it, never 'create one with sense new'."""
    write_instance(home, "senses: {}\n", {})
    for name, when in (("nerve-health", "every 1m"), ("nerve-threads", "after every change of a thread's status")):
        shown = cli("sense", "show", name)
        assert shown.exit_code == 0 and shown.output.startswith(name), shown.output
        assert "no database yet: it has not run (the engine writes it: `nerve run`)" in shown.output
        assert json.loads(cli("sense", "show", name, "--json").output)["config"]["group"] == "kernel"
        for args in (("sense", "compute", name), ("sense", "compute", name, "--dry-run")):
            refused = cli(*args)
            assert refused.exit_code == 1, refused.output
            assert f"`{name}` is built into the engine, which computes it {when}" in refused.output
            assert f"`nerve sense compute {name}` asks it" in refused.output and "sense new" not in refused.output
