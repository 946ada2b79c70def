"""A kernel crash loses no acknowledged work: every acked emit and every committed signal reaches the log."""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from enginekit import RunningEngine, read_logs, wait_for, write_instance
from eventkit import Emitter

CONFIG = """
engine:
  shutdown_timeout: 1s
  respawn_backoff_first: 50ms
  respawn_backoff_max: 50ms
  failure_backoff_after: 1000
  quarantine_after: 1000
senses:
  echo: {group: a}
  chain: {group: b}
  ticker: {group: b}
reflexes:
  - {sense: echo, on: [load]}
  - {sense: chain, on: [echo]}
  - {sense: ticker, interval: 50ms}
"""
ECHO = "def compute(db, peers, trigger):\n    return [e.payload for e in trigger.events]\n"
CHAIN = "def compute(db, peers, trigger):\n    return len(trigger.events)\n"
TICKER = "def compute(db, peers):\n    return 1\n"


def orphans(home: Path, engine_pid: int) -> list[int]:
    """Workers of this instance that the running engine did not spawn (left by a killed engine, still draining)."""
    import psutil

    mine = {c.pid for c in psutil.Process(engine_pid).children()}
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmd = proc.info["cmdline"] or []
        if "nerve_cli.worker" in cmd and str(home) in cmd and proc.info["pid"] not in mine:
            found.append(proc.info["pid"])
    return found


def signal_ids(home: Path, sense: str) -> list[int]:
    conn = sqlite3.connect((home / "data" / "senses" / f"{sense}.db").resolve().as_uri() + "?mode=ro", uri=True)
    try:
        return [r[0] for r in conn.execute("SELECT id FROM _signals ORDER BY id")]
    finally:
        conn.close()


@pytest.mark.timeout(240)
def test_kernel_killed_10_times_under_emit_load_loses_no_acknowledged_work(home: Path) -> None:
    write_instance(home, CONFIG, {"echo": ECHO, "chain": CHAIN, "ticker": TICKER})
    rng = random.Random(17)
    engines = [RunningEngine(home)]
    engines[0].wait_ready(groups=2)
    stop = threading.Event()
    emitter = Emitter(home)

    def load() -> None:  # steady emits; an emit whose answer never came is simply not counted as acknowledged
        i = 0
        while not stop.is_set():
            try:
                emitter.emit("load", {"i": i})
            except (OSError, ConnectionError, ValueError):
                emitter.close()
                time.sleep(0.01)
            i += 1
            time.sleep(0.001)

    sender = threading.Thread(target=load)
    sender.start()
    try:
        for _ in range(10):
            time.sleep(rng.uniform(0.3, 1.0))
            engines[-1].proc.kill()
            engines[-1].proc.wait(10)
            engines.append(RunningEngine(home))
            engines[-1].wait_ready(groups=2)
        time.sleep(0.5)
        stop.set()
        sender.join(30)
        wait_for(lambda: not orphans(home, engines[-1].proc.pid), 15, what="workers of killed engines to exit")
        code, out = engines[-1].stop()
        assert code == 0, out
    finally:
        stop.set()
        emitter.close()
        for engine in engines:
            engine.__exit__()

    acked = [a["event_id"] for a in emitter.acked if a.get("ok")]
    assert len(acked) > 500
    logged_events = Counter(r["payload"]["event_id"] for r in read_logs(home, "signal", "emit"))
    assert [e for e in acked if e not in logged_events] == []
    assert [e for e, n in logged_events.items() if n > 1] == []

    completes = read_logs(home, "reflex", "run_complete")
    recovered = 0
    for sense in ("echo", "chain", "ticker"):
        committed = signal_ids(home, sense)
        logged = Counter(c["payload"].get("signal_id") for c in completes if c["ref"] == sense)
        assert [s for s in committed if s not in logged] == [], f"{sense}: committed signals with no run_complete"
        assert [s for s, n in logged.items() if s is not None and n > 1] == [], f"{sense}: logged twice"
        recovered += sum(1 for c in completes if c["ref"] == sense and c["payload"].get("recovered"))
    assert len(read_logs(home, "system", "engine_started")) == 11


def emit_rows(home: Path) -> Counter:
    return Counter(r["payload"]["event_id"] for r in read_logs(home, "signal", "emit"))


def test_an_event_stored_by_another_writer_while_the_engine_runs_is_logged_once_across_a_kill(home: Path) -> None:
    # An offline `nerve emit` that found no engine commits #1 while one is starting (it is told nothing); the
    # engine then stores #2. The log holds each once although the kernel is killed before any catch-up.
    from nerve_cli.store.events import store_event

    write_instance(home, "senses: {}\n", {})
    first = RunningEngine(home)
    try:
        first.wait_ready(groups=0)
        store_event(home / "data" / "events.db", "door", {"n": 1})
        emitter = Emitter(home)
        assert emitter.emit("door", {"n": 2})["event_id"] == 2
        emitter.close()
        wait_for(lambda: 2 in emit_rows(home), 30, what="the engine's event to be logged")
        first.proc.kill()
        first.proc.wait(10)
    finally:
        first.__exit__()
    with RunningEngine(home) as second:
        second.wait_ready(groups=0)
        code, out = second.stop()
    assert code == 0, out
    assert emit_rows(home) == {1: 1, 2: 1}


def test_the_ledger_logs_an_event_once_whichever_of_the_engine_and_a_catch_up_comes_first(tmp_path: Path) -> None:
    from nerve_cli.home import Layout
    from nerve_cli.kernel.core.ledger import Ledger
    from nerve_cli.store.events import store_event
    from nerve_cli.store.logs import LogStore
    from nerve_cli.vocab import logrows

    layout = Layout(tmp_path)
    layout.data.mkdir(parents=True)
    logs = LogStore(layout.logs_db)
    ledger = Ledger(layout, logs, logs.write)
    assert ledger.start() == (0, 0)

    def route(event_id: int) -> None:  # what the engine does with an event it stored
        if ledger.routing(event_id):
            logs.write(logrows.emit("door", None, event_id), None, ledger.event_mark(event_id))
            ledger.event_logged(event_id)

    for _ in range(3):
        store_event(layout.events_db, "door", None)
    route(1)
    assert ledger.catch_up_events() == 2  # an offline emit's events_stored reads #3 before the engine routes it
    route(3)  # the engine's own #3: already logged
    for _ in range(3):
        store_event(layout.events_db, "door", None)  # #4 and #5 by another writer, #6 the engine's
    route(6)
    logs.flush()
    logs.close()
    conn = sqlite3.connect(layout.logs_db)
    logged = [r[0] for r in conn.execute(
        "SELECT json_extract(payload, '$.event_id') FROM logs WHERE source = 'signal' AND type = 'emit' ORDER BY id")]
    conn.close()
    assert logged == [1, 2, 3, 4, 5, 6]
