"""Lazy projections: a sense brought up to date when read, exactly once; bound projections answer per parameter."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from conftest import cli
from enginekit import RunningEngine, read_logs, starts, wait_for, write_instance
from eventkit import Emitter, worker_pid

from nerve_cli.mcp.tools import Tools
from nerve_cli.ops.senses.read import read_sense
from nerve_cli.ops.senses.standalone import compute_standalone
from nerve_cli.store.events import store_event

CONFIG = """
    senses:
      tally: {group: reads}
      open-prs: {group: reads}
      reader: {group: other, peers: [tally, open-prs]}
    reflexes:
      - {sense: tally, on: [tick], lazy: true}
      - {sense: open-prs, on: [pr.opened, pr.closed], lazy: true, bindings: {repo: $repo}}
"""
TALLY_SCHEMA = """
    from nerve_cli.sdk import table

    @table(pk="event_id")
    class Seen:
        event_id: int
"""
# Folds each event once; while the file `block` exists it stops after its inserts, so the test can kill it there.
TALLY = """
    import os, time
    from .schema import Seen

    def compute(db, peers, trigger):
        db.insert_all(Seen(event_id=e.id) for e in trigger.events)
        here = os.path.dirname(__file__)
        if trigger.events and os.path.exists(os.path.join(here, "block")):
            open(os.path.join(here, "computing"), "w").close()
            while True:
                time.sleep(0.05)
        return db.query("SELECT count(*) AS n FROM seen")[0]["n"]
"""
PRS_SCHEMA = """
    from nerve_cli.sdk import table

    @table(pk=["repo", "number"])
    class Pr:
        repo: str
        number: int
"""
PRS = """
    from .schema import Pr

    def compute(db, peers, trigger):
        repo = trigger.params["repo"]
        for e in trigger.events:
            assert e.payload["repo"] == repo, "a bound read sees only its own events"
            if e.source == "pr.opened":
                db.upsert(Pr(repo=repo, number=e.payload["number"]))
            else:
                db.execute("DELETE FROM pr WHERE repo = ? AND number = ?", (repo, e.payload["number"]))
        return sorted(p.number for p in db.rows(Pr, where="repo = ?", params=(repo,)))
"""
# Reads both lazy peers from another group (another worker process): each is brought up to date first.
READER = """
    def compute(db, peers):
        counted = peers["tally"].query("SELECT count(*) AS n FROM seen")[0]["n"]
        return {"counted": counted, "tally": peers.value("tally"), "a": peers.value("open-prs", repo="a")}
