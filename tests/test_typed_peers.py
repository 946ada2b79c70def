"""Typed peer reads: a sense imports another's @table classes, in any group, and reads the peer through them."""

from __future__ import annotations

import json

from conftest import cli
from sensekit import worker, write_instance

from nerve_cli.wire.protocol import Error, Signal

WRITER = """
import time
from .schema import Sample

def compute(db, peers):
    db.insert_all([Sample(ts=1, value=0.5), Sample(ts=2, value=0.75)])
    return 2
"""
READER_SCHEMA = """
from nerve_cli.sdk import table
from ..cpu_usage.schema import Sample  # a peer's class beside this sense's own: not one of its tables

@table(pk="ts")
class Seen:
    ts: int
"""
READER = """
from ..cpu_usage.schema import Sample     # senses/cpu-usage/schema.py, though cpu-usage runs in another group

def compute(db, peers):
    cpu = peers["cpu-usage"]
    latest = cpu.rows(Sample, order_by="ts DESC", limit=1)[0]
    try:
        cpu.insert(Sample(ts=3, value=1.0))
        refused = None
    except Exception as exc:
        refused = str(exc)
    return {"type": type(latest).__qualname__, "value": latest.value, "same_class": type(latest) is Sample,
            "refused": refused}
"""


def test_a_sense_reads_a_peer_of_another_group_through_its_typed_table(home) -> None:
    write_instance(home, {
        "cpu-usage": {"group": "system", "code": WRITER},
        "active-tasks": {"group": "tasks", "peers": ["cpu-usage"], "code": READER, "schema": READER_SCHEMA,
                         "migration": 'CREATE TABLE "seen" ("ts" INTEGER PRIMARY KEY);\n'},
    })
    with worker(home, "system") as w:
        assert isinstance(w.compute("cpu-usage"), Signal)
    with worker(home, "tasks") as w:  # another process, which never loaded cpu-usage as a sense
        answer = w.compute("active-tasks")
    assert isinstance(answer, Signal), answer
    assert answer.payload["type"] == "Sample" and answer.payload["value"] == 0.75 and answer.payload["same_class"]
    assert "readonly" in answer.payload["refused"]  # the typed handle is still read-only at the SQLite level
    check = json.loads(cli("config", "check", "--json").stdout)
    assert check["valid"], check["problems"]


def test_one_worker_with_both_senses_shares_one_class_and_a_misspelt_peer_fails_at_load(home) -> None:
    write_instance(home, {
        "cpu-usage": {"group": "g", "code": WRITER},
        "active-tasks": {"group": "g", "peers": ["cpu-usage"], "code": READER, "schema": None, "migration": None},
        "typo": {"group": "g", "code": "from ..cpu_usag.schema import Sample\n\ndef compute(db, peers):\n    return 1\n",
                 "schema": None, "migration": None},
    })
    with worker(home, "g") as w:
        assert isinstance(w.compute("cpu-usage"), Signal)
        answer = w.compute("active-tasks")
        assert isinstance(answer, Signal) and answer.payload["same_class"], answer
        failed = w.compute("typo")
    assert isinstance(failed, Error) and "cpu_usag" in failed.error.message, failed
