"""Nothing a sense's code starts outlives its engine: a plain child, a setsid child, a double-forked daemon.

Each case runs once with the workers' cgroups (where the machine has cgroup v2 and the engine may write it, as
here) and once with NERVE_CGROUPS=0 (each worker a child subreaper, as where no cgroup can be made).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from enginekit import RunningEngine, wait_for, write_instance

from nerve_cli.wire import containment

SPAWNER = '''
import os, subprocess, sys
from pathlib import Path

PIDS = Path(__file__).resolve().parents[2] / "pids.txt"
SLEEP = "import os, time; open(%r, 'a').write(str(os.getpid()) + chr(10)); time.sleep(600)" % str(PIDS)
DAEMON = ("import os, time\\n"
          "if os.fork(): os._exit(0)\\n"
          "os.setsid()\\n"
          "if os.fork(): os._exit(0)\\n" + SLEEP.replace("; ", "\\n"))

def compute(db, peers):
    if not PIDS.exists():
        PIDS.write_text("")
        subprocess.Popen([sys.executable, "-c", SLEEP])                          # a plain child
        subprocess.Popen([sys.executable, "-c", SLEEP], start_new_session=True)  # a setsid child
        subprocess.Popen([sys.executable, "-c", DAEMON]).wait()                  # a double-forked daemon
    return 1
'''
CONFIG = "engine: {shutdown_timeout: 2s}\nsenses:\n  spawner: {}\nreflexes:\n  - {sense: spawner, interval: 1h}\n"


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


def descendants(home: Path) -> list[int]:
    path = home / "pids.txt"
    pids = [int(p) for p in path.read_text().split()] if path.exists() else []
    return pids if len(pids) == 3 else []


def end(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


MODES = {"cgroup": {}, "subreaper": {"NERVE_CGROUPS": "0"}}


@pytest.mark.skipif(not os.path.exists("/proc/self/mountinfo"), reason="Linux only: other systems end the group")
@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("stop", ["kernel_kill_9", "clean_stop"])
def test_no_descendant_of_a_worker_outlives_the_engine(home: Path, mode: str, stop: str) -> None:
    if mode == "cgroup" and not cgroups_here(home):
        pytest.skip("no writable cgroup v2 here: the subreaper case covers this machine")
    write_instance(home, CONFIG, {"spawner": SPAWNER})
    pids: list[int] = []
    with RunningEngine(home, env=MODES[mode]) as engine:
        try:
            engine.wait_ready()
            pids = wait_for(lambda: descendants(home), 30, what="the sense's three descendants")
            assert all(alive(p) for p in pids)
            if stop == "kernel_kill_9":
                engine.proc.kill()
                engine.proc.wait()
            else:
                code, out = engine.stop()
                assert code == 0, out
            wait_for(lambda: not any(alive(p) for p in pids), 15,
                     what=f"{[p for p in pids if alive(p)]} (plain, setsid, daemon) to end")
        finally:
            end(pids)
    if mode == "cgroup":  # no cgroup left behind: the engine removes them, or its workers once it is gone
        base = containment.base_path(home)
        assert base is not None
        wait_for(lambda: not base.exists(), 15, what=f"{base} to be removed")


def cgroups_here(home: Path) -> bool:
    made = containment.cgroup_base(home)
    if made is not None:
        made.rmdir()
    return made is not None


def janitor_of(home: Path) -> int | None:
    """The pid of this instance's engine's janitor (wire.janitor), found by its command line."""
    base = str(containment.base_path(home))
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if b"nerve_cli.wire.janitor" in argv and base.encode() in argv:
            return int(entry.name)
    return None


@pytest.mark.parametrize("janitor", ["alive", "killed_too"])
def test_what_a_worker_left_ends_when_it_and_its_kernel_are_both_killed(home: Path, janitor: str) -> None:
    """With the kernel and a worker both SIGKILLed, neither can end what the worker's code started: it ran on
    until the next engine start. The engine's janitor ends it at once; killed too, the next start does."""
    if not cgroups_here(home):
        pytest.skip("no writable cgroup v2 here")
    write_instance(home, CONFIG, {"spawner": SPAWNER})
    pids: list[int] = []
    try:
        with RunningEngine(home) as first:
            first.wait_ready()
            pids = wait_for(lambda: descendants(home), 30, what="the sense's three descendants")
            helper = wait_for(lambda: janitor_of(home), 10, what="the engine's janitor")
            workers = [w["pid"] for w in first.status()["workers"] if w.get("pid")]
            for pid in workers:  # stopped, it cannot see its kernel go
                os.kill(pid, signal.SIGSTOP)
            if janitor == "killed_too":
                os.kill(helper, signal.SIGKILL)
            first.proc.kill()
            first.proc.wait()
            end(workers)
            if janitor == "alive":
                wait_for(lambda: not any(alive(p) for p in pids), 15, what="the janitor to end the leftovers")
                wait_for(lambda: not containment.base_path(home).exists(), 15,  # type: ignore[union-attr]
                         what="the janitor to remove the cgroups")
                return
        assert all(alive(p) for p in pids)  # nobody was left to end them
        with RunningEngine(home) as second:
            second.wait_ready()
            wait_for(lambda: not any(alive(p) for p in pids), 15, what="the killed engine's leftovers to end")
            code, out = second.stop()
            assert code == 0, out
        assert not containment.base_path(home).exists()  # type: ignore[union-attr]
        assert janitor_of(home) is None  # a clean stop ends the janitor too
    finally:
        end(pids)
