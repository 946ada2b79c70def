"""The one-off worker client (`nerve sense compute` without an engine) leaves no process behind."""

from __future__ import annotations

from pathlib import Path

import psutil
from sensekit import worker, write_instance

CODE = """
def compute(db, peers):
    return 1
"""


def _workers() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)
            if "nerve_cli.worker" in " ".join(p.cmdline())}


def test_a_started_client_used_as_a_context_manager_runs_one_worker_and_ends_it(home: Path) -> None:
    write_instance(home, {"one": {"code": CODE, "schema": None, "migration": None}})
    before = _workers()
    with worker(home) as client:  # worker() has started it already: `with` must not start another
        assert _workers() - before == {client.pid}
        assert client.compute("one").payload == 1
    assert _workers() - before == set()
