"""Workers forked from the warm template, on the real engine: supervised exactly as plain ones, isolated from each
other, and a template that dies is survived (workers start plainly until a new one is up)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psutil
from enginekit import RunningEngine, completes, errors, last_signal, read_logs, starts, wait_for, write_instance

from nerve_cli.ops.client import request

FAST = "def compute(db, peers):\n    return 1\n"
CRASH = "import ctypes\n\ndef compute(db, peers):\n    ctypes.string_at(0)\n"
HANG = "import time\n\ndef compute(db, peers):\n    time.sleep(30)\n"
LEAK = """
import time

def compute(db, peers):
    hoard = []
    while True:
        hoard.append(bytearray(8 * 1024 * 1024))
        time.sleep(0.01)
"""
# a sense that changes process-wide state: a module's global, another module's attribute, a counter
MEDDLE = """
import json, os, sys

COUNT = [0]

def compute(db, peers):
    COUNT[0] += 1
    seen = getattr(json, "MARK", None)
    json.MARK = "{name}"
    return {{"count": COUNT[0], "seen": seen, "asyncio": "asyncio" in sys.modules,
            "modules": sorted(m for m in sys.modules if m.startswith("_nerve_senses.")), "pid": os.getpid()}}
"""
AMEDDLE = MEDDLE.replace("def compute", "async def compute")


def started(home: Path, group: str) -> list[dict]:
    return [r["payload"] for r in read_logs(home, "system", "worker_started", group)]


def template_of(engine: RunningEngine, other_than: int | None = None) -> psutil.Process:
    def find() -> psutil.Process | None:
        # a worker forked from the template is the engine's child too and keeps the template's command line:
        # told apart by being a worker (pids wrap, so the template's is not always the lowest)
        workers = {w["pid"] for w in engine.status()["workers"]}
        for child in psutil.Process(engine.proc.pid).children():
            try:
                if ("template" in child.cmdline() and child.pid != other_than and child.pid not in workers
                        and child.status() != "zombie"):
                    return child
            except psutil.Error:  # gone, or a zombie the kernel has not collected yet
                continue
        return None

    return wait_for(find, 20, what="a live warm template")


def test_forked_workers_that_crash_hang_or_leak_are_handled_as_plain_ones(home: Path) -> None:
    write_instance(home, """
        groups:
          leaky: {memory_limit: 150MB}
        senses:
          crash: {group: crashy}
          hang: {group: stuck, timeout: 300ms, grace_period: 300ms}
          leak: {group: leaky, timeout: 1m}
          steady: {group: calm}
        reflexes:
          - {sense: crash, on: [go]}
          - {sense: hang, on: [go]}
          - {sense: leak, on: [go]}
          - {sense: steady, interval: 200ms}
    """, {"crash": CRASH, "hang": HANG, "leak": LEAK, "steady": FAST})
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=4)
        workers = {w["group"]: w["pid"] for w in engine.status()["workers"]}
        for pid in workers.values():  # the kernel's own children, each in its own session
            assert psutil.Process(pid).ppid() == engine.proc.pid and os.getsid(pid) == pid
        request(home, "emit", channel="go")
        for group in ("crashy", "stuck", "leaky"):
            wait_for(lambda: len(started(home, group)) >= 2, 30, what=f"group {group} to be respawned")
        crashed = read_logs(home, "system", "worker_exited", "crashy")[0]["payload"]
        assert "SIGSEGV" in crashed["why"] and crashed["computing"] == ["crash"]
        assert crashed["blamed"]["sense"] == "crash"  # read from the fault's stack on the worker's stderr
        assert any("compute lost" in e["payload"]["message"] for e in errors(home, "crash"))
        killed = read_logs(home, "system", "worker_killed", "stuck")[0]["payload"]
        assert killed["pid"] == workers["stuck"]
        assert any(e["payload"]["error_type"] == "TimeoutError" for e in errors(home, "hang"))
        hog = read_logs(home, "system", "watchdog_kill", "leaky")[0]["payload"]
        assert hog["pid"] == workers["leaky"] and hog["computing"] == ["leak"] and "memory" in hog["problem"]
        wait_for(lambda: len(completes(home, "steady")) >= 10, 10, what="steady to keep running")
        engine.stop()
    for group in ("crashy", "stuck", "leaky", "calm"):  # first starts and respawns alike were forks
        assert {p["start"] for p in started(home, group)} == {"warm"}, started(home, group)
    runs = [r["ts"] for r in starts(home, "steady")]
    assert max(b - a for a, b in zip(runs, runs[1:])) < 1000  # never stalled by the other groups' trouble


def test_a_sense_state_never_reaches_another_worker(home: Path) -> None:
    write_instance(home, """
        senses:
          one: {group: g1}
          two: {group: g2}
          three: {group: g3}
        reflexes:
          - {sense: one, on: [go]}
          - {sense: two, on: [go]}
          - {sense: three, on: [go]}
    """, {"one": MEDDLE.format(name="one"), "two": MEDDLE.format(name="two"), "three": AMEDDLE.format(name="three")})
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=3)
        request(home, "emit", channel="go")
        wait_for(lambda: all(last_signal(home, s) for s in ("one", "two", "three")), 15, what="the first computes")
        first = {s: last_signal(home, s) for s in ("one", "two", "three")}
        one = next(w for w in engine.status()["workers"] if w["group"] == "g1")
        os.kill(one["pid"], signal.SIGKILL)  # its respawn is a new fork of the template
        wait_for(lambda: len(started(home, "g1")) >= 2, 15, what="g1's respawn")
        request(home, "emit", channel="go")
        wait_for(lambda: last_signal(home, "one")["pid"] != first["one"]["pid"], 15, what="one on its new worker")
        again = last_signal(home, "one")
        engine.stop()
    for name, got in first.items():  # each worker saw only its own sense's modules and no one else's marks
        assert got["count"] == 1 and got["seen"] is None
        assert got["modules"] == [f"_nerve_senses.{name}", f"_nerve_senses.{name}.schema", f"_nerve_senses.{name}.sense"]
    assert again["count"] == 1 and again["seen"] is None  # a new worker starts from the template, not from the old one
    assert first["one"]["asyncio"] is False and first["two"]["asyncio"] is False  # sync senses only: no loop
    assert first["three"]["asyncio"] is True
    assert {p["start"] for g in ("g1", "g2", "g3") for p in started(home, g)} == {"warm"}


def test_a_template_that_dies_is_survived_and_started_again(home: Path) -> None:
    write_instance(home, """
        senses:
          victim: {group: g}
          steady: {group: calm}
        reflexes:
          - {sense: victim, interval: 100ms}
          - {sense: steady, interval: 100ms}
    """, {"victim": FAST, "steady": FAST})
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=2)
        first = template_of(engine)
        first.kill()

        seen: set[int] = set()  # g's workers so far

        def respawn() -> dict:
            # the start after this kill: a row of a pid not seen before (counting rows raced the log's flush: the
            # first start's row, written after the test looked, was taken for the respawn)
            pid = next(w["pid"] for w in engine.status()["workers"] if w["group"] == "g")
            seen.add(pid)
            os.kill(pid, signal.SIGKILL)
            row = wait_for(lambda: next((r for r in started(home, "g") if r["pid"] not in seen), None), 20,
                           what="g's respawn")
            seen.add(row["pid"])
            return row

        assert respawn()["start"] == "plain"  # the template is gone: a plain start, not a failure
        before = len(completes(home, "steady"))
        wait_for(lambda: len(completes(home, "steady")) >= before + 3, 10, what="steady, forked earlier, to go on")
        second = template_of(engine, other_than=first.pid)  # a new one, after its back-off
        wait_for(lambda: respawn()["start"] == "warm", 30, interval=0.5, what="a warm start from the new template")
        code, out = engine.stop()
    assert code == 0
    assert "warm worker template" in out and "workers start plainly" in out
    assert not psutil.pid_exists(second.pid) or second.status() == "zombie"  # stopped with the engine


def test_a_worker_whose_start_up_variables_differ_from_the_template_starts_plainly(home: Path) -> None:
    """PYTHONPATH, LD_PRELOAD and the like are read when a process starts: a fork would ignore new values."""
    import asyncio
    import json
    import os

    from nerve_cli.kernel.supervision.launch import WarmLaunch
    from nerve_cli.kernel.supervision.process import WorkerProcess, worker_argv

    write_instance(home, "senses:\n  s: {group: g}\n", {"s": FAST})
    spec = json.dumps({"senses": {"s": []}, "shutdown_timeout": 5.0})
    argv = worker_argv("sense", "--group", "g", "--home", str(home), "--senses", "s", "--spec", spec)

    async def start(launch: WarmLaunch, env: dict[str, str] | None) -> bool:
        worker = WorkerProcess("g", argv, lambda w, m: None, env=env, cwd=str(home), launch=launch)
        await worker.start()
        await worker.wait_ready(30)
        await worker.stop()
        return worker.warm

    async def run() -> tuple[bool, bool]:
        launch = WarmLaunch(home, lambda level, text: None)
        launch.open()
        try:
            same = await start(launch, None)
            moved = await start(launch, {**os.environ, "PYTHONPATH": str(home / "elsewhere")})
        finally:
            await launch.close()
        return same, moved

    assert asyncio.run(run()) == (True, False)


SHARED = "import os\n\nLOADED_IN = os.getpid()\nwith open('imports.txt', 'a') as out:\n    out.write(f'{LOADED_IN}\\n')\n"
USES_SHARED = "import os\nimport shared_lib\n\ndef compute(db, peers):\n    return [shared_lib.LOADED_IN, os.getpid()]\n"


def test_engine_preload_imports_a_module_once_in_the_template_for_every_worker(home: Path) -> None:
    """`engine.preload`: the template imports the senses' common module once; each forked worker has it (its
    pages shared) and the senses' own `import` finds it loaded. One that cannot be imported is said, and the
    workers still fork."""
    config = ("engine:\n  preload: [shared_lib, no_such_module_here]\nsenses:\n  a: {group: ga}\n  b: {group: gb}\n"
              "reflexes:\n  - {sense: a, interval: 1h}\n  - {sense: b, interval: 1h}\n")
    write_instance(home, config, {"a": USES_SHARED, "b": USES_SHARED})
    (home / "shared_lib.py").write_text(SHARED)
    with RunningEngine(home) as engine:
        engine.wait_ready(groups=2)
        template = template_of(engine)
        for sense in ("a", "b"):
            loaded_in, pid = wait_for(lambda: last_signal(home, sense), 20, what=f"{sense}'s signal")
            assert loaded_in == template.pid != pid  # imported by the template, not by the worker
        assert all(p["start"] == "warm" for g in ("ga", "gb") for p in started(home, g))
        _, out = engine.stop()
    assert (home / "imports.txt").read_text().split() == [str(template.pid)]  # once, for both workers
    assert "engine.preload: could not import no_such_module_here (ModuleNotFoundError" in out
