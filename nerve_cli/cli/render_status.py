"""Render the `status` document as tables."""

from __future__ import annotations

from typing import Any

from nerve_cli.cli import output
from nerve_cli.clock import now_ms
from nerve_cli.vocab.states import WorkerState


def render_status(doc: dict[str, Any]) -> None:
    from nerve_cli.contract.times import span

    ago = output.ago

    now = now_ms()
    engine = doc["engine"]
    if not engine["running"]:
        last = f" (last stopped {ago(engine['stopped_ms'], now)})" if engine.get("stopped_ms") else ""
        output.info(f"engine stopped{last}: {engine['home']} as its files tell it; start it with `nerve run`",
                    style="bold yellow")
    else:
        output.info(f"engine pid {engine['pid']} on {engine['home']}, up {span(engine['uptime_s'])} "
                    f"(since {output.when(engine['started_ms'])})", style="bold")
    if engine.get("llm"):
        from nerve_cli.roles.llm_env import LlmEnv  # stdlib only: the engine's llm environment, as text

        output.info(f"models: {LlmEnv.from_json(engine['llm']).describe()}", style="dim")
    workers = []
    for w in doc["workers"]:
        state = w["state"]
        if state == WorkerState.BACKOFF and w.get("next_retry_ms"):
            state = f"backoff (retry {ago(w['next_retry_ms'], now)}; last: {w.get('last_exit')})"
        failed = "; ".join(f"{f['sense']}: {f['message']}" for f in w["failed"])
        workers.append((w["group"], w["pid"] or "-", state, w["restarts"], ", ".join(w["senses"]), failed))
    if workers:
        output.show(output.table("Workers", ["group", "pid", "state", "restarts", "senses", "failed to load"], workers))
    rows = []
    for s in doc["senses"]:
        state = s.get("state") or ("running" if s["running"] else ("pending" if s["pending"] else "idle"))
        if s.get("blocked_until_ms"):
            state = f"{state} until {output.when(s['blocked_until_ms'])}: {s['blocked_why']}"
        if s.get("load_error"):
            e = s["load_error"]
            where = f" at {e['file']}:{e['line']}" if e.get("file") else ""
            state = f"load-failed since {ago(s.get('load_failed_since_ms'), now)}: {e['type']}: {e['message']}{where}"
        if s.get("stale"):
            state = f"{state}, stale since {ago(s['stale_since_ms'], now)} (expects a signal every " \
                    f"{span(s['expect_signal_every_s'])})"
        due = "now" if s["pending"] and not s["running"] else (ago(s["next_due_ms"], now) if s["next_due_ms"] else "-")
        last_error = f"{s['last_error']} ({ago(s['last_error_time_ms'], now)})" if s.get("last_error") else ""
        rows.append((s["name"], s["group"], state, s["runs"] if engine["running"] else "-", ago(s["last_run_ms"], now), due,
                     s["errors"] or "", last_error))
    output.show(output.table("Senses", ["sense", "group", "state", "runs", "last run", "next due", "errors", "last error"], rows))
    listeners = [(lst, src) for lst in doc.get("listeners") or [] for src in lst["sources"]]
    if listeners:
        waiting = [(lst["name"] + ("" if lst["enabled"] else " (disabled)"), src["source"], src["kind"],
                    src["backlog"], ago(src["oldest_ms"], now) if src["oldest_ms"] else "-", src["cursor"])
                   for lst, src in listeners]
        output.show(output.table("Listeners", ["listener", "source", "kind", "backlog", "oldest waiting", "cursor"],
                                 waiting))
    if doc.get("agents"):
        output.show(output.table("Agents", ["agent", "backlog", "pending deliveries", "oldest waiting", "last ack"], [
            (a["name"], a["backlog"], a["deliveries"], ago(a["oldest_ms"], now) if a["oldest_ms"] else "-",
             ago(a["last_ack_ms"], now) if a["last_ack_ms"] else "never") for a in doc["agents"]]))
    if doc.get("channels"):
        output.info(f"external channels: {', '.join(c['name'] for c in doc['channels'])}")
    if engine.get("webhooks_url"):
        output.info(f"webhooks: POST {engine['webhooks_url']}CHANNEL")
    if doc.get("fleet"):
        render_fleet(doc["fleet"], now)
    if doc.get("traces"):
        render_traces(doc["traces"])
    causal: dict[str, Any] = doc.get("causal") or {}
    if causal.get("refused"):
        latest: dict[str, Any] = causal.get("last") or {}
        output.info(f"causal depth: {causal['refused']} directive(s)/emit(s) refused past their bound in "
                    f"{causal['chains']} chain(s); last: {latest.get('what')} to {latest.get('target')} at depth "
                    f"{latest.get('depth')} (bound {latest.get('bound')}): {' → '.join(latest.get('path') or [])}",
                    style="bold red")
    for warning in doc.get("warnings") or []:  # nerve.yaml's: worth fixing, but not errors
        output.info(f"warning: {warning['message']}", style="yellow")
    if doc.get("workflows"):
        flows: list[tuple] = []
        for w in doc["workflows"]:
            worker = w["worker"]
            shown = f"{worker['state']} (pid {worker['pid']})" if worker.get("pid") else (worker.get("state") or "-")
            flows.append((w["name"], "yes" if w["enabled"] else "no", shown, len(w["running"]), len(w["queued"]),
                         len(w.get("waiting") or []), ", ".join(f"{k} {v}" for k, v in w["threads"].items())))
        output.show(output.table("Workflows", ["workflow", "enabled", "worker", "running", "queued", "waiting",
                                               "threads"], flows))


def render_traces(traces: dict[str, Any]) -> None:
    pid = traces["exporter_pid"]
    exporter = f"exporter pid {pid}" if pid else "no exporter running"
    restarts = f" (started again {traces['exporter_restarts']}×)" if traces["exporter_restarts"] else ""
    dropped = f", {traces['dropped']:,} dropped" if traces["dropped"] else ""
    output.info(f"traces: to {traces['endpoint'] or '?'}, sampler {traces['sampler']}; {exporter}{restarts}; "
                f"{traces['exported']:,} exported{dropped}", style="yellow" if traces["dropped"] or not pid else "")


def render_fleet(fleet: dict[str, Any], now: int) -> None:
    """One line for this host's link and outbox, and a table of what it receives."""
    from nerve_cli.contract.times import ago

    if fleet["connected"]:
        link = f"connected to {fleet['server']} since {ago(fleet['since_ms'], now)}"
        style = "green"
    else:
        why = f": {fleet['last_error']}" if fleet.get("last_error") else ""
        link = f"disconnected since {ago(fleet['since_ms'], now)}{why}"
        style = "yellow"
    waiting = f"outbox {fleet['outbox']}" + (" (sent when NATS is back)" if fleet["outbox"] and not fleet["connected"]
                                             else "")
    not_sent = f", {fleet['not_sent']} too large to send" if fleet.get("not_sent") else ""
    output.info(f"fleet: host {fleet['host']}, {link}; {waiting}; published {fleet['published']}{not_sent}",
                style=style)
    if fleet["subscriptions"]:
        rows = [(s["source"], s["kind"], s["received"], "-" if s["lag"] is None else s["lag"],
                 ago(s["last_event_ms"], now) if s["last_event_ms"] else "-", s["last_host"] or "-")
                for s in fleet["subscriptions"]]
        output.show(output.table("Fleet subscriptions", ["source", "kind", "received", "lag", "last event", "from"],
                                 rows))
