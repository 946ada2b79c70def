"""Documents from the running engine's answers: `status`, `sense compute`, `emit`."""

from __future__ import annotations

import time
from typing import Any

from nerve_cli.contract import VERSION
from nerve_cli.contract.times import iso, seconds_to_ms, stamp


def status(answer: dict[str, Any]) -> dict[str, Any]:
    """The control socket's `status` answer (epoch seconds, senses keyed by name) → the `status` document."""
    return {
        "version": VERSION,
        "engine": {"running": answer.get("running", True), "pid": answer["pid"], "home": answer["home"],
                   **stamp("started", seconds_to_ms(answer.get("started_at"))),
                   "uptime_s": answer.get("uptime_s"), "webhooks_url": answer.get("webhooks_url"),
                   **stamp("stopped", seconds_to_ms(answer.get("stopped_at"))),  # a stopped engine's last stop
                   "llm": answer.get("llm")},
        "workers": [_worker(w) for w in answer.get("workers") or []],
        "senses": [_sense(name, s) for name, s in sorted((answer.get("senses") or {}).items())],
        "channels": [{"name": c} for c in answer.get("channels") or []],
        "warnings": [{"message": w} for w in answer.get("warnings") or []],  # nerve.yaml's, apart from errors
        "workflows": [_workflow(name, w) for name, w in sorted((answer.get("workflows") or {}).items())],
        "listeners": [_listener(name, entry) for name, entry in sorted((answer.get("listeners") or {}).items())],
        "agents": [_agent(name, entry) for name, entry in sorted((answer.get("agents") or {}).items())],
        "fleet": fleet(answer["fleet"]) if answer.get("fleet") else None,
        **({"notify": answer["notify"]} if answer.get("notify") else {}),
        **({"causal": answer["causal"]} if answer.get("causal") else {}),
        **({"traces": answer["traces"]} if answer.get("traces") else {}),
    }


def fleet(f: dict[str, Any]) -> dict[str, Any]:
    """This host in its fleet, as the engine sees it now (status `fleet`; `nerve fleet` shows it too)."""
    return {
        "host": f["host"], "servers": list(f.get("servers") or []), "stream": f.get("stream"),
        "connected": bool(f.get("connected")), "server": f.get("server"),
        **stamp("since", seconds_to_ms(f.get("since"))),  # when it connected, or when it lost the connection
        "last_error": f.get("last_error"), **stamp("last_error_time", seconds_to_ms(f.get("last_error_at"))),
        "outbox": f.get("outbox", 0), "published": f.get("published", 0), "not_sent": f.get("not_sent", 0),
        "publishes": [{"kind": p["kind"], "name": p["name"], "subject": p["subject"], "sent_id": p.get("sent_id")}
                      for p in f.get("publishes") or []],
        "subscriptions": [{"source": s["source"], "kind": s["kind"], "subject": s["subject"],
                           "consumer": s.get("consumer"), "received": s.get("received", 0),
                           "duplicates": s.get("duplicates", 0), "lag": s.get("lag"), "last_host": s.get("last_host"),
                           **stamp("last_event", seconds_to_ms(s.get("last_event_at"))),
                           **stamp("last_origin", s.get("last_origin_ts"))}
                          for s in f.get("subscriptions") or []],
        "hosts": [{"host": name, "events": h.get("events", 0), "source": h.get("source"),
                   **stamp("last_event", seconds_to_ms(h.get("last_at")))}
                  for name, h in sorted((f.get("hosts") or {}).items())],
    }


def _listener(name: str, entry: dict[str, Any]) -> dict[str, Any]:
    """A listener's backlog: per source, the events beyond its cursor and the age of the oldest."""
    now = time.time_ns() // 1_000_000
    sources = [{"source": b["source"], "kind": b["kind"], "cursor": b["cursor"], "backlog": b["events"],
                **stamp("oldest", b.get("oldest_ts")), "age_s": _age(b.get("oldest_ts"), now)}
               for b in entry.get("sources") or []]
    oldest = min((b["oldest_ms"] for b in sources if b["oldest_ms"] is not None), default=None)
    return {"name": name, "enabled": entry.get("enabled", True), "backlog": sum(b["backlog"] for b in sources),
            **stamp("oldest", oldest), "age_s": _age(oldest, now), "sources": sources}


def _agent(name: str, entry: dict[str, Any]) -> dict[str, Any]:
    """An agent's backlog: events not acknowledged (queued, handed and pending, not yet heard), its pending
    deliveries, the age of its oldest event, and when it last acknowledged one."""
    now = time.time_ns() // 1_000_000
    return {"name": name, "backlog": entry.get("events", 0), "queued": entry.get("queued", 0),
            "pending": entry.get("pending", 0), "unheard": entry.get("unheard", 0),
            "deliveries": entry.get("deliveries", 0), "acked": entry.get("acked", 0),
            **stamp("oldest", entry.get("oldest_ts")), "age_s": _age(entry.get("oldest_ts"), now),
            **stamp("last_ack", entry.get("last_ack_ms"))}


