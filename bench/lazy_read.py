"""Lazy projections: what bringing a sense up to date when it is read costs, beside an eager listener.

One instance, one channel `tick` holding 50,000 events stored before the engine
starts (`{"repo": "r0".."r9", "i": i}`), three senses with the same compute
(insert each event's id into its table):

- `eager` listens to `tick`: at start it catches up the backlog, a batch per
  compute. Its catch-up (first run_start to last run_complete, the engine's own
  log times) is the floor: the same events, the same code, the same batches.
- `lazy` reads `tick` with `lazy: true`: nothing runs until it is read. One
  `read` request (what `nerve sense show` sends) brings it up to date; the
  figure is that request's wall time, socket included.
- `bound` reads `tick` lazily with `bindings: {repo: $repo}`: a read for
  `repo=r3` consumes only r3's events (5,000), narrowed in SQLite.

Then the read of a sense already up to date (nothing waits: no compute), 50
times, beside the control socket's own round trip (`ping`) in the same run.
Targets: the lazy catch-up within 1.5x the eager one; an up-to-date read within
5 ms of a ping (median).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kit import Engine, Report, instance, logs, machine, median, query, wait_until

N = 50_000
REPOS = 10
READS = 50

CONFIG = """
senses:
  eager: {group: g1}
  lazy: {group: g2}
  bound: {group: g3}
reflexes:
  - {sense: eager, on: [tick]}
  - {sense: lazy, on: [tick], lazy: true}
  - {sense: bound, on: [tick], lazy: true, bindings: {repo: $repo}}
"""
SCHEMA = """
from nerve_cli.sdk import table

@table(pk="event_id")
class Got:
    event_id: int
"""
FOLD = """
from .schema import Got

def compute(db, peers, trigger):
    db.insert_all(Got(event_id=e.id) for e in trigger.events)
    return len(trigger.events)
"""
GOT_SQL = 'CREATE TABLE "got" ("event_id" INTEGER PRIMARY KEY);\n'


def stored(home: Path, sense: str) -> int:
    rows = query(home / "data" / "senses" / f"{sense}.db", "SELECT count(*) FROM got")
    return rows[0][0] if rows else 0


def fill(home: Path) -> None:
    from nerve_cli.store.events import EventStore, new_event

    store = EventStore(home / "data" / "events.db")
    try:
        for start in range(0, N, 5000):
            store.append([new_event("tick", {"repo": f"r{i % REPOS}", "i": i}) for i in range(start, start + 5000)])
    finally:
        store.close()


def timed(engine: Engine, op: str, **args: object) -> tuple[float, dict]:
    started = time.perf_counter()
    answer = engine.request(op, **args)
    return (time.perf_counter() - started) * 1000, answer


def main() -> None:
    senses = {name: FOLD for name in ("eager", "lazy", "bound")}
    with instance(CONFIG, senses, {name: SCHEMA for name in senses}) as home:
        for name in senses:
            (home / "senses" / name / "migrations" / "0001_init.sql").write_text(GOT_SQL)
        (home / "data").mkdir()
        fill(home)
        with Engine(home) as engine:
            engine.wait_ready(groups=3)
            if not wait_until(lambda: stored(home, "eager") >= N, 120, interval=0.05):
                raise SystemExit(f"bench: eager stored {stored(home, 'eager')} of {N} events")
            starts = [r["ts"] for r in logs(home, "run_start", "eager")]
            ends = [r["ts"] for r in logs(home, "run_complete", "eager")]
            eager_ms, eager_computes = float(max(ends) - min(starts)), len(ends)
            assert stored(home, "lazy") == 0, "a lazy sense ran before it was read"

            lazy_ms, lazy = timed(engine, "read", sense="lazy")
            assert lazy["events"] == N and stored(home, "lazy") == N, lazy
            bound_ms, bound = timed(engine, "read", sense="bound", bind={"repo": "r3"})
            assert bound["events"] == N // REPOS, bound

            fresh = [timed(engine, "read", sense="lazy") for _ in range(READS)]
            assert all(a["computes"] == 0 for _, a in fresh), "an up-to-date read computed"
            pings = [timed(engine, "ping")[0] for _ in range(READS)]
    fresh_ms, ping_ms = median([t for t, _ in fresh]), median(pings)

    report = Report(f"Lazy projections ({N:,} waiting events, batches of at most 10,000) — {machine()}")
    met = lazy_ms <= 1.5 * eager_ms
    report.row("lazy read: catch-up of every event", f"{lazy_ms:,.0f} ms ({lazy['computes']} computes)",
               f"eager listener's catch-up {eager_ms:,.0f} ms ({eager_computes} computes)", "≤ 1.5× floor", met)
    report.row(f"bound read (repo=r3: {N // REPOS:,} of {N:,} events)", f"{bound_ms:,.0f} ms ({bound['computes']} computes)",
               f"eager, all events {eager_ms:,.0f} ms", "below the floor", bound_ms < eager_ms)
    fresh_met = fresh_ms <= ping_ms + 5
    report.row("read of an up-to-date sense, median", f"{fresh_ms:.2f} ms", f"ping {ping_ms:.2f} ms", "≤ ping + 5 ms",
               fresh_met)
    report.note(f"catch-up per event: lazy {lazy_ms * 1000 / N:.1f} µs, eager {eager_ms * 1000 / N:.1f} µs")
    report.print()


if __name__ == "__main__":
    main()
