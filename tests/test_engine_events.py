"""Events that carry data, on the real engine: every trigger reaches its compute, exactly once."""

from __future__ import annotations

import json
import random
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from conftest import cli
from enginekit import RunningEngine, completes, errors, nerve, read_logs, wait_for, write_instance, write_sense
from eventkit import STORE_SCHEMA, Emitter, events_db, got, kill_workers, store_sense

from nerve_cli.schema.migrate import generate_migration
from nerve_cli.wire.protocol import MAX_PAYLOAD

# Kills and retries must not be slowed by the guard rails meant for real failures.
FAST_RECOVERY = """
engine:
  respawn_backoff_first: 50ms
  respawn_backoff_max: 50ms
  failure_backoff_after: 1000
  quarantine_after: 1000
"""


def store_instance(home: Path, extra_config: str = "", *, slow: float = 0.0, channel: str = "burst",
                   reflex: str = "") -> Path:
    write_instance(home, f"""
        {FAST_RECOVERY}
        senses:
          store: {{group: listeners}}
        reflexes:
          - {{sense: store, on: [{channel}]{reflex}}}
        {extra_config}
    """.replace("\n        ", "\n"), {})
    write_sense(home, "store", store_sense(slow), STORE_SCHEMA)
    generate_migration(home / "senses" / "store")
    return home


def payloads(home: Path) -> list:
    return [p for _, _, p in got(home, "store")]


def test_a_burst_to_a_slow_listener_is_stored_exactly_once_in_order(home: Path) -> None:
    store_instance(home, slow=0.02)
    with RunningEngine(home) as engine:
        engine.wait_ready()
        emitter = Emitter(home)
        for i in range(1000):
            answer = emitter.emit("burst", {"i": i})
            assert answer["ok"] and answer["event_id"] == i + 1, answer
        emitter.close()
        wait_for(lambda: len(got(home, "store")) >= 1000, 30, what="the listener to store 1,000 events")
        code, out = engine.stop()
    assert code == 0, out
    assert payloads(home) == [{"i": i} for i in range(1000)]
    runs = [c["payload"] for c in completes(home, "store")]
    assert sum(r.get("events", 0) for r in runs) == 1000
    assert len(runs) < 1000  # a slow listener gets the burst in batches, not one compute per event


@pytest.mark.timeout(120)
def test_listener_worker_killed_20_times_during_the_burst_loses_and_repeats_nothing(home: Path) -> None:
    store_instance(home, slow=0.005)
    rng = random.Random(11)
    with RunningEngine(home) as engine:
        engine.wait_ready()
        emitter = Emitter(home)
        sent = threading.Event()

        def burst() -> None:
            for i in range(1000):
                assert emitter.emit("burst", {"i": i})["ok"]
                time.sleep(0.008)  # spread over seconds, so the kills land during the burst
            sent.set()

        sender = threading.Thread(target=burst)
        sender.start()
        kill_workers(engine, "listeners", 20, rng)
        sender.join(60)
        assert sent.is_set()
        emitter.close()
        wait_for(lambda: len(got(home, "store")) >= 1000, 30, what="the listener to catch up")
        code, out = engine.stop()
    assert code == 0, out
    assert payloads(home) == [{"i": i} for i in range(1000)]
    assert len([e for e in read_logs(home, "system", "worker_exited") if e["ref"] == "listeners"]) >= 20


@pytest.mark.timeout(180)
def test_kernel_killed_5_times_mid_burst_loses_and_repeats_nothing(home: Path) -> None:
    store_instance(home, slow=0.002)
    rng = random.Random(5)
    engines = [RunningEngine(home)]
    engines[0].wait_ready()
    done = threading.Event()

    def killer() -> None:  # kill -9 the kernel at random moments while the burst goes on, and restart it
        for _ in range(5):
            time.sleep(rng.uniform(0.2, 0.8))
            if done.is_set():
                return
            engines[-1].proc.kill()
            engines[-1].proc.wait(10)
            engines.append(RunningEngine(home))
            engines[-1].wait_ready()

    thread = threading.Thread(target=killer)
    thread.start()
    emitter = Emitter(home)
    try:
        for i in range(1000):
            # the same key after a lost answer: stored once, whatever happened to the first try
            answer = emitter.emit("burst", {"i": i}, key=f"e{i}", retry_for=30)
            assert answer["ok"], answer
            time.sleep(0.003)
        thread.join(60)
        done.set()
        wait_for(lambda: len(got(home, "store")) >= 1000, 60, what="the listener to catch up")
        code, out = engines[-1].stop()
        assert code == 0, out
    finally:
        done.set()
        emitter.close()
        for engine in engines:
            engine.__exit__()
    assert len(engines) == 6, "the burst ended before five kills"
    assert payloads(home) == [{"i": i} for i in range(1000)]
    assert [k for *_, k in events_db(home)] == [f"e{i}" for i in range(1000)]
    assert len(read_logs(home, "system", "engine_started")) == 6


