"""The fleet hop: host A's signal → host B's compute start, through a real nats-server with JetStream.

Two instances on this machine, each with its own engine, ping-pong through the
fleet: A's sense `ping` listens to `b/pong`, B's `pong` to `a/ping`. Each
compute takes `t0 = monotonic_ns()`, takes the time the other side's signal
carried (its `t`, taken just before it returned), records `t0 - t`, and
returns a fresh `t`. CLOCK_MONOTONIC is system-wide on Linux, so both engines
(and their workers) read one clock. A hop covers: the `_signals` commit, the
Signal line to A's kernel, the outbox reading the row and publishing it with
its message id, the server storing it and handing it to B's durable
consumer, B committing it into events.db, waking `pong` and sending its
Compute line, and the worker starting the compute.

Floors from the same run, on the same server:
- a bare NATS publish → subscribe (core NATS, one process, no storage);
- a JetStream publish → pull consumer delivery (stored, acknowledged, pulled:
  what the fleet adds on the wire, without Nerve);
- the engine's own local hop (signal → listener in another group, one engine),
  which A's side of a fleet hop is made of;
- the engine's emit → listener compute start (an event committed to
  events.db, then its listener woken), which B's side is made of.
The sum of JetStream, the local hop and the emit path is what a fleet hop
cannot do without; the target is to stay within 1.5× that sum.

A fleet ping-pong is a loop through what computes cause, so the engine's loop
guard ends it at its reflexes' `max_depth` (1,000, the largest allowed: about
250 round trips); the bench starts a new chain with `go` whenever one ends.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _kit import Engine, Report, instance, machine, median, paced_emits, pct, query, signals, us, wait_until
from fleetkit import NatsServer

HOPS = 600  # per direction
WARMUP = 30
DEADLINE = 60.0  # seconds; fewer hops by then is itself the finding

PING = """
import time

def compute(db, peers, trigger):
    t0 = time.monotonic_ns()
    sent = [e.payload["t"] for e in trigger.events if isinstance(e.payload, dict) and "t" in e.payload]
    return {"hop": t0 - sent[-1] if sent else None, "t": time.monotonic_ns()}
"""


def host(stream_url: str, name: str, sense: str, listens: str, first: str = "") -> str:
    on = f"[{listens}{', go' if first else ''}]"
    return f"""
senses:
  {sense}: {{}}
reflexes:
  - {{sense: {sense}, on: {on}, max_depth: 1000}}
fleet:
  servers: [{stream_url}]
  host: {name}
  publish: {{senses: [{sense}]}}
  subscribe: {{senses: [{listens}]}}
"""


def hops(home: Path, sense: str) -> list[float]:
    values = [s["payload"]["hop"] / 1000 for s in signals(home, sense) if s["payload"].get("hop") is not None]
    return values[WARMUP:]


def count(home: Path, sense: str) -> int:
    rows = query(home / "data" / "senses" / f"{sense}.db", "SELECT count(*) FROM _signals")
    return rows[0][0] if rows else 0


def fleet_hops(url: str, env: dict[str, str] | None = None) -> tuple[list[float], float]:
    """(A → B and B → A hop latencies in µs, hops/s) over the fleet."""
    with instance(host(url, "a", "ping", "b/pong", first="go"), {"ping": PING}) as a, \
            instance(host(url, "b", "pong", "a/ping"), {"pong": PING}) as b:
        with Engine(a, env=env) as engine_a, Engine(b, env=env) as engine_b:
            engine_a.wait_ready(groups=1)
            engine_b.wait_ready(groups=1)
            connected = lambda e: (e.request("status").get("fleet") or {}).get("connected")  # noqa: E731
            wait_until(lambda: connected(engine_a) and connected(engine_b), 20)
            started = time.monotonic()
            deadline = started + DEADLINE
            elapsed = 0.0  # the chains' running time (from each `go` to its last hop seen), not the gaps between
            while count(b, "pong") <= HOPS + WARMUP and time.monotonic() < deadline:
                chain = time.monotonic()
                engine_a.request("emit", channel="go")  # a new chain: the last one ended at max_depth
                seen, moved = -1, chain
                while (now := count(b, "pong")) != seen and now <= HOPS + WARMUP and time.monotonic() < deadline:
                    seen, moved = now, time.monotonic()
                    time.sleep(0.1)
                elapsed += moved - chain
            done = count(a, "ping") + count(b, "pong")
            return hops(b, "pong") + hops(a, "ping"), done / elapsed


async def bare_round_trips(url: str, n: int = 2000, warmup: int = 100) -> tuple[list[float], list[float]]:
    """(core NATS publish → subscribe, JetStream publish → pull delivery) latencies in µs, one process."""
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig

    nc = await nats.connect(url)
    js = nc.jetstream()
    core: list[float] = []
    got = asyncio.Event()

    async def on_message(msg) -> None:  # type: ignore[no-untyped-def]
        core.append((time.monotonic_ns() - int(msg.data)) / 1000)
        got.set()

    await nc.subscribe("bench.core", cb=on_message)
    for _ in range(n + warmup):
        got.clear()
        await nc.publish("bench.core", str(time.monotonic_ns()).encode())
        await got.wait()
    await js.add_stream(name="BENCH", subjects=["bench.js"])
    await js.add_consumer("BENCH", ConsumerConfig(durable_name="bench", ack_policy=AckPolicy.EXPLICIT))
    sub = await js.pull_subscribe_bind("bench", stream="BENCH")
    stored: list[float] = []
    for _ in range(n // 4 + warmup):
        t0 = time.monotonic_ns()
        await js.publish("bench.js", b"x")
        msg = (await sub.fetch(1, timeout=5))[0]
        stored.append((time.monotonic_ns() - t0) / 1000)
        await msg.ack()
    await nc.close()
    return core[warmup:], stored[warmup:]


LOCAL = """
senses:
  a: {group: g1}
  b: {group: g2}
