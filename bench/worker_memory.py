"""Worker memory after work: PSS of a sense worker that has computed 600 times, and of the template + N workers.

A fresh fork of the warm template shares nearly every page with it; a worker
that works touches the objects it shares (reference counts, the collector's
lists), and each page it touches becomes its own. So the figure that counts is
a worker's PSS after it has computed for a while, as an engine runs it: here N
groups of one sense each (a real compute: a row inserted, a dict returned,
`json` and `sqlite3` in use) on a 20 ms interval, in a real engine, until every
sense has completed 600 computes. PSS divides each shared page among the
processes mapping it, so template + N workers is what the engine's workers
cost in all, and the per-worker share falls as N grows.

Floor, same run: a bare python that has imported nothing. Goal: a worker's
PSS after 600 computes ≤ 1.6× the bare python's (at N = 4).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kit import Engine, Report, count_logs, goal, instance, logs, machine, median, wait_until

NS = (1, 4, 16)
COMPUTES = 600
MIB = 2**20
SCHEMA = """
from nerve_cli.sdk import table

@table()
class Tick:
    n: int
    at: float
"""
MIGRATION = "CREATE TABLE tick (n INTEGER NOT NULL, at REAL NOT NULL);\n"
SENSE = """
import time
from .schema import Tick

def compute(db, peers):
    n = db.execute("SELECT count(*) FROM tick").fetchone()[0]
    db.insert(Tick(n=n, at=time.time()))
    return {"n": n, "at": time.time(), "tags": ["a", "b"]}
"""
BARE = "import time; time.sleep(60)"


def pss(pid: int) -> float:
    return psutil.Process(pid).memory_full_info().pss / MIB


def measure(n: int) -> dict:
    config = "senses:\n" + "".join(f"  s{i}: {{group: g{i}}}\n" for i in range(n))
    config += "reflexes:\n" + "".join(f"  - {{sense: s{i}, interval: 20ms}}\n" for i in range(n))
    with instance(config, {f"s{i}": SENSE for i in range(n)}, {f"s{i}": SCHEMA for i in range(n)}) as home:
        for i in range(n):
            (home / "senses" / f"s{i}" / "migrations" / "0001_init.sql").write_text(MIGRATION)
        with Engine(home) as engine:
            engine.wait_ready(groups=n, timeout=120)
            def done() -> bool:
                if count_logs(home, "error", source="system"):
                    raise SystemExit(f"bench: a sense failed: {logs(home, 'error', source='system')[0]['payload']}")
                return count_logs(home, "run_complete") >= n * COMPUTES + 1

            wait_until(done, 300, interval=0.5)
            children = psutil.Process(engine.pid).children()
            workers = [c for c in children if "nerve_cli.worker sense" in " ".join(c.cmdline())]
            template = [c for c in children if c not in workers and "template" in " ".join(c.cmdline())]
            out = {"workers": [pss(w.pid) for w in workers], "template": sum(pss(t.pid) for t in template)}
    return out


def main() -> None:
    found = {n: measure(n) for n in NS}
    bare = subprocess.Popen([sys.executable, "-c", BARE])
    time.sleep(1.0)
    bare_pss = pss(bare.pid)
    bare.kill()
    bare.wait()
    report = Report(f"worker memory after {COMPUTES} computes each, PSS ({machine()})")
    for n, m in found.items():
        each = median(m["workers"])
        total = m["template"] + sum(m["workers"])
        report.row(f"N = {n}: a worker (median) / template + {n} workers",
                   f"{each:.1f} MiB ({each / bare_pss:.2f}×) / {total:.1f} MiB",
                   f"bare python {bare_pss:.1f} MiB", "worker ≤ 1.6× bare" if n == 4 else "",
                   each <= 1.6 * bare_pss if n == 4 else None)
    each = median(found[4]["workers"])
    goal("sense worker memory after 600 computes, PSS", f"{each:.1f} MiB, {each / bare_pss:.2f}× (N = 4)",
         f"bare python {bare_pss:.1f} MiB", "≤ 1.6× bare", each <= 1.6 * bare_pss)
    report.note("template + N workers: the template's PSS plus every worker's; one engine per N")
    report.print()


if __name__ == "__main__":
    main()
