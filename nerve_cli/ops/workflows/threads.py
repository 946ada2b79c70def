"""Read side of threads for the CLI and the kernel: lists, one thread's story, counts.

Everything here reads logs.db through read-only connections, so it works while
an engine writes.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from nerve_cli.automaton.model import NOT_ROUNDS, is_round
from nerve_cli.automaton.pipeline import step_states
from nerve_cli.automaton.questions import Standing, standings
from nerve_cli.automaton.waits import PersonWait
from nerve_cli.config.load import load_config
from nerve_cli.config.pipeline import PipelineError, pipeline_file, read_pipeline
from nerve_cli.errors import UnknownThread
from nerve_cli.home import Layout
from nerve_cli.store.history import read_logs
from nerve_cli.store.logs import STATUSES, now_ms, open_readonly, query_logs, workflow_runs
from nerve_cli.store.runs import MESSAGE_FIELDS, run_counts
from nerve_cli.vocab.states import ThreadStatus, WaitKind

END_TYPES = tuple(s.value for s in ThreadStatus if not s.live)


def _summaries(logs_path: Path, run_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Prompt, max rounds, rounds used and end reason of each run, in two queries."""
    out: dict[str, dict[str, Any]] = {r: {} for r in run_ids}
    if not run_ids:
        return out
    marks = ",".join("?" * len(run_ids))
    conn = open_readonly(logs_path)
    try:
        rows = conn.execute(
            f"SELECT ref_id, type, json_extract(payload, '$.prompt'), json_extract(payload, '$.max_rounds'), "
            f"coalesce(json_extract(payload, '$.reason'), json_extract(payload, '$.question')), "
            f"json_extract(payload, '$.waiting_for.kind') FROM logs "
            f"WHERE source = 'workflow' AND ref_id IN ({marks}) "
            f"AND type IN ('queued', 'waiting', 'completed', 'failed', 'crashed', 'dropped', 'cancelled') ORDER BY id",
            run_ids)
        for run_id, type_, prompt, max_rounds, reason, waits in rows:
            if type_ == "queued":
                out[run_id].update(prompt=prompt, max_rounds=max_rounds)
                out[run_id].pop("reason", None)  # queued again after an answer: the question is answered
            else:
                out[run_id]["reason"] = reason  # for a waiting thread: its question, or what event it waits for
            # a `waiting` row from before waits were described asked a person
            out[run_id]["waits"] = (waits or WaitKind.PERSON.value) if type_ == "waiting" else None
        # the start message, a person's answers, events and tool notes are not rounds
        not_rounds = ",".join("?" * len(NOT_ROUNDS))
        rows = conn.execute(
            f"SELECT ref_id, COUNT(DISTINCT json_extract(payload, '$.seq')) FROM logs WHERE source = 'workflow' "
            f"AND type = 'message' AND ref_id IN ({marks}) AND json_extract(payload, '$.role') NOT IN ({not_rounds}) "
            f"GROUP BY ref_id", [*run_ids, *NOT_ROUNDS])
        for run_id, rounds in rows:
            out[run_id]["rounds"] = rounds
    finally:
        conn.close()
    return out


def list_threads(logs_path: Path, status: str | None = None, workflow: str | None = None,
                 limit: int | None = None, since_ms: int | None = None,
                 until_ms: int | None = None) -> list[dict[str, Any]]:
    """Threads newest first, with prompt, rounds used/max and the end reason (archived threads too).

    `since_ms`/`until_ms` bound the time of each thread's last status change.
    """
    runs = [r for r in reversed(workflow_runs(logs_path, status=status, workflow=workflow))
            if (since_ms is None or r["ts"] >= since_ms) and (until_ms is None or r["ts"] < until_ms)]
    if limit is not None:
        runs = runs[:limit]
    extra = _summaries(logs_path, [r["run_id"] for r in runs])
    archived = [run_id for run_id, info in extra.items() if "prompt" not in info]
    if archived:  # their rows were moved by `nerve archive`: read them back, as `thread show` does
        extra.update(_archived_summaries(logs_path, archived))
    for run in runs:
        info = extra.get(run["run_id"], {})
        run.update(prompt=info.get("prompt"), max_rounds=info.get("max_rounds"),
                   rounds=info.get("rounds", 0), reason=info.get("reason"),
                   waits=info.get("waits") if run["status"] == ThreadStatus.WAITING.value else None)
    return runs


