"""Documents about the instance folder: `config check`, `mesh`, `archive`."""

from __future__ import annotations

from typing import Any

from nerve_cli.contract import VERSION


def config_check(report: Any) -> dict[str, Any]:
    """`config.check.CheckReport`: every problem at once, the external channels, what was counted."""
    return {"version": VERSION, "valid": report.valid, "problems": [p.to_dict() for p in report.problems],
            "channels": [c.to_dict() for c in report.channels], "counts": dict(report.counts)}


def mesh(graph: Any) -> dict[str, Any]:
    """`config.mesh.Mesh`: nodes (each with its `id`), edges between ids, whether launches could be read from the log."""
    data = graph.to_dict()
    return {"version": VERSION, "nodes": data["nodes"], "edges": data["edges"],
            "launches_observed": data["launches_observed"]}


def archive(report: Any) -> dict[str, Any]:
    """`store.archive_report.ArchiveReport`; days are whole UTC days, `YYYY-MM-DD`."""
    return {
        "version": VERSION, "up_to": report.up_to, "dry_run": report.dry_run, "rows": report.rows, "ok": report.ok,
        "databases": [_database(d) for d in report.databases],
    }


def backup(report: Any) -> dict[str, Any]:
    """`instance.backup.BackupReport`: where the copy went and what it holds."""
    return {"version": VERSION, "dest": str(report.dest),
            "databases": [{"path": str(d["path"]), "bytes": d["bytes"]} for d in report.databases],
            "files": report.files, "bytes": report.bytes}


def _database(d: Any) -> dict[str, Any]:
    data = d.as_dict()
    return {"name": data.pop("database"), **data}
