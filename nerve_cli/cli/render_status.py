"""Render `nerve status` as Rich tables."""

from __future__ import annotations

import time
from typing import Any

from nerve_cli.cli import output


def _ago(ts: float | None, now: float) -> str:
    if ts is None:
        return "never"
    delta = now - ts
    return f"{_span(delta)} ago" if delta >= 0 else f"in {_span(-delta)}"


def _span(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def render_status(data: dict[str, Any]) -> None:
    now = time.time()
    output.info(f"engine pid {data['pid']} on {data['home']}, up {_span(data['uptime_s'])}", style="bold")
    workers = []
    for w in data["workers"]:
        state = w["state"]
        if state == "backoff" and w.get("next_retry"):
            state = f"backoff (retry {_ago(w['next_retry'], now)}; last: {w.get('last_exit')})"
        failed = "; ".join(f"{k}: {v}" for k, v in w["failed"].items())
        workers.append((w["group"], w["pid"] or "-", state, w["restarts"], ", ".join(w["senses"]), failed))
    output.show(output.table("Workers", ["group", "pid", "state", "restarts", "senses", "failed to load"], workers))
    rows = []
    for name, s in data["senses"].items():
        state = s.get("state") or ("running" if s["running"] else ("pending" if s["pending"] else "idle"))
        if s.get("blocked_until"):
            state = f"{state} until {time.strftime('%H:%M:%S', time.localtime(s['blocked_until']))}: {s['blocked_why']}"
        due = "now" if s["pending"] and not s["running"] else (_ago(s["next_due"], now) if s["next_due"] else "-")
        rows.append((name, s["group"], state, s["runs"], _ago(s["last_run"], now), due,
                     s["errors"] or "", s["last_error"] or ""))
    output.show(output.table("Senses", ["sense", "group", "state", "runs", "last run", "next due", "errors", "last error"], rows))
    if data.get("channels"):
        output.info(f"external channels: {', '.join(data['channels'])}")
    workflows = data.get("workflows") or {}
    if workflows:
        rows = []
        for name, w in workflows.items():
            worker = w.get("worker") or {}
            shown = f"{worker.get('state')} (pid {worker['pid']})" if worker.get("pid") else (worker.get("state") or "-")
            rows.append((name, "yes" if w.get("enabled", True) else "no", shown, len(w.get("running") or []),
                         len(w.get("queued") or []), ", ".join(f"{k} {v}" for k, v in (w.get("counts") or {}).items())))
        output.show(output.table("Workflows", ["workflow", "enabled", "worker", "running", "queued", "threads"], rows))
