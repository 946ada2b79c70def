"""A fleet of two hosts on one machine: two homes, two real engines, one real nats-server with JetStream.

Host `a` publishes its sense `ticker` and the fleet channel `deploys`; host `b` subscribes to both and its
listener `store` keeps every event it receives, in order. Deadlines scale with the work; nothing sleeps.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from conftest import cli
from contractkit import Checked
from enginekit import RunningEngine, read_logs, thread_statuses, wait_for, write_instance, write_sense
from eventkit import Emitter
from fleetkit import NatsServer
from test_metrics import free_port, scrape, value

from nerve_cli.schema.migrate import generate_migration
from nerve_cli.top.source import Source

# one signal per compute, listing the events of its burst: the order of `n` across signals is the order sent
TICKER = """
def compute(db, peers, trigger):
    return {"n": [e.payload for e in trigger.events]}
"""
STORE_SCHEMA = """
from nerve_cli.sdk import table

@table(pk="n")
class Got:
    n: int
    source: str
    kind: str
    payload: str
"""
STORE = """
import json
from .schema import Got

def compute(db, peers, trigger):
    n = db.query("SELECT count(*) AS c FROM got")[0]["c"]
    for i, e in enumerate(trigger.events):
        db.insert(Got(n=n + i, source=e.source, kind=e.kind, payload=json.dumps(e.payload)))
    return {"got": len(trigger.events)}
"""
FAST_RECOVERY = """
engine:
  respawn_backoff_first: 50ms
  respawn_backoff_max: 50ms
"""


@pytest.fixture
def server(tmp_path: Path):
    with NatsServer(tmp_path / "nats") as running:
        yield running


def host_a(root: Path, url: str, extra: str = "") -> Path:
    return write_instance(root / "a", f"""
        senses:
          ticker: {{}}
        reflexes:
          - {{sense: ticker, on: [go]}}
        fleet:
          servers: [{url}]
          host: a
          publish: {{senses: [ticker], channels: [deploys]}}
        {extra}
    """.replace("\n        ", "\n"), {"ticker": TICKER})


def host_b(root: Path, url: str, extra: str = "") -> Path:
    home = write_instance(root / "b", f"""
        {FAST_RECOVERY}
        senses:
          store: {{}}
        reflexes:
          - {{sense: store, on: [a/ticker, deploys]}}
        fleet:
          servers: [{url}]
          host: b
          subscribe: {{senses: [a/ticker], channels: [deploys]}}
          ack_wait: 2s
        {extra}
    """.replace("\n        ", "\n"), {})
    write_sense(home, "store", STORE, STORE_SCHEMA)
    generate_migration(home / "senses" / "store")
    return home


def got(home: Path) -> list[tuple[str, str, object]]:
    """(source, kind, payload) of every event b's listener committed, in the order it committed them."""
    path = home / "data" / "senses" / "store.db"
    if not path.exists():
        return []
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT source, kind, payload FROM got ORDER BY n").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()
    return [(s, k, json.loads(p)) for s, k, p in rows]


def deploys(home: Path) -> list:
    return [p["d"] for s, _, p in got(home) if s == "deploys"]


def ticks(home: Path) -> list:
    return [n for s, _, p in got(home) if s == "a/ticker" for n in p["n"]]


def run(home: Path, *args: str):
    """A command in this process (conftest.cli): its JSON document with --json, else its text."""
    result = cli(*args, "--home", str(home))
    assert result.exit_code == 0, (args, result.output)
    return json.loads(result.stdout) if "--json" in args else result.stdout


def stream_state(url: str) -> tuple[tuple[float, int, int], list[str]]:
    """The fleet stream's (max_age, max_bytes, max_msgs) and its consumers' names, as the server has them."""
    import asyncio

    import nats

    async def look() -> tuple[tuple[float, int, int], list[str]]:
        nc = await nats.connect(url)
        try:
            js = nc.jetstream(timeout=10)
            info = await js.stream_info("nerve")
            names = sorted(c.name for c in await js.consumers_info("nerve"))
            return (info.config.max_age, info.config.max_bytes, info.config.max_msgs), names
        finally:
            await nc.close()

    return asyncio.run(look())


def fleet_status(engine: RunningEngine) -> dict:
    return engine.status()["fleet"]


