"""Documents about workflows and threads: `workflow list`, `workflow run` lines, `thread list|show`, `doctor`."""

from __future__ import annotations

from typing import Any

from nerve_cli.config.model import WorkflowConfig
from nerve_cli.contract import VERSION
from nerve_cli.contract.settings import settings
from nerve_cli.contract.times import stamp
from nerve_cli.vocab.states import WaitKind

START = "__start__"
PERSON = "__person__"  # the roles of messages that are not rounds (workflow.model, which this layer cannot import)
EVENT = "__event__"
TOOL = "__tool__"


def speaker(message: dict[str, Any]) -> str:
    """How a message's author is shown: a role's name, `person (approve)` for a person's answer,
    `event ci.done` for the event that resumed a wait (`event ci.done (timed out)`), `tool call`."""
    meta = message.get("meta") or {}
    if message.get("role") == PERSON:
        return f"person ({meta.get('decision', 'answer')})"
    if message.get("role") == EVENT:
        return f"event {meta.get('source', '?')}" + (" (timed out)" if meta.get("timed_out") else "")
    if message.get("role") == TOOL:
        return "tool call"
    return str(message.get("role"))


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
            "rounds": run.get("rounds", 0), "reason": run.get("reason"), "waits": run.get("waits")}


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
        # a waiting thread: a person's question, what it waits for and since when (null otherwise)
        "question": d.get("question"), "waiting_for": waiting_for(d),
        **stamp("waiting_since", d.get("waiting_since_ts")),
        "events": [{"type": e["type"], **stamp("time", e["ts"]), "detail": e["payload"]} for e in d["events"]],
        "messages": [message(m) for m in d["messages"]],
        # a pipeline thread: its steps with the state the chain gives each (null for other threads)
        "steps": d.get("steps"),
        # ids of the thread's log rows whose payload is not an object (damaged): shown without them
        "damaged_rows": d.get("damaged_rows", []),
    }


def waiting_for(d: dict[str, Any]) -> dict[str, Any] | None:
    """What a waiting thread waits for: {kind: person, question, schema} or {kind: event, source, match, times}."""
    wait = d.get("waiting_for")
    if not isinstance(wait, dict):
        # a `waiting` row written before waits were described: it asked a person
        asked = d.get("question") is not None
        return {"kind": WaitKind.PERSON.value, "question": d["question"], "schema": None} if asked else None
    if wait.get("kind") == WaitKind.TIME:
        seconds = wait.get("seconds")
        since = d.get("waiting_since_ts")
        until = since + round(seconds * 1000) if isinstance(seconds, (int, float)) and since is not None else None
        return {"kind": WaitKind.TIME.value, "seconds": seconds, **stamp("until", until),
                "description": str(wait.get("description") or "")}
    if wait.get("kind") != WaitKind.EVENT:
        schema = wait.get("schema") if isinstance(wait.get("schema"), dict) else None
        questions = wait.get("questions") if isinstance(wait.get("questions"), list) else []
        return {"kind": WaitKind.PERSON.value, "question": wait.get("question") or d.get("question") or "", "schema": schema,
                "questions": questions}
    timeout, since = wait.get("timeout_s"), d.get("waiting_since_ts")
    until = since + round(timeout * 1000) if timeout is not None and since is not None else None
    match = wait.get("match") if isinstance(wait.get("match"), dict) else {}
    return {"kind": WaitKind.EVENT.value, "source": wait.get("source"), "match": match, "timeout_s": timeout,
            **stamp("since", wait.get("since_ms")), **stamp("until", until),
            "description": str(wait.get("description") or wait.get("source"))}


def answer(result: dict[str, Any]) -> dict[str, Any]:
    """`thread approve|reject`: the answer given, and whether the thread resumed now (engine) or later (offline)."""
    return {"version": VERSION, "run_id": result["run_id"], "decision": result["decision"],
            "status": result["status"], "via": result["via"],
            **{k: result[k] for k in ("answered", "settled", "open", "resumes") if k in result}}


def thread_link(made: dict[str, Any]) -> dict[str, Any]:
    """`thread link`: the URL, what it answers, as whom, until when."""
    return {"version": VERSION, "url": made["url"], "run_id": made["run_id"], "question": made["question"],
            "questions": list(made["questions"]), "by": made["by"], **stamp("expires", made["expires_at"] * 1000)}


def cancelled(result: dict[str, Any]) -> dict[str, Any]:
    """`thread cancel`: cancelled now, or (a running thread) being cancelled on its worker."""
    return {"version": VERSION, "run_id": result["run_id"], "status": result["status"], "was": result["was"],
            "via": result["via"]}


def paused(result: dict[str, Any]) -> dict[str, Any]:
    """`thread pause|resume`: paused now or once its round ends (pausing); resumed: started, queued or waiting."""
    return {"version": VERSION, "run_id": result["run_id"], "status": result["status"],
            "was": result.get("was", "paused"), "via": result["via"]}


def rerun(result: dict[str, Any]) -> dict[str, Any]:
    """`thread rerun`: the new thread, started or queued."""
    return {"version": VERSION, "run_id": result["run_id"], "status": result["status"],
            "rerun_of": result["rerun_of"], "via": result["via"]}


def workflow_check(report: Any) -> dict[str, Any]:
    """`ops.workflows.check.WorkflowCheck`: each workflow checked, and every problem (config-check's shape)."""
    return {"version": VERSION, "valid": report.valid, "workflows": [dict(w) for w in report.workflows],
            "problems": [p.to_dict() for p in report.problems]}


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
            "unknown_kinds": [{"source": u.source, "type": u.type, "rows": u.rows} for u in report.unknown],
            "damaged": [{"database": path, "problem": why} for path, why in report.damaged]}