def test_a_raising_compute_gets_the_event_again_and_consumes_it_once_fixed(home: Path) -> None:
    store_instance(home)
    write_instance(home, """
        engine:
          failure_backoff_after: 2
          failure_backoff_first: 200ms
          failure_backoff_max: 200ms
        senses:
          store: {group: listeners}
        reflexes:
          - {sense: store, on: [burst]}
    """, {})
    code = store_sense().replace("def compute(db, peers, trigger):\n",
                                 "def compute(db, peers, trigger):\n"
                                 "    if any(e.payload == 500 for e in trigger.events):\n"
                                 "        raise ValueError('cannot take event 500')\n")
    (home / "senses" / "store" / "sense.py").write_text(code)
    with RunningEngine(home) as engine:
        engine.wait_ready()
        emitter = Emitter(home)
        for i in range(1000):
            assert emitter.emit("burst", i)["ok"]
        emitter.close()
        wait_for(lambda: len(errors(home, "store")) >= 3, 20, what="event 500 to fail more than once")
        stuck = payloads(home)  # batches before the one holding 500 committed; nothing after it was skipped
        assert stuck == list(range(len(stuck))) and len(stuck) <= 500
        (home / "senses" / "store" / "sense.py").write_text(store_sense())  # fixed; hot reload picks it up
        wait_for(lambda: len(got(home, "store")) >= 1000, 30, what="the fixed code to consume the rest")
        code, out = engine.stop()
    assert code == 0, out
    assert payloads(home) == list(range(1000))
    assert all("cannot take event 500" in e["payload"]["message"] for e in errors(home, "store"))


def test_a_sense_on_another_sense_receives_its_signal_payloads(home: Path) -> None:
    write_instance(home, """
        senses:
          counter: {group: a}
          store: {group: b}
        reflexes:
          - {sense: counter, on: [tick]}
          - {sense: store, on: [counter]}
    """, {"counter": "def compute(db, peers, trigger):\n"
                     "    return {'tick': trigger.events[-1].payload, 'n': len(trigger.events)}\n"})
    write_sense(home, "store", store_sense(), STORE_SCHEMA)
    generate_migration(home / "senses" / "store")
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=2)
        emitter = Emitter(home)
        for i in range(5):
            assert emitter.emit("tick", i)["ok"]
            wait_for(lambda: len(got(home, "store")) > i, 10, what=f"store to receive counter's signal {i}")
        emitter.close()
        code, out = engine.stop()
    assert code == 0, out
    assert payloads(home) == [{"tick": i, "n": 1} for i in range(5)]


def test_emit_with_the_engine_stopped_is_delivered_at_the_next_start(home: Path) -> None:
    store_instance(home)
    result = nerve("emit", "burst", '{"id": 7}', home=home)
    assert result.returncode == 0, result.stderr
    assert "no engine is running" in result.stdout and "delivered to store when the engine starts" in result.stdout
    piped = nerve("emit", "burst", "-", "--json", home=home, stdin='{"id": 8}')
    assert json.loads(piped.stdout)["delivered"] == "at next start"
    assert got(home, "store") == []
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: len(got(home, "store")) == 2, 15, what="the stored events to be delivered")
        code, out = engine.stop()
    assert code == 0, out
    assert payloads(home) == [{"id": 7}, {"id": 8}]
    logged = read_logs(home, "signal", "emit", "burst")
    assert [(r["payload"]["event_id"], r["payload"]["payload"]) for r in logged] == [(1, {"id": 7}), (2, {"id": 8})]
    assert completes(home, "store")[0]["payload"]["reason"] == "backlog"