@pytest.mark.timeout(120)
def test_signals_and_fleet_channel_emits_reach_the_other_host_once_in_order(tmp_path: Path, server: NatsServer) -> None:
    a, b = host_a(tmp_path, server.url), host_b(tmp_path, server.url)
    port = free_port()
    with RunningEngine(a) as engine_a, RunningEngine(b, "--metrics", f"127.0.0.1:{port}") as engine_b:
        engine_a.wait_ready()
        engine_b.wait_ready()
        to_a, to_b = Emitter(a), Emitter(b)
        for i in range(150):
            assert to_a.emit("go", i)["ok"]
            assert to_a.emit("deploys", {"d": i, "from": "a"})["ok"]
            if i == 100:  # over the server's max_payload (1 MiB): logged and skipped, the rest goes on
                assert to_a.emit("deploys", {"d": "big", "pad": "x" * 1_100_000})["ok"]
        assert to_b.emit("deploys", {"d": "local", "from": "b"})["ok"]  # b's own emit stays on b
        wait_for(lambda: len(deploys(b)) >= 151 and len(ticks(b)) >= 150, 30, what="b to receive 300 events")
        assert ticks(b) == list(range(150))
        assert [d for d in deploys(b) if d != "local"] == list(range(150))
        assert deploys(b).count("local") == 1
        kinds = {(s, k) for s, k, _ in got(b)}
        assert kinds == {("a/ticker", "channel"), ("deploys", "channel")}  # events like any other on b
        emits = read_logs(b, "signal", "emit", "a/ticker")
        assert emits and all(row["payload"]["origin"] == "a" for row in emits)
        wait_for(lambda: fleet_status(engine_a)["outbox"] == 0, 10, what="a's outbox to drain")
        status_a, status_b = fleet_status(engine_a), fleet_status(engine_b)
        assert status_a["connected"] and status_a["host"] == "a" and status_a["published"] >= 151
        assert status_a["not_sent"] == 1 and "big" not in deploys(b)
        (skipped,) = read_logs(a, "system", "fleet_not_sent")
        assert skipped["ref"] == "deploys" and "max_payload" in skipped["payload"]["message"]
        subs = {s["source"]: s for s in status_b["subscriptions"]}
        assert subs["deploys"]["received"] == 150 and subs["a/ticker"]["last_host"] == "a"
        assert status_b["hosts"]["a"]["events"] >= 151
        refused = to_b.request({"op": "emit", "channel": "a/ticker", "payload": 1})
        assert not refused["ok"] and "fleet host a" in refused["error"]
        to_a.close()
        to_b.close()
        check = Checked()
        check.doc("status", run(b, "status", "--json"), "status --json")
        live = check.doc("fleet", run(b, "fleet", "--json"), "fleet --json")
        assert live["engine_running"] and live["connected"] and live["hosts"][0]["host"] == "a"
        assert live["hosts"][0]["events"] == len(got(b)) - 1  # all but b's own emit came from a
        sent = check.doc("fleet", run(a, "fleet", "--json"), "fleet --json (a)")
        assert sent["outbox"] == 0 and sent["last_sent_ms"] and all(p["waiting"] == 0 for p in sent["publishes"])
        assert "Hosts heard from" in run(b, "fleet")
        metrics = scrape(port)
        assert value(metrics, "nerve_fleet_connected") == 1
        assert value(metrics, "nerve_fleet_received", "nerve_fleet_received_total", source="deploys") == 150
        assert value(metrics, "nerve_fleet_outbox_events") == 0
        snapshot = Source(b).snapshot()  # nerve top's picture
        assert snapshot.fleet is not None and snapshot.fleet["connected"] and snapshot.fleet["host"] == "b"
        code_a, out_a = engine_a.stop()
        code_b, out_b = engine_b.stop()
    assert code_a == code_b == 0, out_a + out_b
    assert "Traceback" not in out_a + out_b
    offline = check.doc("fleet", run(b, "fleet", "--json"), "fleet --json (stopped)")
    assert not offline["engine_running"] and offline["connected"] is None
    assert offline["hosts"] == live["hosts"]  # read from events.db: the same with the engine stopped


