"""The engine's janitor: a tiny process that ends its workers' cgroups when the engine dies, however it dies.

A worker ends what its code started when it exits, and the engine ends a gone
worker's cgroup; but when the kernel and a worker are both killed with SIGKILL,
neither can, and what the worker's code started ran on until the next engine
start. So next to the workers' cgroups the engine starts this process
(`containment.open_cgroups`), holding the write end of a pipe whose read end
is all the janitor waits on. A kernel that stops cleanly writes `q` (it has
ended its cgroups itself): the janitor exits. A kernel that dies closes the
pipe by dying: the janitor kills every worker's cgroup (`cgroup.kill`, which
stopped processes, daemons and new sessions cannot escape), removes them and
the engine's folder, and exits. It ignores the terminal's signals (its own
session) and SIGTERM, so a group kill of the engine's session does not take
it before it has done its work; only SIGKILL does, and then the next engine
start ends what is left, as before.

    python -m nerve_cli.wire.janitor FD BASE
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

REMOVE_WAIT = 5.0  # seconds for the killed members to die before their cgroups are removed


def serve(fd: int, base: Path) -> int:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_IGN)
    while True:
        try:
            said = os.read(fd, 1)
        except InterruptedError:
            continue
        except OSError:
            said = b""
        break
    if said == b"q":
        return 0  # a clean stop: the engine ended its workers' cgroups itself
    groups = sorted(base.glob("w*"))
    for group in groups:
        try:
            (group / "cgroup.kill").write_text("1")
        except OSError:
            pass
    deadline = time.monotonic() + REMOVE_WAIT
    for group in [*groups, base]:
        while True:
            try:
                group.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:  # busy while its killed members are dying
                if time.monotonic() > deadline:
                    break
                time.sleep(0.02)
    return 0


if __name__ == "__main__":
    sys.exit(serve(int(sys.argv[1]), Path(sys.argv[2])))