def test_no_compute_runs_empty_for_a_backlog_another_compute_already_read(home: Path) -> None:
    """At a worker's start the kernel looks for each listener's backlog off the loop; the compute started
    meanwhile (a signal routed while the worker was starting) read it, and the look's answer still asked for
    one more compute, which ran empty (`backlog`, 0 events). Here a signal waits for the listener's worker,
    which starts after its source's (it sleeps as it loads)."""
    write_instance(home, f"""
        {FAST_RECOVERY}
        senses:
          src: {{group: sources}}
          store: {{group: listeners}}
        reflexes:
          - {{sense: src, interval: 1h}}
          - {{sense: store, on: [src]}}
    """.replace("\n        ", "\n"), {"src": "def compute(db, peers):\n    return 1\n"})
    write_sense(home, "store", store_sense(0.2).replace("import json, time", "import json, time\ntime.sleep(0.3)"),
                STORE_SCHEMA)
    generate_migration(home / "senses" / "store")
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: got(home, "store"), 30, what="src's signal to reach the listener")
        time.sleep(1.0)  # room for a spurious compute to run
        code, out = engine.stop()
    assert code == 0, out
    empty = [c["payload"] for c in completes(home, "store") if not c["payload"].get("events")]
    assert empty == [], f"computes that received nothing: {empty}"


@pytest.mark.parametrize("running", [True, False], ids=["engine", "no-engine"])
def test_an_oversized_or_non_json_payload_is_refused_and_nothing_is_stored(home: Path, running: bool) -> None:
    store_instance(home)
    big = json.dumps({"blob": "x" * MAX_PAYLOAD})
    engine = RunningEngine(home) if running else None
    try:
        if engine:
            engine.wait_ready()
        too_big = nerve("emit", "burst", "-", home=home, stdin=big)
        assert too_big.returncode == 2 and "the payload read from stdin is 15.9 MiB of JSON" in too_big.stderr, too_big.stderr
        not_json = nerve("emit", "burst", "{id: 7", home=home)
        assert not_json.returncode == 2 and "is not valid JSON" in not_json.stderr
        empty = nerve("emit", "burst", "-", home=home, stdin="")
        assert empty.returncode == 2 and "stdin was empty" in empty.stderr
        if engine:  # the socket applies the same limit to a client that skips the CLI
            answer = Emitter(home).emit("burst", {"blob": "x" * MAX_PAYLOAD})
            assert not answer["ok"] and "at most 16,711,680 bytes" in answer["error"], answer
    finally:
        if engine:
            engine.stop()
    assert events_db(home) == []
    assert read_logs(home, "signal", "emit") == []