@pytest.mark.timeout(120)
def test_b_stopped_while_a_publishes_receives_everything_at_its_next_start(tmp_path: Path, server: NatsServer) -> None:
    a, b = host_a(tmp_path, server.url), host_b(tmp_path, server.url)
    with RunningEngine(a) as engine_a:
        engine_a.wait_ready()
        to_a = Emitter(a)
        with RunningEngine(b) as engine_b:
            engine_b.wait_ready()
            for i in range(100):
                assert to_a.emit("deploys", {"d": i})["ok"]
            wait_for(lambda: len(deploys(b)) >= 100, 30, what="b to receive the first 100")
            consumer = {s["source"]: s for s in fleet_status(engine_b)["subscriptions"]}["deploys"]["consumer"]
            engine_b.stop()
        for i in range(100, 300):  # b is stopped: its durable consumer keeps its place on the server
            assert to_a.emit("deploys", {"d": i})["ok"]
        to_a.close()
        wait_for(lambda: fleet_status(engine_a)["outbox"] == 0, 20, what="a's outbox to drain")
        with RunningEngine(b) as engine_b:
            engine_b.wait_ready()
            wait_for(lambda: len(deploys(b)) >= 300, 30, what="b to receive what was sent while it was stopped")
            assert deploys(b) == list(range(300))  # the rest, once each, in order
            engine_b.stop()
        engine_a.stop()
    forget_consumer(server.url, consumer)  # the server hands b everything again, as after a crash before its acks
    with RunningEngine(b) as engine_b:
        engine_b.wait_ready()
        wait_for(lambda: {s["source"]: s for s in fleet_status(engine_b)["subscriptions"]}["deploys"]["duplicates"]
                 >= 300, 30, what="b to be handed the 300 events again")
        assert deploys(b) == list(range(300))  # each dropped by its key: nothing stored twice, no one woken
        engine_b.stop()


def forget_consumer(url: str, durable: str) -> None:
    import asyncio

    import nats

    async def delete() -> None:
        nc = await nats.connect(url)
        try:
            await nc.jetstream().delete_consumer("nerve", durable)
        finally:
            await nc.close()

    asyncio.run(delete())


@pytest.mark.timeout(120)
def test_with_nats_down_local_work_goes_on_and_the_outbox_drains_when_it_returns(tmp_path: Path) -> None:
    server = NatsServer(tmp_path / "nats")
    server.start()
    url = server.url
    server.stop()  # a port nothing listens on now: the engines start with the fleet down
    a, b = host_a(tmp_path, url), host_b(tmp_path, url)
    with RunningEngine(a) as engine_a:
        engine_a.wait_ready()
        to_a = Emitter(a)
        for i in range(40):
            assert to_a.emit("deploys", {"d": i})["ok"]  # answered at once: committed here, queued for the fleet
            assert to_a.emit("go", i)["ok"]
        wait_for(lambda: len(read_logs(a, "reflex", "run_complete", "ticker")) >= 1, 10, what="ticker to compute")
        status = wait_for(lambda: (s := fleet_status(engine_a))["outbox"] >= 41 and s, 10,
                          what="the outbox depth to count what waits")
        assert status["connected"] is False and status["last_error"]
        document = run(a, "status", "--json")
        # (ticker may still be signalling its backlog: the outbox only grows while NATS is away)
        assert document["fleet"]["connected"] is False and document["fleet"]["outbox"] >= status["outbox"]
        table = run(a, "status")
        assert "disconnected" in table and int(re.search(r"outbox (\d+)", table).group(1)) >= 41
        server.start()  # same port, same store
        with RunningEngine(b) as engine_b:
            engine_b.wait_ready()
            wait_for(lambda: len(deploys(b)) >= 40 and len(ticks(b)) >= 40, 30, what="the outbox to drain to b")
            assert deploys(b) == list(range(40)) and ticks(b) == list(range(40))
            assert fleet_status(engine_a)["outbox"] == 0 and fleet_status(engine_a)["connected"]
            engine_b.stop()
        to_a.close()
        engine_a.stop()
    server.stop()
    logged = [r["type"] for r in read_logs(a, "system") if r["type"].startswith("fleet_")]
    assert logged[:2] == ["fleet_disconnected", "fleet_connected"]  # said once per change, not per retry


