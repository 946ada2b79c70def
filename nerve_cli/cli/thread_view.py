"""Rendering of threads and workflows: live rounds, `thread show`, lists, doctor differences."""

from __future__ import annotations

import json
from typing import Any

from nerve_cli.cli import output
from nerve_cli.contract.threads import EVENT, PERSON, TOOL, speaker
from nerve_cli.contract.times import elapsed
from nerve_cli.vocab.states import WaitKind
from nerve_cli.words import plural

START = "__start__"
STATUS_STYLE = {"completed": "green", "failed": "red", "crashed": "red", "dropped": "yellow", "cancelled": "yellow",
                "paused": "magenta", "started": "cyan", "queued": "blue", "waiting": "magenta"}


def who(message: dict) -> str:
    """How a message's author is shown (contract.threads.speaker)."""
    return speaker(message)


def compact(meta: Any) -> str:
    return "" if not meta else json.dumps(meta, ensure_ascii=False, separators=(", ", ": "))


# meta keys a model-backed role writes (llm_role), shown as one line instead of raw JSON
MODEL_KEYS = ("model", "usage", "duration_ms", "cost", "conversation_id")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def model_line(meta: Any) -> str:
    """`echo · 12→48 tokens · 0.8s · $0.0012` from a message's meta; "" when it has none of these fields."""
    if not isinstance(meta, dict):
        return ""
    parts = []
    if isinstance(meta.get("model"), str):
        parts.append(meta["model"])
    usage: dict = meta["usage"] if isinstance(meta.get("usage"), dict) else {}
    if _number(usage.get("input")) or _number(usage.get("output")):
        parts.append(f"{usage.get('input') if _number(usage.get('input')) else '?'}→"
                     f"{usage.get('output') if _number(usage.get('output')) else '?'} tokens")
    if parts and _number(meta.get("duration_ms")):
        parts.append(elapsed(meta["duration_ms"] / 1000))
    if _number(meta.get("cost")):
        parts.append(f"${meta['cost']:.4f}")
    return " · ".join(parts)


def rest_of(meta: Any) -> Any:
    """The meta without the fields model_line shows (when it shows them)."""
    if not isinstance(meta, dict) or not model_line(meta):
        return meta
    return {k: v for k, v in meta.items() if k not in MODEL_KEYS}


def totals(messages: list[dict]) -> str:
    """`3 model calls · 120→340 tokens · $0.0030` over a thread's model-backed messages; "" when none."""
    metas: list[dict] = [m["meta"] for m in messages if isinstance(m.get("meta"), dict) and m["meta"].get("model")]
    if not metas:
        return ""
    usage: list[dict] = [m["usage"] if isinstance(m.get("usage"), dict) else {} for m in metas]
    tokens_in = sum(u["input"] for u in usage if _number(u.get("input")))
    tokens_out = sum(u["output"] for u in usage if _number(u.get("output")))
    line = f"{len(metas)} model call{'s' if len(metas) != 1 else ''} · {tokens_in}→{tokens_out} tokens"
    costs = [m["cost"] for m in metas if _number(m.get("cost"))]
    return line + (f" · ${sum(costs):.4f}" if costs else "")


