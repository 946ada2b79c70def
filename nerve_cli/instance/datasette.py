"""`nerve datasette`: the instance's databases in Datasette, engine tables hidden, columns labelled, canned queries.

Datasette opens the WAL databases live without blocking the engine. This
module only decides *what* to open and writes the metadata; Datasette itself
is an optional install, found in this interpreter or on PATH.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from nerve_cli.errors import NerveError
from nerve_cli.home import Layout

METADATA_FILE = "datasette-metadata.json"
TS = "when it happened, unix milliseconds (UTC); the *_view views show it as `time`"
TIME = "ts as ISO-8601 UTC text"

LOGS_TABLES: dict[str, Any] = {
    "logs": {"description": "The engine's append-only log: computes, errors, workers, workflow threads.",
             "sort_desc": "id",
             "columns": {"source": "reflex (computes), system (engine, workers, errors), workflow (threads), "
                                   "signal (external channels)",
                         "type": "what happened, e.g. run_complete, error, worker_started, message",
                         "ref_id": "the sense, worker group, channel or thread (run-N) it is about",
                         "payload": "details as JSON", "ts": TS}},
    "workflow_runs": {"description": "Each workflow thread's current status (rebuilt from logs by `nerve doctor`).",
                      "columns": {"run_id": "thread id", "status": "queued, started, completed, failed, crashed, "
                                  "dropped", "ts": "last status change, unix ms"}},
    "logs_view": {"description": "logs with a readable time column", "sort_desc": "id",
                  "columns": {"time": TIME}},
    "workflow_runs_view": {"description": "workflow_runs with a readable time column", "columns": {"time": TIME}},
    "meta": {"hidden": True},
    "sqlite_sequence": {"hidden": True},
}

SENSE_TABLES: dict[str, Any] = {
    "signals_view": {"description": "Every signal this sense emitted, with a readable time column",
                     "sort_desc": "id", "columns": {"time": TIME, "payload": "the value compute returned, as JSON",
                                                    "ts": TS}},
    **{name: {"hidden": True} for name in ("_signals", "_migrations", "_nerve_archive", "_nerve_meta",
                                           "_nerve_cursors", "sqlite_sequence")},
}

EVENTS_TABLES: dict[str, Any] = {
    "events_view": {"description": "Every external event (`nerve emit`), committed before it was acknowledged",
                    "sort_desc": "id", "columns": {"time": TIME, "channel": "the channel it was sent to",
                                                   "payload": "its payload, as JSON",
                                                   "key": "the sender's idempotency key, if any",
                                                   "origin": "the fleet host it was received from (empty: "
                                                             "emitted on this host)", "ts": TS}},
    **{name: {"hidden": True} for name in ("_nerve_archive", "_nerve_meta", "sqlite_sequence")},
}

QUERIES = {
    "recent_errors": {
        "title": "Recent errors",
        "description": "The last 100 errors: compute failures, timeouts, lost computes, load failures.",
        "sql": "SELECT time, ref_id AS sense, json_extract(payload, '$.error_type') AS error_type, "
               "json_extract(payload, '$.message') AS message, "
               "json_extract(payload, '$.file') || ':' || json_extract(payload, '$.line') AS location "
               "FROM logs_view WHERE source = 'system' AND type = 'error' ORDER BY id DESC LIMIT 100",
    },
    "slowest_senses": {
        "title": "Slowest senses",
        "description": "Computes per sense with their mean and longest duration, slowest first.",
        "sql": "SELECT ref_id AS sense, COUNT(*) AS computes, "
               "ROUND(AVG(json_extract(payload, '$.duration_ms')), 3) AS mean_ms, "
               "MAX(json_extract(payload, '$.duration_ms')) AS max_ms, "
               "SUM(json_extract(payload, '$.outcome') IN ('error', 'timeout', 'lost')) AS failures "
               "FROM logs WHERE source = 'reflex' AND type = 'run_complete' GROUP BY ref_id ORDER BY mean_ms DESC",
    },
    "threads_by_status": {
        "title": "Threads by status",
        "description": "How many workflow threads are in each status, per workflow.",
        "sql": "SELECT workflow, status, COUNT(*) AS threads, MAX(time) AS last_change FROM workflow_runs_view "
               "GROUP BY workflow, status ORDER BY workflow, threads DESC",
    },
}


def databases(layout: Layout) -> list[Path]:
    """logs.db first, events.db, then every sense database, by name."""
    found = [db for db in (layout.logs_db, layout.events_db) if db.is_file()]
    if layout.sense_data.is_dir():
        found += sorted(layout.sense_data.glob("*.db"))
    return found


def names(paths: list[Path]) -> dict[Path, str]:
    """The name Datasette gives each database it is handed, in order: the file's stem, then stem_2, stem_3...
    when taken (its own rule), so a sense called `logs` or `events` gets its metadata, not the engine's."""
    named: dict[Path, str] = {}
    for path in paths:
        name, n = path.stem, 2
        while name in named.values():
            name, n = f"{path.stem}_{n}", n + 1
        named[path] = name
    return named


def metadata(layout: Layout) -> dict[str, Any]:
    """Datasette metadata for the instance: titles, hidden engine tables, labelled columns, canned queries."""
    dbs: dict[str, Any] = {}
    for path, name in names(databases(layout)).items():
        if path == layout.logs_db:
            dbs[name] = {"description": "The engine's log and workflow threads", "tables": LOGS_TABLES,
                         "queries": QUERIES}
        elif path == layout.events_db:
            dbs[name] = {"description": "External events sent to channels", "tables": EVENTS_TABLES}
        else:
            dbs[name] = {"description": f"Sense {path.stem}: its own tables and its signals",
                         "tables": SENSE_TABLES}
    return {"title": f"Nerve · {layout.home.name}", "description": f"Nerve instance at {layout.home}",
            "databases": dbs}


def command(layout: Layout, host: str, port: int, extra: list[str]) -> list[str]:
    """The datasette command line; writes data/datasette-metadata.json. Refuses when there is nothing to show."""
    found = databases(layout)
    if not found:
        raise NerveError(f"{layout.data} has no databases yet: start the engine (`nerve run`) or compute a sense "
                         "(`nerve sense compute NAME`) first")
    path = layout.data / METADATA_FILE
    path.write_text(json.dumps(metadata(layout), indent=2), encoding="utf-8")
    return [*executable(), "serve", *map(str, found), "--metadata", str(path), "--host", host,
            "--port", str(port), *extra]


def executable() -> list[str]:
    """Datasette from this interpreter when installed beside Nerve, else from PATH."""
    if importlib.util.find_spec("datasette") is not None:
        return [sys.executable, "-m", "datasette"]
    found = shutil.which("datasette")
    if found:
        return [found]
    raise NerveError("Datasette is not installed: `pip install datasette` in Nerve's environment "
                     "(or `pipx install datasette`), then run `nerve datasette` again")