def _archived_summaries(logs_path: Path, run_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Like `_summaries`, for threads whose `queued` row is only in the archive."""
    wanted = set(run_ids)
    out: dict[str, dict[str, Any]] = {}
    rounds: dict[str, set] = {}
    for row in read_logs(logs_path.parent.parent, source="workflow", since_ms=0).rows:
        run_id, payload = row["ref_id"], row["payload"] or {}
        if run_id not in wanted:
            continue
        info = out.setdefault(run_id, {})
        if row["type"] == "queued":
            info.update(prompt=payload.get("prompt"), max_rounds=payload.get("max_rounds"))
        elif row["type"] in END_TYPES:
            info["reason"] = payload.get("reason")
        elif row["type"] == "message" and is_round(payload.get("role")):
            rounds.setdefault(run_id, set()).add(payload.get("seq"))
    for run_id, seqs in rounds.items():
        out[run_id]["rounds"] = len(seqs)
    return out


def normalise_run_id(text: str) -> str:
    """`7` → `run-7`; anything else unchanged."""
    return f"run-{text}" if text.isdigit() else text


def unknown_run(logs_path: Path, run_id: str) -> UnknownThread:
    ids = [r["run_id"] for r in workflow_runs(logs_path)]
    if not ids:
        return UnknownThread(f"no thread {run_id}: this instance has no threads yet "
                          "(start one with `nerve workflow run NAME --prompt TEXT`)")
    near = difflib.get_close_matches(run_id, ids, n=2, cutoff=0.8)
    recent = list(reversed(ids[-5:]))
    hint = f"did you mean {', '.join(near)}? " if near else ""
    return UnknownThread(f"no thread {run_id}: {hint}most recent: {', '.join(recent)} "
                      "(see `nerve thread list`)")


def thread_detail(logs_path: Path, run_id: str) -> dict[str, Any]:
    """One thread's story from its log rows: header fields, events and the full chain."""
    run_id = normalise_run_id(run_id)
    rows = query_logs(logs_path, source="workflow", ref=run_id)
    if not any(r["type"] == "queued" for r in rows):
        rows = _with_archive(logs_path, run_id)
    if not rows:
        raise unknown_run(logs_path, run_id)
    # a row whose payload is not an object (damaged, or written by hand) is named and passed over
    damaged = [r["id"] for r in rows if r["payload"] is not None and not isinstance(r["payload"], dict)]
    rows = [r if isinstance(r["payload"], dict) else {**r, "payload": None} for r in rows]
    events = [r for r in rows if r["type"] != "message"]
    queued = next((r["payload"] or {} for r in events if r["type"] == "queued"), {})
    statuses = [r for r in events if r["type"] in STATUSES]  # role_failed rows tell the story, not the status
    status_row = statuses[-1] if statuses else None
    started = next((r for r in events if r["type"] == "started"), None)
    ended = next((r for r in reversed(events) if r["type"] in END_TYPES), None)
    if ended is not None and status_row is not ended:
        ended = None  # resumed or requeued after an end: not over
    chain = _chain(rows)
    end_payload = (ended or {}).get("payload") or {}
    waiting = status_row if status_row is not None and status_row["type"] == ThreadStatus.WAITING else None
    now = now_ms()
    return {
        "run_id": run_id,
        "workflow": (status_row["payload"] or {}).get("workflow") if status_row else None,
        "status": status_row["type"] if status_row else "unknown",
        "prompt": queued.get("prompt"),
        "max_rounds": queued.get("max_rounds"),
        "rounds": sum(1 for m in chain if is_round(m["role"])),
        "origin": queued.get("origin"),
        "queued_ts": events[0]["ts"] if events else None,
        "started_ts": started["ts"] if started else None,
        "ended_ts": ended["ts"] if ended else None,
        "duration_ms": ((ended["ts"] if ended else now) - started["ts"]) if started else None,
        "reason": end_payload.get("reason"),
        "error": end_payload.get("error"),
        # a waiting thread: what it asks a person, what it waits for and since when (None otherwise)
        "question": _question(waiting, chain),
        "waiting_for": _waiting_for(waiting, chain),
        "waiting_since_ts": waiting["ts"] if waiting else None,
        "events": [{"type": r["type"], "ts": r["ts"], "payload": r["payload"] or {}} for r in events],
        "messages": chain,
        "steps": pipeline_steps(logs_path.parent.parent, (status_row["payload"] or {}).get("workflow")
                                if status_row else None, chain),
        "damaged_rows": damaged,
    }


def _open(chain: list[dict[str, Any]]) -> list[Standing] | None:
    try:
        found = standings(chain)
    except ValueError:  # a message edited by hand: the waiting row's own account is shown
        return None
    return None if found is None else [s for s in found if s.open]


def _question(waiting: dict | None, chain: list[dict[str, Any]]) -> str | None:
    """The question the thread waits on: the chain's open ones (answered ones drop out as votes come)."""
    if waiting is None:
        return None
    open_ = _open(chain)
    return PersonWait.of([s.question for s in open_]).question if open_ else (waiting["payload"] or {}).get("question")


def _waiting_for(waiting: dict | None, chain: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What the thread waits for; for a person, each open question with its id and who approved it so far."""
    if waiting is None:
        return None
    given = (waiting["payload"] or {}).get("waiting_for")
    open_ = _open(chain)
    if not open_:
        return given
    wait = PersonWait.of([s.question for s in open_])
    out = {**wait.to_dict(), "description": wait.describe()}
    for item, s in zip(out["questions"], open_):
        item["approvals"] = list(s.approvals)
    return out


def pipeline_steps(home: Path, workflow: str | None, chain: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """A pipeline thread's steps, each with its state read from the chain (None for any other thread, or when
    its pipeline file no longer reads: the steps are what the file says now)."""
    path = pipeline_file(home, workflow) if workflow else None
    if path is None:
        return None
    try:
        pipeline = read_pipeline(path)
    except PipelineError:
        return None
    states = {s.id: s for s in step_states(pipeline, chain)}
    return [{"id": s.id, "title": s.title, "who": s.who, "needs": list(s.needs), "risk": s.risk,
             "irreversible": s.irreversible, "gate": pipeline.why_gated(s) if pipeline.gated(s) else None,
             "state": states[s.id].state, "round": states[s.id].round, "why": states[s.id].why}
            for s in pipeline.steps]


def _with_archive(logs_path: Path, run_id: str) -> list[dict]:
    """All of a thread's rows when its start is no longer in logs.db (`nerve archive` moved those days)."""
    home = logs_path.parent.parent  # data/logs.db
    return read_logs(home, source="workflow", ref=run_id, since_ms=0).rows


def _chain(rows: list[dict]) -> list[dict[str, Any]]:
    """Message rows in seq order, first row per seq; each with its round (None for the start and a person's answer)."""
    by_seq: dict[int, dict[str, Any]] = {}
    for row in rows:
        payload = row["payload"] or {}
        seq = payload.get("seq")
        if row["type"] == "message" and isinstance(seq, int) and seq not in by_seq:
            message = {k: payload.get(k) for k in MESSAGE_FIELDS}
            stamp = message["timestamp"] if isinstance(message["timestamp"], int) else row["ts"]
            by_seq[seq] = {"seq": seq, **message, "ts": stamp}
    chain, rounds = [], 0
    for seq in sorted(by_seq):
        message = by_seq[seq]
        rounds += 1 if is_round(message["role"]) else 0
        chain.append({"seq": seq, "round": rounds if is_round(message["role"]) else None, **message})
    return chain


def workflows_overview(home: Path) -> list[dict[str, Any]]:
    """Each workflow in nerve.yaml with its settings, whether its file exists and thread counts by status."""
    layout = Layout(Path(home))
    config = load_config(layout.home)
    counts = run_counts(layout.logs_db)
    out = []
    for name, cfg in config.workflows.items():
        out.append({"name": name, **cfg.model_dump(), "file": f"workflows/{name}.py",
                    "file_exists": layout.workflow_file(name).is_file(), "threads": counts.get(name, {})})
    for name in sorted(set(counts) - set(config.workflows)):  # threads of a workflow since removed
        out.append({"name": name, "removed": True, "threads": counts[name]})
    return out