def live_event(run_id: str, type_: str, payload: dict) -> None:
    """One line (or block) per event while a thread runs."""
    from rich.text import Text

    if type_ == "message" and payload.get("role") == START:
        output.info(f"{run_id} started: max {plural(payload.get('meta', {}).get('maxRounds'), 'round')}", style="bold")
    elif type_ == "message" and payload.get("role") in (PERSON, EVENT, TOOL):
        output.info(f"{who(payload)}: {payload.get('content')}", style="magenta")
    elif type_ == "message":
        head = Text(f"#{payload.get('round')} ", style="bold") + Text(str(payload.get("role")), style="cyan")
        model = model_line(payload.get("meta"))
        if model:
            head += Text(f"  {model}", style="magenta")
        meta = compact(rest_of(payload.get("meta")))
        output.console().print(head + (Text(f"  {meta}", style="dim") if meta else Text("")))
        output.console().print(Text(str(payload.get("content")), style=""), soft_wrap=True)
    elif type_ == "queued" and payload.get("answer"):
        output.info(f"{run_id} {payload['answer']}d by {payload.get('by')}: resumes", style="dim")
    elif type_ == "queued" and (payload.get("event") or payload.get("timed_out")):
        what = "its wait timed out" if payload.get("timed_out") else \
            f"{payload['event'].get('source')} #{payload['event'].get('id')} arrived"
        output.info(f"{run_id} {what}: resumes", style="dim")
    elif type_ == "queued":
        output.info(f"{run_id} queued (workflow {payload.get('workflow')})", style="dim")
    elif type_ == "waiting" and (payload.get("waiting_for") or {}).get("kind") == WaitKind.EVENT:
        wait = payload["waiting_for"]
        output.info(f"{run_id} {payload.get('reason')} after {plural(int(payload.get('rounds') or 0), 'round')}; it resumes "
                    f"in the engine when a matching event is committed (e.g. `nerve emit {wait.get('source')} ...`)",
                    style="bold magenta")
    elif type_ == "waiting":
        asked_after = plural(payload.get("rounds") or 0, "round")
        output.info(f"{run_id} waits for a person after {asked_after}: {payload.get('question')}\n"
                    f"answer with `nerve thread approve {run_id} [--note TEXT]` or "
                    f"`nerve thread reject {run_id} [--note TEXT]`", style="bold magenta")
    elif type_ == "started" and payload.get("resumed"):
        output.info(f"{run_id} resumed after round {payload.get('rounds')}: {payload.get('reason', 'restart')}",
                    style="yellow")
    elif type_ in STATUS_STYLE and type_ != "started":
        rounds = payload.get("rounds")
        tail = f" after {plural(rounds, 'round')}" if rounds is not None else ""
        output.info(f"{run_id} {type_} ({payload.get('reason')}){tail}", style=f"bold {STATUS_STYLE[type_]}")


def styled_status(status: str) -> Any:
    from rich.text import Text

    return Text(status, style=STATUS_STYLE.get(status, ""))


def thread_header(d: dict) -> None:
    """The `thread show` document's header fields, one per line."""
    duration = elapsed(d["duration_s"]) if d["duration_s"] is not None else ""
    rows = [
        ("thread", d["run_id"]), ("workflow", d["workflow"]), ("status", styled_status(d["status"])),
        ("prompt", d["prompt"]), ("rounds", f"{d['rounds']} / {d['max_rounds']}"),
        ("origin", compact(d["origin"])), ("queued", output.when(d["queued_ms"])),
        ("started", output.when(d["started_ms"])), ("ended", output.when(d["ended_ms"])),
        ("duration", duration + ("" if d["ended_ms"] else " (so far)")), ("reason", d["reason"]),
        ("waiting since", output.when(d["waiting_since_ms"])), ("question", d["question"]),
        ("waiting for", (d.get("waiting_for") or {}).get("description")),
        ("answer schema", compact((d.get("waiting_for") or {}).get("schema"))),
        ("times out", output.when((d.get("waiting_for") or {}).get("until_ms"))),
        ("models", totals(d["messages"])),
    ]
    shown = [(key, value) for key, value in rows if value not in (None, "", " (so far)")]
    output.show(output.table(None, [("field", {"style": "bold"}), "value"], shown, box=None, show_header=False,
                             pad_edge=False, padding=(0, 2)))
    for event in d.get("events") or []:  # the attempts of a role that failed and were retried
        if event["type"] == "role_failed":
            e = event["detail"]
            output.info(f"{e.get('role')}: attempt {e.get('attempt')}/{e.get('attempts')} failed at "
                        f"{output.when(event['time_ms'], millis=True)}: {e.get('reason')}; retried after "
                        f"{e.get('retry_in_s')}s", style="yellow")
    questions = (d.get("waiting_for") or {}).get("questions") or []
    if len(questions) > 1:  # several questions: each is answered on its own, in any order
        output.show(output.table("open questions", ["id", "question", "approvals"],
                                 [(q["id"], q["question"], ", ".join(q.get("approvals") or []) or "-")
                                  for q in questions]))
        output.info(f"answer each with `nerve thread approve|reject {d['run_id']} --question ID [--note TEXT]`, "
                    "or all at once without --question", style="magenta")
    elif d.get("question"):
        data = " --answer JSON" if (d.get("waiting_for") or {}).get("schema") else ""
        output.info(f"answer with `nerve thread approve {d['run_id']}{data} [--note TEXT]` or "
                    f"`nerve thread reject {d['run_id']} [--note TEXT]`", style="magenta")
    error = d.get("error") or {}
    if error.get("traceback"):
        output.info(error["traceback"].rstrip(), style="dim")


