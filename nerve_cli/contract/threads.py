"""Documents about workflows and threads: `workflow list`, `workflow run` lines, `thread list|show`, `doctor`."""

from __future__ import annotations

from typing import Any

from nerve_cli.config.model import WorkflowConfig
from nerve_cli.contract import VERSION
from nerve_cli.contract.settings import settings
from nerve_cli.contract.times import stamp

START = "__start__"


def workflow_list(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """`workflows.threads.workflows_overview` rows; a workflow removed from nerve.yaml keeps its thread counts."""
    out = []
    for r in rows:
        if r.get("removed"):
            out.append({"name": r["name"], "removed": True, "config": None, "file": None, "file_exists": False,
                        "threads": dict(r["threads"])})
            continue
        config = {k: v for k, v in r.items() if k in WorkflowConfig.model_fields}
        out.append({"name": r["name"], "removed": False, "config": settings(WorkflowConfig, config),
                    "file": r["file"], "file_exists": r["file_exists"], "threads": dict(r["threads"])})
    return {"version": VERSION, "workflows": out}


def thread_summary(run: dict[str, Any]) -> dict[str, Any]:
    return {"run_id": run["run_id"], "workflow": run["workflow"], "status": run["status"],
            **stamp("updated", run["ts"]), "prompt": run.get("prompt"), "max_rounds": run.get("max_rounds"),
            "rounds": run.get("rounds", 0), "reason": run.get("reason")}


def thread_list(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Threads newest first (`workflows.threads.list_threads`); archived threads included."""
    return {"version": VERSION, "threads": [thread_summary(r) for r in runs]}


def message(m: dict[str, Any]) -> dict[str, Any]:
    """One link of a thread's chain; `round` is null for the start message and a person's answer."""
    return {"seq": m["seq"], "round": m["round"], "role": m["role"], "content": m["content"],
            "meta": m.get("meta") or {}, **stamp("time", m["ts"])}


def thread_show(d: dict[str, Any]) -> dict[str, Any]:
    """`workflows.threads.thread_detail` → the `thread show` document."""
    return {
        "version": VERSION, "run_id": d["run_id"], "workflow": d["workflow"], "status": d["status"],
        "prompt": d["prompt"], "max_rounds": d["max_rounds"], "rounds": d["rounds"], "origin": d["origin"],
        **stamp("queued", d["queued_ts"]), **stamp("started", d["started_ts"]), **stamp("ended", d["ended_ts"]),
        "duration_s": None if d["duration_ms"] is None else d["duration_ms"] / 1000,
        "reason": d["reason"], "error": d["error"],
        # a thread waiting for a person: its question and since when (null otherwise)
        "question": d.get("question"), **stamp("waiting_since", d.get("waiting_since_ts")),
        "events": [{"type": e["type"], **stamp("time", e["ts"]), "detail": e["payload"]} for e in d["events"]],
        "messages": [message(m) for m in d["messages"]],
        # a pipeline thread: its steps with the state the chain gives each (null for other threads)
        "steps": d.get("steps"),
    }


def answer(result: dict[str, Any]) -> dict[str, Any]:
    """`thread approve|reject`: the answer given, and whether the thread resumed now (engine) or later (offline)."""
    return {"version": VERSION, "run_id": result["run_id"], "decision": result["decision"],
            "status": result["status"], "via": result["via"]}


def round_line(run_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """`workflow run --json`: one line per round, from the round's `message` log payload."""
    return {"version": VERSION, "event": "round", "run_id": run_id, "round": payload.get("round"),
            "role": payload.get("role"), "content": payload.get("content"), "meta": payload.get("meta") or {},
            **stamp("time", payload.get("timestamp"))}


def outcome_line(result: dict[str, Any], rounds: int) -> dict[str, Any]:
    """`workflow run --json`: the last line, how the thread ended (`interrupted` when this command was stopped)."""
    return {"version": VERSION, "event": "outcome", "run_id": result.get("run_id"), "status": result["status"],
            "reason": result.get("reason"), "rounds": rounds, "via": result.get("via")}


def doctor(report: Any, code_problems: list[Any] | None = None, models: tuple[Any, Any] | None = None) -> dict[str, Any]:
    """`workflows.rebuild.DoctorReport`: workflow_runs compared with the logs (archived days included),
    `code_problems`: what would not load (drift included), each like a `config check` problem, and `llm`:
    the llm environment here and the running engine's (null when none runs)."""
    here, engine = models if models is not None else (None, None)
    return {"version": VERSION, "runs": report.runs, "fixed": report.fixed,
            "code_problems": [p.to_dict() for p in code_problems or []],
            "llm": {"here": here.to_json() if here is not None else None,
                    "engine": engine.to_json() if engine is not None else None,
                    "same": None if here is None or engine is None else engine.same_models(here)},
            "differences": [{"run_id": d.run_id, "field": d.field, "workflow_runs": d.table, "logs": d.logs}
                            for d in report.differences],
            "unknown_kinds": [{"source": u.source, "type": u.type, "rows": u.rows} for u in report.unknown]}