@pytest.mark.timeout(180)
def test_2000_events_through_two_server_kills_and_a_receiver_kill_arrive_exactly_once(tmp_path: Path,
                                                                                     server: NatsServer) -> None:
    total = 2000
    a, b = host_a(tmp_path, server.url), host_b(tmp_path, server.url)
    engine_a, engine_b = RunningEngine(a), RunningEngine(b)
    try:
        engine_a.wait_ready()
        engine_b.wait_ready()
        to_a = Emitter(a)

        def connected_again() -> None:  # a kill lands on a live link, in the middle of the stream
            wait_for(lambda: fleet_status(engine_a)["connected"], 20, what="a to reconnect")

        plan = {300: server.kill, 450: server.start, 700: connected_again, 900: engine_b.proc.kill,
                1100: connected_again, 1200: server.kill, 1350: server.start}
        for i in range(total):
            if i in plan:
                plan[i]()
            if i == 1500:  # b comes back while a still publishes
                engine_b = RunningEngine(b)
            assert to_a.emit("deploys", {"d": i})["ok"]
        to_a.close()
        engine_b.wait_ready()

        def arrived() -> bool:
            return len(deploys(b)) >= total

        wait_for(arrived, 60, what=f"b to commit {total} events")
        assert deploys(b) == list(range(total))  # every one, once, in order
        wait_for(lambda: fleet_status(engine_a)["outbox"] == 0, 20, what="a's outbox to be empty")
        status = fleet_status(engine_b)
        duplicates = sum(s["duplicates"] for s in status["subscriptions"])
        assert len(deploys(b)) == total, f"{duplicates} duplicates were dropped by key, none stored"
        outages = [r["type"] for r in read_logs(a, "system") if r["type"].startswith("fleet_")]
        assert outages.count("fleet_disconnected") >= 2 and outages.count("fleet_connected") >= 3, outages
        print("duplicates dropped on b:", duplicates, "a:", outages)
    finally:
        for engine in (engine_a, engine_b):
            engine.stop()


@pytest.mark.timeout(120)
def test_a_subscription_added_by_reload_receives_what_the_stream_holds(tmp_path: Path, server: NatsServer) -> None:
    a = host_a(tmp_path, server.url)
    b = host_b(tmp_path, server.url)
    config = (b / "nerve.yaml").read_text()
    (b / "nerve.yaml").write_text(config.replace("channels: [deploys]", "channels: []"))
    with RunningEngine(a) as engine_a, RunningEngine(b) as engine_b:
        engine_a.wait_ready()
        engine_b.wait_ready()
        to_a = Emitter(a)
        for i in range(20):
            assert to_a.emit("deploys", {"d": i})["ok"]
        to_a.close()
        wait_for(lambda: fleet_status(engine_a)["outbox"] == 0, 20, what="a's outbox to drain")
        assert deploys(b) == []  # not subscribed
        (b / "nerve.yaml").write_text(config)  # hot reload: the fleet's link starts again with the new section
        wait_for(lambda: len(deploys(b)) >= 20, 30, what="the new subscription to receive the stream's history")
        assert deploys(b) == list(range(20))
        reloaded = read_logs(b, "system", "config_reloaded")
        assert any("fleet changed" in change for row in reloaded for change in row["payload"]["changes"])
        limits, consumers = stream_state(server.url)
        assert limits == (7 * 86400.0, 1024 ** 3, 1_000_000)  # bounded in age, bytes and messages
        assert len([c for c in consumers if c.startswith("nerve_b_")]) == 2  # a/ticker and deploys

        # the deploys subscription removed, and smaller bounds: its consumer goes, the stream is updated
        (b / "nerve.yaml").write_text(config.replace("channels: [deploys]", "channels: []")
                                      .replace("  ack_wait: 2s", "  ack_wait: 2s\n  max_bytes: 10MB\n  max_messages: 5000"))
        wait_for(lambda: stream_state(server.url) != (limits, consumers) and
                 len([c for c in stream_state(server.url)[1] if c.startswith("nerve_b_")]) == 1, 30,
                 what="b's unused consumer deleted and the stream's bounds updated")
        assert stream_state(server.url)[0] == (7 * 86400.0, 10 * 1000 ** 2, 5000)
        (b / "nerve.yaml").write_text(config.replace("  ack_wait: 2s", "  ack_wait: 2s\n  enabled: false"))
        wait_for(lambda: engine_b.status()["fleet"] is None, 20, what="b to leave the fleet")
        engine_b.stop()
        engine_a.stop()


