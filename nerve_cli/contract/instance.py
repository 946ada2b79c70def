"""Documents about the instance folder: `config check`, `mesh`, `archive`."""

from __future__ import annotations

from typing import Any

from nerve_cli.contract import VERSION
from nerve_cli.contract.times import stamp


def config_check(report: Any) -> dict[str, Any]:
    """`config.check.CheckReport`: every problem at once, the external channels, what was counted, the `on:`
    patterns with what each matches today."""
    return {"version": VERSION, "valid": report.valid, "problems": [p.to_dict() for p in report.problems],
            "channels": [c.to_dict() for c in report.channels], "counts": dict(report.counts),
            "patterns": [p.to_dict() for p in report.patterns]}


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


def gc(result: Any) -> dict[str, Any]:
    """`senses.gc.GcResult`: what `nerve gc` removed (or, with --dry-run, would remove) and what it kept."""
    return {"version": VERSION, "older_than_s": result.older_than, "dry_run": result.dry_run,
            "items": [i.to_dict() for i in result.items], "kept": [{"message": k} for k in result.kept],
            "bytes": result.freed, "commit": result.sha,
            "young": [{"kind": y.kind, "what": y.what, "why": y.why, "bytes": y.bytes, "age_s": y.age,
                       **stamp("collectable", y.collectable_at * 1000)} for y in result.young],
            "young_older_than_s": result.takes_young}


def deleted(d: Any, home: Any) -> dict[str, Any]:
    """`senses.remove.Deleted`: a sense or workflow moved to the attic, and what its disable turned off."""
    return {"version": VERSION, "kind": d.kind, "name": d.name,
            "moved_from": d.moved_from.relative_to(home).as_posix(), "moved_to": d.moved_to.relative_to(home).as_posix(),
            "disabled": [i.to_dict() for i in d.plan.items], "dry_run": d.dry_run, "commit": d.sha}


def renamed(r: Any) -> dict[str, Any]:
    """`senses.rename.Renamed`: what moved, what nerve.yaml now says, code that still names the old sense."""
    return {"version": VERSION, "old": r.old, "new": r.new,
            "moved": [dict(zip(("from", "to"), m.split(" → "))) for m in r.moved],
            "nerve_yaml": [{"change": c} for c in r.config],
            "cursors": [{"listener": name, "from": r.old, "to": r.new} for name in r.cursors],
            "mentions": [{"file": f, "line": int(n)} for f, _, n in (m.rpartition(":") for m in r.mentions)],
            "engine": r.engine, "commit": r.sha}


def service(state: Any) -> dict[str, Any]:
    """`instance.service.ServiceState`: the unit for this instance and whether the engine answers."""
    return {"version": VERSION, "platform": state.unit.platform, "name": state.unit.name, "path": str(state.unit.path),
            "installed": state.installed, "enabled": state.enabled, "active": state.active,
            "engine_running": state.engine, "problem": state.problem}


def deps(python: str, requirements: list[Any]) -> dict[str, Any]:
    """`instance.deps.check`: each requirements.txt line against the interpreter the workers use."""
    return {"version": VERSION, "python": python, "ok": all(r.ok for r in requirements),
            "requirements": [r.to_dict() for r in requirements]}