def thread_rounds(d: dict) -> None:
    rounds = [m for m in d["messages"] if m["role"] != START]  # rounds and a person's answers
    if not rounds:
        output.info("no rounds yet", style="dim")
        return
    with_models = any(model_line(m["meta"]) for m in rounds)  # a model column only when rounds called one
    columns = [("#", {"justify": "right"}), "role", *(["model"] if with_models else []),
               ("content", {"overflow": "fold", "ratio": 3}), ("meta", {"overflow": "fold", "ratio": 1}),
               ("time", {"no_wrap": True})]
    rows = [("" if m["round"] is None else m["round"], who(m), *([model_line(m["meta"])] if with_models else []),
             m["content"], compact(rest_of(m["meta"])),
             output.when(m["time_ms"], date=not output.tabular(), millis=True)) for m in rounds]
    output.show(output.table(None, columns, rows, show_lines=True))


def thread_steps(d: dict) -> None:
    """A pipeline thread's steps and the state its chain gives each (nothing for other threads)."""
    steps = d.get("steps")
    if not steps:
        return
    rows = [(s["id"], s["who"], s["state"] + (f" (round {s['round']})" if s["round"] is not None else ""),
             ", ".join(s["needs"]), s["gate"] or "", s["risk"], s["why"] or s["title"]) for s in steps]
    output.show(output.table("Steps", ["step", "who", "state", "needs", "gate", "risk", "note"], rows))


def transcript(d: dict) -> None:
    """The thread as a conversation, the way `llm logs` reads: one heading per message, content as written.

    Plain text (Markdown headings) so it pipes into a pager or a file unchanged;
    meta is folded into one line under the content instead of a column.
    """
    ended = f" ({d['reason']})" if d.get("reason") else ""
    models = totals(d["messages"])
    lines = [f"# {d['run_id']} · {d['workflow']} · {d['status']}{ended} · "
             f"{d['rounds']}/{d['max_rounds']} rounds" + (f" · {models}" if models else ""), ""]
    for m in d["messages"]:
        when = output.when(m["time_ms"], date=False, millis=True)
        if m["role"] == START:
            lines.append(f"## prompt · {output.when(m['time_ms'], millis=True)}")
        elif m["role"] == PERSON:
            lines.append(f"## {who(m)} · {when}")
        else:
            model = model_line(m.get("meta"))
            lines.append(f"## #{m['round']} {m['role']} · {when}" + (f" · {model}" if model else ""))
        lines += ["", str(m["content"]).rstrip(), ""]
        meta = {k: v for k, v in (rest_of(m.get("meta")) or {}).items()
                if not (m["role"] == START and k == "maxRounds")}
        if meta:
            lines += [f"> meta: {compact(meta)}", ""]
    if not any(m["role"] != START for m in d["messages"]):
        lines += ["(no rounds yet)", ""]
    wait = d.get("waiting_for") or {}
    if wait.get("kind") == WaitKind.EVENT:
        lines += [f"(waiting since {output.when(d['waiting_since_ms'])} for {wait.get('description')})", ""]
    elif d.get("question"):
        lines += [f"(waiting for a person since {output.when(d['waiting_since_ms'])}: "
                  f"`nerve thread approve|reject {d['run_id']}`)", ""]
    error = d.get("error") or {}
    if error.get("traceback"):
        lines += ["## error", "", error["traceback"].rstrip(), ""]
    output.console().print("\n".join(lines).rstrip(), markup=False, highlight=False, soft_wrap=True)


def threads_table(threads: list[dict]) -> Any:
    """The `thread list` document's threads."""
    columns = [(name, {"overflow": "ellipsis", "max_width": 48 if name in ("prompt", "reason") else None})
               for name in ("thread", "workflow", "status", "rounds", "updated", "prompt", "reason")]
    rows = []
    for r in threads:
        rounds = f"{r['rounds']}/{r['max_rounds']}" if r.get("max_rounds") else str(r["rounds"])
        prompt = r.get("prompt") or ""
        rows.append((r["run_id"], r["workflow"], styled_status(r["status"]), rounds, output.when(r["updated_ms"]),
                     prompt if output.tabular() else prompt.replace("\n", " "), r.get("reason") or ""))
    return output.table(None, columns, rows)
