"""`nerve datasette`: the instance's databases in Datasette, engine tables hidden, columns labelled, canned queries.

Datasette opens the WAL databases live without blocking the engine. This
module only decides *what* to open and writes the metadata; Datasette itself
is an optional install, found in this interpreter or on PATH.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import sqlite3
import subprocess
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
                      "columns": {"run_id": "thread id", "status": "queued, started, waiting, completed, failed, "
                                  "crashed, dropped, cancelled", "ts": "last status change, unix ms"}},
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
                                           "_nerve_cursors", "_nerve_identity", "_nerve_feed", "_nerve_bindings",
                                           "sqlite_sequence")},
}

EVENTS_TABLES: dict[str, Any] = {
    "events_view": {"description": "Every external event (`nerve emit`), committed before it was acknowledged",
                    "sort_desc": "id", "columns": {"time": TIME, "channel": "the channel it was sent to",
                                                   "payload": "its payload, as JSON",
                                                   "key": "the sender's idempotency key, if any",
                                                   "origin": "the fleet host it was received from (empty: "
                                                             "emitted on this host)", "ts": TS}},
    **{name: {"hidden": True} for name in ("_nerve_archive", "_nerve_meta", "_nerve_identity", "file_state",
                                           "file_watches", "sqlite_sequence")},
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


def _engine_tables(path: Path) -> list[str]:
    """The engine's own tables a database holds (named with a leading `_`) that the lists above do not name:
    hidden too, whatever a later version adds."""
    try:
        conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
        try:
            found = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE '\\_%' "
                                                "ESCAPE '\\'")]
        finally:
            conn.close()
    except sqlite3.Error:
        return []
    return [t for t in found if t not in SENSE_TABLES and t not in EVENTS_TABLES and t not in LOGS_TABLES]


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
        for table in _engine_tables(path):  # Datasette 0.65 shows what no list names; 1.0 hides `_` tables itself
            dbs[name]["tables"] = {**dbs[name]["tables"], table: {"hidden": True}}
    return {"title": f"Nerve · {layout.home.name}", "description": f"Nerve instance at {layout.home}",
            "databases": dbs}


CONFIG_FILE = "datasette-config.json"
TABLE_SETTINGS = ("hidden", "sort", "sort_desc", "facets", "sortable_columns", "label_column", "size")


def command(layout: Layout, host: str, port: int, extra: list[str]) -> list[str]:
    """The datasette command line; writes Nerve's metadata (and, for Datasette 1.0, its configuration) under
    data/, merged with the user's own `--metadata FILE` / `-c FILE` (theirs wins where both set a key).
    Refuses when there is nothing to show."""
    found = databases(layout)
    if not found:
        raise NerveError(f"{layout.data} has no databases yet: start the engine (`nerve run`) or compute a sense "
                         "(`nerve sense compute NAME`) first")
    exe = executable()
    one = major_version(exe) >= 1
    rest, theirs = _user_files(extra, config_option=one)
    ours = metadata(layout)
    args: list[str] = []
    if one:  # 1.0 reads queries, table settings and plugins from -c, not from metadata
        described, configured = split_for_1_0(ours)
        args += ["--metadata", _write(layout.data / METADATA_FILE, merged(described, theirs.get("metadata"))),
                 "-c", _write(layout.data / CONFIG_FILE, merged(configured, theirs.get("config")))]
    else:
        args += ["--metadata", _write(layout.data / METADATA_FILE, merged(ours, theirs.get("metadata")))]
    return [*exe, "serve", *map(str, found), *args, "--host", host, "--port", str(port), *rest]


def split_for_1_0(ours: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Nerve's 0.65-style metadata → (metadata: titles, descriptions, columns; config: queries, table settings)."""
    described: dict[str, Any] = {k: v for k, v in ours.items() if k != "databases"}
    configured: dict[str, Any] = {}
    for name, db in ours.get("databases", {}).items():
        meta_db = {k: v for k, v in db.items() if k not in ("tables", "queries")}
        conf_db: dict[str, Any] = {}
        if db.get("queries"):
            conf_db["queries"] = db["queries"]
        for table, spec in db.get("tables", {}).items():
            settings = {k: v for k, v in spec.items() if k in TABLE_SETTINGS}
            about = {k: v for k, v in spec.items() if k not in TABLE_SETTINGS}
            if settings:
                conf_db.setdefault("tables", {})[table] = settings
            if about:
                meta_db.setdefault("tables", {})[table] = about
        described.setdefault("databases", {})[name] = meta_db
        if conf_db:
            configured.setdefault("databases", {})[name] = conf_db
    return described, configured


def merged(ours: dict[str, Any], theirs: dict[str, Any] | None) -> dict[str, Any]:
    """`theirs` over `ours`, object by object: a key both set takes theirs; everything else of both stays."""
    if not theirs:
        return ours
    out = dict(ours)
    for key, value in theirs.items():
        out[key] = merged(out[key], value) if isinstance(out.get(key), dict) and isinstance(value, dict) else value
    return out


def _user_files(extra: list[str], *, config_option: bool) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """The options for Datasette with the user's --metadata/-m (and, for 1.0, --config/-c) files taken out and
    read: they are merged into Nerve's, never passed beside them (Datasette would read only one)."""
    names = {"--metadata": "metadata", "-m": "metadata"}
    if config_option:
        names.update({"--config": "config", "-c": "config"})
    rest: list[str] = []
    found: dict[str, dict[str, Any]] = {}
    items = iter(extra)
    for arg in items:
        option, eq, value = arg.partition("=")
        if option in names:
            path = value if eq else next(items, None)
            if path is None:
                raise NerveError(f"{option} needs a file: `nerve datasette -- {option} FILE`")
            found[names[option]] = merged(found.get(names[option], {}), _read(Path(path), option))
        else:
            rest.append(arg)
    return rest, found


def _read(path: Path, option: str) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise NerveError(f"{option} {path}: cannot read it ({exc.strerror})") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else _yaml(text)
    except ValueError as exc:
        raise NerveError(f"{option} {path}: not JSON or YAML ({exc})") from None
    if not isinstance(data, dict):
        raise NerveError(f"{option} {path}: expected an object of settings at the top")
    return data


def _yaml(text: str) -> Any:
    import yaml  # PyYAML: only `nerve datasette` with a user's YAML file reads one here

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(str(exc)) from None


def _write(path: Path, data: dict[str, Any]) -> str:
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return str(path)


def major_version(exe: list[str]) -> int:
    """Datasette's major version (0 for 0.65, 1 for 1.0a41), asked of the command that will serve."""
    try:
        done = subprocess.run([*exe, "--version"], capture_output=True, text=True, timeout=60)
    except OSError:
        return 0
    match = re.search(r"version (\d+)\.", done.stdout)
    return int(match.group(1)) if match else 0


def executable() -> list[str]:
    """Datasette from $NERVE_DATASETTE (a datasette command, e.g. a pipx install of 1.0), else this
    interpreter's when installed beside Nerve, else the one on PATH."""
    chosen = os.environ.get("NERVE_DATASETTE")
    if chosen:
        return [chosen]
    if importlib.util.find_spec("datasette") is not None:
        return [sys.executable, "-m", "datasette"]
    found = shutil.which("datasette")
    if found:
        return [found]
    raise NerveError("Datasette is not installed: `pip install datasette` in Nerve's environment "
                     "(or `pipx install datasette` and NERVE_DATASETTE=its path), then run `nerve datasette` again")
