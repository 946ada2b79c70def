"""Webhooks: POST → listener compute start beside `nerve emit` → listener, and events/s over HTTP.

1. Latency, in one engine serving webhooks. Every 5 ms a client sends an
   event with `{"t": monotonic_ns()}`, alternately through the control socket
   (channel `go`, what `nerve emit` does) and as an HTTP POST on one
   keep-alive connection (channel `hook`, signed with an HMAC secret, a
   delivery id on each); listeners `l` (on go) and `w` (on hook), in groups of
   their own, take `t0 = monotonic_ns()` first thing and record `t0 - t`. The
   difference is what HTTP, uvicorn and the signature check add to the same
   durable emit. CLOCK_MONOTONIC is system-wide on Linux.
2. Throughput. Eight keep-alive HTTP connections (the standard library's
   client, the cheapest there is in Python) post 10,000 events as fast as
   each is answered (202, after its commit); listener `store` inserts every
   event it receives. The figure is events delivered per second, from the
   first post to the last event committed by the listener, every one exactly
   once. Floor: the same through eight control-socket connections, in the
   same run.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import socket
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kit import Client, Engine, Report, instance, machine, median, pct, pipe_round_trips, query, signals, us, wait_until

WARMUP = 30
SECRET = "bench-secret"

LATENCY_CONFIG = """
engine: {webhooks: "127.0.0.1:PORT"}
senses:
  l: {group: g1}
  w: {group: g2}
reflexes:
  - {sense: l, on: [go]}
  - {sense: w, on: [hook]}
channels:
  hook: {webhook: true, secret_env: NERVE_BENCH_HOOK_SECRET}
"""
LISTENER = """
import time

def compute(db, peers, trigger):
    t0 = time.monotonic_ns()
    return {"lat": t0 - trigger.events[0].payload["t"] if len(trigger.events) == 1 else None}
"""

THROUGHPUT_CONFIG = """
engine: {webhooks: "127.0.0.1:PORT"}
senses:
  store: {group: g1}
reflexes:
  - {sense: store, on: [load]}
channels:
  load: {webhook: true}
"""
STORE_SCHEMA = """
from nerve_cli.sdk import table

@table(pk="event_id")
class Got:
    event_id: int
    payload: str
"""
STORE = """
import json
from .schema import Got

def compute(db, peers, trigger):
    db.insert_all(Got(event_id=e.id, payload=json.dumps(e.payload)) for e in trigger.events)
    return len(trigger.events)
"""
TOTAL = 10_000
CLIENTS = 8


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def signed_post(client: http.client.HTTPConnection, payload: object, delivery: str) -> int:
    body = json.dumps(payload).encode()
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    client.request("POST", "/emit/hook", body=body, headers={
        "X-Hub-Signature-256": signature, "X-GitHub-Delivery": delivery, "Content-Type": "application/json"})
    answer = client.getresponse()
    answer.read()
    return answer.status


def latency(n: int = 400) -> tuple[list[float], list[float]]:
    """(emit → l, POST → w) in µs."""
    port = free_port()
    config = LATENCY_CONFIG.replace("PORT", str(port))
    with instance(config, {"l": LISTENER, "w": LISTENER}) as home:
        with Engine(home, env={"NERVE_BENCH_HOOK_SECRET": SECRET}) as engine:
            engine.wait_ready(groups=2)
            sock = Client(home)
            web = http.client.HTTPConnection("127.0.0.1", port, timeout=10)  # one keep-alive connection
            next_at = time.monotonic()
            for i in range(n + WARMUP):
                next_at += 0.005
                if i % 2:
                    assert signed_post(web, {"t": time.monotonic_ns()}, f"d-{i}") == 202
                else:
                    sock.emit("go", {"t": time.monotonic_ns()})
                time.sleep(max(0.0, next_at - time.monotonic()))
            web.close()
            sock.close()
            half = (n + WARMUP) // 2
            wait_until(lambda: len(signals(home, "l")) >= half and len(signals(home, "w")) >= half, 20)
        emit = [s["payload"]["lat"] / 1000 for s in signals(home, "l") if s["payload"]["lat"] is not None]
        hook = [s["payload"]["lat"] / 1000 for s in signals(home, "w") if s["payload"]["lat"] is not None]
    return emit[WARMUP // 2:], hook[WARMUP // 2:]


def stored(home: Path) -> int:
    rows = query(home / "data" / "senses" / "store.db", "SELECT count(*) FROM got")
    return rows[0][0] if rows else 0


def throughput(web: bool) -> tuple[float, int, int]:
    """(events/s delivered, rows stored, distinct events stored), sent over HTTP or the control socket."""
    port = free_port()
    with instance(THROUGHPUT_CONFIG.replace("PORT", str(port)), {"store": STORE}, {"store": STORE_SCHEMA}) as home:
        from nerve_cli.schema.migrate import generate_migration

        generate_migration(home / "senses" / "store")
        with Engine(home) as engine:
            engine.wait_ready(groups=1)

            def over_http(share: int) -> None:
                client = http.client.HTTPConnection("127.0.0.1", port, timeout=30)  # one keep-alive connection each
                for i in range(share):
                    client.request("POST", "/emit/load", body=json.dumps({"i": i}),
                                   headers={"Content-Type": "application/json"})
                    answer = client.getresponse()
                    answer.read()
                    assert answer.status == 202, answer.status
                client.close()

            def over_socket(share: int) -> None:
                client = Client(home)
                for i in range(share):
                    assert client.emit("load", {"i": i})["ok"]
                client.close()

            started = time.monotonic()
            threads = [threading.Thread(target=over_http if web else over_socket, args=(TOTAL // CLIENTS,))
                       for _ in range(CLIENTS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wait_until(lambda: stored(home) >= TOTAL, 60, interval=0.01)
            delivered = time.monotonic() - started
        rows = query(home / "data" / "senses" / "store.db", "SELECT count(*), count(DISTINCT event_id) FROM got")[0]
    return TOTAL / delivered, rows[0], rows[1]


def main() -> None:
    floor = pipe_round_trips()
    emit, hook = latency()
    report = Report(f"webhooks: POST → listener beside nerve emit → listener, events/s over HTTP ({machine()})")
    report.row("raw pipe round trip, blocking, median", us(median(floor)))
    if emit and hook:
        report.row("webhook POST → listener compute start, median", us(median(hook)),
                   f"emit → listener {us(median(emit))} (same engine)", "≤ 2× the emit figure + 1 ms",
                   median(hook) <= 2 * median(emit) + 1000)
        report.row("webhook POST → listener compute start, p99", us(pct(hook, 99)),
                   f"emit → listener {us(pct(emit, 99))}", "≤ the emit figure + 2,000 µs",
                   pct(hook, 99) <= pct(emit, 99) + 2000)
        report.row("samples (emit / webhook)", f"{len(emit):,} / {len(hook):,}")
    else:
        report.row("webhook POST → listener compute start", "no samples", "", "", False)
    rate, rows, distinct = throughput(web=True)
    base, base_rows, base_distinct = throughput(web=False)
    report.row("events/s into one listener over HTTP (8 keep-alive connections, 202 after commit)",
               f"{rate:,.0f}/s", f"control socket {base:,.0f}/s", "≥ 1,000/s", rate >= 1000)
    report.row("events stored over HTTP / distinct / sent", f"{rows:,} / {distinct:,} / {TOTAL:,}", "", "all, once",
               rows == distinct == TOTAL and base_rows == base_distinct == TOTAL)
    report.print()


if __name__ == "__main__":
    main()