@pytest.mark.timeout(120)
def test_a_sense_database_rebuilt_while_publishing_is_sent_from_its_new_start(tmp_path: Path,
                                                                             server: NatsServer) -> None:
    a, b = host_a(tmp_path, server.url), host_b(tmp_path, server.url)
    with RunningEngine(a) as engine_a, RunningEngine(b) as engine_b:
        engine_a.wait_ready()
        engine_b.wait_ready()
        to_a = Emitter(a)
        for i in range(20):
            assert to_a.emit("go", i)["ok"]
        wait_for(lambda: len(ticks(b)) >= 20, 30, what="the first 20 ticks")
        # the database is gone: its worker builds a new one, ids from 1. Its side files first: deleted after the
        # database, they could be the new one's (built at once by a compute of the first burst), whose commits
        # would go with them (the worker notices that too now, and builds it again: but the ticks would differ)
        for suffix in ("-wal", "-shm", ""):
            (a / "data" / "senses" / f"ticker.db{suffix}").unlink(missing_ok=True)
        for i in range(20, 30):
            assert to_a.emit("go", i)["ok"]
        to_a.close()
        # the new database has no cursor either, so ticker consumes `go` from its start again: 0..29 after 0..19
        wait_for(lambda: len(ticks(b)) >= 50, 30, what="the ticks of the rebuilt database")
        assert ticks(b) == list(range(20)) + list(range(30))  # none taken for sent for an id seen before
        engine_a.stop()
        engine_b.stop()


WATCH = """
import json
from nerve_cli.sdk import END, EVENT, RoleResult, WorkflowDefinition, wait_for_event

async def opener(messages):
    asked = json.loads(messages[0].content)
    return wait_for_event(asked["source"], match=asked.get("match"))

async def reader(messages):
    return RoleResult(json.dumps(messages[-1].meta["payload"]), {"source": messages[-1].meta["source"]})

def moderator(messages):
    last = messages[-1]
    if last.role == "__start__":
        return "opener"
    return "reader" if last.role == EVENT else END

workflow = WorkflowDefinition(roles={"opener": opener, "reader": reader}, moderator=moderator)
"""


@pytest.mark.timeout(120)
def test_threads_waiting_for_another_hosts_sense_or_a_fleet_channel_resume_on_its_events(
        tmp_path: Path, server: NatsServer) -> None:
    from nerve_cli.ops.client import request

    a, b = host_a(tmp_path, server.url), host_b(tmp_path, server.url, "workflows:\n  watch: {}")
    (b / "workflows").mkdir()
    (b / "workflows" / "watch.py").write_text(WATCH)
    with RunningEngine(a) as engine_a, RunningEngine(b) as engine_b:
        engine_a.wait_ready()
        engine_b.wait_ready()

        def start(source: str, match: dict | None = None) -> str:
            asked = json.dumps({"source": source, "match": match})
            return request(b, "start_thread", workflow="watch", prompt=asked)["run_id"]

        ticker, deploy = start("a/ticker"), start("deploys", {"d": 5})
        wait_for(lambda: {thread_statuses(b).get(r) for r in (ticker, deploy)} == {"waiting"}, 20,
                 what="b's two threads to wait")
        to_a = Emitter(a)
        for i in range(8):
            assert to_a.emit("deploys", {"d": i})["ok"]
        assert to_a.emit("go", "tick")["ok"]
        to_a.close()
        wait_for(lambda: {thread_statuses(b).get(r) for r in (ticker, deploy)} == {"completed"}, 30,
                 what="a's events to resume b's threads")
        engine_a.stop()
        engine_b.stop()
    answers = {r: [m["payload"] for m in read_logs(b, "workflow", "message", r)][-1] for r in (ticker, deploy)}
    assert json.loads(answers[deploy]["content"]) == {"d": 5}  # the first match, not the first event
    assert json.loads(answers[ticker]["content"]) == {"n": ["tick"]}
    assert answers[ticker]["meta"]["source"] == "a/ticker" and answers[deploy]["meta"]["source"] == "deploys"
