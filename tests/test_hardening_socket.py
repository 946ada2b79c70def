"""Socket abuse: a thousand idle clients, connections that never speak, requests built to hurt."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from pathlib import Path

import pytest
from enginekit import RunningEngine, completes, read_logs, wait_for, write_instance
from loadclock import IdleClock

from nerve_cli.kernel.control import server as control
from nerve_cli.ops.client import request

TICK = "senses:\n  tick: {}\nreflexes:\n  - {sense: tick, interval: 100ms}\n"
RETURNS_1 = "def compute(db, peers):\n    return 1\n"


def _connect(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(str(path))
    return sock


def _ask(sock: socket.socket, body: bytes) -> dict:
    sock.sendall(body)
    data = bytearray()
    while not data.endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return json.loads(data)


def test_control_socket_connection_cap_keeps_a_thousand_idle_clients_from_stalling_the_engine(home: Path) -> None:
    import resource

    write_instance(home, TICK, {"tick": RETURNS_1})
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with RunningEngine(home, nofile=512) as engine:  # a kernel with few fds, like a default ulimit
        engine.wait_ready()
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
        clients: list[socket.socket] = []
        try:
            clock = IdleClock(20)
            while len(clients) < 1000 and not clock.expired():
                try:
                    clients.append(_connect(home / "data" / "nerve.sock"))
                except OSError:
                    time.sleep(0.01)  # the listen backlog is full until the engine accepts
            before = len(completes(home, "tick"))
            wait_for(lambda: len(completes(home, "tick")) >= before + 5, 15, what="scheduling under the siege")
        finally:
            for sock in clients:
                sock.close()
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        assert len(clients) > control.MAX_CONNECTIONS * 2
        status = wait_for(lambda: _status_or_none(engine), 15, what="the socket to answer again")
        assert status["senses"]["tick"]["errors"] == 0
        before = len(completes(home, "tick"))
        wait_for(lambda: len(completes(home, "tick")) >= before + 5, 15, what="scheduling after the siege")
        code, output = engine.stop()
    assert code == 0, output[-2000:]
    assert "Too many open files" not in output and "Traceback" not in output, output[-2000:]  # no accept-error loop
    busy = read_logs(home, "system", "control_busy")
    assert len(busy) == 1 and busy[0]["payload"]["limit"] == control.MAX_CONNECTIONS, busy
    assert output.count("connections open, refusing more") == 1


def _status_or_none(engine: RunningEngine) -> dict | None:
    try:
        return engine.status()
    except Exception:
        return None


async def _serve(tmp_path: Path, events: list) -> control.ControlServer:
    async def handler(req: dict) -> dict:
        return {"ok": True, "echo": req}

    server = control.ControlServer(tmp_path / "s.sock", handler, lambda event, detail: events.append((event, detail)))
    await server.start()
    return server


def test_control_socket_idle_timeout_closes_a_connection_that_never_asks(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(control, "IDLE_TIMEOUT", 0.3)

    async def scenario() -> tuple[bytes, float, int]:
        server = await _serve(tmp_path, [])
        reader, writer = await asyncio.open_unix_connection(str(tmp_path / "s.sock"))
        started = time.monotonic()
        data = await asyncio.wait_for(reader.read(), 5)  # EOF: the server closed it
        took = time.monotonic() - started
        writer.close()
        await asyncio.sleep(0.05)
        left = server.connections
        await server.close()
        return data, took, left

    data, took, left = asyncio.run(scenario())
    assert data == b"" and 0.25 <= took < 3 and left == 0


def test_control_socket_connection_cap_answers_busy_and_logs_once_per_siege(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(control, "MAX_CONNECTIONS", 4)
    events: list = []

    async def scenario() -> list:
        server = await _serve(tmp_path, events)
        held = [await asyncio.open_unix_connection(str(tmp_path / "s.sock")) for _ in range(4)]
        await asyncio.sleep(0.05)
        answers = []
        for _ in range(3):
            reader, writer = await asyncio.open_unix_connection(str(tmp_path / "s.sock"))
            answers.append(json.loads(await asyncio.wait_for(reader.readline(), 5)))
            writer.close()
        for _, writer in held:
            writer.close()
        await asyncio.sleep(0.1)
        held = [await asyncio.open_unix_connection(str(tmp_path / "s.sock")) for _ in range(5)]  # a second siege
        await asyncio.sleep(0.1)
        for _, writer in held:
            writer.close()
        await server.close()
        return answers

    answers = asyncio.run(scenario())
    assert all(a["ok"] is False and "busy" in a["error"] for a in answers), answers
    assert [e for e, _ in events] == ["control_busy", "control_busy"]


def test_socket_input_bounds_a_request_nested_5000_deep_gets_an_answer(home: Path) -> None:
    write_instance(home, TICK, {"tick": RETURNS_1})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        for depth in (5000, 500):
            payload = "[" * depth + "]" * depth
            with _connect(home / "data" / "nerve.sock") as sock:
                answer = _ask(sock, f'{{"op": "emit", "channel": "x", "payload": {payload}}}\n'.encode())
            assert answer["ok"] is False and "nested deeper than 32 levels" in answer["error"], answer
        assert request(home, "ping")["pid"] == engine.proc.pid
        code, output = engine.stop()
    assert code == 0 and "Traceback" not in output, output
    assert read_logs(home, "signal", "emit") == []


def test_socket_input_bounds_channel_names_and_compute_timeouts(home: Path) -> None:
    write_instance(home, "senses:\n  slow: {}\nreflexes:\n  - {sense: slow, interval: 1h}\n",
                   {"slow": "import time\n\ndef compute(db, peers):\n    time.sleep(1.5)\n    return 1\n"})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        with _connect(home / "data" / "nerve.sock") as sock:
            huge = _ask(sock, json.dumps({"op": "emit", "channel": "c" * 900_000}).encode() + b"\n")
        assert huge["ok"] is False and "at most 200 characters, got 900,000" in huge["error"], huge
        with _connect(home / "data" / "nerve.sock") as sock:
            control_chars = _ask(sock, json.dumps({"op": "emit", "channel": "a\nb"}).encode() + b"\n")
        assert control_chars["ok"] is False and "control characters" in control_chars["error"]
        for bad in (-1, 0, "soon", True, 1e9, None):
            with _connect(home / "data" / "nerve.sock") as sock:
                answer = _ask(sock, json.dumps({"op": "compute", "sense": "slow", "timeout": bad}).encode() + b"\n")
            if bad is None:
                assert answer["ok"] is True and answer["outcome"] == "signal", answer  # absent: wait for it
            else:
                assert answer["ok"] is False and "timeout must be a number of seconds" in answer["error"], answer
        code, output = engine.stop()
    assert code == 0, output
    assert read_logs(home, "signal", "emit") == []
    # the one asked for, and the interval's first run when its slot came before the request; no refused one
    asked = [r for r in completes(home, "slow") if r["payload"]["reason"] != "interval"]
    assert len(asked) == 1 and len(completes(home, "slow")) <= 2, completes(home, "slow")


def test_socket_input_bounds_config_refuses_the_channel_names_emit_refuses(home: Path) -> None:
    from typer.testing import CliRunner

    from nerve_cli.cli.app import app

    write_instance(home, "senses:\n  a: {}\nreflexes:\n  - {sense: a, on: [fine, '" + "c" * 201 + "']}\n",
                   {"a": RETURNS_1})
    result = CliRunner().invoke(app, ["config", "check"])
    assert result.exit_code == 1 and "reflexes[0].on[1]: a channel name is at most 200 characters" in result.output


def _soft_open_files(pid: int) -> int:
    with open(f"/proc/{pid}/limits") as limits:
        row = next(line for line in limits if line.startswith("Max open files"))
    return int(row.split()[3])


def test_an_engine_started_under_a_low_open_file_limit_raises_it_for_itself_and_its_workers(home: Path) -> None:
    """A group keeps every sense's database open, and each compute thread an epoll: 1,024 files (many shells'
    default) are too few for a group of a few hundred senses. The engine raises its soft limit to the hard one
    (kernel.supervision.fds) before any worker starts, and the workers inherit it."""
    import resource

    from nerve_cli.kernel.supervision.fds import CEILING

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    wanted = CEILING if hard == resource.RLIM_INFINITY else min(hard, CEILING)
    if wanted <= 256:
        pytest.fail(f"this machine's hard open-file limit ({hard}) leaves nothing to raise: the test cannot run")
    write_instance(home, TICK, {"tick": RETURNS_1})
    with RunningEngine(home, nofile=256) as engine:
        engine.wait_ready()
        children = open(f"/proc/{engine.proc.pid}/task/{engine.proc.pid}/children").read().split()
        assert children, "the engine has no worker process"
        assert _soft_open_files(engine.proc.pid) == wanted
        assert all(_soft_open_files(int(pid)) == wanted for pid in children)
        code, output = engine.stop()
    assert code == 0, output[-2000:]
