"""Sense worker start and idle memory: a plain start against a fork of the warm template, beside a bare python.

The kernel's own start path (`WorkerProcess` with its launch) runs here, in an
event loop like the kernel's, on a tmp instance whose senses are trivial (sync,
no tables). Interleaved, so machine noise hits them alike:

- spawn → ready: from `start()` to the worker's Ready line, for a plain start
  (a fresh interpreter importing the runtime) and a warm one (a fork of the
  template, which is started once and not counted);
- floor: a bare `python -c pass`, start to exit, measured in the same loop;
- idle memory: PSS (and RSS) of idle workers, GROUPS of them at once as an
  engine runs them, beside a bare python that has imported nothing (its PSS
  shares libpython's pages with every other python on the machine, as the
  workers' do). PSS divides each shared page among the processes mapping it,
  so it is what one more worker really costs.

Targets: warm spawn → ready ≤ 60 ms; idle worker PSS ≤ 1.6× the bare python's.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kit import Report, goal, instance, machine, median, pct

from nerve_cli.kernel.supervision.launch import PLAIN, WarmLaunch
from nerve_cli.kernel.supervision.process import WorkerProcess, worker_argv

ROUNDS = 15
GROUPS = 4
MIB = 2**20
TRIVIAL = "def compute(db, peers):\n    return 1\n"
BARE = "import time; time.sleep(3600)"


def argv(home: Path, sense: str) -> list[str]:
    spec = json.dumps({"senses": {sense: []}, "shutdown_timeout": 5.0})
    return worker_argv("sense", "--group", sense, "--home", str(home), "--senses", sense, "--spec", spec)


async def start(home: Path, sense: str, launch) -> tuple[WorkerProcess, float]:
    worker = WorkerProcess(sense, argv(home, sense), lambda w, m: None, cwd=str(home), launch=launch)
    t0 = time.perf_counter()
    await worker.start()
    await worker.wait_ready(30)
    return worker, (time.perf_counter() - t0) * 1000


async def bare_ms() -> float:
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await proc.wait()
    return (time.perf_counter() - t0) * 1000


def memory(pid: int) -> tuple[float, float]:
    info = psutil.Process(pid).memory_full_info()
    return info.pss / MIB, info.rss / MIB


async def measure(home: Path) -> dict:
    warm = WarmLaunch(home, lambda level, text: None)
    warm.open()
    await warm._usable()  # the template's own start is paid once per engine, not per worker
    times: dict[str, list[float]] = {"plain": [], "warm": [], "bare": []}
    for i in range(ROUNDS):
        for kind, launch in (("plain", PLAIN), ("warm", warm)):
            worker, ms = await start(home, f"s{i % GROUPS}", launch)
            times[kind].append(ms)
            await worker.stop()
        times["bare"].append(await bare_ms())
    mem: dict[str, list[tuple[float, float]]] = {}
    for kind, launch in (("plain", PLAIN), ("warm", warm)):
        workers = [(await start(home, f"s{i}", launch))[0] for i in range(GROUPS)]
        await asyncio.sleep(1.0)  # idle: whatever start-up touched has settled
        mem[kind] = [memory(w.pid) for w in workers]  # type: ignore[arg-type]
        for worker in workers:
            await worker.stop()
    bare = subprocess.Popen([sys.executable, "-c", BARE])
    await asyncio.sleep(1.0)
    mem["bare"] = [memory(bare.pid)]
    bare.kill()
    bare.wait()
    template = memory(warm.template_pid) if warm.template_pid else (float("nan"), float("nan"))
    await warm.close()
    return {"times": times, "mem": mem, "template": template, "forked": warm.forked}


def main() -> None:
    senses = {f"s{i}": TRIVIAL for i in range(GROUPS)}
    config = "senses:\n" + "".join(f"  s{i}: {{group: s{i}}}\n" for i in range(GROUPS))
    with instance(config, senses) as home:
        m = asyncio.run(measure(home))
    t, mem = m["times"], m["mem"]
    bare = median(t["bare"])
    report = Report(f"sense worker start and idle memory ({machine()})")
    report.row("bare `python -c pass`, start to exit", f"{bare:.0f} ms")
    report.row("plain start → ready, median / p90", f"{median(t['plain']):.0f} / {pct(t['plain'], 90):.0f} ms",
               f"{bare:.0f} ms ({median(t['plain']) / bare:.1f}×)")
    warm_ms = median(t["warm"])
    report.row("warm start → ready, median / p90", f"{warm_ms:.0f} / {pct(t['warm'], 90):.0f} ms",
               f"{bare:.0f} ms ({warm_ms / bare:.1f}×)", "≤ 60 ms", warm_ms <= 60)
    goal("sense worker spawn → ready", f"{warm_ms:.0f} ms (plain start {median(t['plain']):.0f} ms)",
         f"bare `python -c pass` {bare:.0f} ms", "≤ 60 ms", warm_ms <= 60)
    bare_pss, bare_rss = mem["bare"][0]
    for kind in ("plain", "warm"):
        pss = median([p for p, _ in mem[kind]])
        rss = median([r for _, r in mem[kind]])
        met = pss <= 1.6 * bare_pss if kind == "warm" else None
        report.row(f"idle {kind} worker PSS (RSS), median of {GROUPS}", f"{pss:.1f} MiB ({rss:.1f})",
                   f"bare python {bare_pss:.1f} ({bare_rss:.1f}); {pss / bare_pss:.2f}×",
                   "PSS ≤ 1.6× bare" if kind == "warm" else "", met)
    pss = median([p for p, _ in mem["warm"]])
    rss = median([r for _, r in mem["warm"]])
    goal("idle sense worker memory, PSS (RSS)", f"{pss:.1f} MiB ({rss:.1f}), {pss / bare_pss:.2f}×",
         f"bare python {bare_pss:.1f} MiB ({bare_rss:.1f})", "PSS ≤ 1.6× bare", pss <= 1.6 * bare_pss)
    report.row("the template itself, PSS (RSS)", f"{m['template'][0]:.1f} MiB ({m['template'][1]:.1f})",
               "shared by every warm worker; started once per engine")
    report.note(f"{ROUNDS} starts of each kind, interleaved; {m['forked']} warm starts were forks of the template")
    report.print()


if __name__ == "__main__":
    main()
