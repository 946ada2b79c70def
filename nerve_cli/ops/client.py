"""Talk to a running engine over its control socket (`data/nerve.sock`).

One JSON object per line each way: `{"op": "status"}` → `{"ok": true, ...}` or
`{"ok": false, "error": "...", "error_type": "WorkflowError"}` (raised here as that
NerveError, so a command fails the same way with or without an engine).
Synchronous on purpose: the CLI is.
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path
from typing import Any

from nerve_cli.errors import ConfigError, EngineNotRunning, MigrationError, NerveError, SenseError, WorkflowError
from nerve_cli.home import Layout
from nerve_cli.wire.control import COMPUTE_WAIT_MAX, MAX_REQUEST, dumps, loads

MAX_RESPONSE = 64 * 1024 * 1024
ERRORS = {cls.__name__: cls for cls in (NerveError, ConfigError, SenseError, MigrationError, WorkflowError)}
COMPUTE_SOCKET_TIMEOUT = COMPUTE_WAIT_MAX + 10.0  # the engine answers first (wire/control.py)


def engine_running(home: Path) -> bool:
    """True when an engine answers on this instance's control socket, False when none runs.

    An engine that holds the instance lock but does not answer (it resets the
    connection, or is out of file descriptors) is neither: that NerveError is
    raised, so no command acts beside it as if it were not there.
    """
    try:
        request(home, "ping", timeout=10.0)
        return True
    except EngineNotRunning:
        return False
    except NerveError:
        if lock_holder(home) is None:
            return False  # a socket left behind: nobody runs
        raise


def lock_holder(home: Path) -> str | None:
    """Who holds this instance's lock (`pid N, nerve run`), or None when nobody does."""
    path = Layout(Path(home)).lock
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
    finally:
        os.close(fd)
    return None


def compute(home: Path, sense: str, bind: dict[str, Any] | None = None) -> dict[str, Any]:
    """One compute of `sense` now (with `bind`'s parameter values), through the running engine: its answer
    (outcome, payload or error)."""
    return request(home, "compute", sense=sense, bind=bind, timeout=COMPUTE_SOCKET_TIMEOUT)


def read(home: Path, sense: str, bind: dict[str, Any] | None = None) -> dict[str, Any]:
    """Bring a lazy sense up to date through the running engine: {computes, events, error}."""
    return request(home, "read", sense=sense, bind=bind, timeout=COMPUTE_SOCKET_TIMEOUT)


def request(home: Path, op: str, *, timeout: float = 30.0, **args: Any) -> dict[str, Any]:
    """Send one request and return the engine's answer; NerveError when it says no."""
    path = Layout(Path(home)).socket
    line = dumps({"op": op, **args})
    if len(line) > MAX_REQUEST:
        raise NerveError(f"the `{op}` request is {len(line):,} bytes, more than the engine takes "
                         f"({MAX_REQUEST:,}); nothing was sent")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        try:
            sock.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise EngineNotRunning(
                f"no engine is running for {home} (nothing answers on {path}); start one with `nerve run`"
            ) from exc
        except OSError as exc:
            raise NerveError(f"cannot connect to the engine's socket {path}: {exc.strerror or exc}") from None
        sock.sendall(line)
        data = bytearray()
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
            if len(data) > MAX_RESPONSE:
                raise NerveError("the engine's answer was too large")
    except socket.timeout as exc:
        raise NerveError(f"the engine did not answer `{op}` within {timeout:.0f}s") from exc
    except OSError as exc:  # reset, or the socket is unusable: the engine died mid-request or is out of fds
        raise NerveError(f"the connection to the engine broke during `{op}` ({exc.strerror or exc}): it may have "
                         "stopped, or run out of file descriptors; see its output or `nerve logs --type error`, "
                         "then try again") from None
    finally:
        sock.close()
    if not data:
        raise NerveError(f"the engine closed the connection without answering `{op}`")
    try:
        answer = loads(bytes(data))
    except (ValueError, RecursionError):
        raise NerveError(f"the engine's answer to `{op}` was cut off or not JSON; try again") from None
    if not isinstance(answer, dict):  # no engine of ours answers so: another program holds data/nerve.sock
        raise NerveError(f"the answer to `{op}` on {path} is not the engine's (JSON {type(answer).__name__}, not an "
                         "object): is another program listening there? Stop it, or restart the engine")
    if not answer.get("ok"):
        kind = ERRORS.get(str(answer.get("error_type")), NerveError)
        raise kind(answer.get("error", f"the engine refused `{op}`"))
    return answer