reflexes:
  - {sense: a, on: [b, go]}
  - {sense: b, on: [a]}
"""


def local_hops() -> list[float]:
    """The engine's own hop (another group, one engine) with the same compute: the fleet's local share."""
    with instance(LOCAL, {"a": PING, "b": PING}) as home:
        with Engine(home) as engine:
            engine.wait_ready(groups=2)
            engine.request("emit", channel="go")
            wait_until(lambda: count(home, "a") > HOPS + WARMUP, DEADLINE, interval=0.1)
        return hops(home, "a") + hops(home, "b")


EMITTED = """
senses:
  got: {}
reflexes:
  - {sense: got, on: [go]}
"""
HEARD = """
import time

def compute(db, peers, trigger):
    t0 = time.monotonic_ns()
    return {"hop": t0 - trigger.events[-1].payload["t"] if trigger.events else None}
"""


def emit_hops(n: int = 300) -> list[float]:
    """emit (its time taken by the sender, on an open control-socket connection) → the listener's compute start,
    one every 5 ms."""
    with instance(EMITTED, {"got": HEARD}) as home:
        with Engine(home) as engine:
            engine.wait_ready(groups=1)
            paced_emits(home, "go", n + WARMUP)
            wait_until(lambda: count(home, "got") >= n + WARMUP, 20)
        return hops(home, "got")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="nerve-bench-nats-") as folder, NatsServer(Path(folder)) as server:
        core, stored = asyncio.run(bare_round_trips(server.url))
        fleet, rate = fleet_hops(server.url)
        local = local_hops()
        emitted = emit_hops()
    report = Report(f"fleet: host A signal → host B compute start through NATS JetStream ({machine()})")
    report.row("bare NATS publish → subscribe, median / p99", f"{us(median(core))} / {us(pct(core, 99))}")
    report.row("JetStream publish (acked) → pull delivery, median / p99", f"{us(median(stored))} / {us(pct(stored, 99))}")
    report.row("local hop, signal → listener in another group, median / p99", f"{us(median(local))} / {us(pct(local, 99))}")
    report.row("local emit → listener compute start, median / p99", f"{us(median(emitted))} / {us(pct(emitted, 99))}")
    if fleet:
        floor = median(stored) + median(local) + median(emitted)
        report.row("fleet hop, A signal → B compute start, median / p99", f"{us(median(fleet))} / {us(pct(fleet, 99))}",
                   f"JetStream + local hop + emit path {us(floor)}", "median ≤ 1.5× that sum",
                   median(fleet) <= 1.5 * floor)
        report.row("fleet hops/s (one at a time, both ways)", f"{rate:,.0f}/s")
        report.row("samples", f"{len(fleet):,}")
    else:
        report.row("fleet hop", "no samples", "", "", False)
    report.print()


if __name__ == "__main__":
    main()