def _seconds(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _age(ms: int | None, now: int) -> float | None:
    return None if ms is None else round(max(0, now - ms) / 1000, 3)


def _worker(w: dict[str, Any]) -> dict[str, Any]:
    return {
        "group": w["group"], "state": w["state"], "pid": w.get("pid"), "restarts": w.get("restarts", 0),
        "senses": list(w.get("senses") or []), "loaded": list(w.get("loaded") or []),
        "failed": [{"sense": k, "message": v} for k, v in sorted((w.get("failed") or {}).items())],
        "computing": list(w.get("computing") or []),
        **stamp("next_retry", seconds_to_ms(w.get("next_retry"))), "last_exit": w.get("last_exit"),
    }


def _sense(name: str, s: dict[str, Any]) -> dict[str, Any]:
    get = s.get  # one call per field: a status of 1,000 senses builds 1,000 of these
    doc = {
        "name": name, "group": s["group"], "state": get("state"),
        "running": bool(get("running")), "pending": bool(get("pending")),
        "runs": get("runs", 0), "errors": get("errors", 0), "last_error": get("last_error"),
    }
    _stamp(doc, "last_error_time", get("last_error_at"))  # cleared by the next success
    doc["load_error"] = get("load_error")  # {type, message, traceback, file, line} while its code does not load
    _stamp(doc, "load_failed_since", get("load_failed_since"))
    _stamp(doc, "last_run", get("last_run"))
    _stamp(doc, "next_due", get("next_due"))
    doc.update(interval_s=get("interval"), coalesced=get("coalesced", 0), deferred=get("deferred", 0),
               debounced=get("debounced", 0), skipped=get("skipped", 0))
    _stamp(doc, "blocked_until", get("blocked_until"))
    doc["blocked_why"] = get("blocked_why")
    doc["queued_priority"] = get("queued_priority")  # waiting in its group's queue (groups.G.concurrency)
    _stamp(doc, "queued_since", get("queued_since"))
    stale_since = get("stale_since")
    doc["expect_signal_every_s"] = _seconds(get("expect_signal_every"))
    doc["stale"] = stale_since is not None
    _stamp(doc, "stale_since", stale_since)
    return doc


def _stamp(doc: dict[str, Any], name: str, seconds: float | None) -> None:
    """stamp(name, seconds_to_ms(seconds)) written into `doc`, in place."""
    if seconds is None:
        doc[name + "_ms"] = doc[name] = None
    else:
        ms = int(round(seconds * 1000))
        doc[name + "_ms"], doc[name] = ms, iso(ms)


def _workflow(name: str, w: dict[str, Any]) -> dict[str, Any]:
    worker = w.get("worker") or {}
    return {
        "name": name, "enabled": w.get("enabled", True), "concurrency": w.get("concurrency"),
        "overflow": w.get("overflow"), "max_queue": w.get("max_queue"), "idempotent": w.get("idempotent"),
        "worker": {"pid": worker.get("pid"), "state": worker.get("state")},
        "running": list(w.get("running") or []), "queued": list(w.get("queued") or []),
        "waiting": list(w.get("waiting") or []), "paused": list(w.get("paused") or []),
        "queued_priority": list(w.get("queued_priority") or []), "priority": w.get("priority"),
        "threads": dict(w.get("counts") or {}),
    }


def compute(result: Any) -> dict[str, Any]:
    """A `senses.standalone.ComputeResult` → the `sense compute` document."""
    error = None
    if result.error is not None:
        e = result.error
        error = {"type": e.type, "message": e.message, "file": e.file, "line": e.line, "traceback": e.traceback}
    return {
        "version": VERSION, "sense": result.sense, "outcome": result.outcome, "via": result.via,
        "payload": result.payload, "workflow": result.workflow, "thread": _thread(result.thread),
        # the events it received (a compute reads those of its enabled `on:` reflexes) and those left waiting
        "events": {"consumed": [dict(c) for c in result.consumed], "skipped": [dict(s) for s in result.skipped]},
        **stamp("time", result.ts),
        "duration_s": None if result.duration_ms is None else result.duration_ms / 1000,
        "error": error,
        "output": [{"stream": o["stream"], "text": o["text"]} for o in result.output],  # what it printed, in order
    }


def _thread(thread: dict[str, Any] | None) -> dict[str, Any] | None:
    """What a compute's workflow directive did: started, queued or dropped a thread, was refused, or (no
    engine) was not started."""
    if thread is None:
        return None
    return {"run_id": thread.get("run_id"), "status": thread.get("status"), "reason": thread.get("reason")}


def emit(channel: str, triggered: list[str], *, event_id: int, stored_ms: int, delivered: str,
         listeners: list[str], duplicate: bool = False, schema_version: str | None = None,
         hash: str | None = None, resumes: list[str] | None = None) -> dict[str, Any]:
    """`nerve emit --json`: the stored event, and who it woke (`triggered`, now) or will reach (`listeners`),
    and the waiting threads its payload matches (`resumes`; None where it was not looked up: a webhook)."""
    return {"version": VERSION, "channel": channel, "event_id": event_id, **stamp("stored", stored_ms),
            "duplicate": duplicate, "delivered": delivered, "triggered": list(triggered),
            "listeners": list(listeners), "schema_version": schema_version, "hash": hash,
            "resumes": None if resumes is None else list(resumes)}