"""
SEEN_SQL = 'CREATE TABLE "seen" ("event_id" INTEGER PRIMARY KEY);\n'
PR_SQL = 'CREATE TABLE "pr" ("repo" TEXT NOT NULL, "number" INTEGER NOT NULL, PRIMARY KEY ("repo", "number"));\n'


def instance(home: Path) -> Path:
    write_instance(home, CONFIG, {"tally": TALLY, "open-prs": PRS, "reader": READER},
                   {"tally": TALLY_SCHEMA, "open-prs": PRS_SCHEMA})
    (home / "senses/tally/migrations/0001_init.sql").write_text(SEEN_SQL)
    (home / "senses/open-prs/migrations/0001_init.sql").write_text(PR_SQL)
    return home


def show(home: Path, *args: str) -> tuple[int, dict]:
    result = cli("sense", "show", *args, "--json")
    return result.exit_code, json.loads(result.stdout)


def seen(home: Path) -> list[int]:
    import sqlite3

    conn = sqlite3.connect(home / "data/senses/tally.db")
    try:
        return [r[0] for r in conn.execute("SELECT event_id FROM seen ORDER BY event_id")]
    finally:
        conn.close()


def test_a_lazy_projection_is_brought_up_to_date_when_read_exactly_once(home: Path) -> None:
    instance(home)
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=2)
        emitter = Emitter(home)
        for i in range(50):
            assert emitter.emit("tick", {"i": i})["ok"]
        answer = emitter.emit("pr.opened", {"repo": "a", "number": 1})
        assert answer["ok"] and answer["triggered"] == []  # nothing listens eagerly
        assert starts(home, "tally") == [] and starts(home, "open-prs") == []

        # a read whose compute dies with its worker half-way: nothing is lost, nothing counted twice
        (home / "senses/tally/block").touch()
        first = subprocess.Popen([sys.executable, "-m", "nerve_cli", "sense", "show", "tally", "--json", "--home",
                                  str(home)], stdout=subprocess.PIPE, text=True)
        wait_for(lambda: (home / "senses/tally/computing").exists(), 20, what="the catch-up to start")
        pid = worker_pid(engine, "reads")
        (home / "senses/tally/block").unlink()
        os.kill(pid, signal.SIGKILL)
        out, _ = first.communicate(timeout=30)
        lost = json.loads(out)["read"]
        assert first.returncode == 1 and lost["error"]["type"] == "WorkerDied", lost
        wait_for(lambda: worker_pid(engine, "reads") not in (None, pid), 20, what="the worker to respawn")

        code, doc = show(home, "tally")
        assert code == 0 and doc["read"]["computes"] == 1 and doc["read"]["events"] == 50, doc["read"]
        assert doc["read"]["value"] == 50 and doc["read"]["via"] == "engine"
        assert seen(home) == list(range(1, 51))  # each event folded once, none lost with the killed compute
        again = read_sense(home, "tally")  # the library call behind sense show and the MCP reads
        assert again.computes == 0 and again.value == 50  # nothing left to consume

        for repo, number in (("b", 7), ("a", 2), ("b", 8)):
            assert emitter.emit("pr.opened", {"repo": repo, "number": number})["ok"]
        assert emitter.emit("pr.closed", {"repo": "a", "number": 1})["ok"]
        code, a = show(home, "open-prs", "--bind", "repo=a")
        assert code == 0 and (a["read"]["value"], a["read"]["events"]) == ([2], 3)  # a's own three events only
        b = read_sense(home, "open-prs", {"repo": "b"})
        assert (b.value, b.events) == ([7, 8], 2)
        a_again = read_sense(home, "open-prs", {"repo": "a"})
        assert a_again.computes == 0 and a_again.value == [2]
        listed = read_sense(home, "open-prs")
        assert sorted((k["params"]["repo"], k["value"]) for k in listed.known) == [("a", [2]), ("b", [7, 8])]

        for i in range(3):
            assert emitter.emit("tick", {"i": 50 + i})["ok"]
        assert emitter.emit("pr.opened", {"repo": "a", "number": 5})["ok"]
        peer = json.loads(cli("sense", "compute", "reader", "--json").stdout)
        assert peer["payload"] == {"counted": 53, "tally": 53, "a": [2, 5]}, peer
        engine.stop()
    runs = [r["payload"] for r in read_logs(home, "reflex", "run_complete", "tally")]
    assert [(r["outcome"], r["reason"]) for r in runs] == [("lost", "read"), ("signal", "read"), ("signal", "read")]

    # with no engine the same reads run in one-off workers: the peer's, and the sense's own
    for i in range(2):
        store_event(home / "data/events.db", "tick", i)
    assert compute_standalone(home, "reader").payload == {"counted": 55, "tally": 55, "a": [2, 5]}
    store_event(home / "data/events.db", "tick", 2)
    offline = read_sense(home, "tally")
    assert (offline.via, offline.computes, offline.events, offline.value) == ("worker", 1, 1, 56)
    store_event(home / "data/events.db", "tick", 3)
    asked = Tools(home).query_sense("tally", "SELECT count(*) FROM seen")  # an agent's read brings it up to date
    assert asked["rows"] == [[57]] and asked["read"]["computes"] == 1


def test_reads_refuse_wrong_parameters_and_config_check_explains_lazy_rules(home: Path) -> None:
    instance(home)
    missing = cli("sense", "show", "open-prs", "--bind", "owner=x")
    assert missing.exit_code == 2 and "read with --bind repo=VALUE" in missing.output
    assert "owner" in missing.output

    # a dry run for one set of values: its events, its cursors; nothing kept
    for repo, number in (("a", 4), ("b", 9)):
        store_event(home / "data/events.db", "pr.opened", {"repo": repo, "number": number})
    dry = cli("sense", "compute", "open-prs", "--dry-run", "--bind", "repo=a", "--json")
    rehearsed = json.loads(dry.stdout)
    assert dry.exit_code == 0 and (rehearsed["payload"], rehearsed["events"]) == ([4], 1), dry.stdout
    assert rehearsed["cursors"] == [{"source": "pr.opened", "from": 0, "to": 1}]
    assert cli("sense", "compute", "open-prs", "--dry-run", "--bind", "owner=x").exit_code == 2
    assert Tools(home).dry_run_sense("open-prs", None, {"repo": "b"})["payload"] == [9]  # an agent's, the same
    real = read_sense(home, "open-prs", {"repo": "a"})
    assert (real.computes, real.events, real.value) == (1, 1, [4])  # the dry run consumed nothing

    bad = home / "nerve.yaml"
    bad.write_text(bad.read_text().replace("tally: {group: reads}", "tally: {group: reads, peers: [reader]}")
                   + "  - {sense: open-prs, interval: 1m}\n  - {sense: tally, on: [tock], bindings: {repo: $repo}}\n"
                   "  - {sense: reader, on: [tick], lazy: true}\n")
    check = json.loads(cli("config", "check", "--json").stdout)
    messages = [p["message"] for p in check["problems"]]
    assert any("binds parameters (reflexes[1]), so it runs only when read" in m for m in messages), messages
    assert any("add `lazy: true`" in m for m in messages), messages
    assert any("read each other as lazy peers: reader → tally → reader" in m for m in messages), messages
