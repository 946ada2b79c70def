"""`nerve sense compute NAME --dry-run`: the real compute on the real database, and not one byte kept."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from contractkit import Checked
from enginekit import write_instance, write_sense
from typer.testing import CliRunner

from nerve_cli.schema.migrate import generate_migration

pytestmark = pytest.mark.timeout(90)

SCHEMA = """
from nerve_cli.sdk import table

@table(pk="id")
class Task:
    id: int
    title: str
    blob: str | None = None
"""

TASKS = """
from .schema import Task

def compute(db, peers, trigger):
    for event in trigger.events:
        if event.payload.get("boom"):
            raise ValueError("a boom event")
        sha = db.blobs.put(event.payload["title"].encode()) if event.payload.get("keep") else None
        db.upsert(Task(id=event.payload["id"], title=event.payload["title"], blob=sha))
    print(f"saw {len(trigger.events)} event(s)")
    return {"tasks": len(db.rows(Task))}
"""


def nerve(*args: str, home: Path):
    from nerve_cli.cli.app import app

    return CliRunner().invoke(app, [*args, "--home", str(home)])


def fingerprint(home: Path) -> dict[str, str]:
    """Every file under data/ (WAL side files aside: SQLite makes and removes them), by content hash."""
    return {str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((home / "data").rglob("*")) if p.is_file() and not p.name.endswith(("-wal", "-shm"))}


def test_a_dry_run_shows_what_it_would_do_and_changes_no_file(home: Path) -> None:
    write_instance(home, """
        senses:
          tasks: {}
        reflexes:
          - {sense: tasks, on: [task.created]}
    """, {})
    write_sense(home, "tasks", TASKS, SCHEMA)
    generate_migration(home / "senses" / "tasks")
    assert nerve("emit", "task.created", '{"id": 1, "title": "first"}', home=home).exit_code == 0
    assert nerve("sense", "compute", "tasks", home=home).exit_code == 0  # a real compute: rows, cursor, log
    assert nerve("emit", "task.created", '{"id": 2, "title": "second", "keep": true}', home=home).exit_code == 0
    before = fingerprint(home)
    assert "data/senses/tasks.db" in before and "data/logs.db" in before and "data/events.db" in before

    check = Checked()
    waiting = check.doc("sense-dry-run", json.loads(nerve("sense", "compute", "tasks", "--dry-run", "--json",
                                                          home=home).output), "dry run")
    assert (waiting["outcome"], waiting["payload"], waiting["events"]) == ("signal", {"tasks": 2}, 1)
    assert waiting["tables"] == [{"name": "task", "inserted": 1, "updated": 0, "deleted": 0, "rows": [
        {"op": "insert", "row": {"id": 2, "title": "second", "blob": hashlib.sha256(b"second").hexdigest()}}]}]
    assert waiting["cursors"] == [{"source": "task.created", "from": 1, "to": 2}]
    assert waiting["blobs"] == [{"sha256": hashlib.sha256(b"second").hexdigest(), "bytes": 6}]
    assert waiting["output"] == [{"stream": "stdout", "text": "saw 1 event(s)"}]
    assert waiting["database"] == "copy"  # even a commit of the code's own through db.conn lands in the copy
    assert "data/events.db included" in waiting["kept"]  # what is not undone, said in every answer

    sample = check.doc("sense-dry-run", json.loads(nerve(
        "sense", "compute", "tasks", "--dry-run", "--event", 'task.created={"id": 1, "title": "renamed"}',
        "--event", 'task.created={"id": 7, "title": "seventh"}', "--json", home=home).output), "dry run with samples")
    assert (sample["outcome"], sample["payload"], sample["events"], sample["cursors"]) == ("signal", {"tasks": 2}, 2, [])
    assert [(r["op"], r["row"]["id"]) for r in sample["tables"][0]["rows"]] == [("update", 1), ("insert", 7)]

    failed = nerve("sense", "compute", "tasks", "--dry-run", "--event", 'task.created={"boom": true}', "--json",
                   home=home)
    assert failed.exit_code == 1
    error = check.doc("sense-dry-run", json.loads(failed.output), "failed dry run")["error"]
    assert error["type"] == "ValueError" and error["file"] == "senses/tasks/sense.py" and error["line"] == 7
    table = nerve("sense", "compute", "tasks", "--dry-run", home=home)
    assert table.exit_code == 0 and "would signal" in table.output and "in-memory copy" in table.output

    assert fingerprint(home) == before  # rows, cursors, events and the log: not a byte changed
    assert not (home / "data" / "blobs").exists() or not any((home / "data" / "blobs").rglob("*.*"))
    refused = nerve("sense", "compute", "tasks", "--dry-run", "--event", "no-equals-sign", home=home)
    assert refused.exit_code == 1 and "SOURCE=JSON" in refused.output
    misspelt = nerve("sense", "compute", "tasks", "--dry-run", "--event", 'task.creatd={"id": 1}', home=home)
    assert misspelt.exit_code == 1, misspelt.output  # was accepted: an event the real compute never gets
    assert "tasks does not listen to 'task.creatd'; did you mean `task.created`?" in " ".join(misspelt.output.split())


def test_sample_events_of_channels_share_one_id_space_as_events_db_gives_them() -> None:
    """Dry-run samples got ids from 1 per source, so a sense keyed by event id met one id twice where its real
    compute (channels share data/events.db's ids) did not."""
    from nerve_cli.worker.events import sample_events

    got = sample_events([{"source": "a", "kind": "channel"}, {"source": "b", "kind": "channel"},
                         {"source": "s", "kind": "sense"}, {"source": "a", "kind": "channel"},
                         {"source": "s", "kind": "sense"}, {"source": "docs/*.md", "kind": "file"}])
    assert [(e.source, e.id) for e in got] == [("a", 1), ("b", 2), ("s", 1), ("a", 3), ("s", 2), ("docs/*.md", 4)]


def test_a_new_sense_with_no_database_runs_on_a_copy_and_creates_nothing(home: Path) -> None:
    write_instance(home, "senses:\n  fresh: {enabled: false}\nreflexes:\n  - {sense: fresh, on: [x]}\n", {})
    write_sense(home, "fresh", TASKS, SCHEMA)
    generate_migration(home / "senses" / "fresh")
    result = json.loads(nerve("sense", "compute", "fresh", "--dry-run", "--event", 'x={"id": 3, "title": "t"}',
                              "--json", home=home).output)
    assert (result["outcome"], result["database"], result["payload"]) == ("signal", "copy", {"tasks": 1})
    assert not (home / "data" / "senses" / "fresh.db").exists() and not (home / "data" / "logs.db").exists()


COMMITS_ITSELF = """
from .schema import Task

def compute(db, peers):
    db.insert(Task(id=99, title="committed by hand", blob=""))
    db.conn.execute("COMMIT")  # past the compute's own transaction: a dry run on the file kept this row
    db.conn.execute("BEGIN")
    return {"tasks": 1}
"""


def test_a_dry_run_of_code_that_commits_itself_keeps_nothing(home: Path) -> None:
    """A dry run said `database: rolled back` while a row the compute committed through db.conn persisted."""
    write_instance(home, "senses:\n  tasks: {}\nreflexes:\n  - {sense: tasks, interval: 1h}\n", {})
    write_sense(home, "tasks", TASKS, SCHEMA)
    generate_migration(home / "senses" / "tasks")
    assert nerve("sense", "compute", "tasks", home=home).exit_code == 0  # the database exists, with its rows
    write_sense(home, "tasks", COMMITS_ITSELF, SCHEMA)
    before = fingerprint(home)
    done = json.loads(nerve("sense", "compute", "tasks", "--dry-run", "--json", home=home).output)
    assert (done["outcome"], done["database"]) == ("signal", "copy"), done
    assert fingerprint(home) == before
