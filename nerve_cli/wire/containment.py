"""Whatever a worker's code starts ends with the worker: a plain child, a `setsid` child, a double-forked daemon.

A worker leads its own process group, but a process that starts its own
session leaves the group, and a daemon that forks twice is adopted by init:
neither `killpg` nor the worker's children reach them. So every worker puts
its descendants where they can all be found again, in one of two ways:

- **a cgroup** (Linux with cgroup v2, where the engine may make cgroups below
  its own: root, or a delegated subtree). The engine makes
  `<its cgroup>/nerve-<instance>/` and names it in `NERVE_WORKER_CGROUP`; each
  worker, before any user code runs, makes `w<pid>` there and moves itself in.
  Every process its code starts is born in that cgroup, whatever session it
  starts or whoever adopts it, and cannot leave it (unprivileged). When a
  worker is gone the engine kills its cgroup (`cgroup.kill`) and removes it;
  a worker that exits (a clean stop, or the engine's pipe closing after a
  kernel `kill -9`) first kills everything else in its cgroup; and an engine
  starting ends what an earlier one of the same instance left there.
- **a child subreaper** elsewhere (`PR_SET_CHILD_SUBREAPER`, Linux): the
  worker adopts its orphaned descendants instead of init, so its process tree
  holds them all, and it kills that tree as it exits (a clean stop, or the
  engine's pipe closing after a kernel `kill -9`). A worker that is itself
  killed with SIGKILL cannot: then only its process group is ended.

Other systems: the process group only.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

ENV = "NERVE_WORKER_CGROUP"  # the engine's cgroup for its workers' cgroups (set by the engine, read by workers)
SWITCH = "NERVE_CGROUPS"  # "0": no cgroups, each worker a subreaper (as where none can be made)
PR_SET_CHILD_SUBREAPER = 36
END_WAIT = 2.0  # seconds a worker spends ending what its code left running
_mode: str | None = None  # this worker's way: "cgroup" | "subreaper" | None
_parent: int | None = None  # the kernel's pid as this worker started: another one now means the kernel is gone
_kernel_gone = False  # the kernel's pipe ended with no Shutdown before it
_janitor: tuple[subprocess.Popen, int] | None = None  # (the janitor, the pipe's write end) of this engine
REPARENT_WAIT = 1.0  # seconds for the kernel's exit to hand us to another parent (it closes our pipe first)


# -- the engine's side ---------------------------------------------------------------------------------------

def base_path(home: Path) -> Path | None:
    """The cgroup an engine of `home` makes for its workers' cgroups (whether or not it exists), or None where
    there is no cgroup v2 (or NERVE_CGROUPS=0)."""
    if os.environ.get(SWITCH) == "0":
        return None
    own = _own_cgroup()
    mount = _cgroup2_mount()
    if own is None or mount is None:
        return None
    key = hashlib.sha1(str(Path(home).resolve()).encode()).hexdigest()[:12]
    return mount / own.lstrip("/") / f"nerve-{key}"


def cgroup_base(home: Path) -> Path | None:
    """Make the cgroup for this engine's workers' cgroups: None where it cannot (no cgroup v2, not ours to write)."""
    base = base_path(home)
    if base is None:
        return None
    try:
        base.mkdir(exist_ok=True)
        if not os.access(base / "cgroup.procs", os.W_OK):
            return None
    except OSError:
        return None
    return base


def open_cgroups(home: Path) -> Path | None:
    """At an engine's start: the workers' cgroup (named in the environment its workers inherit), emptied of
    what an earlier engine of this instance left running; None where workers use a subreaper instead."""
    base = cgroup_base(home)
    if base is None:
        os.environ.pop(ENV, None)
        return None
    os.environ[ENV] = str(base)
    for child in base.glob("w*"):
        _kill_cgroup(child)
        _remove(child)
    _start_janitor(base)
    return base


def _start_janitor(base: Path) -> None:
    """The process that ends the workers' cgroups if this engine dies before it can (`wire.janitor`)."""
    global _janitor
    read, write = os.pipe()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "nerve_cli.wire.janitor", str(read), str(base)],
                                pass_fds=(read,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        os.close(write)  # no janitor: the next engine start ends what a killed one leaves, as workers do
        return
    finally:
        os.close(read)
    _janitor = (proc, write)


def _stop_janitor() -> None:
    global _janitor
    if _janitor is None:
        return
    proc, write = _janitor
    _janitor = None
    try:
        os.write(write, b"q")
    except OSError:
        pass
    os.close(write)
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()


def close_cgroups(base: Path | None) -> None:
    """At an engine's stop, after its workers: nothing of theirs is left, and no cgroup."""
    if base is None:
        return
    _stop_janitor()
    if os.environ.get(ENV) == str(base):
        del os.environ[ENV]
    for child in base.glob("w*"):
        _kill_cgroup(child)
        _remove(child, wait=1.0)
    _remove(base, wait=0.0)


def remove_worker(pid: int | None) -> None:
    """Remove a gone worker's emptied cgroup (once its killed members have died; never waits)."""
    base = os.environ.get(ENV)
    if pid and base:
        _remove(Path(base) / f"w{pid}")


def end_worker(pid: int | None) -> None:
    """A worker of this engine is gone: kill whatever its code left in its cgroup, and remove it (never waits:
    called on the engine's loop; what is refused here is removed by `remove_worker`, or at the engine's stop)."""
    base = os.environ.get(ENV)
    if not pid or not base:
        return
    group = Path(base) / f"w{pid}"
    if group.is_dir():
        _kill_cgroup(group)
        _remove(group)  # refused while its killed members are still dying: see remove_worker


# -- the worker's side ---------------------------------------------------------------------------------------

def enter() -> str | None:
    """First thing in a worker, before user code: move into its own cgroup, else become a child subreaper.
    Returns the way taken (None: neither is available here)."""
    global _mode, _parent
    _parent = os.getppid()
    base = os.environ.get(ENV)
    if base:
        group = Path(base) / f"w{os.getpid()}"
        try:
            group.mkdir(exist_ok=True)
            (group / "cgroup.procs").write_text(str(os.getpid()))
            _mode = "cgroup"
            return _mode
        except OSError:
            _remove(group)
    if sys.platform.startswith("linux"):
        import ctypes  # ~2 ms, paid only where no cgroup holds the worker

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0:
            _mode = "subreaper"
    return _mode


def kernel_gone() -> None:
    """The worker read EOF from the kernel with no Shutdown first: the kernel died (or is dying)."""
    global _kernel_gone
    _kernel_gone = True


def end_descendants() -> int:
    """As a worker exits: SIGKILL every process its code started that still runs; how many were found."""
    if _mode == "cgroup":
        base = os.environ.get(ENV)
        if not base:
            return 0
        found = _kill_members(Path(base) / f"w{os.getpid()}")
        _leave(Path(base), kernel_gone=_kernel_gone or os.getppid() != _parent)
        return found
    if _mode == "subreaper":
        return _kill_tree()
    return 0


def _kill_members(group: Path) -> int:
    """Kill every process of our own cgroup but us."""
    me = os.getpid()
    return _kill_until_none(lambda: [p for p in _members(group) if p != me])


def _leave(base: Path, kernel_gone: bool) -> None:
    """Out of our emptied cgroup (into the engine's own), and remove it: the engine cannot once it is gone;
    the last worker of a gone engine removes the engine's folder too."""
    try:
        (base.parent / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        return
    _remove(base / f"w{os.getpid()}")
    if kernel_gone:
        # a dying kernel closes our pipe before it exits: once we have another parent it can no longer make a
        # worker's cgroup here, and the folder is removed (refused while another worker's cgroup is in it:
        # that worker removes it)
        deadline = time.monotonic() + REPARENT_WAIT
        while os.getppid() == _parent and time.monotonic() < deadline:
            time.sleep(0.01)
        _remove(base)


def _kill_tree() -> int:
    """Kill our descendants (a subreaper's tree holds the orphans too)."""
    import psutil  # ~10 ms, paid only by a subreaper worker as it exits

    def living() -> list[int]:
        try:
            return [p.pid for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE]
        except psutil.Error:
            return []

    return _kill_until_none(living)


def _kill_until_none(find: Callable[[], list[int]]) -> int:
    """SIGKILL what `find` lists until it lists nothing (one may fork meanwhile) or END_WAIT passes, reaping
    those that were our children; how many were killed."""
    seen: set[int] = set()
    deadline = time.monotonic() + END_WAIT
    while time.monotonic() < deadline:
        found = find()
        if not found:
            break
        seen.update(found)
        for pid in found:
            _kill(pid)
        _reap()
        time.sleep(0.01)
    _reap()
    return len(seen)


# -- cgroup files --------------------------------------------------------------------------------------------

def _own_cgroup() -> str | None:
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                return line[3:].strip()
    except OSError:
        pass
    return None


def _cgroup2_mount() -> Path | None:
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split(" - ", 1)
        if len(fields) == 2 and fields[1].split(" ", 1)[0] == "cgroup2":
            return Path(fields[0].split()[4])
    return None


def _members(group: Path) -> list[int]:
    try:
        return [int(p) for p in (group / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _kill_cgroup(group: Path) -> None:
    try:
        (group / "cgroup.kill").write_text("1")  # every member at once, forks in flight included
    except OSError:  # a kernel before 5.14: one by one
        for pid in _members(group):
            _kill(pid)


def _remove(group: Path, wait: float = 0.0) -> None:
    """rmdir a cgroup once its killed members are gone (they leave it as they die); give up after `wait`."""
    deadline = time.monotonic() + wait
    while True:
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() >= deadline:
                return  # left for the engine's stop, or the next engine's start
            time.sleep(0.01)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _reap() -> None:
    """Collect our own children that died (an adopted orphan included), so none stays a zombie."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
