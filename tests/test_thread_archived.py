"""A thread whose rows were archived is still shown by `nerve thread show`."""

from __future__ import annotations

import json
import time
from pathlib import Path

from typer.testing import CliRunner

from nerve_cli.cli.app import app
from nerve_cli.store.archive import archive
from nerve_cli.store.logs import LogStore


def test_thread_show_reads_archived_rows(home: Path) -> None:
    (home / "data").mkdir(parents=True)
    (home / "nerve.yaml").write_text("workflows:\n  review: {}\n")
    old = int((time.time() - 60 * 86400) * 1000)
    store = LogStore(home / "data" / "logs.db")
    run = store.allocate_run_id()
    store.workflow_event(run, "review", "queued", {"workflow": "review", "prompt": "old news", "max_rounds": 3}, ts=old)
    store.workflow_event(run, "review", "started", {"workflow": "review"}, ts=old + 1)
    for seq, role in enumerate(["__start__", "author"]):
        message = {"role": role, "content": f"m{seq}", "meta": {}, "timestamp": old + 2 + seq, "seq": seq}
        store.workflow_event(run, "review", "message", message, ts=old + 2 + seq)
    store.workflow_event(run, "review", "completed", {"workflow": "review", "reason": "end"}, ts=old + 5)
    store.close()
    report = archive(home, older_than_s=30 * 86400, vacuum=False)
    assert report.rows == 5

    result = CliRunner().invoke(app, ["thread", "show", run, "--json", "--home", str(home)])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["status"] == "completed" and shown["prompt"] == "old news"
    assert [m["role"] for m in shown["messages"]] == ["__start__", "author"]