@pytest.mark.parametrize("running", [True, False], ids=["engine", "no-engine"])
def test_payload_size_is_counted_once_as_stored_json_on_both_sides(home: Path, running: bool) -> None:
    """A 6 MiB non-ASCII payload is 18 MB once escaped as \\uXXXX: it must still be sent, stored and answered."""
    store_instance(home)
    fits = {"text": "\U0001F600" * (6 * 2**20 // 4)}
    over = {"text": "\u00e9" * ((MAX_PAYLOAD - 12) // 2) + "ab"}  # one byte past the limit as compact UTF-8 JSON
    assert len(json.dumps(over, ensure_ascii=False, separators=(",", ":")).encode()) == MAX_PAYLOAD + 1
    engine = RunningEngine(home) if running else None
    try:
        if engine:
            engine.wait_ready()
        sent = nerve("emit", "burst", "-", "--json", home=home, stdin=json.dumps(fits, indent=2), timeout=60)
        assert sent.returncode == 0, sent.stdout[-500:] + sent.stderr[-500:]
        assert json.loads(sent.stdout)["event_id"] == 1
        refused = nerve("emit", "burst", "-", "--json", home=home, stdin=json.dumps(over), timeout=60)
        error = json.loads(refused.stdout)["error"]
        assert refused.returncode == 2 and f"({MAX_PAYLOAD + 1:,} bytes)" in error["message"], refused.stdout[-500:]
        if engine:  # the socket counts the same bytes for a client that skips the CLI
            line = json.dumps({"op": "emit", "channel": "burst", "payload": over}, ensure_ascii=False)
            answer = Emitter(home).send_line(line.encode() + b"\n")
            assert not answer["ok"] and f"({MAX_PAYLOAD + 1:,} bytes)" in answer["error"], str(answer)[:300]
            wait_for(lambda: payloads(home), 30, what="the listener to store the event")
            assert payloads(home) == [fits]
    finally:
        if engine:
            engine.stop()
    assert [(i, json.loads(p)) for i, _, p, _ in events_db(home)] == [(1, fits)]


def test_a_request_of_megabytes_is_decoded_off_the_loop_while_intervals_keep_their_time(home: Path) -> None:
    """An emit near the payload limit, of small objects: decoding it and checking its depth takes a while,
    and an interval sense keeps starting meanwhile, where it stopped for seconds when the loop did that work."""
    write_instance(home, "senses:\n  tick: {}\nreflexes:\n  - {sense: tick, interval: 50ms}\n",
                   {"tick": "def compute(db, peers):\n    return 1\n"})
    payload = [{"a": i, "b": "yy"} for i in range(MAX_PAYLOAD // 30)]
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: len(completes(home, "tick")) >= 3, 20, what="the ticks")
        assert Emitter(home).emit("big", {"small": 1})["ok"]  # events.db is open: the engine's fast path is ready
        line = json.dumps({"op": "emit", "channel": "big", "payload": payload}, separators=(",", ":")).encode()
        sock = Emitter(home)._connect()
        sock.settimeout(None)
        sock.sendall(line[:-4096])
        sent = time.time() * 1000  # from here the engine holds all but the last few KiB of the request
        sock.sendall(line[-4096:] + b"\n")
        answer = sock.makefile("rb").readline()
        answered = time.time() * 1000
        sock.close()
        assert json.loads(answer)["ok"]
        engine.stop()
    during = [r for r in read_logs(home, "reflex", "run_start", "tick") if sent < r["ts"] < answered]
    assert len(during) >= 3, f"{len(during)} ticks in the {answered - sent:.0f} ms the request was handled"


def test_a_debounced_burst_of_50_is_one_compute_that_receives_50_events(home: Path) -> None:
    # The quiet period must outlast any pause between two emits of the burst: at load 12, one pause passed
    # 300 ms and the burst was rightly cut in two (a compute of 10, then one of 40). At load 19 (two CPU hogs
    # beside a full suite) 250 emits paused 0.2 ms at the median and 21 ms at most: 2 s leaves room for a stall.
    store_instance(home, reflex=", debounce: 2s")
    with RunningEngine(home) as engine:
        engine.wait_ready()
        emitter = Emitter(home)
        for i in range(50):
            assert emitter.emit("burst", i)["ok"]
        emitter.close()
        wait_for(lambda: completes(home, "store"), 10, what="the debounced compute")
        code, out = engine.stop()
    assert code == 0, out
    runs = [c["payload"] for c in completes(home, "store")]
    assert len(runs) == 1 and runs[0]["events"] == 50 and runs[0]["reason"] == "on burst (debounced)"
    assert payloads(home) == list(range(50))


def test_a_source_added_by_reload_delivers_the_events_already_waiting(home: Path) -> None:
    store_instance(home, channel="first")
    early = nerve("emit", "late", '"waiting"', home=home)
    assert "no enabled reflex listens to it yet" in early.stdout
    with RunningEngine(home) as engine:
        engine.wait_ready()
        config = home / "nerve.yaml"
        config.write_text(config.read_text().replace("on: [first]", "on: [first, late]"))
        wait_for(lambda: payloads(home) == ["waiting"], 15, what="the waiting event after the reload")
        code, out = engine.stop()
    assert code == 0, out
    assert completes(home, "store")[0]["payload"]["reason"] == "backlog"


def test_an_emit_waits_for_a_held_lock_off_the_loop_and_is_committed_once_it_is_free(home: Path) -> None:
    store_instance(home)
    with RunningEngine(home) as engine:
        engine.wait_ready()
        assert Emitter(home).emit("burst", "first")["ok"]  # events.db exists from here on
        holder = sqlite3.connect(home / "data" / "events.db", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another writer (e.g. `nerve archive`) holds the write lock
        answers: list = []
        sender = threading.Thread(target=lambda: answers.append(Emitter(home).emit("burst", "second")))
        sender.start()
        started = time.monotonic()
        assert engine.status()["pid"]  # the engine's loop answers meanwhile: the emit waits in the writer thread
        assert time.monotonic() - started < 2.0 and not answers
        holder.execute("ROLLBACK")
        holder.close()
        sender.join(10)
        assert answers and answers[0]["ok"] and answers[0]["event_id"] == 2
        wait_for(lambda: len(got(home, "store")) == 2, 10, what="both events delivered")
        code, out = engine.stop()
    assert code == 0, out
    assert payloads(home) == ["first", "second"]


def test_a_resend_with_the_same_key_is_stored_and_delivered_once(home: Path) -> None:
    store_instance(home)
    first = nerve("emit", "burst", '{"id": 1}', "--key", "pr-1", home=home)
    assert first.returncode == 0, first.stderr
    again = nerve("emit", "burst", '{"id": 1}', "--key", "pr-1", "--json", home=home)
    offline = json.loads(again.stdout)
    assert (offline["event_id"], offline["duplicate"]) == (1, True), offline
    with RunningEngine(home) as engine:
        engine.wait_ready()
        wait_for(lambda: len(got(home, "store")) == 1, 15, what="the stored event to be delivered")
        woke = nerve("emit", "burst", '{"id": 2}', "--key", "pr-2", home=home)
        assert woke.returncode == 0 and "event #2 on burst committed; woke store" in woke.stdout, woke.stdout
        resent = nerve("emit", "burst", '{"id": 2}', "--key", "pr-2", home=home)
        assert "event #2 on burst was already stored with key 'pr-2'; nothing new was sent" in resent.stdout, resent.stdout
        socket_resend = Emitter(home).emit("burst", {"id": 1}, key="pr-1")
        assert socket_resend["ok"] and socket_resend["duplicate"] and socket_resend["event_id"] == 1, socket_resend
        assert socket_resend.get("triggered", []) == [], socket_resend
        wait_for(lambda: len(got(home, "store")) == 2, 15, what="the second event to be delivered")
        code, out = engine.stop()
    assert code == 0, out
    assert payloads(home) == [{"id": 1}, {"id": 2}]
    assert events_db(home) == [(1, "burst", '{"id":1}', "pr-1"), (2, "burst", '{"id":2}', "pr-2")]


def test_an_on_demand_compute_says_what_it_consumed_and_what_waits_for_a_disabled_reflex(home: Path) -> None:
    # The rule: an on-demand compute receives what its enabled `on:` reflexes would give it; the events of a source
    # named only by a disabled reflex stay unconsumed, and the answer says they wait (events.skipped).
    store_instance(home, "  - {sense: store, on: [bell], enabled: false}", channel="door", reflex=", debounce: 1h")
    for channel in ("door", "door", "door", "bell", "bell"):  # ids 1-3 door, 4-5 bell
        assert cli("emit", channel, "{}", "--home", str(home)).exit_code == 0
    data = json.loads(cli("sense", "compute", "store", "--json", "--home", str(home)).output)
    assert data["via"] == "worker" and data["payload"]["events"] == 3
    assert data["events"] == {"consumed": [{"source": "door", "count": 3, "first": 1, "last": 3}],
                              "skipped": [{"source": "bell", "events": 2}]}
    again = cli("sense", "compute", "store", "--home", str(home))
    assert "consumed" not in again.output and "2 event(s) of bell wait" in again.output, again.output
    with RunningEngine(home) as engine:
        engine.wait_ready()
        emitter = Emitter(home)
        for _ in range(2):  # ids 6-7, held by the hour-long debounce
            assert emitter.emit("door", {})["ok"]
        emitter.close()
        data = json.loads(nerve("sense", "compute", "store", "--json", home=home).stdout)
        shown = nerve("sense", "compute", "store", home=home)
        code, out = engine.stop()
    assert code == 0, out
    runs = [(c["payload"].get("reason"), c["payload"].get("events")) for c in completes(home, "store")]
    assert data["via"] == "engine" and data["events"] == {
        "consumed": [{"source": "door", "count": 2, "first": 6, "last": 7}],
        "skipped": [{"source": "bell", "events": 2}]}, (data, runs, out)
    assert "2 event(s) of bell wait" in shown.stdout + shown.stderr
    assert [e for _, e, _ in got(home, "store")] == [1, 2, 3, 6, 7]  # bell's wait, unconsumed
