"""nerve gc and the blob store: only blobs nothing refers to go, wherever the reference lives."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from conftest import cli
from enginekit import write_instance

from nerve_cli.store.logs import LogStore

CONFIG = """
    senses:
      docs: {}
    reflexes:
      - {sense: docs, interval: 1h}
"""
SCHEMA = """
    from nerve_cli.sdk import table

    @table(pk="ts", time="ts")
    class Doc:
        ts: int
        blob: str
"""
# every blob is put by a real compute; the test then refers to some of them from the other places
SENSE = """
    import time
    from .schema import Doc

    def compute(db, peers):
        now = time.time_ns() // 1_000_000
        put = db.blobs.put
        db.insert(Doc(ts=now - 3 * 86_400_000, blob=put(b"archived day")))   # archived below
        db.insert(Doc(ts=now, blob='{"file": "' + put(b"live row") + '"}'))  # inside a JSON document
        for content in (b"event", b"workflow message", b"orphan one", b"orphan two"):
            put(content)
        return {"attachment": "sha256:" + put(b"in the signal")}
"""
DOC_SQL = 'CREATE TABLE "doc" ("ts" INTEGER PRIMARY KEY, "blob" TEXT NOT NULL);\n'


def sha(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def blob_files(home: Path) -> set[str]:
    return {p.parent.name + p.name for p in (home / "data/blobs").glob("??/[0-9a-f]*")}


def test_gc_collects_only_blobs_nothing_refers_to(home: Path) -> None:
    write_instance(home, CONFIG, {"docs": SENSE}, {"docs": SCHEMA})
    (home / "senses/docs/migrations/0001_init.sql").write_text(DOC_SQL)
    computed = cli("sense", "compute", "docs")
    assert computed.exit_code == 0, computed.stdout + computed.output
    archived = cli("archive", "--older-than", "1d", "--json")
    assert archived.exit_code == 0 and json.loads(archived.stdout)["rows"] >= 1, archived.stdout
    assert list((home / "data/archive/senses/docs").glob("*.jsonl"))  # the old row now lives in an archived day
    emitted = cli("emit", "files", json.dumps({"blob": sha(b"event").upper()}))  # case does not matter
    assert emitted.exit_code == 0, emitted.output
    with LogStore(home / "data/logs.db") as logs:
        logs.workflow_event("run-1", "triage", "message", {"role": "writer", "content": f"see {sha(b'workflow message')}"})

    every = {sha(c) for c in (b"archived day", b"live row", b"event", b"workflow message", b"orphan one",
                              b"orphan two", b"in the signal")}
    orphans = {sha(b"orphan one"), sha(b"orphan two")}
    assert blob_files(home) == every
    (home / "data/blobs/ab").mkdir(mode=0o700)
    (home / "data/blobs/ab/.tmp-crashed").write_bytes(b"half a blob")  # a write interrupted by a crash

    young = cli("gc", "--older-than", "1d")
    assert young.exit_code == 0 and "(3 blobs)" in young.stdout, young.stdout  # nothing is a day old yet
    dry = json.loads(cli("gc", "--older-than", "0s", "--dry-run", "--json").stdout)
    listed = {i["what"] for i in dry["items"]}
    assert listed == {f"data/blobs/{s[:2]}/{s[2:]}" for s in orphans} | {"data/blobs/ab/.tmp-crashed"}
    assert all(i["kind"] == "blob" for i in dry["items"]) and blob_files(home) == every

    gc = cli("gc", "--older-than", "0s")
    assert gc.exit_code == 0, gc.output
    assert "nothing refers to it" in gc.stdout and "an unfinished write" in gc.stdout
    assert blob_files(home) == every - orphans
    assert not (home / "data/blobs/ab").exists()  # an emptied shard folder goes too
    again = json.loads(cli("gc", "--older-than", "0s", "--dry-run", "--json").stdout)
    assert again["items"] == []


def test_a_blob_put_again_is_young_again_and_an_unreadable_database_keeps_every_blob(home: Path) -> None:
    from nerve_cli.store.blobs import BlobStore

    write_instance(home, "senses:\n  broken: {}\n", {"broken": "def compute(db, peers):\n    return 1\n"})
    store = BlobStore(home / "data/blobs")
    old = store.put(b"stored long ago")
    os.utime(store.path(old), (time.time() - 90 * 86400,) * 2)
    assert [i["what"] for i in json.loads(cli("gc", "--older-than", "30d", "--dry-run", "--json").stdout)["items"]] == [
        f"data/blobs/{old[:2]}/{old[2:]}"]
    store.put(b"stored long ago")  # a compute put the same bytes again: its row may be about to commit
    kept = json.loads(cli("gc", "--older-than", "30d", "--dry-run", "--json").stdout)
    assert kept["items"] == [] and [y["kind"] for y in kept["young"]] == ["blob"]

    (home / "data/senses").mkdir(parents=True, exist_ok=True)
    (home / "data/senses/broken.db").write_bytes(b"this is not a database" * 100)
    refused = json.loads(cli("gc", "--older-than", "0s", "--json").stdout)
    assert refused["items"] == [] or all(i["kind"] != "blob" for i in refused["items"])
    assert any("no blob is collected: data/senses/broken.db cannot be read" in k["message"] for k in refused["kept"])
    assert store.exists(old)
