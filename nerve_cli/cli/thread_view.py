"""Rendering of threads and workflows: live rounds, `thread show`, lists, doctor differences."""

from __future__ import annotations

import json
from typing import Any

from nerve_cli.cli import output

START = "__start__"
STATUS_STYLE = {"completed": "green", "failed": "red", "crashed": "red", "dropped": "yellow",
                "started": "cyan", "queued": "blue"}


def compact(meta: Any) -> str:
    return "" if not meta else json.dumps(meta, ensure_ascii=False, separators=(", ", ": "))


def live_event(run_id: str, type_: str, payload: dict) -> None:
    """One line (or block) per event while a thread runs."""
    from rich.text import Text

    if type_ == "message" and payload.get("role") == START:
        output.info(f"{run_id} started: max {payload.get('meta', {}).get('maxRounds')} rounds", style="bold")
    elif type_ == "message":
        head = Text(f"#{payload.get('round')} ", style="bold") + Text(str(payload.get("role")), style="cyan")
        meta = compact(payload.get("meta"))
        output.console().print(head + (Text(f"  {meta}", style="dim") if meta else Text("")))
        output.console().print(Text(str(payload.get("content")), style=""), soft_wrap=True)
    elif type_ == "queued":
        output.info(f"{run_id} queued (workflow {payload.get('workflow')})", style="dim")
    elif type_ == "started" and payload.get("resumed"):
        output.info(f"{run_id} resumed after round {payload.get('rounds')}: {payload.get('reason', 'restart')}",
                    style="yellow")
    elif type_ in STATUS_STYLE and type_ != "started":
        rounds = payload.get("rounds")
        tail = f" after {rounds} rounds" if rounds is not None else ""
        output.info(f"{run_id} {type_} ({payload.get('reason')}){tail}", style=f"bold {STATUS_STYLE[type_]}")


def styled_status(status: str) -> Any:
    from rich.text import Text

    return Text(status, style=STATUS_STYLE.get(status, ""))


def thread_header(d: dict) -> None:
    from rich.table import Table

    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    duration = f"{d['duration_ms'] / 1000:.1f}s" if d["duration_ms"] is not None else ""
    rows = [
        ("thread", d["run_id"]), ("workflow", d["workflow"]), ("status", styled_status(d["status"])),
        ("prompt", d["prompt"]), ("rounds", f"{d['rounds_used']} / {d['max_rounds']}"),
        ("origin", compact(d["origin"])), ("queued", d["queued_at"]), ("started", d["started_at"]),
        ("ended", d["ended_at"]), ("duration", duration + ("" if d["ended_at"] else " (so far)")),
        ("reason", d["reason"]),
    ]
    for key, value in rows:
        if value not in (None, "", " (so far)"):
            grid.add_row(key, value)
    output.show(grid)
    error = d.get("error") or {}
    if error.get("traceback"):
        output.info(error["traceback"].rstrip(), style="dim")


def thread_rounds(d: dict) -> None:
    from rich.table import Table

    rounds = [m for m in d["messages"] if m["role"] != START]
    if not rounds:
        output.info("no rounds yet", style="dim")
        return
    table = Table(header_style="bold", show_lines=True)
    for name, kwargs in (("#", {"justify": "right"}), ("role", {}), ("content", {"overflow": "fold", "ratio": 3}),
                         ("meta", {"overflow": "fold", "ratio": 1}), ("time", {"no_wrap": True})):
        table.add_column(name, **kwargs)
    for m in rounds:
        table.add_row(str(m["round"]), m["role"], m["content"], compact(m["meta"]), m["time"][11:23])
    output.show(table)


def transcript(d: dict) -> None:
    """The thread as a conversation, the way `llm logs` reads: one heading per message, content as written.

    Plain text (Markdown headings) so it pipes into a pager or a file unchanged;
    meta is folded into one line under the content instead of a column.
    """
    ended = f" ({d['reason']})" if d.get("reason") else ""
    lines = [f"# {d['run_id']} · {d['workflow']} · {d['status']}{ended} · "
             f"{d['rounds_used']}/{d['max_rounds']} rounds", ""]
    for m in d["messages"]:
        when = _clock(m["time"])
        if m["role"] == START:
            lines.append(f"## prompt · {m['time'][:10]} {when}")
        else:
            lines.append(f"## #{m['round']} {m['role']} · {when}")
        lines += ["", str(m["content"]).rstrip(), ""]
        meta = {k: v for k, v in (m.get("meta") or {}).items() if not (m["role"] == START and k == "maxRounds")}
        if meta:
            lines += [f"> meta: {compact(meta)}", ""]
    if not any(m["role"] != START for m in d["messages"]):
        lines += ["(no rounds yet)", ""]
    error = d.get("error") or {}
    if error.get("traceback"):
        lines += ["## error", "", error["traceback"].rstrip(), ""]
    output.console().print("\n".join(lines).rstrip(), markup=False, highlight=False, soft_wrap=True)


def _clock(iso: str) -> str:
    """`2026-09-01T12:00:00.123Z` → `12:00:00.123` (UTC, as every stored time is)."""
    return iso[11:23]


def threads_table(runs: list[dict]) -> Any:
    from rich.table import Table

    table = Table(header_style="bold")
    for name in ("thread", "workflow", "status", "rounds", "updated", "prompt", "reason"):
        table.add_column(name, overflow="ellipsis", max_width=48 if name in ("prompt", "reason") else None)
    for r in runs:
        rounds = f"{r['rounds']}/{r['max_rounds']}" if r.get("max_rounds") else str(r["rounds"])
        table.add_row(r["run_id"], r["workflow"], styled_status(r["status"]), rounds, r["time"][5:19].replace("T", " "),
                      (r.get("prompt") or "").replace("\n", " "), r.get("reason") or "")
    return table
