"""Documents about senses: `sense list`, `sense show`, and `sense|workflow disable|enable` outcomes."""

from __future__ import annotations

from typing import Any

from nerve_cli.config.model import SenseConfig
from nerve_cli.contract import VERSION
from nerve_cli.contract.settings import settings
from nerve_cli.contract.times import seconds_to_ms, stamp


def summary(s: Any) -> dict[str, Any]:
    """One `senses.inspect.SenseSummary`; `signal_count` includes archived signals."""
    return {"name": s.name, "group": s.group, "enabled": s.enabled, "triggers": list(s.triggers),
            "signal_count": s.signal_count, **stamp("last_signal", s.last_signal_ts),
            "last_payload": s.last_payload}


def sense_list(summaries: list[Any]) -> dict[str, Any]:
    return {"version": VERSION, "senses": [summary(s) for s in summaries]}


def signal(row: dict[str, Any]) -> dict[str, Any]:
    """A stored signal `{"id", "ts", "payload"}` (live or archived) → `{"id", "time_ms", "time", "payload"}`."""
    return {"id": row["id"], **stamp("time", row["ts"]), "payload": row["payload"]}


def read(r: Any) -> dict[str, Any] | None:
    """`ops.senses.read.Read`: how a lazy sense was brought up to date, and its value; None for another sense."""
    if r is None or not (r.lazy or r.params):
        return None
    return {"lazy": r.lazy, "params": list(r.params), "bind": r.bind, "computes": r.computes, "events": r.events,
            "via": r.via, "error": r.error.to_dict() if r.error is not None else None, "more": r.more,
            "value": r.value, **stamp("value_time", r.value_ts),
            "known": [{"params": k["params"], "value": k["value"], **stamp("value_time", k["value_ts"]),
                       **stamp("read", k["ts"])} for k in r.known]}


def sense_show(detail: Any, reading: Any = None) -> dict[str, Any]:
    blocked = None
    if detail.blocked:
        b = detail.blocked
        blocked = {"state": b["state"], **stamp("until", seconds_to_ms(b.get("until"))), "why": b.get("why")}
    return {
        "version": VERSION, **summary(detail.summary),
        "config": settings(SenseConfig, detail.config),
        "peers": list(detail.peers), "readers": list(detail.readers),
        "tables": [{"name": t["name"], "rows": t["rows"], "archived_rows": t.get("archived_rows", 0),
                    "engine": t["engine"], "time_column": t.get("time_column"),
                    "newest": list(detail.recent_rows.get(t["name"], []))}
                   for t in detail.tables],  # `newest`: the sense's own rows (newest first), user data
        "signals": [signal(x) for x in detail.signals],
        "blocked": blocked,
        "load_problem": detail.problem,  # why its code would not load (drift with the fix), else null
        "read": read(reading),
    }


def sense_chart(series: Any) -> dict[str, Any]:
    """`senses.chart.Series`: a sense's numbers against time (archived days included) and the gaps between them."""
    return {
        "version": VERSION, "sense": series.sense, "column": series.column, "archived": series.archived,
        "live": series.live, "skipped": series.skipped,
        "gaps": [{**stamp("from", a), **stamp("to", b)} for a, b in series.gaps],
        "points": [{**stamp("time", t), "value": v} for t, v in series.points],
    }


def lifecycle(outcome: Any, bring_back: Any) -> dict[str, Any]:
    """A `config.lifecycle.Outcome` of `sense|workflow disable|enable`; `bring_back(item)` is the command that undoes one item."""
    plan = outcome.plan
    return {
        "version": VERSION, "kind": plan.kind, "name": plan.name, "enabled": plan.enabled,
        "changed": plan.change_target, "items": [i.to_dict() for i in plan.items],
        "kept_off": [{**i.to_dict(), "disabled_with": root} for i, root in plan.kept_off],
        "still_off": [{**i.to_dict(), "disabled_with": root, "command": bring_back(i)} for i, root in plan.still_off],
        "warnings": list(plan.warnings), "dry_run": outcome.dry_run, "written": outcome.written,
        "commit": outcome.sha,
    }


def paused(result: dict[str, Any]) -> dict[str, Any]:
    """`sense pause|resume`: each sense's new state (paused, resumed, or unchanged), through the engine or offline."""
    return {"version": VERSION, "senses": [{"sense": s["sense"], "status": s["status"], "paused": s["paused"]}
                                           for s in result["senses"]], "via": result["via"]}


def sense_new(home: Any, result: Any) -> dict[str, Any]:
    """`ops.senses.scaffold.NewSense`: what `nerve sense new` wrote (paths relative to the instance) and committed."""
    reflex = {k: v for k, v in (result.reflex or {}).items() if k != "sense"}
    return {"version": VERSION, "name": result.name, "group": result.group, "recipe": result.recipe,
            "enabled": result.enabled, "reflex": reflex,
            "files": [str(p.relative_to(home)) for p in result.files],
            "migration": str(result.migration.relative_to(home)) if result.migration else None,
            "commit": result.commit, "notes": list(result.notes)}


def migrate(home: Any, results: list[Any], commit: str | None) -> dict[str, Any]:
    """`schema.instance.SenseMigration`s of `nerve sense migrate`: the file each sense got (or none), and the commit."""
    return {"version": VERSION, "commit": commit,
            "senses": [{"sense": r.sense, "file": str(r.path.relative_to(home)) if r.path else None,
                        "statements": r.statements, "changes": list(r.changes), "error": r.error}
                       for r in results]}
